"""The upkeep worker: leases shards, runs due queue upkeep, repairs indexes, sums metrics.

Any number of workers (and nodes running one in process) share the work: each holds leases
on about shards/live-workers shards, renews them every tick, and gives up those over its
share. A worker that dies stops renewing, and its shards go to the others when the leases
run out. Only a lease holder touches a shard, so each job runs once.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
import uuid
from pathlib import Path

from mediator.engine import Engine, QueueRef, keys
from mediator.errors import QueueNotFound
from mediator.mediation.mailbox import Mailbox
from mediator.mediation.push import Pusher
from mediator.mediation.store import MediationStore
from mediator.ops.metrics import NAMESPACES
from mediator.settings import Settings
from mediator.storage.clients import STORAGE_ERRORS, RedisClient

log = logging.getLogger(__name__)

DUE_BATCH = 200
REGISTRY_CHUNK = 500


class Worker:
    def __init__(
        self, settings: Settings, redis: RedisClient, engine: Engine, pusher: Pusher | None = None
    ) -> None:
        self.settings = settings
        self.redis = redis
        self.engine = engine
        # Push retries of the shards it holds; a node's worker shares the node's pusher.
        self.pusher = pusher or Pusher(
            redis, MediationStore(redis), Mailbox(engine, settings), settings
        )
        self._own_pusher = pusher is None
        self.id = f"{settings.resolved_node_id}-{uuid.uuid4().hex[:6]}"
        self.shards = settings.worker_shards
        self.owned: set[int] = set()
        self._last_reconcile: dict[int, float] = {}
        # Registry names with no queue behind them, per shard, as seen in the last pass.
        self._suspect: dict[int, set[str]] = {}
        self.health_file = Path(settings.worker_health_file)

    async def run(self) -> None:
        log.info("worker started", extra={"worker": self.id, "shards": self.shards})
        try:
            while True:
                try:
                    await self.tick()
                    self._touch_health()
                except STORAGE_ERRORS as exc:
                    log.warning("worker tick failed: %s", exc, extra={"worker": self.id})
                except Exception:  # a bug in one tick must not end the upkeep for good
                    log.exception("worker tick failed", extra={"worker": self.id})
                await asyncio.sleep(self.settings.worker_tick_seconds)
        finally:
            await self._release_all()
            if self._own_pusher:
                await self.pusher.aclose()

    async def tick(self) -> None:
        now_ms = await self._redis_now_ms()
        await self._balance(now_ms)
        for shard in sorted(self.owned):
            await self._run_due(shard, now_ms)
            await self.pusher.retry_due(shard, now_ms)
            last = self._last_reconcile.get(shard)
            if last is None or time.monotonic() - last >= self.settings.reconcile_seconds:
                await self.reconcile(shard)
                self._last_reconcile[shard] = time.monotonic()

    # ----------------------------------------------------------------- leases

    async def _balance(self, now_ms: int) -> None:
        lease_ms = int(self.settings.lease_seconds * 1000)
        pipe = self.redis.pipeline(transaction=False)
        pipe.zadd(keys.workers(), {self.id: now_ms + lease_ms})
        pipe.zremrangebyscore(keys.workers(), "-inf", now_ms)
        pipe.zcard(keys.workers())
        live = max(1, int((await pipe.execute())[2]))
        target = math.ceil(self.shards / live)
        for shard in list(self.owned):
            if not await self._lease(shard, "take"):
                self.owned.discard(shard)
                log.info("lost shard lease", extra={"worker": self.id, "shard": shard})
        free = [s for s in range(self.shards) if s not in self.owned]
        random.shuffle(free)
        for shard in free:
            if len(self.owned) >= target:
                break
            if await self._lease(shard, "take"):
                self.owned.add(shard)
                self._last_reconcile.pop(shard, None)
        while len(self.owned) > target:
            shard = max(self.owned)
            await self._lease(shard, "release")
            self.owned.discard(shard)

    async def _lease(self, shard: int, op: str) -> bool:
        ms = int(self.settings.lease_seconds * 1000)
        r = await self.engine.scripts.call("lease", [keys.lease(shard)], [self.id, op, ms])
        return bool(int(r))

    async def _release_all(self) -> None:
        # Every shard, not just `owned`: a stop that interrupts a lease call after Redis ran it
        # leaves a lease this worker holds but has not noted. Release is compare-and-delete.
        try:
            for shard in range(self.shards):
                await self._lease(shard, "release")
            await self.redis.zrem(keys.workers(), self.id)
        except STORAGE_ERRORS:
            pass
        self.owned.clear()

    # ----------------------------------------------------------------- upkeep

    async def _run_due(self, shard: int, now_ms: int) -> None:
        due = await self.redis.zrangebyscore(
            keys.upkeep_due(shard), "-inf", now_ms, start=0, num=DUE_BATCH
        )
        for raw in due:
            await self.engine.upkeep(_text(raw))

    async def reconcile(self, shard: int) -> None:
        """Walk the shard's queues: repair the schedule index, drop stale entries, sum stats."""
        totals = {"visible": 0, "in_flight": 0, "delayed": 0, "bytes": 0, "queues": 0}
        oldest = -1
        due_key = keys.upkeep_due(shard)
        suspects_before = self._suspect.get(shard, set())
        suspects: set[str] = set()
        for namespace in NAMESPACES:
            registry = keys.registry(namespace)
            start = 0
            while True:
                names = await self.redis.zrange(registry, start, start + REGISTRY_CHUNK - 1)
                if not names:
                    break
                start += len(names)
                for raw in names:
                    ref = QueueRef(namespace, _text(raw))
                    if keys.shard_of(ref.qualified, self.shards) != shard:
                        continue
                    try:
                        stats = await self.engine.stats(ref)
                    except QueueNotFound:
                        # Missing twice in a row: stale, not a create under way.
                        if ref.qualified in suspects_before:
                            await self.redis.zrem(registry, ref.name)
                        else:
                            suspects.add(ref.qualified)
                        continue
                    totals["queues"] += 1
                    totals["visible"] += stats.visible
                    totals["in_flight"] += stats.in_flight
                    totals["delayed"] += stats.delayed
                    totals["bytes"] += stats.bytes
                    if stats.oldest_ms is not None and (oldest < 0 or stats.oldest_ms < oldest):
                        oldest = stats.oldest_ms
                    if stats.sched_ms is not None:  # repairs a missing or too late entry
                        await self.redis.zadd(due_key, {ref.qualified: stats.sched_ms}, lt=True)
        self._suspect[shard] = suspects
        await self._forget_moved(shard)
        now_ms = await self._redis_now_ms()
        await self.redis.hset(
            keys.shard_stats(shard),
            mapping={**totals, "oldest_ms": oldest, "updated_ms": now_ms},  # type: ignore[dict-item]
        )

    async def _forget_moved(self, shard: int) -> None:
        now_ms = await self._redis_now_ms()
        expired = await self.redis.zrangebyscore(keys.moved_expiry(shard), "-inf", now_ms)
        if expired:
            pipe = self.redis.pipeline(transaction=False)
            pipe.hdel(keys.moved(shard), *expired)
            pipe.zrem(keys.moved_expiry(shard), *expired)
            await pipe.execute()

    # ----------------------------------------------------------------- helpers

    async def _redis_now_ms(self) -> int:
        seconds, micros = await self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def _touch_health(self) -> None:
        try:
            self.health_file.write_text(f"{time.time():.3f} {self.id} {len(self.owned)}\n")
        except OSError as exc:
            log.warning("cannot write health file %s: %s", self.health_file, exc)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
