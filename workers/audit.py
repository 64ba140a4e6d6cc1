"""The slow audit: what is left of walking the queues. Every script keeps the shard's books
exact, so the audit only finds what a crash between two steps, or an older version, left:
registry entries without a queue, a queue with messages but no schedule entry, an oldest
index that does not match the stream, an empty stream. It also puts back the mqs listing
entries of queues that lack one and drops those of queues that are gone.

It reads one page at a time (`PAGE` queues of one shard, from its registry with SSCAN),
at most `MEDIATOR_AUDIT_QUEUES_PER_SECOND` queues a second, and keeps where it stopped in
Redis (`keys.audit_cursor`, per partition), so a worker that restarts, or another that takes
the partition over, carries on from there. Its cost per second is bounded by that rate
whatever the number of queues: a pass over a million queues at 1,000/s takes 17 minutes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from mediator.engine import keys
from mediator.engine.model import CREATED_FIELD, QueueRef
from mediator.engine.replies import AuditReply
from mediator.engine.scripts import Scripts
from mediator.storage.clients import RedisClient

log = logging.getLogger(__name__)

PAGE = 100
EMPTY_STEP = 10  # what a scan step that found nothing costs the rate, in queues
SAVE_SECONDS = 1.0  # how often a partition's cursor is written back
REPAIRS = ("orphan_registry", "schedule", "oldest", "empty_stream", "listing")


@dataclass
class Cursor:
    """Where a partition's audit is: the shard's position in the partition, the namespace,
    the SSCAN cursor within that shard's registry."""

    index: int = 0
    namespace: int = 0
    scan: int = 0
    started: float = 0.0  # when this pass began (monotonic; not kept in Redis)
    saved: float = 0.0  # when it was last written back (monotonic)

    def encode(self) -> str:
        return f"{self.index} {self.namespace} {self.scan}"

    @classmethod
    def decode(cls, text: str | None) -> Cursor:
        try:
            index, namespace, scan = (int(x) for x in (text or "").split())
            return cls(index, namespace, scan, time.monotonic())
        except ValueError:
            return cls(started=time.monotonic())


class Audit:
    def __init__(self, redis: RedisClient, scripts: Scripts, partitions: int) -> None:
        self.redis = redis
        self.scripts = scripts
        self.partitions = partitions
        self._cursors: dict[int, Cursor] = {}
        self.checked = 0
        self.repaired = dict.fromkeys(REPAIRS, 0)
        self.passes = 0
        self.last_pass_seconds: float | None = None

    def forget(self, partition: int) -> None:
        """The partition went to another worker: reread its cursor if it comes back."""
        self._cursors.pop(partition, None)

    async def step(self, partition: int) -> int:
        """Audit one page of the partition: the number of queues (or empty scan steps)."""
        cursor = self._cursors.get(partition)
        if cursor is None:
            raw = await self.redis.hget(keys.audit_cursor(), str(partition))
            cursor = Cursor.decode(raw.decode() if isinstance(raw, bytes) else raw)
            self._cursors[partition] = cursor
        shards = keys.partition_shards(partition, self.partitions)
        if cursor.index >= len(shards):
            await self._finish_pass(partition, cursor)
            cursor = self._cursors[partition] = Cursor(started=time.monotonic())
        shard = shards[cursor.index]
        namespace = keys.NAMESPACES[cursor.namespace]
        scan, names = await self.redis.sscan(
            keys.shard_registry(shard, namespace), cursor.scan, count=PAGE
        )
        done = EMPTY_STEP
        # A small set (a listpack) answers SSCAN whole: checked PAGE names per script call.
        found = [_text(n) for n in names]
        for start in range(0, len(found), PAGE):
            done += await self._page(shard, namespace, found[start : start + PAGE])
        cursor.scan = int(scan)
        if cursor.scan == 0:  # this registry is done: the next namespace, or shard
            cursor.namespace += 1
            if cursor.namespace >= len(keys.NAMESPACES):
                cursor.namespace = 0
                cursor.index += 1
        if time.monotonic() - cursor.saved >= SAVE_SECONDS:
            await self.redis.hset(keys.audit_cursor(), str(partition), cursor.encode())
            cursor.saved = time.monotonic()
        return done

    async def _page(self, shard: int, namespace: str, names: list[str]) -> int:
        script_keys = []
        for name in names:
            script_keys += keys.queue_keys(QueueRef(namespace, name).qualified).all
        r = AuditReply.decode(await self.scripts.call("audit", script_keys, [namespace, *names]))
        self.checked += r.checked
        self.repaired["orphan_registry"] += r.orphan_registry
        self.repaired["schedule"] += r.schedules
        self.repaired["oldest"] += r.oldest
        self.repaired["empty_stream"] += r.empty_streams
        if r.repaired:
            log.info(
                "audit repaired shard %d (%s): %d registry entries without a queue, %d "
                "schedules, %d oldest entries, %d empty streams",
                shard,
                namespace,
                r.orphan_registry,
                r.schedules,
                r.oldest,
                r.empty_streams,
            )
        if namespace == keys.MQS_NAMESPACE:
            gone = set(r.gone)
            listed = [n for n in names if n not in gone]
            if listed:
                added = await self.redis.zadd(keys.mqs_names(), dict.fromkeys(listed, 0), nx=True)
                self.repaired["listing"] += int(added or 0)
        return r.checked

    async def _finish_pass(self, partition: int, cursor: Cursor) -> None:
        """A pass over the partition is done; partition 0's holder also checks the listing."""
        if partition == 0:
            await self._audit_listing()
        self.passes += 1
        self.last_pass_seconds = time.monotonic() - cursor.started
        log.info("audit pass over partition %d done in %.0f s", partition, self.last_pass_seconds)

    async def _audit_listing(self) -> None:
        """Drop mqs listing entries whose queue is gone (deleted while the delete's own
        removal was lost)."""
        start = 0
        while True:
            names = [
                _text(n) for n in await self.redis.zrange(keys.mqs_names(), start, start + PAGE - 1)
            ]
            if not names:
                return
            pipe = self.redis.pipeline(transaction=False)
            for name in names:
                qualified = QueueRef(keys.MQS_NAMESPACE, name).qualified
                pipe.hexists(keys.queue_keys(qualified).cfg, CREATED_FIELD)
            gone = [n for n, there in zip(names, await pipe.execute(), strict=True) if not there]
            if gone:
                await self.redis.zrem(keys.mqs_names(), *gone)
                self.repaired["listing"] += len(gone)
            start += len(names) - len(gone)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
