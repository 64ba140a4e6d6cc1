"""Whether this node reaches Redis: a ping every second, and what a node does when it cannot.

A node cut off from Redis (a network partition, a Redis down for longer than a restart)
can neither accept nor deliver, and its live sockets would sit silent while their wallets
believe they are served. So once no ping has been answered for
`MEDIATOR_STORAGE_LOST_SECONDS`:

1. `/readyz` answers 503 (so load balancers send new work to nodes that reach Redis);
2. requests that need storage are refused at once with 503 `storage-unavailable` instead of
   each waiting for the client's timeout;
3. open WebSockets are closed with 1013 (try again later) and new ones are accepted and
   closed the same way: wallets reconnect, through the balancer, to a node that reaches
   Redis, whose socket takes their recipient over; what this node had handed out is
   offered again there.

The first answered ping undoes all of it. A shorter outage (a Redis restart, a failover)
closes nothing: delivery loops retry, and the wake-up subscription comes back by itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from mediator import tasks
from mediator.storage.clients import STORAGE_ERRORS

log = logging.getLogger(__name__)

PING_SECONDS = 1.0
PING_TIMEOUT_SECONDS = 2.0

Ping = Callable[[], Awaitable[object]]
OnChange = Callable[[bool], None]  # gets True when Redis is lost, False when it is back


class StorageWatch:
    def __init__(self, ping: Ping, lost_seconds: float, on_change: OnChange) -> None:
        self._ping = ping
        self.lost_seconds = lost_seconds
        self._on_change = on_change
        self.lost = False  # no answered ping for lost_seconds
        self.last_answer = time.monotonic()
        self.error = ""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="storage-watch")

    async def stop(self) -> None:
        if self._task is not None:
            await tasks.stop(self._task)

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            answered = await self.check()
            if answered:
                self._set_lost(False)
            elif time.monotonic() - self.last_answer >= self.lost_seconds:
                self._set_lost(True)
            await asyncio.sleep(max(0.0, PING_SECONDS - (time.monotonic() - started)))

    async def check(self) -> bool:
        """One ping; True when Redis answered it in time."""
        try:
            await asyncio.wait_for(self._ping(), min(PING_TIMEOUT_SECONDS, self.lost_seconds))
        except STORAGE_ERRORS as exc:  # TimeoutError is an OSError
            self.error = str(exc) or type(exc).__name__
            return False
        self.last_answer = time.monotonic()
        return True

    def _set_lost(self, lost: bool) -> None:
        if lost == self.lost:
            return
        self.lost = lost
        if lost:
            log.error(
                "redis does not answer: refusing work and closing WebSockets (1013)",
                extra={"error": self.error, "seconds": round(time.monotonic() - self.last_answer)},
            )
        else:
            log.warning("redis answers again: accepting work")
        self._on_change(lost)
