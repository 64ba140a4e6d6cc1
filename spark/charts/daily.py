"""Daily bars: per day one bar per group side by side, each group's series stacked in it, and
markers (change points) at the start of their day.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from spark.charts import axes, svg
from spark.charts.inputs import Marker, Series, drawable
from spark.charts.svg import HEIGHT, WIDTH, Plot
from spark.units import FORMATS, TICKS, Unit, day_ticks, finite, fmt_day, round_ticks


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
    if not days or not drawable([v for day in stacks for stack in day for v in stack]):
        return svg.empty(name, title, width)
    first, last = min(days), max(days)
    n = (last - first).days + 1
    plot = Plot(72, 64, width - 24, HEIGHT - 30)
    ticks = round_ticks(max([*totals, 0.0]), unit)
    y = axes.linear_scale(0, ticks[-1], plot.bottom, plot.top)
    slot = (plot.right - plot.left) / n
    bar_w = min(slot * 0.8 / max(len(groups), 1), 28)
    out = axes.y_axis(plot, ticks, y, TICKS[unit], y_label)
    for d in day_ticks(first, last):
        centre = plot.left + slot * ((d - first).days + 0.5)
        out.append(svg.text(centre, plot.bottom + 16, fmt_day(d), "tick", "middle"))
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
                rect = svg.rect(left + g * bar_w, top, bar_w - 1, bottom - top, "fill", tip)
                out.append(svg.group(f"s{(colours[g] + k) % 5 + 1}", rect))
                base += v
    out += _markers(markers, first, n, plot, slot)
    labels = [s.label for group in groups for s in group]
    out += axes.legend([(f"s{i % 5 + 1}", label) for i, label in enumerate(labels)], plot.right, 16)
    return svg.chart(name, title, width, HEIGHT, out)


def _at(values: Sequence[object], i: int) -> float | None:
    return finite(values[i]) if i < len(values) else None


def _markers(markers: Sequence[Marker], first: date, n: int, plot: Plot, slot: float) -> list[str]:
    out: list[str] = []
    for i, marker in enumerate(sorted(markers, key=lambda m: m.day)):
        offset = (marker.day - first).days
        if not 0 <= offset < n:
            continue
        px = plot.left + slot * offset
        anchor, dx = ("end", -4) if px > plot.middle else ("start", 4)
        label = svg.text(px + dx, plot.top - 20 + 13 * (i % 2), marker.label, "ref", anchor)
        out.append(svg.group("bad", svg.line(px, plot.top - 30, px, plot.bottom, "dashed"), label))
    return out
