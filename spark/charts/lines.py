"""The line chart: daily values as a line broken at gaps, with a forecast cone and reference
lines (headroom, capacity).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, timedelta

from spark.charts import axes, svg
from spark.charts.axes import Scale
from spark.charts.inputs import Band, Ref, drawable, drawable_refs
from spark.charts.svg import HEIGHT, WIDTH, Plot
from spark.units import TICKS, Unit, day_ticks, finite, fmt_day, round_ticks


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
    known = drawable([v for _, v in series] + [x for b in bands for x in b[1:]])
    if not known:
        return svg.empty(name, title, width)
    lines = drawable_refs(refs)
    days = [d for d, _ in series] + [b[0] for b in bands]
    first, last = min(days), max(days)
    if first == last:
        first, last = first - timedelta(days=1), last + timedelta(days=1)
    plot = Plot(72, 44, width - 24, HEIGHT - 44)
    ticks = round_ticks(max(known + [v for _, v in lines]), unit)
    y = axes.linear_scale(0, ticks[-1], plot.bottom, plot.top)
    scale = axes.linear_scale(0, (last - first).days, plot.left, plot.right)

    def x(d: date) -> float:
        return scale((d - first).days)

    out = axes.y_axis(plot, ticks, y, TICKS[unit], y_label)
    for d in day_ticks(first, last):
        out.append(svg.text(x(d), plot.bottom + 16, fmt_day(d), "tick", "middle"))
    out += _cone(bands, x, y) + _polyline(series, x, y)
    out += axes.ref_lines(plot, lines, y, TICKS[unit])
    legend = [("s1", "daily peak")] + ([("s1 band", "forecast, low to high")] if bands else [])
    out += axes.legend(legend, plot.right, 16)
    out += axes.x_label(plot, x_label, HEIGHT - 8)
    return svg.chart(name, title, width, HEIGHT, out)


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
        out.append(svg.path(outline, "band", close=True))
    if len(mids) > 1:
        out.append(svg.path(mids, "dashed"))
    return [svg.group("s1", *out)] if out else []


def _polyline(
    series: Sequence[tuple[date, float | None]], x: Callable[[date], float], y: Scale
) -> list[str]:
    runs: list[list[tuple[float, float]]] = [[]]
    for d, v in series:
        if v is None:
            runs.append([])
        else:
            runs[-1].append((x(d), y(v)))
    paths = [svg.path(run, "line") for run in runs if len(run) > 1]
    alone = [run[0] for run in runs if len(run) == 1]
    dots = [p for run in runs for p in run] if len(series) <= 62 else alone
    return [svg.group("s1", *paths, *(svg.dot(px, py) for px, py in dots))]
