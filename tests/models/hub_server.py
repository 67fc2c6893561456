"""A loopback stand-in for the part of the Hugging Face Hub HTTP API that ``huggingface_hub``
uses to download a model (a test utility; 127.0.0.1 only, stops by itself).

Routes (what ``snapshot_download`` / ``hf_hub_download`` call, read from huggingface_hub 2.4's
``hf_api.py`` and ``file_download.py``):

Dataset repositories (``add_commit(..., repo_type="dataset")``) answer the same routes under
``/api/datasets/…`` and ``/datasets/{repo}/resolve/…``; their keys in ``repos``, ``drop_after``
and ``corrupt`` are ``"datasets/{repo}"``.

* ``GET /api/models/{repo}`` and ``/api/models/{repo}/revision/{rev}``: model info (``sha`` is the
  commit the revision resolves to, ``siblings`` the files);
* ``GET /api/models/{repo}/tree/{rev}[/{path}]``: the file listing (``oid`` git blob SHA-1,
  ``lfs.oid`` SHA-256 for weight files);
* ``HEAD``/``GET /{repo}/resolve/{rev}/{file}``: the file with ``X-Repo-Commit``, ``ETag``
  (git SHA-1, or the SHA-256 for LFS files, which also get ``X-Linked-Etag`` / ``X-Linked-Size``)
  and ``Content-Length``; ``Range`` requests are honoured.

Errors carry the ``X-Error-Code`` header huggingface_hub maps to its exceptions
(``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``). Faults to test with:
``drop_after[(repo, file)] = n`` closes the connection after ``n`` bytes of the body (network
down mid-download); ``corrupt[(repo, file)] = data`` serves other bytes than the ones the
digests announce. Every request is appended to ``requests`` as ``(method, path)``; a client
marks the start of a phase with ``GET /_mark/<name>`` (logged as ``("MARK", name)``, see
:meth:`HubServer.phases`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")


def run_client(code: str, endpoint: str, tmp: Any, *, timeout: float = 300.0, **env: str) -> dict[str, Any]:
    """Run ``code`` in a fresh Python with ``HF_ENDPOINT`` pointing at the server and the caches
    under ``tmp`` (huggingface_hub reads the endpoint when it is imported). The code defines
    ``mark(name)`` calls and fills the dict ``out``; returns ``out`` (JSON)."""
    import os
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    prelude = textwrap.dedent(f"""
        import json, sys, urllib.request
        out = {{}}
        def mark(name):
            urllib.request.urlopen({endpoint!r} + "/_mark/" + name).read()
    """)
    script = Path(tmp) / "client.py"
    script.write_text(prelude + textwrap.dedent(code) + "\nprint('@@OUT@@' + json.dumps(out, default=str))\n")
    root = Path(__file__).resolve().parents[2]
    full_env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HUB_CACHE": str(Path(tmp) / "hf"),
                "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
                "MEDIMG_BENCH_CACHE": str(Path(tmp) / "mb"), "PYTHONPATH": str(root), **env}
    full_env.pop("HF_HUB_OFFLINE", None) if "HF_HUB_OFFLINE" not in env else None
    proc = subprocess.run([sys.executable, str(script)], env=full_env, capture_output=True, text=True,
                          timeout=timeout, cwd=str(root))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@OUT@@")]
    if proc.returncode != 0 or not lines:
        raise AssertionError(f"client failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return json.loads(lines[-1][len("@@OUT@@"):])


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # commit -> files
    refs: dict[str, str] = field(default_factory=dict)  # branch / tag -> commit


class HubServer:
    """``with HubServer() as hub:`` … ``hub.add_commit("org/m", files)`` … ``hub.endpoint``."""

    def __init__(self, *, lifetime_s: float = 300.0) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, str]] = []
        self.drop_after: dict[tuple[str, str], int] = {}
        self.corrupt: dict[tuple[str, str], bytes] = {}
        self.lifetime_s = lifetime_s
        self._server: ThreadingHTTPServer | None = None
        self._timer: threading.Timer | None = None
        self._n = 0

    # -- content ----------------------------------------------------------------------------------
    def add_commit(self, repo_id: str, files: dict[str, bytes], *, ref: str | None = "main",
                   commit: str | None = None, repo_type: str = "model") -> str:
        """Add a commit holding ``files`` (the whole tree) and point ``ref`` at it; returns its hash."""
        self._n += 1
        key = repo_id if repo_type == "model" else f"{repo_type}s/{repo_id}"
        sha = commit or hashlib.sha1(f"{key}:{self._n}".encode()).hexdigest()
        repo = self.repos.setdefault(key, Repo())
        repo.commits[sha] = dict(files)
        if ref:
            repo.refs[ref] = sha
        return sha

    def phases(self) -> dict[str, list[tuple[str, str]]]:
        """The request log split at the markers: ``{phase name: requests after its marker}``."""
        out: dict[str, list[tuple[str, str]]] = {"": []}
        current = ""
        for method, path in self.requests:
            if method == "MARK":
                current = path
                out[current] = []
            else:
                out[current].append((method, path))
        return out

    def _resolve(self, repo_id: str, rev: str) -> tuple[str, dict[str, bytes]] | str:
        repo = self.repos.get(repo_id)
        if repo is None:
            return "RepoNotFound"
        sha = repo.refs.get(rev, rev)
        if sha not in repo.commits:
            return "RevisionNotFound"
        return sha, repo.commits[sha]

    # -- lifecycle --------------------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        assert self._server is not None, "the server is not running"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> HubServer:
        hub = self

        class Handler(_Handler):
            server_ref = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self._timer = threading.Timer(self.lifetime_s, self.stop)  # bounded: stops by itself
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    server_ref: HubServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
              *, head: bool = False) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _error(self, code: str, status: int = 404, *, head: bool = False) -> None:
        body = json.dumps({"error": code}).encode()
        self._send(status, body, {"X-Error-Code": code, "Content-Type": "application/json"}, head=head)

    def do_HEAD(self) -> None:
        self._route(head=True)

    def do_GET(self) -> None:
        self._route(head=False)

    def _route(self, *, head: bool) -> None:
        hub = self.server_ref
        path = unquote(urlsplit(self.path).path)
        hub.requests.append((self.command, path))
        parts = path.strip("/").split("/")
        if parts[0] == "_mark":  # a test's phase marker in the request log: GET /_mark/<name>
            hub.requests[-1] = ("MARK", "/".join(parts[1:]))
            return self._send(200, b"ok", head=head)
        if parts[:2] in (["api", "models"], ["api", "datasets"]) and len(parts) >= 4:
            repo_id = "/".join(parts[2:4]) if parts[1] == "models" else "datasets/" + "/".join(parts[2:4])
            rest = parts[4:]
            if not rest or rest[0] == "revision":
                return self._info(repo_id, rest[1] if len(rest) > 1 else "main", head=head)
            if rest[0] == "tree" and len(rest) >= 2:
                return self._tree(repo_id, rest[1], "/".join(rest[2:]), head=head)
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._file("/".join(parts[:2]), parts[3], "/".join(parts[4:]), head=head)
        if len(parts) >= 6 and parts[0] == "datasets" and parts[3] == "resolve":
            return self._file("/".join(parts[:3]), parts[4], "/".join(parts[5:]), head=head)
        self._error("RepoNotFound", head=head)

    def _info(self, repo_id: str, rev: str, *, head: bool) -> None:
        got = self.server_ref._resolve(repo_id, rev)
        if isinstance(got, str):
            return self._error(got, head=head)
        sha, files = got
        body = json.dumps({"id": repo_id.removeprefix("datasets/"), "modelId": repo_id, "sha": sha, "private": False,
                           "siblings": [{"rfilename": f} for f in sorted(files)]}).encode()
        self._send(200, body, {"Content-Type": "application/json"}, head=head)

    def _tree(self, repo_id: str, rev: str, sub: str, *, head: bool) -> None:
        got = self.server_ref._resolve(repo_id, rev)
        if isinstance(got, str):
            return self._error(got, head=head)
        _, files = got
        entries = []
        for name, data in sorted(files.items()):
            if sub and not name.startswith(sub.rstrip("/") + "/"):
                continue
            e: dict[str, Any] = {"type": "file", "path": name, "size": len(data), "oid": git_blob_sha1(data)}
            if name.endswith(LFS_SUFFIXES):
                e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            entries.append(e)
        self._send(200, json.dumps(entries).encode(), {"Content-Type": "application/json"}, head=head)

    def _file(self, repo_id: str, rev: str, name: str, *, head: bool) -> None:
        hub = self.server_ref
        got = hub._resolve(repo_id, rev)
        if isinstance(got, str):
            return self._error(got, head=head)
        sha, files = got
        if name not in files:
            return self._error("EntryNotFound", head=head)
        data = files[name]
        lfs = name.endswith(LFS_SUFFIXES)
        etag = hashlib.sha256(data).hexdigest() if lfs else git_blob_sha1(data)
        served = hub.corrupt.get((repo_id, name), data)
        headers = {"X-Repo-Commit": sha, "ETag": f'"{etag}"', "Accept-Ranges": "bytes",
                   "Content-Type": "application/octet-stream"}
        if lfs:
            headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(data))})
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and not head:
            start = int(rng[6:].split("-")[0] or 0)
            headers["Content-Range"] = f"bytes {start}-{len(served) - 1}/{len(served)}"
        body = served[start:]
        headers["Content-Length"] = str(len(body))
        self.send_response(206 if start else 200)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if head:
            return
        cut = hub.drop_after.get((repo_id, name))
        if cut is not None:  # the network goes down mid-body
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(body)
