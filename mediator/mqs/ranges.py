"""The `Range` header of `GET /queues` (RFC 7233 syntax, unit `queues`).

Positions are 0-based and inclusive over the queues in name order. Accepted: `a-b`, `a-`
and `-n` (the last n). The unit `users`, which the spec's own example uses, is read as
`queues`. Any other unit, several ranges, `a > b`, or a start past the end is refused with
416 (rather than silently ignored, so a client paging through queues never gets a wrong page).
An empty header is no range: the whole list, as without one.

`PATTERN` is the one statement of the syntax: the OpenAPI document states it, and `select`
refuses what it does not match, so the two cannot disagree.
"""

from __future__ import annotations

import re

from mediator.errors import RequestError

UNIT = "queues"
# Whitespace is HTTP's (space and tab), digits are ASCII, units are case-insensitive (RFC
# 9110) and spelt out as such, since JSON Schema's patterns take no flags. A range is
# `first-[last]` or `-length` (RFC 9110's int-range and suffix-range): `queues=-` is none.
_WS = r"[ \t]*"
PATTERN = (
    rf"{_WS}(?P<unit>[Qq][Uu][Ee][Uu][Ee][Ss]|[Uu][Ss][Ee][Rr][Ss]){_WS}={_WS}"
    rf"(?:(?P<first>[0-9]{{1,18}}){_WS}-{_WS}(?P<last>[0-9]{{0,18}})"
    rf"|-{_WS}(?P<suffix>[0-9]{{1,18}})){_WS}"
)
_SPEC = re.compile(PATTERN)


class RangeNotSatisfiable(RequestError):
    def __init__(self, message: str) -> None:
        super().__init__(message, status=416)


def select(header: str | None, total: int) -> tuple[int, int] | None:
    """Inclusive (first, last) positions to return, or None for an empty result."""
    if header is None or not header.strip(" \t"):
        return (0, total - 1) if total else None
    match = _SPEC.fullmatch(header)
    if not match:
        raise RangeNotSatisfiable(
            f"malformed Range {header[:80]!r}; use {UNIT}=first-last, {UNIT}=first- or "
            f"{UNIT}=-count, e.g. {UNIT}=0-9"
        )
    first_s, last_s, suffix = match.group("first", "last", "suffix")
    if suffix is not None:  # the last n
        n = int(suffix)
        if n == 0 or total == 0:
            raise RangeNotSatisfiable("range selects no queue")
        return (max(0, total - n), total - 1)
    first = int(first_s)
    last = int(last_s) if last_s else total - 1
    if last_s and first > int(last_s):
        raise RangeNotSatisfiable(f"range start {first} is after its end {last_s}")
    if first >= total:
        raise RangeNotSatisfiable(f"range starts at {first} but there are {total} queues")
    return (first, min(last, total - 1))


def content_range(selected: tuple[int, int] | None, total: int) -> str:
    if selected is None:
        return f"{UNIT} */{total}"
    return f"{UNIT} {selected[0]}-{selected[1]}/{total}"
