"""Where a server's CPU goes: py-spy samples of one block, summed by library and function.

py-spy's raw ("collapsed") output has one line per distinct stack: `frame;frame;... count`,
each frame `function (file:line)`. Under an event loop most samples show only the coroutine
that was resumed, not the whole request, so inclusive times mislead; the summary counts
self time (the innermost frame), grouped by the code it belongs to.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

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
