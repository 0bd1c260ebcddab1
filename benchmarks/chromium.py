"""Headless Chromium driven over the DevTools protocol on a pipe: load a page, ask it
for layout facts, take a full-page screenshot, time the render.

Used by the machine-map benchmark, the browser tests (tests/observe) and `make
screenshot`. The protocol runs over `--remote-debugging-pipe` (JSON messages ended by
NUL on file descriptors 3 and 4), so it needs no port, no websocket library and no
chromedriver: Debian's `chromium` package is enough. The pages themselves stay
script-free; expressions are evaluated by this driver, from outside.

    python -m benchmarks.chromium PAGE.html SHOT.png [--width 1400]
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The flags headless Chromium needs on this kind of machine: as root (no sandbox),
# with no GPU, and no background traffic to a network that is closed.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-pipe",
)
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")
TIMEOUT_S = 60.0


class ChromiumError(RuntimeError):
    """Chromium is missing, did not start, or answered a command with an error."""


def find_chromium() -> str | None:
    """The browser's path ($CHROMIUM, else the first of CANDIDATES on PATH), or None."""
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return explicit if shutil.which(explicit) else None
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass(frozen=True, slots=True)
class Timing:
    """One page load: wall time from navigate to the load event, and the page's own
    navigation timing (ms since navigation start), as Chromium measured them."""

    wall_ms: float
    dom_content_loaded_ms: float
    load_event_end_ms: float
    laid_out_ms: float  # when a forced layout of the whole page had finished


class Browser:
    """One headless Chromium and one page (tab) in it; use `launch()`."""

    def __init__(self, process: subprocess.Popen[bytes], to_browser: int, from_browser: int):
        self._process = process
        self._out = to_browser
        self._in = from_browser
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self._session = ""

    # -- protocol --------------------------------------------------------------

    def _send(self, method: str, params: dict[str, Any] | None, session: str) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._out, data) :]
        return self._next_id

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._in], [], [], max(left, 0))
            if not ready:
                raise ChromiumError(f"Chromium did not answer within {TIMEOUT_S:.0f}s")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise ChromiumError(f"Chromium closed its pipe (exit {self._process.poll()})")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def command(
        self, method: str, params: dict[str, Any] | None = None, *, browser: bool = False
    ) -> dict[str, Any]:
        """Send one command (to the page, or to the browser) and return its result."""
        sent = self._send(method, params, "" if browser else self._session)
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            message = self._receive(deadline)
            if message.get("id") == sent:
                if "error" in message:
                    raise ChromiumError(f"{method}: {message['error'].get('message')}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self._events.append(message)

    def wait_event(self, method: str) -> dict[str, Any]:
        """The next event named `method` of this page (earlier ones included)."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            for index, event in enumerate(self._events):
                if event["method"] == method and event.get("sessionId") == self._session:
                    del self._events[index]
                    return event
            message = self._receive(deadline)
            if "method" in message:
                self._events.append(message)

    # -- page ------------------------------------------------------------------

    def _open_page(self) -> None:
        target = self.command("Target.createTarget", {"url": "about:blank"}, browser=True)
        attached = self.command(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}, browser=True
        )
        self._session = attached["sessionId"]
        self.command("Page.enable")
        self.command("Runtime.enable")

    def load(self, path: Path, width: int, height: int = 900) -> Timing:
        """Open a file at a viewport `width` CSS pixels wide; returns when it has loaded."""
        self.command(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        self._events.clear()
        began = time.monotonic()
        navigated = self.command("Page.navigate", {"url": path.resolve().as_uri()})
        if navigated.get("errorText"):
            raise ChromiumError(f"{path}: {navigated['errorText']}")
        self.wait_event("Page.loadEventFired")
        wall = (time.monotonic() - began) * 1000
        nav = self.evaluate(
            "(() => { const n = performance.getEntriesByType('navigation')[0];"
            " document.body.getBoundingClientRect();"
            " return [n.domContentLoadedEventEnd, n.loadEventEnd, performance.now()]; })()"
        )
        return Timing(round(wall, 1), *(round(float(v), 1) for v in nav))

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression evaluated in the page."""
        reply = self.command(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in reply:
            details = reply["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise ChromiumError(f"evaluation failed: {text}")
        return reply["result"].get("value")

    def screenshot(self, out: Path) -> tuple[int, int]:
        """The whole page (not just the viewport) as PNG; returns its size in CSS pixels."""
        # The body's bottom, not scrollHeight: that is never less than the viewport.
        width, height = self.evaluate(
            "[document.documentElement.scrollWidth,"
            " Math.ceil(document.body.getBoundingClientRect().bottom"
            " + parseFloat(getComputedStyle(document.body).marginBottom))]"
        )
        shot = self.command(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
            },
        )
        out.write_bytes(base64.b64decode(shot["data"]))
        return int(width), int(height)

    def emulate_media(self, media: str) -> None:
        """Lay the page out for "print" or "screen" ("" = the default, screen)."""
        self.command("Emulation.setEmulatedMedia", {"media": media})

    def print_pdf(self, out: Path) -> None:
        """Print the page as Chromium would to paper, with the page's own @page size
        and background colours (what "print colour" is for)."""
        pdf = self.command("Page.printToPDF", {"printBackground": True, "preferCSSPageSize": True})
        out.write_bytes(base64.b64decode(pdf["data"]))

    def close(self) -> None:
        try:
            self._send("Browser.close", None, "")
            self._process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self._process.kill()
            self._process.wait()
        finally:
            os.close(self._out)
            os.close(self._in)


@contextmanager
def launch(executable: str | None = None) -> Iterator[Browser]:
    """A fresh headless Chromium (own profile directory, removed afterwards)."""
    path = executable or find_chromium()
    if path is None:
        raise ChromiumError("no Chromium on PATH (Debian: apt-get install chromium)")
    profile = tempfile.mkdtemp(prefix="na-chromium-")
    # Chromium reads commands on fd 3 and writes answers on fd 4. The shell puts
    # our pipe ends there as it execs Chromium (bash: dash takes no fd above 9 in a
    # redirection). Remapping fds in a preexec_fn instead can
    # clobber subprocess's own error pipe when it happens to be fd 3 or 4 (seen as
    # Chromium dying at once in a long test session with many fds open).
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    child_in = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10)
    child_out = fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)
    os.close(to_r)
    os.close(from_w)
    script = f'exec "$0" "$@" 3<&{child_in} 4>&{child_out}'
    try:
        process = subprocess.Popen(
            ["/bin/bash", "-c", script, path, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(child_in, child_out),
        )
    except OSError as err:
        for fd in (child_in, child_out, to_w, from_r):
            os.close(fd)
        shutil.rmtree(profile, ignore_errors=True)
        raise ChromiumError(f"cannot start {path}: {err}") from err
    os.close(child_in)
    os.close(child_out)
    browser = Browser(process, to_w, from_r)
    try:
        browser._open_page()
        yield browser
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chromium", description=__doc__)
    parser.add_argument("page", type=Path, help="the HTML file to render")
    parser.add_argument("out", type=Path, help="where to write the PNG screenshot")
    parser.add_argument("--width", type=int, default=1400, help="viewport width (1400)")
    args = parser.parse_args(argv)
    try:
        with launch() as browser:
            timing = browser.load(args.page, args.width)
            width, height = browser.screenshot(args.out)
    except ChromiumError as err:
        print(f"chromium: {err}", file=sys.stderr)
        return 1
    print(f"wrote {args.out} ({width}x{height}, loaded in {timing.wall_ms:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
