"""What a benchmark prints: progress lines stamped with the run's time, rates, percentiles,
and the verdict of a figure against its goal."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

STARTED = time.monotonic()


def progress(text: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.1f}s] {text}", flush=True)


def fmt_rate(value: float) -> str:
    return f"{value:,.0f}"


def fmt_cpu(shares: Mapping[str, float]) -> str:
    return ", ".join(f"{name} {share:.0%}" for name, share in shares.items())


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (p in 0..100)."""
    data = sorted(values)
    if not data:
        return float("nan")
    k = (len(data) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (k - lo)


def dist(values: Sequence[float]) -> dict[str, float]:
    """p50, p90, p99, min, max and mean of some samples (not empty)."""
    return {
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "min": min(values),
        "max": max(values),
        "mean": statistics.fmean(values),
    }


@dataclass(frozen=True)
class Goal:
    """A figure's target: at least (">=") or at most ("<=") `value`; `shown` as printed."""

    kind: str
    value: float
    shown: str = ""

    def met(self, value: float) -> bool:
        return value >= self.value if self.kind == ">=" else value <= self.value

    def verdict(self, value: float) -> str:
        return "OK" if self.met(value) else "MISSED"
