"""Redis Cluster beyond the suites that run on it (make topologies): sends that wait do so on
the primary of their queue's slot, and follow the slot when it moves; a cluster that goes
away entirely is answered with 503s, and everything, live sockets included, works again once
it is back."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.didcomm_peer import collect, forward, live_peer, mediator_key
from tests.mqs_client import create, parts
from tests.servers import Node
from tests.topologies import LocalCluster

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)

CONFIRMED = 'mediator_send_confirmations_total{outcome="confirmed"}'


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    deployment = LocalCluster(Path(tmp_path_factory.mktemp("cluster")))
    deployment.start()
    yield deployment
    deployment.stop()


@pytest.fixture(scope="module")
def fsync_node(cluster: LocalCluster) -> Iterator[Node]:
    node = Node(cluster.url, MEDIATOR_WAIT_FSYNC="true")
    node.start()
    yield node
    node.stop()


def _metric(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


async def _stored(http: httpx.AsyncClient, name: str) -> set[bytes]:
    got = await http.get(f"/messages/{name}", headers={"X-MQS-MAX-MESSAGES": "9"})
    return {p.body for p in parts(got)}


async def test_sends_wait_on_the_primary_of_their_queue(
    cluster: LocalCluster, fsync_node: Node
) -> None:
    replicas = Node(
        cluster.url,
        MEDIATOR_WAIT_REPLICAS="1",
        MEDIATOR_WAIT_TIMEOUT_SECONDS="0.1",
        MEDIATOR_IN_PROCESS_WORKER="false",
    )
    await asyncio.to_thread(replicas.start)
    try:
        names = [f"slot-{i}" for i in range(12)]
        assert len({cluster.owner(f"mq:{{q:mqs:{n}}}:cfg").port for n in names}) == 3
        async with httpx.AsyncClient(base_url=fsync_node.base, timeout=30) as http:
            before = _metric((await http.get("/metrics")).text, CONFIRMED)
            for name in names:
                await create(http, name)
                r = await http.post(f"/messages/{name}", content=name.encode())
                assert r.status_code == 201, r.text
            after = _metric((await http.get("/metrics")).text, CONFIRMED)
            assert after - before == len(names)  # each fsync confirmed where it was written
        async with httpx.AsyncClient(base_url=replicas.base, timeout=30) as http:
            r = await http.post("/messages/slot-0", content=b"no replica here")
            assert r.status_code == 503 and "only 0 of 1" in r.json()["error"]
            for name in names:  # every message is there, the refused one too
                extra = {b"no replica here"} if name == "slot-0" else set()
                assert await _stored(http, name) == {name.encode(), *extra}
    finally:
        replicas.stop()


async def test_a_waiting_send_follows_its_queue_to_another_primary(
    cluster: LocalCluster, fsync_node: Node
) -> None:
    async with httpx.AsyncClient(base_url=fsync_node.base, timeout=30) as http:
        await create(http, "moving")
        assert (await http.post("/messages/moving", content=b"before")).status_code == 201
        key = "mq:{q:mqs:moving}:cfg"
        source = cluster.owner(key)
        target = next(n for n in cluster.nodes if n is not source)
        await asyncio.to_thread(cluster.move_slot_of, key, target)
        assert cluster.owner(key) is target
        # The node still sends the script to the old primary: MOVED, and it follows.
        r = await http.post("/messages/moving", content=b"after")
        assert r.status_code == 201, r.text
        assert await _stored(http, "moving") == {b"before", b"after"}


async def test_a_cluster_that_goes_away_gets_503s_and_everything_works_once_it_is_back(
    cluster: LocalCluster,
) -> None:
    node = Node(cluster.url, MEDIATOR_WORKER_TICK_SECONDS="0.2")
    await asyncio.to_thread(node.start)
    try:
        med = await mediator_key(node.base)
        peer = await live_peer(node.base, med)
        [key] = peer.recipient_keys
        async with httpx.AsyncClient(base_url=node.base, timeout=30) as http:
            await create(http, "outage")
            await asyncio.to_thread(cluster.kill_all)
            for _ in range(3):
                r = await http.post("/messages/outage", content=b"lost?")
                assert r.status_code == 503 and "error" in r.json(), r.text
                answer = await forward(node.base, med, key, {"n": "during"})
                assert answer.status_code == 503 and "error" in answer.json(), answer.text
            assert (await http.get("/readyz")).status_code == 503
            assert (await http.get("/healthz")).status_code == 200

            await asyncio.to_thread(cluster.restart)
            for _ in range(200):
                r = await http.post("/messages/outage", content=b"back")
                if r.status_code == 201:
                    break
                assert r.status_code == 503, r.text
                await asyncio.sleep(0.1)
            assert r.status_code == 201
            assert (await http.get("/readyz")).status_code == 200

            # The live socket stayed open and its delivery loop carried on.
            answer = await forward(node.base, med, key, {"n": "after"})
            assert answer.status_code == 202
            seen: dict[str, dict[str, str]] = {}
            await collect(peer, 1, seen, wait=10)
            assert list(seen.values()) == [{"n": "after"}]
            await peer.close()
        assert "Traceback" not in node.output()  # nothing went unhandled
    finally:
        node.stop()
