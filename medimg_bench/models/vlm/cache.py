"""Response cache: every answer a generative model gives is stored in SQLite, so a re-run of a
finished evaluation makes no model call and a killed run resumes without losing what it received.

One row per response, keyed by the SHA-256 of (adapter fingerprint, rendered prompt, image
content hashes, generation settings). The database runs in WAL mode; each response is committed
as soon as it arrives (``kill -9`` loses nothing already received); several processes may share
one file (busy timeout plus retries on ``database is locked``). Errored responses and blank
answers (empty, whitespace or zero-width characters only: :func:`is_blank`) are not stored,
so a resumed run asks again. Non-deterministic requests (temperature > 0 without a seed) are not
served from the cache unless ``serve_nondeterministic=True``.

``medimg-bench cache stats|export|clear [--path FILE]`` inspects a cache file (:func:`cli_main`).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import random
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from medimg_bench._secrets import redact_secrets
from medimg_bench.models.vlm.requests import (
    GenerationRequest,
    GenerationResponse,
    default_cache_path,
    image_digest,
    is_blank,
    served_key,
)

__all__ = ["ResponseCache", "request_key", "cache_fingerprint", "cli_main"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    backend TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    sample_id TEXT,
    prompt TEXT,
    settings TEXT,
    response TEXT NOT NULL,
    created REAL NOT NULL
)
"""
_KEY_VERSION = 2  # 2: full SHA-256 of model files; served_by stored and compared
_CHUNK = 500  # keys per SELECT (SQLite's variable limit is 32766; small chunks stay fast)


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def request_key(fingerprint: dict[str, Any], request: GenerationRequest) -> str:
    """SHA-256 hex digest identifying ``request`` sent to the adapter with ``fingerprint``
    (``request.key_extra``, when set, is part of it; requests without one keep their keys)."""
    payload = {
        "v": _KEY_VERSION,
        "fp": fingerprint,
        "prompt": request.rendered_prompt(),
        "images": [image_digest(im) for im in request.images],
        "settings": request.settings.to_dict(),
    }
    if request.key_extra:
        payload["extra"] = request.key_extra
    if request.history:  # the earlier turns' images (their text is in the rendered prompt)
        payload["history_images"] = [[image_digest(im) for im in t.images] for t in request.history]
    return hashlib.sha256(_canonical(payload).encode()).hexdigest()


def cache_fingerprint(adapter: Any) -> dict[str, Any]:
    """The adapter part of a cache key: ``cache_identity()`` (identity without the server's own
    report, which is stored and compared instead), else ``fingerprint()``."""
    fn = getattr(adapter, "cache_identity", None)
    return dict(fn() if callable(fn) else adapter.fingerprint())


def _model_label(fp: dict[str, Any]) -> str:
    for k in ("model", "path", "name"):
        if fp.get(k):
            return str(fp[k])
    return str(fp.get("backend", "?"))


def _is_lock_error(exc: Exception) -> bool:
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


class ResponseCache:
    """SQLite store of generative responses (see the module docstring).

    Args:
        path: the database file (created with its folder when missing).
        serve_nondeterministic: also serve requests whose settings are not deterministic.
        busy_timeout_s: how long one SQLite call waits for another process's lock; on top of it,
            ``database is locked`` errors are retried with backoff for up to ``max_lock_retries``.

    ``hits`` / ``misses`` count requests served from the file / sent to the model by this object;
    ``stale`` the stored answers not served because the server now reports another identity.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        serve_nondeterministic: bool = False,
        busy_timeout_s: float = 30.0,
        max_lock_retries: int = 20,
    ) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self.serve_nondeterministic = bool(serve_nondeterministic)
        self.busy_timeout_s = float(busy_timeout_s)
        self.max_lock_retries = int(max_lock_retries)
        self.hits = 0
        self.misses = 0
        self.stale = 0
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1

    def __repr__(self) -> str:
        return f"ResponseCache(path={str(self.path)!r})"

    def __getstate__(self) -> dict[str, Any]:  # connections do not cross processes
        state = self.__dict__.copy()
        state["_conn"] = None
        state["_pid"] = -1
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    # -- connection -------------------------------------------------------------------------------
    def _retry(self, fn: Any, *args: Any) -> Any:
        delay = 0.01
        for attempt in range(self.max_lock_retries + 1):
            try:
                return fn(*args)
            except sqlite3.OperationalError as exc:
                if not _is_lock_error(exc) or attempt == self.max_lock_retries:
                    raise
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")  # pragma: no cover

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OSError(f"response cache {self.path}: cannot create its folder: {exc}") from exc

        def open_db() -> sqlite3.Connection:
            conn = sqlite3.connect(str(self.path), timeout=self.busy_timeout_s,
                                   isolation_level=None, check_same_thread=False)
            try:
                conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    log.warning("response cache %s: journal mode is %s, not WAL", self.path, mode)
                conn.execute("PRAGMA synchronous=NORMAL")  # durable across process kills in WAL
                conn.execute(_SCHEMA)
                conn.execute("CREATE INDEX IF NOT EXISTS responses_model ON responses(model)")
            except Exception:
                conn.close()
                raise
            return conn

        try:
            self._conn = self._retry(open_db)
        except sqlite3.DatabaseError as exc:
            raise sqlite3.DatabaseError(
                f"response cache {self.path}: cannot open it as an SQLite database ({exc}); "
                "delete the file or point cache_path elsewhere"
            ) from exc
        self._pid = os.getpid()
        return self._conn

    def close(self) -> None:
        """Close this process's connection (it reopens on the next use)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    # -- rows -------------------------------------------------------------------------------------
    def get_many(self, keys: Sequence[str]) -> dict[str, GenerationResponse]:
        """Stored responses for those of ``keys`` present (``cached=True`` set on each)."""
        found: dict[str, GenerationResponse] = {}
        uniq = list(dict.fromkeys(keys))
        with self._lock:
            conn = self._connect()
            for i in range(0, len(uniq), _CHUNK):
                chunk = uniq[i:i + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self._retry(lambda c=chunk, m=marks: conn.execute(
                    f"SELECT key, response FROM responses WHERE key IN ({m})", c).fetchall())
                for key, text in rows:
                    try:
                        resp = GenerationResponse.from_dict(json.loads(text))
                    except (ValueError, TypeError) as exc:  # a damaged row is a miss, not a crash
                        log.warning("response cache %s: unreadable row %s (%s)", self.path, key, exc)
                        continue
                    resp.cached = True
                    found[key] = resp
        return found

    def put(
        self, key: str, response: GenerationResponse, *, fingerprint: dict[str, Any],
        request: GenerationRequest | None = None,
    ) -> None:
        """Store ``response`` under ``key`` and commit at once (errored responses and blank
        answers — empty, whitespace or zero-width characters only — are ignored)."""
        if response.error is not None or (response.option_logprobs is None and is_blank(response.text)):
            return
        data = response.to_dict()
        data["cached"] = False
        fingerprint = redact_secrets(fingerprint)  # the key was made from it; the row shows it
        row = (
            key, _model_label(fingerprint), str(fingerprint.get("backend", "?")),
            _canonical(fingerprint), request.sample_id if request else None,
            response.prompt or (request.rendered_prompt() if request else None),
            _canonical(request.settings.to_dict()) if request else None,
            json.dumps(data, ensure_ascii=False), time.time(),
        )
        with self._lock:
            conn = self._connect()
            self._retry(lambda: conn.execute(
                "INSERT OR REPLACE INTO responses VALUES (?,?,?,?,?,?,?,?,?)", row))

    # -- the adapter path -------------------------------------------------------------------------
    def generate(self, adapter: Any, requests: Sequence[GenerationRequest]) -> list[GenerationResponse]:
        """Responses for ``requests``: stored ones from the file, the rest from ``adapter``
        (each committed as soon as it arrives). Same order as ``requests``. A deterministic
        request repeated within the call is sent once; its repeats count as hits.

        For a served adapter (``verifies_served``) a stored answer is served only when the
        ``served_by`` it was stored with is one the server reported live to this adapter; when
        nothing was received live yet, the adapter asks once (``probe_served``: a one-token
        request). Answers made by another server identity are asked again (counted in
        ``stale``); when the probe fails, the stored answers are not served: their requests fail,
        naming the reason."""
        requests = list(requests)
        fp = cache_fingerprint(adapter)
        keys = [request_key(fp, r) for r in requests]
        servable = [self.serve_nondeterministic or r.settings.deterministic for r in requests]
        found = self.get_many([k for k, s in zip(keys, servable) if s])
        out: list[GenerationResponse | None] = [None] * len(requests)
        hits = [i for i, (k, s) in enumerate(zip(keys, servable)) if s and k in found]
        hit_set = set(hits)
        todo = [i for i in range(len(requests)) if i not in hit_set]
        got = self._ask(adapter, requests, keys, servable, fp, todo)
        for i in todo:
            out[i] = got[i]
        if hits and getattr(adapter, "verifies_served", False):
            hits = self._verified(adapter, requests, keys, servable, fp, hits, found, out)
        for i in hits:  # a shallow copy each: a request repeated in the call gets its own object
            out[i] = dataclasses.replace(found[keys[i]], cached=True)
        self.hits += len(hits) + sum(1 for i in todo if out[i].cached)  # type: ignore[union-attr]
        return out  # type: ignore[return-value]

    def _ask(self, adapter: Any, requests: Sequence[GenerationRequest], keys: Sequence[str],
             servable: Sequence[bool], fp: dict[str, Any], idx: Sequence[int]) -> dict[int, GenerationResponse]:
        """Send ``requests[i]`` for ``i`` in ``idx`` (a deterministic request repeated among them
        once; its repeats are copies marked cached), storing each answer as it arrives."""
        first_of: dict[str, int] = {}
        send: list[int] = []
        copies: dict[int, list[int]] = {}
        for i in idx:
            if servable[i] and keys[i] in first_of:
                copies.setdefault(first_of[keys[i]], []).append(i)
                continue
            if servable[i]:
                first_of[keys[i]] = i
            send.append(i)
        self.misses += len(send)
        if not send:
            return {}

        def on_response(j: int, resp: GenerationResponse) -> None:
            i = send[j]
            try:
                self.put(keys[i], resp, fingerprint=fp, request=requests[i])
            except sqlite3.Error as exc:  # the answer is still returned; only its copy is lost
                log.warning("response cache %s: could not store the response for %s: %s",
                            self.path, requests[i].sample_id or f"request {i}", exc)

        got = adapter._generate_streaming([requests[i] for i in send], on_response)
        if len(got) != len(send):
            raise RuntimeError(f"{adapter!r} returned {len(got)} responses for {len(send)} requests")
        out: dict[int, GenerationResponse] = {}
        for i, resp in zip(send, got):
            out[i] = resp
            for c in copies.get(i, ()):
                dup = GenerationResponse.from_dict(resp.to_dict())
                dup.cached = resp.error is None
                out[c] = dup
        return out

    def _verified(self, adapter: Any, requests: Sequence[GenerationRequest], keys: Sequence[str],
                  servable: Sequence[bool], fp: dict[str, Any], hits: list[int],
                  found: dict[str, GenerationResponse], out: list[GenerationResponse | None]) -> list[int]:
        """The hits whose stored ``served_by`` the server reports now; the others are asked
        again (or fail, when the server's identity cannot be had) into ``out``."""
        if not adapter.served_identities():  # nothing received live yet: ask once
            problem = adapter.probe_served()
            if problem is not None:
                why = (f"the answer in the response cache {self.path} cannot be checked against the "
                       f"server, whose identity is unknown (probe failed: {problem}); cached answers "
                       "are not served unchecked (model.options.verify_server=false serves them)")
                for i in hits:
                    out[i] = GenerationResponse(prompt=found[keys[i]].prompt,
                                                error=f"sample {requests[i].sample_id or i}: {why}")
                return []
        seen = adapter.served_identities()
        stale = [i for i in hits if served_key(found[keys[i]].served_by) not in seen]
        if stale:
            log.warning("response cache %s: %d stored answer(s) were made by a server reporting "
                        "another identity (model, system_fingerprint or /v1/models entry); asking again",
                        self.path, len(stale))
            self.stale += len(stale)
            for i, resp in self._ask(adapter, requests, keys, servable, fp, stale).items():
                out[i] = resp
        stale_set = set(stale)
        return [i for i in hits if i not in stale_set]

    # -- inspection -------------------------------------------------------------------------------
    def size_bytes(self) -> int:
        """Bytes on disk of the database and its WAL/shared-memory files."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total

    def stats(self) -> dict[str, Any]:
        """``{"path", "entries", "size_bytes", "models": {model: count}}``."""
        with self._lock:
            conn = self._connect()
            n = self._retry(lambda: conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
            per = self._retry(lambda: conn.execute(
                "SELECT model, backend, COUNT(*) FROM responses GROUP BY model, backend "
                "ORDER BY COUNT(*) DESC").fetchall())
        return {"path": str(self.path), "entries": int(n), "size_bytes": self.size_bytes(),
                "models": {f"{m} ({b})": int(c) for m, b, c in per}}

    def rows(self, *, model: str | None = None) -> Iterator[dict[str, Any]]:
        """Every stored row as a dict (``response`` decoded), oldest first; optionally one model."""
        with self._lock:
            conn = self._connect()
            sql = ("SELECT key, model, backend, fingerprint, sample_id, prompt, settings, response, "
                   "created FROM responses")
            args: tuple[Any, ...] = ()
            if model is not None:
                sql += " WHERE model = ?"
                args = (model,)
            rows = self._retry(lambda: conn.execute(sql + " ORDER BY created", args).fetchall())
        for key, m, b, fp, sid, prompt, settings, resp, created in rows:
            yield {"key": key, "model": m, "backend": b, "fingerprint": redact_secrets(json.loads(fp)),
                   "sample_id": sid, "prompt": prompt,
                   "settings": json.loads(settings) if settings else None,
                   "response": json.loads(resp), "created": created}

    def export(self, out: TextIO, *, model: str | None = None) -> int:
        """Write the rows as JSON lines to ``out``; returns how many."""
        n = 0
        for row in self.rows(model=model):
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
        return n

    def clear(self, *, model: str | None = None) -> int:
        """Delete every row (or those of ``model``); returns how many were deleted."""
        with self._lock:
            conn = self._connect()
            if model is None:
                cur = self._retry(lambda: conn.execute("DELETE FROM responses"))
            else:
                cur = self._retry(lambda: conn.execute("DELETE FROM responses WHERE model = ?", (model,)))
            n = cur.rowcount
            self._retry(lambda: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
        return int(n)

    def __len__(self) -> int:
        return int(self.stats()["entries"])


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def cli_main(argv: list[str]) -> int:
    """``medimg-bench cache stats|export|clear``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="medimg-bench cache",
                                     description="Inspect or clear the response cache of generative models.")
    parser.add_argument("--path", default=None,
                        help=f"cache file (default {default_cache_path()})")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_stats = sub.add_parser("stats", help="entries, size on disk, entries per model")
    p_stats.add_argument("--json", action="store_true", help="print JSON")
    p_exp = sub.add_parser("export", help="write the rows as JSON lines")
    p_exp.add_argument("--out", default="-", help="output file ('-': standard output)")
    p_exp.add_argument("--model", default=None, help="only this model (as `stats` names it, "
                       "without the backend in brackets)")
    p_clr = sub.add_parser("clear", help="delete all rows, or those of one model")
    p_clr.add_argument("--model", default=None)
    for p in (p_stats, p_exp, p_clr):  # --path accepted after the subcommand too
        p.add_argument("--path", default=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    path = Path(args.path) if args.path else default_cache_path()
    if args.cmd != "clear" and not path.exists():
        print(f"no response cache at {path}", file=sys.stderr)
        return 1
    cache = ResponseCache(path)
    try:
        if args.cmd == "stats":
            st = cache.stats()
            if args.json:
                print(json.dumps(st, indent=2))
            else:
                print(f"{st['path']}: {st['entries']} entries, {_human(st['size_bytes'])}")
                for m, c in st["models"].items():
                    print(f"  {c:>8}  {m}")
        elif args.cmd == "export":
            if args.out == "-":
                n = cache.export(sys.stdout, model=args.model)
            else:
                with open(args.out, "w", encoding="utf-8") as fh:
                    n = cache.export(fh, model=args.model)
            print(f"exported {n} responses", file=sys.stderr)
        else:
            if not path.exists():
                print(f"no response cache at {path}; nothing to clear", file=sys.stderr)
                return 0
            n = cache.clear(model=args.model)
            what = f"of model {args.model!r} " if args.model else ""
            print(f"deleted {n} responses {what}from {path}")
    except sqlite3.DatabaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        cache.close()
    return 0
