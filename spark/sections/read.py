"""Reading the summary defensively: any figure may be null, of the wrong type or missing, and
any list empty; what cannot be read is an empty dict or list, None, or "—" when shown.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from spark.units import DASH, fmt_count

Row = dict[str, Any]


def as_dict(value: object) -> Row:
    return value if isinstance(value, dict) else {}


def as_rows(value: object) -> list[Row]:
    return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def as_strings(value: object) -> list[str]:
    return [str(v) for v in value if v is not None] if isinstance(value, list) else []


def as_text(value: object) -> str:
    """Any value as the page shows it: numbers as counts, nothing and containers as a dash."""
    if value is None or isinstance(value, dict | list):
        return DASH
    if isinstance(value, float | int) and not isinstance(value, bool):
        return fmt_count(value)
    return str(value)


def as_day(value: object) -> date | None:
    try:
        return date.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def dated(rows: list[Row]) -> list[tuple[date, Row]]:
    """The rows with a readable `date`, with it."""
    return [(d, r) for r in rows if (d := as_day(r.get("date"))) is not None]
