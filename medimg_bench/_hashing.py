"""Content hashes of files, computed once: SHA-256 of every byte, cached by file identity.

The dataset fingerprint and the identity of model weight folders hash the content of every file
they depend on. Reading a 10 GB model or 100,000 images on every run would cost minutes, so each
digest is kept in a small SQLite table (``$MEDIMG_BENCH_CACHE/file_hashes.sqlite``) keyed by the
file's absolute path and what ``stat`` says of it: size, ``mtime_ns``, ``ctime_ns`` and inode.
A second run costs one ``stat`` per file and one indexed lookup per 500 files. Any change of the
file — rewritten in place, replaced by another file (``mv``, ``cp -p``, an unpacked archive, even
with the same size and modification time: the inode and ``ctime`` change), touched — makes it a
miss and it is hashed again.

A file modified less than two seconds before it is hashed is not cached ("racily clean", as
git says): on file systems with coarse timestamps a second write in the same tick could keep
every field of the key. An unusable cache file (read-only folder, corrupt database) is a warning,
never an error: the digests are then computed every time.

A core module (layer 0): no heavy imports.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import inspect
import json
import logging
import os
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["file_sha256", "hash_files", "path_key", "tree_files", "tree_sha256", "content_digest",
           "content_digests", "FileHashCache", "default_hash_cache_path", "plain_value", "describe_call",
           "callable_identity", "stable_repr", "MISSING"]

log = logging.getLogger(__name__)

MISSING = "missing"  # the digest recorded for a file that does not exist
_RACY_NS = 2_000_000_000
_CHUNK = 500
_SCHEMA = """
CREATE TABLE IF NOT EXISTS file_hashes (
    path TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    inode INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    hashed REAL NOT NULL
)
"""


def default_hash_cache_path() -> Path:
    """``$MEDIMG_BENCH_CACHE/file_hashes.sqlite``, else ``~/.cache/medimg_bench/file_hashes.sqlite``."""
    root = os.environ.get("MEDIMG_BENCH_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "medimg_bench"
    return base / "file_hashes.sqlite"


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 (hex) of every byte of ``path``, read now (no cache)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    return (int(st.st_size), int(st.st_mtime_ns), int(st.st_ctime_ns), int(st.st_ino))


class FileHashCache:
    """The SQLite table of digests (see the module docstring). ``hits``/``misses`` count lookups."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path) if path is not None else default_hash_cache_path()
        self.busy_timeout_s = float(busy_timeout_s)
        self.hits = 0
        self.misses = 0
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._broken = False
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection | None:
        if self._broken:
            return None
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), timeout=self.busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            log.warning("file-hash cache %s is unusable (%s); file contents are hashed on every run",
                        self.path, exc)
            self._broken = True
            return None
        self._conn, self._pid = conn, os.getpid()
        return conn

    def lookup(self, stats: Mapping[str, tuple[int, int, int, int]]) -> dict[str, str]:
        """Digests of the paths whose stored size, mtime, ctime and inode equal ``stats[path]``."""
        out: dict[str, str] = {}
        with self._lock:
            conn = self._connect()
            if conn is None:
                return out
            paths = list(stats)
            try:
                for i in range(0, len(paths), _CHUNK):
                    chunk = paths[i:i + _CHUNK]
                    rows = conn.execute(
                        "SELECT path, size, mtime_ns, ctime_ns, inode, sha256 FROM file_hashes "
                        f"WHERE path IN ({','.join('?' * len(chunk))})", chunk).fetchall()
                    for p, size, mtime, ctime, ino, digest in rows:
                        if (size, mtime, ctime, ino) == stats[p]:
                            out[p] = digest
            except sqlite3.Error as exc:
                log.warning("file-hash cache %s: lookup failed (%s); hashing again", self.path, exc)
        self.hits += len(out)
        self.misses += len(stats) - len(out)
        return out

    def store(self, rows: Sequence[tuple[str, tuple[int, int, int, int], str]]) -> None:
        """Remember ``(path, stat key, digest)`` rows (one transaction)."""
        if not rows:
            return
        now = time.time()
        with self._lock:
            conn = self._connect()
            if conn is None:
                return
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT OR REPLACE INTO file_hashes VALUES (?,?,?,?,?,?,?)",
                                 [(p, *k, d, now) for p, k, d in rows])
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                log.warning("file-hash cache %s: could not store %d digests (%s)", self.path, len(rows), exc)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_conn=None, _pid=-1, _lock=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


_DEFAULT: dict[str, FileHashCache] = {}


def _default_cache() -> FileHashCache:
    path = str(default_hash_cache_path())
    if path not in _DEFAULT:
        _DEFAULT[path] = FileHashCache(path)
    return _DEFAULT[path]


def path_key(path: str | os.PathLike[str]) -> str:
    """The key :func:`hash_files` returns a path's digest under: an absolute path as given,
    a relative one made absolute."""
    p = os.fspath(path)
    return p if os.path.isabs(p) else os.path.abspath(p)


def hash_files(
    paths: Iterable[str | os.PathLike[str]], *, cache: FileHashCache | None | bool = True,
    workers: int | None = None, what: str = "",
) -> dict[str, str]:
    """``{absolute path: SHA-256 hex}`` of every file in ``paths`` (absolute paths are taken as
    given, relative ones made absolute; ``"missing"`` for a path that
    does not exist or is not a regular file). Digests come from ``cache`` (``True``: the default
    file under ``$MEDIMG_BENCH_CACHE``; ``False``/``None``: none) when the file is unchanged, else
    the file is read, in ``workers`` threads (hashlib and reads release the GIL)."""
    store = _default_cache() if cache is True else (cache or None)
    stats: dict[str, tuple[int, int, int, int]] = {}
    out: dict[str, str] = {}
    for p in paths:
        ap = path_key(p)
        if ap in out or ap in stats:
            continue
        try:
            st = os.stat(ap)
        except OSError:
            out[ap] = MISSING
            continue
        if not stat.S_ISREG(st.st_mode):
            out[ap] = MISSING
            continue
        stats[ap] = _stat_key(st)
    known = store.lookup(stats) if store is not None and stats else {}
    out.update(known)
    todo = [p for p in stats if p not in known]
    if not todo:
        return out
    total = sum(stats[p][0] for p in todo)
    if total > (1 << 30):
        log.info("hashing %d file(s) of %s (%.1f GB) once; later runs read the digests from %s",
                 len(todo), what or "the data", total / 1e9, store.path if store else "nowhere (no cache)")
    n_workers = workers or min(8, max(2, os.cpu_count() or 2))

    def one(p: str) -> tuple[str, str]:
        try:
            return p, file_sha256(p)
        except OSError as exc:  # unreadable: the loader will say so for its sample
            return p, f"unreadable: {type(exc).__name__}"

    if len(todo) == 1 or n_workers == 1:
        done = [one(p) for p in todo]
    else:
        with concurrent.futures.ThreadPoolExecutor(n_workers) as pool:
            done = list(pool.map(one, todo))
    now = time.time_ns()
    rows = []
    for p, digest in done:
        out[p] = digest
        if len(digest) == 64 and now - stats[p][1] >= _RACY_NS:  # not "racily clean"
            rows.append((p, stats[p], digest))
    if store is not None:
        store.store(rows)
    return out


def tree_files(root: str | os.PathLike[str]) -> list[Path]:
    """Every regular file under the folder ``root`` (recursively, hidden names skipped), sorted."""
    base = Path(root)
    return sorted(p for p in base.rglob("*") if p.is_file()
                  and not any(part.startswith(".") for part in p.relative_to(base).parts))


def tree_sha256(root: str | os.PathLike[str], *, cache: FileHashCache | None | bool = True,
                what: str = "") -> str:
    """SHA-256 over the relative names and content digests of every file under ``root`` (see
    :func:`tree_files`): the same folder copied elsewhere gives the same digest."""
    base = Path(root)
    files = tree_files(base)
    digests = hash_files(files, cache=cache, what=what or str(base))
    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.relative_to(base).as_posix()}\0{digests[path_key(p)]}\n".encode())
    return h.hexdigest()


def content_digest(path: str | os.PathLike[str], *, cache: FileHashCache | None | bool = True,
                   what: str = "") -> str:
    """What ``path`` holds, independent of where it lies: ``"sha256:<hex>"`` of a file (every
    byte, :func:`hash_files`' cache), ``"tree-sha256:<hex>"`` of a folder (:func:`tree_sha256`:
    the relative names and contents of its files), :data:`MISSING` when it is neither."""
    p = Path(path).expanduser()
    if p.is_dir():
        return "tree-sha256:" + tree_sha256(p, cache=cache, what=what or str(p))
    digest = hash_files([p], cache=cache, what=what or str(p))[path_key(p)]
    return f"sha256:{digest}" if len(digest) == 64 else digest


def content_digests(files: Mapping[str, str | os.PathLike[str] | None], *,
                    cache: FileHashCache | None | bool = True) -> dict[str, str]:
    """``{option: content_digest(path)}`` of the options set in ``files`` (``None`` left out):
    what a run's key holds for options that name a file or folder."""
    return {name: content_digest(path, cache=cache, what=f"option {name} ({path})")
            for name, path in files.items() if path is not None}


# -- options as plain, stable values ----------------------------------------------------------------

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def stable_repr(value: Any) -> str:
    """``repr`` without memory addresses (``<Foo object at 0x7f…>``), the same in every process."""
    return _ADDRESS.sub("", repr(value))


def plain_value(value: Any, *, depth: int = 0) -> Any:
    """A JSON-able, process-independent description of an option value: numbers, strings and
    containers as they are, paths as strings, arrays and tensors by dtype, shape and SHA-256,
    data frames by shape and columns, callables by qualified name, anything else by ``repr``
    without memory addresses."""
    if depth > 8:
        return stable_repr(value)[:200]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        return {str(k): plain_value(v, depth=depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [plain_value(v, depth=depth + 1) for v in items]
    kind = type(value).__name__
    if callable(getattr(value, "options", None)) and hasattr(value, "manifest"):  # a wrapped dataset
        return {"dataset": kind, "name": str(getattr(value, "name", "")), "options": value.options()}
    if kind == "DataFrame":
        return f"<DataFrame {value.shape[0]}x{value.shape[1]} {list(map(str, value.columns))[:20]}>"
    if hasattr(value, "dtype") and hasattr(value, "shape") and hasattr(value, "tobytes") or kind == "Tensor":
        return _array_description(value)
    if callable(value) and hasattr(value, "__qualname__"):
        return f"<{getattr(value, '__module__', '?')}.{value.__qualname__}>"
    return stable_repr(value)


def _array_description(value: Any) -> str:
    try:
        arr = value.detach().cpu().contiguous().numpy() if hasattr(value, "detach") else value
        import numpy as np

        arr = np.ascontiguousarray(arr)
        digest = hashlib.sha256(arr.tobytes()).hexdigest()[:16]
        return f"<array {arr.dtype} {tuple(arr.shape)} sha256:{digest}>"
    except Exception:  # an exotic array type: its repr
        return stable_repr(value)[:200]


_SIMPLE = (type(None), bool, int, float, str, os.PathLike)


def callable_identity(fn: Any, *, depth: int = 0) -> dict[str, Any] | None:
    """What a run's key holds of a callable option that scores (a GREEN ``generate``, a
    RaTEScore ``ner``, a RadGraph ``annotator``): its qualified name, the SHA-256 of its source
    (of its bytecode where the source cannot be read), the plain values its closure captures
    (others by type), and the ``identity`` it carries, else the ``identity`` or ``fingerprint()``
    of the object it is bound to (a model adapter's). A changed function body, captured setting
    or wrapped model changes it; the weights of a model captured without an identity do not (say
    so with ``fn.identity = {...}``). None for None."""
    if fn is None:
        return None
    if inspect.isfunction(fn) or inspect.isbuiltin(fn):
        func, owner = fn, None
    elif inspect.ismethod(fn):
        func, owner = fn.__func__, fn.__self__
    else:  # a callable object: its class's __call__
        func, owner = type(fn).__call__, fn
    out: dict[str, Any] = {"callable": f"{getattr(func, '__module__', None) or '?'}.{func.__qualname__}",
                           "source_sha256": _code_digest(func)}
    code = getattr(func, "__code__", None)
    if code is not None and func.__closure__ and depth < 3:
        out["closure"] = {name: _captured(cell, depth) for name, cell in zip(code.co_freevars, func.__closure__)}
    for holder, attr in ((fn, "identity"), (owner, "identity"), (owner, "fingerprint")):
        found = getattr(holder, attr, None) if holder is not None else None
        if found is not None:
            out["identity"] = plain_value(found() if callable(found) else found)
            break
    return out


def _code_digest(func: Any) -> str | None:
    try:
        return hashlib.sha256(inspect.getsource(func).encode("utf-8")).hexdigest()
    except (OSError, TypeError):  # defined at a prompt, or built in
        code = getattr(func, "__code__", None)
        if code is None:
            return None
        consts = stable_repr(code.co_consts)  # nested code objects print their address
        return "bytecode:" + hashlib.sha256(code.co_code + consts.encode()).hexdigest()


def _captured(cell: Any, depth: int) -> Any:
    try:
        value = cell.cell_contents
    except ValueError:  # an empty cell
        return None
    if isinstance(value, _SIMPLE) or isinstance(value, (list, tuple, dict)) and len(repr(value)) < 2000:
        return plain_value(value)
    if inspect.isfunction(value):
        return callable_identity(value, depth=depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # settings (max tokens, temperature)
        return plain_value(dataclasses.asdict(value))
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


def describe_call(fn: Callable[..., Any], args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None,
                  *, skip: Sequence[str] = ("self",)) -> dict[str, Any]:
    """The arguments a call of ``fn`` received, defaults filled in, as plain values (see
    :func:`plain_value`); ``**kwargs`` are flattened in. Names in ``skip`` are left out."""
    kwargs = dict(kwargs or {})
    try:
        sig = inspect.signature(fn)
        bound = sig.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        items = dict(bound.arguments)
        for name, param in sig.parameters.items():
            if param.kind is inspect.Parameter.VAR_KEYWORD and name in items:
                items.update(items.pop(name))
            elif param.kind is inspect.Parameter.VAR_POSITIONAL and name in items:
                items[name] = list(items[name])
    except (TypeError, ValueError):  # no signature (builtins) or a call it does not accept
        items = {**{f"arg{i}": a for i, a in enumerate(args)}, **kwargs}
    return {k: plain_value(v) for k, v in items.items() if k not in skip}


def canonical_json(obj: Any) -> str:
    """``obj`` as compact JSON with sorted keys (what digests of options are taken over)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
