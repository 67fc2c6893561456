"""Atomic writes and once-only materialisation of on-disk caches, safe across processes.

Every cache the package writes goes through one of these two so that a reader never meets a
partial file: the bytes go to a temporary name in the same folder (same file system) and
``os.replace`` puts them in place in one step; a writer killed half-way leaves only a
``.tmp-``-prefixed leftover that nothing takes for finished. ``locked_materialize`` adds a file
lock (the ``filelock`` package; ``fcntl``/``msvcrt`` underneath) so that when many processes
start together on an empty cache (a Hydra multirun, a SLURM array on a shared file system)
exactly one builds and the others wait, then read the finished folder.

No heavy imports: ``filelock`` is imported only when a lock is taken.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_write", "atomic_path", "locked_materialize", "is_temporary", "COMPLETE_MARKER"]

COMPLETE_MARKER = ".complete"


def _tmp_prefix(path: Path) -> str:
    return f".{path.name}.tmp-"


def is_temporary(path: str | os.PathLike[str]) -> bool:
    """True for a temporary name of :func:`atomic_path` / :func:`locked_materialize` (a leftover
    of a killed writer: never a finished file)."""
    name = Path(path).name
    return name.startswith(".") and ".tmp-" in name


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, fsync: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (same suffix) for a library that writes by name
    (``np.save``, ``safetensors.save_file``, ``DataFrame.to_csv``); on a clean exit the file is
    flushed to disk and renamed onto ``path`` atomically. On an exception the temporary file is
    removed and ``path`` keeps its old content (or stays absent)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=_tmp_prefix(target), suffix=target.suffix)
    try:  # mkstemp makes the file private (0600): give it the mode a plain open() would
        os.fchmod(fd, 0o666 & ~_umask())
    except (AttributeError, OSError):  # no fchmod (Windows)
        pass
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if fsync:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], *, mode: str = "wb", encoding: str | None = None,
                 fsync: bool = True) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing (``mode`` ``"wb"`` or ``"w"``); on a clean
    exit it is flushed, synced and renamed onto ``path`` in one step, so readers see the old file
    or the whole new one, never a part. On an exception ``path`` is left as it was."""
    if mode not in ("w", "wb", "wt"):
        raise ValueError(f"atomic_write: mode must be 'w', 'wt' or 'wb', got {mode!r}")
    with atomic_path(path, fsync=False) as tmp:
        kwargs = {"encoding": encoding or "utf-8"} if "b" not in mode else {}
        with open(tmp, mode, **kwargs) as f:
            yield f
            f.flush()
            if fsync:
                os.fsync(f.fileno())


def _default_complete(folder: Path) -> bool:
    return (folder / COMPLETE_MARKER).is_file()


def locked_materialize(
    directory: str | os.PathLike[str],
    builder: Callable[[Path], Any],
    *,
    is_complete: Callable[[Path], bool] | None = None,
    timeout: float | None = None,
) -> Path:
    """Build ``directory`` once across processes and return its path.

    ``builder(tmp)`` fills a fresh temporary folder beside ``directory``; the folder is renamed
    into place only after ``builder`` returns. Completeness is ``is_complete(directory)`` when
    given (e.g. a stamp the builder writes last), else a ``.complete`` marker written after the
    builder. A complete folder is returned at once, without a lock. Otherwise a lock file
    ``.<name>.lock`` beside it serialises builders: the first builds; the others wait and then
    find it complete. Leftovers of killed builders (``.<name>.tmp-*``) are removed under the
    lock, and an incomplete ``directory`` is replaced. ``timeout`` (seconds; ``None`` = wait
    forever) bounds the wait for the lock; running out raises ``TimeoutError`` naming the lock.
    """
    from filelock import FileLock, Timeout

    folder = Path(directory)
    complete = is_complete or _default_complete
    if complete(folder):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    lock_path = folder.parent / f".{folder.name}.lock"
    try:
        lock = FileLock(str(lock_path), timeout=-1 if timeout is None else timeout)
        lock.acquire()
    except Timeout as exc:
        raise TimeoutError(
            f"waited {timeout} s for the lock {str(lock_path)!r} while another process builds "
            f"{str(folder)!r}; remove the lock file only if no such process is running"
        ) from exc
    try:
        if complete(folder):  # another process finished while we waited
            return folder
        for stale in folder.parent.glob(f"{_tmp_prefix(folder)}*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=_tmp_prefix(folder)))
        try:
            builder(tmp)
            if is_complete is None:
                (tmp / COMPLETE_MARKER).write_text("ok\n")
            elif not is_complete(tmp):
                raise RuntimeError(
                    f"building {str(folder)!r}: the builder returned but its output is not "
                    "complete (is_complete() is false)"
                )
            if folder.exists() or folder.is_symlink():  # an older or unfinished build
                if folder.is_dir() and not folder.is_symlink():
                    shutil.rmtree(folder)
                else:
                    folder.unlink()
            os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        lock.release()
    return folder
