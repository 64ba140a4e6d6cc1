"""`mediator worker` processes against their own Redis databases (7, 8 and 9).

The workers' global keys (leases, the worker set, shard totals) would mix with other tests'
nodes on a shared database, so each test here flushes one of its own first.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis

from mediator.engine import Engine, QueueConfig, QueueRef, SendMessage, keys
from mediator.storage.clients import Backend
from tests.servers import MediatorProcess, RedisUnderTest, database_url

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)

PARTITIONS = 8


class WorkerProcess(MediatorProcess):
    """One `python -m mediator worker` process with its own health file and log."""

    command = "worker"

    def __init__(self, redis_url: str, name: str, health_dir: Path, **env: str) -> None:
        self.name = name
        self.health_file = health_dir / f"{name}.health"
        super().__init__(
            {
                **{k: v for k, v in os.environ.items() if not k.startswith("MEDIATOR_")},
                "MEDIATOR_REDIS_URL": redis_url,
                "MEDIATOR_NODE_ID": name,
                "MEDIATOR_WORKER_PARTITIONS": str(PARTITIONS),
                "MEDIATOR_LEASE_SECONDS": "2",
                "MEDIATOR_WORKER_TICK_SECONDS": "0.2",
                "MEDIATOR_STATS_SECONDS": "1",
                "MEDIATOR_HINT_POLL_SECONDS": "1",
                "MEDIATOR_WORKER_HEALTH_FILE": str(self.health_file),
                "MEDIATOR_LOG_LEVEL": "info",
                **env,
            },
            f"mediator-worker-{name}-",
        )

    def start(self) -> WorkerProcess:
        self.spawn()
        return self


def _db_url(server: RedisUnderTest, name: str) -> str:
    url = database_url(server.url, name)
    redis.Redis.from_url(url).flushdb()
    return url


def _holders(r: redis.Redis) -> list[str | None]:
    """The worker holding each partition's lease now (None: free or run out)."""
    now_ms = time.time() * 1000
    out: list[str | None] = []
    leases = {int(k): v.decode().split() for k, v in r.hgetall(keys.leases()).items()}
    for p in range(PARTITIONS):
        who, until = leases.get(p, (None, "0"))
        out.append(who if float(until) > now_ms else None)
    return out


def _listed(r: redis.Redis) -> set[str]:
    return {n.decode() for n in r.zrange(keys.mqs_names(), 0, -1)}


def _owner(holder: str | None, workers: list[WorkerProcess]) -> str | None:
    """Worker ids are `<node id>-<6 hex>`: the worker process a lease belongs to."""
    if holder is None:
        return None
    for w in workers:
        if holder.rsplit("-", 1)[0] == w.name:
            return w.name
    return "unknown:" + holder


def _wait(predicate, timeout: float, interval: float = 0.1):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


# ---------------------------------------------------------------------------- leases


def test_workers_split_the_partitions_and_take_over_a_killed_ones(
    redis_server: RedisUnderTest, tmp_path: Path
):
    url = _db_url(redis_server, "worker-lease")
    r = redis.Redis.from_url(url)
    workers = [WorkerProcess(url, f"lw{i}", tmp_path).start() for i in range(3)]
    try:

        def split_among(
            alive: list[WorkerProcess],
        ) -> tuple[Counter[str | None], list[str | None]] | None:
            holders = _holders(r)
            owners = Counter(_owner(h, workers) for h in holders)
            share = -(-PARTITIONS // len(alive))
            names = {w.name for w in alive}
            if set(owners) == names and all(n <= share for n in owners.values()):
                return owners, holders
            return None

        split = _wait(lambda: split_among(workers), timeout=8)
        assert split, (_holders(r), [w.output()[-500:] for w in workers])
        owners, holders = split
        assert None not in holders  # every partition is held...
        assert sum(owners.values()) == PARTITIONS  # ...by exactly one worker, none holds all
        assert max(owners.values()) <= 3 and min(owners.values()) >= 2, owners

        victim = workers[0]
        victim_shards = [i for i, h in enumerate(holders) if _owner(h, workers) == victim.name]
        victim.kill()
        survivors = workers[1:]
        started = time.monotonic()
        split = _wait(lambda: split_among(survivors), timeout=6)
        took = time.monotonic() - started
        assert split, _holders(r)
        owners, holders = split
        assert all(_owner(holders[i], workers) != victim.name for i in victim_shards)
        assert sorted(owners.values()) == [4, 4], owners
        assert took < 6
        assert all(w.alive() for w in survivors)

        # A worker stopped gracefully gives its leases back at once.
        leaving = survivors[0]
        leaving.stop()
        assert all(_owner(h, workers) != leaving.name for h in _holders(r)), _holders(r)
        assert _wait(lambda: split_among(survivors[1:]), timeout=4), _holders(r)
    finally:
        for w in workers:
            w.stop()


# ---------------------------------------------------------------------------- upkeep


@pytest.fixture(scope="module")
def upkeep_url(redis_server: RedisUnderTest) -> str:
    return _db_url(redis_server, "worker-upkeep")


@pytest.fixture(scope="module")
def upkeep_workers(upkeep_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list]:
    health = tmp_path_factory.mktemp("upkeep-workers")
    workers = [
        WorkerProcess(upkeep_url, f"uw{i}", health, MEDIATOR_AUDIT_QUEUES_PER_SECOND="50000")
        for i in range(2)
    ]
    for w in workers:
        w.start()
    r = redis.Redis.from_url(upkeep_url)
    held = _wait(lambda: None not in _holders(r), timeout=8)
    assert held, [w.output()[-1000:] for w in workers]
    yield workers
    for w in workers:
        w.stop()


@pytest.fixture
async def upkeep_engine(upkeep_url: str) -> AsyncIterator[Engine]:
    backend = Backend(upkeep_url)
    yield Engine(backend.client)
    await backend.aclose()


async def _wait_async(predicate, within: float, interval: float = 0.1):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within
    while True:
        value = await predicate()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(interval)


async def test_workers_purge_and_promote_without_any_receive(
    upkeep_workers: list[WorkerProcess], upkeep_engine: Engine
):
    short = QueueRef("mqs", "retention-200ms")
    delayed = QueueRef("mqs", "delay-200ms")
    await upkeep_engine.create_queue(
        short, QueueConfig(retention_ms=200, visibility_timeout_ms=30_000)
    )
    await upkeep_engine.create_queue(
        delayed,
        QueueConfig(retention_ms=3_600_000, visibility_timeout_ms=30_000, delay_ms=200),
    )
    await upkeep_engine.send(short, [SendMessage(b"old-%d" % i) for i in range(3)])
    await upkeep_engine.send(delayed, [SendMessage(b"later-%d" % i) for i in range(2)])
    before = await upkeep_engine.stats(short), await upkeep_engine.stats(delayed)
    assert (before[0].stored, before[1].delayed, before[1].visible) == (3, 2, 0)

    async def purged() -> bool:
        return (await upkeep_engine.stats(short)).stored == 0

    async def promoted() -> bool:
        s = await upkeep_engine.stats(delayed)
        return (s.delayed, s.visible) == (0, 2)

    assert await _wait_async(purged, within=5), await upkeep_engine.stats(short)
    assert await _wait_async(promoted, within=5), await upkeep_engine.stats(delayed)
    # Nothing to do any more: the queues' upkeep is no longer scheduled.
    assert (await upkeep_engine.stats(short)).sched_ms is None
    # The promoted messages are there, each once.
    got = await upkeep_engine.receive(delayed, 10)
    assert sorted(m.body for m in got.messages) == [b"later-0", b"later-1"]
    assert all(m.receives == 1 for m in got.messages)
    assert all(w.alive() for w in upkeep_workers)


async def test_the_audit_repairs_what_a_crash_left_and_due_work_follows_the_schedule(
    upkeep_workers: list[WorkerProcess], upkeep_engine: Engine, upkeep_url: str
):
    """The scripts keep every index exact; here the indexes are damaged by hand, as a crash
    between two steps or an older version would leave them, and the workers' audit and
    schedule put them right."""
    r = redis.Redis.from_url(upkeep_url)
    long = QueueConfig(retention_ms=3_600_000, visibility_timeout_ms=30_000)
    real = [QueueRef("mqs", f"real-{i}") for i in range(4)]
    for ref in real:
        await upkeep_engine.create_queue(ref, long)
        await upkeep_engine.send(ref, [SendMessage(b"kept")])
    victim = keys.queue_keys(real[0].qualified)
    oldest_before = r.zscore(victim.oldest, real[0].name)
    r.zrem(victim.due, real[0].qualified)  # a queue with a message and no upkeep scheduled
    r.zadd(victim.oldest, {real[0].name: 1})  # an oldest index that lies
    r.zrem(keys.mqs_names(), real[1].name)  # a listing entry lost
    ghosts = [QueueRef("mqs", f"ghost-{i}") for i in range(4)]
    for ghost in ghosts:  # registered and listed, counted, but with no queue behind
        gk = keys.queue_keys(ghost.qualified)
        r.sadd(gk.registry, ghost.name)
        r.hincrby(gk.totals, "q", 1)
        r.zadd(keys.mqs_names(), {ghost.name: 0})

    # Forwarding entries of dead-lettered messages: one run out, one still kept. Their
    # expiry is in the shard's schedule; the hint for the shard is missing (a crash).
    shard = victim.shard
    now_ms = int(time.time() * 1000)
    r.hset(keys.moved(shard), mapping={"gone-id": "mqs:dlq", "kept-id": "mqs:dlq"})
    r.zadd(keys.moved_expiry(shard), {"gone-id": now_ms - 60_000, "kept-id": now_ms + 3_600_000})
    r.zadd(keys.shard_due(shard), {keys.MOVED_MEMBER: now_ms - 60_000})

    def repaired() -> bool:
        return (
            r.zscore(victim.due, real[0].qualified) is not None
            and r.zscore(victim.oldest, real[0].name) == oldest_before
            and not any(r.sismember(keys.queue_keys(g.qualified).registry, g.name) for g in ghosts)
            and _listed(r) >= {ref.name for ref in real}
            and not _listed(r) & {g.name for g in ghosts}
            and r.hget(keys.moved(shard), "gone-id") is None
        )

    assert _wait(repaired, timeout=30), (
        r.zscore(victim.due, real[0].qualified),
        r.zrange(keys.mqs_names(), 0, -1),
        r.hgetall(keys.moved(shard)),
        [w.output()[-1500:] for w in upkeep_workers],
    )
    # The ghosts are no longer counted (a shard's count is its registry's size again); the
    # real queues and the kept entry are untouched.
    for ghost in ghosts:
        gk = keys.queue_keys(ghost.qualified)
        assert int(r.hget(gk.totals, "q") or 0) == r.scard(gk.registry)
    for ref in real:
        assert (await upkeep_engine.stats(ref)).stored == 1
    assert r.hget(keys.moved(shard), "kept-id") == b"mqs:dlq"
    assert r.zscore(keys.shard_due(shard), keys.MOVED_MEMBER) == pytest.approx(
        now_ms + 3_600_000, abs=5
    )


# ---------------------------------------------------------------------------- --check


def _check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mediator", "worker", "--check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_check_reports_whether_a_worker_is_ticking(redis_server: RedisUnderTest, tmp_path: Path):
    worker = WorkerProcess(_db_url(redis_server, "worker-check"), "checked", tmp_path)
    env = worker.env

    missing = _check(env)
    assert missing.returncode == 1
    assert "no worker heartbeat" in missing.stdout

    worker.start()
    try:
        assert _wait(worker.health_file.exists, timeout=8), worker.output()
        ok = _check(env)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert ok.stdout.startswith("ok")

        # Healthy heartbeat but Redis does not answer: unhealthy too.
        dead_redis = {**env, "MEDIATOR_REDIS_URL": "redis://127.0.0.1:1/0"}
        assert _check(dead_redis).returncode == 1
    finally:
        worker.kill()

    # Killed: the heartbeat gets old (written old here rather than waited for).
    stamp = worker.health_file.read_text().split()
    worker.health_file.write_text(f"{time.time() - 120:.3f} {' '.join(stamp[1:])}\n")
    stale = _check(env)
    assert stale.returncode == 1
    assert "last worker tick" in stale.stdout


def test_worker_without_redis_url_refuses_to_start(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEDIATOR_")}
    env["MEDIATOR_WORKER_HEALTH_FILE"] = str(tmp_path / "w.health")
    out = subprocess.run(
        [sys.executable, "-m", "mediator", "worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode != 0
    assert "MEDIATOR_REDIS_URL" in out.stderr and "--redis-url" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "w.health").exists()
