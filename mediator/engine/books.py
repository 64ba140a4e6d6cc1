"""The shards' books, read: the totals the scripts keep exact per shard (keys.shard_totals,
shard_flight, shard_oldest), the workers' partition summaries of them (one hash per
partition, which `/metrics` reads: a scrape costs a few reads whatever the number of
queues, and is as fresh as the workers' `MEDIATOR_STATS_SECONDS`), and a full recount to
compare them with."""

from __future__ import annotations

from dataclasses import dataclass, field

from mediator.engine import keys
from mediator.engine.replies import ShardStatsReply
from mediator.engine.scripts import Scripts
from mediator.storage.clients import RedisClient

EVENTS = {  # cumulative fields -> what they count (the `event` of the metrics)
    "add": "added",
    "dlv": "delivered",
    "ack": "acknowledged",
    "exp": "expired",
    "dl": "dead_lettered",
    "drop": "dropped",
}
COUNTERS = {  # the fields of a shard's totals (keys.shard_totals) -> what they count
    "q": "queues",
    "n": "stored",
    "d": "delayed",
    "b": "bytes",
    **EVENTS,
}
FIELDS = (*COUNTERS, "fl")  # and the messages in flight, from the in-flight buckets


@dataclass
class Totals:
    """One namespace's totals over some shards."""

    values: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FIELDS, 0))
    oldest_ms: int | None = None

    def add(self, row: list[int], oldest_ms: int) -> None:
        for name, value in zip(FIELDS, row, strict=True):
            self.values[name] += value
        if oldest_ms >= 0 and (self.oldest_ms is None or oldest_ms < self.oldest_ms):
            self.oldest_ms = oldest_ms

    def merge(self, other: Totals) -> None:
        self.add(
            [other.values[f] for f in FIELDS], -1 if other.oldest_ms is None else other.oldest_ms
        )

    @property
    def queues(self) -> int:
        return self.values["q"]

    @property
    def stored(self) -> int:
        return self.values["n"]

    @property
    def in_flight(self) -> int:
        return self.values["fl"]

    @property
    def delayed(self) -> int:
        return self.values["d"]

    @property
    def stored_bytes(self) -> int:
        return self.values["b"]

    @property
    def visible(self) -> int:
        return max(0, self.stored - self.in_flight)


def shard_stat_keys(shard: int) -> list[str]:
    out = []
    for ns in keys.NAMESPACES:
        out += [keys.shard_totals(shard, ns), keys.shard_flight(shard, ns)]
        out.append(keys.shard_oldest(shard, ns))
    return out


async def read_shards(scripts: Scripts, shards: range | list[int]) -> tuple[int, dict[str, Totals]]:
    """The totals of these shards per namespace, and Redis's time (ms)."""
    rows = await scripts.pipeline([("shard_stats", shard_stat_keys(s), []) for s in shards])
    totals = {ns: Totals() for ns in keys.NAMESPACES}
    now = 0
    for row in map(ShardStatsReply.decode, rows):
        now = max(now, row.now_ms)
        for ns in keys.NAMESPACES:
            totals[ns].add(row.values[ns], row.oldest_ms[ns])
    return now, totals


async def write_summary(
    redis: RedisClient, partition: int, totals: dict[str, Totals], now_ms: int
) -> None:
    mapping: dict[str, int] = {"updated_ms": now_ms}
    for ns, t in totals.items():
        for name in FIELDS:
            mapping[f"{ns}:{name}"] = t.values[name]
        mapping[f"{ns}:oldest_ms"] = -1 if t.oldest_ms is None else t.oldest_ms
    await redis.hset(keys.partition_stats(partition), mapping=mapping)  # type: ignore[arg-type]


async def read_summaries(
    redis: RedisClient, partitions: int
) -> tuple[dict[str, Totals], int | None, int]:
    """Every partition's summary summed: totals per namespace, the stalest update (ms; None
    when no summary exists yet) and how many partitions have none."""
    pipe = redis.pipeline(transaction=False)
    for p in range(partitions):
        pipe.hgetall(keys.partition_stats(p))
    totals = {ns: Totals() for ns in keys.NAMESPACES}
    stalest: int | None = None
    missing = 0
    for raw in await pipe.execute():
        fields = {k.decode(): int(v) for k, v in raw.items()}
        if not fields:
            missing += 1
            continue
        for ns in keys.NAMESPACES:
            totals[ns].add(
                [fields.get(f"{ns}:{f}", 0) for f in FIELDS], fields.get(f"{ns}:oldest_ms", -1)
            )
        if stalest is None or fields["updated_ms"] < stalest:
            stalest = fields["updated_ms"]
    return totals, stalest, missing


async def read_each_shard(
    scripts: Scripts, shards: range | list[int]
) -> dict[int, dict[str, Totals]]:
    """The totals of each of these shards per namespace, read in one pipeline."""
    shards = list(shards)
    rows = await scripts.pipeline([("shard_stats", shard_stat_keys(s), []) for s in shards])
    out: dict[int, dict[str, Totals]] = {}
    for shard, row in zip(shards, map(ShardStatsReply.decode, rows), strict=True):
        out[shard] = {ns: Totals() for ns in keys.NAMESPACES}
        for ns in keys.NAMESPACES:
            out[shard][ns].add(row.values[ns], row.oldest_ms[ns])
    return out


async def recount(redis: RedisClient, shards: range | list[int]) -> dict[str, Totals]:
    """What the books of these shards should say, counted from the queues themselves (their
    registries, read whole): queues, stored, delayed, bytes, in flight (deadline not passed)
    and the oldest stored message. Cumulative counters have no such count. Reads every
    queue: for checks and tests, not for a scrape."""
    totals = {ns: Totals() for ns in keys.NAMESPACES}
    for per_shard in (await recount_each_shard(redis, shards)).values():
        for ns in keys.NAMESPACES:
            totals[ns].merge(per_shard[ns])
    return totals


REGISTRIES_PER_READ = 64  # shards whose registries one pipeline reads


async def recount_each_shard(
    redis: RedisClient, shards: range | list[int]
) -> dict[int, dict[str, Totals]]:
    """`recount`, shard by shard: the registries are read a batch of shards per pipeline,
    their queues 200 per pipeline."""
    seconds, micros = await redis.time()
    now = int(seconds) * 1000 + int(micros) // 1000
    shards = list(shards)
    out: dict[int, dict[str, Totals]] = {}
    for first in range(0, len(shards), REGISTRIES_PER_READ):
        batch = [
            (s, ns) for s in shards[first : first + REGISTRIES_PER_READ] for ns in keys.NAMESPACES
        ]
        pipe = redis.pipeline(transaction=False)
        for shard, ns in batch:
            pipe.smembers(keys.shard_registry(shard, ns))
        queues = [
            (shard, ns, _text(name))
            for (shard, ns), names in zip(batch, await pipe.execute(), strict=True)
            for name in names
        ]
        for shard, _ in batch:
            out[shard] = {ns: Totals() for ns in keys.NAMESPACES}
        for start in range(0, len(queues), 200):
            page = queues[start : start + 200]
            pipe = redis.pipeline(transaction=False)
            for _, ns, name in page:
                qk = keys.queue_keys(f"{ns}:{name}")
                pipe.hget(qk.cfg, "created")
                pipe.xlen(qk.stream)
                pipe.zcard(qk.delayed)
                pipe.hget(qk.cfg, "bytes")
                pipe.zcount(qk.inflight, f"({now}", "+inf")
                pipe.xrange(qk.stream, "-", "+", count=1)
            rows = await pipe.execute()
            for i, (shard, ns, _) in enumerate(page):
                created, stored, delayed, size, hidden, head = rows[6 * i : 6 * i + 6]
                if created is None:
                    continue  # a registry entry without a queue: not counted
                oldest = int(head[0][1][b"z"]) if head else -1
                row = [1, stored, delayed, int(size or 0), 0, 0, 0, 0, 0, 0, hidden]
                out[shard][ns].add(row, oldest)
    return out


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
