"""The throughput section, as `spark.figures.flow` computes it: messages per day and the change
points where a series stepped up or down.
"""

from __future__ import annotations

from spark import charts
from spark.charts import Marker, Series
from spark.sections import markup
from spark.sections.markup import Col
from spark.sections.read import Row, as_dict, as_rows, as_text, dated
from spark.units import DASH, finite, fmt_per_day, fmt_rate, fmt_ratio

# Throughput bars per day: what came in, what was handed out, how messages left.
_THROUGHPUT = (("added",), ("delivered",), ("acknowledged", "expired", "dead_lettered"))


def throughput(summary: Row) -> str:
    t = as_dict(summary.get("throughput"))
    days = dated(as_rows(t.get("days")))
    groups = [
        [Series(key.replace("_", " "), [r.get(key) for _, r in days]) for key in group]
        for group in _THROUGHPUT
    ]
    changes = as_rows(t.get("change_points"))
    markers = [
        Marker(d, f"{as_text(c.get('series'))} \N{MULTIPLICATION SIGN}{_change(c)}")
        for d, c in dated(changes)
    ]
    chart = charts.daily_bars(
        "throughput",
        "Messages per day: added, delivered, and acknowledged, expired or dead-lettered",
        [d for d, _ in days],
        groups,
        markers=markers,
        width=1100,
        y_label="messages per day",
    )
    table = markup.table(
        [
            Col("From", "date", numeric=False),
            Col("Series", "series", numeric=False),
            Col("Before", "before", fmt_per_day),
            Col("After", "after", fmt_per_day),
        ],
        changes,
        "No change points.",
    )
    peak = markup.facts([("Peak forwards", fmt_rate(t.get("peak_forwards_per_second")))])
    return peak + markup.figure("Messages per day", chart) + markup.heading("Change points") + table


def _change(change: Row) -> str:
    before, after = finite(change.get("before")), finite(change.get("after"))
    return fmt_ratio(after / before) if before and after is not None else DASH
