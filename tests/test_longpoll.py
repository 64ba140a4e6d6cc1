"""Long polls wake on sends, on due delayed messages and on visibility timeouts, across nodes."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.mqs_client import create, receive, send, send_batch

pytestmark = pytest.mark.topology  # run again on Sentinel and Redis Cluster


async def test_long_poll_returns_as_soon_as_a_message_is_sent(
    http_a: httpx.AsyncClient, http_b: httpx.AsyncClient, qname: str
):
    await create(http_a, qname)
    poll = asyncio.create_task(receive(http_b, qname, wait=20))
    await asyncio.sleep(0.3)
    assert not poll.done()
    sent_at = time.monotonic()
    mid = await send(http_a, qname, b"wake up")
    (p,) = await asyncio.wait_for(poll, 5)
    assert p.headers["x-mqs-message-id"] == mid
    assert time.monotonic() - sent_at < 1.0


async def test_long_poll_without_messages_waits_the_whole_time(
    http_a: httpx.AsyncClient, qname: str
):
    await create(http_a, qname)
    start = time.monotonic()
    assert await receive(http_a, qname, wait=1) == []
    assert 0.95 <= time.monotonic() - start < 3


async def test_long_poll_returns_delayed_message_when_due(
    http_a: httpx.AsyncClient, http_b: httpx.AsyncClient, qname: str
):
    await create(http_a, qname, delay=1)
    poll = asyncio.create_task(receive(http_b, qname, wait=10))
    await asyncio.sleep(0.2)
    sent_at = time.monotonic()
    mid = await send(http_a, qname, b"delayed")  # sent after the poll started waiting
    (p,) = await asyncio.wait_for(poll, 5)
    assert p.headers["x-mqs-message-id"] == mid
    assert 0.9 <= time.monotonic() - sent_at < 1.8


async def test_long_poll_returns_in_flight_message_when_its_timeout_ends(
    http_a: httpx.AsyncClient, http_b: httpx.AsyncClient, qname: str
):
    await create(http_a, qname, visibility=1)
    mid = await send(http_a, qname, b"retry me")
    (first,) = await receive(http_a, qname)  # hidden now, for 1 s
    taken_at = time.monotonic()
    assert first.headers["x-mqs-message-id"] == mid
    poll = asyncio.create_task(receive(http_b, qname, wait=10))
    (p,) = await asyncio.wait_for(poll, 5)
    assert p.headers["x-mqs-message-id"] == mid
    assert p.headers["x-mqs-message-receives"] == "2"
    assert 0.8 <= time.monotonic() - taken_at < 1.8


async def test_batch_send_of_k_wakes_k_long_polls_on_another_node(
    http_a: httpx.AsyncClient, http_b: httpx.AsyncClient, qname: str
):
    await create(http_a, qname)
    k = 5
    polls = [asyncio.create_task(receive(http_b, qname, wait=20)) for _ in range(k)]
    await asyncio.sleep(0.5)
    assert not any(p.done() for p in polls)
    sent_at = time.monotonic()
    ids = await send_batch(http_a, qname, [b"m%d" % i for i in range(k)])
    results = await asyncio.wait_for(asyncio.gather(*polls), 5)
    assert time.monotonic() - sent_at < 1.5  # all woken by the send, not by a recheck
    got = sorted(p.headers["x-mqs-message-id"] for r in results for p in r)
    assert got == sorted(ids)


async def test_long_poll_on_deleted_queue_answers_404(http_a: httpx.AsyncClient, qname: str):
    await create(http_a, qname)
    poll = asyncio.create_task(
        http_a.get(
            f"/messages/{qname}", headers={"X-MQS-MAX-MESSAGES": "1", "X-MQS-WAIT-TIME": "5"}
        )
    )
    await asyncio.sleep(0.2)
    assert (await http_a.delete(f"/queues/{qname}")).status_code == 200
    r = await asyncio.wait_for(poll, 8)
    assert r.status_code in (200, 404)  # 404 once the wait re-reads the queue
    if r.status_code == 200:
        assert r.json() == []
