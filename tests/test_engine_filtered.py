"""The engine calls the DIDComm mailbox uses: filtered receive (recipient key, arrival
cut-off) with parked messages, tag statistics, release, limits and queue timestamps."""

from __future__ import annotations

import asyncio

import pytest

from mediator.engine import Engine, QueueConfig, QueueRef, SendMessage
from mediator.engine.wakeups import WakeHub
from mediator.errors import LimitExceeded, QueueNotFound
from mediator.storage.clients import Backend
from tests.eventually import redis_ms, until_redis_ms

pytestmark = pytest.mark.engine

NS = "didcomm"


def tagged(body: bytes, tag: str) -> SendMessage:
    return SendMessage(body=body, trace_id=tag)


async def queue(engine: Engine, name: str) -> QueueRef:
    ref = QueueRef(NS, name)
    await engine.create_queue(
        ref, QueueConfig(retention_ms=3_600_000, visibility_timeout_ms=30_000)
    )
    return ref


async def test_filtered_receive_by_tag_keeps_the_rest_in_order(engine: Engine, qname: str):
    ref = await queue(engine, qname)
    for i, tag in enumerate("abab"):
        await engine.send(ref, [tagged(f"{tag}{i}".encode(), tag)])
    got = await engine.receive_filtered(ref, 10, tag="b")
    assert [m.body for m in got.messages] == [b"b1", b"b3"]
    assert all(m.trace_id == "b" for m in got.messages)
    # The parked "a" messages are visible and come out of a plain receive in order, once.
    stats = await engine.stats(ref)
    assert stats.visible == 2 and stats.in_flight == 2
    rest = await engine.receive(ref, 10)
    assert [m.body for m in rest.messages] == [b"a0", b"a2"]
    assert (await engine.receive(ref, 10)).messages == []
    assert (await engine.receive_filtered(ref, 10, tag="a")).messages == []


async def test_filtered_receive_honours_the_arrival_cut_off(engine: Engine, qname: str):
    ref = await queue(engine, qname)
    await engine.send(ref, [tagged(b"old", "k")])
    stats = await engine.stats(ref)
    await asyncio.sleep(0.01)
    cut = stats.now_ms + 5
    await asyncio.sleep(0.02)
    await engine.send(ref, [tagged(b"new", "k")])
    got = await engine.receive_filtered(ref, 10, min_enqueue_ms=cut)
    assert [m.body for m in got.messages] == [b"new"]
    assert [m.body for m in (await engine.receive(ref, 10)).messages] == [b"old"]


async def test_filtered_deliveries_come_back_after_their_deadline(engine: Engine, qname: str):
    ref = await queue(engine, qname)
    await engine.send(ref, [tagged(b"x", "k")])
    first = await engine.receive_filtered(ref, 1, tag="k", visibility_timeout_ms=1000)
    assert len(first.messages) == 1
    empty = await engine.receive_filtered(ref, 1, tag="k")
    assert empty.messages == [] and empty.next_due_ms is not None
    await until_redis_ms(engine.redis, first.messages[0].visible_at_ms)
    again = await engine.receive_filtered(ref, 1, tag="k")
    assert [m.message_id for m in again.messages] == [first.messages[0].message_id]
    assert again.messages[0].receives == 2


async def test_expired_messages_are_purged_not_handed_out(engine: Engine, qname: str):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, QueueConfig(retention_ms=50, visibility_timeout_ms=30_000))
    await engine.send(ref, [tagged(b"soon gone", "k")])
    await until_redis_ms(engine.redis, await redis_ms(engine.redis) + 50)
    assert (await engine.receive_filtered(ref, 5, tag="k")).messages == []
    assert (await engine.stats(ref)).stored == 0


async def test_tag_stats_count_only_that_tag(engine: Engine, qname: str):
    ref = await queue(engine, qname)
    await engine.send(ref, [tagged(b"12345", "a"), tagged(b"1", "b"), tagged(b"123", "a")])
    await engine.receive_filtered(ref, 1, tag="a")
    stats = await engine.tag_stats(ref, "a")
    assert (stats.messages, stats.visible, stats.bytes) == (2, 1, 8)
    assert stats.oldest_ms is not None and stats.newest_ms is not None and stats.complete
    none = await engine.tag_stats(ref, "zzz")
    assert (none.messages, none.oldest_ms) == (0, None)
    with pytest.raises(QueueNotFound):
        await engine.tag_stats(QueueRef(NS, qname + "-missing"), "a")


async def test_release_makes_messages_visible_and_wakes_a_waiter(
    engine: Engine, qname: str, backend: Backend
):
    ref = await queue(engine, qname)
    await engine.send(ref, [tagged(b"one", "k"), tagged(b"two", "k")])
    handed = await engine.receive(ref, 2, visibility_timeout_ms=60_000)
    hub = WakeHub(backend.subscriber, engine.wake_channel)
    await hub.start()
    try:
        with hub.waiting(ref.qualified) as woken:
            assert (await engine.receive(ref, 1, wait_marker_ms=5000)).messages == []
            released = await engine.release(ref, [m.message_id for m in handed.messages] + ["nope"])
            assert released == 2
            await asyncio.wait_for(asyncio.shield(woken), 2)
    finally:
        await hub.stop()
    again = await engine.receive(ref, 5)
    assert [m.body for m in again.messages] == [b"one", b"two"]
    assert await engine.release(ref, [again.messages[0].message_id]) == 1
    await engine.delete_in_queue(ref, again.messages[1].message_id)
    assert await engine.release(ref, [again.messages[1].message_id]) == 0


async def test_set_limits_are_enforced_by_send(engine: Engine, qname: str):
    ref = await queue(engine, qname)
    await engine.set_limits(
        ref, max_messages=1, max_bytes=None, max_message_bytes=4, retention_ms=60_000,
        will_queue=True,
    )  # fmt: skip
    with pytest.raises(LimitExceeded) as too_big:
        await engine.send(ref, [tagged(b"12345", "k")])
    assert too_big.value.kind == "message_size"
    await engine.send(ref, [tagged(b"1234", "k")])
    with pytest.raises(LimitExceeded) as full:
        await engine.send(ref, [tagged(b"1", "k")])
    assert full.value.kind == "count"
    await engine.set_limits(
        ref, max_messages=None, max_bytes=None, max_message_bytes=None, retention_ms=60_000,
        will_queue=False,
    )  # fmt: skip
    with pytest.raises(LimitExceeded) as closed:
        await engine.send(ref, [tagged(b"1", "k")])
    assert closed.value.kind == "will_queue"
    info = await engine.get_queue(ref)
    assert info.config.max_messages is None and info.config.retention_seconds == 60
    with pytest.raises(QueueNotFound):
        await engine.set_limits(
            QueueRef(NS, qname + "-x"), max_messages=None, max_bytes=None,
            max_message_bytes=None, retention_ms=1000, will_queue=True,
        )  # fmt: skip


async def test_stats_carry_added_delivered_removed_and_newest(engine: Engine, qname: str):
    ref = await queue(engine, qname)
    fresh = await engine.stats(ref)
    assert (fresh.last_added_ms, fresh.last_delivered_ms, fresh.last_removed_ms) == (None,) * 3
    assert fresh.newest_ms is None
    await engine.send(ref, [tagged(b"a", "k")])
    await asyncio.sleep(0.01)
    await engine.send(ref, [tagged(b"b", "k")])
    added = await engine.stats(ref)
    assert added.last_added_ms is not None and added.newest_ms is not None
    assert added.oldest_ms is not None and added.newest_ms > added.oldest_ms
    assert added.last_delivered_ms is None
    got = await engine.receive(ref, 1)
    delivered = await engine.stats(ref)
    assert delivered.last_delivered_ms is not None and delivered.last_removed_ms is None
    await engine.delete_in_queue(ref, got.messages[0].message_id)
    removed = await engine.stats(ref)
    assert removed.last_removed_ms is not None
