"""Long polls wake on sends, on due delayed messages and on visibility timeouts, across nodes.

The polls that must be woken wait on a node whose re-check (the safety net for a lost
wake-up) is a minute away: one answered within the test's wait was woken by the event, on a
loaded machine too, with no bound on how long that took."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from mediator.engine import Engine, QueueConfig, QueueRef, keys
from tests.eventually import eventually
from tests.inprocess import AppNode
from tests.mqs_client import create, receive, send, send_batch

pytestmark = pytest.mark.topology  # run again on Sentinel and Redis Cluster


RECHECK_SECONDS = 60.0  # far beyond every wait below: a poll answered was woken


@pytest.fixture(scope="module")
async def slow_b(redis_url: str) -> AsyncIterator[AppNode]:
    """A second node whose long polls re-check their queue only once a minute."""
    node = await AppNode(
        redis_url,
        "slow-recheck",
        in_process_worker=False,
        long_poll_recheck_seconds=RECHECK_SECONDS,
    ).start()
    yield node
    await node.stop()


@pytest.fixture
async def http_slow(slow_b: AppNode) -> AsyncIterator[httpx.AsyncClient]:
    async with slow_b.client() as client:
        yield client


async def polls_waiting(node: AppNode, qname: str, n: int = 1) -> None:
    """Until `n` long polls of the node wait on the queue: registered for its wake-ups, and
    the node marked as waiting by a receive that found it empty."""
    hub, engine = node.app.state.mqs.hub, node.app.state.engine
    qualified = f"mqs:{qname}"

    async def waiting() -> bool:
        marked = await engine.redis.hexists(keys.queue_keys(qualified).waiters, engine.wake_channel)
        return bool(marked) and hub.waiter_count(qualified) >= n

    assert await eventually(waiting, bool, within=5, interval=0.01)


async def create_ms(engine: Engine, qname: str, *, visibility_ms: int = 30_000, delay_ms: int = 0):
    """A queue with timers of a part of a second (the API speaks whole seconds)."""
    config = QueueConfig(
        retention_ms=3_600_000, visibility_timeout_ms=visibility_ms, delay_ms=delay_ms
    )
    await engine.create_queue(QueueRef("mqs", qname), config)


async def test_long_poll_returns_as_soon_as_a_message_is_sent(
    http_a: httpx.AsyncClient, http_slow: httpx.AsyncClient, slow_b: AppNode, qname: str
):
    await create(http_a, qname)
    poll = asyncio.create_task(receive(http_slow, qname, wait=30))
    await polls_waiting(slow_b, qname)
    assert not poll.done()
    mid = await send(http_a, qname, b"wake up")
    (p,) = await asyncio.wait_for(poll, 40)  # before its re-check: the send woke it
    assert p.headers["x-mqs-message-id"] == mid


async def test_long_poll_without_messages_waits_the_whole_time(
    http_a: httpx.AsyncClient, qname: str
):
    await create(http_a, qname)
    start = time.monotonic()
    assert await asyncio.wait_for(receive(http_a, qname, wait=1), 30) == []
    assert time.monotonic() - start >= 0.95


async def test_long_poll_returns_delayed_message_when_due(
    http_a: httpx.AsyncClient,
    http_slow: httpx.AsyncClient,
    slow_b: AppNode,
    engine: Engine,
    qname: str,
):
    await create_ms(engine, qname, delay_ms=250)
    poll = asyncio.create_task(receive(http_slow, qname, wait=30))
    await polls_waiting(slow_b, qname)
    sent_at = time.monotonic()
    mid = await send(http_a, qname, b"delayed")  # sent after the poll started waiting
    (p,) = await asyncio.wait_for(poll, 40)  # before its re-check: the due time woke it
    assert p.headers["x-mqs-message-id"] == mid
    assert time.monotonic() - sent_at >= 0.2  # not before it was due


async def test_long_poll_returns_in_flight_message_when_its_timeout_ends(
    http_a: httpx.AsyncClient, http_slow: httpx.AsyncClient, engine: Engine, qname: str
):
    await create_ms(engine, qname, visibility_ms=250)
    mid = await send(http_a, qname, b"retry me")
    (first,) = await receive(http_a, qname)  # hidden now, for 250 ms
    taken_at = time.monotonic()
    assert first.headers["x-mqs-message-id"] == mid
    poll = asyncio.create_task(receive(http_slow, qname, wait=30))
    (p,) = await asyncio.wait_for(poll, 40)  # before its re-check: the timeout's end woke it
    assert p.headers["x-mqs-message-id"] == mid
    assert p.headers["x-mqs-message-receives"] == "2"
    assert time.monotonic() - taken_at >= 0.05  # hidden until then


async def test_batch_send_of_k_wakes_k_long_polls_on_another_node(
    http_a: httpx.AsyncClient, http_slow: httpx.AsyncClient, slow_b: AppNode, qname: str
):
    await create(http_a, qname)
    k = 5
    polls = [asyncio.create_task(receive(http_slow, qname, wait=30)) for _ in range(k)]
    await polls_waiting(slow_b, qname, k)
    assert not any(p.done() for p in polls)
    ids = await send_batch(http_a, qname, [b"m%d" % i for i in range(k)])
    # All answered before their re-check: every one was woken by the send.
    results = await asyncio.wait_for(asyncio.gather(*polls), 40)
    got = sorted(p.headers["x-mqs-message-id"] for r in results for p in r)
    assert got == sorted(ids)


async def test_long_poll_on_deleted_queue_answers_404(
    http_a: httpx.AsyncClient, app_a: AppNode, qname: str
):
    await create(http_a, qname)
    poll = asyncio.create_task(
        http_a.get(
            f"/messages/{qname}", headers={"X-MQS-MAX-MESSAGES": "1", "X-MQS-WAIT-TIME": "5"}
        )
    )
    await polls_waiting(app_a, qname)
    assert (await http_a.delete(f"/queues/{qname}")).status_code == 200
    r = await asyncio.wait_for(poll, 8)
    assert r.status_code in (200, 404)  # 404 once the wait re-reads the queue
    if r.status_code == 200:
        assert r.json() == []
