"""The console's lines in the run's ``cli.log``: stdout is copied to Hydra's log file handler(s)."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["console_to_log"]


class _Tee:
    """Writes through to ``stream`` and hands every complete line to ``handlers`` as an INFO record
    of logger ``medimg_bench.console`` (the handlers' own filters redact secrets)."""

    def __init__(self, stream: Any, handlers: list[logging.Handler]) -> None:
        self._stream, self._handlers, self._buf = stream, handlers, ""

    def write(self, text: str) -> int:
        n = self._stream.write(text)
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            if line.strip():
                record = logging.LogRecord("medimg_bench.console", logging.INFO, __file__, 0, line, None, None)
                for h in self._handlers:
                    h.handle(record)
        return n

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, flush, encoding… of the real stream
        return getattr(self._stream, name)


@contextlib.contextmanager
def console_to_log() -> Iterator[None]:
    """Copy what is printed on stdout (the summary table, the run directory line) into the file
    handlers of the root logger (Hydra's ``cli.log``) while the block runs."""
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
    if not handlers:
        yield
        return
    saved = sys.stdout
    sys.stdout = _Tee(saved, handlers)
    try:
        yield
    finally:
        sys.stdout = saved
