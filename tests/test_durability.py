"""What "accepted" means: a Redis restart loses no send answered 201 (mqs) or 202 (a
forward); with --wait-replicas / --wait-fsync a send is answered only once confirmed, and
one that is not gets 503 naming what was stored."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mediator.client import attachments
from mediator.embedded import EmbeddedServer, default_binary
from tests.didcomm_peer import Peer, forward, mediator_key
from tests.eventually import eventually
from tests.mqs_client import create, parts, receive_all_ids, send_until
from tests.servers import Node, start_binary_server
from tests.topologies import ServerProcess, replicas_online

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedServer]:
    server = start_binary_server(tmp_path / "data")
    yield server
    server.stop()


async def grown_to(accepted: set[str] | set[int], n: int) -> None:
    """Until `n` sends were accepted (the traffic flows; after a restart: again)."""

    async def count() -> int:
        return len(accepted)

    assert await eventually(count, lambda k: k >= n, within=30, interval=0.02) >= n


def restart(server: EmbeddedServer, *, crash: bool) -> None:
    assert server.process is not None
    if crash:
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
    else:
        server.stop()
    server.start()


async def _send_through_restart(
    server: EmbeddedServer, *, crash: bool, appendfsync: str
) -> tuple[set[str], set[str]]:
    """Sends while Redis restarts; returns (ids answered 201, ids received afterwards)."""
    if appendfsync != "everysec":
        import redis

        redis.Redis.from_url(server.url).config_set("appendfsync", appendfsync)
    node = Node(server.url, MEDIATOR_IN_PROCESS_WORKER="false").start()
    accepted: set[str] = set()
    try:
        async with httpx.AsyncClient(base_url=node.base, timeout=30) as http:
            await create(http, "durable")
            stop = asyncio.Event()
            senders = [
                asyncio.create_task(send_until(http, "durable", stop, accepted.update, str(i)))
                for i in range(4)
            ]
            await grown_to(accepted, 60)
            await asyncio.to_thread(restart, server, crash=crash)
            await grown_to(accepted, len(accepted) + 60)  # accepted again after the restart
            stop.set()
            await asyncio.gather(*senders)
            received = await receive_all_ids(http, "durable")
    finally:
        node.stop()
    return accepted, received


async def test_graceful_redis_restart_loses_no_accepted_send(own_redis: EmbeddedServer):
    accepted, received = await _send_through_restart(own_redis, crash=False, appendfsync="everysec")
    assert len(accepted) > 100
    assert accepted <= received


async def test_redis_crash_with_fsync_always_loses_no_accepted_send(own_redis: EmbeddedServer):
    accepted, received = await _send_through_restart(own_redis, crash=True, appendfsync="always")
    assert len(accepted) > 100
    assert accepted <= received


async def test_a_redis_crash_with_fsync_always_loses_no_accepted_forward(
    own_redis: EmbeddedServer,
):
    """DIDComm's "accepted" (202 to a forward) survives a crash of the server as mqs's 201."""
    import redis

    redis.Redis.from_url(own_redis.url).config_set("appendfsync", "always")
    node = Node(own_redis.url, MEDIATOR_IN_PROCESS_WORKER="false").start()
    accepted: set[int] = set()
    try:
        med = await mediator_key(node.base)
        async with Peer(node.base, med) as peer:
            key = await peer.mediate()
            stop = asyncio.Event()
            counter = iter(range(1_000_000))

            async def sender() -> None:
                while not stop.is_set():
                    n = next(counter)
                    with contextlib.suppress(httpx.HTTPError):
                        r = await forward(node.base, med, key, {"n": n})
                        if r.status_code == 202:
                            accepted.add(n)
                        else:
                            assert r.status_code == 503, r.text
                            await asyncio.sleep(0.01)

            senders = [asyncio.create_task(sender()) for _ in range(3)]
            await grown_to(accepted, 20)
            await asyncio.to_thread(restart, own_redis, crash=True)
            await grown_to(accepted, len(accepted) + 20)  # accepted again after the restart
            stop.set()
            await asyncio.gather(*senders)
            received: set[int] = set()
            for _ in range(1000):
                delivery = await peer.deliver(limit=100)
                items = attachments(delivery)
                if not items:
                    break
                received.update(peer.open(body)["n"] for _, body in items)
                await peer.ack([mid for mid, _ in items])
    finally:
        node.stop()
    assert len(accepted) > 30
    assert accepted <= received


def primary_and_replica(tmp_path: Path) -> tuple[ServerProcess, ServerProcess]:
    """A primary with its append-only file on, and a replica of it."""
    primary = ServerProcess(default_binary(), tmp_path / "primary", "--appendonly", "yes").start()
    replica = ServerProcess(
        default_binary(), tmp_path / "replica", "--replicaof", "127.0.0.1", str(primary.port)
    ).start()
    return primary, replica


async def synced(primary: ServerProcess) -> None:
    """Until the primary's replica is online (synced)."""

    async def online() -> int:
        return replicas_online(primary)

    assert await eventually(online, lambda n: n == 1, within=10, interval=0.05) == 1


def _metric(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


async def test_a_send_replicas_did_not_confirm_answers_503_and_names_what_was_stored(
    own_redis: EmbeddedServer,
):
    """--wait-replicas 1 on a server with no replica: every send is stored, and refused."""
    node = Node(
        own_redis.url, MEDIATOR_WAIT_REPLICAS="1", MEDIATOR_WAIT_TIMEOUT_SECONDS="0.2"
    ).start()
    try:
        assert "will be refused until enough replicas are back" in node.output()
        async with httpx.AsyncClient(base_url=node.base, timeout=30) as http:
            await create(http, "unconfirmed")
            r = await http.post("/messages/unconfirmed", content=b"kept anyway")
            assert r.status_code == 503
            error = r.json()["error"]
            assert "within 200 ms only 0 of 1 replica(s) confirmed it" in error
            stored = await http.get("/messages/unconfirmed", headers={"X-MQS-MAX-MESSAGES": "1"})
            assert stored.status_code == 200 and stored.content == b"kept anyway"
            assert stored.headers["X-MQS-MESSAGE-ID"] in error  # the sender can tell which

            med = await mediator_key(node.base)
            async with Peer(node.base, med) as peer:
                key = await peer.mediate()
                answer = await forward(node.base, med, key, {"n": 1})
                assert answer.status_code == 503
                assert "replica" in answer.json()["error"]
            metrics = (await http.get("/metrics")).text
            shortfalls = 'mediator_send_confirmations_total{outcome="shortfall"}'
            assert _metric(metrics, shortfalls) == 2
    finally:
        node.stop()


def test_wait_fsync_is_refused_at_start_without_an_append_only_file(tmp_path: Path) -> None:
    server = ServerProcess(default_binary(), tmp_path / "no-aof", "--appendonly", "no").start()
    try:
        node = Node(f"redis://127.0.0.1:{server.port}/0", MEDIATOR_WAIT_FSYNC="true")
        with pytest.raises(RuntimeError, match="needs WAITAOF"):
            node.start()
    finally:
        server.stop()


async def test_the_wait_covers_the_write_itself_not_any_connection(tmp_path: Path) -> None:
    """With its replica frozen, a send cannot be confirmed: a WAIT on another connection
    (which wrote nothing) would count the frozen replica and answer 201."""
    primary, replica = primary_and_replica(tmp_path)
    node = Node(
        f"redis://127.0.0.1:{primary.port}/0",
        MEDIATOR_WAIT_REPLICAS="1",
        MEDIATOR_WAIT_TIMEOUT_SECONDS="0.5",
    )
    try:
        await synced(primary)
        await asyncio.to_thread(node.start)
        async with httpx.AsyncClient(base_url=node.base, timeout=30) as http:
            await create(http, "frozen")
            assert (await http.post("/messages/frozen", content=b"one")).status_code == 201
            assert replica.proc is not None
            replica.proc.send_signal(signal.SIGSTOP)
            try:
                r = await http.post("/messages/frozen", content=b"two")
                assert r.status_code == 503, r.text
                assert "only 0 of 1 replica(s)" in r.json()["error"]
            finally:
                replica.proc.send_signal(signal.SIGCONT)
            assert (await http.post("/messages/frozen", content=b"three")).status_code == 201
            got = await http.get("/messages/frozen", headers={"X-MQS-MAX-MESSAGES": "9"})
            assert sorted(p.body for p in parts(got)) == [b"one", b"three", b"two"]
    finally:
        node.stop()
        replica.stop()
        primary.stop()


async def test_sends_arriving_together_are_confirmed_by_one_wait_per_group(tmp_path: Path):
    """Group commit with --wait-replicas: while the first send waits for its frozen
    replica, 63 more are written behind it; each is answered 201 and counted confirmed,
    and one more WAIT confirms them all."""
    primary, replica = primary_and_replica(tmp_path)
    node = Node(
        f"redis://127.0.0.1:{primary.port}/0",
        MEDIATOR_WAIT_REPLICAS="1",
        MEDIATOR_WAIT_TIMEOUT_SECONDS="20",  # the first WAIT outlasts the others' arrival
    )
    try:
        await synced(primary)
        await asyncio.to_thread(node.start)
        import redis

        admin = redis.Redis(port=primary.port)
        async with httpx.AsyncClient(base_url=node.base, timeout=30) as http:
            await create(http, "grouped")
            warm = await http.post("/messages/grouped", content=b"m")  # the script is loaded
            assert warm.status_code == 201
            admin.config_resetstat()
            calls = _metric(
                (await http.get("/metrics")).text, "mediator_redis_calls_in_flight_count"
            )
            assert replica.proc is not None
            replica.proc.send_signal(signal.SIGSTOP)  # the first send's WAIT blocks
            bodies = [f"m{i}".encode() for i in range(1, 65)]
            sends = [
                asyncio.ensure_future(http.post("/messages/grouped", content=b)) for b in bodies
            ]

            async def written() -> float:
                text = (await http.get("/metrics")).text
                return _metric(text, "mediator_redis_calls_in_flight_count") - calls

            try:
                assert await eventually(written, lambda n: n == 64, within=20) == 64
                assert int(admin.info("clients")["blocked_clients"]) == 1  # the first WAIT
            finally:
                replica.proc.send_signal(signal.SIGCONT)
            answers = await asyncio.gather(*sends)
            assert [a.status_code for a in answers] == [201] * 64
            waits = int(admin.info("commandstats")["cmdstat_wait"]["calls"])
            metrics = (await http.get("/metrics")).text
            confirmed = 'mediator_send_confirmations_total{outcome="confirmed"}'
            assert _metric(metrics, confirmed) == 65
            assert waits in (1, 2)  # the first sends', and one for all written behind it
            got = await http.get("/messages/grouped", headers={"X-MQS-MAX-MESSAGES": "100"})
            assert sorted(p.body for p in parts(got)) == sorted([b"m", *bodies])
    finally:
        node.stop()
        replica.stop()
        primary.stop()
