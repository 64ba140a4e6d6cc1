"""What the alerts read: a node's /metrics tells whether it is ready, how full each Redis
primary is, and whether the upkeep partitions have live workers; a standalone worker serves
its own counters on --worker-metrics-listen."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import redis

from mediator.engine import keys
from tests.eventually import eventually
from tests.scrape import samples as _samples
from tests.scrape import value as _value
from tests.servers import MetricsWorker, Node, RedisUnderTest, database_url

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)

PARTITIONS = 8


def _scrape_until(url: str, check: Callable[[str], bool], within: float = 10) -> str:
    deadline = time.monotonic() + within
    while True:
        body = httpx.get(url, timeout=5).text
        if check(body) or time.monotonic() > deadline:
            return body
        time.sleep(0.1)


def _worker(redis_url: str, health: Path) -> MetricsWorker:
    return MetricsWorker(
        redis_url,
        health,
        MEDIATOR_WORKER_PARTITIONS=str(PARTITIONS),
        MEDIATOR_LEASE_SECONDS="2",
        MEDIATOR_WORKER_TICK_SECONDS="0.2",
    )


@pytest.fixture
def db_url(redis_server: RedisUnderTest) -> Iterator[str]:
    url = database_url(redis_server.url, "deployment-metrics")
    redis.Redis.from_url(url).flushdb()
    yield url


def test_node_reports_redis_memory_and_the_workers_that_hold_every_partition(
    db_url: str, tmp_path: Path
) -> None:
    node = Node(
        db_url,
        MEDIATOR_WORKER_PARTITIONS=str(PARTITIONS),
        MEDIATOR_LEASE_SECONDS="2",
        MEDIATOR_WORKER_TICK_SECONDS="0.2",
        MEDIATOR_WORKER_HEALTH_FILE=str(tmp_path / "node.health"),
    ).start()
    worker = _worker(db_url, tmp_path / "worker.health")
    worker.spawn()
    try:
        both = _scrape_until(
            f"{node.base}/metrics",
            lambda body: (
                _value(body, "mediator_workers") == 2
                and _value(body, "mediator_worker_partitions_leased") == PARTITIONS
            ),
        )
        assert _value(both, "mediator_ready") == 1
        assert _value(both, "mediator_workers") == 2, both
        assert _value(both, "mediator_worker_partitions") == PARTITIONS
        assert _value(both, "mediator_worker_partitions_leased") == PARTITIONS

        # One primary: its memory, and the limit Redis reports (whatever it is set to).
        server = redis.Redis.from_url(db_url)
        limit = int(server.config_get("maxmemory")["maxmemory"])
        used = _samples(both, "mediator_redis_used_memory_bytes")
        maximum = _samples(both, "mediator_redis_maxmemory_bytes")
        assert len(used) == 1 and len(maximum) == 1
        assert used[0][1] > 100_000  # a real server's footprint, not a placeholder
        assert maximum[0][1] == limit
        assert used[0][0]["server"] == maximum[0][0]["server"]
        assert used[0][0]["server"].startswith("127.0.0.1:")

        # The partitions split between the node's worker and the standalone one, and the
        # standalone one says how many it holds on its own endpoint.
        own = _scrape_until(
            worker.metrics_url,
            lambda body: (_value(body, "mediator_worker_leases") or 0) > 0,
        )
        node_body = _scrape_until(
            f"{node.base}/metrics",
            lambda body: (
                (_value(body, "mediator_worker_leases") or 0)
                + (_value(httpx.get(worker.metrics_url).text, "mediator_worker_leases") or 0)
                == PARTITIONS
            ),
        )
        held = _value(httpx.get(worker.metrics_url).text, "mediator_worker_leases") or 0
        assert 0 < held < PARTITIONS
        assert (_value(node_body, "mediator_worker_leases") or 0) + held == PARTITIONS
        # A worker's endpoint has its own counters and its process, none of a node's.
        assert _value(own, "mediator_worker_upkeeps_total") is not None
        assert _value(own, "process_resident_memory_bytes") is not None
        assert _value(own, "mediator_ready") is None
        assert "mediator_http_requests" not in own
    finally:
        worker.stop()
        node.stop()


def test_partitions_without_a_live_worker_show_when_the_only_worker_dies(
    db_url: str, tmp_path: Path
) -> None:
    node = Node(
        db_url,
        MEDIATOR_WORKER_PARTITIONS=str(PARTITIONS),
        MEDIATOR_IN_PROCESS_WORKER="false",
    ).start()
    worker = _worker(db_url, tmp_path / "worker.health")
    worker.spawn()
    try:
        url = f"{node.base}/metrics"
        leased = _scrape_until(
            url, lambda body: _value(body, "mediator_worker_partitions_leased") == PARTITIONS
        )
        assert _value(leased, "mediator_workers") == 1
        assert _value(httpx.get(worker.metrics_url).text, "mediator_worker_leases") == PARTITIONS
        worker.kill()  # no chance to give the leases back: they run out (2 s)
        orphaned = _scrape_until(
            url, lambda body: _value(body, "mediator_worker_partitions_leased") == 0
        )
        assert _value(orphaned, "mediator_worker_partitions_leased") == 0
        assert _value(orphaned, "mediator_workers") == 0
        assert _value(orphaned, "mediator_ready") == 1  # the node itself is fine
    finally:
        worker.stop()
        node.stop()


async def test_a_draining_node_says_it_is_not_ready(db_url: str) -> None:
    node = Node(db_url, MEDIATOR_DRAIN_SECONDS="4", MEDIATOR_IN_PROCESS_WORKER="false")
    await asyncio.to_thread(node.start)
    try:
        async with httpx.AsyncClient(base_url=node.base, timeout=30) as http:
            before = (await http.get("/metrics")).text
            assert _value(before, "mediator_ready") == 1
            made = await http.put(
                "/queues/held-open",
                headers={
                    "X-MQS-RETENTION-SECONDS": "60",
                    "X-MQS-VISIBILITY-TIMEOUT-SECONDS": "30",
                },
            )
            assert made.status_code == 201
            # A long poll keeps the node draining for a while after SIGTERM.
            held = asyncio.create_task(
                http.get(
                    "/messages/held-open",
                    headers={"X-MQS-MAX-MESSAGES": "1", "X-MQS-WAIT-TIME": "3"},
                )
            )
            storage = redis.Redis.from_url(db_url)  # the long poll waits: the node is marked
            waiters = keys.queue_keys("mqs:held-open").waiters

            async def marked() -> bool:
                return bool(storage.exists(waiters))

            assert await eventually(marked, bool, within=5, interval=0.02)
            storage.close()
            assert node.proc is not None
            node.proc.send_signal(signal.SIGTERM)

            async def metrics() -> str:
                return (await http.get("/metrics")).text

            during = await eventually(metrics, lambda t: _value(t, "mediator_ready") == 0, within=3)
            assert _value(during, "mediator_ready") == 0
            assert (await held).status_code in (200, 204)
        await asyncio.to_thread(node.proc.wait, 15)
        assert node.proc.returncode == 0
    finally:
        node.stop()


def test_a_bad_metrics_address_is_refused_at_start(db_url: str, tmp_path: Path) -> None:
    worker = _worker(db_url, tmp_path / "worker.health")
    worker.env["MEDIATOR_WORKER_METRICS_LISTEN"] = "no-port-here"
    worker.spawn()
    assert worker.proc is not None
    assert worker.proc.wait(30) == 2
    out = worker.output()
    assert "error: --worker-metrics-listen wants HOST:PORT, not 'no-port-here'" in out
    assert "Traceback" not in out
