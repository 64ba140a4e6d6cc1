"""Numbers for humans: how the report prints bytes, counts, shares, ratios, durations and dates,
and where an axis puts its round numbers. A value that is None, NaN, infinite or a bool is not
a number here: it prints as a dash.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Literal

Unit = Literal["bytes", "count", "share", "ratio"]
Fmt = Callable[[object], str]

DASH = "—"
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def finite(value: object) -> float | None:
    """A number that can be drawn or printed, else None (bools, NaN and infinities are not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number + 0.0 if math.isfinite(number) else None


def trim(text: str) -> str:
    """A decimal without its trailing zeros: 2.50 is 2.5, 3.0 is 3."""
    return text.rstrip("0").rstrip(".") if "." in text else text


# Units ----------------------------------------------------------------------------------------


def fmt_count(value: object) -> str:
    """12,345; 812.5; 0.25."""
    v = finite(value)
    if v is None:
        return DASH
    if v == int(v) or abs(v) >= 100:
        return f"{v:,.0f}"
    return trim(f"{v:,.2f}" if abs(v) < 10 else f"{v:,.1f}")


def fmt_bytes(value: object) -> str:
    """1.2 GiB, in powers of 1024 as Redis's `used_memory_human`."""
    v = finite(value)
    if v is None:
        return DASH
    power = _byte_power(v)
    if power == 0:
        return f"{v:,.0f} B"
    return f"{trim(f'{v / 1024**power:.1f}')} {_BYTE_UNITS[power]}"


def _byte_power(v: float) -> int:
    power = 0
    while abs(v) >= 1024 and power < len(_BYTE_UNITS) - 1:
        v /= 1024
        power += 1
    return power


def fmt_share(value: object) -> str:
    """A fraction as a percentage: 61 %, 2.5 %, 0.01 %."""
    v = finite(value)
    if v is None:
        return DASH
    pct = v * 100 + 0.0
    if pct == 0 or abs(pct) >= 10:
        return f"{pct:.0f} %"
    if abs(pct) >= 1:
        return f"{trim(f'{pct:.1f}')} %"
    if abs(pct) < 1e-6:
        return "< 0.000001 %"
    digits = 1 - math.floor(math.log10(abs(pct)))
    return f"{trim(f'{pct:.{digits}f}')} %"


def fmt_ratio(value: object) -> str:
    v = finite(value)
    if v is None:
        return DASH
    return fmt_count(v) if abs(v) >= 100 else f"{v:.2f}"


def fmt_duration(value: object) -> str:
    """Seconds in the two largest units: 3 d 4 h, 5 h 12 min, 40 s."""
    v = finite(value)
    if v is None:
        return DASH
    if abs(v) < 10 and v != int(v):
        return f"{trim(f'{v:.1f}')} s"
    rest = round(abs(v))
    parts: list[tuple[int, str]] = []
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min"), (1, "s")):
        amount, rest = divmod(rest, size)
        if amount or parts:
            parts.append((amount, unit))
        if len(parts) == 2:
            break
    shown = [f"{amount:,} {unit}" for amount, unit in parts if amount] or ["0 s"]
    return ("-" if v < 0 and rest != round(abs(v)) else "") + " ".join(shown)


def fmt_compact(value: object) -> str:
    """A count in three digits or so, for ticks and cells: 9,500; 89.5k; 3M; 1.2bn."""
    v = finite(value)
    if v is None or abs(v) < 10_000:
        return fmt_count(value if v is None or abs(v) < 1 else round(v))
    for size, suffix in ((1e9, "bn"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= size:
            scaled = v / size
            return f"{trim(f'{scaled:.0f}' if abs(scaled) >= 100 else f'{scaled:.1f}')}{suffix}"
    return fmt_count(v)


def _fmt_tick_ratio(value: object) -> str:
    v = finite(value)
    return DASH if v is None else trim(f"{v:.2f}")


def fmt_day(day: date) -> str:
    return f"{_MONTHS[day.month - 1]} {day.day}"


FORMATS: dict[Unit, Fmt] = {
    "bytes": fmt_bytes,
    "count": fmt_count,
    "share": fmt_share,
    "ratio": fmt_ratio,
}
# Axis ticks, reference lines and cells: shorter forms of the same units.
TICKS: dict[Unit, Fmt] = {
    "bytes": fmt_bytes,
    "count": fmt_compact,
    "share": fmt_share,
    "ratio": _fmt_tick_ratio,
}


# The page's other values ----------------------------------------------------------------------


def fmt_when(value: object) -> str:
    """An ISO 8601 UTC time as 2026-11-24 03:00 UTC."""
    if not isinstance(value, str):
        return DASH
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    moment = moment.astimezone(UTC) if moment.tzinfo else moment
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def fmt_days(value: object) -> str:
    """A number of days as a duration: 12 d 7 h."""
    v = finite(value)
    return DASH if v is None else fmt_duration(v * 86400)


def _per(fmt: Fmt, unit: str) -> Fmt:
    return lambda v: DASH if finite(v) is None else f"{fmt(v)} {unit}"


fmt_rate = _per(fmt_count, "/s")
fmt_per_day = _per(fmt_count, "/day")
fmt_bytes_per_day = _per(fmt_bytes, "/day")


def fmt_r2(value: object) -> str:
    v = finite(value)
    return DASH if v is None else f"{v:.2f}"


def fmt_yes(value: object) -> str:
    return ("yes" if value else "no") if isinstance(value, bool) else DASH


def plural(value: object, word: str) -> str:
    """1 day, 3 days."""
    return f"{fmt_count(value)} {word}{'' if finite(value) == 1 else 's'}"


# Ticks ----------------------------------------------------------------------------------------


def _nice(raw: float) -> float:
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5):
        if raw <= m * magnitude * (1 + 1e-9):
            return m * magnitude
    return 10 * magnitude


def round_ticks(high: float, unit: Unit, count: int = 5) -> list[float]:
    """Ticks from 0 to at least high: bytes step by powers of two (256 MiB, 1 GiB), counts
    by whole numbers, the rest by 1, 2, 2.5 or 5 times a power of ten."""
    high = high if high > 0 else 1.0
    if unit == "bytes":
        step = 2.0 ** max(0, math.ceil(math.log2(high / count)))
    else:
        step = _nice(high / count)
    if unit == "count":
        step = max(1.0, float(round(step)))
    n = max(1, math.ceil(high / step - 1e-9))
    return [i * step for i in range(n + 1)]


def decades(low: float, high: float) -> list[float]:
    """Powers of ten around low..high, for a log axis; at most eight of them."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    last = max(last, first + 1)
    every = max(1, math.ceil((last - first) / 7))
    return [10.0**e for e in range(first, last + 1, every)]


def day_ticks(first: date, last: date) -> list[date]:
    """About seven days from first to last, a day, a week or a month or so apart."""
    span = (last - first).days
    step = next((s for s in (1, 2, 7, 14, 28, 56, 91, 182) if span / s <= 7), 364)
    return [first + timedelta(days=d) for d in range(0, span + 1, step)]
