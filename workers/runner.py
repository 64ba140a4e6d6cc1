"""The upkeep worker: leases partitions of the shards, runs what is due, sums totals, audits.

Any number of workers (and nodes running one in process) share the work by leases on
`MEDIATOR_WORKER_PARTITIONS` partitions of the 1,024 storage shards (workers/leases.py).
Nothing here walks the queues on a timer:

- **Due work** follows the shards' schedules (keys.shard_due). A worker learns when a shard
  has something due from the hints (keys.next_due) that the scripts' callers lower, reads
  the shard's schedule only then, and runs each due queue's upkeep, push retry, phone
  notification (mediator/notify), forwarding-entry expiry or senders' byte counts
  (mediator/mediation/senders.py); it then sets the shard's hint
  to the schedule's new head. Every `MEDIATOR_HINT_POLL_SECONDS` it also reads the heads
  of its shards' schedules (one command per shard) and lowers any hint that a crash left
  too late.
- **Totals** (mediator/engine/books.py): every `MEDIATOR_STATS_SECONDS`, one script call per shard
  sums the counters the scripts keep into a summary per partition, which `/metrics` reads.
- **The audit** (workers/audit.py) checks the queues page by page at a bounded rate.

Every step awaits Redis, so a stop (SIGTERM: the task is cancelled, and `stopping` set for a
cancellation Python 3.11 may swallow) ends it at once; the worker then gives its leases up
so the others take them over without waiting.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path

from mediator.engine import Engine, keys
from mediator.engine.books import read_shards, write_summary
from mediator.mediation.push import Pusher
from mediator.mediation.senders import RECHECK_SECONDS, SenderBooks
from mediator.notify.notifier import Notifier
from mediator.ops.metrics import Metrics
from mediator.settings import WorkerSettings
from mediator.storage.clients import STORAGE_ERRORS, RedisClient
from workers.audit import PAGE as AUDIT_PAGE
from workers.audit import Audit
from workers.leases import Leases

log = logging.getLogger(__name__)

DUE_BATCH = 200  # schedule entries run per shard per tick
# The audit's pages in one tick end after this share of the lease, whatever credit is left:
# on a slow Redis a high audit rate would otherwise hold the tick until the leases ran out.
AUDIT_LEASE_SHARE = 1 / 6
RELEASE_SECONDS = 2.0  # how long a stopping worker tries to give its leases back


class Worker:
    name = "upkeep worker"

    def __init__(
        self,
        settings: WorkerSettings,
        node_id: str,
        redis: RedisClient,
        engine: Engine,
        pusher: Pusher,
        notifier: Notifier,
        senders: SenderBooks,
        metrics: Metrics | None = None,
    ) -> None:
        """`pusher`, `notifier`: for the push retries and phone notifications of the shards
        it holds (a node's worker shares the node's; whoever made them closes them)."""
        self.settings = settings
        self.redis = redis
        self.engine = engine
        self.metrics = metrics
        self.pusher = pusher
        self.notifier = notifier
        self.senders = senders
        self._warned_unconfigured = False
        self.id = f"{node_id}-{uuid.uuid4().hex[:6]}"
        self.partitions = settings.partitions
        self.leases = Leases(
            engine.scripts, self.id, self.partitions, int(settings.lease_seconds * 1000)
        )
        self.audit = Audit(redis, engine.scripts, self.partitions)
        self.health_file = Path(settings.health_file)
        self._clock_offset_ms = 0.0  # Redis time minus this host's, learnt at each balance
        self._next_balance = 0.0
        self._next_stats = 0.0
        self._next_recheck = 0.0
        self._heads_polled: dict[int, float] = {}
        self._audit_at = time.monotonic()
        self._audit_credit = 0.0
        self._audit_turn = 0
        self.upkeeps = 0  # schedule entries run
        # Set to stop: checked between steps, since on Python 3.11 a cancellation may be
        # swallowed by a Redis call that completes at that moment (mediator/tasks.py).
        self.stopping = False

    def stop(self) -> None:
        """Ends the loop at its next step, should a cancellation be swallowed."""
        self.stopping = True

    @property
    def owned(self) -> list[int]:
        return self.leases.held

    async def run(self) -> None:
        log.info("worker started", extra={"worker": self.id, "partitions": self.partitions})
        try:
            while not self.stopping:
                try:
                    await self.tick()
                    self._touch_health()
                except STORAGE_ERRORS as exc:
                    log.warning("worker tick failed: %s", exc, extra={"worker": self.id})
                except Exception:  # a bug in one tick must not end the upkeep for good
                    log.exception("worker tick failed", extra={"worker": self.id})
                await asyncio.sleep(self.settings.tick_seconds)
        finally:
            await self._release_all()

    async def tick(self) -> None:
        now = time.monotonic()
        if now >= self._next_balance:
            await self._balance()
            self._next_balance = now + self.settings.lease_seconds / 3
        if not self.owned:
            return
        await self.run_due()
        for partition in self.owned:
            if self.stopping:
                return
            last = self._heads_polled.get(partition)
            if last is None or now - last >= self.settings.hint_poll_seconds:
                await self.poll_heads(partition)
                self._heads_polled[partition] = now
        if now >= self._next_stats:
            await self.refresh_totals()
            self._next_stats = now + self.settings.stats_seconds
        if 0 in self.owned and now >= self._next_recheck:  # one worker does it
            await self.senders.recheck(self.redis_now_ms())
            self._next_recheck = now + RECHECK_SECONDS
        await self._audit_step(now)

    # ----------------------------------------------------------------- leases

    async def _balance(self) -> None:
        seconds, micros = await self.redis.time()
        self._clock_offset_ms = int(seconds) * 1000 + int(micros) / 1000 - time.time() * 1000
        gained, lost = await self.leases.balance()
        if self.metrics is not None:
            self.metrics.leases.set(len(self.owned))
        for partition in lost:
            self._heads_polled.pop(partition, None)
            self.audit.forget(partition)
            log.info("lost partition lease", extra={"worker": self.id, "partition": partition})
        if gained:
            log.info("took partition leases", extra={"worker": self.id, "partitions": gained})
            self._next_stats = 0.0  # summaries of the new partitions soon

    async def _release_all(self) -> None:
        try:
            await asyncio.wait_for(self.leases.release(), RELEASE_SECONDS)
        except (TimeoutError, *STORAGE_ERRORS):  # type: ignore[misc]
            pass  # they run out by themselves
        if self.metrics is not None:
            self.metrics.leases.set(0)

    # ----------------------------------------------------------------- due work

    def redis_now_ms(self) -> int:
        return int(time.time() * 1000 + self._clock_offset_ms)

    async def run_due(self) -> int:
        """Run what is due in the shards of the partitions held; the entries run."""
        now = self.redis_now_ms()
        due = await self.redis.zrangebyscore(keys.next_due(), "-inf", now)
        held = set(self.owned)
        ran = 0
        for raw in due:
            shard = int(_text(raw))
            if self.stopping:
                break
            if keys.partition_of(shard, self.partitions) in held:
                ran += await self.run_shard(shard, now)
        return ran

    async def run_shard(self, shard: int, now_ms: int) -> int:
        """Run the shard's due entries (a batch), then set its hint to what is next."""
        schedule = keys.shard_due(shard)
        members = await self.redis.zrangebyscore(schedule, "-inf", now_ms, 0, DUE_BATCH)
        for raw in members:
            member = _text(raw)
            if member.startswith(keys.PUSH_MEMBER):
                await self.pusher.due(member[len(keys.PUSH_MEMBER) :])
            elif member.startswith(keys.NOTE_MEMBER):
                await self._notification_due(member[len(keys.NOTE_MEMBER) :])
            elif member == keys.MOVED_MEMBER:
                await self.engine.forget_moved(shard)
            elif member == keys.SENDERS_MEMBER:
                await self.senders.settle(shard, now_ms)
            else:
                await self.engine.upkeep(member)
        self.upkeeps += len(members)
        if self.metrics is not None and members:
            self.metrics.upkeeps.inc(len(members))
        await self._set_hint(shard)
        return len(members)

    async def _notification_due(self, connection: str) -> None:
        """A phone notification is due. A worker without the providers' settings leaves it
        to one that has them (put off by a lease's time, so it never sits at the head of
        the schedule) rather than drop it, and says so once."""
        if self.notifier.apps.configured:
            await self.notifier.due(connection)
            return
        await self.notifier.defer(connection, int(self.settings.lease_seconds * 1000))
        if not self._warned_unconfigured:
            self._warned_unconfigured = True
            log.warning(
                "phone notifications are due but this worker has no provider settings "
                "(MEDIATOR_FCM_*, MEDIATOR_APNS_*, MEDIATOR_NOTIFY_WEBHOOK_*): give workers "
                "the nodes' settings"
            )

    async def _set_hint(self, shard: int) -> None:
        """The shard's hint becomes its schedule's head. A script that lowered the head
        meanwhile has lowered the hint after it (ZADD LT): re-reading the head after the
        overwrite keeps whichever is earlier."""
        schedule, hint = keys.shard_due(shard), keys.next_due()
        head = await _head(self.redis, schedule)
        if head is not None:
            await self.redis.zadd(hint, {str(shard): head})
        else:
            await self.redis.zrem(hint, str(shard))
        again = await _head(self.redis, schedule)
        if again is not None and (head is None or again < head):
            await self.redis.zadd(hint, {str(shard): again}, lt=True)

    async def poll_heads(self, partition: int) -> None:
        """Lower the hint of any shard of the partition whose schedule has something
        earlier (a hint lost between a script and its caller's write)."""
        shards = keys.partition_shards(partition, self.partitions)
        pipe = self.redis.pipeline(transaction=False)
        for shard in shards:
            pipe.zrange(keys.shard_due(shard), 0, 0, withscores=True)
        heads = {
            str(shard): head[0][1]
            for shard, head in zip(shards, await pipe.execute(), strict=True)
            if head
        }
        if heads:
            await self.redis.zadd(keys.next_due(), heads, lt=True)

    # ----------------------------------------------------------------- totals and audit

    async def refresh_totals(self) -> None:
        for partition in self.owned:
            if self.stopping:
                return
            shards = keys.partition_shards(partition, self.partitions)
            now, totals = await read_shards(self.engine.scripts, shards)
            await write_summary(self.redis, partition, totals, now)

    async def _audit_step(self, now: float) -> None:
        """Pages of the audit while its credit (the rate times the time since) lasts, the
        partitions held taking turns, for at most a sixth of the lease (the next tick goes
        on with the credit left)."""
        rate = self.settings.audit_queues_per_second
        self._audit_credit = min(
            self._audit_credit + rate * (now - self._audit_at), max(rate, 4.0 * AUDIT_PAGE)
        )
        self._audit_at = now
        until = time.monotonic() + self.settings.lease_seconds * AUDIT_LEASE_SHARE
        while (
            rate > 0
            and self.owned
            and self._audit_credit >= AUDIT_PAGE
            and not self.stopping
            and time.monotonic() < until
        ):
            self._audit_turn = (self._audit_turn + 1) % len(self.owned)
            done = await self.audit.step(self.owned[self._audit_turn])
            self._audit_credit -= done
            if self.metrics is not None:
                self.metrics.audited.inc(done)

    # ----------------------------------------------------------------- helpers

    def _touch_health(self) -> None:
        try:
            self.health_file.write_text(f"{time.time():.3f} {self.id} {len(self.owned)}\n")
        except OSError as exc:
            log.warning("cannot write health file %s: %s", self.health_file, exc)


async def _head(redis: RedisClient, schedule: str) -> float | None:
    """The earliest time in a shard's schedule."""
    head = await redis.zrange(schedule, 0, 0, withscores=True)
    return float(head[0][1]) if head else None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
