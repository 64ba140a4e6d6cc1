"""The HTML pieces the sections are made of: tables, facts, figures, callouts, notes and
headings, every text escaped.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spark.sections.read import Row, as_text
from spark.units import Fmt, finite, fmt_count


def esc(text: str) -> str:
    return html.escape(text, quote=True)


@dataclass(frozen=True)
class Col:
    """A table column: the row key it shows, how, and whether a row's cell is flagged."""

    heading: str
    key: str
    fmt: Fmt = as_text
    numeric: bool = True
    flag: Callable[[Row], bool] | None = None
    mono: bool = False


def table(columns: Sequence[Col], rows: Sequence[Row], empty: str = "no data") -> str:
    """A table whose `other` row, the sum of what the cap cut, is set apart."""
    if not rows:
        return f'<p class="empty">{esc(empty)}</p>'
    head = "".join(f'<th scope="col"{_classes(c)}>{esc(c.heading)}</th>' for c in columns)
    body = "".join(_tr(columns, row) for row in rows)
    grid = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="scroll">{grid}</div>'


def _classes(col: Col, flagged: bool = False) -> str:
    pairs = (("num", col.numeric), ("id", col.mono), ("flag", flagged))
    names = [name for name, on in pairs if on]
    return f' class="{" ".join(names)}"' if names else ""


def _tr(columns: Sequence[Col], row: Row) -> str:
    other = row.get("other") is True
    cells = []
    for i, col in enumerate(columns):
        text = _other_label(row) if other and i == 0 else col.fmt(row.get(col.key))
        flagged = not other and col.flag is not None and col.flag(row)
        cells.append(f"<td{_classes(col, flagged)}>{esc(text)}</td>")
    return ('<tr class="other">' if other else "<tr>") + "".join(cells) + "</tr>"


def _other_label(row: Row) -> str:
    count = finite(row.get("count"))
    return "other" if count is None else f"other ({fmt_count(count)} more)"


def facts(items: Sequence[tuple[str, str]]) -> str:
    inner = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in items)
    return f'<dl class="facts">{inner}</dl>'


def figure(caption: str, svg: str) -> str:
    return f"<figure><figcaption>{esc(caption)}</figcaption>{svg}</figure>"


def callout(text: str, tone: str = "") -> str:
    return f'<div class="callout {tone}" role="note">{esc(text)}</div>'


def para(text: str, cls: str = "note") -> str:
    return f'<p class="{cls}">{esc(text)}</p>'


def heading(text: str) -> str:
    return f"<h3>{esc(text)}</h3>"
