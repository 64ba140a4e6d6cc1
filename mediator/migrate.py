"""`mediator migrate`: convert a database of key layout 1 (before the storage shards) into
layout 2, in place.

Run it with every node and worker of the old version stopped (it refuses while an old
worker's heartbeat is fresh); the new version refuses to start on a layout-1 database, so
nothing writes during the migration. One SCAN over each primary finds what to convert:

- each queue: its stream, in-flight set, receive counts, delayed messages, ids, dead-letter
  outbox and references move to their new names (RENAME; DUMP and RESTORE across the slots
  of a cluster), its settings join its new config hash (a DIDComm queue's settings equal to
  the operator's defaults are dropped, as for new queues), and `adopt.lua` counts it in its
  shard's books and schedule;
- each connection: its record, keylist and thread orders become the fields of its queue's
  hash and the thread hash beside it; the peer's DID document, label and invitation are not
  kept (layout 2 does not store them);
- routes and our per-connection keys move into their buckets, single-use invitations,
  push retries and dead-letter forwarding entries to their new keys;
- the old global indexes (registries, schedules, leases, totals) are dropped; the mqs names
  become the listing; the workers' hints are set from the shards' schedules.

Every step can run twice, so a migration that stopped (a crash, Ctrl-C) is simply run
again. The layout key is written last: until then no node of either version starts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from mediator.engine import keys, legacy_keys
from mediator.engine import layout as layouts
from mediator.engine.ids import origin_queue
from mediator.engine.model import CREATED_FIELD, LIMIT_FIELDS, QueueConfig, QueueRef
from mediator.engine.scripts import Scripts
from mediator.errors import ConfigError
from mediator.mediation import record as rec
from mediator.mediation.keymaps import raw_key
from mediator.storage.clients import Backend

log = logging.getLogger(__name__)

BATCH = 200  # entities converted per round of pipelines
SCAN_COUNT = 1000
# Connection record fields kept, and their layout-2 names (mediator/mediation/record.py);
# `ok`, `did`, `label` and `inv` are not kept.
RECORD_FIELDS = {
    "hs": rec.HANDSHAKE,
    "hs_ms": rec.HANDSHAKE_MS,
    "proto": rec.PROTOCOL,
    "thid": rec.THREAD,
    "svc": rec.SERVICES,
    "state": rec.MEDIATION,
    "xp": rec.EXPLICIT,
    "pa": rec.PUSH_ATTEMPTS,
}
SETTINGS = ("ret", "vt", "dly", "mr", "dlq", *LIMIT_FIELDS, "wq")


@dataclass
class Report:
    queues: int = 0
    connections: int = 0
    routes: int = 0
    our_keys: int = 0
    invitations: int = 0
    push_retries: int = 0
    forwarding_entries: int = 0
    dropped: int = 0  # global indexes of layout 1 that layout 2 rebuilds or has no use for
    seconds: float = 0.0
    seen: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        return (
            f"{self.queues:,} queues, {self.connections:,} connections, {self.routes:,} routes, "
            f"{self.our_keys:,} connection keys, {self.invitations:,} invitations, "
            f"{self.push_retries:,} push retries, {self.forwarding_entries:,} forwarding "
            f"entries, {self.dropped:,} old indexes dropped"
        )


class Migration:
    def __init__(
        self,
        backend: Backend,
        defaults: dict[str, QueueConfig],
        *,
        progress: Callable[[str], None] = print,
        force: bool = False,
    ) -> None:
        self.backend = backend
        self.redis = backend.client
        self.scripts = Scripts(backend.client)
        self.defaults = defaults
        self.progress = progress
        self.force = force
        self.cluster = len(backend.primaries()) > 1 or backend.mode.value == "cluster"
        self.report = Report()
        self._pending: dict[str, list[str]] = {}
        self._queues: list[str] = []  # converted after the scan, once their data keys are known
        self._data: dict[str, list[str]] = {}  # queue -> the layout-1 data keys it has
        self._globals: list[str] = []
        self._started = time.monotonic()
        self._last_progress = 0.0

    async def needed(self) -> bool:
        raw = await self.redis.hgetall(keys.layout())
        return not raw or await layouts.holds_layout_1(self.redis)

    async def run(self, *, dry_run: bool = False) -> Report:
        await self._refuse_if_old_workers_run()
        self.dry_run = dry_run
        for primary in self.backend.primaries():
            await self._scan(primary)
        await self._flush_all()
        for start in range(0, len(self._queues), BATCH):
            if not dry_run:
                await self._convert_queues(self._queues[start : start + BATCH])
                self._progress()
        if not dry_run:
            await self._convert_globals()
            await self._set_hints()
            await layouts.write(self.redis)
        self.report.seconds = time.monotonic() - self._started
        return self.report

    # ------------------------------------------------------------ discovery

    async def _refuse_if_old_workers_run(self) -> None:
        if self.force:
            return
        seconds, micros = await self.redis.time()
        now = int(seconds) * 1000 + int(micros) // 1000
        alive = await self.redis.zrangebyscore(legacy_keys.workers(), now, "+inf")
        if alive:
            names = ", ".join(_text(n) for n in alive[:5])
            raise ConfigError(
                f"workers of the old version are running ({names}): stop every node and "
                "worker first (or wait 10 s for their heartbeats to run out)"
            )

    async def _scan(self, primary: Redis) -> None:
        cursor = 0
        while True:
            cursor, found = await primary.scan(cursor, count=SCAN_COUNT)
            for raw in found:
                self._classify(_text(raw))
            for kind, items in list(self._pending.items()):
                if len(items) >= BATCH:
                    await self._flush(kind)
            if cursor == 0:
                return

    def _classify(self, name: str) -> None:
        kind, item, suffix = legacy_keys.entity(name)
        if kind == "global":
            self._globals.append(name)
        elif kind == "queue":
            self._queues.append(item)
            self.report.seen["queue"] = self.report.seen.get("queue", 0) + 1
        elif kind == "queue data":
            self._data.setdefault(item, []).append(suffix)
        elif kind:
            self._pending.setdefault(kind, []).append(item)
            self.report.seen[kind] = self.report.seen.get(kind, 0) + 1

    async def _flush_all(self) -> None:
        for kind in list(self._pending):
            await self._flush(kind)

    async def _flush(self, kind: str) -> None:
        items = self._pending.pop(kind, [])
        if not items or self.dry_run:
            return
        convert: dict[str, Callable[[list[str]], Awaitable[None]]] = {
            "connection": self._connections,
            "route": self._routes,
            "ours": self._ours,
            "invitation": self._invitations,
            "push": self._push,
            "moved": self._moved,
        }
        await convert[kind](items)
        self._progress()

    def _progress(self) -> None:
        now = time.monotonic()
        if now - self._last_progress >= 2:
            self._last_progress = now
            elapsed = now - self._started
            self.progress(f"[{elapsed:6.0f}s] {self.report.line()}")

    # ------------------------------------------------------------ moving keys

    async def _move(self, pairs: list[tuple[str, str]]) -> None:
        """Rename keys (old, new): RENAME where both live on one server, else DUMP, RESTORE
        with the old key's expiry, DEL. A key already moved (old missing) is skipped."""
        if not pairs:
            return
        if not self.cluster:
            pipe = self.redis.pipeline(transaction=False)
            for old, new in pairs:
                pipe.rename(old, new)
            await pipe.execute(raise_on_error=False)  # "no such key": moved before
            return
        pipe = self.redis.pipeline(transaction=False)
        for old, _ in pairs:
            pipe.dump(old)
            pipe.pttl(old)
        dumped = await pipe.execute()
        pipe = self.redis.pipeline(transaction=False)
        for i, (old, new) in enumerate(pairs):
            payload, ttl = dumped[2 * i], int(dumped[2 * i + 1])
            if payload is None:
                continue
            pipe.restore(new, max(ttl, 0), payload, replace=True)
            pipe.delete(old)
        await pipe.execute()

    # ------------------------------------------------------------ entities

    async def _convert_queues(self, names: list[str]) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for qualified in names:
            pipe.hgetall(legacy_keys.queue(qualified, legacy_keys.QUEUE_CONFIG))
        configs = await pipe.execute()
        moves: list[tuple[str, str]] = []
        present = []
        for qualified, raw in zip(names, configs, strict=True):
            if not raw:
                continue
            present.append((qualified, {_text(k): _text(v) for k, v in raw.items()}))
            qk = keys.queue_keys(qualified)
            for old in self._data.pop(qualified, []):  # only those that exist
                if old in legacy_keys.QUEUE_DATA:
                    new = getattr(qk, legacy_keys.QUEUE_DATA[old])
                    moves.append((legacy_keys.queue(qualified, old), new))
        await self._move(moves)
        calls: list[tuple[str, list[str], list[Any]]] = []
        cleanup = self.redis.pipeline(transaction=False)
        for qualified, fields in present:
            qk = keys.queue_keys(qualified)
            ref = QueueRef.parse(qualified)
            sched = fields.pop("sched", "")
            pairs = self._queue_fields(ref.namespace, fields)
            calls.append(("adopt", qk.all, [qualified, sched, *pairs]))
            cleanup.delete(
                legacy_keys.queue(qualified, legacy_keys.QUEUE_CONFIG),
                legacy_keys.queue(qualified, legacy_keys.QUEUE_WAITERS),
            )
            if ref.namespace == keys.MQS_NAMESPACE:
                cleanup.zadd(keys.mqs_names(), {ref.name: 0})
        if calls:
            await self.scripts.pipeline(calls)
            await cleanup.execute()
        self.report.queues += len(present)

    def _queue_fields(self, namespace: str, fields: dict[str, str]) -> list[str]:
        """The fields a queue keeps in layout 2: those of a namespace with defaults that
        equal them are dropped, as a new queue of that namespace does not store them."""
        defaults = self.defaults.get(namespace)
        if defaults is not None:
            base = defaults.to_fields(namespace)[0]
            for name in LIMIT_FIELDS:  # no limit in layout 1, where the default has one
                if name in base and name not in fields:
                    fields[name] = "0"
            for name in SETTINGS:
                if name in fields and base.get(name) == fields[name]:
                    del fields[name]
        return [item for pair in fields.items() for item in pair]

    async def _connections(self, verkeys: list[str]) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for verkey in verkeys:
            old = legacy_keys.connection_keys(verkey)
            pipe.hgetall(old.record)
            pipe.pttl(old.record)
            pipe.zrange(old.keylist, 0, -1)
        rows = await pipe.execute()
        write = self.redis.pipeline(transaction=False)
        moves = []
        done = 0
        for i, verkey in enumerate(verkeys):
            raw, ttl, keylist = rows[3 * i : 3 * i + 3]
            if not raw:
                continue
            record = {_text(k): _text(v) for k, v in raw.items()}
            fields: dict[str | bytes, str] = {
                RECORD_FIELDS[k]: rec.CODES.get(v, v) if k in ("hs", "state") else v
                for k, v in record.items()
                if k in RECORD_FIELDS
            }
            if fields.get(rec.SERVICES) == "[]":
                del fields[rec.SERVICES]
            if record.get("hs") == rec.COMPLETED:
                fields.pop(rec.THREAD, None)
            if record.get("state") == rec.DENIED and "state_ms" in record:
                fields[rec.DENIED_MS] = record["state_ms"]
            for key in keylist:
                fields[rec.KEY + raw_key(_text(key))] = ""
            ck = keys.connection_keys(verkey)
            write.hset(ck.record, mapping=fields)  # type: ignore[arg-type]
            if int(ttl) > 0:
                write.pexpire(ck.record, int(ttl))
            old = legacy_keys.connection_keys(verkey)
            write.delete(old.record, old.keylist, old.presence)
            moves.append((old.threads, ck.threads))
            done += 1
        await self._move(moves)
        await write.execute()
        self.report.connections += done

    async def _routes(self, recipient_keys: list[str]) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for key in recipient_keys:
            pipe.get(legacy_keys.route(key))
        owners = await pipe.execute()
        write = self.redis.pipeline(transaction=False)
        for key, owner in zip(recipient_keys, owners, strict=True):
            if owner is None:
                continue
            raw = raw_key(key)
            write.hsetnx(keys.routes_bucket(raw), raw, owner)
            write.delete(legacy_keys.route(key))
            self.report.routes += 1
        await write.execute()

    async def _ours(self, our_keys: list[str]) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for key in our_keys:
            pipe.get(legacy_keys.our_key(key))
            pipe.pttl(legacy_keys.our_key(key))
        rows = await pipe.execute()
        write = self.redis.pipeline(transaction=False)
        for i, key in enumerate(our_keys):
            peer, ttl = rows[2 * i], int(rows[2 * i + 1])
            if peer is None:
                continue
            if ttl > 0:  # a connection not granted mediation: it keeps its expiry
                write.set(keys.our_key_pending(key), peer, px=ttl)
            else:
                raw = raw_key(key)
                write.hset(keys.ours_bucket(raw), raw, raw_key(_text(peer)))
            write.delete(legacy_keys.our_key(key))
            self.report.our_keys += 1
        await write.execute()

    async def _invitations(self, verkeys: list[str]) -> None:
        await self._move([(legacy_keys.invitation(v), keys.invitation(v)) for v in verkeys])
        self.report.invitations += len(verkeys)

    async def _push(self, shards: list[str]) -> None:
        for old in shards:
            name = legacy_keys.push_due(old)
            rows: list[Any] = await self.redis.zrange(name, 0, -1, withscores=True)
            pipe = self.redis.pipeline(transaction=False)
            for member, score in rows:
                connection = _text(member)
                shard = keys.queue_keys(
                    QueueRef(keys.DIDCOMM_NAMESPACE, connection).qualified
                ).shard
                pipe.zadd(keys.shard_due(shard), {keys.PUSH_MEMBER + connection: score})
            pipe.delete(name)
            await pipe.execute()
            self.report.push_retries += len(rows)

    async def _moved(self, shards: list[str]) -> None:
        for old in shards:
            name, expiry_name = legacy_keys.moved(old), legacy_keys.moved_expiry(old)
            targets = await self.redis.hgetall(name)
            scored: list[Any] = await self.redis.zrange(expiry_name, 0, -1, withscores=True)
            expiries = dict(scored)
            pipe = self.redis.pipeline(transaction=False)
            for raw_id, dlq in targets.items():
                message_id = _text(raw_id)
                origin = origin_queue(message_id)
                if origin is None:
                    continue
                shard = keys.shard_of(origin)
                forget_at = expiries.get(raw_id, 0.0)
                pipe.hset(keys.moved(shard), message_id, dlq)
                pipe.zadd(keys.moved_expiry(shard), {message_id: forget_at})
                pipe.zadd(keys.shard_due(shard), {keys.MOVED_MEMBER: forget_at}, lt=True)
                self.report.forwarding_entries += 1
            pipe.delete(name, expiry_name)
            await pipe.execute()

    # ------------------------------------------------------------ the rest

    async def _convert_globals(self) -> None:
        seed = await self.redis.hget(legacy_keys.identity(), legacy_keys.IDENTITY_SEED)
        if seed is not None:
            await self.redis.hsetnx(keys.mediator_identity(), keys.IDENTITY_SEED, seed)
            await self.redis.delete(legacy_keys.identity())
        # The mqs registry's names that are queues now are the listing (already written
        # by each queue's conversion; this covers a queue converted by an earlier run).
        for name in self._globals:
            if name == legacy_keys.registry(keys.MQS_NAMESPACE):
                for raw in await self.redis.zrange(name, 0, -1):
                    qualified = QueueRef(keys.MQS_NAMESPACE, _text(raw)).qualified
                    if await self.redis.hexists(keys.queue_keys(qualified).cfg, CREATED_FIELD):
                        await self.redis.zadd(keys.mqs_names(), {_text(raw): 0})
        for name in self._globals:
            await self.redis.delete(name)
        self.report.dropped += len(self._globals)

    async def _set_hints(self) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for shard in range(keys.SHARDS):
            pipe.zrange(keys.shard_due(shard), 0, 0, withscores=True)
        heads = {str(shard): head[0][1] for shard, head in enumerate(await pipe.execute()) if head}
        if heads:
            await self.redis.zadd(keys.next_due(), heads, lt=True)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
