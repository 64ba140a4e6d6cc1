"""The engine's Python API: each call runs one Lua script per state change.

Two steps cross queues and so cannot be one script on Redis Cluster: handing a dead-lettered
message to its dead letter queue, and the indexes (queue registry, upkeep schedule,
dead-letter forwarding). Both are ordered so that a crash in between leaves at worst a
stale index entry (cleaned by the workers) or an outbox entry (handed over by the workers),
never a lost message.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import msgpack

from mediator.engine import keys
from mediator.engine.ids import new_message_id, origin_queue
from mediator.engine.model import (
    QueueConfig,
    QueueInfo,
    QueueRef,
    QueueStats,
    ReceivedMessage,
    ReceiveResult,
    SendMessage,
    SendResult,
)
from mediator.engine.recipients import (
    MAX_RECEIVE_CALLS,
    RECEIVE_CHUNK,
    RecipientQueues,
    optional_ms,
    received_message,
)
from mediator.engine.recipients import text as _s
from mediator.engine.scripts import ConfirmedScripts, Scripts
from mediator.errors import (
    InvalidQueueConfig,
    LimitExceeded,
    MessageNotFound,
    QueueExists,
    QueueInUse,
    QueueNotFound,
    ReplicationShortfall,
)
from mediator.storage.clients import STORAGE_ERRORS, RedisClient

log = logging.getLogger(__name__)

MAX_DEAD_LETTER_HOPS = 8
OUTBOX_GRACE_MS = 5000  # a dead-lettered message still in the outbox after this is handed over


class Engine(RecipientQueues):
    """All queues of one Redis deployment. Safe to share across tasks of one event loop."""

    def __init__(
        self,
        redis: RedisClient,
        *,
        shards: int = 16,
        wake_channel: str = "",
        confirmed: ConfirmedScripts | None = None,
    ) -> None:
        self.redis = redis
        self.shards = shards
        # Sends wait for replicas or fsyncs through it when the settings ask for them.
        self.confirmed = confirmed if confirmed is not None and confirmed.enabled else None
        # This node's channel (keys.node_channel), named in a queue's waiters when a receive
        # here waits on it; its WakeHub listens there. Empty: this process never waits.
        self.wake_channel = wake_channel
        self.scripts = Scripts(redis)

    # ------------------------------------------------------------------ queues

    async def create_queue(self, ref: QueueRef, config: QueueConfig) -> QueueInfo:
        if await self.queue_exists(ref):  # 409 comes before any validation
            await self._index(ref)
            raise QueueExists(ref.name)
        await self._check_dead_letter_queue(ref, config)
        values, _ = config.to_fields(ref.namespace)
        created = await self.scripts.call(
            "queue_create", [keys.queue_keys(ref.qualified).cfg], _flatten(values)
        )
        # The registry is written after the queue: a delete racing us re-checks and re-adds.
        await self._index(ref)
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
        # Fields not settable through an update (limits) are kept as they are.
        cleared = [c for c in cleared if c in ("mr", "dlq")]
        flat = _flatten(values)
        result = await self.scripts.call(
            "queue_update",
            [keys.queue_keys(ref.qualified).cfg],
            [len(values), *flat, *cleared],
        )
        if result[0] == 0:
            raise QueueNotFound(ref.name)
        await self._schedule(ref.qualified, int(result[2]), lower_only=True)
        previous = _s(result[1])
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
        for _ in range(5):
            result = await self.scripts.call("queue_delete", [*qk.all, qk.refs], [])
            code = int(result[0])
            if code == 0:
                raise QueueNotFound(ref.name)
            if code == 1:
                pipe = self.redis.pipeline(transaction=False)
                pipe.zrem(keys.registry(ref.namespace), ref.name)
                pipe.zrem(keys.upkeep_due(keys.shard_of(ref.qualified, self.shards)), ref.qualified)
                if own := _s(result[1]):
                    pipe.srem(keys.queue_keys(own).refs, ref.qualified)
                await pipe.execute()
                await self._reindex_if_recreated(ref)
                return
            users = [_s(u) for u in result[1:]]
            real = []
            for user in users:
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
        fields = await self.redis.hgetall(keys.queue_keys(ref.qualified).cfg)
        if not fields:
            raise QueueNotFound(ref.name)
        return _info(ref.name, fields)

    async def queue_exists(self, ref: QueueRef) -> bool:
        return bool(await self.redis.exists(keys.queue_keys(ref.qualified).cfg))

    async def count_queues(self, namespace: str) -> int:
        return int(await self.redis.zcard(keys.registry(namespace)))

    async def list_queues(self, namespace: str, start: int, stop: int) -> list[QueueInfo]:
        """Queues at positions start..stop (inclusive) in name order."""
        names = [_s(n) for n in await self.redis.zrange(keys.registry(namespace), start, stop)]
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.hgetall(keys.queue_keys(QueueRef(namespace, name).qualified).cfg)
        rows = await pipe.execute()
        return [_info(name, fields) for name, fields in zip(names, rows, strict=True) if fields]

    async def stats(self, ref: QueueRef) -> QueueStats:
        qk = keys.queue_keys(ref.qualified)
        r = await self.scripts.call(
            "queue_stats",
            [qk.cfg, qk.stream, qk.inflight, qk.delayed, qk.delayed_bodies, qk.outbox],
            [],
        )
        if int(r[0]) == -1:
            raise QueueNotFound(ref.name)
        return QueueStats(
            now_ms=int(r[1]),
            stored=int(r[2]),
            in_flight=int(r[3]),
            delayed=int(r[4]),
            oldest_ms=None if int(r[5]) < 0 else int(r[5]),
            bytes=int(r[6]),
            sched_ms=optional_ms(r[7]),
            last_added_ms=optional_ms(r[8]),
            last_delivered_ms=optional_ms(r[9]),
            last_removed_ms=optional_ms(r[10]),
            newest_ms=optional_ms(r[11]),
        )

    async def peek(self, ref: QueueRef, max_messages: int) -> list[ReceivedMessage]:
        """The oldest stored messages, visible or handed out, without changing anything (an
        operator's view: receive counts and deadlines stay as they are)."""
        qk = keys.queue_keys(ref.qualified)
        r = await self.scripts.call(
            "peek", [qk.cfg, qk.stream, qk.inflight, qk.receives], [max_messages]
        )
        if int(r[0]) == -1:
            raise QueueNotFound(ref.name)
        return [received_message(r[6 + 9 * i : 15 + 9 * i]) for i in range(int(r[3]))]

    async def send(
        self,
        ref: QueueRef,
        messages: Sequence[SendMessage],
        *,
        create_with: QueueConfig | None = None,
        confirm: bool = True,
    ) -> SendResult:
        """Store messages atomically (all or none). `create_with` creates a missing queue;
        `confirm` waits for the replicas or fsyncs the settings ask for (ReplicationShortfall
        when they fall short: the messages are stored all the same)."""
        qk = keys.queue_keys(ref.qualified)
        ids = [new_message_id(ref.qualified) for _ in messages]
        lazy: list[str] = []
        if create_with is not None:
            lazy = _flatten(create_with.to_fields(ref.namespace)[0])
        args: list[Any] = [ref.qualified, len(lazy) // 2, *lazy]
        for mid, m in zip(ids, messages, strict=True):
            args += [mid, m.content_type, m.content_encoding, m.trace_id, m.body]
        r, shortfall = await self._write(
            "send",
            [qk.cfg, qk.stream, qk.delayed, qk.delayed_bodies, qk.ids, qk.waiters],
            args,
            confirm=confirm,
        )
        code = int(r[0])
        if code == -1:
            raise QueueNotFound(ref.name)
        if code == -2:
            raise LimitExceeded(
                f"message {int(r[1])} is {int(r[2])} bytes, over the queue's message size limit",
                "message_size",
            )
        if code == -3:
            raise LimitExceeded(f"the queue holds {int(r[1])} messages, its count limit", "count")
        if code == -4:
            raise LimitExceeded(f"the queue holds {int(r[1])} bytes, its size limit", "size")
        if code == -5:
            raise LimitExceeded("the queue does not accept messages", "will_queue")
        sched = int(r[2])
        if sched >= 0:
            await self._schedule(ref.qualified, sched, lower_only=True)
            if create_with is not None:
                await self.redis.zadd(keys.registry(ref.namespace), {ref.name: 0}, nx=True)
        if shortfall is not None:  # stored, and indexed, but not as durably as asked
            raise ReplicationShortfall(f"{shortfall} (message ids: {', '.join(ids)})")
        return SendResult(message_ids=ids, visible=int(r[3]), delayed=int(r[4]))

    async def receive(
        self,
        ref: QueueRef,
        max_messages: int,
        *,
        visibility_timeout_ms: int | None = None,
        wait_marker_ms: int = 0,
    ) -> ReceiveResult:
        """Hand out up to `max_messages`, each hidden until its visibility deadline.

        `wait_marker_ms` > 0 says the caller will wait for wake-ups if nothing comes back:
        this node is then named in the queue's waiters for that long, and sends publish
        wake-ups to the nodes named there only.
        """
        qk = keys.queue_keys(ref.qualified)
        vt = "" if visibility_timeout_ms is None else str(visibility_timeout_ms)
        out: list[ReceivedMessage] = []
        dead_lettered: list[str] = []  # ids this call moved to a dead letter queue
        now = 0
        next_due: int | None = None
        calls = 0
        while len(out) < max_messages and calls < MAX_RECEIVE_CALLS:
            calls += 1
            want = min(RECEIVE_CHUNK, max_messages - len(out))
            r = await self.scripts.call(
                "receive",
                qk.all,
                [ref.qualified, self.wake_channel, want, vt, wait_marker_ms, OUTBOX_GRACE_MS],
            )
            if int(r[0]) == -1:
                raise QueueNotFound(ref.name)
            now = int(r[1])
            count, more, sched = int(r[3]), int(r[4]), int(r[5])
            if sched >= 0:
                await self._schedule(ref.qualified, sched, lower_only=True)
            for i in range(count):
                f = r[6 + 9 * i : 15 + 9 * i]
                out.append(received_message(f))
                if f[8]:
                    dead_lettered.append(_s(f[0]))
            if more:
                continue  # stopped at its purge budget: there may be more behind
            if count < want:
                if not out and int(r[2]) >= 0:
                    next_due = int(r[2])
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
        return ReceiveResult(messages=out, now_ms=now, next_due_ms=next_due)

    async def delete_message(self, namespace: str, message_id: str) -> None:
        """Delete by id, following the message into dead letter queues it moved to."""
        origin = origin_queue(message_id)
        if origin is None or QueueRef.parse(origin).namespace != namespace:
            raise MessageNotFound(message_id)
        if not await self._delete_following(origin, message_id):
            raise MessageNotFound(message_id)

    async def delete_in_queue(self, ref: QueueRef, message_id: str) -> bool:
        """Delete a message only if it is in this very queue (recipients' own queues)."""
        r = await self.scripts.call(
            "delete_message", keys.queue_keys(ref.qualified).all, [message_id]
        )
        return int(r[0]) == 1

    async def _delete_following(self, qualified: str, message_id: str) -> bool:
        deleted = False
        checked_index = False
        followed = False
        shard = keys.shard_of(message_id, self.shards)
        for _ in range(MAX_DEAD_LETTER_HOPS):
            r = await self.scripts.call(
                "delete_message", keys.queue_keys(qualified).all, [message_id]
            )
            code = int(r[0])
            if code == 1:
                deleted = True
                break
            if code == 2:
                deleted = True  # it was in this queue's outbox: gone from here
                followed = True
                qualified = _s(r[1])
                continue
            if checked_index:
                break
            checked_index = True
            target = await self.redis.hget(keys.moved(shard), message_id)
            if target is None or _s(target) == qualified:
                break
            qualified = _s(target)
        # Only a message that was dead-lettered can have a forwarding entry to forget.
        if followed or checked_index:
            pipe = self.redis.pipeline(transaction=False)
            pipe.hdel(keys.moved(shard), message_id)
            pipe.zrem(keys.moved_expiry(shard), message_id)
            await pipe.execute()
        return deleted

    async def hand_over(self, source: str, packed: bytes) -> None:
        """Move a dead-lettered message from its source's outbox into its dead letter queue.

        Accept (idempotent) -> record the forwarding entry -> settle in the source. A crash
        at any point leaves the outbox entry, which the workers hand over again.
        """
        entry = msgpack.unpackb(packed, raw=True)
        message_id, dlq = _s(entry[0]), _s(entry[7])
        dk = keys.queue_keys(dlq)
        # Confirmed too: on a cluster the two queues may live on two primaries.
        r, shortfall = await self._write(
            "dead_letter_accept",
            [dk.cfg, dk.delayed, dk.delayed_bodies, dk.ids, dk.waiters],
            [dlq, packed],
        )
        sk = keys.queue_keys(source)
        if int(r[0]) == -1:
            log.warning(
                "dead letter queue is gone; dropping dead-lettered message",
                extra={"queue": source, "dead_letter_queue": dlq, "message_id": message_id},
            )
            await self.scripts.call("dead_letter_settle", [sk.ids, sk.outbox], [message_id])
            return
        if int(r[1]) >= 0:
            await self._schedule(dlq, int(r[1]), lower_only=True)
        if shortfall is not None and int(r[0]) == 1:
            # Not confirmed: keep the source's outbox entry, which the workers hand over
            # again after the grace time (accepting it twice changes nothing).
            log.warning(
                "dead-letter hand-over not confirmed; the workers retry it: %s",
                shortfall,
                extra={"queue": source, "dead_letter_queue": dlq, "message_id": message_id},
            )
            return
        shard = keys.shard_of(message_id, self.shards)
        forget_at = int(entry[4]) + int(r[2]) * 1000 + 60_000
        pipe = self.redis.pipeline(transaction=False)
        pipe.hset(keys.moved(shard), message_id, dlq)
        pipe.zadd(keys.moved_expiry(shard), {message_id: forget_at})
        await pipe.execute()
        settled = int(
            await self.scripts.call("dead_letter_settle", [sk.ids, sk.outbox], [message_id])
        )
        if settled == 0:
            # Deleted by id while it was being handed over: delete it where it landed.
            await self.scripts.call("delete_message", dk.all, [message_id])

    # ------------------------------------------------------------------ upkeep

    async def upkeep(self, qualified: str, *, limit: int = 1000, grace_ms: int = 5000) -> None:
        """Run one queue's due upkeep and register when the next one is due."""
        qk = keys.queue_keys(qualified)
        r = await self.scripts.call("upkeep", qk.all, [qualified, limit, grace_ms])
        if int(r[0]) == -1:
            await self.redis.zrem(keys.upkeep_due(keys.shard_of(qualified, self.shards)), qualified)
            return
        for packed in r[5:]:
            await self.hand_over(qualified, bytes(packed))
        next_due = int(r[2])
        await self._schedule(qualified, next_due if next_due >= 0 else None, lower_only=False)

    async def _schedule(self, qualified: str, due: int | None, *, lower_only: bool) -> None:
        due_key = keys.upkeep_due(keys.shard_of(qualified, self.shards))
        if lower_only:
            assert due is not None
            await self.redis.zadd(due_key, {qualified: due}, lt=True)
            return
        # Overwrite, then re-read the queue's own schedule: a send that lowered it in
        # between is never lost (sends write the queue first, the index second).
        if due is None:
            await self.redis.zrem(due_key, qualified)
        else:
            await self.redis.zadd(due_key, {qualified: due})
        current = await self.redis.hget(keys.queue_keys(qualified).cfg, "sched")
        if current is not None and (due is None or int(current) < due):
            await self.redis.zadd(due_key, {qualified: int(current)}, lt=True)

    # ---------------------------------------------------------------- helpers

    async def _write(
        self, name: str, script_keys: list[str], args: list[Any], *, confirm: bool = True
    ) -> tuple[Any, Exception | None]:
        """A script that stores messages, and why its confirmation fell short (None when
        it did not, or when nothing waits: no setting asks for it, or `confirm` is off)."""
        if self.confirmed is None or not confirm:
            return await self.scripts.call(name, script_keys, args), None
        return await self.confirmed.script(name, script_keys, args)

    async def _index(self, ref: QueueRef) -> None:
        await self.redis.zadd(keys.registry(ref.namespace), {ref.name: 0})

    async def _reindex_if_recreated(self, ref: QueueRef) -> None:
        """A queue of the same name created while we removed the old one's index entries
        gets them back (creators write the queue first, the indexes second)."""
        fields = await self.redis.hmget(keys.queue_keys(ref.qualified).cfg, ["sched", "dlq"])
        if not await self.queue_exists(ref):
            return
        await self._index(ref)
        sched, dlq = fields
        if sched is not None:
            await self._schedule(ref.qualified, int(sched), lower_only=True)
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


def _flatten(values: dict[str, str]) -> list[str]:
    return [item for pair in values.items() for item in pair]


def _info(name: str, raw: dict[Any, Any]) -> QueueInfo:
    fields = {_s(k): _s(v) for k, v in raw.items()}
    return QueueInfo(
        name=name, config=QueueConfig.from_fields(fields), created_ms=int(fields["created"])
    )
