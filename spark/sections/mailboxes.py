"""The mailbox sections, as `spark.figures.mailboxes` computes them: sizes (how messages and
bytes spread over mailboxes), ages of the oldest message, staleness, messages in flight, dead
letters, and backlogs behind live sockets.
"""

from __future__ import annotations

from typing import Any

from spark import charts
from spark.charts import Bar
from spark.sections import markup
from spark.sections.markup import Col
from spark.sections.read import Row, as_dict, as_list, as_rows, as_strings, dated
from spark.units import (
    fmt_bytes,
    fmt_count,
    fmt_duration,
    fmt_per_day,
    fmt_r2,
    fmt_share,
    fmt_yes,
    plural,
)


def sizes(summary: Row) -> str:
    m = as_dict(summary.get("mailboxes"))
    facts = [
        ("Mailboxes", fmt_count(m.get("count"))),
        ("DIDComm", fmt_count(m.get("didcomm"))),
        ("of them DIDComm v2 wallets", fmt_count(m.get("didcomm_v2"))),
        ("mqs", fmt_count(m.get("mqs"))),
        ("Gini of bytes", fmt_r2(m.get("gini"))),
        ("Bytes held by the top 1 %", fmt_share(m.get("top1_bytes_share"))),
    ]
    quantiles = [
        {"what": "messages", **as_dict(m.get("messages"))},
        {"what": "bytes", **{k: fmt_bytes(v) for k, v in as_dict(m.get("bytes")).items()}},
    ]
    stats = markup.table(
        [Col("Per mailbox", "what", numeric=False)]
        + [Col(k, k) for k in ("total", "p50", "p95", "p99", "max")],
        quantiles,
    )
    ccdf = charts.ccdf_chart(
        "mailbox-ccdf",
        "Share of mailboxes holding at least n messages",
        [(p.get("messages"), p.get("share")) for p in as_rows(m.get("ccdf"))],
        width=700,
        x_label="messages in the mailbox (n)",
        y_label="share of mailboxes",
    )
    lorenz = charts.lorenz_chart(
        "mailbox-lorenz",
        "Lorenz curve of bytes over mailboxes, smallest first",
        [(p.get("mailboxes"), p.get("bytes")) for p in as_rows(m.get("lorenz"))],
        x_label="share of mailboxes",
        y_label="share of bytes",
    )
    gini = f"Gini {fmt_r2(m.get('gini'))} · top 1 % hold {fmt_share(m.get('top1_bytes_share'))}"
    figures = markup.figure("Mailboxes by messages held", ccdf)
    figures += markup.figure(f"Bytes: {gini}", lorenz)
    heaviest = markup.table(
        [
            Col("Mailbox", "mailbox", numeric=False, mono=True),
            Col("Namespace", "namespace", numeric=False),
            Col("Messages", "messages", fmt_count),
            Col("Bytes", "bytes", fmt_bytes),
            Col("Oldest message", "oldest_age_seconds", fmt_duration),
            Col("Live socket", "live", fmt_yes, numeric=False),
        ],
        as_rows(m.get("heaviest")),
    )
    return (
        markup.facts(facts)
        + stats
        + f'<div class="charts">{figures}</div>'
        + markup.heading("Heaviest mailboxes, by bytes")
        + heaviest
    )


def ages(summary: Row) -> str:
    a = as_dict(summary.get("age"))
    buckets = as_strings(a.get("buckets"))
    days = dated(as_rows(a.get("days")))
    counts: list[list[Any]] = [as_list(r.get("counts")) for _, r in days]
    chart = charts.heatmap(
        "age-heatmap",
        "Mailboxes by the age of their oldest message, per day (last snapshot of the day)",
        [d.isoformat() for d, _ in days],
        buckets,
        counts,
        log=True,
        labels=True,
        width=820,
        x_label="age of the oldest message",
    )
    past = plural(a.get("past_horizon"), "mailbox")
    latest = ""
    if days and buckets:
        row = {"day": days[-1][0].isoformat(), **dict(zip(buckets, counts[-1], strict=False))}
        columns = [Col("Day", "day", numeric=False)] + [Col(b, b, fmt_count) for b in buckets]
        latest = markup.heading("The latest day") + markup.table(columns, [row])
    facts = markup.facts([("Oldest message past its retention", past)])
    return facts + markup.figure("Mailboxes by age of the oldest message", chart) + latest


def staleness(summary: Row) -> str:
    rows = as_rows(summary.get("staleness"))
    bars = [
        Bar(f"{fmt_count(r.get('days'))} days", r.get("mailboxes"), note=fmt_bytes(r.get("bytes")))
        for r in rows
    ]
    chart = charts.bar_chart(
        "staleness",
        "Mailboxes holding messages with nothing delivered for 7, 30 and 90 days",
        bars,
        x_label="nothing delivered for at least",
        y_label="mailboxes",
    )
    note = markup.para("Mailboxes holding messages that had nothing delivered for that long.")
    return note + markup.figure("Stale mailboxes and their bytes", chart)


def inflight(summary: Row) -> str:
    i = as_dict(summary.get("inflight"))
    facts = [
        ("Messages in flight", fmt_count(i.get("messages"))),
        ("Mailboxes with messages in flight", fmt_count(i.get("mailboxes"))),
        ("Most deliveries of one message", fmt_count(i.get("max_deliveries"))),
        ("Mailboxes, a message handed out 3+ times", fmt_count(i.get("redelivered_mailboxes"))),
    ]
    histogram = as_rows(i.get("histogram"))
    chart = charts.bar_chart(
        "inflight-deliveries",
        "In-flight messages by how many times they were handed out",
        [Bar(fmt_count(h.get("deliveries")), h.get("messages")) for h in histogram],
        x_label="times handed out",
        y_label="messages",
    )
    return markup.facts(facts) + markup.figure("In-flight messages by deliveries", chart)


def dead_letters(summary: Row) -> str:
    columns = [
        Col("Queue", "queue", numeric=False),
        Col("Messages", "messages", fmt_count),
        Col("Bytes", "bytes", fmt_bytes),
        Col("Oldest message", "oldest_age_seconds", fmt_duration),
        Col("Source queues", "sources", fmt_count),
        Col("Growth", "growth_per_day", fmt_per_day),
    ]
    return markup.table(columns, as_rows(summary.get("dead_letters")), "No dead-letter queues.")


def live(summary: Row) -> str:
    sockets = as_dict(summary.get("live"))
    facts = [
        ("Open sockets", fmt_count(sockets.get("sockets"))),
        ("Sockets whose mailbox has a backlog", fmt_count(sockets.get("with_backlog"))),
        ("Messages in those backlogs", fmt_count(sockets.get("backlog_messages"))),
    ]
    by_node = markup.table(
        [
            Col("Node", "node", numeric=False),
            Col("Sockets", "sockets", fmt_count),
            Col("With backlog", "with_backlog", fmt_count),
        ],
        as_rows(sockets.get("by_node")),
    )
    worst = markup.table(
        [
            Col("Mailbox", "mailbox", numeric=False, mono=True),
            Col("Node", "node", numeric=False),
            Col("Messages", "messages", fmt_count),
            Col("Oldest message", "oldest_age_seconds", fmt_duration),
        ],
        as_rows(sockets.get("worst")),
        "No live socket has a backlog.",
    )
    return (
        markup.facts(facts)
        + markup.heading("By node")
        + by_node
        + markup.heading("Largest backlogs behind a live socket")
        + worst
    )
