"""Graceful drain: what a node does between SIGTERM and exit, so that nothing fails.

1. `/readyz` answers 503 at once, so load balancers stop sending new work here.
2. New WebSockets are accepted and closed at once with 1012 (service restart): clients
   reconnect, and the balancer sends them elsewhere.
3. Open sockets are closed with 1012 a few at a time over half the drain time, so their
   clients do not all reconnect in the same instant; closing releases their presence holds
   and offers their unacknowledged deliveries again.
4. In-flight HTTP requests (long polls included) are given until the drain time is up.
5. Then the server stops as it would on SIGINT.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

log = logging.getLogger(__name__)

SERVICE_RESTART = 1012


class Closable(Protocol):
    async def close_for_drain(self) -> None: ...


class Drain:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.draining = False
        self.sockets: set[Closable] = set()
        self.requests = 0  # HTTP requests being answered
        self._idle = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def request_started(self) -> None:
        self.requests += 1
        self._idle.clear()

    def request_finished(self) -> None:
        self.requests -= 1
        if self.requests <= 0:
            self._idle.set()

    def begin(self, stop: Callable[[], Awaitable[None] | None]) -> None:
        """Start draining (a second SIGTERM changes nothing); `stop` ends the server."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(stop), name="drain")

    async def _run(self, stop: Callable[[], Awaitable[None] | None]) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.seconds
        self.draining = True
        sockets = list(self.sockets)
        log.info(
            "draining: %d sockets, %d requests, %.0f s",
            len(sockets),
            self.requests,
            self.seconds,
        )
        spacing = (self.seconds / 2) / max(1, len(sockets))
        for socket in sockets:
            try:
                await socket.close_for_drain()
            except Exception:  # a socket that is already gone
                log.debug("closing a socket while draining failed", exc_info=True)
            await asyncio.sleep(min(spacing, 0.5))
        left = deadline - loop.time()
        if self.requests > 0 and left > 0:
            try:
                await asyncio.wait_for(self._idle.wait(), left)
            except TimeoutError:
                log.warning("drain time up with %d requests unanswered", self.requests)
        log.info("drained: stopping")
        result = stop()
        if result is not None:
            await result
