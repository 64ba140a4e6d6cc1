"""Push delivery: messages for a connection whose DID document names an HTTP or WebSocket
endpoint (ACA-Py's, say) are sent there, not only kept for pickup.

The queue stays the only source of truth. A push hands messages out as a delivery does
(hidden until the delivery deadline), posts them one by one in queue order, and deletes
each only when the endpoint answered 2xx. On a failure the rest are released at once, so
they are available for pickup meanwhile, and the connection is scheduled again with
exponential backoff in its shard's schedule (`@push:<connection>`); the upkeep worker
holding that shard retries it.
Before a push starts, the schedule is set to a guard time past the delivery deadline, so
a node that dies mid-push leaves the retry to a worker.

One pusher at a time per connection, cluster-wide: a push holds the connection's push lease
(`push_lease.lua`, renewed with each batch, as long as the guard). A node that sees a
forward while another holds it only marks the lease, and the holder pushes once more before
it lets go; without this, two nodes pushing one queue at once would post its messages out
of order (each takes the messages the other has not hidden yet).

Endpoints are calls to destinations a peer named (mediator.outbound): one that resolves to
a loopback, private, metadata... address outside `--outbound-allow` is refused, and a
refusal is permanent for that push: its messages are released for pickup, no retry is
scheduled (it would only be refused again), and `pushes{outcome="refused"}` counts it.
A later forward tries again (the operator may have opened the destination meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Literal

import httpx
import websockets

from mediator import outbound, tasks
from mediator.didcomm.did_doc import Service
from mediator.didcomm.forwarding import wrap
from mediator.engine import keys
from mediator.engine.model import ReceivedMessage
from mediator.engine.replies import push_lease_held
from mediator.engine.scripts import Scripts
from mediator.errors import AnswerTooLarge, OutboundError, OutboundRefused
from mediator.mediation import record as rec
from mediator.mediation.mailbox import Mailbox, queue_of
from mediator.mediation.store import MediationStore
from mediator.ops.metrics import Metrics
from mediator.settings import OutboundSettings, PushSettings
from mediator.storage.clients import STORAGE_ERRORS, RedisClient

log = logging.getLogger(__name__)

ENVELOPE_TYPE = "application/didcomm-envelope-enc"
BATCH = 10
TARGETS_TTL = 60.0  # a connection's endpoints never change after its handshake
TARGETS_SIZE = 100_000
REFUSALS_SIZE = 10_000

Sent = Literal["sent", "failed", "refused"]


class Pusher:
    def __init__(
        self,
        redis: RedisClient,
        store: MediationStore,
        mailbox: Mailbox,
        settings: PushSettings,
        calls: OutboundSettings,
        metrics: Metrics | None = None,
    ) -> None:
        self.redis = redis
        self.store = store
        self.mailbox = mailbox
        self.settings = settings
        self.calls = calls
        self.metrics = metrics
        self.http = outbound.client(calls, peers=True)
        self.guard = outbound.Guard(calls, peers=True)
        self.tls = outbound.tls_context(calls)
        self.scripts = Scripts(redis)
        self.id = uuid.uuid4().hex[:16]  # this pusher's name on the leases it holds
        self._refusals: dict[str, float] = {}  # endpoint -> until when it is not logged again
        self._targets: dict[str, tuple[tuple[Service, ...], float]] = {}
        self._running: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._lookups: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ entry points

    def queued(self, connection: str) -> None:
        """A message was queued for `connection`: push it if the connection has an endpoint.
        Costs nothing more on the forward's path when the answer is cached."""
        cached = self._targets.get(connection)
        if cached is not None and cached[1] > time.monotonic():
            if cached[0]:
                self.start(connection, cached[0])
            return
        task = asyncio.create_task(self._look_up_and_push(connection))
        self._lookups.add(task)
        task.add_done_callback(self._lookups.discard)

    def start(self, connection: str, services: tuple[Service, ...], *, delay: float = 0.0) -> None:
        """Push `connection`'s queue (after `delay` seconds), unless this node is at it (then
        once more after)."""
        if connection in self._running:
            self._again.add(connection)
            return
        task = asyncio.create_task(self._run(connection, services, delay), name="push")
        self._running[connection] = task
        task.add_done_callback(lambda t: self._ended(connection, t))

    def _ended(self, connection: str, task: asyncio.Task[None] | None) -> None:
        """`connection`'s push `task` is over: a forward seen from now on starts another."""
        if self._running.get(connection) is task:
            del self._running[connection]

    async def due(self, connection: str) -> None:
        """A push retry's time has come (the worker holding its shard found it due)."""
        services = await self._services(connection)
        if services:
            self.start(connection, services)
        else:
            await self.redis.zrem(*_schedule_entry(connection))

    async def aclose(self) -> None:
        await tasks.stop([*self._running.values(), *self._lookups])
        await self.http.aclose()

    # ------------------------------------------------------------ the push

    async def _services(self, connection: str) -> tuple[Service, ...]:
        services = (await self.store.connection(connection)).push
        if len(self._targets) >= TARGETS_SIZE:
            self._targets.clear()
        self._targets[connection] = (services, time.monotonic() + TARGETS_TTL)
        return services

    async def _look_up_and_push(self, connection: str) -> None:
        try:
            services = await self._services(connection)
        except STORAGE_ERRORS as exc:
            log.warning("push lookup failed: %s", exc)
            return
        if services:
            self.start(connection, services)

    async def _run(self, connection: str, services: tuple[Service, ...], delay: float) -> None:
        try:
            if delay > 0:
                await asyncio.sleep(delay)
            while True:
                self._again.discard(connection)
                if not await self._lease(connection, "take"):
                    break  # another node pushes it; it was asked to go once more
                if not await self._push_queue(connection, services):
                    await self._lease(connection, "drop")
                    break
                if not await self._lease(connection, "give") and connection not in self._again:
                    break
        except STORAGE_ERRORS as exc:
            # The lease is kept until it runs out with the guard: the messages this push took
            # stay hidden until about then, and another pusher must not post past them.
            log.warning("push to %s stopped: %s (a worker retries it)", connection, exc)
        except Exception:
            log.exception("push to %s failed unexpectedly", connection)
        finally:
            # At once, not in the done callback: that runs a loop turn later, and a forward
            # seen in between would only be marked for a push that has already ended.
            self._ended(connection, asyncio.current_task())

    def _guard_ms(self) -> int:
        """How long a push may go unheard of before a worker takes it over."""
        guard_s = self.mailbox.queue.delivery_timeout_seconds + self.calls.timeout_seconds
        return int(guard_s * 1000)

    async def _lease(self, connection: str, op: Literal["take", "give", "drop"]) -> bool:
        lease = keys.connection_keys(connection).push
        return push_lease_held(
            await self.scripts.call("push_lease", [lease], [self.id, self._guard_ms(), op])
        )

    async def _push_queue(self, connection: str, services: tuple[Service, ...]) -> bool:
        """Push until the queue is empty (True) or the endpoint fails (False, retry set).
        The caller holds the push lease."""
        record = keys.connection_keys(connection).record
        now = await self.mailbox.now_ms()
        await self._schedule(connection, now + self._guard_ms())
        first = True
        while True:
            if not first:  # a long queue: the lease and the guard move on with each batch
                if not await self._lease(connection, "take"):
                    return True  # it ran out (a stalled node) and another pusher took over
                await self._schedule(connection, now + self._guard_ms())
            first = False
            got = await self.mailbox.deliver(connection, BATCH)
            messages, now = got.messages, got.now_ms
            if not messages:
                break
            for i, message in enumerate(messages):
                sent = await self._send(services, message)
                log.debug("push of %s to %s: %s", message.message_id, connection, sent)
                if sent == "sent":
                    await self.mailbox.acknowledge(connection, [message.message_id])
                    self._count("delivered")
                    continue
                self._count(sent)
                await self.mailbox.release(connection, [m.message_id for m in messages[i:]])
                if sent == "refused":
                    await self._forget_schedule(connection)
                    return False
                attempts = int(await self.redis.hincrby(record, rec.PUSH_ATTEMPTS, 1))
                delay = min(
                    self.settings.retry_max_seconds,
                    self.settings.retry_min_seconds * 2 ** min(attempts - 1, 30),
                )
                await self._schedule(connection, now + int(delay * 1000))
                log.info(
                    "push to %s failed (attempt %d): retry in %.1f s",
                    connection,
                    attempts,
                    delay,
                )
                return False
        await self._forget_schedule(connection)
        return True

    async def _forget_schedule(self, connection: str) -> None:
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrem(*_schedule_entry(connection))
        pipe.hdel(keys.connection_keys(connection).record, rec.PUSH_ATTEMPTS)
        await pipe.execute()

    async def _schedule(self, connection: str, at_ms: int) -> None:
        """The connection's next push in its shard's schedule, and the workers' hint."""
        due, member = _schedule_entry(connection)
        pipe = self.redis.pipeline(transaction=False)
        pipe.zadd(due, {member: at_ms})
        pipe.zadd(keys.next_due(), {str(_shard(connection)): at_ms}, lt=True)
        await pipe.execute()

    async def _send(self, services: Sequence[Service], message: ReceivedMessage) -> Sent:
        """Post one message to the first endpoint that takes it (2xx, or a WebSocket send):
        refused when every endpoint is a destination that may not be reached."""
        refused = 0
        for service in services:
            body = message.body
            if service.routing_keys:
                to = message.trace_id or service.recipient_keys[0]
                body = wrap(body, to, service.routing_keys)
            try:
                if service.endpoint.startswith(("ws://", "wss://")):
                    async with outbound.websocket(
                        self.guard,
                        service.endpoint,
                        total=self.calls.timeout_seconds,
                        cap=self.calls.max_response_bytes,
                        tls=self.tls,
                    ) as ws:
                        await ws.send(body.decode())
                    return "sent"
                async with self.http.stream(
                    "POST", service.endpoint, content=body, headers={"Content-Type": ENVELOPE_TYPE}
                ) as answer:
                    # Only the status matters; a small body is read so that the connection
                    # serves the next push, a large one is cut (the connection dropped).
                    with contextlib.suppress(AnswerTooLarge):
                        await answer.aread()
                if 200 <= answer.status_code < 300:
                    return "sent"
                log.info("push endpoint answered %d", answer.status_code)
            except OutboundRefused as exc:
                refused += 1
                self._refused(service.endpoint, exc)
            except (
                httpx.HTTPError,
                httpx.InvalidURL,  # an endpoint stored before handshakes refused such URLs
                websockets.WebSocketException,
                OutboundError,
                OSError,
                TimeoutError,
                ValueError,  # websockets: a redirect it will not follow
            ) as exc:
                log.info("push endpoint unreachable: %s", exc)
        return "refused" if refused and refused == len(services) else "failed"

    def _refused(self, endpoint: str, exc: OutboundRefused) -> None:
        """Log a refused endpoint once per TARGETS_TTL, however many messages meet it."""
        now = time.monotonic()
        if self._refusals.get(endpoint, 0.0) > now:
            return
        if len(self._refusals) >= REFUSALS_SIZE:
            self._refusals.clear()
        self._refusals[endpoint] = now + TARGETS_TTL
        log.warning(
            "push endpoint %s refused: %s; its messages stay queued for pickup "
            "(--outbound-allow opens a destination)",
            endpoint,
            exc,
        )

    def _count(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.pushes.labels(outcome).inc()


def _shard(connection: str) -> int:
    return keys.queue_keys(queue_of(connection).qualified).shard


def _schedule_entry(connection: str) -> tuple[str, str]:
    """The shard's schedule and the connection's member in it."""
    return keys.shard_due(_shard(connection)), keys.PUSH_MEMBER + connection
