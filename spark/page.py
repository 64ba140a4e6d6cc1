"""The capacity report as one self-contained HTML page: the figures of SUMMARY.md drawn, no
figure computed here, nothing fetched from elsewhere (an SRE may open it offline or print it).

Any figure may be null and any list empty: the page then says "—" or "no data".
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
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
_THROUGHPUT = (
    ("added",),
    ("delivered",),
    ("acknowledged", "expired", "dead_lettered"),
)
_SLOTS = 16384

_CSS = """
:root{color-scheme:light dark;--bg:#fff;--fg:#1b2230;--muted:#5b6576;--panel:#f3f5f8;
--grid:#e3e7ed;--frame:#bfc6d1;--null:#d3d8df;--s1:#2a67c4;--s2:#d4761f;--s3:#1f8f63;
--s4:#8650c8;--s5:#b8404e;--heat:#2a67c4;--cold:#1f8f63;--good:#1d7a4a;--warn:#9a6100;
--bad:#c0392b}
@media (prefers-color-scheme:dark){:root{--bg:#12161d;--fg:#e4e8ee;--muted:#9aa4b4;
--panel:#1b212b;--grid:#2a313d;--frame:#465062;--null:#3a4250;--s1:#6ea6ff;--s2:#f2a65a;
--s3:#4cd69d;--s4:#b797f5;--s5:#f2808c;--heat:#6ea6ff;--cold:#4cd69d;--good:#5fd394;
--warn:#f3c25b;--bad:#ff7f73}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1120px;margin:0 auto;padding:24px 28px 64px}
h1{font-size:1.9rem;margin:0 0 .2rem}
h2{font-size:1.35rem;margin:0 0 .8rem;padding-top:.4rem;border-top:1px solid var(--grid)}
h3{font-size:1rem;margin:1.2rem 0 .4rem}
section{margin:2.2rem 0}
a{color:var(--s1)}
.history{color:var(--muted);margin:0 0 .6rem}
nav{font-size:.9rem;display:flex;flex-wrap:wrap;gap:.2rem .9rem;margin:.4rem 0 1rem}
.callout{border-left:4px solid var(--warn);background:var(--panel);padding:.6rem .9rem;
margin:.6rem 0;border-radius:0 6px 6px 0}
.callout.info{border-left-color:var(--s1)}
.verdict{display:flex;flex-wrap:wrap;gap:1.2rem 2rem;align-items:flex-start}
.badge{font-size:2.1rem;font-weight:750;margin:0;padding:.25em .7em;border-radius:10px;
border:3px solid currentColor;background:color-mix(in srgb,currentColor 12%,transparent)}
.good{color:var(--good)}.warn{color:var(--warn)}.bad{color:var(--bad)}.muted{color:var(--muted)}
.reasons{margin:.2rem 0;padding-left:1.2rem;max-width:40rem}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(200px,1fr));gap:12px;
margin:1.2rem 0}
.card{background:var(--panel);border-radius:8px;padding:.7rem .9rem}
.card .label{color:var(--muted);font-size:.85rem}
.card .big{font-size:1.9rem;font-weight:700;line-height:1.2}
.card .sub{color:var(--muted);font-size:.85rem}
dl.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(220px,1fr));gap:.5rem 1.2rem;
margin:.8rem 0}
dl.facts div{border-bottom:1px solid var(--grid);padding-bottom:.25rem}
dl.facts dt{color:var(--muted);font-size:.85rem}
dl.facts dd{margin:0;font-weight:600;font-variant-numeric:tabular-nums}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-size:.9rem;margin:.4rem 0 1rem;
font-variant-numeric:tabular-nums}
th,td{padding:.3rem .6rem;border-bottom:1px solid var(--grid);text-align:left;
white-space:nowrap}
th{color:var(--muted);font-weight:600}
td.num,th.num{text-align:right}
td.flag{color:var(--bad);font-weight:700}
tr.other td{font-style:italic;color:var(--muted);border-top:2px solid var(--frame);
background:var(--panel)}
code{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.85em}
figure{margin:.8rem 0 1.2rem}
figcaption{font-weight:600;margin-bottom:.3rem}
.charts{display:flex;flex-wrap:wrap;gap:1rem 2rem;align-items:flex-start}
.empty{color:var(--muted);font-style:italic}
.legend-note{color:var(--muted);font-size:.85rem}
@media print{
:root{--bg:#fff;--fg:#000;--muted:#444;--panel:#fff;--grid:#ccc;--frame:#888;--null:#ddd;
--s1:#2a67c4;--s2:#d4761f;--s3:#1f8f63;--s4:#8650c8;--s5:#b8404e;--heat:#2a67c4;
--cold:#1f8f63;--good:#1d7a4a;--warn:#9a6100;--bad:#c0392b}
body{background:none;font-size:11pt}main{max-width:none;padding:0}nav{display:none}
section{break-before:page}section#verdict{break-before:auto}
.callout,.card,.badge,tr.other td{background:none}
figure,table,.cards{break-inside:avoid}.scroll{overflow:visible}
th,td{white-space:normal}svg.chart{max-width:100%;height:auto}}
"""


def render(summary: dict[str, Any]) -> str:
    """The whole page: header and notices, then one section per figure group."""
    history = _d(summary.get("history"))
    title = f"Capacity report · {_text(history.get('last_date'))}"
    sections = "".join(_section(key, heading, draw(summary)) for key, heading, draw in _SECTIONS)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        f"<title>{_e(title)}</title><style>{_CSS}{charts.STYLE}</style></head>"
        f"<body><main>{_header(summary)}{sections}</main>"
        f'<script type="application/json" id="summary">{_embedded(summary)}</script>'
        "</body></html>\n"
    )


# Reading the summary defensively --------------------------------------------------------------


def _d(value: object) -> Row:
    return value if isinstance(value, dict) else {}


def _rows(value: object) -> list[Row]:
    return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []


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


def _when(value: object) -> str:
    """An ISO 8601 UTC time as 2026-11-24 03:00 UTC."""
    if not isinstance(value, str):
        return DASH
    try:
        return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return value


def _days(value: object) -> str:
    v = finite(value)
    return DASH if v is None else fmt_duration(v * 86400)


def _rate(value: object) -> str:
    return DASH if finite(value) is None else f"{fmt_count(value)} /s"


def _per_day(value: object) -> str:
    return DASH if finite(value) is None else f"{fmt_count(value)} /day"


def _yes(value: object) -> str:
    return {True: "yes", False: "no"}.get(value, DASH) if isinstance(value, bool) else DASH


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


def _table(columns: Sequence[_Col], rows: Sequence[Row], empty: str = "no data") -> str:
    """A table whose `other` row (the sum of what the cap cut) is set apart."""
    if not rows:
        return f'<p class="empty">{_e(empty)}</p>'
    head = "".join(f'<th scope="col"{_num(c)}>{_e(c.heading)}</th>' for c in columns)
    body = "".join(_tr(columns, row) for row in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'  # noqa: E501


def _num(col: _Col, extra: str = "") -> str:
    classes = " ".join(filter(None, ["num" if col.numeric else "", extra]))
    return f' class="{classes}"' if classes else ""


def _tr(columns: Sequence[_Col], row: Row) -> str:
    other = row.get("other") is True
    cells = []
    for i, col in enumerate(columns):
        text = _other_label(row) if other and i == 0 else col.fmt(row.get(col.key))
        flagged = not other and col.flag is not None and col.flag(row)
        cells.append(f"<td{_num(col, 'flag' if flagged else '')}>{_e(text)}</td>")
    return f'<tr{" class=\"other\"" if other else ""}>{"".join(cells)}</tr>'


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


def _para(text: str, cls: str = "") -> str:
    return f'<p class="{cls}">{_e(text)}</p>' if cls else f"<p>{_e(text)}</p>"


def _section(key: str, heading: str, inner: str) -> str:
    return f'<section id="{key}"><h2>{_e(heading)}</h2>{inner}</section>'


# Header ---------------------------------------------------------------------------------------


def _header(summary: Row) -> str:
    history = _d(summary.get("history"))
    first, last = history.get("first_date"), history.get("last_date")
    span = f"{_text(first)} to {_text(last)}" if first or last else "no snapshots"
    gaps = _strings(history.get("gaps"))
    parts = [
        span,
        f"{fmt_count(history.get('days_with_data'))} of "
        f"{_plural(history.get('days_requested'), 'day')} with data",
        _plural(history.get("snapshots"), "snapshot"),
        f"gaps: {_listed(gaps)}" if gaps else "no gaps",
        f"latest snapshot {_when(history.get('latest_snapshot_time'))}",
        f"mode {_text(history.get('mode'))}",
        f"history {_text(history.get('path'))}",
        f"generated {_when(summary.get('generated_at'))}",
    ]
    nav = "".join(f'<a href="#{key}">{_e(heading)}</a>' for key, heading, _ in _SECTIONS)
    notices = "".join(_callout(n) for n in _strings(summary.get("notices")))
    return (
        f"<header><h1>Capacity report</h1><p class=\"history\">{_e(' · '.join(parts))}</p>"
        f"{notices}<nav>{nav}</nav></header>"
    )


def _listed(items: Sequence[str], cap: int = 8) -> str:
    more = f" and {len(items) - cap} more" if len(items) > cap else ""
    return ", ".join(items[:cap]) + more


# Sections -------------------------------------------------------------------------------------


def _verdict(summary: Row) -> str:
    v = _d(summary.get("verdict"))
    label, tone = _STATUS.get(str(v.get("status")), _STATUS["undecided"])
    reasons = "".join(f"<li>{_e(r)}</li>" for r in _strings(v.get("reasons")))
    headroom = fmt_share(v.get("memory_headroom"))
    fits = v.get("n_plus_one_fits")
    cards = [
        _card("Recommended primaries", fmt_count(v.get("recommended_primaries")),
              f"now {fmt_count(v.get('primaries_now'))} · N+1 at {headroom} headroom"),
        _card("Memory per primary", fmt_bytes(v.get("recommended_memory_per_primary")),
              f"now {fmt_bytes(v.get('memory_per_primary'))}"),
        _card("N+1 today", {True: "fits", False: "does not fit"}.get(fits, DASH) if isinstance(fits, bool) else DASH,  # noqa: E501
              "the current primaries, minus the largest, at the headroom"),
        _card("Recommended nodes", fmt_count(v.get("recommended_nodes")),
              f"now {fmt_count(v.get('nodes_now'))} · N+1, at least 2"),
    ]  # fmt: skip
    facts = _facts(
        [
            ("Peak used memory", fmt_bytes(v.get("peak_used_memory"))),
            (f"Projected in {_plural(v.get('horizon_days'), 'day')}", fmt_bytes(v.get("projected_used_memory"))),  # noqa: E501
            ("Memory headroom target", headroom),
            ("Peak forwards", _rate(v.get("peak_forwards_per_second"))),
            ("Forwards one node carries", _rate(v.get("node_forwards_per_second"))),
        ]
    )
    return (
        f'<div class="verdict"><p class="badge {tone}" data-status="{_e(str(v.get("status")))}">'
        f"{_e(label)}</p>"
        f'<ul class="reasons">{reasons or "<li>no reasons given</li>"}</ul></div>'
        f'<div class="cards">{"".join(cards)}</div>{facts}'
    )


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
            f"of the {fmt_count(f.get('min_days'))} needed. The daily peaks are drawn below; "
            "no trend is fitted.",
            "info",
        )
    growing = "not reached (not growing, or no fit)" if enough else DASH
    facts = _facts(
        [
            ("Days to the headroom", _days(f.get("days_to_headroom")) if f.get("days_to_headroom") is not None else growing),  # noqa: E501
            ("Days to capacity", _days(f.get("days_to_capacity")) if f.get("days_to_capacity") is not None else growing),  # noqa: E501
            ("Growth", DASH if finite(f.get("slope_bytes_per_day")) is None else f"{fmt_bytes(f.get('slope_bytes_per_day'))} /day"),  # noqa: E501
            ("Fit (R²)", DASH if finite(f.get("r2")) is None else f"{finite(f.get('r2')):.2f}"),
            ("Days of history", f"{fmt_count(f.get('days_of_history'))} (at least {fmt_count(f.get('min_days'))})"),  # noqa: E501
            ("Headroom line", fmt_bytes(f.get("headroom_line"))),
            ("Capacity", fmt_bytes(f.get("capacity"))),
        ]
    )
    points = [(d, p.get("used_memory")) for p in _rows(f.get("points")) if (d := _day(p.get("date")))]  # noqa: E501
    cone = [Band(d, b.get("low"), b.get("mid"), b.get("high")) for b in _rows(f.get("cone")) if (d := _day(b.get("date")))]  # noqa: E501
    refs = [Ref("headroom", f.get("headroom_line"), "warn"), Ref("capacity", f.get("capacity"), "bad")]  # noqa: E501
    chart = charts.line_chart(
        "forecast", "Used memory of all primaries, daily peak, with the forecast",
        points, cone=cone, refs=refs, unit="bytes", y_label="used memory",
    )  # fmt: skip
    return note + facts + _figure("Used memory, daily peak of all primaries", chart)
