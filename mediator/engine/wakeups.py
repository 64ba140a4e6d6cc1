"""Long-poll wake-ups across nodes: one pub/sub connection per node, waiters in process.

While a long poll waits on a queue (its `waiting` marker, set by the receive that found it
empty), scripts publish `<queue> <count> <due> <now>` on one channel. `count` wakes that many local
waiters of the queue (first come, first woken); `due` (Redis time, ms) arms a timer that wakes
them all when a delayed or in-flight message becomes visible. Pub/sub may drop a message, so
every waiter also re-reads its queue on its own deadline, and all are woken when the
subscription is re-established. A waiting request holds no Redis connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterator

from redis.asyncio import Redis

from mediator.engine import keys

log = logging.getLogger(__name__)


class WakeHub:
    def __init__(self, make_client: Callable[[], Redis]) -> None:
        self._make_client = make_client
        self._waiters: dict[str, deque[asyncio.Future[None]]] = {}
        self._timers: dict[str, tuple[float, asyncio.TimerHandle]] = {}
        self._task: asyncio.Task[None] | None = None
        self._listeners: dict[str, tuple[Callable[[bytes], None], Callable[[], None]]] = {}
        self.connected = asyncio.Event()

    def listen(
        self, channel: str, handle: Callable[[bytes], None], reset: Callable[[], None]
    ) -> None:
        """Also deliver `channel`'s messages to `handle` (call before start); `reset` runs on
        every (re)subscription, since messages may have been missed meanwhile."""
        self._listeners[channel] = (handle, reset)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="wake-subscriber")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.connected.wait(), 5)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self.wake_all()

    @contextlib.contextmanager
    def waiting(self, queue: str) -> Iterator[asyncio.Future[None]]:
        """Register a waiter before reading the queue, so no wake-up falls in between."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(queue, deque())
        waiters.append(fut)
        try:
            yield fut
        finally:
            with contextlib.suppress(ValueError):
                waiters.remove(fut)
            if not waiters and self._waiters.get(queue) is waiters:
                del self._waiters[queue]
                if queue in self._timers:
                    self._timers.pop(queue)[1].cancel()

    def waiter_count(self) -> int:
        return sum(len(w) for w in self._waiters.values())

    def wake(self, queue: str, count: int | None = None) -> None:
        waiters = self._waiters.get(queue)
        if not waiters:
            return
        woken = 0
        for fut in waiters:
            if count is not None and woken >= count:
                break
            if not fut.done():
                fut.set_result(None)
                woken += 1

    def wake_all(self) -> None:
        for queue in list(self._waiters):
            self.wake(queue)

    def handle(self, payload: bytes | str) -> None:
        text = payload.decode() if isinstance(payload, bytes) else payload
        try:
            queue, count_s, due_s, now_s = text.rsplit(" ", 3)
            count, due, now = int(count_s), int(due_s), int(now_s)
        except ValueError:
            log.warning("ignoring malformed wake-up %r", text[:200])
            return
        if queue not in self._waiters:
            return
        if count > 0:
            self.wake(queue, count)
        if due >= 0:
            self._arm(queue, max(0.0, (due - now) / 1000))

    def _arm(self, queue: str, delay: float) -> None:
        loop = asyncio.get_running_loop()
        at = loop.time() + delay
        current = self._timers.get(queue)
        if current is not None and current[0] <= at:
            return
        if current is not None:
            current[1].cancel()

        def fire() -> None:
            self._timers.pop(queue, None)
            self.wake(queue)

        self._timers[queue] = (at, loop.call_at(at + 0.001, fire))

    async def _run(self) -> None:
        backoff = 0.05
        while True:
            client = self._make_client()
            pubsub = client.pubsub()
            try:
                await pubsub.subscribe(keys.WAKE_CHANNEL, *self._listeners)
                self.connected.set()
                self.wake_all()  # wake-ups may have been missed while we were away
                for _, reset in self._listeners.values():
                    reset()
                backoff = 0.05
                async for message in pubsub.listen():
                    if message.get("type") != "message":
                        continue
                    channel = message["channel"]
                    channel = channel.decode() if isinstance(channel, bytes) else channel
                    listener = self._listeners.get(channel)
                    if listener is None:
                        self.handle(message["data"])
                    else:
                        listener[0](message["data"])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any connection trouble: resubscribe
                self.connected.clear()
                log.warning("wake-up subscription lost, retrying: %s", exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
                with contextlib.suppress(Exception):
                    await client.aclose()
