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
    wait_ms: int,
    *,
    recheck_ms: int = 2000,
    visibility_timeout_ms: int | None = None,
) -> ReceiveResult:
    """Wait up to `wait_ms`, reading the queue again at least every `recheck_ms` (a wake-up
    may be lost)."""
    if wait_ms <= 0:  # a plain receive: no waiter to register
        return await engine.receive(ref, max_messages, visibility_timeout_ms=visibility_timeout_ms)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_ms / 1000
    # The marker outlives the longest gap between two receives of this loop.
    marker_ms = recheck_ms + 3000
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
            timeout = min(remaining, recheck_ms / 1000)
            if result.next_due_ms is not None:
                until_due = max(0.0, (result.next_due_ms - result.now_ms) / 1000) + 0.002
                timeout = min(timeout, until_due)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(woken), timeout)
