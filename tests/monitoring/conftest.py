"""A small deployment to monitor: two nodes and a `mediator worker` with its metrics endpoint,
on a database of the session's Redis of their own, with some traffic of every kind behind
them (mqs, a DIDComm handshake, a forward, a push that fails, a pickup)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import redis

from mediator.client import Sender
from mediator.didcomm.did_peer import numalgo2_did
from mediator.embedded import free_port
from tests.didcomm_peer import Peer, mediator_key
from tests.eventually import eventually
from tests.monitoring.prometheus import until
from tests.servers import MetricsWorker, Node, RedisUnderTest, database_url

PARTITIONS = 4
FAST = {
    "MEDIATOR_WORKER_PARTITIONS": str(PARTITIONS),
    "MEDIATOR_LEASE_SECONDS": "2",
    "MEDIATOR_WORKER_TICK_SECONDS": "0.2",
    "MEDIATOR_STATS_SECONDS": "1",
    "MEDIATOR_PUSH_RETRY_MIN_SECONDS": "0.2",
    "MEDIATOR_PUSH_RETRY_MAX_SECONDS": "0.5",
    "MEDIATOR_PUSH_TIMEOUT_SECONDS": "2",
    # The offline wallet's endpoint is on loopback: opened, so that its pushes fail (and
    # are retried) as an unreachable agent's do, instead of being refused.
    "MEDIATOR_OUTBOUND_ALLOW": "127.0.0.0/8",
}


@dataclass
class Deployment:
    redis_url: str
    nodes: list[Node]
    worker: MetricsWorker

    def node(self, **env: str) -> Node:
        """Another node of this deployment (the caller stops it)."""
        return Node(
            self.redis_url,
            MEDIATOR_IN_PROCESS_WORKER="false",
            MEDIATOR_DRAIN_SECONDS="2",
            **FAST,
            **env,
        )


@pytest.fixture(scope="session")
def deployment(
    redis_server: RedisUnderTest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    url = database_url(redis_server.url, "monitoring")
    redis.Redis.from_url(url).flushdb()
    health = tmp_path_factory.mktemp("monitoring") / "worker.health"
    started: list[Node | MetricsWorker] = []
    try:
        deployment = Deployment(url, [], MetricsWorker(url, health, **FAST))
        for _ in range(2):
            node = deployment.node()
            started.append(node)
            deployment.nodes.append(node.start())
        started.append(deployment.worker)
        deployment.worker.start()
        yield deployment
    finally:
        for process in reversed(started):
            process.stop()


def scrape(url: str) -> str:
    return httpx.get(url, timeout=10).text


@pytest.fixture(scope="session")
async def traffic(deployment: Deployment) -> Deployment:
    """The deployment after traffic of every kind: what a scrape then shows."""
    await drive(deployment)
    return deployment


async def drive(deployment: Deployment) -> None:
    """Traffic of every kind: mqs, a DIDComm handshake, a forward, a push that fails and is
    retried by the worker, a pickup."""
    a, b = (node.base for node in deployment.nodes)
    pushes = await asyncio.to_thread(_failed_pushes, deployment)
    async with httpx.AsyncClient(timeout=10) as http:
        made = await http.put(
            f"{a}/queues/monitored",
            headers={"X-MQS-RETENTION-SECONDS": "600", "X-MQS-VISIBILITY-TIMEOUT-SECONDS": "30"},
        )
        assert made.status_code in (201, 409), made.text
        sent = await http.post(
            f"{b}/messages/monitored", content=b"hello", headers={"Content-Type": "text/plain"}
        )
        assert sent.status_code == 201, sent.text
        received = await http.get(f"{a}/messages/monitored", headers={"X-MQS-MAX-MESSAGES": "1"})
        assert received.status_code == 200, received.text
        assert (await http.get(f"{a}/queues/no-such-queue")).status_code == 404

    # A wallet whose own endpoint is down, as an agent that is offline: the forward is
    # accepted, its push fails (and is retried by the worker), the wallet picks it up.
    med = await mediator_key(a)
    dead = f"http://127.0.0.1:{free_port()}/"
    wallet = Peer(a, med)
    try:
        request = wallet.message(
            "didexchange/1.1/request", label="offline", did=numalgo2_did(wallet.keys, [dead])
        )
        assert (await wallet.request_message(request))["@type"].endswith("/response")
        await wallet.mediate_request()
        key = await wallet.register_key()
        await Sender(med).send_to(key, {"n": 1}, b)
        await asyncio.to_thread(
            until, lambda: _failed_pushes(deployment), lambda n: n >= pushes + 2, 15, "a retry"
        )
        # Picked up between two retries (a retry in flight holds the message meanwhile).
        delivery = await eventually(
            lambda: wallet.delivery_request(10), lambda d: bool(d.get("~attach")), within=15
        )
        await wallet.messages_received([item["@id"] for item in delivery["~attach"]])
    finally:
        await wallet.close()


def _failed_pushes(deployment: Deployment) -> float:
    total = 0.0
    for url in [f"{n.base}/metrics" for n in deployment.nodes] + [deployment.worker.metrics_url]:
        for line in scrape(url).splitlines():
            if line.startswith('mediator_didcomm_pushes_total{outcome="failed"}'):
                total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.fixture(scope="session")
def worker_exposition(traffic: Deployment) -> str:
    return scrape(traffic.worker.metrics_url)


@pytest.fixture(scope="session")
def node_exposition(traffic: Deployment) -> str:
    return scrape(f"{traffic.nodes[0].base}/metrics")
