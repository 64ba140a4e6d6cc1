"""Bar charts: vertical bars per category (a histogram when the categories are bins), and
horizontal bars for named things such as servers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from spark.charts import axes, svg
from spark.charts.inputs import Bar, Ref, drawable, drawable_refs
from spark.charts.svg import HEIGHT, WIDTH, Plot
from spark.units import DASH, FORMATS, TICKS, Unit, finite, round_ticks


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
    known = drawable([b.value for b in bars])
    if not known:
        return svg.empty(name, title, width)
    lines = drawable_refs(refs)
    plot = Plot(72, 44, width - 24, HEIGHT - 44)
    ticks = round_ticks(max(known + [v for _, v in lines]), unit)
    y = axes.linear_scale(0, ticks[-1], plot.bottom, plot.top)
    slot = (plot.right - plot.left) / len(bars)
    bar_w = min(slot * 0.7, 64)
    every = max(1, math.ceil(max(svg.width_of(b.label) + 8 for b in bars) / slot))
    out = axes.y_axis(plot, ticks, y, TICKS[unit], y_label)
    notes = []
    for i, bar in enumerate(bars):
        middle = plot.left + slot * (i + 0.5)
        if i % every == 0:
            out.append(svg.text(middle, plot.bottom + 16, bar.label, "tick", "middle"))
        value = finite(bar.value)
        if value is None:
            notes.append(svg.text(middle, plot.bottom - 6, DASH, "note", "middle"))
            continue
        tip = f"{bar.label}: {FORMATS[unit](value)}"
        rect = svg.rect(middle - bar_w / 2, y(value), bar_w, y(0) - y(value), "fill", tip)
        out.append(svg.group("bad" if bar.flagged else "s1", rect))
        note = " · ".join(filter(None, [FORMATS[unit](value), bar.note]))
        if svg.width_of(note) <= slot:
            notes.append(svg.text(middle, y(value) - 5, note, "note", "middle"))
    out += axes.ref_lines(plot, lines, y, TICKS[unit]) + notes
    out += axes.x_label(plot, x_label, HEIGHT - 8)
    return svg.chart(name, title, width, HEIGHT, out)


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
    known = drawable([b.value for b in bars])
    if not known:
        return svg.empty(name, title, width)
    lines = drawable_refs(refs)
    row = 24
    label_width = min(max(svg.width_of(b.label) for b in bars) + 16, width / 2)
    top = 16 + 16 * len(lines)
    plot = Plot(label_width, top, width - 72, top + row * len(bars))
    ticks = round_ticks(max(known + [v for _, v in lines] + [at_least]), unit)
    x = axes.linear_scale(0, ticks[-1], plot.left, plot.right)
    out = [svg.line(x(t), plot.top, x(t), plot.bottom, "grid") for t in ticks]
    out += [svg.text(x(t), plot.bottom + 16, TICKS[unit](t), "tick", "middle") for t in ticks]
    out.append(svg.line(plot.left, plot.top, plot.left, plot.bottom, "axis"))
    notes = []
    for i, bar in enumerate(bars):
        middle = plot.top + row * (i + 0.5)
        out.append(svg.text(plot.left - 8, middle + 4, bar.label, "", "end"))
        value = finite(bar.value)
        if value is None:
            notes.append(svg.text(plot.left + 6, middle + 4, DASH, "note"))
            continue
        tip = f"{bar.label}: {FORMATS[unit](value)}"
        rect = svg.rect(plot.left, middle - row / 2 + 4, x(value) - plot.left, row - 8, "fill", tip)
        out.append(svg.group("bad" if bar.flagged else "s1", rect))
        note = " · ".join(filter(None, [FORMATS[unit](value), bar.note]))
        notes.append(svg.text(x(value) + 6, middle + 4, note, "note"))
    for i, (ref, value) in enumerate(lines):
        baseline = top - 16 * (len(lines) - i) + 8
        line = svg.line(x(value), baseline + 4, x(value), plot.bottom, "dashed")
        text = f"{ref.label} {TICKS[unit](value)}"
        half = svg.width_of(text) / 2
        anchor_x = min(max(x(value), half + 4), width - half - 4)
        label = svg.text(anchor_x, baseline, text, "ref", "middle")
        out.append(svg.group(ref.tone, line, label))
    out += notes + axes.x_label(plot, x_label, plot.bottom + 36)
    return svg.chart(name, title, width, plot.bottom + 44, out)
