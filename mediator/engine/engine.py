"""The engine's Python API: each call runs one Lua script per state change.

Every script that changes a queue also keeps its shard's books (totals, in-flight buckets,
oldest index, registry, schedule) in the same call, so they never drift. What still crosses
slots is done in steps ordered so that a crash in between leaves at worst a stale hint or
listing entry (repaired by the workers' audit) or an outbox entry (handed over by the
workers), never a lost message: handing a dead-lettered message to its dead letter queue,
the mqs listing, and the workers' hints of when a shard is next due.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

import msgpack
from redis.exceptions import NoScriptError, OutOfMemoryError

from mediator.engine import keys
from mediator.engine.durability import Durability
from mediator.engine.group_commit import GroupCommit
from mediator.engine.ids import new_message_id, origin_queue
from mediator.engine.model import (
    QUEUE_FIELDS,
    TIMER_KEYS,
    Hold,
    QueueConfig,
    QueueInfo,
    QueueRef,
    QueueStats,
    ReceivedMessage,
    ReceiveResult,
    SendMessage,
    SendResult,
)
from mediator.engine.recipients import MAX_RECEIVE_CALLS, RECEIVE_CHUNK, RecipientQueues
from mediator.engine.replies import (
    AcceptCode,
    AcceptReply,
    AcknowledgeReply,
    DeleteCode,
    DeleteReply,
    ForwardReply,
    Handout,
    QueueDeleteCode,
    QueueDeleteReply,
    QueueUpdateCode,
    QueueUpdateReply,
    ReceiveCode,
    SendCode,
    SendReply,
    SettleCode,
    SettleReply,
    ThreadOrders,
    UpkeepReply,
    queue_created,
    queue_stats,
)
from mediator.engine.replies import text as _s
from mediator.engine.scripts import Scripts
from mediator.errors import (
    HoldLost,
    InvalidQueueConfig,
    LimitExceeded,
    MessageNotFound,
    QueueExists,
    QueueInUse,
    QueueNotFound,
    RateLimited,
    ReplicationShortfall,
)
from mediator.storage.clients import STORAGE_ERRORS, RedisClient

log = logging.getLogger(__name__)

MAX_DEAD_LETTER_HOPS = 8
ACK_CHUNK = 100  # ids deleted per acknowledge call: keeps each script short
OUTBOX_GRACE_MS = 5000  # a dead-lettered message still in the outbox after this is handed over


class Engine(RecipientQueues):
    """All queues of one Redis deployment. Safe to share across tasks of one event loop.

    `defaults`: namespaces whose queues keep these settings out of their config hashes
    (DIDComm mailboxes follow the operator's defaults unless a recipient changed them).
    """

    def __init__(
        self,
        redis: RedisClient,
        *,
        wake_channel: str = "",
        confirmed: Durability | None = None,
        defaults: dict[str, QueueConfig] | None = None,
        observe_calls: Callable[[int], None] | None = None,
    ) -> None:
        self.redis = redis
        # This node's channel (keys.node_channel), named in a queue's waiters when a receive
        # here waits on it; its WakeHub listens there. Empty: this process never waits.
        self.wake_channel = wake_channel
        self.scripts = Scripts(redis)
        # Sends, receives and deletes share one pipelined connection per server; sends
        # wait there for replicas or fsyncs when the settings ask (`confirmed`).
        # `observe_calls` hears how many calls were in flight as each went.
        self.group = GroupCommit(redis, confirmed, observe_calls)
        self.defaults = dict(defaults or {})
        self._packed_defaults = {
            ns: msgpack.packb(config.to_fields(ns)[0]) for ns, config in self.defaults.items()
        }

    def packed_defaults(self, namespace: str) -> bytes | str:
        packed: bytes | str = self._packed_defaults.get(namespace, "")
        return packed

    # ------------------------------------------------------------------ queues

    async def create_queue(self, ref: QueueRef, config: QueueConfig) -> QueueInfo:
        if await self.queue_exists(ref):  # 409 comes before any validation
            await self._list(ref)
            raise QueueExists(ref.name)
        await self._check_dead_letter_queue(ref, config)
        values = config.stored_fields(ref.namespace, self.defaults.get(ref.namespace))
        qk = keys.queue_keys(ref.qualified)
        created = queue_created(
            await self.scripts.call("queue_create", qk.all, [ref.qualified, *_flatten(values)])
        )
        # The listing is written after the queue: a delete racing us re-checks and re-adds.
        await self._list(ref)
        if not created:
            raise QueueExists(ref.name)
        if config.dead_letter_queue is not None:
            try:
                await self._add_dead_letter_user(ref, config.dead_letter_queue)
            except InvalidQueueConfig:
                await self.delete_queue(ref, cascade=True)  # refused: leave nothing behind
                raise
        return await self.get_queue(ref)

    async def update_queue(self, ref: QueueRef, config: QueueConfig) -> QueueInfo:
        if not await self.queue_exists(ref):  # 404 comes before any validation
            raise QueueNotFound(ref.name)
        await self._check_dead_letter_queue(ref, config)
        values, cleared = config.to_fields(ref.namespace)
        # Fields not settable through an update (limits) are kept as they are; a timer's
        # other form (seconds or ms) goes.
        cleared = [c for c in cleared if c in ("mr", "dlq", *TIMER_KEYS)]
        qk = keys.queue_keys(ref.qualified)
        result = QueueUpdateReply.decode(
            await self.scripts.call(
                "queue_update", qk.all, [ref.qualified, len(values), *_flatten(values), *cleared]
            )
        )
        if result.code is QueueUpdateCode.NO_QUEUE:
            raise QueueNotFound(ref.name)
        await self._hint(qk.shard, result.hint)
        previous = result.previous_dead_letter_queue
        new = (
            QueueRef(ref.namespace, config.dead_letter_queue).qualified
            if (config.dead_letter_queue is not None)
            else ""
        )
        if previous and previous != new:
            await self.redis.srem(keys.queue_keys(previous).refs, ref.qualified)
        if config.dead_letter_queue is not None and previous != new:
            await self._add_dead_letter_user(ref, config.dead_letter_queue)
        return await self.get_queue(ref)

    async def delete_queue(self, ref: QueueRef, *, cascade: bool) -> None:
        qk = keys.queue_keys(ref.qualified)
        # A namespace whose queue config lives in a record of its own (a DIDComm connection)
        # keeps the record and loses only the queue's fields.
        shared = msgpack.packb(list(QUEUE_FIELDS)) if ref.namespace in self.defaults else ""
        for _ in range(5):
            result = QueueDeleteReply.decode(
                await self.scripts.call("queue_delete", [*qk.all, qk.refs], [ref.qualified, shared])
            )
            if result.code is QueueDeleteCode.NO_QUEUE:
                raise QueueNotFound(ref.name)
            if result.code is QueueDeleteCode.DELETED:
                await self._hint(qk.shard, result.hint)
                pipe = self.redis.pipeline(transaction=False)
                if ref.namespace == keys.MQS_NAMESPACE:
                    pipe.zrem(keys.mqs_names(), ref.name)
                if own := result.dead_letter_queue:
                    pipe.srem(keys.queue_keys(own).refs, ref.qualified)
                await pipe.execute()
                await self._relist_if_recreated(ref)
                return
            real = []
            for user in result.users:
                dlq = await self.redis.hget(keys.queue_keys(user).cfg, "dlq")
                if dlq is not None and _s(dlq) == ref.qualified:
                    real.append(user)
                else:
                    await self.redis.srem(qk.refs, user)
            if real and not cascade:
                raise QueueInUse(ref.name, [QueueRef.parse(u).name for u in real])
            for user in real:
                await self.scripts.call(
                    "queue_detach", [keys.queue_keys(user).cfg], [ref.qualified]
                )
                await self.redis.srem(qk.refs, user)
        raise QueueInUse(ref.name, [])  # new users kept appearing while we detached them

    async def get_queue(self, ref: QueueRef) -> QueueInfo:
        fields = await self._queue_fields(keys.queue_keys(ref.qualified).cfg)
        if "created" not in fields:
            raise QueueNotFound(ref.name)
        return self._info(ref, fields)

    async def _queue_fields(self, cfg: str) -> dict[str, str]:
        """The queue's own fields of its config hash (a DIDComm record holds others too)."""
        values = await self.redis.hmget(cfg, list(QUEUE_FIELDS))
        return {k: _s(v) for k, v in zip(QUEUE_FIELDS, values, strict=True) if v is not None}

    async def queue_exists(self, ref: QueueRef) -> bool:
        return bool(await self.redis.hexists(keys.queue_keys(ref.qualified).cfg, "created"))

    async def count_queues(self, namespace: str) -> int:
        """Listed queues (mqs): the listing's size."""
        return int(await self.redis.zcard(keys.mqs_names())) if namespace == "mqs" else 0

    async def list_queues(self, namespace: str, start: int, stop: int) -> list[QueueInfo]:
        """mqs queues at positions start..stop (inclusive) in name order."""
        if namespace != keys.MQS_NAMESPACE:
            return []
        names = [_s(n) for n in await self.redis.zrange(keys.mqs_names(), start, stop)]
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.hmget(keys.queue_keys(QueueRef(namespace, name).qualified).cfg, QUEUE_FIELDS)
        infos = []
        for name, values in zip(names, await pipe.execute(), strict=True):
            fields = {k: _s(v) for k, v in zip(QUEUE_FIELDS, values, strict=True) if v}
            if "created" in fields:
                infos.append(self._info(QueueRef(namespace, name), fields))
        return infos

    async def stats(self, ref: QueueRef) -> QueueStats:
        qk = keys.queue_keys(ref.qualified)
        stats = queue_stats(await self.scripts.call("queue_stats", qk.all, [ref.qualified]))
        if stats is None:
            raise QueueNotFound(ref.name)
        return stats

    async def peek(self, ref: QueueRef, max_messages: int) -> list[ReceivedMessage]:
        """The oldest stored messages, visible or handed out, without changing anything (an
        operator's view: receive counts and deadlines stay as they are)."""
        qk = keys.queue_keys(ref.qualified)
        r = Handout.decode(
            await self.scripts.call(
                "peek", qk.all, [max_messages, self.packed_defaults(ref.namespace)]
            )
        )
        if r.code is ReceiveCode.NO_QUEUE:
            raise QueueNotFound(ref.name)
        return list(r.messages)

    async def send(
        self,
        ref: QueueRef,
        messages: Sequence[SendMessage],
        *,
        create_with: QueueConfig | None = None,
        confirm: bool = True,
        per_second: int = 0,
    ) -> SendResult:
        """Store messages atomically (all or none). `create_with` creates a missing queue;
        `confirm` waits for the replicas or fsyncs the settings ask for (ReplicationShortfall
        when they fall short: the messages are stored all the same); `per_second` > 0: the
        most messages the queue takes in a second (RateLimited beyond)."""
        qk = keys.queue_keys(ref.qualified)
        ids = [new_message_id(ref.qualified) for _ in messages]
        args: list[Any] = [ref.qualified, self.packed_defaults(ref.namespace), per_second]
        if create_with is None:
            args += ["0", 0]
        else:
            lazy = create_with.stored_fields(ref.namespace, self.defaults.get(ref.namespace))
            args += ["1", len(lazy), *_flatten(lazy)]
        for mid, m in zip(ids, messages, strict=True):
            args += [mid, m.content_type, m.content_encoding, m.trace_id, m.body, m.digest]
            args.append(m.sender)
        r, shortfall = await self._write("send", qk.all, args, confirm=confirm)
        result = await self._sent(ref, qk.shard, SendReply.decode(r), ids)
        if shortfall is not None:  # stored, but not as durably as asked
            raise ReplicationShortfall(f"{shortfall} (message ids: {', '.join(ids)})")
        return result

    async def send_routed(
        self,
        bucket: str,
        field: bytes,
        message: SendMessage,
        *,
        report_fields: tuple[str, ...] = (),
        notify_ms: int = 0,
        confirm: bool = True,
        per_second: int = 0,
    ) -> tuple[str, tuple[bool, ...], bool, SendResult] | None:
        """Store one message in the DIDComm queue that hash field `field` of `bucket` names,
        in one script call: (queue name, whether its config has each of `report_fields`,
        whether a phone notification was scheduled `notify_ms` ahead (0: none), the result),
        or None when the field is absent. Only where all keys live on one server (not Redis
        Cluster): the script fills in the queue's keys once it has read the name."""
        namespace = keys.DIDCOMM_NAMESPACE
        mid = new_message_id(namespace)
        args: list[Any] = [
            field,
            self.packed_defaults(namespace),
            " ".join((str(per_second), str(notify_ms), *report_fields)),
            mid,
            message.content_type,
            message.content_encoding,
            message.trace_id,
            message.body,
            message.digest,
            message.sender,
        ]
        raw, shortfall = await self._write("forward", [bucket], args, confirm=confirm)
        r = ForwardReply.decode(raw, len(report_fields))
        if r.send is None:
            return None
        ref = QueueRef(namespace, r.name)
        result = await self._sent(ref, -1, r.send, [mid])
        if shortfall is not None:
            raise ReplicationShortfall(f"{shortfall} (message ids: {mid})")
        return ref.name, r.present, r.notified, result

    async def _sent(self, ref: QueueRef, shard: int, r: SendReply, ids: list[str]) -> SendResult:
        """A send script's reply: the result, or the error it names (`shard` -1: found
        from the name when needed)."""
        match r.code:
            case SendCode.NO_QUEUE:
                raise QueueNotFound(ref.name)
            case SendCode.MESSAGE_TOO_LARGE:
                raise LimitExceeded(
                    f"message {r.message} is {r.size} bytes, over the queue's message size limit",
                    "message_size",
                )
            case SendCode.COUNT_LIMIT:
                raise LimitExceeded(f"the queue holds {r.held} messages, its count limit", "count")
            case SendCode.SIZE_LIMIT:
                raise LimitExceeded(f"the queue holds {r.held} bytes, its size limit", "size")
            case SendCode.REFUSED:
                raise LimitExceeded("the queue does not accept messages", "will_queue")
            case SendCode.RATE_LIMITED:
                raise RateLimited(
                    "the recipient is receiving too many messages: try again later",
                    retry_after=math.ceil(r.wait_ms / 1000),
                    limit="forwards_per_second",
                )
        if r.hint >= 0:
            await self._hint(shard if shard >= 0 else keys.shard_of(ref.qualified), r.hint)
        return SendResult(
            message_ids=[c or mid for c, mid in zip(r.copies, ids, strict=True)],
            visible=r.visible,
            delayed=r.delayed,
            duplicates=tuple(bool(c) for c in r.copies),
        )

    async def receive(
        self,
        ref: QueueRef,
        max_messages: int,
        *,
        visibility_timeout_ms: int | None = None,
        wait_marker_ms: int = 0,
        hold: Hold | None = None,
    ) -> ReceiveResult:
        """Hand out up to `max_messages`, each hidden until its visibility deadline.

        `wait_marker_ms` > 0 says the caller will wait for wake-ups if nothing comes back:
        this node is then named in the queue's waiters for that long, and sends publish
        wake-ups to the nodes named there only. `hold`: a live socket's hold on the
        recipient, renewed by the same call (HoldLost when another socket has it).
        """
        return await self._receive(ref, max_messages, visibility_timeout_ms, wait_marker_ms, hold)

    def _receive_args(
        self, ref: QueueRef, want: int, vt: str, wait_marker_ms: int, hold_args: list[Any]
    ) -> list[Any]:
        defaults = self.packed_defaults(ref.namespace)
        return [
            ref.qualified,
            self.wake_channel,
            want,
            vt,
            wait_marker_ms,
            OUTBOX_GRACE_MS,
            defaults,
            *hold_args,
        ]

    async def _receive(
        self,
        ref: QueueRef,
        max_messages: int,
        visibility_timeout_ms: int | None,
        wait_marker_ms: int,
        hold: Hold | None,
        first: Any = None,
    ) -> ReceiveResult:
        """Engine.receive; `first`: the reply of its first script call, made already (in a
        pipeline with others)."""
        qk = keys.queue_keys(ref.qualified)
        hold_keys, hold_args = hold.script_args() if hold is not None else ([], [])
        vt = "" if visibility_timeout_ms is None else str(visibility_timeout_ms)
        out: list[ReceivedMessage] = []
        dead_lettered: list[str] = []  # ids this call moved to a dead letter queue
        now = 0
        next_due: int | None = None
        drained = False
        calls = 0
        while len(out) < max_messages and calls < MAX_RECEIVE_CALLS:
            calls += 1
            want = min(RECEIVE_CHUNK, max_messages - len(out))
            if calls == 1 and first is not None:
                raw = first
            else:
                args = self._receive_args(ref, want, vt, wait_marker_ms, hold_args)
                raw, _ = await self.group.write("receive", [*qk.all, *hold_keys], args)
            r = Handout.decode(raw)
            if r.code is ReceiveCode.NO_QUEUE:
                raise QueueNotFound(ref.name)
            if r.code is ReceiveCode.HOLD_LOST:
                raise HoldLost(ref.name)
            now = r.now_ms
            await self._hint(qk.shard, r.hint)
            out += r.messages
            dead_lettered += r.dead_lettered
            if r.more:
                continue  # stopped at its purge budget: there may be more behind
            if len(r.messages) < want:
                drained = True
                if not out:
                    next_due = r.next_due_ms
                break
        if dead_lettered:
            try:
                entries = await self.redis.hmget(qk.outbox, dead_lettered)
                for packed in entries:
                    if isinstance(packed, bytes) and not packed.startswith(b"x:"):
                        await self.hand_over(ref.qualified, packed)
            except STORAGE_ERRORS as exc:
                # The messages are received; the workers finish the hand-over from the outbox.
                log.warning("dead-letter hand-over left to the workers: %s", exc)
        return ReceiveResult(out, now, next_due, drained)

    async def receive_counted(
        self,
        ref: QueueRef,
        max_messages: int,
        *,
        visibility_timeout_ms: int,
        thread: tuple[str, Sequence[Any]] | None = None,
    ) -> tuple[ReceiveResult, QueueStats, ThreadOrders | None]:
        """A pickup's receive and what its answer says beside the messages, in one round
        trip where the deployment allows it: the queue's counts after it and, given
        `thread` (as for acknowledge), the RFC 0008 orders of the answer (None: Redis is
        full and refused to count them)."""
        qk = keys.queue_keys(ref.qualified)
        vt = str(visibility_timeout_ms)
        calls: list[tuple[str, list[str], list[Any]]] = [
            ("receive", qk.all, self._receive_args(ref, max_messages, vt, 0, [])),
            ("queue_stats", qk.all, [ref.qualified]),
        ]
        if thread is not None:
            calls.append(("thread_order", [thread[0]], list(thread[1])))
        if self.group.cluster or max_messages > RECEIVE_CHUNK:
            replies: list[Any] = [None, None, None]  # each on its own, in order
        else:
            replies = [*await self.group.side_by_side(calls), None]
        first, counted, ordered = replies[:3]
        alone = first is None or isinstance(first, NoScriptError)  # it did not run
        if not alone and isinstance(first, Exception):
            raise first
        got = await self._receive(
            ref, max_messages, visibility_timeout_ms, 0, None, None if alone else first
        )
        # The counts went right after the first receive call: stale if it did not run then,
        # or if more calls ran after it (it stopped at its purge budget).
        if alone or _more(first) or counted is None or isinstance(counted, NoScriptError):
            counted = await self.scripts.call(*calls[1])
        elif isinstance(counted, Exception):
            raise counted
        stats = queue_stats(counted)
        if stats is None:
            raise QueueNotFound(ref.name)
        if thread is None:
            return got, stats, None
        if ordered is None or isinstance(ordered, NoScriptError):
            try:
                ordered = await self.scripts.call(*calls[2])
            except OutOfMemoryError:
                ordered = None
        if isinstance(ordered, OutOfMemoryError) or ordered is None:
            return got, stats, None  # Redis is full: the answer goes, its orders uncounted
        if isinstance(ordered, Exception):
            raise ordered
        return got, stats, ThreadOrders.decode(ordered)

    async def delete_message(self, namespace: str, message_id: str) -> None:
        """Delete by id, following the message into dead letter queues it moved to."""
        origin = origin_queue(message_id)
        if origin is None or QueueRef.parse(origin).namespace != namespace:
            raise MessageNotFound(message_id)
        if not await self._delete_following(origin, message_id):
            raise MessageNotFound(message_id)

    async def acknowledge(
        self,
        ref: QueueRef,
        message_ids: Sequence[str],
        thread: tuple[str, Sequence[Any]] | None = None,
    ) -> tuple[int, QueueStats, tuple[int, int] | None]:
        """Delete these ids where they are in this very queue (a recipient's own), in one
        call per hundred ids: how many were deleted, the queue's counts after, and, given
        `thread` (a thread hash beside the queue and thread_order.lua's arguments), the
        RFC 0008 orders of the answer, counted in the same call."""
        qk = keys.queue_keys(ref.qualified)
        deleted = 0
        ids = list(message_ids)
        chunks = [ids[i : i + ACK_CHUNK] for i in range(0, len(ids), ACK_CHUNK)] or [[]]
        for n, chunk in enumerate(chunks):
            script_keys, tail = qk.all, []
            if thread is not None and n == len(chunks) - 1:
                script_keys, tail = [*qk.all, thread[0]], list(thread[1])
            r = AcknowledgeReply.decode(
                await self.group.call(
                    "acknowledge", script_keys, [ref.qualified, len(chunk), *chunk, *tail]
                )
            )
            if r.stats is None:
                raise QueueNotFound(ref.name)
            stats, orders = r.stats, r.orders
            deleted += r.deleted
            await self._hint(qk.shard, r.hint)
        return deleted, stats, orders if thread is not None else None

    async def delete_in_queue(self, ref: QueueRef, message_id: str) -> bool:
        """Delete a message only if it is in this very queue (recipients' own queues)."""
        qk = keys.queue_keys(ref.qualified)
        r = DeleteReply.decode(
            await self.group.call("delete_message", qk.all, [ref.qualified, message_id])
        )
        if r.code is not DeleteCode.DELETED:
            return False
        await self._hint(qk.shard, r.hint)
        return True

    async def _delete_following(self, qualified: str, message_id: str) -> bool:
        """Delete in the queue the id names, and where the queues it was dead-lettered from
        recorded it went (each in its own shard's forwarding entries)."""
        deleted = False
        followed: list[str] = []  # queues whose forwarding entry for the message we used
        seen = {qualified}
        for _ in range(MAX_DEAD_LETTER_HOPS):
            deleted_reply, _ = await self.group.write(
                "delete_message", keys.queue_keys(qualified).all, [qualified, message_id]
            )
            r = DeleteReply.decode(deleted_reply)
            if r.code is DeleteCode.DELETED:
                await self._hint(keys.shard_of(qualified), r.hint)
                deleted = True
                break
            if r.code is DeleteCode.MOVED:
                deleted = True  # it was in this queue's outbox: gone from here
                qualified = r.dead_letter_queue
                continue
            target = await self.redis.hget(keys.moved(keys.shard_of(qualified)), message_id)
            if target is None or _s(target) in seen:
                break
            followed.append(qualified)
            qualified = _s(target)
            seen.add(qualified)
        if followed:
            pipe = self.redis.pipeline(transaction=False)
            for source in followed:
                shard = keys.shard_of(source)
                pipe.hdel(keys.moved(shard), message_id)
                pipe.zrem(keys.moved_expiry(shard), message_id)
            await pipe.execute()
        return deleted

    async def hand_over(self, source: str, packed: bytes) -> None:
        """Move a dead-lettered message from its source's outbox into its dead letter queue.

        Accept (idempotent) -> settle in the source, which records where it went. A crash
        at any point leaves the outbox entry, which the workers hand over again.
        """
        entry = msgpack.unpackb(packed, raw=True)
        message_id, dlq = _s(entry[0]), _s(entry[7])
        dk = keys.queue_keys(dlq)
        # Confirmed too: on a cluster the two queues may live on two primaries.
        raw, shortfall = await self._write("dead_letter_accept", dk.all, [dlq, packed])
        r = AcceptReply.decode(raw)
        sk = keys.queue_keys(source)
        settle_keys = [
            sk.ids,
            sk.outbox,
            keys.moved(sk.shard),
            keys.moved_expiry(sk.shard),
            sk.due,
        ]
        if r.code is AcceptCode.NO_QUEUE:
            log.warning(
                "dead letter queue is gone; dropping dead-lettered message",
                extra={"queue": source, "dead_letter_queue": dlq, "message_id": message_id},
            )
            await self.scripts.call(
                "dead_letter_settle", settle_keys, [message_id, dlq, 0, keys.MOVED_MEMBER]
            )
            return
        await self._hint(dk.shard, r.hint)
        if shortfall is not None and r.code is AcceptCode.ACCEPTED:
            # Not confirmed: keep the source's outbox entry, which the workers hand over
            # again after the grace time (accepting it twice changes nothing).
            log.warning(
                "dead-letter hand-over not confirmed; the workers retry it: %s",
                shortfall,
                extra={"queue": source, "dead_letter_queue": dlq, "message_id": message_id},
            )
            return
        forget_at = int(entry[4]) + r.retention_ms + 60_000  # first enqueue + retention
        settled = SettleReply.decode(
            await self.scripts.call(
                "dead_letter_settle", settle_keys, [message_id, dlq, forget_at, keys.MOVED_MEMBER]
            )
        )
        await self._hint(sk.shard, settled.hint)
        if settled.code is SettleCode.DELETED:
            # Deleted by id while it was being handed over: delete it where it landed.
            await self.scripts.call("delete_message", dk.all, [dlq, message_id])

    # ------------------------------------------------------------------ upkeep

    async def upkeep(self, qualified: str, *, limit: int = 1000, grace_ms: int = 5000) -> None:
        """Run one queue's due upkeep; it puts the next one in the shard's schedule."""
        namespace = qualified.partition(":")[0]
        r = UpkeepReply.decode(
            await self.scripts.call(
                "upkeep",
                keys.queue_keys(qualified).all,
                [qualified, limit, grace_ms, self.packed_defaults(namespace)],
            )
        )
        for packed in r.abandoned:
            await self.hand_over(qualified, packed)

    async def forget_moved(self, shard: int, limit: int = 1000) -> int:
        """Drop the shard's expired dead-letter forwarding entries."""
        return int(
            await self.scripts.call(
                "forget_moved",
                [keys.moved(shard), keys.moved_expiry(shard), keys.shard_due(shard)],
                [keys.MOVED_MEMBER, limit],
            )
        )

    async def _hint(self, shard: int, due_ms: int) -> None:
        """A script made something the earliest due in its shard: tell the workers."""
        if due_ms >= 0:
            await self.redis.zadd(keys.next_due(), {str(shard): due_ms}, lt=True)

    # ---------------------------------------------------------------- helpers

    async def _write(
        self, name: str, script_keys: list[str], args: list[Any], *, confirm: bool = True
    ) -> tuple[Any, Exception | None]:
        """A script that stores messages, on its server's line (group_commit.py), and why
        its confirmation fell short (None when it did not, or when nothing waits: no
        setting asks for it, or `confirm` is off)."""
        return await self.group.write(name, script_keys, args, confirm=confirm)

    def _info(self, ref: QueueRef, fields: dict[str, str]) -> QueueInfo:
        config = QueueConfig.from_fields(fields, self.defaults.get(ref.namespace), ref.namespace)
        return QueueInfo(name=ref.name, config=config, created_ms=int(fields["created"]))

    async def _list(self, ref: QueueRef) -> None:
        if ref.namespace == keys.MQS_NAMESPACE:
            await self.redis.zadd(keys.mqs_names(), {ref.name: 0})

    async def _relist_if_recreated(self, ref: QueueRef) -> None:
        """A queue of the same name created while we removed the old one's listing and
        references gets them back (creators write the queue first, the rest second)."""
        dlq = await self.redis.hget(keys.queue_keys(ref.qualified).cfg, "dlq")
        if not await self.queue_exists(ref):
            return
        await self._list(ref)
        if dlq is not None:
            await self.redis.sadd(keys.queue_keys(_s(dlq)).refs, ref.qualified)

    async def _check_dead_letter_queue(self, ref: QueueRef, config: QueueConfig) -> None:
        if (config.dead_letter_queue is None) != (config.max_receives is None):
            raise InvalidQueueConfig("a dead letter queue and max receives must be set together")
        if config.dead_letter_queue is None:
            return
        if config.dead_letter_queue == ref.name:
            raise InvalidQueueConfig("a queue cannot be its own dead letter queue")
        if not await self.queue_exists(QueueRef(ref.namespace, config.dead_letter_queue)):
            raise InvalidQueueConfig(
                f"dead letter queue {config.dead_letter_queue!r} does not exist"
            )

    async def _add_dead_letter_user(self, ref: QueueRef, dead_letter_queue: str) -> None:
        dlq = QueueRef(ref.namespace, dead_letter_queue)
        await self.redis.sadd(keys.queue_keys(dlq.qualified).refs, ref.qualified)
        if not await self.queue_exists(dlq):
            # The dead letter queue was deleted while we were pointing at it.
            await self.scripts.call(
                "queue_detach", [keys.queue_keys(ref.qualified).cfg], [dlq.qualified]
            )
            await self.redis.delete(keys.queue_keys(dlq.qualified).refs)
            raise InvalidQueueConfig(f"dead letter queue {dead_letter_queue!r} does not exist")


def _more(reply: Any) -> bool:
    """Whether a receive script's raw reply says it stopped at its purge budget."""
    return isinstance(reply, list) and len(reply) > 4 and reply[0] == 1 and reply[4] == 1


def _flatten(values: dict[str, str]) -> list[str]:
    return [item for pair in values.items() for item in pair]
