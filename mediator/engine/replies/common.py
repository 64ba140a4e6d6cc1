"""How every decoder reads a reply's values: Redis answers bytes or str (as the client is
set up) and integers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Reply = Sequence[Any]


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def optional_ms(value: Any) -> int | None:
    """A time the scripts send as -1 when there is none."""
    return None if int(value) < 0 else int(value)
