"""Receive that waits: returns as soon as any message is there, or when the wait ends."""

from __future__ import annotations

import asyncio
import contextlib

from mediator.engine.engine import Engine
from mediator.engine.model import QueueRef, ReceiveResult
from mediator.engine.wakeups import WakeHub


async def receive_waiting(
    engine: Engine,
    hub: WakeHub,
    ref: QueueRef,
    max_messages: int,
    wait_seconds: float,
    *,
    recheck_seconds: float = 2.0,
    visibility_timeout_ms: int | None = None,
) -> ReceiveResult:
    if wait_seconds <= 0:  # a plain receive: no waiter to register
        return await engine.receive(ref, max_messages, visibility_timeout_ms=visibility_timeout_ms)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_seconds
    # The marker outlives the longest gap between two receives of this loop.
    marker_ms = int((recheck_seconds + 3) * 1000)
    while True:
        with hub.waiting(ref.qualified) as woken:
            result = await engine.receive(
                ref,
                max_messages,
                visibility_timeout_ms=visibility_timeout_ms,
                wait_marker_ms=marker_ms,
            )
            remaining = deadline - loop.time()
            if result.messages or remaining <= 0:
                return result
            timeout = min(remaining, recheck_seconds)
            if result.next_due_ms is not None:
                until_due = max(0.0, (result.next_due_ms - result.now_ms) / 1000) + 0.002
                timeout = min(timeout, until_due)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(woken), timeout)
