"""The capacity report as one self-contained HTML page: the figures of SUMMARY.md drawn, none
computed here, nothing fetched from elsewhere (an SRE may open it offline, or print it).

Any figure may be null and any list empty: the page then says "—" or "no data". This module
is the document: its head and stylesheet (light, dark, print), the header with the history
and notices, the sections (`spark.sections`) in order, and the summary embedded as JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from spark import charts
from spark.sections import SECTIONS
from spark.sections.markup import callout, esc
from spark.sections.read import Row, as_dict, as_strings, as_text
from spark.units import fmt_count, fmt_when, plural

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
    history = as_dict(summary.get("history"))
    title = f"Capacity report · {as_text(history.get('last_date'))}"
    body = "".join(_section(key, heading, draw(summary)) for key, heading, draw in SECTIONS)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        f"<title>{esc(title)}</title><style>{_CSS}{charts.STYLE}</style></head>"
        f"<body><main>{_header(summary)}{body}</main>"
        f'<script type="application/json" id="summary">{_embedded(summary)}</script>'
        "</body></html>\n"
    )


def _section(key: str, heading: str, inner: str) -> str:
    return f'<section id="{key}"><h2>{esc(heading)}</h2>{inner}</section>'


# Header ---------------------------------------------------------------------------------------


def _header(summary: Row) -> str:
    history = as_dict(summary.get("history"))
    first, last = history.get("first_date"), history.get("last_date")
    gaps = as_strings(history.get("gaps"))
    days = f"{fmt_count(history.get('days_with_data'))} of "
    days += plural(history.get("days_requested"), "day") + " with data"
    parts = [
        f"{as_text(first)} to {as_text(last)}" if first or last else "no snapshots",
        days,
        plural(history.get("snapshots"), "snapshot"),
        f"gaps: {_listed(gaps)}" if gaps else "no gaps",
        f"latest snapshot {fmt_when(history.get('latest_snapshot_time'))}",
        f"mode {as_text(history.get('mode'))}",
        f"history {as_text(history.get('path'))}",
        f"generated {fmt_when(summary.get('generated_at'))}",
    ]
    notices = "".join(callout(n) for n in as_strings(summary.get("notices")))
    nav = "".join(f'<a href="#{key}">{esc(heading)}</a>' for key, heading, _ in SECTIONS)
    history_line = f'<p class="history">{esc(" · ".join(parts))}</p>'
    return f"<header><h1>Capacity report</h1>{history_line}{notices}<nav>{nav}</nav></header>"


def _listed(items: Sequence[str], cap: int = 8) -> str:
    more = f" and {len(items) - cap} more" if len(items) > cap else ""
    return ", ".join(items[:cap]) + more


# The summary, embedded ------------------------------------------------------------------------


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
