"""Inline SVG charts for the capacity page: stdlib only, one builder per kind of chart.

Each builder returns one `<svg class="chart" data-chart=NAME role="img">` with a `<title>`.
Colours are CSS classes (`STYLE`) over custom properties the page sets (`--bg --fg --muted
--grid --frame --neutral --s1`…`--s5 --heat --hot --cold --warn --bad`), so one stylesheet
serves light, dark and print. A value that is None, NaN or infinite is skipped, never drawn;
a chart with nothing to draw is a frame that says "no data".
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from itertools import pairwise
from typing import Literal

Unit = Literal["bytes", "count", "share", "ratio"]
Fmt = Callable[[object], str]
Scale = Callable[[float], float]
Shade = Callable[[float], tuple[str, float]]

DASH = "—"
WIDTH, HEIGHT = 640, 280
FONT = 12
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")

STYLE = """
svg.chart{max-width:100%;height:auto;display:block;font:12px system-ui,sans-serif}
svg.chart text{fill:var(--fg)}
svg.chart .tick,svg.chart .axis-label,svg.chart .note{fill:var(--muted)}
svg.chart .nodata{fill:var(--muted);font-size:16px}
svg.chart .frame{fill:none;stroke:var(--frame)}
svg.chart .axis{stroke:var(--frame)}
svg.chart .grid{stroke:var(--grid)}
svg.chart .s1{color:var(--s1)}svg.chart .s2{color:var(--s2)}svg.chart .s3{color:var(--s3)}
svg.chart .s4{color:var(--s4)}svg.chart .s5{color:var(--s5)}svg.chart .muted{color:var(--muted)}
svg.chart .warn{color:var(--warn)}svg.chart .bad{color:var(--bad)}
svg.chart .fill{fill:currentColor;stroke:none}
svg.chart .line{fill:none;stroke:currentColor;stroke-width:2;stroke-linejoin:round}
svg.chart .dashed{fill:none;stroke:currentColor;stroke-width:1.5;stroke-dasharray:6 4}
svg.chart .band{fill:currentColor;fill-opacity:.2;stroke:none}
svg.chart text.ref{fill:currentColor;font-weight:600}
svg.chart .note,svg.chart text.ref,svg.chart .halo{paint-order:stroke;stroke:var(--bg);
stroke-width:3px;stroke-linejoin:round}
svg.chart .cell{fill:var(--heat)}svg.chart .cell.hot{fill:var(--hot)}
svg.chart .cell.cold{fill:var(--cold)}svg.chart .cell-base{fill:var(--neutral)}
svg.chart .cells rect{stroke:var(--bg);stroke-width:1}
svg.chart .hatch-bg{fill:var(--bg)}svg.chart .hatch{stroke:var(--frame);stroke-width:1.5}
svg.chart .cell-label{font-size:11px;fill:var(--fg)}svg.chart .cell-label.strong{fill:var(--bg)}
"""


# Numbers for humans ---------------------------------------------------------------------------


def finite(value: object) -> float | None:
    """A number that can be drawn or printed, else None (bools, NaN and infinities are not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number + 0.0 if math.isfinite(number) else None


def _trim(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_count(value: object) -> str:
    """12,345; 812.5; 0.25."""
    v = finite(value)
    if v is None:
        return DASH
    if v == int(v) or abs(v) >= 100:
        return f"{v:,.0f}"
    return _trim(f"{v:,.2f}" if abs(v) < 10 else f"{v:,.1f}")


def fmt_bytes(value: object) -> str:
    """1.2 GiB, in powers of 1024 as Redis's `used_memory_human`."""
    v = finite(value)
    if v is None:
        return DASH
    power = _byte_power(v)
    if power == 0:
        return f"{v:,.0f} B"
    return f"{_trim(f'{v / 1024**power:.1f}')} {_BYTE_UNITS[power]}"


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
        return f"{_trim(f'{pct:.1f}')} %"
    if abs(pct) < 1e-6:
        return "< 0.000001 %"
    digits = 1 - math.floor(math.log10(abs(pct)))
    return f"{_trim(f'{pct:.{digits}f}')} %"


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
        return f"{_trim(f'{v:.1f}')} s"
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
            return f"{_trim(f'{scaled:.0f}' if abs(scaled) >= 100 else f'{scaled:.1f}')}{suffix}"
    return fmt_count(v)


def _fmt_tick_ratio(value: object) -> str:
    v = finite(value)
    return DASH if v is None else _trim(f"{v:.2f}")


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


# What the builders take -----------------------------------------------------------------------


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


# Ticks and scales -----------------------------------------------------------------------------


def _nice(raw: float) -> float:
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5):
        if raw <= m * magnitude * (1 + 1e-9):
            return m * magnitude
    return 10 * magnitude


def _ticks(high: float, unit: Unit, count: int = 5) -> list[float]:
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


def _decades(low: float, high: float) -> list[float]:
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    last = max(last, first + 1)
    every = max(1, math.ceil((last - first) / 7))
    return [10.0**e for e in range(first, last + 1, every)]


def _day_ticks(first: date, last: date) -> list[date]:
    span = (last - first).days
    step = next((s for s in (1, 2, 7, 14, 28, 56, 91, 182) if span / s <= 7), 364)
    return [first + timedelta(days=d) for d in range(0, span + 1, step)]


def _linear(d0: float, d1: float, r0: float, r1: float) -> Scale:
    span = (d1 - d0) or 1.0
    return lambda v: r0 + (v - d0) / span * (r1 - r0)


def _log(d0: float, d1: float, r0: float, r1: float) -> Scale:
    scale = _linear(math.log10(d0), math.log10(d1), r0, r1)
    return lambda v: scale(math.log10(v))


# SVG pieces -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plot:
    left: float
    top: float
    right: float
    bottom: float

    @property
    def middle(self) -> float:
        return (self.left + self.right) / 2


def _n(v: float) -> str:
    return _trim(f"{v:.1f}")


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _width_of(text: str, size: float = FONT) -> float:
    return len(text) * size * 0.62


def _text(x: float, y: float, text: str, cls: str = "", anchor: str = "start") -> str:
    klass = f' class="{cls}"' if cls else ""
    return f'<text{klass} x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}">{_e(text)}</text>'


def _line(x1: float, y1: float, x2: float, y2: float, cls: str) -> str:
    return f'<line class="{cls}" x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}"/>'


def _rect(x: float, y: float, w: float, h: float, cls: str, tip: str = "", attrs: str = "") -> str:
    geometry = f'x="{_n(x)}" y="{_n(y)}" width="{_n(max(w, 0))}" height="{_n(max(h, 0))}"'
    head = f'<rect class="{cls}"{attrs} {geometry}'
    return f"{head}><title>{_e(tip)}</title></rect>" if tip else f"{head}/>"


def _dot(x: float, y: float, r: float = 3) -> str:
    return f'<circle class="fill" cx="{_n(x)}" cy="{_n(y)}" r="{_n(r)}"/>'


def _path(points: Sequence[tuple[float, float]], cls: str, close: bool = False) -> str:
    d = "M" + "L".join(f"{_n(x)},{_n(y)}" for x, y in points) + ("Z" if close else "")
    return f'<path class="{cls}" d="{d}"/>'


def _g(cls: str, *parts: str) -> str:
    return f'<g class="{cls}">{"".join(parts)}</g>'


def _svg(name: str, title: str, width: float, height: float, body: Sequence[str]) -> str:
    w, h = _n(width), _n(height)
    return (
        f'<svg class="chart" data-chart="{_e(name)}" role="img" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}"><title>{_e(title)}</title>{"".join(body)}</svg>'
    )


def _empty(name: str, title: str, width: float = WIDTH, height: float = 120) -> str:
    frame = _rect(0.5, 0.5, width - 1, height - 1, "frame")
    message = _text(width / 2, height / 2 + 5, "no data", "nodata", "middle")
    return _svg(name, title, width, height, [frame, message])


def _legend(items: Sequence[tuple[str, str]], right: float, y: float) -> list[str]:
    """Swatches and labels in one row that ends at `right`, on baseline y."""
    widths = [16 + _width_of(label) + 12 for _, label in items]
    x = right - sum(widths) + 12
    out: list[str] = []
    for (cls, label), w in zip(items, widths, strict=True):
        out += [_g(cls, _rect(x, y - 9, 10, 10, "fill")), _text(x + 14, y, label)]
        x += w
    return out


def _y_axis(plot: _Plot, ticks: Sequence[float], y: Scale, fmt: Fmt, label: str) -> list[str]:
    out = [_line(plot.left, y(t), plot.right, y(t), "grid") for t in ticks]
    out += [_text(plot.left - 6, y(t) + 4, fmt(t), "tick", "end") for t in ticks]
    out.append(_line(plot.left, plot.top, plot.left, plot.bottom, "axis"))
    out.append(_line(plot.left, plot.bottom, plot.right, plot.bottom, "axis"))
    if label:
        out.append(_text(plot.left, plot.top - 14, label, "axis-label", "middle"))
    return out


def _x_label(plot: _Plot, label: str, baseline: float) -> list[str]:
    return [_text(plot.middle, baseline, label, "axis-label", "middle")] if label else []


def _ref_lines(plot: _Plot, lines: Sequence[tuple[Ref, float]], y: Scale, fmt: Fmt) -> list[str]:
    out = []
    for ref, value in lines:
        line = _line(plot.left, y(value), plot.right, y(value), "dashed")
        label = _text(plot.right - 4, y(value) - 5, f"{ref.label} {fmt(value)}", "ref", "end")
        out.append(_g(ref.tone, line, label))
    return out


def _known(values: Sequence[object]) -> list[float]:
    return [v for v in map(finite, values) if v is not None]


def _refs(refs: Sequence[Ref]) -> list[tuple[Ref, float]]:
    return [(r, v) for r in refs if (v := finite(r.value)) is not None]


# Line chart with a forecast cone --------------------------------------------------------------


def line_chart(
    name: str,
    title: str,
    points: Sequence[tuple[date, object]],
    *,
    cone: Sequence[Band] = (),
    refs: Sequence[Ref] = (),
    unit: Unit = "bytes",
    width: float = WIDTH,
    y_label: str = "",
    x_label: str = "",
) -> str:
    """Daily values as a line broken at gaps, a forecast cone as a band, refs across."""
    series = [(d, finite(v)) for d, v in points]
    bands = [(b.day, finite(b.low), finite(b.mid), finite(b.high)) for b in cone]
    known = _known([v for _, v in series] + [x for b in bands for x in b[1:]])
    if not known:
        return _empty(name, title, width)
    lines = _refs(refs)
    days = [d for d, _ in series] + [b[0] for b in bands]
    first, last = min(days), max(days)
    if first == last:
        first, last = first - timedelta(days=1), last + timedelta(days=1)
    plot = _Plot(72, 44, width - 24, HEIGHT - 44)
    ticks = _ticks(max(known + [v for _, v in lines]), unit)
    y = _linear(0, ticks[-1], plot.bottom, plot.top)
    scale = _linear(0, (last - first).days, plot.left, plot.right)

    def x(d: date) -> float:
        return scale((d - first).days)

    out = _y_axis(plot, ticks, y, TICKS[unit], y_label)
    for d in _day_ticks(first, last):
        out.append(_text(x(d), plot.bottom + 16, fmt_day(d), "tick", "middle"))
    out += _cone(bands, x, y) + _polyline(series, x, y)
    out += _ref_lines(plot, lines, y, TICKS[unit])
    legend = [("s1", "daily peak")] + ([("s1 band", "forecast, low to high")] if bands else [])
    out += _legend(legend, plot.right, 16)
    out += _x_label(plot, x_label, HEIGHT - 8)
    return _svg(name, title, width, HEIGHT, out)


def _cone(
    bands: Sequence[tuple[date, float | None, float | None, float | None]],
    x: Callable[[date], float],
    y: Scale,
) -> list[str]:
    edges = [(x(d), y(lo), y(hi)) for d, lo, _, hi in bands if lo is not None and hi is not None]
    mids = [(x(d), y(mid)) for d, _, mid, _ in bands if mid is not None]
    out: list[str] = []
    if len(edges) > 1:
        outline = [(px, hi) for px, _, hi in edges] + [(px, lo) for px, lo, _ in reversed(edges)]
        out.append(_path(outline, "band", close=True))
    if len(mids) > 1:
        out.append(_path(mids, "dashed"))
    return [_g("s1", *out)] if out else []


def _polyline(
    series: Sequence[tuple[date, float | None]], x: Callable[[date], float], y: Scale
) -> list[str]:
    runs: list[list[tuple[float, float]]] = [[]]
    for d, v in series:
        if v is None:
            runs.append([])
        else:
            runs[-1].append((x(d), y(v)))
    paths = [_path(run, "line") for run in runs if len(run) > 1]
    alone = [run[0] for run in runs if len(run) == 1]
    dots = [p for run in runs for p in run] if len(series) <= 62 else alone
    return [_g("s1", *paths, *(_dot(px, py) for px, py in dots))]


# Bars -----------------------------------------------------------------------------------------


def bar_chart(
    name: str,
    title: str,
    bars: Sequence[Bar],
    *,
    unit: Unit = "count",
    refs: Sequence[Ref] = (),
    width: float = WIDTH,
    x_label: str = "",
    y_label: str = "",
) -> str:
    """Vertical bars, one per category; a histogram when the categories are bins."""
    known = _known([b.value for b in bars])
    if not known:
        return _empty(name, title, width)
    lines = _refs(refs)
    plot = _Plot(72, 44, width - 24, HEIGHT - 44)
    ticks = _ticks(max(known + [v for _, v in lines]), unit)
    y = _linear(0, ticks[-1], plot.bottom, plot.top)
    slot = (plot.right - plot.left) / len(bars)
    bar_w = min(slot * 0.7, 64)
    every = max(1, math.ceil(max(_width_of(b.label) + 8 for b in bars) / slot))
    out = _y_axis(plot, ticks, y, TICKS[unit], y_label)
    notes = []
    for i, bar in enumerate(bars):
        middle = plot.left + slot * (i + 0.5)
        if i % every == 0:
            out.append(_text(middle, plot.bottom + 16, bar.label, "tick", "middle"))
        value = finite(bar.value)
        if value is None:
            notes.append(_text(middle, plot.bottom - 6, DASH, "note", "middle"))
            continue
        tip = f"{bar.label}: {FORMATS[unit](value)}"
        rect = _rect(middle - bar_w / 2, y(value), bar_w, y(0) - y(value), "fill", tip)
        out.append(_g("bad" if bar.flagged else "s1", rect))
        note = " · ".join(filter(None, [FORMATS[unit](value), bar.note]))
        if _width_of(note) <= slot:
            notes.append(_text(middle, y(value) - 5, note, "note", "middle"))
    out += _ref_lines(plot, lines, y, TICKS[unit]) + notes
    out += _x_label(plot, x_label, HEIGHT - 8)
    return _svg(name, title, width, HEIGHT, out)


def hbar_chart(
    name: str,
    title: str,
    bars: Sequence[Bar],
    *,
    unit: Unit = "share",
    refs: Sequence[Ref] = (),
    at_least: float = 0.0,
    width: float = WIDTH,
    x_label: str = "",
) -> str:
    """Horizontal bars for named things (servers), so that long names stay readable."""
    known = _known([b.value for b in bars])
    if not known:
        return _empty(name, title, width)
    lines = _refs(refs)
    row = 24
    label_width = min(max(_width_of(b.label) for b in bars) + 16, width / 2)
    top = 16 + 16 * len(lines)
    plot = _Plot(label_width, top, width - 72, top + row * len(bars))
    ticks = _ticks(max(known + [v for _, v in lines] + [at_least]), unit)
    x = _linear(0, ticks[-1], plot.left, plot.right)
    out = [_line(x(t), plot.top, x(t), plot.bottom, "grid") for t in ticks]
    out += [_text(x(t), plot.bottom + 16, TICKS[unit](t), "tick", "middle") for t in ticks]
    out.append(_line(plot.left, plot.top, plot.left, plot.bottom, "axis"))
    notes = []
    for i, bar in enumerate(bars):
        middle = plot.top + row * (i + 0.5)
        out.append(_text(plot.left - 8, middle + 4, bar.label, "", "end"))
        value = finite(bar.value)
        if value is None:
            notes.append(_text(plot.left + 6, middle + 4, DASH, "note"))
            continue
        tip = f"{bar.label}: {FORMATS[unit](value)}"
        rect = _rect(plot.left, middle - row / 2 + 4, x(value) - plot.left, row - 8, "fill", tip)
        out.append(_g("bad" if bar.flagged else "s1", rect))
        note = " · ".join(filter(None, [FORMATS[unit](value), bar.note]))
        notes.append(_text(x(value) + 6, middle + 4, note, "note"))
    for i, (ref, value) in enumerate(lines):
        baseline = top - 16 * (len(lines) - i) + 8
        line = _line(x(value), baseline + 4, x(value), plot.bottom, "dashed")
        text = f"{ref.label} {TICKS[unit](value)}"
        half = _width_of(text) / 2
        anchor_x = min(max(x(value), half + 4), width - half - 4)
        label = _text(anchor_x, baseline, text, "ref", "middle")
        out.append(_g(ref.tone, line, label))
    out += notes + _x_label(plot, x_label, plot.bottom + 36)
    return _svg(name, title, width, plot.bottom + 44, out)


# Distributions --------------------------------------------------------------------------------


def ccdf_chart(
    name: str,
    title: str,
    points: Sequence[tuple[object, object]],
    *,
    width: float = WIDTH,
    x_label: str = "",
    y_label: str = "",
) -> str:
    """A complementary CDF, share of things with at least x, as a step line on log-log axes."""
    pairs = sorted(
        (a, b) for a, b in ((finite(p), finite(q)) for p, q in points) if a and b and a > 0 < b
    )
    if not pairs:
        return _empty(name, title, width)
    plot = _Plot(80, 44, width - 24, HEIGHT - 44)
    xs = _decades(pairs[0][0], pairs[-1][0])
    ys = _decades(min(b for _, b in pairs), max(1.0, max(b for _, b in pairs)))
    x = _log(xs[0], xs[-1], plot.left, plot.right)
    y = _log(ys[0], ys[-1], plot.bottom, plot.top)
    out = _y_axis(plot, ys, y, fmt_share, y_label)
    out += [_line(x(t), plot.top, x(t), plot.bottom, "grid") for t in xs]
    out += [_text(x(t), plot.bottom + 16, fmt_compact(t), "tick", "middle") for t in xs]
    steps = [(x(pairs[0][0]), y(pairs[0][1]))]
    for (_, share), (after, next_share) in pairwise(pairs):
        steps += [(x(after), y(share)), (x(after), y(next_share))]
    line = [_path(steps, "line")] if len(steps) > 1 else []
    out.append(_g("s1", *line, *(_dot(x(a), y(b), 2.5) for a, b in pairs)))
    out += _x_label(plot, x_label, HEIGHT - 8)
    return _svg(name, title, width, HEIGHT, out)


def lorenz_chart(
    name: str,
    title: str,
    points: Sequence[tuple[object, object]],
    *,
    x_label: str = "",
    y_label: str = "",
) -> str:
    """A Lorenz curve (cumulative shares, smallest first) against the line of equality."""
    pairs = sorted(
        (min(max(a, 0.0), 1.0), min(max(b, 0.0), 1.0))
        for a, b in ((finite(p), finite(q)) for p, q in points)
        if a is not None and b is not None
    )
    size = 300.0
    plot = _Plot(64, 44, 64 + size, 44 + size)
    width, height = plot.right + 36, plot.bottom + 44
    if not pairs:
        return _empty(name, title, width)
    curve = ([] if pairs[0] == (0.0, 0.0) else [(0.0, 0.0)]) + pairs
    curve += [] if curve[-1] == (1.0, 1.0) else [(1.0, 1.0)]
    x = _linear(0, 1, plot.left, plot.right)
    y = _linear(0, 1, plot.bottom, plot.top)
    ticks = [0.0, 0.25, 0.5, 0.75, 1.0]
    out = _y_axis(plot, ticks, y, fmt_share, y_label)
    out += [_line(x(t), plot.top, x(t), plot.bottom, "grid") for t in ticks]
    out += [_text(x(t), plot.bottom + 16, fmt_share(t), "tick", "middle") for t in ticks]
    drawn = [(x(a), y(b)) for a, b in curve]
    gap = _path([*drawn, (x(0), y(0))], "band", close=True)
    out.append(_g("muted", _line(x(0), y(0), x(1), y(1), "dashed")))
    out.append(_g("s1", gap, _path(drawn, "line")))
    out.append(_text(x(0.42), y(0.5), "equality", "note", "end"))
    out += _x_label(plot, x_label, height - 8)
    return _svg(name, title, width, height, out)


# Heatmap --------------------------------------------------------------------------------------


def heatmap(
    name: str,
    title: str,
    rows: Sequence[str],
    columns: Sequence[str],
    values: Sequence[Sequence[object]],
    *,
    unit: Unit = "count",
    log: bool = False,
    center: float | None = None,
    labels: bool = False,
    column_every: int = 1,
    width: float = WIDTH,
    x_label: str = "",
    null_label: str = "no data",
) -> str:
    """Rows x columns of shaded cells with a legend. `log` shades by log(1 + v); `center`
    makes the scale diverge (cold below it, hot above), for ratios to a mean; `labels`
    prints each value in its cell where it fits. Missing cells are hatched."""
    grid = [[finite(r[j]) if j < len(r) else None for j in range(len(columns))] for r in values]
    grid = grid[: len(rows)]
    known = _known([v for r in grid for v in r])
    if not grid or not columns or not known:
        return _empty(name, title, width)
    label_width = min(max(_width_of(r) for r in rows) + 12, 200)
    row_h = max(6.0, min(22.0, 480 / len(grid)))
    plot = _Plot(label_width, 8, width - 16, 8 + row_h * len(grid))
    cell_w = (plot.right - plot.left) / len(columns)
    hatch = f"{name}-missing"
    shade = _shader(known, log, center)
    base = _rect(plot.left, plot.top, plot.right - plot.left, plot.bottom - plot.top, "cell-base")
    out = [_hatch(hatch), base]
    cells, texts, names = [], [], []
    row_every = max(1, math.ceil(14 / row_h))
    fits = labels and row_h >= 13 and cell_w >= 44
    for i, (row_name, row) in enumerate(zip(rows, grid, strict=False)):
        top = plot.top + i * row_h
        if i % row_every == 0:
            names.append(_text(plot.left - 8, top + row_h / 2 + 4, row_name, "tick", "end"))
        for j, v in enumerate(row):
            left, tip = plot.left + j * cell_w, f"{row_name} · {columns[j]}: {FORMATS[unit](v)}"
            if v is None:
                cells.append(_rect(left, top, cell_w, row_h, "cell-null", tip, _fill(hatch)))
                continue
            cls, t = shade(v)
            cells.append(_rect(left, top, cell_w, row_h, cls, tip, _shading(t)))
            if fits:
                strong = "cell-label strong" if _opacity(t) > 0.6 else "cell-label"
                centre, middle = left + cell_w / 2, top + row_h / 2 + 4
                texts.append(_text(centre, middle, TICKS[unit](v), strong, "middle"))
    out += [_g("cells", *cells), *texts, *names]
    every = max(column_every, math.ceil(max(_width_of(c) + 8 for c in columns) / cell_w))
    for j in range(0, len(columns), every):
        centre = plot.left + (j + 0.5) * cell_w
        out.append(_text(centre, plot.bottom + 16, columns[j], "tick", "middle"))
    out += _x_label(plot, x_label, plot.bottom + 34)
    missing = null_label if any(v is None for r in grid for v in r) else ""
    out += _heat_legend(known, log, center, TICKS[unit], plot, plot.bottom + 58, missing, hatch)
    return _svg(name, title, width, plot.bottom + 76, out)


def _hatch(pattern: str) -> str:
    return (
        f'<defs><pattern id="{_e(pattern)}" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect class="hatch-bg" width="6" height="6"/>'
        '<line class="hatch" x1="1" y1="0" x2="1" y2="6"/></pattern></defs>'
    )


def _fill(pattern: str) -> str:
    return f' fill="url(#{_e(pattern)})"'


def _shader(known: Sequence[float], log: bool, center: float | None) -> Shade:
    """Maps a value to its cell class and an intensity in [0, 1]."""
    high, low = max(known), min(known)
    if center is not None:
        mid, up, down = center, (high - center) or 1.0, (center - low) or 1.0

        def diverging(v: float) -> tuple[str, float]:
            return ("cell hot", (v - mid) / up) if v >= mid else ("cell cold", (mid - v) / down)

        return diverging
    top = (math.log1p(max(high, 0)) if log else max(high, 0)) or 1.0
    return lambda v: ("cell", (math.log1p(max(v, 0)) if log else max(v, 0)) / top)


def _opacity(t: float) -> float:
    return 0.0 if t <= 0 else 0.12 + 0.88 * min(t, 1.0)


def _shading(t: float) -> str:
    return f' fill-opacity="{_opacity(t):.2f}"'


def _heat_legend(
    known: Sequence[float],
    log: bool,
    center: float | None,
    fmt: Fmt,
    plot: _Plot,
    y: float,
    missing: str,
    hatch: str,
) -> list[str]:
    high, low = max(known), min(known)
    steps: list[tuple[str, float, float | None]]
    if center is not None:
        steps = [("cell cold", 1.0, low), ("cell cold", 0.5, None), ("cell", 0.0, center)]
        steps += [("cell hot", 0.5, None), ("cell hot", 1.0, high)]
    else:
        top = math.log1p(max(high, 0)) if log else max(high, 0)
        at = (0.0, 0.25, 0.5, 0.75, 1.0)
        values = [math.expm1(t * top) if log else t * top for t in at]
        labelled = [v if i % 2 == 0 else None for i, v in enumerate(values)]
        steps = [("cell", t, v) for t, v in zip(at, labelled, strict=True)]
    box, aside = 40.0, (_width_of(missing) + 30 if missing else 0)
    x = plot.right - box * len(steps) - aside
    out = [_rect(x, y - 10, box * len(steps), 10, "cell-base")]
    for i, (cls, t, label) in enumerate(steps):
        out.append(_rect(x + i * box, y - 10, box, 10, cls, attrs=_shading(t)))
        if label is not None:
            out.append(_text(x + (i + 0.5) * box, y + 14, fmt(label), "tick", "middle"))
    if missing:
        out.append(_rect(plot.right - aside + 12, y - 10, 14, 10, "cell-null", attrs=_fill(hatch)))
        out.append(_text(plot.right - aside + 30, y, missing, "tick"))
    return out


# Daily bars -----------------------------------------------------------------------------------


def daily_bars(
    name: str,
    title: str,
    days: Sequence[date],
    groups: Sequence[Sequence[Series]],
    *,
    markers: Sequence[Marker] = (),
    unit: Unit = "count",
    width: float = WIDTH,
    y_label: str = "",
) -> str:
    """Per day one bar per group, side by side, each group's series stacked in it; markers
    are vertical lines at the start of their day."""
    stacks = [[[_at(s.values, i) for s in group] for group in groups] for i in range(len(days))]
    totals = [sum(v for v in stack if v and v > 0) for day in stacks for stack in day]
    if not days or not _known([v for day in stacks for stack in day for v in stack]):
        return _empty(name, title, width)
    first, last = min(days), max(days)
    n = (last - first).days + 1
    plot = _Plot(72, 64, width - 24, HEIGHT - 30)
    ticks = _ticks(max([*totals, 0.0]), unit)
    y = _linear(0, ticks[-1], plot.bottom, plot.top)
    slot = (plot.right - plot.left) / n
    bar_w = min(slot * 0.8 / max(len(groups), 1), 28)
    out = _y_axis(plot, ticks, y, TICKS[unit], y_label)
    for d in _day_ticks(first, last):
        centre = plot.left + slot * ((d - first).days + 0.5)
        out.append(_text(centre, plot.bottom + 16, fmt_day(d), "tick", "middle"))
    colours = [sum(len(g) for g in groups[:k]) for k in range(len(groups))]
    for d, day in zip(days, stacks, strict=True):
        left = plot.left + slot * ((d - first).days + 0.5) - bar_w * len(groups) / 2
        for g, (group, stack) in enumerate(zip(groups, day, strict=True)):
            base = 0.0
            for k, (series, v) in enumerate(zip(group, stack, strict=True)):
                if v is None or v <= 0:
                    continue
                tip = f"{d.isoformat()} {series.label}: {FORMATS[unit](v)}"
                top, bottom = y(base + v), y(base)
                rect = _rect(left + g * bar_w, top, bar_w - 1, bottom - top, "fill", tip)
                out.append(_g(f"s{(colours[g] + k) % 5 + 1}", rect))
                base += v
    out += _markers(markers, first, n, plot, slot)
    labels = [s.label for group in groups for s in group]
    out += _legend([(f"s{i % 5 + 1}", label) for i, label in enumerate(labels)], plot.right, 16)
    return _svg(name, title, width, HEIGHT, out)


def _at(values: Sequence[object], i: int) -> float | None:
    return finite(values[i]) if i < len(values) else None


def _markers(markers: Sequence[Marker], first: date, n: int, plot: _Plot, slot: float) -> list[str]:
    out: list[str] = []
    for i, marker in enumerate(sorted(markers, key=lambda m: m.day)):
        offset = (marker.day - first).days
        if not 0 <= offset < n:
            continue
        px = plot.left + slot * offset
        anchor, dx = ("end", -4) if px > plot.middle else ("start", 4)
        label = _text(px + dx, plot.top - 20 + 13 * (i % 2), marker.label, "ref", anchor)
        out.append(_g("bad", _line(px, plot.top - 30, px, plot.bottom, "dashed"), label))
    return out
