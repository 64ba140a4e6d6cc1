"""The memory sections, as `spark.figures.memory` computes them: days until full (daily peaks
and the forecast cone), the servers, and the skew of keys and bytes across primaries.
"""

from __future__ import annotations

from collections.abc import Callable

from spark import charts
from spark.charts import Band, Bar, Ref
from spark.sections import markup
from spark.sections.markup import Col
from spark.sections.read import Row, as_dict, as_list, as_rows, as_strings, as_text, dated
from spark.units import (
    DASH,
    finite,
    fmt_bytes,
    fmt_bytes_per_day,
    fmt_count,
    fmt_days,
    fmt_duration,
    fmt_r2,
    fmt_ratio,
    fmt_share,
    fmt_yes,
    plural,
)

_SLOTS = 16384


def forecast(summary: Row) -> str:
    f = as_dict(summary.get("forecast"))
    enough = f.get("status") == "ok"
    note = ""
    if not enough:
        note = markup.callout(
            f"Not enough history for a forecast: {plural(f.get('days_of_history'), 'day')} "
            f"of the {fmt_count(f.get('min_days'))} needed. The daily peaks are drawn; "
            "no trend is fitted.",
            "info",
        )
    unreached = "not reached (not growing, or no fit)" if enough else DASH

    def until(key: str) -> str:
        return unreached if finite(f.get(key)) is None else fmt_days(f.get(key))

    history = f"{fmt_count(f.get('days_of_history'))} (at least {fmt_count(f.get('min_days'))})"
    facts = [
        ("Days to the headroom line", until("days_to_headroom")),
        ("Days to capacity", until("days_to_capacity")),
        ("Growth", fmt_bytes_per_day(f.get("slope_bytes_per_day"))),
        ("Fit (R²)", fmt_r2(f.get("r2"))),
        ("Days of history", history),
        ("Headroom line", fmt_bytes(f.get("headroom_line"))),
        ("Capacity", fmt_bytes(f.get("capacity"))),
    ]
    points = [(d, p.get("used_memory")) for d, p in dated(as_rows(f.get("points")))]
    bands = dated(as_rows(f.get("cone")))
    cone = [Band(d, b.get("low"), b.get("mid"), b.get("high")) for d, b in bands]
    refs = [Ref("headroom", f.get("headroom_line")), Ref("capacity", f.get("capacity"), "bad")]
    chart = charts.line_chart(
        "forecast",
        "Used memory of all primaries: daily peaks and the forecast cone",
        points,
        cone=cone,
        refs=refs,
        width=1100,
        y_label="used memory",
    )
    return (
        note
        + markup.facts(facts)
        + markup.figure("Used memory, daily peak of all primaries", chart)
    )


def servers(summary: Row) -> str:
    rows = as_rows(summary.get("servers"))
    named = [s for s in rows if s.get("other") is not True]
    headroom = as_dict(summary.get("verdict")).get("memory_headroom")
    share = charts.hbar_chart(
        "server-share",
        "Used memory as a share of capacity, per server, against the headroom",
        [_server_bar(s, "used_share", "over_headroom") for s in named],
        refs=[Ref("headroom", headroom)],
        at_least=1.0,
        width=550,
        x_label="used memory / capacity",
    )
    fragmentation = charts.hbar_chart(
        "server-fragmentation",
        "Memory fragmentation ratio (RSS / used memory) per server",
        [_server_bar(s, "fragmentation", "fragmented") for s in named],
        unit="ratio",
        refs=[Ref("fragmented above", 1.5, "bad")],
        at_least=1.5,
        width=550,
        x_label="RSS / used memory",
    )
    server = Col("Server", "server", numeric=False)
    memory = [
        server,
        Col("Role", "role", numeric=False),
        Col("Used", "used_memory", fmt_bytes),
        Col("Peak", "used_memory_peak", fmt_bytes),
        Col("Capacity", "capacity", fmt_bytes),
        Col("Used share", "used_share", fmt_share, flag=_flag("over_headroom")),
        Col("RSS", "rss", fmt_bytes),
        Col("Fragmentation", "fragmentation", fmt_ratio, flag=_flag("fragmented")),
        Col("AOF", "aof_size", fmt_bytes),
    ]
    load = [
        server,
        Col("Replica of", "primary", numeric=False),
        Col("Keys", "keys", fmt_count),
        Col("Ops/s", "ops_per_sec", fmt_count),
        Col("Clients", "clients", fmt_count),
        Col("Replication lag", "replication_lag_seconds", fmt_duration),
        Col("Slots", "slots", fmt_count),
    ]
    legend = markup.para("In red: above the headroom, or fragmented (ratio above 1.5).")
    figures = markup.figure("Used share per server", share)
    figures += markup.figure("Fragmentation", fragmentation)
    tables = markup.heading("Memory") + markup.table(memory, rows) + legend
    tables += markup.heading("Keys, load and replication") + markup.table(load, rows)
    return f'<div class="charts">{figures}</div>{tables}'


def _flag(key: str) -> Callable[[Row], bool]:
    return lambda row: row.get(key) is True


def _server_bar(server: Row, key: str, flag: str) -> Bar:
    name = as_text(server.get("server"))
    label = name if server.get("role") in (None, "primary") else f"{name} ({server['role']})"
    return Bar(label, server.get(key), flagged=server.get(flag) is True)


def skew(summary: Row) -> str:
    s = as_dict(summary.get("skew"))
    if s.get("applies") is not True:
        return markup.para("One primary: no skew to show.", "empty")
    threshold = finite(s.get("threshold"))
    facts = [
        ("Keys, largest / mean", fmt_ratio(s.get("keys_max_mean"))),
        ("Bytes, largest / mean", fmt_ratio(s.get("bytes_max_mean"))),
        ("Flagged above", fmt_ratio(threshold)),
        ("Flagged", fmt_yes(s.get("flagged"))),
    ]

    def over(row: Row) -> bool:
        ratio = finite(row.get("ratio"))
        return ratio is not None and threshold is not None and ratio > threshold

    table = markup.table(
        [
            Col("Primary", "server", numeric=False),
            Col("Keys", "keys", fmt_count),
            Col("Bytes", "bytes", fmt_bytes),
            Col("Mailboxes", "mailboxes", fmt_count),
            Col("Ratio to the mean", "ratio", fmt_ratio, flag=over),
        ],
        as_rows(s.get("primaries")),
    )
    heat = as_dict(s.get("heatmap"))
    rows = as_strings(heat.get("rows"))
    values = [as_list(v) for v in as_list(heat.get("values"))]
    width = finite(heat.get("columns")) or max((len(v) for v in values), default=0)
    count = min(max(int(width), 0), _SLOTS)
    size = _SLOTS // count if count else _SLOTS
    chart = charts.heatmap(
        "skew-heatmap",
        "Mailbox bytes per slot bucket over the mean of non-empty buckets, per primary",
        rows,
        [str(j * size) for j in range(count)],
        values,
        unit="ratio",
        center=1.0,
        column_every=8,
        width=1100,
        x_label=f"hash slot (buckets of {fmt_count(size)} slots)",
        null_label="not on this primary",
    )
    caption = "Bytes per slot bucket / mean: cold is emptier, hot is fuller"
    return markup.facts(facts) + table + markup.figure(caption, chart)
