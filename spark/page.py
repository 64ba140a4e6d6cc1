"""The capacity report as one self-contained HTML page: the figures of SUMMARY.md drawn, none
computed here, nothing fetched from elsewhere (an SRE may open it offline, or print it).

Any figure may be null and any list empty: the page then says "—" or "no data".
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from spark import charts
from spark.charts import (
    DASH,
    Band,
    Bar,
    Marker,
    Ref,
    Series,
    finite,
    fmt_bytes,
    fmt_count,
    fmt_duration,
    fmt_ratio,
    fmt_share,
)

Row = dict[str, Any]
Fmt = Callable[[object], str]

_STATUS = {
    "under": ("Under-provisioned", "bad"),
    "right": ("Right-sized", "good"),
    "over": ("Over-provisioned", "warn"),
    "undecided": ("Undecided", "muted"),
}
# Throughput bars per day: what came in, what was handed out, how messages left.
_THROUGHPUT = (("added",), ("delivered",), ("acknowledged", "expired", "dead_lettered"))
_SLOTS = 16384

_CSS = """
:root{color-scheme:light dark;--bg:#fff;--fg:#1b2230;--muted:#5b6576;--panel:#f3f5f8;
--grid:#e3e7ed;--frame:#b3bbc7;--neutral:#e9edf2;--s1:#2a67c4;--s2:#d4761f;--s3:#1f8f63;
--s4:#8650c8;--s5:#b8404e;--heat:#2a67c4;--hot:#d9481c;--cold:#2a67c4;--good:#1d7a4a;
--warn:#9a6100;--bad:#c0392b}
@media (prefers-color-scheme:dark){:root{--bg:#12161d;--fg:#e4e8ee;--muted:#9aa4b4;
--panel:#1b212b;--grid:#2a313d;--frame:#566175;--neutral:#232a36;--s1:#6ea6ff;--s2:#f2a65a;
--s3:#4cd69d;--s4:#b797f5;--s5:#f2808c;--heat:#6ea6ff;--hot:#ff8a5c;--cold:#6ea6ff;
--good:#5fd394;--warn:#f3c25b;--bad:#ff7f73}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1200px;margin:0 auto;padding:24px 28px 64px}
h1{font-size:1.9rem;margin:0 0 .2rem}
h2{font-size:1.35rem;margin:0 0 .8rem;padding-top:.6rem;border-top:1px solid var(--grid)}
section{margin:2.2rem 0}
a{color:var(--s1)}
.history{color:var(--muted);margin:0 0 .6rem}
nav{font-size:.9rem;display:flex;flex-wrap:wrap;gap:.2rem .9rem;margin:.6rem 0 1rem}
.callout{border-left:4px solid var(--warn);background:var(--panel);padding:.6rem .9rem;
margin:.6rem 0;border-radius:0 6px 6px 0}
.callout.info{border-left-color:var(--s1)}
.verdict{display:flex;flex-wrap:wrap;gap:1rem 2rem;align-items:center}
.badge{font-size:2.1rem;font-weight:700;margin:0;padding:.2em .7em;border-radius:10px;
border:3px solid currentColor;background:color-mix(in srgb,currentColor 12%,transparent)}
.good{color:var(--good)}.warn{color:var(--warn)}.bad{color:var(--bad)}.muted{color:var(--muted)}
.reasons{margin:0;padding-left:1.2rem;max-width:44rem}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(220px,1fr));gap:12px;
margin:1.2rem 0}
.card{background:var(--panel);border-radius:8px;padding:.7rem .9rem}
.card .label,.card .sub{color:var(--muted);font-size:.85rem}
.card .big{font-size:1.9rem;font-weight:700;line-height:1.25}
dl.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(230px,1fr));
gap:.5rem 1.2rem;margin:.8rem 0 1rem}
dl.facts div{border-bottom:1px solid var(--grid);padding-bottom:.25rem}
dl.facts dt{color:var(--muted);font-size:.85rem}
dl.facts dd{margin:0;font-weight:600;font-variant-numeric:tabular-nums}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-size:.9rem;margin:.4rem 0 1rem;
font-variant-numeric:tabular-nums}
th,td{padding:.3rem .6rem;border-bottom:1px solid var(--grid);text-align:left;
white-space:nowrap}
th{color:var(--muted);font-weight:600}
.num{text-align:right}
td.flag{color:var(--bad);font-weight:700}
tr.other td{font-style:italic;color:var(--muted);border-top:2px solid var(--frame);
background:var(--panel)}
figure{margin:.8rem 0 1.2rem}
figcaption{font-weight:600;margin-bottom:.3rem}
.charts{display:flex;flex-wrap:wrap;gap:1rem 2rem;align-items:flex-start}
td.id{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.85em}
.empty,.note{color:var(--muted)}
.empty{font-style:italic}
@media print{
:root{color-scheme:light;--bg:#fff;--fg:#000;--muted:#444;--panel:#fff;--grid:#ccc;
--frame:#888;--neutral:#eee;--s1:#2a67c4;--s2:#d4761f;--s3:#1f8f63;--s4:#8650c8;--s5:#b8404e;
--heat:#2a67c4;--hot:#d9481c;--cold:#2a67c4;--good:#1d7a4a;--warn:#9a6100;--bad:#c0392b}
body{background:none;font-size:10pt}main{max-width:none;padding:0}nav{display:none}
section{break-before:page}section#verdict{break-before:auto}
.callout,.card,.badge,tr.other td{background:none}
figure,table,.cards{break-inside:avoid}.scroll{overflow:visible}
th{white-space:normal}table{font-size:8.5pt}svg.chart{max-width:100%;height:auto}}
"""


def render(summary: dict[str, Any]) -> str:
    """The whole page: header and notices, then one section per group of figures."""
    history = _d(summary.get("history"))
    title = f"Capacity report · {_text(history.get('last_date'))}"
    body = "".join(_section(key, heading, draw(summary)) for key, heading, draw in _SECTIONS)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        f"<title>{_e(title)}</title><style>{_CSS}{charts.STYLE}</style></head>"
        f"<body><main>{_header(summary)}{body}</main>"
        f'<script type="application/json" id="summary">{_embedded(summary)}</script>'
        "</body></html>\n"
    )


# Reading the summary defensively --------------------------------------------------------------


def _d(value: object) -> Row:
    return value if isinstance(value, dict) else {}


def _rows(value: object) -> list[Row]:
    return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _strings(value: object) -> list[str]:
    return [str(v) for v in value if v is not None] if isinstance(value, list) else []


def _text(value: object) -> str:
    if value is None or isinstance(value, dict | list):
        return DASH
    if isinstance(value, float | int) and not isinstance(value, bool):
        return fmt_count(value)
    return str(value)


def _day(value: object) -> date | None:
    try:
        return date.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _dated(rows: list[Row]) -> list[tuple[date, Row]]:
    return [(d, r) for r in rows if (d := _day(r.get("date"))) is not None]


def _when(value: object) -> str:
    """An ISO 8601 UTC time as 2026-11-24 03:00 UTC."""
    if not isinstance(value, str):
        return DASH
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    moment = moment.astimezone(UTC) if moment.tzinfo else moment
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _days(value: object) -> str:
    v = finite(value)
    return DASH if v is None else fmt_duration(v * 86400)


def _unit(fmt: Fmt, unit: str) -> Fmt:
    return lambda v: DASH if finite(v) is None else f"{fmt(v)} {unit}"


_rate = _unit(fmt_count, "/s")
_per_day = _unit(fmt_count, "/day")
_bytes_per_day = _unit(fmt_bytes, "/day")


def _r2(value: object) -> str:
    v = finite(value)
    return DASH if v is None else f"{v:.2f}"


def _yes(value: object) -> str:
    return ("yes" if value else "no") if isinstance(value, bool) else DASH


def _plural(value: object, word: str) -> str:
    return f"{fmt_count(value)} {word}{'' if finite(value) == 1 else 's'}"


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _embedded(summary: dict[str, Any]) -> str:
    """The summary as JSON that cannot end the script element it sits in."""
    text = json.dumps(_clean(summary), ensure_ascii=False, default=str)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _clean(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


# HTML pieces ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Col:
    heading: str
    key: str
    fmt: Fmt = _text
    numeric: bool = True
    flag: Callable[[Row], bool] | None = None
    mono: bool = False


def _table(columns: Sequence[_Col], rows: Sequence[Row], empty: str = "no data") -> str:
    """A table whose `other` row, the sum of what the cap cut, is set apart."""
    if not rows:
        return f'<p class="empty">{_e(empty)}</p>'
    head = "".join(f'<th scope="col"{_classes(c)}>{_e(c.heading)}</th>' for c in columns)
    body = "".join(_tr(columns, row) for row in rows)
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="scroll">{table}</div>'


def _classes(col: _Col, flagged: bool = False) -> str:
    pairs = (("num", col.numeric), ("id", col.mono), ("flag", flagged))
    names = [name for name, on in pairs if on]
    return f' class="{" ".join(names)}"' if names else ""


def _tr(columns: Sequence[_Col], row: Row) -> str:
    other = row.get("other") is True
    cells = []
    for i, col in enumerate(columns):
        text = _other_label(row) if other and i == 0 else col.fmt(row.get(col.key))
        flagged = not other and col.flag is not None and col.flag(row)
        cells.append(f"<td{_classes(col, flagged)}>{_e(text)}</td>")
    return ('<tr class="other">' if other else "<tr>") + "".join(cells) + "</tr>"


def _other_label(row: Row) -> str:
    count = finite(row.get("count"))
    return "other" if count is None else f"other ({fmt_count(count)} more)"


def _facts(items: Sequence[tuple[str, str]]) -> str:
    inner = "".join(f"<div><dt>{_e(k)}</dt><dd>{_e(v)}</dd></div>" for k, v in items)
    return f'<dl class="facts">{inner}</dl>'


def _figure(caption: str, svg: str) -> str:
    return f"<figure><figcaption>{_e(caption)}</figcaption>{svg}</figure>"


def _callout(text: str, tone: str = "") -> str:
    return f'<div class="callout {tone}" role="note">{_e(text)}</div>'


def _para(text: str, cls: str = "note") -> str:
    return f'<p class="{cls}">{_e(text)}</p>'


def _section(key: str, heading: str, inner: str) -> str:
    return f'<section id="{key}"><h2>{_e(heading)}</h2>{inner}</section>'


def _heading(text: str) -> str:
    return f"<h3>{_e(text)}</h3>"


# Header ---------------------------------------------------------------------------------------


def _header(summary: Row) -> str:
    history = _d(summary.get("history"))
    first, last = history.get("first_date"), history.get("last_date")
    gaps = _strings(history.get("gaps"))
    days = f"{fmt_count(history.get('days_with_data'))} of "
    days += _plural(history.get("days_requested"), "day") + " with data"
    parts = [
        f"{_text(first)} to {_text(last)}" if first or last else "no snapshots",
        days,
        _plural(history.get("snapshots"), "snapshot"),
        f"gaps: {_listed(gaps)}" if gaps else "no gaps",
        f"latest snapshot {_when(history.get('latest_snapshot_time'))}",
        f"mode {_text(history.get('mode'))}",
        f"history {_text(history.get('path'))}",
        f"generated {_when(summary.get('generated_at'))}",
    ]
    notices = "".join(_callout(n) for n in _strings(summary.get("notices")))
    nav = "".join(f'<a href="#{key}">{_e(heading)}</a>' for key, heading, _ in _SECTIONS)
    history_line = f'<p class="history">{_e(" · ".join(parts))}</p>'
    return f"<header><h1>Capacity report</h1>{history_line}{notices}<nav>{nav}</nav></header>"


def _listed(items: Sequence[str], cap: int = 8) -> str:
    more = f" and {len(items) - cap} more" if len(items) > cap else ""
    return ", ".join(items[:cap]) + more


# Verdict and forecast -------------------------------------------------------------------------


def _verdict(summary: Row) -> str:
    v = _d(summary.get("verdict"))
    status = v.get("status")
    label, tone = _STATUS.get(str(status), _STATUS["undecided"])
    reasons = "".join(f"<li>{_e(r)}</li>" for r in _strings(v.get("reasons")))
    headroom = fmt_share(v.get("memory_headroom"))
    fits = v.get("n_plus_one_fits")
    primaries = f"now {fmt_count(v.get('primaries_now'))} · N+1 at {headroom} headroom"
    cards = [
        _card("Recommended primaries", fmt_count(v.get("recommended_primaries")), primaries),
        _card(
            "Memory per primary",
            fmt_bytes(v.get("recommended_memory_per_primary")),
            f"now {fmt_bytes(v.get('memory_per_primary'))}",
        ),
        _card(
            "N+1 today",
            ("fits" if fits else "does not fit") if isinstance(fits, bool) else DASH,
            "the primaries now, less the largest, within the headroom",
        ),
        _card(
            "Recommended nodes",
            fmt_count(v.get("recommended_nodes")),
            f"now {fmt_count(v.get('nodes_now'))} · N+1, at least 2",
        ),
    ]
    days = v.get("horizon_days")
    horizon = f"in {_plural(days, 'day')}" if finite(days) is not None else "at the horizon"
    facts = [
        ("Peak used memory, all primaries", fmt_bytes(v.get("peak_used_memory"))),
        (f"Projected {horizon}", fmt_bytes(v.get("projected_used_memory"))),
        ("Memory headroom target", headroom),
        ("Peak forwards", _rate(v.get("peak_forwards_per_second"))),
        ("Forwards one node carries", _rate(v.get("node_forwards_per_second"))),
    ]
    badge = f'<p class="badge {tone}" data-status="{_e(_text(status))}">{_e(label)}</p>'
    reasons_list = f'<ul class="reasons">{reasons or "<li>no reasons given</li>"}</ul>'
    cards_html = f'<div class="cards">{"".join(cards)}</div>'
    return f'<div class="verdict">{badge}{reasons_list}</div>{cards_html}{_facts(facts)}'


def _card(label: str, big: str, sub: str) -> str:
    return (
        f'<div class="card"><div class="label">{_e(label)}</div>'
        f'<div class="big">{_e(big)}</div><div class="sub">{_e(sub)}</div></div>'
    )


def _forecast(summary: Row) -> str:
    f = _d(summary.get("forecast"))
    enough = f.get("status") == "ok"
    note = ""
    if not enough:
        note = _callout(
            f"Not enough history for a forecast: {_plural(f.get('days_of_history'), 'day')} "
            f"of the {fmt_count(f.get('min_days'))} needed. The daily peaks are drawn; "
            "no trend is fitted.",
            "info",
        )
    unreached = "not reached (not growing, or no fit)" if enough else DASH

    def until(key: str) -> str:
        return unreached if finite(f.get(key)) is None else _days(f.get(key))

    history = f"{fmt_count(f.get('days_of_history'))} (at least {fmt_count(f.get('min_days'))})"
    facts = [
        ("Days to the headroom line", until("days_to_headroom")),
        ("Days to capacity", until("days_to_capacity")),
        ("Growth", _bytes_per_day(f.get("slope_bytes_per_day"))),
        ("Fit (R²)", _r2(f.get("r2"))),
        ("Days of history", history),
        ("Headroom line", fmt_bytes(f.get("headroom_line"))),
        ("Capacity", fmt_bytes(f.get("capacity"))),
    ]
    points = [(d, p.get("used_memory")) for d, p in _dated(_rows(f.get("points")))]
    bands = _dated(_rows(f.get("cone")))
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
    return note + _facts(facts) + _figure("Used memory, daily peak of all primaries", chart)


# Servers and mailboxes ------------------------------------------------------------------------


def _servers(summary: Row) -> str:
    servers = _rows(summary.get("servers"))
    named = [s for s in servers if s.get("other") is not True]
    headroom = _d(summary.get("verdict")).get("memory_headroom")
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
    server = _Col("Server", "server", numeric=False)
    memory = [
        server,
        _Col("Role", "role", numeric=False),
        _Col("Used", "used_memory", fmt_bytes),
        _Col("Peak", "used_memory_peak", fmt_bytes),
        _Col("Capacity", "capacity", fmt_bytes),
        _Col("Used share", "used_share", fmt_share, flag=_flag("over_headroom")),
        _Col("RSS", "rss", fmt_bytes),
        _Col("Fragmentation", "fragmentation", fmt_ratio, flag=_flag("fragmented")),
        _Col("AOF", "aof_size", fmt_bytes),
    ]
    load = [
        server,
        _Col("Replica of", "primary", numeric=False),
        _Col("Keys", "keys", fmt_count),
        _Col("Ops/s", "ops_per_sec", fmt_count),
        _Col("Clients", "clients", fmt_count),
        _Col("Replication lag", "replication_lag_seconds", fmt_duration),
        _Col("Slots", "slots", fmt_count),
    ]
    legend = _para("In red: above the headroom, or fragmented (ratio above 1.5).")
    figures = _figure("Used share per server", share) + _figure("Fragmentation", fragmentation)
    tables = _heading("Memory") + _table(memory, servers) + legend
    tables += _heading("Keys, load and replication") + _table(load, servers)
    return f'<div class="charts">{figures}</div>{tables}'


def _flag(key: str) -> Callable[[Row], bool]:
    return lambda row: row.get(key) is True


def _server_bar(server: Row, key: str, flag: str) -> Bar:
    name = _text(server.get("server"))
    label = name if server.get("role") in (None, "primary") else f"{name} ({server['role']})"
    return Bar(label, server.get(key), flagged=server.get(flag) is True)


def _mailboxes(summary: Row) -> str:
    m = _d(summary.get("mailboxes"))
    facts = [
        ("Mailboxes", fmt_count(m.get("count"))),
        ("DIDComm", fmt_count(m.get("didcomm"))),
        ("mqs", fmt_count(m.get("mqs"))),
        ("Gini of bytes", _r2(m.get("gini"))),
        ("Bytes held by the top 1 %", fmt_share(m.get("top1_bytes_share"))),
    ]
    quantiles = [
        {"what": "messages", **_d(m.get("messages"))},
        {"what": "bytes", **{k: fmt_bytes(v) for k, v in _d(m.get("bytes")).items()}},
    ]
    stats = _table(
        [_Col("Per mailbox", "what", numeric=False)]
        + [_Col(k, k) for k in ("total", "p50", "p95", "p99", "max")],
        quantiles,
    )
    ccdf = charts.ccdf_chart(
        "mailbox-ccdf",
        "Share of mailboxes holding at least n messages",
        [(p.get("messages"), p.get("share")) for p in _rows(m.get("ccdf"))],
        width=700,
        x_label="messages in the mailbox (n)",
        y_label="share of mailboxes",
    )
    lorenz = charts.lorenz_chart(
        "mailbox-lorenz",
        "Lorenz curve of bytes over mailboxes, smallest first",
        [(p.get("mailboxes"), p.get("bytes")) for p in _rows(m.get("lorenz"))],
        x_label="share of mailboxes",
        y_label="share of bytes",
    )
    gini = f"Gini {_r2(m.get('gini'))} · top 1 % hold {fmt_share(m.get('top1_bytes_share'))}"
    figures = _figure("Mailboxes by messages held", ccdf) + _figure(f"Bytes: {gini}", lorenz)
    heaviest = _table(
        [
            _Col("Mailbox", "mailbox", numeric=False, mono=True),
            _Col("Namespace", "namespace", numeric=False),
            _Col("Messages", "messages", fmt_count),
            _Col("Bytes", "bytes", fmt_bytes),
            _Col("Oldest message", "oldest_age_seconds", fmt_duration),
            _Col("Live socket", "live", _yes, numeric=False),
        ],
        _rows(m.get("heaviest")),
    )
    return (
        _facts(facts)
        + stats
        + f'<div class="charts">{figures}</div>'
        + _heading("Heaviest mailboxes, by bytes")
        + heaviest
    )


# Age, staleness, in flight, dead letters ------------------------------------------------------


def _age(summary: Row) -> str:
    a = _d(summary.get("age"))
    buckets = _strings(a.get("buckets"))
    days = _dated(_rows(a.get("days")))
    counts: list[list[Any]] = [_list(r.get("counts")) for _, r in days]
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
    past = _plural(a.get("past_horizon"), "mailbox")
    latest = ""
    if days and buckets:
        row = {"day": days[-1][0].isoformat(), **dict(zip(buckets, counts[-1], strict=False))}
        columns = [_Col("Day", "day", numeric=False)] + [_Col(b, b, fmt_count) for b in buckets]
        latest = _heading("The latest day") + _table(columns, [row])
    facts = _facts([("Oldest message past its retention", past)])
    return facts + _figure("Mailboxes by age of the oldest message", chart) + latest


def _staleness(summary: Row) -> str:
    rows = _rows(summary.get("staleness"))
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
    note = _para("Mailboxes holding messages that had nothing delivered for that long.")
    return note + _figure("Stale mailboxes and their bytes", chart)


def _inflight(summary: Row) -> str:
    i = _d(summary.get("inflight"))
    facts = [
        ("Messages in flight", fmt_count(i.get("messages"))),
        ("Mailboxes with messages in flight", fmt_count(i.get("mailboxes"))),
        ("Most deliveries of one message", fmt_count(i.get("max_deliveries"))),
        ("Mailboxes, a message handed out 3+ times", fmt_count(i.get("redelivered_mailboxes"))),
    ]
    histogram = _rows(i.get("histogram"))
    chart = charts.bar_chart(
        "inflight-deliveries",
        "In-flight messages by how many times they were handed out",
        [Bar(fmt_count(h.get("deliveries")), h.get("messages")) for h in histogram],
        x_label="times handed out",
        y_label="messages",
    )
    return _facts(facts) + _figure("In-flight messages by deliveries", chart)


def _dead_letters(summary: Row) -> str:
    columns = [
        _Col("Queue", "queue", numeric=False),
        _Col("Messages", "messages", fmt_count),
        _Col("Bytes", "bytes", fmt_bytes),
        _Col("Oldest message", "oldest_age_seconds", fmt_duration),
        _Col("Source queues", "sources", fmt_count),
        _Col("Growth", "growth_per_day", _per_day),
    ]
    return _table(columns, _rows(summary.get("dead_letters")), "No dead-letter queues.")


# Live sockets, skew, throughput, coverage -----------------------------------------------------


def _live(summary: Row) -> str:
    live = _d(summary.get("live"))
    facts = [
        ("Open sockets", fmt_count(live.get("sockets"))),
        ("Sockets whose mailbox has a backlog", fmt_count(live.get("with_backlog"))),
        ("Messages in those backlogs", fmt_count(live.get("backlog_messages"))),
    ]
    by_node = _table(
        [
            _Col("Node", "node", numeric=False),
            _Col("Sockets", "sockets", fmt_count),
            _Col("With backlog", "with_backlog", fmt_count),
        ],
        _rows(live.get("by_node")),
    )
    worst = _table(
        [
            _Col("Mailbox", "mailbox", numeric=False, mono=True),
            _Col("Node", "node", numeric=False),
            _Col("Messages", "messages", fmt_count),
            _Col("Oldest message", "oldest_age_seconds", fmt_duration),
        ],
        _rows(live.get("worst")),
        "No live socket has a backlog.",
    )
    return (
        _facts(facts)
        + _heading("By node")
        + by_node
        + _heading("Largest backlogs behind a live socket")
        + worst
    )


def _skew(summary: Row) -> str:
    s = _d(summary.get("skew"))
    if s.get("applies") is not True:
        return _para("One primary: no skew to show.", "empty")
    threshold = finite(s.get("threshold"))
    facts = [
        ("Keys, largest / mean", fmt_ratio(s.get("keys_max_mean"))),
        ("Bytes, largest / mean", fmt_ratio(s.get("bytes_max_mean"))),
        ("Flagged above", fmt_ratio(threshold)),
        ("Flagged", _yes(s.get("flagged"))),
    ]

    def over(row: Row) -> bool:
        ratio = finite(row.get("ratio"))
        return ratio is not None and threshold is not None and ratio > threshold

    table = _table(
        [
            _Col("Primary", "server", numeric=False),
            _Col("Keys", "keys", fmt_count),
            _Col("Bytes", "bytes", fmt_bytes),
            _Col("Mailboxes", "mailboxes", fmt_count),
            _Col("Ratio to the mean", "ratio", fmt_ratio, flag=over),
        ],
        _rows(s.get("primaries")),
    )
    heat = _d(s.get("heatmap"))
    rows = _strings(heat.get("rows"))
    values = [_list(v) for v in _list(heat.get("values"))]
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
    return _facts(facts) + table + _figure(caption, chart)


def _throughput(summary: Row) -> str:
    t = _d(summary.get("throughput"))
    days = _dated(_rows(t.get("days")))
    groups = [
        [Series(key.replace("_", " "), [r.get(key) for _, r in days]) for key in group]
        for group in _THROUGHPUT
    ]
    changes = _rows(t.get("change_points"))
    markers = [
        Marker(d, f"{_text(c.get('series'))} \N{MULTIPLICATION SIGN}{_change(c)}")
        for d, c in _dated(changes)
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
    table = _table(
        [
            _Col("From", "date", numeric=False),
            _Col("Series", "series", numeric=False),
            _Col("Before", "before", _per_day),
            _Col("After", "after", _per_day),
        ],
        changes,
        "No change points.",
    )
    peak = _facts([("Peak forwards", _rate(t.get("peak_forwards_per_second")))])
    return peak + _figure("Messages per day", chart) + _heading("Change points") + table


def _change(change: Row) -> str:
    before, after = finite(change.get("before")), finite(change.get("after"))
    return fmt_ratio(after / before) if before and after is not None else DASH


def _coverage(summary: Row) -> str:
    c = _d(summary.get("coverage"))
    facts = [
        ("Snapshot", _when(c.get("snapshot_time"))),
        ("Read from", _text(c.get("read_from"))),
        ("Mailboxes read", fmt_count(c.get("mailboxes_read"))),
        ("Mailboxes in the books", fmt_count(c.get("mailboxes_in_books"))),
        ("Share read", fmt_share(c.get("share_read"))),
        ("Memory", _text(c.get("memory"))),
        ("Memory sample rate", fmt_share(c.get("memory_sample_rate"))),
        ("Mailboxes in the memory sample", fmt_count(c.get("memory_sampled_mailboxes"))),
        ("Estimated mailbox memory", fmt_bytes(c.get("estimated_mailbox_memory"))),
        ("Replica lag", fmt_duration(c.get("replica_lag_seconds"))),
        ("Replica lag, bytes", fmt_bytes(c.get("replica_lag_bytes"))),
        ("Commands sent", fmt_count(c.get("commands"))),
        ("Time taken", fmt_duration(c.get("duration_seconds"))),
    ]
    return _facts(facts)


_SECTIONS: tuple[tuple[str, str, Callable[[Row], str]], ...] = (
    ("verdict", "Verdict", _verdict),
    ("forecast", "Days until full", _forecast),
    ("servers", "Servers", _servers),
    ("mailboxes", "Mailboxes", _mailboxes),
    ("age", "Age of the oldest message", _age),
    ("staleness", "Stale mailboxes", _staleness),
    ("inflight", "In flight", _inflight),
    ("dead_letters", "Dead letters", _dead_letters),
    ("live", "Live sockets", _live),
    ("skew", "Skew across primaries", _skew),
    ("throughput", "Throughput", _throughput),
    ("coverage", "Coverage", _coverage),
)
