"""Inline SVG charts for the capacity page: stdlib only, one builder per kind of chart.

Each builder returns one `<svg class="chart" data-chart=NAME role="img">` with a `<title>`.
Colours are CSS classes (`STYLE`) over custom properties the page sets (`--bg --fg --muted
--grid --frame --neutral --s1`…`--s5 --heat --hot --cold --warn --bad`), so one stylesheet
serves light, dark and print. A value that is None, NaN or infinite is skipped, never drawn;
a chart with nothing to draw is a frame that says "no data".

    svg.py            SVG elements, the outer `<svg>`, the "no data" frame, STYLE
    axes.py           scales, the y axis and grid, axis labels, reference lines, legends
    inputs.py         what the builders take (Ref, Band, Bar, Series, Marker)
    lines.py          line_chart: daily values and a forecast cone
    bars.py           bar_chart, hbar_chart
    distributions.py  ccdf_chart, lorenz_chart
    heatmaps.py       heatmap, shaded from zero or diverging around a centre
    daily.py          daily_bars: stacked bars per day and change-point markers

How numbers are printed, and where ticks fall, is `spark.units`; its formats are named here
too, as the charts print them.
"""

from __future__ import annotations

from spark.charts.bars import bar_chart, hbar_chart
from spark.charts.daily import daily_bars
from spark.charts.distributions import ccdf_chart, lorenz_chart
from spark.charts.heatmaps import heatmap
from spark.charts.inputs import Band, Bar, Marker, Ref, Series
from spark.charts.lines import line_chart
from spark.charts.svg import HEIGHT, STYLE, WIDTH
from spark.units import (
    DASH,
    FORMATS,
    TICKS,
    Fmt,
    Unit,
    finite,
    fmt_bytes,
    fmt_compact,
    fmt_count,
    fmt_day,
    fmt_duration,
    fmt_ratio,
    fmt_share,
)

__all__ = [
    "DASH",
    "FORMATS",
    "HEIGHT",
    "STYLE",
    "TICKS",
    "WIDTH",
    "Band",
    "Bar",
    "Fmt",
    "Marker",
    "Ref",
    "Series",
    "Unit",
    "bar_chart",
    "ccdf_chart",
    "daily_bars",
    "finite",
    "fmt_bytes",
    "fmt_compact",
    "fmt_count",
    "fmt_day",
    "fmt_duration",
    "fmt_ratio",
    "fmt_share",
    "hbar_chart",
    "heatmap",
    "line_chart",
    "lorenz_chart",
]
