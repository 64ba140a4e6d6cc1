"""Distributions: a complementary CDF on log-log axes, and a Lorenz curve against the line of
equality.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from spark.charts import axes, svg
from spark.charts.svg import HEIGHT, WIDTH, Plot
from spark.units import decades, finite, fmt_compact, fmt_share


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
        return svg.empty(name, title, width)
    plot = Plot(80, 44, width - 24, HEIGHT - 44)
    xs = decades(pairs[0][0], pairs[-1][0])
    ys = decades(min(b for _, b in pairs), max(1.0, max(b for _, b in pairs)))
    x = axes.log_scale(xs[0], xs[-1], plot.left, plot.right)
    y = axes.log_scale(ys[0], ys[-1], plot.bottom, plot.top)
    out = axes.y_axis(plot, ys, y, fmt_share, y_label)
    out += [svg.line(x(t), plot.top, x(t), plot.bottom, "grid") for t in xs]
    out += [svg.text(x(t), plot.bottom + 16, fmt_compact(t), "tick", "middle") for t in xs]
    steps = [(x(pairs[0][0]), y(pairs[0][1]))]
    for (_, share), (after, next_share) in pairwise(pairs):
        steps += [(x(after), y(share)), (x(after), y(next_share))]
    line = [svg.path(steps, "line")] if len(steps) > 1 else []
    out.append(svg.group("s1", *line, *(svg.dot(x(a), y(b), 2.5) for a, b in pairs)))
    out += axes.x_label(plot, x_label, HEIGHT - 8)
    return svg.chart(name, title, width, HEIGHT, out)


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
    plot = Plot(64, 44, 64 + size, 44 + size)
    width, height = plot.right + 36, plot.bottom + 44
    if not pairs:
        return svg.empty(name, title, width)
    curve = ([] if pairs[0] == (0.0, 0.0) else [(0.0, 0.0)]) + pairs
    curve += [] if curve[-1] == (1.0, 1.0) else [(1.0, 1.0)]
    x = axes.linear_scale(0, 1, plot.left, plot.right)
    y = axes.linear_scale(0, 1, plot.bottom, plot.top)
    ticks = [0.0, 0.25, 0.5, 0.75, 1.0]
    out = axes.y_axis(plot, ticks, y, fmt_share, y_label)
    out += [svg.line(x(t), plot.top, x(t), plot.bottom, "grid") for t in ticks]
    out += [svg.text(x(t), plot.bottom + 16, fmt_share(t), "tick", "middle") for t in ticks]
    drawn = [(x(a), y(b)) for a, b in curve]
    gap = svg.path([*drawn, (x(0), y(0))], "band", close=True)
    out.append(svg.group("muted", svg.line(x(0), y(0), x(1), y(1), "dashed")))
    out.append(svg.group("s1", gap, svg.path(drawn, "line")))
    out.append(svg.text(x(0.42), y(0.5), "equality", "note", "end"))
    out += axes.x_label(plot, x_label, height - 8)
    return svg.chart(name, title, width, height, out)
