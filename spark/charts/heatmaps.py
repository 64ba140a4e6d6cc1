"""The heatmap: rows x columns of shaded cells with a legend, shaded from zero up or diverging
around a centre; missing cells are hatched.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from spark.charts import axes, svg
from spark.charts.inputs import drawable
from spark.charts.svg import WIDTH, Plot
from spark.units import FORMATS, TICKS, Fmt, Unit, finite

Shade = Callable[[float], tuple[str, float]]


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
    known = drawable([v for r in grid for v in r])
    if not grid or not columns or not known:
        return svg.empty(name, title, width)
    label_width = min(max(svg.width_of(r) for r in rows) + 12, 200)
    row_h = max(6.0, min(22.0, 480 / len(grid)))
    plot = Plot(label_width, 8, width - 16, 8 + row_h * len(grid))
    cell_w = (plot.right - plot.left) / len(columns)
    hatch = f"{name}-missing"
    shade = _shader(known, log, center)
    base = svg.rect(
        plot.left, plot.top, plot.right - plot.left, plot.bottom - plot.top, "cell-base"
    )
    out = [_hatch(hatch), base]
    cells, texts, names = [], [], []
    row_every = max(1, math.ceil(14 / row_h))
    fits = labels and row_h >= 13 and cell_w >= 44
    for i, (row_name, row) in enumerate(zip(rows, grid, strict=False)):
        top = plot.top + i * row_h
        if i % row_every == 0:
            names.append(svg.text(plot.left - 8, top + row_h / 2 + 4, row_name, "tick", "end"))
        for j, v in enumerate(row):
            left, tip = plot.left + j * cell_w, f"{row_name} · {columns[j]}: {FORMATS[unit](v)}"
            if v is None:
                cells.append(svg.rect(left, top, cell_w, row_h, "cell-null", tip, _fill(hatch)))
                continue
            cls, t = shade(v)
            cells.append(svg.rect(left, top, cell_w, row_h, cls, tip, _shading(t)))
            if fits:
                strong = "cell-label strong" if _opacity(t) > 0.6 else "cell-label"
                centre, middle = left + cell_w / 2, top + row_h / 2 + 4
                texts.append(svg.text(centre, middle, TICKS[unit](v), strong, "middle"))
    out += [svg.group("cells", *cells), *texts, *names]
    every = max(column_every, math.ceil(max(svg.width_of(c) + 8 for c in columns) / cell_w))
    for j in range(0, len(columns), every):
        centre = plot.left + (j + 0.5) * cell_w
        out.append(svg.text(centre, plot.bottom + 16, columns[j], "tick", "middle"))
    out += axes.x_label(plot, x_label, plot.bottom + 34)
    missing = null_label if any(v is None for r in grid for v in r) else ""
    out += _heat_legend(known, log, center, TICKS[unit], plot, plot.bottom + 58, missing, hatch)
    return svg.chart(name, title, width, plot.bottom + 76, out)


def _hatch(pattern: str) -> str:
    return (
        f'<defs><pattern id="{svg.esc(pattern)}" width="6" height="6" '
        'patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        '<rect class="hatch-bg" width="6" height="6"/>'
        '<line class="hatch" x1="1" y1="0" x2="1" y2="6"/></pattern></defs>'
    )


def _fill(pattern: str) -> str:
    return f' fill="url(#{svg.esc(pattern)})"'


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
    plot: Plot,
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
    box, aside = 40.0, (svg.width_of(missing) + 30 if missing else 0)
    x = plot.right - box * len(steps) - aside
    out = [svg.rect(x, y - 10, box * len(steps), 10, "cell-base")]
    for i, (cls, t, label) in enumerate(steps):
        out.append(svg.rect(x + i * box, y - 10, box, 10, cls, attrs=_shading(t)))
        if label is not None:
            out.append(svg.text(x + (i + 0.5) * box, y + 14, fmt(label), "tick", "middle"))
    if missing:
        out.append(
            svg.rect(plot.right - aside + 12, y - 10, 14, 10, "cell-null", attrs=_fill(hatch))
        )
        out.append(svg.text(plot.right - aside + 30, y, missing, "tick"))
    return out
