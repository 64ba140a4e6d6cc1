"""Where a server's CPU goes: py-spy samples of one block, summed by library and function.

py-spy's raw ("collapsed") output has one line per distinct stack: `frame;frame;... count`,
each frame `function (file:line)`. Under an event loop most samples show only the coroutine
that was resumed, not the whole request, so inclusive times mislead; the summary counts
self time (the innermost frame), grouped by the code it belongs to.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness.output import progress

# First match wins: (substring of the frame's file path, area).
AREAS: list[tuple[str, str]] = [
    ("mediator/ops/", "mediator ops (access log middleware, metrics)"),
    ("prometheus_client/", "prometheus_client"),
    ("logging/", "logging"),
    ("mediator/mqs/", "mediator mqs (routes, headers, body, responses)"),
    ("mediator/engine/", "mediator engine"),
    ("mediator/", "mediator (other)"),
    ("anchor_app.py", "anchor app"),
    ("redis/", "redis-py client"),
    ("hiredis", "redis-py client"),
    ("starlette/", "starlette"),
    ("uvicorn/", "uvicorn + httptools"),
    ("httptools", "uvicorn + httptools"),
    ("asyncio/runners.py", "event loop (uvloop C code: I/O, syscalls)"),
    ("asyncio/", "asyncio (Python part)"),
    ("json/", "json"),
    ("orjson", "json"),
    ("uuid.py", "uuid"),
    ("secrets.py", "secrets/base64 (message ids)"),
    ("base64.py", "secrets/base64 (message ids)"),
    ("ipaddress.py", "ipaddress"),
    ("typing.py", "typing (runtime Protocol isinstance)"),
]

_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")


def find_py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    if beside.exists():
        return str(beside)
    return shutil.which("py-spy")


def area_of(frame: str) -> str:
    for needle, area in AREAS:
        if needle in frame:
            return area
    return "other"


def short(frame: str) -> str:
    """`func (path/to/file.py:12)` -> `func (file.py:12)`."""
    m = _FRAME.match(frame)
    if not m:
        return frame or "(unknown)"
    return f"{m['func']} ({m['file'].rsplit('/', 1)[-1]}:{m['line']})"


def summarise(path: Path, top: int = 12) -> dict[str, Any]:
    areas: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        leaf = stack.split(";")[-1]
        total += n
        areas[area_of(leaf)] += n
        functions[short(leaf)] += n
    if not total:
        return {"samples": 0, "areas": {}, "functions": {}}
    return {
        "samples": total,
        "areas": {k: round(v / total, 4) for k, v in areas.most_common()},
        "functions": {k: round(v / total, 4) for k, v in functions.most_common(top)},
    }


def format_summary(title: str, summary: dict[str, Any], areas: int = 10, functions: int = 8) -> str:
    """Shares of the sampled self time; with `server_cpu_us_per_message`, also microseconds of
    server CPU per message spent in each area."""
    per_msg = summary.get("server_cpu_us_per_message")
    head = f"profile {title}: {summary['samples']} samples"
    if per_msg:
        head += f", {per_msg:,.0f} us of server CPU per message"
    lines = [head + "; self time by area:"]

    def row(name: str, share: float) -> str:
        us = f"{share * per_msg:6.0f} us/msg  " if per_msg else ""
        return f"    {share:6.1%}  {us}{name}"

    for name, share in list(summary["areas"].items())[:areas]:
        lines.append(row(name, share))
    lines.append("  hottest functions (self time):")
    for name, share in list(summary["functions"].items())[:functions]:
        lines.append(row(name, share))
    return "\n".join(lines)


class Recording:
    """py-spy sampling one process into a raw ("collapsed") file."""

    def __init__(self, spy: asyncio.subprocess.Process, path: Path) -> None:
        self.spy = spy
        self.path = path

    async def finish(self, limit_s: float | None = None) -> dict[str, Any]:
        """Wait for py-spy (at most `limit_s`): the summary and its file, or an error."""
        try:
            _, err = await asyncio.wait_for(self.spy.communicate(), limit_s)
        except TimeoutError:
            self.spy.kill()
            await self.spy.wait()
            err = b"py-spy did not finish"
        if self.spy.returncode != 0 or not self.path.exists():
            return {"error": err.decode(errors="replace")[-300:]}
        summary = summarise(self.path)
        summary["file"] = str(self.path)
        return summary


async def record(pid: int, seconds: int, path: Path) -> Recording | None:
    """Start py-spy on `pid` for `seconds` (200 samples a second, without stopping it),
    writing to `path`; None, said on the console, when py-spy is not installed."""
    py_spy = find_py_spy()
    if py_spy is None:
        progress("profile: py-spy not found (pip install py-spy); skipped")
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    spy = await asyncio.create_subprocess_exec(
        *[py_spy, "record", "--pid", str(pid), "--rate", "200", "--nonblocking"],
        *["--duration", str(seconds), "--format", "raw", "--output", str(path)],
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    return Recording(spy, path)


async def profile_process(name: str, pid: int, seconds: float, output_dir: Path) -> dict[str, Any]:
    """py-spy on a process for `seconds` (outside any measured window), summed by library
    and printed."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    recording = await record(pid, round(seconds), output_dir / f"profile-{stamp}-{name}.folded")
    if recording is None:
        return {}
    progress(f"profile: py-spy on {name} for {seconds:g} s")
    summary = await recording.finish()
    if "error" in summary:
        progress(f"profile {name} failed: {summary['error']}")
        return summary
    print(format_summary(name, summary), flush=True)
    return summary
