"""SIGTERM drains a node: /readyz turns 503, WebSockets are closed with 1012 (new ones too),
requests in flight are answered, nothing is lost, and the process exits within its time."""

from __future__ import annotations

import asyncio
import signal
import time

import httpx
import pytest
import websockets
from redis.asyncio import Redis

from mediator.client import attachments
from mediator.engine import keys
from tests.didcomm_peer import LIVE, Peer, forward, mediator_key
from tests.eventually import eventually
from tests.servers import Node


async def test_sigterm_drains_sockets_and_requests_then_exits(
    redis_url: str, node_b: Node, qname: str
) -> None:
    node = Node(redis_url, MEDIATOR_DRAIN_SECONDS="6", MEDIATOR_IN_PROCESS_WORKER="false")
    await asyncio.to_thread(node.start)
    try:
        med = await mediator_key(node.base)
        peer = Peer(node.base, med, "ws")
        await peer.connect()
        await peer.exchange()
        key = await peer.mediate()
        assert (await peer.send(LIVE)) is not None
        await forward(node_b.base, med, key, {"n": "carried"})
        carried = attachments(await peer.next_message())
        plain = [await websockets.connect("ws" + node.base[4:] + "/") for _ in range(3)]

        async with httpx.AsyncClient(base_url=node.base, timeout=30) as client:
            made = await client.put(
                f"/queues/{qname}",
                headers={
                    "X-MQS-RETENTION-SECONDS": "3600",
                    "X-MQS-VISIBILITY-TIMEOUT-SECONDS": "30",
                },
            )
            assert made.status_code == 201
            long_poll = asyncio.create_task(
                client.get(
                    f"/messages/{qname}",
                    headers={"X-MQS-MAX-MESSAGES": "1", "X-MQS-WAIT-TIME": "4"},
                )
            )
            storage = Redis.from_url(redis_url)
            try:  # the long poll waits: the node is marked as waiting on the queue
                waiters = keys.queue_keys(f"mqs:{qname}").waiters
                assert await eventually(lambda: storage.exists(waiters), bool, within=5)
            finally:
                await storage.aclose()
            assert node.proc is not None
            started = time.monotonic()
            node.proc.send_signal(signal.SIGTERM)
            ready = await eventually(
                lambda: client.get("/readyz"), lambda r: r.status_code == 503, within=5
            )
            assert ready.status_code == 503 and ready.json()["status"] == "draining"
            late = await websockets.connect("ws" + node.base[4:] + "/")  # refused politely
            await late.wait_closed()
            assert late.close_code == 1012
            for ws in plain:
                await asyncio.wait_for(ws.wait_closed(), 6)
                assert ws.close_code == 1012
            answered = await long_poll  # the request in flight is answered, not cut
            assert answered.status_code in (200, 204)
        await asyncio.to_thread(node.proc.wait, 15)
        assert time.monotonic() - started < 6 + 5
        assert node.proc.returncode == 0, node.output()[-2000:]
        # The live delivery it carried is offered again elsewhere: nothing is lost.
        again = Peer(node_b.base, med)
        again.keys, again.mediator = peer.keys, peer.mediator
        again.recipient_keys = peer.recipient_keys
        status = await again.status()
        assert status["message_count"] == 1
        delivery = attachments(await again.deliver())
        assert [i for i, _ in delivery] == [i for i, _ in carried]
        await again.ack([i for i, _ in delivery])
        await again.close()
        await peer.close()
    finally:
        node.stop()


@pytest.mark.full
async def test_idle_sockets_close_and_old_ones_are_asked_to_reconnect(redis_url: str) -> None:
    node = Node(
        redis_url,
        MEDIATOR_WEBSOCKET_IDLE_SECONDS="0.5",
        MEDIATOR_WEBSOCKET_MAX_AGE_SECONDS="3",
        MEDIATOR_IN_PROCESS_WORKER="false",
    )
    await asyncio.to_thread(node.start)
    try:
        url = "ws" + node.base[4:] + "/"
        idle = await websockets.connect(url)
        await asyncio.wait_for(idle.wait_closed(), 5)
        assert idle.close_code == 1000  # idle: closed after half a second
        med = await mediator_key(node.base)
        peer = Peer(node.base, med, "ws")
        await peer.connect()
        await peer.exchange()
        await peer.mediate()
        assert (await peer.send(LIVE)) is not None  # live: silence is normal, kept open
        # A socket opened after it, silent as long, is closed for idling: the live one not.
        probe = await websockets.connect(url)
        await asyncio.wait_for(probe.wait_closed(), 5)
        assert probe.close_code == 1000
        assert peer.ws.connected and not peer.ws._closed.is_set()
        await asyncio.wait_for(peer.ws._closed.wait(), 5)  # the maximum age (3 s) is up
        await peer.close()
    finally:
        node.stop()
