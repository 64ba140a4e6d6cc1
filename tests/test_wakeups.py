"""The node's wake-up subscription (engine/wakeups.py) against a real server: what each kind
of message on its channels reaches, and a subscription that is cut off comes back."""

from __future__ import annotations

import asyncio
import uuid

from redis.asyncio import Redis

from mediator.engine import keys
from mediator.engine.wakeups import WakeHub
from mediator.storage.clients import Backend
from tests.eventually import eventually
from tests.subscribers import cut, subscribers

BROADCAST = "t-broadcast"


async def _started(backend: Backend) -> tuple[WakeHub, list[str], list[str]]:
    """A hub on a channel of its own, with a `note` kind and a broadcast listener that
    record what reaches them."""
    hub = WakeHub(backend.subscriber, keys.node_channel(uuid.uuid4().hex[:8]))
    notes: list[str] = []
    broadcasts: list[str] = []
    hub.on("note", notes.append, lambda: None)
    hub.listen(BROADCAST, broadcasts.append, lambda: None)
    await hub.start()
    assert hub.connected.is_set()
    return hub, notes, broadcasts


async def test_each_message_reaches_its_handler_and_wakes_only_its_queue(
    backend: Backend, redis_client: Redis
) -> None:
    hub, notes, broadcasts = await _started(backend)
    try:
        with hub.waiting("q:a") as a, hub.waiting("q:b") as b:
            await redis_client.publish(hub.channel, "note hello there")
            await redis_client.publish(BROADCAST, "gone r1")
            await redis_client.publish(hub.channel, "wake q:a 1 -1 0")
            await asyncio.wait_for(asyncio.shield(a), 2)
            assert not b.done()
        assert notes == ["hello there"]
        assert broadcasts == ["gone r1"]
    finally:
        await hub.stop()


async def test_a_cut_subscription_comes_back_and_wakes_its_waiters(
    backend: Backend, redis_client: Redis
) -> None:
    """Wake-ups published while the subscription was down are lost: every waiter is woken
    when it is back (to read its queue again), and later wake-ups arrive as before."""
    others = await subscribers(backend)
    hub, notes, _ = await _started(backend)
    try:
        [ours] = await subscribers(backend) - others
        with hub.waiting("q:a") as waiting:
            hub.connected.clear()
            await cut(backend, ours)
            await asyncio.wait_for(hub.connected.wait(), 5)
            await asyncio.wait_for(asyncio.shield(waiting), 2)

        async def heard() -> list[str]:
            await redis_client.publish(hub.channel, "note again")
            return notes

        assert "again" in await eventually(heard, lambda n: "again" in n, within=5)
        with hub.waiting("q:a") as later:
            await redis_client.publish(hub.channel, "wake q:a 1 -1 0")
            await asyncio.wait_for(asyncio.shield(later), 2)
    finally:
        await hub.stop()
