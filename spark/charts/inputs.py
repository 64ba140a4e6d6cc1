"""What the chart builders take, besides plain numbers, and which of it can be drawn: values
that are None, NaN or infinite are left out, never drawn as zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from spark.units import finite


@dataclass(frozen=True)
class Ref:
    """A reference line across the plot (headroom, capacity); tone is a class: warn or bad."""

    label: str
    value: object
    tone: str = "warn"


@dataclass(frozen=True)
class Band:
    """One day of a forecast cone."""

    day: date
    low: object
    mid: object
    high: object


@dataclass(frozen=True)
class Bar:
    label: str
    value: object
    note: str = ""
    flagged: bool = False


@dataclass(frozen=True)
class Series:
    label: str
    values: Sequence[object]


@dataclass(frozen=True)
class Marker:
    """A vertical line at the start of a day, such as a change point."""

    day: date
    label: str


def drawable(values: Sequence[object]) -> list[float]:
    return [v for v in map(finite, values) if v is not None]


def drawable_refs(refs: Sequence[Ref]) -> list[tuple[Ref, float]]:
    return [(r, v) for r in refs if (v := finite(r.value)) is not None]
