"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
commands on the browser's fd 3, replies on fd 4, NUL-terminated JSON), standard library only.

``open_page(path)`` loads a file from disk and returns what a reader sees: every table's cells,
every image's natural size and load state, console messages, uncaught exceptions, log entries
(failed loads, CSP refusals) and every request that was not a ``data:`` / ``file:`` URL; and
saves a full-page screenshot."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["find_browser", "Chromium", "PageReport", "SKIP_REASON"]

_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
SKIP_REASON = ("no Chromium found (install Debian's `chromium`, or set MEDIMG_BENCH_BROWSER to a Chromium/Chrome "
               "executable): the report page is not checked in a browser")

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
         "--remote-debugging-pipe")

# evaluated in the page once it has loaded: what is shown
_PROBE = """(() => {
  const tables = Array.from(document.querySelectorAll('table')).map(t =>
    Array.from(t.rows).map(r => Array.from(r.cells).map(c => c.innerText.trim())));
  const images = Array.from(document.images).map(i => ({alt: i.alt, complete: i.complete,
    width: i.naturalWidth, height: i.naturalHeight, src: i.src.slice(0, 22)}));
  const sections = Array.from(document.querySelectorAll('section[id]')).map(s => s.id);
  return {title: document.title, tables, images, sections, text: document.body.innerText,
          height: Math.ceil(document.documentElement.scrollHeight)};
})()"""


def find_browser() -> str | None:
    """A Chromium/Chrome executable: ``$MEDIMG_BENCH_BROWSER``, else the first on ``PATH``."""
    given = os.environ.get("MEDIMG_BENCH_BROWSER")
    if given:
        return given if Path(given).exists() else shutil.which(given)
    return next((p for p in map(shutil.which, _NAMES) if p), None)


class PageReport(dict):
    """What :meth:`Chromium.open_page` saw (``tables``, ``images``, ``sections``, ``text``,
    ``console``, ``exceptions``, ``log``, ``requests``, ``screenshot``)."""

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions, error log entries, network requests, images that
        did not decode."""
        out = [f"console {c['type']}: {c['text']}" for c in self["console"] if c["type"] in ("error", "assert")]
        out += [f"exception: {e}" for e in self["exceptions"]]
        out += [f"log {e['level']}: {e['text']}" for e in self["log"] if e["level"] == "error"]
        out += [f"request to {u}" for u in self["requests"]]
        out += [f"image {i['alt']!r} not decoded" for i in self["images"] if not (i["complete"] and i["width"] > 0)]
        return out


class Chromium:
    """One headless browser process (a context manager)."""

    def __init__(self, executable: str, user_data_dir: Path, *, timeout: float = 120.0) -> None:
        self.timeout = timeout
        cmd_r, self._cmd_w = os.pipe()  # we write commands, the browser reads fd 3
        self._res_r, res_w = os.pipe()  # the browser writes replies on fd 4

        def as_fd_3_and_4() -> None:  # in the child, before exec (and before close_fds)
            high_r, high_w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (cmd_r, res_w))
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        args = [executable, *FLAGS, f"--user-data-dir={user_data_dir}", "about:blank"]
        self.proc = subprocess.Popen(args, pass_fds=(3, 4), preexec_fn=as_fd_3_and_4,  # noqa: PLW1509
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(res_w)
        self._replies: dict[int, dict[str, Any]] = {}
        self._events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Condition()
        self._next = 0
        threading.Thread(target=self._read, daemon=True).start()

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except Exception:  # already gone
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._cmd_w)

    def _read(self) -> None:
        buf = b""
        with os.fdopen(self._res_r, "rb", buffering=0) as fh:
            while True:
                chunk = fh.read(1 << 16)
                if not chunk:
                    break
                buf += chunk
                while b"\0" in buf:
                    raw, buf = buf.split(b"\0", 1)
                    msg = json.loads(raw)
                    if "id" in msg:
                        with self._lock:
                            self._replies[msg["id"]] = msg
                            self._lock.notify_all()
                    else:
                        self._events.put(msg)

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None,
             timeout: float | None = None) -> dict[str, Any]:
        """One DevTools command; returns its ``result`` (an error reply raises)."""
        with self._lock:
            self._next += 1
            mid = self._next
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._lock:
            while mid not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise TimeoutError(f"no reply to {method} (browser exit code {self.proc.poll()})")
                self._lock.wait(min(left, 0.5))
            reply = self._replies.pop(mid)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def _drain(self, session: str, found: PageReport, *, until: str | None = None, timeout: float = 0.0) -> bool:
        """Sort events into ``found``; True once the event ``until`` arrived."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                ev = self._events.get(timeout=max(0.0, min(0.2, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    return False
                continue
            if ev.get("sessionId") not in (None, session):
                continue
            method, p = ev.get("method"), ev.get("params", {})
            if method == "Runtime.consoleAPICalled":
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
                found["console"].append({"type": p.get("type"), "text": text})
            elif method == "Runtime.exceptionThrown":
                found["exceptions"].append(p.get("exceptionDetails", {}).get("text"))
            elif method == "Log.entryAdded":
                found["log"].append({"level": p["entry"].get("level"), "text": p["entry"].get("text")})
            elif method == "Network.requestWillBeSent":
                url = p.get("request", {}).get("url", "")
                if not url.startswith(("data:", "file:", "about:")):
                    found["requests"].append(url)
            if until and method == until:
                return True

    def open_page(self, path: Path, screenshot: Path, *, width: int = 1280) -> PageReport:
        """Load ``path`` (``file://``), wait for its load event, probe it, screenshot it."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=session)
        found = PageReport(console=[], exceptions=[], log=[], requests=[])
        self.send("Page.navigate", {"url": Path(path).resolve().as_uri()}, session=session)
        if not self._drain(session, found, until="Page.loadEventFired", timeout=self.timeout):
            raise TimeoutError(f"{path}: the page did not finish loading in {self.timeout} s")
        self._drain(session, found, timeout=0.5)  # late console messages
        probe = self.send("Runtime.evaluate", {"expression": _PROBE, "returnByValue": True}, session=session)
        found.update(probe["result"]["value"])
        height = min(int(found["height"]), 16000)
        shot = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                    "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}},
                         session=session)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        found["screenshot"] = screenshot
        self._drain(session, found, timeout=0.2)
        self.send("Target.closeTarget", {"targetId": target})
        return found
