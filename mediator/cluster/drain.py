"""Graceful drain: what a node does between SIGTERM and exit, so that nothing fails.

1. `/readyz` answers 503 at once, so load balancers stop sending new work here.
2. New WebSockets are accepted and closed at once with 1012 (service restart): clients
   reconnect, and the balancer sends them elsewhere.
3. Open sockets are closed with 1012 a few at a time over half the drain time, so their
   clients do not all reconnect in the same instant; closing releases their presence holds
   and offers their unacknowledged deliveries again.
4. In-flight HTTP requests (long polls included) are given until the drain time is up.
5. Then the server stops as it would on SIGINT.

A node that loses Redis (cluster/health.py) sheds its sockets the same way, with 1013 (try
again later), and refuses new ones with it until Redis answers again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

log = logging.getLogger(__name__)

SERVICE_RESTART = 1012
TRY_AGAIN_LATER = 1013
SHED_SECONDS = 2.0  # sockets closed for a lost Redis are spread over this long


class Closable(Protocol):
    async def close_for_drain(self) -> None: ...

    async def close_with(self, code: int) -> None: ...


class Drain:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.draining = False
        self.unavailable = False  # Redis does not answer (cluster/health.py)
        self.sockets: set[Closable] = set()
        self.requests = 0  # HTTP requests being answered
        self._idle = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._shedding: asyncio.Task[None] | None = None

    @property
    def refuse_code(self) -> int | None:
        """The close code for a new WebSocket when this node takes none, else None."""
        if self.draining:
            return SERVICE_RESTART
        if self.unavailable:
            return TRY_AGAIN_LATER
        return None

    def storage_changed(self, lost: bool) -> None:
        """Redis stopped (or started again) answering: shed the sockets while it does not."""
        self.unavailable = lost
        if lost and not self.draining and (self._shedding is None or self._shedding.done()):
            self._shedding = asyncio.get_running_loop().create_task(self._shed(), name="shed")

    async def _shed(self) -> None:
        sockets = list(self.sockets)
        log.warning("closing %d sockets (1013): redis does not answer", len(sockets))
        spacing = SHED_SECONDS / max(1, len(sockets))
        for socket in sockets:
            if not self.unavailable or self.draining:
                return  # Redis is back (keep the rest), or a drain closes them
            try:
                await socket.close_with(TRY_AGAIN_LATER)
            except Exception:  # a socket that is already gone
                log.debug("closing a socket for a lost redis failed", exc_info=True)
            await asyncio.sleep(min(spacing, 0.05))

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
