"""Console lines for long jobs: one per phase on stderr (beside Spark's progress bar), the
summary on stdout."""

from __future__ import annotations

import sys
import time

_started = time.monotonic()


def phase(job: str, text: str) -> None:
    print(f"[{job} {time.monotonic() - _started:7.1f}s] {text}", file=sys.stderr, flush=True)


def size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"
