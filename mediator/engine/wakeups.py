"""Wake-ups across nodes: one pub/sub connection per node, on the node's own channel, and
waiters in process.

While something on this node waits on a queue (a long poll, or a live socket's delivery
loop), the receive that found the queue empty names this node's channel in the queue's
`waiters` hash. Scripts that make messages visible publish `wake <queue> <count> <due> <now>`
to the channels named there, and to no other node. `count` wakes that many local waiters of
the queue (first come, first woken); `due` (Redis time, ms) arms a timer that wakes them all
when a delayed or in-flight message becomes visible. Pub/sub may drop a message, so every
waiter also re-reads its queue on its own deadline, and all are woken when the subscription
is re-established. A waiting request holds no Redis connection.

Other messages on the node's channel (`<kind> <text>`, such as `takeover`, or `take` with a
hand-off's bytes) go to the handler registered for their kind; broadcast channels (route
removals) to theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Iterator

from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from mediator import tasks

log = logging.getLogger(__name__)


Handler = tuple[Callable[[str], None], Callable[[], None]]


class WakeHub:
    def __init__(self, make_client: Callable[[], Redis], channel: str) -> None:
        self._make_client = make_client
        self.channel = channel
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}  # lists: a deque is 600 B
        self._timers: dict[str, tuple[float, asyncio.TimerHandle]] = {}
        self._task: asyncio.Task[None] | None = None
        self._listeners: dict[str, Handler] = {}  # broadcast channels
        self._kinds: dict[str, Handler] = {}  # message kinds on this node's channel
        self._raw: dict[bytes, Callable[[bytes], None]] = {}  # kinds whose text is bytes
        self._raw_resets: list[Callable[[], None]] = []
        self.connected = asyncio.Event()

    def listen(
        self, channel: str, handle: Callable[[str], None], reset: Callable[[], None]
    ) -> None:
        """Also deliver the broadcast `channel`'s messages to `handle` (call before start);
        `reset` runs on every (re)subscription, since messages may have been missed."""
        self._listeners[channel] = (handle, reset)

    def on(self, kind: str, handle: Callable[[str], None], reset: Callable[[], None]) -> None:
        """Deliver `<kind> <text>` messages on this node's channel to `handle(text)`."""
        self._kinds[kind] = (handle, reset)

    def on_bytes(
        self, kind: str, handle: Callable[[bytes], None], reset: Callable[[], None]
    ) -> None:
        """Deliver `<kind> <payload>` messages on this node's channel to `handle(payload)`,
        undecoded (a hand-off carries a message's bytes); `reset` as for `on`."""
        self._raw[kind.encode()] = handle
        self._raw_resets.append(reset)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="wake-subscriber")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.connected.wait(), 5)

    async def stop(self) -> None:
        if self._task is not None:
            await tasks.stop(self._task)
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self.wake_all()

    @contextlib.contextmanager
    def waiting(self, queue: str) -> Iterator[asyncio.Future[None]]:
        """Register a waiter before reading the queue, so no wake-up falls in between."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(queue, [])
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

    def waiter_count(self, queue: str | None = None) -> int:
        """Waiters on this node: on `queue` (qualified), or on all queues."""
        if queue is not None:
            return len(self._waiters.get(queue, ()))
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

    def dispatch(self, text: str) -> None:
        """One message on this node's channel."""
        kind, _, rest = text.partition(" ")
        if kind == "wake":
            self.handle(rest)
            return
        handler = self._kinds.get(kind)
        if handler is None:
            log.warning("ignoring unknown node message %r", text[:200])
            return
        handler[0](rest)

    def handle(self, text: str) -> None:
        """A wake-up: `<queue> <count> <due> <now>`."""
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

    async def _read(self, pubsub: PubSub) -> None:
        """Hand each message to its channel's handler, read from the subscription's
        connection itself: redis-py's `listen` wraps every message in a retry and a dict and
        reports it to its telemetry, a third of the wake-up's cost. Any connection trouble
        raises, and `_run` subscribes again."""
        conn = pubsub.connection
        assert conn is not None  # subscribed
        own = self.channel.encode()
        while True:
            await pubsub.check_health()  # a PING when the connection was quiet for long
            response = await conn.read_response(
                timeout=math.inf, disconnect_on_error=False, push_request=True
            )
            if not isinstance(response, list) or len(response) != 3:
                continue  # a PONG
            kind, channel, data = response
            if kind != b"message":
                continue  # a subscription's confirmation
            if channel == own and self._raw:
                head, _, payload = data.partition(b" ")
                raw = self._raw.get(head)
                if raw is not None:
                    raw(payload)
                    continue
            text = data.decode(errors="replace")
            if channel == own:
                self.dispatch(text)
            elif (listener := self._listeners.get(channel.decode(errors="replace"))) is not None:
                listener[0](text)

    async def _run(self) -> None:
        backoff = 0.05
        while True:
            client = self._make_client()
            pubsub = client.pubsub()
            try:
                await pubsub.subscribe(self.channel, *self._listeners)
                self.connected.set()
                self.wake_all()  # wake-ups may have been missed while we were away
                for _, reset in [*self._listeners.values(), *self._kinds.values()]:
                    reset()
                for reset in self._raw_resets:
                    reset()
                backoff = 0.05
                await self._read(pubsub)
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
