"""Polling with a deadline, for effects that background work produces."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

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


async def redis_ms(redis: Any) -> int:
    """The server's clock in ms: the one the engine's timers run on."""
    seconds, micros = await redis.time()
    return int(seconds) * 1000 + int(micros) // 1000


async def until_redis_ms(redis: Any, at_ms: int, *, within: float = 10.0) -> int:
    """Wait until the server's clock reads `at_ms` or later (a timer set for then is due),
    and return the time read."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while (now := await redis_ms(redis)) < at_ms:
        assert loop.time() < deadline, f"the server's clock did not reach {at_ms} in {within} s"
        await asyncio.sleep(min(0.05, (at_ms - now) / 1000))
    return now
