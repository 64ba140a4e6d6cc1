"""Polling with a deadline, for effects that background work produces."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]],
    done: Callable[[T], bool],
    *,
    within: float,
    interval: float = 0.1,
) -> T:
    """The first probe result that is done, or the last one when the time is up."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = await probe()
        if done(value) or loop.time() >= deadline:
            return value
        await asyncio.sleep(interval)
