"""Reaching Redis: each deployment mode's URL, a clear error for every malformed one, no
password in logs, TLS kept in every mode, and a node on a Unix socket."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import SSLConnection

from mediator.embedded import default_binary
from mediator.engine import keys
from mediator.errors import ConfigError
from mediator.storage.clients import Backend
from mediator.storage.target import Mode, parse
from tests.eventually import eventually
from tests.mqs_client import create, receive, send
from tests.servers import Node
from tests.topologies import ServerProcess


def test_standalone_urls_are_taken_as_they_are() -> None:
    for url in ("redis://127.0.0.1:6379/2", "rediss://h:6380/0", "unix:///tmp/r.sock?db=1"):
        target = parse(url)
        assert (target.mode, target.url) == (Mode.STANDALONE, url)
    assert parse("rediss://h:6380/0").tls


def test_a_sentinel_url_names_its_sentinels_service_database_and_passwords() -> None:
    target = parse(
        "redis+sentinel://app:s%40cret@10.0.0.1:26380,10.0.0.2,[::1]:26381/mymaster/4"
        "?sentinel_password=watch"
    )
    assert target.mode is Mode.SENTINEL
    assert target.hosts == (("10.0.0.1", 26380), ("10.0.0.2", 26379), ("::1", 26381))
    assert (target.service, target.db) == ("mymaster", 4)
    assert (target.username, target.password) == ("app", "s@cret")
    assert target.sentinel_password == "watch"
    assert not target.tls
    for secret in ("s@cret", "s%40cret", "watch"):
        assert secret not in target.redacted  # what the logs show
    assert target.redacted.startswith("redis+sentinel://app:***@10.0.0.1:26380")
    assert "password=" not in parse("redis://h:6379/0?password=hush").redacted


def test_a_cluster_url_lists_start_nodes_with_the_default_port() -> None:
    target = parse("rediss+cluster://:pw@a:7000,b")
    assert target.mode is Mode.CLUSTER
    assert target.hosts == (("a", 7000), ("b", 6379))
    assert (target.username, target.password, target.tls) == (None, "pw", True)
    assert parse("redis+cluster://a:7000/0").hosts == (("a", 7000),)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("localhost:6379", "not a Redis URL"),
        ("http://localhost", "unknown Redis URL scheme"),
        ("redis+mongo://a", "unknown Redis URL scheme"),
        ("redis+sentinel://a:26379", "names the service"),
        ("redis+sentinel://a:26379/m/x", "not a number"),
        ("redis+cluster://a:7000/2", "only database 0"),
        ("redis+cluster://a:port", "not a number"),
        ("redis+cluster:///", "no host"),
        ("redis+cluster://:7000", "empty host"),
    ],
)
def test_malformed_urls_are_refused_with_what_was_expected(url: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        parse(url)


async def test_tls_urls_connect_with_tls_in_every_mode() -> None:
    """A rediss URL must never fall back to a plain connection (the packing connection class
    the clients use otherwise would replace redis-py's SSL one)."""
    plain = Backend("redis://127.0.0.1:6379/0")
    tls = Backend("rediss://127.0.0.1:6380/0")
    sentinel = Backend("rediss+sentinel://127.0.0.1:26379/mymaster")
    cluster = Backend("rediss+cluster://127.0.0.1:7000")
    try:
        assert not issubclass(plain.client.connection_pool.connection_class, SSLConnection)
        assert issubclass(tls.client.connection_pool.connection_class, SSLConnection)
        assert issubclass(sentinel.client.connection_pool.connection_class, SSLConnection)
        assert isinstance(cluster.client, RedisCluster)
        assert issubclass(
            cluster.client.nodes_manager.startup_nodes["127.0.0.1:7000"].connection_class,
            SSLConnection,
        )
    finally:
        for backend in (plain, tls, sentinel, cluster):
            await backend.aclose()


@pytest.mark.full
async def test_a_node_on_a_unix_socket_serves_and_wakes_long_polls(tmp_path: Path) -> None:
    socket = tmp_path / "redis.sock"
    server = ServerProcess(
        default_binary(), tmp_path / "data", "--unixsocket", str(socket), "--unixsocketperm", "700"
    ).start()
    node = Node(f"unix://{socket}?db=0")
    backend = Backend(f"unix://{socket}?db=0")
    try:
        await asyncio.to_thread(node.start)
        await backend.start()
        waiters = keys.queue_keys("mqs:over-a-socket").waiters
        async with httpx.AsyncClient(base_url=node.base, timeout=30) as http:
            await create(http, "over-a-socket")
            loop = asyncio.get_running_loop()
            started = loop.time()
            poll = asyncio.create_task(receive(http, "over-a-socket", wait=10))
            # The long poll waits: the node is marked as waiting on the queue.
            assert await eventually(lambda: backend.client.exists(waiters), bool, within=5)
            await send(http, "over-a-socket", b"woken")
            [part] = await poll
            assert part.body == b"woken"
            assert loop.time() - started < 1.5  # a wake-up, not the 2 s re-check
    finally:
        await backend.aclose()
        node.stop()
        server.stop()
