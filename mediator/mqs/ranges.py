"""The `Range` header of `GET /queues` (RFC 7233 syntax, unit `queues`).

Positions are 0-based and inclusive over the queues in name order. Accepted: `a-b`, `a-`
and `-n` (the last n). The unit `users`, which the spec's own example uses, is read as
`queues`. Any other unit, several ranges, `a > b`, or a start past the end is refused with
416 (rather than silently ignored, so a client paging through queues never gets a wrong page).
"""

from __future__ import annotations

import re

from mediator.errors import RequestError

UNIT = "queues"
# Whitespace is HTTP's (space and tab) and digits are ASCII: this is the pattern the
# OpenAPI document states, so a client can check a Range before sending it.
_SPEC = re.compile(r"[ \t]*([A-Za-z]+)[ \t]*=[ \t]*([0-9]{0,18})[ \t]*-[ \t]*([0-9]{0,18})[ \t]*")


class RangeNotSatisfiable(RequestError):
    def __init__(self, message: str) -> None:
        super().__init__(message, status=416)


def select(header: str | None, total: int) -> tuple[int, int] | None:
    """Inclusive (first, last) positions to return, or None for an empty result."""
    if header is None:
        return (0, total - 1) if total else None
    match = _SPEC.fullmatch(header)
    if not match:
        raise RangeNotSatisfiable(f"malformed Range {header[:80]!r}; use e.g. queues=0-9")
    unit, first_s, last_s = match.groups()
    if unit.lower() not in (UNIT, "users"):
        raise RangeNotSatisfiable(f"unsupported range unit {unit!r}; use {UNIT}")
    if not first_s and not last_s:
        raise RangeNotSatisfiable("a range needs a start or a length")
    if not first_s:  # suffix: the last n
        n = int(last_s)
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
