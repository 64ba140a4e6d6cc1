"""What a user sees of a page: Debian's headless Chromium, driven over the DevTools protocol.

`open_page` starts a Chromium of its own (fresh profile, no network), loads one file, and
returns what was seen: errors, charts, colours, and a full-page screenshot. The browser and
its profile are gone when it returns, whatever happened.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import zlib
from array import array
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache
from itertools import accumulate
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT = 30.0
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
)
_SEEN = {
    "svg_count": "document.querySelectorAll('svg.chart').length",
    "chart_names": "[...document.querySelectorAll('svg.chart')].map(s => s.dataset.chart)",
    "color_scheme_dark": "matchMedia('(prefers-color-scheme: dark)').matches",
    "background": "getComputedStyle(document.body).backgroundColor",
    "text": "document.body.innerText",
}


class BrowserError(RuntimeError):
    """Chromium did not start, answer or load the page in time, or refused a command."""


@dataclass
class PageView:
    console_errors: list[str]
    svg_count: int
    chart_names: list[str]
    color_scheme_dark: bool
    background: str
    screenshot: bytes
    text: str = ""
    values: dict[str, Any] = field(default_factory=dict)

    def is_blank(self) -> bool:
        return is_blank(self.screenshot)


def needs_chromium() -> None:
    """Skip on a laptop without Chromium; with CI=true a missing Chromium is a failure."""
    import pytest

    if CHROMIUM.exists():
        return
    message = f"{CHROMIUM} is missing (apt-get install chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def open_page(
    path: Path,
    *,
    dark: bool = False,
    width: int = 1280,
    height: int = 2000,
    evaluate: Mapping[str, str] | None = None,
) -> PageView:
    """Load `path` in a fresh headless Chromium and report what it shows. `evaluate` maps
    names to JavaScript expressions whose values come back in `PageView.values`."""
    if not CHROMIUM.exists():
        raise BrowserError(f"{CHROMIUM} is missing (apt-get install chromium)")
    deadline = time.monotonic() + TIMEOUT
    url = path.resolve().as_uri()
    with _chromium(deadline) as browser_url, _connect(browser_url, deadline) as ws:
        cdp = _Cdp(ws, deadline)
        session = cdp.open_tab(width, height, dark)
        cdp.load(session, url)
        seen = {name: cdp.evaluate(session, js) for name, js in _SEEN.items()}
        values = {name: cdp.evaluate(session, js) for name, js in (evaluate or {}).items()}
        screenshot = cdp.screenshot(session)
        errors = _errors(cdp.events, session, url)
    return PageView(
        console_errors=errors,
        svg_count=int(seen["svg_count"]),
        chart_names=[str(n) for n in seen["chart_names"]],
        color_scheme_dark=bool(seen["color_scheme_dark"]),
        background=str(seen["background"]),
        screenshot=screenshot,
        text=str(seen["text"]),
        values=values,
    )


# The browser process ---------------------------------------------------------------------------


@contextmanager
def _chromium(deadline: float) -> Iterator[str]:
    """A Chromium in its own process group and temporary profile; yields its DevTools URL."""
    root = Path(tempfile.mkdtemp(prefix="capacity-chromium-"))
    profile = root / "profile"
    log = (root / "chromium.log").open("wb")
    process = subprocess.Popen(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    try:
        port = _devtools_port(profile, process, root / "chromium.log", deadline)
        with httpx.Client(trust_env=False, timeout=_left(deadline, "answer")) as http:
            version = http.get(f"http://127.0.0.1:{port}/json/version").json()
        yield str(version["webSocketDebuggerUrl"])
    finally:
        _stop(process)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def _devtools_port(
    profile: Path, process: subprocess.Popen[bytes], log: Path, deadline: float
) -> int:
    active = profile / "DevToolsActivePort"
    while True:
        if active.exists():
            first = active.read_text().split("\n", 1)[0].strip()
            if first.isdigit():
                return int(first)
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise BrowserError(f"Chromium exited with {process.returncode} at start:\n{tail}")
        _left(deadline, "start")
        time.sleep(0.05)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Ends the browser and the helpers it started: its process group, which is its own."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with suppress(subprocess.TimeoutExpired):
        process.wait(5)
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(5)


def _left(deadline: float, what: str) -> float:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise BrowserError(f"Chromium did not {what} within {TIMEOUT:.0f} s")
    return remaining


# The DevTools protocol -------------------------------------------------------------------------


def _connect(url: str, deadline: float) -> ClientConnection:
    """The browser's DevTools WebSocket: local, so no proxy; screenshots are large."""
    return connect(
        url,
        proxy=None,
        compression=None,
        max_size=None,
        ping_interval=None,
        open_timeout=_left(deadline, "connect"),
    )


class _Cdp:
    """One WebSocket to the browser; page commands go to a flat session on one tab."""

    def __init__(self, ws: ClientConnection, deadline: float) -> None:
        self.ws = ws
        self.deadline = deadline
        self.events: list[dict[str, Any]] = []
        self._id = 0

    def call(
        self, method: str, params: Mapping[str, Any] | None = None, session: str = ""
    ) -> dict[str, Any]:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": dict(params or {})}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        while True:
            reply = self._receive(method)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                result: dict[str, Any] = reply.get("result", {})
                return result

    def wait_for(self, event: str, session: str) -> dict[str, Any]:
        seen = (e for e in self.events if e["method"] == event and e.get("sessionId") == session)
        if (found := next(seen, None)) is not None:
            return found
        while True:
            message = self._receive(event)
            if message.get("method") == event and message.get("sessionId") == session:
                return message

    def _receive(self, waiting_for: str) -> dict[str, Any]:
        try:
            raw = self.ws.recv(timeout=_left(self.deadline, f"answer {waiting_for}"))
        except TimeoutError:
            late = f"Chromium did not answer {waiting_for} within {TIMEOUT:.0f} s"
            raise BrowserError(late) from None
        message: dict[str, Any] = json.loads(raw)
        if "method" in message:
            self.events.append(message)
        return message

    def open_tab(self, width: int, height: int, dark: bool) -> str:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        session = str(attached["sessionId"])
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.call(f"{domain}.enable", session=session)
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.call("Emulation.setDeviceMetricsOverride", metrics, session)
        self.call("Emulation.setScrollbarsHidden", {"hidden": True}, session)
        scheme = [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]
        self.call("Emulation.setEmulatedMedia", {"features": scheme}, session)
        return session

    def load(self, session: str, url: str) -> None:
        navigated = self.call("Page.navigate", {"url": url}, session)
        if navigated.get("errorText"):
            raise BrowserError(f"could not open {url}: {navigated['errorText']}")
        self.wait_for("Page.loadEventFired", session)

    def evaluate(self, session: str, expression: str) -> Any:
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        result = self.call("Runtime.evaluate", params, session)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def screenshot(self, session: str) -> bytes:
        size = self.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        params = {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": clip,
            "optimizeForSpeed": True,
        }
        return base64.b64decode(self.call("Page.captureScreenshot", params, session)["data"])


def _errors(events: list[dict[str, Any]], session: str, url: str) -> list[str]:
    """Console errors, uncaught exceptions, error log entries, and any request but the page."""
    errors = []
    for event in (e for e in events if e.get("sessionId") == session):
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = params.get("args", [])
            words = (str(a.get("value", a.get("description"))) for a in args)
            errors.append("console: " + " ".join(words))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            description = details.get("exception", {}).get("description", "")
            errors.append(f"exception: {details.get('text')} {description}".strip())
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())
        elif method == "Network.requestWillBeSent" and params["request"]["url"] != url:
            errors.append(f"request: {params['request']['url']}")
        elif method == "Network.loadingFailed":
            errors.append(f"request failed: {params.get('errorText')}")
    return errors


# PNG, with the standard library ----------------------------------------------------------------


def is_blank(png: bytes, *, share: float = 0.995) -> bool:
    """Whether (nearly) every pixel of a PNG has the same colour: a page that drew nothing."""
    width, height, rows = _pixels(png)
    counts: Counter[int] = Counter()
    for row in rows:
        if row.count(row[0]) == len(row):
            counts[row[0]] += len(row)
        else:
            counts.update(row)
    return counts.most_common(1)[0][1] >= share * width * height if counts else True


_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # PNG colour type: channels (grey, RGB, grey+alpha, RGBA)


def _pixels(png: bytes) -> tuple[int, int, Iterator[array[int]]]:
    """Rows of pixels, each pixel one int of its channels (8-bit, non-interlaced PNGs)."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    chunks: dict[bytes, bytes] = {}
    at = 8
    data = bytearray()
    while at < len(png):
        length, kind = struct.unpack(">I4s", png[at : at + 8])
        body = png[at + 8 : at + 8 + length]
        at += 12 + length
        if kind == b"IDAT":
            data += body
        else:
            chunks.setdefault(kind, body)
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    if depth != 8 or colour not in _CHANNELS or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour {colour}, interlace {interlace}")
    return width, height, _rows(zlib.decompress(data), width, height, _CHANNELS[colour])


def _rows(raw: bytes, width: int, height: int, bpp: int) -> Iterator[array[int]]:
    stride = width * bpp
    previous = bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        line = _unfilter(raw[start], raw[start + 1 : start + 1 + stride], previous, bpp)
        previous = line
        yield _as_ints(line, bpp)


def _as_ints(line: bytes, bpp: int) -> array[int]:
    """One int per pixel, its channels side by side (C speed: no loop over pixels here)."""
    if bpp == 1:
        return array("B", line)
    if bpp == 4:
        return array("I", line)
    padded = bytearray(len(line) // bpp * 4)
    for c in range(bpp):
        padded[c::4] = line[c::bpp]
    return array("I", padded)


def _mask(v: int) -> int:
    return v & 0xFF


@cache
def _lanes(n: int) -> tuple[int, int]:
    return int.from_bytes(b"\x7f" * n, "big"), int.from_bytes(b"\x80" * n, "big")


def _add_bytes(a: bytes, b: bytes) -> bytes:
    """Bytewise a + b mod 256 as one big-int sum whose carries stop at each byte."""
    low, high = _lanes(len(a))
    x, y = int.from_bytes(a, "big"), int.from_bytes(b, "big")
    return (((x & low) + (y & low)) ^ ((x ^ y) & high)).to_bytes(len(a), "big")


def _unfilter(kind: int, line: bytes, up: bytes, bpp: int) -> bytes:
    """Undoes one row's PNG filter (None, Sub, Up, Average, Paeth)."""
    if kind == 0:
        return line
    if kind == 2:
        return _add_bytes(line, up)
    out = bytearray(line)
    if kind == 1:
        for c in range(bpp):
            out[c::bpp] = bytes(map(_mask, accumulate(line[c::bpp])))
        return bytes(out)
    for i in range(len(out)):
        left = out[i - bpp] if i >= bpp else 0
        if kind == 3:
            out[i] = (out[i] + (left + up[i]) // 2) & 0xFF
            continue
        corner = up[i - bpp] if i >= bpp else 0
        p = left + up[i] - corner
        pa, pb, pc = abs(p - left), abs(p - up[i]), abs(p - corner)
        guess = left if pa <= pb and pa <= pc else (up[i] if pb <= pc else corner)
        out[i] = (out[i] + guess) & 0xFF
    return bytes(out)
