"""What frames a plot: scales from values to pixels, the y axis with its grid, axis labels,
reference lines and the legend.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from spark.charts import svg
from spark.charts.inputs import Ref
from spark.charts.svg import Plot
from spark.units import Fmt

Scale = Callable[[float], float]


def linear_scale(d0: float, d1: float, r0: float, r1: float) -> Scale:
    span = (d1 - d0) or 1.0
    return lambda v: r0 + (v - d0) / span * (r1 - r0)


def log_scale(d0: float, d1: float, r0: float, r1: float) -> Scale:
    scale = linear_scale(math.log10(d0), math.log10(d1), r0, r1)
    return lambda v: scale(math.log10(v))


def legend(items: Sequence[tuple[str, str]], right: float, y: float) -> list[str]:
    """Swatches and labels in one row that ends at `right`, on baseline y."""
    widths = [16 + svg.width_of(label) + 12 for _, label in items]
    x = right - sum(widths) + 12
    out: list[str] = []
    for (cls, label), w in zip(items, widths, strict=True):
        out += [svg.group(cls, svg.rect(x, y - 9, 10, 10, "fill")), svg.text(x + 14, y, label)]
        x += w
    return out


def y_axis(plot: Plot, ticks: Sequence[float], y: Scale, fmt: Fmt, label: str) -> list[str]:
    out = [svg.line(plot.left, y(t), plot.right, y(t), "grid") for t in ticks]
    out += [svg.text(plot.left - 6, y(t) + 4, fmt(t), "tick", "end") for t in ticks]
    out.append(svg.line(plot.left, plot.top, plot.left, plot.bottom, "axis"))
    out.append(svg.line(plot.left, plot.bottom, plot.right, plot.bottom, "axis"))
    if label:
        out.append(svg.text(plot.left, plot.top - 14, label, "axis-label", "middle"))
    return out


def x_label(plot: Plot, label: str, baseline: float) -> list[str]:
    return [svg.text(plot.middle, baseline, label, "axis-label", "middle")] if label else []


def ref_lines(plot: Plot, lines: Sequence[tuple[Ref, float]], y: Scale, fmt: Fmt) -> list[str]:
    """Dashed horizontal lines across the plot, each labelled with its value at the right."""
    out = []
    for ref, value in lines:
        line = svg.line(plot.left, y(value), plot.right, y(value), "dashed")
        label = svg.text(plot.right - 4, y(value) - 5, f"{ref.label} {fmt(value)}", "ref", "end")
        out.append(svg.group(ref.tone, line, label))
    return out
