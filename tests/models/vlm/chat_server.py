"""A loopback OpenAI-compatible chat-completions server for tests and benchmarks (stdlib only).

    python tests/models/vlm/chat_server.py [--latency 0.05] [--require-key-env VAR]

prints ``PORT <n>`` once it listens on 127.0.0.1 (a free port). Answers are deterministic:
``echo: <user text> | images=<n>`` (plus a random suffix when temperature > 0 and no seed).
Faults are requested inside the user text, counted per distinct request body:

    [[429x2]]      HTTP 429 (with Retry-After: 0) for the first 2 attempts, then the answer
    [[500x1]]      HTTP 500 once;  [[500always]] HTTP 500 every time;  [[400]] HTTP 400
    [[401echo]]    HTTP 401 whose message echoes the request body (less its messages)
    [[slowx1=2.0]] the first attempt sleeps 2.0 s before answering (a client timeout)
    [[malformed]]  HTTP 200 with a body that is not JSON;  [[noshape]] JSON without choices
    [[empty]]      an empty answer;  [[dropx1]] close the connection without answering once
    [[null]]       content null;  [[blank]] content "   ";  [[zwsp]] zero-width spaces;  [[object]] content a JSON object
    [[number]]     content 42;  [[parts]] content as text parts;  [[imgparts]] non-text parts only
    [[big=N]]      an answer of N bytes (the body a little more), with a Content-Length header
    [[bigchunked=N]] the same without Content-Length (chunked transfer encoding)

What the server says about itself (``GET /v1/models``, the response's ``model`` and
``system_fingerprint``) is set by ``POST /admin`` with any of ``{"root", "served",
"response_model", "system_fingerprint", "models_status"}`` (``response_model`` null: echo the
request's model; ``models_status`` other than 200: the models list fails with it); ``"force":
"[[null]]"`` applies faults to every request.

``GET /stats`` returns ``{"posts", "in_flight", "max_in_flight", "unauthorised", "model_lists"}``;
``POST /reset`` zeroes them and restores the default identity.

``--replies FILE`` scripts the answers (a judge, say): a JSON list of rules ``{"contains": TEXT,
"replies": [R0, R1, ...]}``; the first rule whose TEXT occurs in the request's system + user text
answers ``R[n % len(R)]``, n counting earlier posts of the same body (so identical repeats can
disagree, as a served model sometimes does); no matching rule → the echo. ``--max-concurrency N``
processes at most N requests at a time (the rest wait their turn), as a served model with N
slots does.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_FAULT = re.compile(r"\[\[(\w+?)(?:x(\d+))?(?:=([\d.]+))?\]\]")


class State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.attempts: dict[str, int] = {}
        self.posts = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.unauthorised = 0
        self.model_lists = 0
        self.identity = dict(DEFAULT_IDENTITY)


DEFAULT_IDENTITY = {"root": "/models/loopback-a", "served": "loopback", "response_model": None,
                    "system_fingerprint": None, "models_status": 200, "force": ""}


def _content(faults: dict[str, str], answer: str) -> object:
    """The ``content`` field of the answer, as the faults ask."""
    if "empty" in faults:
        return ""
    if "null" in faults:
        return None
    if "blank" in faults:
        return "   "
    if "zwsp" in faults:
        return "\u200b \u200b"
    if "object" in faults:
        return {"text": answer}
    if "number" in faults:
        return 42
    if "parts" in faults:
        return [{"type": "text", "text": answer[:5]}, {"type": "text", "text": answer[5:]}]
    if "imgparts" in faults:
        return [{"type": "image_url", "image_url": {"url": "data:,"}}]
    for name in ("big", "bigchunked"):
        if name in faults:
            return "x" * int(float(faults[name] or 1000))
    return answer


def _scripted(rules: list[dict] | None, text: str, attempt: int) -> str | None:
    for rule in rules or []:
        if rule["contains"] in text:
            replies = rule["replies"]
            return replies[attempt % len(replies)]
    return None


def make_handler(state: State, latency: float, key: str | None, rules: list[dict] | None = None,
                 slots: threading.Semaphore | None = None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms ACK wait

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802
            if self.path.rstrip("/").endswith("/stats"):
                with state.lock:
                    body = {"posts": state.posts, "max_in_flight": state.max_in_flight,
                            "in_flight": state.in_flight, "unauthorised": state.unauthorised,
                            "model_lists": state.model_lists}
                self._send(200, json.dumps(body).encode())
            elif self.path.rstrip("/").endswith("/models"):
                with state.lock:
                    state.model_lists += 1
                    ident = dict(state.identity)
                if ident["models_status"] != 200:
                    self._send(int(ident["models_status"]), b'{"error": "no models list"}')
                    return
                entry = {"id": ident["served"], "object": "model", "created": int(time.time()),
                         "owned_by": "loopback", "root": ident["root"], "parent": None,
                         "max_model_len": 4096}
                self._send(200, json.dumps({"object": "list", "data": [entry]}).encode())
            else:
                self._send(404, b'{"error": "not found"}')

        def do_POST(self) -> None:  # noqa: N802
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n)
            if self.path.rstrip("/").endswith("/reset"):
                with state.lock:
                    state.attempts.clear()
                    state.posts = state.max_in_flight = state.unauthorised = state.model_lists = 0
                    state.identity = dict(DEFAULT_IDENTITY)
                self._send(200, b"{}")
                return
            if self.path.rstrip("/").endswith("/admin"):
                with state.lock:
                    state.identity.update(json.loads(raw or b"{}"))
                self._send(200, b"{}")
                return
            with state.lock:
                state.posts += 1
                state.in_flight += 1
                state.max_in_flight = max(state.max_in_flight, state.in_flight)
            try:
                if slots is not None:
                    with slots:
                        self._answer(raw)
                else:
                    self._answer(raw)
            finally:
                with state.lock:
                    state.in_flight -= 1

        def _answer(self, raw: bytes) -> None:
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, b'{"error": "not found"}')
                return
            if key is not None and self.headers.get("Authorization") != f"Bearer {key}":
                with state.lock:
                    state.unauthorised += 1
                self._send(401, b'{"error": {"message": "bad or missing API key"}}')
                return
            try:
                body = json.loads(raw)
                messages = body["messages"]
                user = messages[-1]["content"]
            except (ValueError, KeyError, IndexError, TypeError):
                self._send(400, b'{"error": {"message": "bad request body"}}')
                return
            texts, n_images = [], 0
            for part in user if isinstance(user, list) else [{"type": "text", "text": user}]:
                if part.get("type") == "text":
                    texts.append(part["text"])
                elif part.get("type") == "image_url":
                    url = part["image_url"]["url"]
                    head, _, data = url.partition(",")
                    if head != "data:image/png;base64" or not base64.b64decode(
                            data[:12]).startswith(b"\x89PNG"):  # the magic bytes suffice
                        self._send(400, b'{"error": {"message": "image is not a PNG data URL"}}')
                        return
                    n_images += 1
            text = "".join(texts)
            system = "".join(m["content"] for m in messages[:-1]
                             if m.get("role") == "system" and isinstance(m.get("content"), str))
            with state.lock:
                attempt = state.attempts.get(system + text, 0)
                state.attempts[system + text] = attempt + 1
                forced = str(state.identity.get("force") or "")  # faults for every request
            text_faults = text + forced
            for name, times, value in _FAULT.findall(text_faults):
                times_n = int(times) if times else None
                active = times_n is None or attempt < times_n
                if name == "429" and active:
                    self._send(429, b'{"error": {"message": "rate limited"}}', {"Retry-After": "0"})
                    return
                if name in ("500", "500always") and (active or name == "500always"):
                    self._send(500, b'{"error": {"message": "internal error"}}')
                    return
                if name == "401echo":  # a server that echoes the request's options in its 401
                    echoed = json.dumps({k: v for k, v in body.items() if k != "messages"})
                    self._send(401, json.dumps({"error": {"message": f"unauthorised request {echoed}"}}).encode())
                    return
                if name == "400":
                    self._send(400, b'{"error": {"message": "bad request"}}')
                    return
                if name == "slow" and active:
                    time.sleep(float(value or 5))
                if name == "drop" and active:
                    self.close_connection = True
                    self.connection.close()
                    return
                if name == "malformed":
                    self._send(200, b'{"choices": [{"message": {"content": "trunc')
                    return
                if name == "noshape":
                    self._send(200, b'{"object": "chat.completion", "choices": []}')
                    return
            if latency:
                time.sleep(latency)
            scripted = _scripted(rules, system + text, attempt)
            answer = scripted if scripted is not None else f"echo: {text} | images={n_images}"
            if float(body.get("temperature") or 0) > 0 and body.get("seed") is None:
                answer += f" | r={random.random():.6f}"
            faults = {name: value for name, _, value in _FAULT.findall(text_faults)}
            content = _content(faults, answer)
            with state.lock:
                ident = dict(state.identity)
            out = {"id": "cmpl-1", "object": "chat.completion",
                   "model": ident["response_model"] or body.get("model"),
                   "choices": [{"index": 0, "finish_reason": "stop",
                                "message": {"role": "assistant", "content": content}}],
                   "usage": {"prompt_tokens": len(text.split()) + n_images,
                             "completion_tokens": len(answer.split())}}
            if ident["system_fingerprint"] is not None:
                out["system_fingerprint"] = ident["system_fingerprint"]
            data = json.dumps(out).encode()
            if "bigchunked" in faults:  # no Content-Length: the client finds out while reading
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i in range(0, len(data), 1 << 16):
                    piece = data[i:i + (1 << 16)]
                    try:
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    except (BrokenPipeError, ConnectionResetError):
                        return
                self.wfile.write(b"0\r\n\r\n")
                return
            try:
                self._send(200, data)
            except (BrokenPipeError, ConnectionResetError):  # the client stopped reading
                pass

    return Handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds added to every answer")
    ap.add_argument("--require-key-env", default=None,
                    help="environment variable holding the key clients must send")
    ap.add_argument("--replies", default=None, help="JSON file of scripted reply rules")
    ap.add_argument("--max-concurrency", type=int, default=0, help="requests processed at a time (0: no limit)")
    args = ap.parse_args(argv)
    key = os.environ[args.require_key_env] if args.require_key_env else None
    rules = json.loads(open(args.replies, encoding="utf-8").read()) if args.replies else None
    slots = threading.Semaphore(args.max_concurrency) if args.max_concurrency > 0 else None
    ThreadingHTTPServer.request_queue_size = 1024
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(State(), args.latency, key, rules, slots))
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
