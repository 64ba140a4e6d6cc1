"""The shipped rules in a real Prometheus (Debian's binary) that scrapes two real nodes and a
real worker: every target up, every recording rule with a value, every rule healthy; and
alerts that fire when their condition is made true (a node stopped, Redis near maxmemory).

The firing checks load a copy of the rules with every `for:` set to 1 s (fast_copy), so that
an alert fires within seconds; expressions and thresholds are the shipped ones, and the
`for:` durations themselves are checked by promtool (test_rules.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
import redis

from tests.monitoring.conftest import PARTITIONS, Deployment, drive
from tests.monitoring.prometheus import (
    DASHBOARD,
    RULES,
    Prometheus,
    fast_copy,
    load_rules,
    until,
)
from tests.servers import Node

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)

NODES, WORKERS = "mediator", "mediator-worker"


def _jobs(deployment: Deployment, *extra: str) -> dict[str, list[str]]:
    return {
        NODES: [node.base.removeprefix("http://") for node in deployment.nodes] + list(extra),
        WORKERS: [deployment.worker.target],
    }


@contextlib.contextmanager
def maxmemory(url: str, limit: int) -> Iterator[redis.Redis]:
    """The server's maxmemory set to `limit` for a while, then put back."""
    server = redis.Redis.from_url(url)
    before = str(server.config_get("maxmemory")["maxmemory"])
    server.config_set("maxmemory", limit)
    try:
        yield server
    finally:
        server.config_set("maxmemory", before)
        server.close()


@pytest.fixture(scope="module")
async def prometheus(traffic: Deployment) -> AsyncIterator[Prometheus]:
    """Prometheus with the shipped rules, once it has scraped traffic of every kind (rates
    are of what happens while it watches)."""
    server = Prometheus(RULES, _jobs(traffic)).start()
    try:
        await asyncio.to_thread(
            until, lambda: server.query("up == 1"), lambda up: len(up) == 3, 20, "targets up"
        )
        await drive(traffic)
        yield server
    finally:
        server.stop()


def test_every_node_and_the_worker_are_scraped(prometheus: Prometheus, traffic: Deployment) -> None:
    def targets() -> list[tuple[str, str, str]]:
        return sorted(
            (t["labels"]["job"], t["labels"]["instance"], t["health"])
            for t in prometheus.api("targets")["activeTargets"]
        )

    expected = sorted(
        [(NODES, n.base.removeprefix("http://"), "up") for n in traffic.nodes]
        + [(WORKERS, traffic.worker.target, "up")]
    )
    until(targets, lambda got: got == expected, 20, "every target up")


def test_every_recording_rule_has_a_value(prometheus: Prometheus, traffic: Deployment) -> None:
    records = [rule["record"] for rule in load_rules() if "record" in rule]
    # No limit on the test server: the memory ratio has a value only under one.
    with maxmemory(traffic.redis_url, 8 * 1024**3):

        def empty() -> list[str]:
            return [record for record in records if not prometheus.query(record)]

        until(empty, lambda left: not left, 40, "a value for every recording rule")

        ratio = prometheus.query("job_server:mediator_redis_memory_used:ratio")
        assert len(ratio) == 1
        assert 0 < float(ratio[0]["value"][1]) < 0.01  # megabytes of 8 GiB

    def value(expr: str) -> float:
        [sample] = prometheus.query(expr)
        return float(sample["value"][1])

    # What the dashboard's overview shows, as the deployment is.
    assert value("job:mediator_ready:sum") == 2
    assert value("job:mediator_worker_partitions:max") == PARTITIONS
    assert value("job:mediator_worker_partitions_leased:max") == PARTITIONS
    assert value(f'job:mediator_worker_leases:sum{{job="{WORKERS}"}}') == PARTITIONS
    assert value("job:mediator_workers:max") == 1
    # The forward was accepted, and its pushes (the node's first try, the worker's retries)
    # all failed.
    forwards = prometheus.query("job_type_outcome:mediator_didcomm_messages:rate5m")
    assert {s["metric"]["type"] for s in forwards} >= {"routing/1/forward", "didexchange/1/request"}
    failed = prometheus.query("job:mediator_didcomm_pushes_failed:ratio_rate5m")
    assert {s["metric"]["job"]: s["value"][1] for s in failed} == {NODES: "1", WORKERS: "1"}


def test_every_rule_is_loaded_and_healthy(prometheus: Prometheus) -> None:
    shipped = {rule.get("record") or rule["alert"] for rule in load_rules()}

    def health() -> dict[str, str]:
        return {
            rule["name"]: rule["health"]
            + (f": {rule['lastError']}" if rule.get("lastError") else "")
            for group in prometheus.api("rules")["groups"]
            for rule in group["rules"]
        }

    got = until(
        health, lambda h: set(h) == shipped and set(h.values()) == {"ok"}, 20, "all rules ok"
    )
    assert len(got) == len(load_rules())


@dataclass
class Fast:
    """A Prometheus with the `for:`-less copy of the rules, and a node of its own to stop."""

    server: Prometheus
    doomed: Node


@pytest.fixture(scope="module")
def fast(traffic: Deployment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fast]:
    doomed = traffic.node().start()
    rules = fast_copy(RULES, tmp_path_factory.mktemp("rules"))
    try:
        server = Prometheus(rules, _jobs(traffic, doomed.base.removeprefix("http://"))).start()
        try:
            yield Fast(server, doomed)
        finally:
            server.stop()
    finally:
        doomed.stop()


def test_a_stopped_node_fires_node_not_ready(fast: Fast) -> None:
    server, doomed = fast.server, fast.doomed
    target = doomed.base.removeprefix("http://")
    until(
        lambda: server.query(f'mediator_ready{{instance="{target}"}}'),
        bool,
        20,
        "the node scraped",
    )
    assert server.firing("MediatorNodeNotReady") == []
    doomed.stop()  # SIGTERM: it drains (not ready), then exits (target down)
    until(lambda: server.query(f'up{{instance="{target}"}} == 0'), bool, 20, "the target down")
    firing = until(lambda: server.firing("MediatorNodeNotReady"), bool, 20, "MediatorNodeNotReady")
    assert [(a["instance"], a["job"], a["severity"]) for a in firing] == [
        (target, NODES, "warning")
    ]
    # The other two are ready: not the critical one.
    assert server.query("job:mediator_ready:sum")[0]["value"][1] == "2"
    assert server.firing("MediatorNoReadyNode") == []


def test_redis_near_maxmemory_fires_both_memory_alerts(fast: Fast, traffic: Deployment) -> None:
    server = fast.server
    until(
        lambda: server.query("job_server:mediator_redis_used_memory_bytes:max"),
        bool,
        20,
        "Redis memory scraped",
    )
    assert server.firing("MediatorRedisMemoryNearFull") == []
    used = int(redis.Redis.from_url(traffic.redis_url).info("memory")["used_memory"])
    # Used memory at about 90% of the limit: above both lines, with room for the writes
    # of the nodes and the worker meanwhile.
    with maxmemory(traffic.redis_url, int(used / 0.9)):
        near = until(
            lambda: server.firing("MediatorRedisMemoryNearFull"),
            bool,
            20,
            "MediatorRedisMemoryNearFull",
        )
        assert [(a["severity"], a["job"]) for a in near] == [("critical", NODES)]
        assert near[0]["server"].startswith("127.0.0.1:")
        headroom = until(
            lambda: server.firing("MediatorRedisMemoryAboveHeadroom"),
            bool,
            20,
            "MediatorRedisMemoryAboveHeadroom",
        )
        assert [a["server"] for a in headroom] == [near[0]["server"]]
    # The limit put back (none on the test server): the alerts resolve.
    until(
        lambda: (
            server.firing("MediatorRedisMemoryNearFull")
            + server.firing("MediatorRedisMemoryAboveHeadroom")
        ),
        lambda firing: not firing,
        20,
        "the memory alerts resolved",
    )


def test_every_dashboard_query_runs_and_shows_data(
    prometheus: Prometheus, traffic: Deployment
) -> None:
    """The dashboard's queries, with its variables at "All", in the Prometheus that has the
    shipped rules: all valid, all with data (send confirmations exist only when sends wait for
    replicas or fsyncs, which this deployment does not ask; the memory ratio needs a
    maxmemory, set for the while)."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = {
        f"{panel['title']} {target['refId']}": target["expr"]
        for row in dashboard["panels"]
        for panel in [row, *row.get("panels", [])]
        for target in panel.get("targets", [])
    }
    variables = {
        "$job": ".*",
        "$instance": ".*",
        "$queue_namespace": ".*",
        "$__rate_interval": "1m",
    }

    def without_data() -> list[str]:
        empty = []
        for where, expr in queries.items():
            for name, value in variables.items():
                expr = expr.replace(name, value)
            if not prometheus.query(expr):  # an invalid query fails in api()
                empty.append(where)
        return empty

    with maxmemory(traffic.redis_url, 8 * 1024**3):
        until(without_data, lambda empty: empty == ["Send confirmations A"], 30, "data everywhere")
