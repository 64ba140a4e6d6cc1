"""A connection's mailbox: its engine queue, seen through the pickup and queue protocols.

One queue per recipient connection (`didcomm:<connection verkey>`), so the connection's
limits are enforced atomically by the queue's send script. Each message remembers the
recipient key it was forwarded to (the engine's trace id field), which is what Pickup 2.0's
`recipient_key` filters on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from mediator.engine import Engine, keys
from mediator.engine.keys import DIDCOMM_NAMESPACE
from mediator.engine.model import (
    Hold,
    QueueConfig,
    QueueRef,
    QueueStats,
    ReceivedMessage,
    ReceiveResult,
    SendMessage,
    SendResult,
)
from mediator.errors import QueueExists, QueueNotFound
from mediator.mediation import record as rec
from mediator.mediation.keymaps import raw_key
from mediator.mediation.limits import QueueLimits
from mediator.mediation.store import MediationStore
from mediator.mediation.threads import ThreadOrder
from mediator.ops.metrics import Metrics
from mediator.settings import QueueSettings

# Every message of a mailbox is an encrypted envelope: its content type is not stored with
# each (32 bytes a message), and is empty in the queue.


def queue_of(connection: str) -> QueueRef:
    return QueueRef(DIDCOMM_NAMESPACE, connection)


@dataclass(frozen=True)
class MailboxStatus:
    now_ms: int
    waiting: int  # what a delivery-request would hand out now
    stored: int  # everything not yet acknowledged, handed out or not
    bytes: int
    oldest_ms: int | None
    newest_ms: int | None
    last_added_ms: int | None = None
    last_delivered_ms: int | None = None
    last_removed_ms: int | None = None

    @property
    def longest_waited_seconds(self) -> int:
        return 0 if self.oldest_ms is None else max(0, self.now_ms - self.oldest_ms) // 1000


EMPTY_AT = MailboxStatus(0, 0, 0, 0, None, None)


@dataclass(frozen=True)
class Forwarded:
    """Where a forward's message was queued."""

    connection: str
    message_id: str
    has_push: bool | None  # its record names push endpoints (None: not looked at)
    has_device: bool | None = None  # it registered a phone to notify (None: not looked at)
    notified: bool = False  # the phone's notification was scheduled in the same call
    duplicate: bool = False  # the same bytes were queued for it already: not stored again


def defaults(settings: QueueSettings) -> QueueConfig:
    """The operator's default limits: what a recipient's queue keeps to unless the recipient
    changed them (they are not stored with each queue, so a new default applies to all)."""
    return QueueLimits.defaults(settings).to_config(settings)


class Mailbox:
    def __init__(
        self,
        engine: Engine,
        queue: QueueSettings,
        metrics: Metrics | None = None,
        *,
        forwards_per_second: int,
        routed: bool = False,
    ) -> None:
        """`forwards_per_second`: what a recipient connection accepts from senders
        (--limit-forwards-per-second)."""
        self.engine = engine
        self.queue = queue
        self.metrics = metrics
        self.forwards_per_second = forwards_per_second
        self.defaults = defaults(queue)
        # Route lookup and send in one script call (every key on one server: not a cluster).
        self.routed = routed

    async def open(self, connection: str) -> None:
        """Create the connection's queue with the operator's default limits (idempotent)."""
        with contextlib.suppress(QueueExists):
            await self.engine.create_queue(queue_of(connection), self.defaults)

    async def enqueue(
        self, connection: str, envelope: bytes, recipient_key: str, *, confirm: bool = True
    ) -> str:
        """Queue one of our own messages (no `confirm`: replies do not wait for the
        replicas or fsyncs the settings ask of a sender's forward)."""
        message = SendMessage(body=envelope, content_type="", trace_id=recipient_key)
        return (await self._send(connection, message, confirm, limited=False)).message_id

    async def enqueue_forwarded(
        self, connection: str, envelope: bytes, recipient_key: str, digest: bytes, sender: str
    ) -> Forwarded:
        """Queue a forwarded envelope for `connection`, unless the same bytes (`digest`) are
        queued for it already; its bytes count for `sender` (a tag, "": for nobody)."""
        message = SendMessage(
            body=envelope, content_type="", trace_id=recipient_key, digest=digest, sender=sender
        )
        return await self._send(connection, message, True)

    async def _send(
        self, connection: str, message: SendMessage, confirm: bool, *, limited: bool = True
    ) -> Forwarded:
        """`limited`: a sender's forward, held to --limit-forwards-per-second (our own
        replies are not)."""
        ref = queue_of(connection)
        # The queue was made at the grant; it is made again here should it be gone.
        result = await self.engine.send(
            ref,
            [message],
            create_with=self.defaults,
            confirm=confirm,
            per_second=self.forwards_per_second if limited else 0,
        )
        duplicate = self._duplicate(result)
        return Forwarded(connection, result.message_ids[0], None, duplicate=duplicate)

    def _duplicate(self, result: SendResult) -> bool:
        duplicate = bool(result.duplicates and result.duplicates[0])
        if duplicate and self.metrics is not None:
            self.metrics.duplicates.inc()
        return duplicate

    async def forward(
        self,
        recipient_key: str,
        envelope: bytes,
        store: MediationStore,
        *,
        digest: bytes = b"",
        sender: str = "",
        notify_ms: int = 0,
    ) -> Forwarded | None:
        """Queue a forwarded message for whichever connection registered `recipient_key`;
        None when none did; not again when the same bytes (`digest`) are queued there; its
        bytes count for `sender` (a tag of mediator/mediation/senders.py, "": nobody). One
        script call where the deployment allows it (which also schedules the connection's
        phone notification `notify_ms` ahead, when it has a phone), else the route (cached
        per node) and then the send."""
        message = SendMessage(
            body=envelope, content_type="", trace_id=recipient_key, digest=digest, sender=sender
        )
        if self.routed:
            raw = raw_key(recipient_key)
            done = await self.engine.send_routed(
                keys.routes_bucket(raw),
                raw,
                message,
                report_fields=(rec.SERVICES, rec.DEVICE_TOKEN),
                notify_ms=notify_ms,
                per_second=self.forwards_per_second,
            )
            if done is None:
                return None
            connection, (has_push, has_device), notified, result = done
            duplicate = self._duplicate(result)
            mid = result.message_ids[0]
            return Forwarded(connection, mid, has_push, has_device, notified, duplicate)
        connection_ = await store.owner(recipient_key)
        if connection_ is None:
            return None
        return await self._send(connection_, message, True)

    async def status(self, connection: str, recipient_key: str | None = None) -> MailboxStatus:
        ref = queue_of(connection)
        try:
            if recipient_key is not None:
                tagged = await self.engine.tag_stats(ref, recipient_key)
                return MailboxStatus(
                    now_ms=tagged.now_ms,
                    waiting=tagged.visible,
                    stored=tagged.messages,
                    bytes=tagged.bytes,
                    oldest_ms=tagged.oldest_ms,
                    newest_ms=tagged.newest_ms,
                )
            stats = await self.engine.stats(ref)
        except QueueNotFound:
            now = await self.now_ms()
            return MailboxStatus(now, 0, 0, 0, None, None)
        return _status(stats)

    async def deliver(
        self,
        connection: str,
        limit: int,
        *,
        recipient_key: str | None = None,
        since_ms: int | None = None,
        wait_marker_ms: int = 0,
        hold: Hold | None = None,
        handoffs: bool = False,
    ) -> ReceiveResult:
        """Hand out up to `limit` messages until the delivery deadline (with the Redis time
        and, when nothing came back, the next time something may); `handoffs`: a live
        socket's loop, which takes what sends hand it meanwhile (cluster/handoffs.py)."""
        ref = queue_of(connection)
        vt = self.queue.delivery_timeout_seconds * 1000
        try:
            if recipient_key is None and since_ms is None:
                result = await self.engine.receive(
                    ref, limit, visibility_timeout_ms=vt, wait_marker_ms=wait_marker_ms, hold=hold
                )
            else:
                result = await self.engine.receive_filtered(
                    ref,
                    limit,
                    visibility_timeout_ms=vt,
                    tag=recipient_key,
                    min_enqueue_ms=since_ms,
                    wait_marker_ms=wait_marker_ms,
                    hold=hold,
                    handoffs=handoffs,
                )
        except QueueNotFound:
            return ReceiveResult([], await self.now_ms())
        if self.metrics is not None and result.messages:
            self.metrics.delivered.inc(len(result.messages))
        return result

    async def deliver_with_status(
        self, connection: str, limit: int, thread: ThreadOrder | None = None
    ) -> tuple[ReceiveResult, MailboxStatus, tuple[int, int] | None]:
        """A delivery-request's batch and what its answer says beside it, in one round
        trip: the queue's status after it and, with `thread`, the RFC 0008 orders of the
        answer (None when not counted)."""
        vt = self.queue.delivery_timeout_seconds * 1000
        order = None if thread is None else (thread.key, thread.args)
        try:
            got, stats, orders = await self.engine.receive_counted(
                queue_of(connection), limit, visibility_timeout_ms=vt, thread=order
            )
        except QueueNotFound:
            now = await self.now_ms()
            return ReceiveResult([], now), MailboxStatus(now, 0, 0, 0, None, None), None
        if self.metrics is not None and got.messages:
            self.metrics.delivered.inc(len(got.messages))
        return got, _status(stats), None if orders is None else (orders.ours, orders.highest)

    async def acknowledge(self, connection: str, message_ids: Sequence[str]) -> int:
        """Delete exactly these messages, if they are in this connection's own queue."""
        return (await self.acknowledge_with_status(connection, message_ids))[0]

    async def acknowledge_with_status(
        self, connection: str, message_ids: Sequence[str], thread: ThreadOrder | None = None
    ) -> tuple[int, MailboxStatus, tuple[int, int] | None]:
        """Delete these messages where they are this connection's, and the queue's status
        after, in one call (messages-received, answered with a status); with `thread`, the
        RFC 0008 orders of that answer too."""
        order = None if thread is None else (thread.key, thread.args)
        try:
            deleted, stats, orders = await self.engine.acknowledge(
                queue_of(connection), message_ids, order
            )
        except QueueNotFound:
            return 0, MailboxStatus(await self.now_ms(), 0, 0, 0, None, None), None
        if self.metrics is not None and deleted:
            self.metrics.acknowledged.inc(deleted)
        return deleted, _status(stats), orders

    async def release(self, connection: str, message_ids: Sequence[str]) -> int:
        if not message_ids:
            return 0
        try:
            return await self.engine.release(queue_of(connection), message_ids)
        except QueueNotFound:
            return 0

    async def give_back(self, connection: str, messages: Sequence[ReceivedMessage]) -> int:
        """Hand-offs a socket did not write, visible again where they still are those
        hand-offs (not reclaimed or offered again since): how many."""
        ref = queue_of(connection)
        return sum([await self.engine.give_back(ref, message) for message in messages])

    async def reclaim(self, connection: str, most: int) -> list[ReceivedMessage]:
        """Hand out again, with a new delivery deadline, everything handed out and not yet
        acknowledged: a new live socket took over from one that may be gone."""
        vt = self.queue.delivery_timeout_seconds * 1000
        try:
            messages = await self.engine.reclaim_inflight(queue_of(connection), vt, most)
        except QueueNotFound:
            return []
        if self.metrics is not None and messages:
            self.metrics.delivered.inc(len(messages))
        return messages

    async def now_ms(self) -> int:
        seconds, micros = await self.engine.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    async def limits(self, connection: str) -> QueueLimits:
        try:
            info = await self.engine.get_queue(queue_of(connection))
        except QueueNotFound:
            return QueueLimits.defaults(self.queue)
        return QueueLimits.from_config(info.config)

    async def set_limits(self, connection: str, limits: QueueLimits) -> None:
        await self.open(connection)
        config = limits.to_config(self.queue)
        await self.engine.set_limits(
            queue_of(connection),
            max_messages=config.max_messages,
            max_bytes=config.max_bytes,
            max_message_bytes=config.max_message_bytes,
            retention_ms=config.retention_ms,
            will_queue=config.will_queue,
        )


def _status(stats: QueueStats) -> MailboxStatus:
    return MailboxStatus(
        now_ms=stats.now_ms,
        waiting=stats.visible,
        stored=stats.messages,
        bytes=stats.bytes,
        oldest_ms=stats.oldest_ms,
        newest_ms=stats.newest_ms,
        last_added_ms=stats.last_added_ms,
        last_delivered_ms=stats.last_delivered_ms,
        last_removed_ms=stats.last_removed_ms,
    )
