"""A Redis restart loses no send that was answered 201."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mediator.embedded import EmbeddedServer
from tests.mqs_client import create, parts
from tests.servers import Node, start_binary_server


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedServer]:
    server = start_binary_server(tmp_path / "data")
    yield server
    server.stop()


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

            async def sender(i: int) -> None:
                n = 0
                while not stop.is_set():
                    n += 1
                    with contextlib.suppress(httpx.HTTPError):
                        r = await http.post("/messages/durable", content=b"%d-%d" % (i, n))
                        if r.status_code == 201:
                            accepted.update(r.json()["messageIds"])
                        else:
                            assert r.status_code == 503, r.text  # refused, clearly
                            await asyncio.sleep(0.01)

            senders = [asyncio.create_task(sender(i)) for i in range(4)]
            await asyncio.sleep(0.7)
            await asyncio.to_thread(restart, server, crash=crash)
            await asyncio.sleep(0.7)
            stop.set()
            await asyncio.gather(*senders)
            received: set[str] = set()
            while True:
                r = await http.get("/messages/durable", headers={"X-MQS-MAX-MESSAGES": "1000"})
                assert r.status_code == 200
                if r.headers["X-MQS-MESSAGE-COUNT"] == "0":
                    break
                received.update(p.headers["x-mqs-message-id"] for p in parts(r))
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
