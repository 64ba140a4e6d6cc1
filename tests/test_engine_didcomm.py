"""The engine as DIDComm recipient queues use it: queue timestamps, filtered receives and the
entries they park, per-recipient-key counts, release, peek and limit updates.

A parked entry must behave exactly like a visible one everywhere, so most tests end by
draining the queue with a plain receive and checking every message came out once, in order.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

import pytest
from redis.asyncio import Redis

from mediator.engine import Engine, QueueConfig, QueueRef, ReceivedMessage, SendMessage, keys
from mediator.engine.wakeups import WakeHub
from mediator.errors import LimitExceeded, QueueNotFound
from mediator.storage.clients import Backend
from tests.eventually import redis_ms, until_redis_ms

pytestmark = pytest.mark.engine

NS = "didcomm"


def tagged(body: str, tag: str) -> SendMessage:
    return SendMessage(body=body.encode(), trace_id=tag)


async def mailbox(
    engine: Engine, name: str, *, ret_ms: int = 3_600_000, vt_ms: int = 30_000
) -> QueueRef:
    ref = QueueRef(NS, name)
    await engine.create_queue(ref, QueueConfig(retention_ms=ret_ms, visibility_timeout_ms=vt_ms))
    return ref


async def expire(engine: Engine, ret_ms: int) -> None:
    """Wait until what was sent before the call is past a retention of `ret_ms`."""
    await until_redis_ms(engine.redis, await redis_ms(engine.redis) + ret_ms)


async def send_each(engine: Engine, ref: QueueRef, tags: str, start: int = 0) -> list[str]:
    """One send per message (as forwards arrive), bodies `<tag><start + index>`; the ids."""
    ids = []
    for i, tag in enumerate(tags, start):
        ids += (await engine.send(ref, [tagged(f"{tag}{i}", tag)])).message_ids
    return ids


def bodies(messages: Sequence[ReceivedMessage]) -> list[str]:
    return [m.body.decode() for m in messages]


async def drain(engine: Engine, ref: QueueRef) -> list[ReceivedMessage]:
    """Everything a plain receive hands out now (the queue's visible messages, in order)."""
    return (await engine.receive(ref, 5000)).messages


# ---------------------------------------------------------------- timestamps


async def test_timestamps_move_only_when_they_should(engine: Engine, qname: str):
    ref = await mailbox(engine, qname)
    fresh = await engine.stats(ref)
    assert (fresh.last_added_ms, fresh.last_delivered_ms, fresh.last_removed_ms) == (None,) * 3
    assert fresh.newest_ms is None

    # Nothing handed out or removed: nothing recorded.
    assert (await engine.receive(ref, 5)).messages == []
    assert await engine.delete_in_queue(ref, "no-such-id") is False
    [mid] = (await engine.send(ref, [tagged("x", "k1")])).message_ids
    assert (await engine.receive_filtered(ref, 5, tag="k2")).messages == []
    added = await engine.stats(ref)
    assert fresh.now_ms <= (added.last_added_ms or 0) <= added.now_ms
    assert added.newest_ms == added.last_added_ms == added.oldest_ms
    assert (added.last_delivered_ms, added.last_removed_ms) == (None, None)

    # Read-only calls and a release change none of them.
    await engine.peek(ref, 5)
    await engine.tag_stats(ref, "k1")
    await engine.release(ref, [mid])
    assert (await engine.stats(ref)).last_delivered_ms is None

    first = await engine.receive_filtered(ref, 5, tag="k1", visibility_timeout_ms=0)
    assert (await engine.stats(ref)).last_delivered_ms == first.now_ms
    await asyncio.sleep(0.005)
    second = await engine.receive(ref, 5)
    assert [m.message_id for m in second.messages] == [mid]
    delivered = await engine.stats(ref)
    assert delivered.last_delivered_ms == second.now_ms > first.now_ms
    assert delivered.last_added_ms == added.last_added_ms and delivered.last_removed_ms is None

    assert await engine.delete_in_queue(ref, mid)
    removed = await engine.stats(ref)
    assert delivered.now_ms <= (removed.last_removed_ms or 0) <= removed.now_ms
    assert removed.last_added_ms == added.last_added_ms
    assert removed.last_delivered_ms == second.now_ms
    assert (removed.newest_ms, removed.oldest_ms) == (None, None)


async def test_a_retention_purge_is_not_a_removal(engine: Engine, qname: str):
    ref = await mailbox(engine, qname, ret_ms=50)
    await engine.send(ref, [tagged("x", "k"), tagged("y", "k")])
    await engine.receive_filtered(ref, 1, tag="nobody")  # parks both
    await expire(engine, 50)
    await engine.upkeep(ref.qualified)
    stats = await engine.stats(ref)
    assert (stats.stored, stats.bytes, stats.last_removed_ms) == (0, 0, None)
    assert stats.last_added_ms is not None and stats.newest_ms is None


async def test_newest_follows_the_newest_stored_message(engine: Engine, qname: str):
    ref = await mailbox(engine, qname)
    [old] = (await engine.send(ref, [tagged("old", "k")])).message_ids
    await asyncio.sleep(0.005)
    [new] = (await engine.send(ref, [tagged("new", "k")])).message_ids
    by_id = {m.message_id: m.published_ms for m in await engine.peek(ref, 5)}
    stats = await engine.stats(ref)
    assert (stats.oldest_ms, stats.newest_ms) == (by_id[old], by_id[new])
    assert stats.newest_ms == stats.last_added_ms
    await engine.delete_in_queue(ref, new)
    assert (await engine.stats(ref)).newest_ms == by_id[old]


async def test_a_dead_letter_hand_over_counts_as_added(engine: Engine, qname: str):
    ns = "t-dlq"
    src, dlq = QueueRef(ns, qname), QueueRef(ns, qname + "-dlq")
    await engine.create_queue(dlq, QueueConfig(retention_ms=60_000, visibility_timeout_ms=0))
    await engine.create_queue(
        src,
        QueueConfig(
            retention_ms=60_000,
            visibility_timeout_ms=0,
            max_receives=1,
            dead_letter_queue=dlq.name,
        ),
    )
    await engine.send(src, [SendMessage(b"x")])
    sent_at = (await engine.stats(src)).newest_ms
    assert (await engine.stats(dlq)).last_added_ms is None
    got = await engine.receive(src, 1)  # reaches max receives: handed over to the dlq
    assert len(got.messages) == 1
    landed = await engine.stats(dlq)
    assert landed.messages == 1
    assert got.now_ms <= (landed.last_added_ms or 0) <= landed.now_ms
    assert landed.newest_ms == sent_at  # the first enqueue time travels with the message


# ---------------------------------------------------------------- filtered receive


async def test_filtered_receive_by_tag_leaves_the_rest_for_plain_receive(
    engine: Engine, qname: str
):
    ref = await mailbox(engine, qname)
    # A batch (all in one millisecond) and single sends: both must keep their order.
    batch = [tagged(f"{'abc'[i % 3]}{i}", "abc"[i % 3]) for i in range(30)]
    ids = (await engine.send(ref, batch)).message_ids
    ids += await send_each(engine, ref, "cbacbacba", 30)
    sent = [
        m.body.decode()
        for m in batch + [tagged(f"{t}{i}", t) for i, t in enumerate("cbacbacba", 30)]
    ]

    got = await engine.receive_filtered(ref, 100, tag="b")
    assert bodies(got.messages) == [b for b in sent if b[0] == "b"]
    assert all(m.trace_id == "b" and m.receives == 1 for m in got.messages)
    stats = await engine.stats(ref)
    assert (stats.stored, stats.in_flight, stats.visible) == (39, 13, 26)
    assert (await engine.tag_stats(ref, "a")).visible == 13

    rest = await drain(engine, ref)
    assert bodies(rest) == [b for b in sent if b[0] != "b"]  # enqueue order
    assert all(m.receives == 1 for m in rest)  # parking is not a receive
    handed = [m.message_id for m in got.messages + rest]
    assert sorted(handed) == sorted(ids) and len(set(handed)) == len(ids)
    assert await drain(engine, ref) == []
    assert (await engine.receive_filtered(ref, 10, tag="a")).messages == []


async def test_a_match_behind_a_large_parked_backlog_is_found(engine: Engine, qname: str):
    ref = await mailbox(engine, qname)
    for start in range(0, 1500, 500):
        await engine.send(ref, [tagged(f"a{i}", "a") for i in range(start, start + 500)])
    assert (await engine.receive_filtered(ref, 10, tag="b")).messages == []  # parks 1,500
    await engine.send(ref, [tagged("b", "b")])
    got = await engine.receive_filtered(ref, 10, tag="b")
    assert bodies(got.messages) == ["b"]
    rest = await drain(engine, ref)
    assert bodies(rest) == [f"a{i}" for i in range(1500)]


async def test_more_than_one_chunk_of_matches_comes_back_whole(engine: Engine, qname: str):
    ref = await mailbox(engine, qname)
    batch = [tagged(f"{'ab'[i % 2]}{i}", "ab"[i % 2]) for i in range(600)]
    await engine.send(ref, batch)
    got = await engine.receive_filtered(ref, 250, tag="b")
    assert bodies(got.messages) == [f"b{i}" for i in range(1, 500, 2)]
    rest = await engine.receive_filtered(ref, 1000, tag="b")
    assert bodies(rest.messages) == [f"b{i}" for i in range(501, 600, 2)]
    assert bodies(await drain(engine, ref)) == [f"a{i}" for i in range(0, 600, 2)]


async def test_filtered_receive_honours_the_arrival_cut_off(engine: Engine, qname: str):
    ref = await mailbox(engine, qname)
    await send_each(engine, ref, "ab")
    before = await engine.stats(ref)
    await asyncio.sleep(0.005)
    cut = (await engine.stats(ref)).now_ms
    await asyncio.sleep(0.005)
    await send_each(engine, ref, "abab", 2)
    assert before.newest_ms is not None and before.newest_ms < cut

    only_new = await engine.receive_filtered(ref, 10, tag="a", min_enqueue_ms=cut)
    assert bodies(only_new.messages) == ["a2", "a4"]
    assert all(m.published_ms >= cut for m in only_new.messages)
    any_tag = await engine.receive_filtered(ref, 10, min_enqueue_ms=cut)
    assert bodies(any_tag.messages) == ["b3", "b5"]
    assert (await engine.receive_filtered(ref, 10, min_enqueue_ms=cut)).messages == []
    assert bodies(await drain(engine, ref)) == ["a0", "b1"]  # the ones before the cut-off


async def test_a_cut_off_still_finds_released_and_reoffered_messages(engine: Engine, qname: str):
    ref = await mailbox(engine, qname)
    cut = (await engine.stats(ref)).now_ms
    await send_each(engine, ref, "kkk")
    first = await engine.receive_filtered(ref, 1, min_enqueue_ms=cut, visibility_timeout_ms=1000)
    second = await engine.receive_filtered(ref, 1, min_enqueue_ms=cut, visibility_timeout_ms=60_000)
    assert bodies(first.messages + second.messages) == ["k0", "k1"]
    assert await engine.release(ref, [second.messages[0].message_id]) == 1
    await until_redis_ms(engine.redis, first.messages[0].visible_at_ms)  # k0's deadline passes
    again = await engine.receive_filtered(ref, 10, tag="k", min_enqueue_ms=cut)
    # Released k1 and parked k2 are at their enqueue places, re-offered k0 at its deadline.
    assert bodies(again.messages) == ["k1", "k2", "k0"]
    assert [m.receives for m in again.messages] == [2, 1, 2]


async def test_a_cut_off_lets_through_what_was_handed_out_before_it_and_is_due_again(
    engine: Engine, qname: str
):
    """Live mode's cut-off leaves the backlog to delivery-requests, but not a delivery that
    an older socket carried and nobody acknowledged: a pickup round could not see it while
    it was handed out."""
    ref = await mailbox(engine, qname)
    await send_each(engine, ref, "kk")
    [held] = (await engine.receive(ref, 1, visibility_timeout_ms=1000)).messages
    await asyncio.sleep(0.005)
    cut = (await engine.stats(ref)).now_ms
    early = await engine.receive_filtered(ref, 10, min_enqueue_ms=cut)
    assert early.messages == [] and early.next_due_ms == held.visible_at_ms
    await until_redis_ms(engine.redis, held.visible_at_ms)
    again = await engine.receive_filtered(ref, 10, min_enqueue_ms=cut)
    assert bodies(again.messages) == ["k0"] and again.messages[0].receives == 2
    assert bodies(await drain(engine, ref)) == ["k1"]  # never handed out: the backlog's


async def test_filtered_deliveries_are_hidden_until_their_deadline(engine: Engine, qname: str):
    ref = await mailbox(engine, qname)
    await send_each(engine, ref, "kx")
    first = await engine.receive_filtered(ref, 5, tag="k", visibility_timeout_ms=1000)
    [m] = first.messages
    assert m.visible_at_ms == first.now_ms + 1000
    hidden = await engine.receive_filtered(ref, 5, tag="k")
    assert hidden.messages == [] and hidden.next_due_ms == m.visible_at_ms
    assert bodies(await drain(engine, ref)) == ["x1"]  # the deadline holds for receive too
    await until_redis_ms(engine.redis, m.visible_at_ms)
    again = await engine.receive_filtered(ref, 5, tag="k")
    assert [(x.message_id, x.receives) for x in again.messages] == [(m.message_id, 2)]


async def test_filtered_receive_purges_expired_messages(engine: Engine, qname: str):
    ref = await mailbox(engine, qname, ret_ms=50)
    await send_each(engine, ref, "ab")
    await engine.receive_filtered(ref, 5, tag="b", visibility_timeout_ms=0)  # a parked
    await send_each(engine, ref, "ab")  # unread
    await expire(engine, 50)
    assert (await engine.receive_filtered(ref, 5, tag="b")).messages == []
    stats = await engine.stats(ref)
    assert (stats.stored, stats.bytes, stats.oldest_ms) == (0, 0, None)
    qk = keys.queue_keys(ref.qualified)
    assert await engine.redis.exists(qk.stream, qk.inflight, qk.receives, qk.ids) == 0


async def test_upkeep_purges_parked_messages(engine: Engine, qname: str, redis_client: Redis):
    ref = await mailbox(engine, qname, ret_ms=50)
    await send_each(engine, ref, "aab")
    await engine.receive_filtered(ref, 5, tag="b")
    await expire(engine, 50)
    await engine.upkeep(ref.qualified)
    stats = await engine.stats(ref)
    assert (stats.stored, stats.in_flight, stats.bytes) == (0, 0, 0)
    qk = keys.queue_keys(ref.qualified)
    assert await redis_client.exists(qk.stream, qk.inflight, qk.receives, qk.ids) == 0


async def test_parked_messages_can_be_deleted_by_id(engine: Engine, qname: str):
    ref = await mailbox(engine, qname)
    ids = await send_each(engine, ref, "aab")
    await engine.receive_filtered(ref, 5, tag="b")
    assert await engine.delete_in_queue(ref, ids[1])
    stats = await engine.stats(ref)
    assert (stats.stored, stats.visible, stats.bytes) == (2, 1, len(b"a0b2"))
    assert bodies(await drain(engine, ref)) == ["a0"]


async def test_a_send_wakes_a_waiting_filtered_receive(
    engine: Engine, qname: str, backend: Backend
):
    ref = await mailbox(engine, qname)
    await send_each(engine, ref, "a")
    hub = WakeHub(backend.subscriber, engine.wake_channel)
    await hub.start()
    try:
        with hub.waiting(ref.qualified) as woken:
            empty = await engine.receive_filtered(ref, 5, tag="b", wait_marker_ms=5000)
            assert empty.messages == []
            await engine.send(ref, [tagged("b1", "b")])
            await asyncio.wait_for(asyncio.shield(woken), 2)
    finally:
        await hub.stop()
    assert bodies((await engine.receive_filtered(ref, 5, tag="b")).messages) == ["b1"]


async def test_no_message_lost_or_duplicated_under_mixed_receives(engine: Engine, qname: str):
    """Random filtered and plain receives, releases and acknowledgements; every message is
    acknowledged exactly once, and what is left comes out of a plain receive in order."""
    rng = random.Random(4)
    ref = await mailbox(engine, qname)
    sent: list[str] = []
    acked: list[str] = []
    for _ in range(60):
        tags = "".join(rng.choice("abc") for _ in range(rng.randint(0, 8)))
        if tags:
            batch = [tagged(f"{t}{len(sent) + i}", t) for i, t in enumerate(tags)]
            sent += [m.body.decode() for m in batch]
            await engine.send(ref, batch)
        if rng.random() < 0.5:
            got = await engine.receive_filtered(ref, rng.randint(1, 6), tag=rng.choice("abc"))
        else:
            got = await engine.receive(ref, rng.randint(1, 6))
        keep = [m for m in got.messages if rng.random() < 0.3]
        for m in got.messages:
            if m not in keep:
                assert await engine.delete_in_queue(ref, m.message_id)
                acked.append(m.body.decode())
        assert await engine.release(ref, [m.message_id for m in keep]) == len(keep)
    assert len(acked) == len(set(acked))
    rest = bodies(await drain(engine, ref))
    assert rest == [b for b in sent if b not in set(acked)]


# ---------------------------------------------------------------- tag stats


async def test_tag_stats_count_one_recipient_key(engine: Engine, qname: str):
    ref = await mailbox(engine, qname)
    await engine.send(ref, [tagged("12345", "a"), tagged("1", "b")])
    await asyncio.sleep(0.005)
    await engine.send(ref, [tagged("123", "a"), tagged("12", "a")])
    await engine.receive_filtered(ref, 1, tag="a")  # one handed out, "b" parked
    a = await engine.tag_stats(ref, "a")
    times = sorted({m.published_ms for m in await engine.peek(ref, 10)})
    assert (a.messages, a.visible, a.bytes) == (3, 2, 10)
    assert (a.oldest_ms, a.newest_ms, a.complete) == (times[0], times[-1], True)
    b = await engine.tag_stats(ref, "b")
    assert (b.messages, b.visible, b.bytes) == (1, 1, 1)
    nobody = await engine.tag_stats(ref, "nobody")
    assert (nobody.messages, nobody.oldest_ms, nobody.newest_ms) == (0, None, None)
    partial = await engine.tag_stats(ref, "a", scan=2)
    assert (partial.messages, partial.complete) == (1, False)
    with pytest.raises(QueueNotFound):
        await engine.tag_stats(QueueRef(NS, qname + "-missing"), "a")


async def test_tag_stats_count_delayed_messages(engine: Engine, qname: str):
    ref = QueueRef("t-delay", qname)
    await engine.create_queue(
        ref, QueueConfig(retention_ms=60_000, visibility_timeout_ms=30_000, delay_ms=60_000)
    )
    await engine.send(ref, [tagged("later", "k")])
    k = await engine.tag_stats(ref, "k")
    assert (k.messages, k.visible, k.bytes, k.complete) == (1, 0, 5, True)


# ---------------------------------------------------------------- release


async def test_release_makes_deliveries_receivable_at_once(engine: Engine, qname: str):
    ref = await mailbox(engine, qname)
    ids = await send_each(engine, ref, "kkkk")
    handed = await engine.receive(ref, 3, visibility_timeout_ms=60_000)
    assert bodies(handed.messages) == ["k0", "k1", "k2"]
    released = await engine.release(ref, [ids[2], ids[0], "no-such-id", ids[3]])
    assert released == 2  # k3 was visible already
    assert (await engine.stats(ref)).in_flight == 1
    again = await engine.receive(ref, 10, visibility_timeout_ms=60_000)
    assert bodies(again.messages) == ["k0", "k2", "k3"]
    assert [m.receives for m in again.messages] == [2, 2, 1]
    await engine.delete_in_queue(ref, ids[0])
    assert await engine.release(ref, [ids[0]]) == 0  # acknowledged meanwhile
    assert await engine.release(ref, []) == 0


async def test_release_wakes_a_waiting_receive(engine: Engine, qname: str, backend: Backend):
    ref = await mailbox(engine, qname)
    await send_each(engine, ref, "kk")
    handed = await engine.receive(ref, 2, visibility_timeout_ms=60_000)
    hub = WakeHub(backend.subscriber, engine.wake_channel)
    await hub.start()
    try:
        with hub.waiting(ref.qualified) as woken:
            assert (await engine.receive(ref, 1, wait_marker_ms=5000)).messages == []
            assert await engine.release(ref, [m.message_id for m in handed.messages]) == 2
            await asyncio.wait_for(asyncio.shield(woken), 2)
    finally:
        await hub.stop()
    assert bodies((await engine.receive(ref, 5)).messages) == ["k0", "k1"]


# ---------------------------------------------------------------- peek


async def test_peek_changes_nothing(engine: Engine, qname: str, redis_client: Redis):
    ref = await mailbox(engine, qname)
    ids = await send_each(engine, ref, "abc")
    handed = await engine.receive(ref, 1, visibility_timeout_ms=60_000)
    await engine.receive_filtered(ref, 1, tag="c")  # parks b
    before = await engine.stats(ref)
    qk = keys.queue_keys(ref.qualified)
    raw_before = await redis_client.zrange(qk.inflight, 0, -1, withscores=True)

    seen = await engine.peek(ref, 10)
    assert [m.message_id for m in seen] == ids
    assert bodies(seen) == ["a0", "b1", "c2"]
    assert [m.receives for m in seen] == [1, 0, 1]
    assert seen[0].visible_at_ms == handed.messages[0].visible_at_ms > before.now_ms
    assert seen[1].visible_at_ms <= before.now_ms  # parked: visible
    assert [m.message_id for m in await engine.peek(ref, 2)] == ids[:2]

    after = await engine.stats(ref)
    assert (after.stored, after.in_flight, after.bytes) == (3, 2, before.bytes)
    assert after.last_delivered_ms == before.last_delivered_ms
    assert await redis_client.zrange(qk.inflight, 0, -1, withscores=True) == raw_before
    again = await engine.receive(ref, 10)
    assert [(m.body, m.receives) for m in again.messages] == [(b"b1", 1)]
    with pytest.raises(QueueNotFound):
        await engine.peek(QueueRef(NS, qname + "-missing"), 1)


async def test_peek_leaves_out_expired_messages(engine: Engine, qname: str):
    ref = await mailbox(engine, qname, ret_ms=250)
    await send_each(engine, ref, "k")
    await expire(engine, 250)
    await send_each(engine, ref, "j")
    assert bodies(await engine.peek(ref, 5)) == ["j0"]
    # (Whether the expired one is still stored depends on the session's other nodes'
    # workers, which purge it when its upkeep is due: not asserted here.)


# ---------------------------------------------------------------- limits


async def test_set_limits_are_enforced_by_send(engine: Engine, qname: str):
    ref = await mailbox(engine, qname)

    async def limits(n: int | None, b: int | None, mb: int | None, *, wq: bool = True) -> None:
        await engine.set_limits(
            ref, max_messages=n, max_bytes=b, max_message_bytes=mb, retention_ms=60_000,
            will_queue=wq,
        )  # fmt: skip

    async def refused(body: str) -> str:
        with pytest.raises(LimitExceeded) as e:
            await engine.send(ref, [tagged(body, "k")])
        return e.value.kind

    await limits(2, 6, 4)
    assert await refused("12345") == "message_size"
    await engine.send(ref, [tagged("1234", "k")])
    assert await refused("123") == "size"
    await engine.send(ref, [tagged("12", "k")])
    await limits(2, None, None)
    assert await refused("1") == "count"
    await limits(None, None, None, wq=False)
    assert await refused("1") == "will_queue"
    await limits(None, None, None)
    await engine.send(ref, [tagged("x" * 100, "k")])
    info = await engine.get_queue(ref)
    assert (info.config.max_messages, info.config.max_bytes, info.config.retention_seconds) == (
        None,
        None,
        60,
    )
    assert info.config.visibility_timeout_seconds == 30  # kept when not given
    with pytest.raises(QueueNotFound):
        await engine.set_limits(
            QueueRef(NS, qname + "-x"), max_messages=None, max_bytes=None,
            max_message_bytes=None, retention_ms=1000, will_queue=True,
        )  # fmt: skip


async def test_set_limits_visibility_applies_to_the_next_delivery(engine: Engine, qname: str):
    ref = await mailbox(engine, qname)
    await send_each(engine, ref, "k")
    await engine.set_limits(
        ref, max_messages=None, max_bytes=None, max_message_bytes=None, retention_ms=60_000,
        will_queue=True, visibility_timeout_ms=2000,
    )  # fmt: skip
    got = await engine.receive_filtered(ref, 1, tag="k")
    assert got.messages[0].visible_at_ms == got.now_ms + 2000


async def test_a_shorter_retention_is_applied_by_the_next_upkeep(
    engine: Engine, qname: str, redis_client: Redis
):
    ref = await mailbox(engine, qname, ret_ms=3_600_000)
    await send_each(engine, ref, "ab")
    await engine.receive_filtered(ref, 1, tag="b")  # one parked, one handed out
    due_key = keys.queue_keys(ref.qualified).due
    sent_at = (await engine.stats(ref)).now_ms
    assert (await redis_client.zscore(due_key, ref.qualified) or 0) > sent_at + 3_000_000
    await expire(engine, 50)
    await engine.set_limits(
        ref, max_messages=None, max_bytes=None, max_message_bytes=None, retention_ms=50,
        will_queue=True,
    )  # fmt: skip
    now = (await engine.stats(ref)).now_ms
    assert (await redis_client.zscore(due_key, ref.qualified) or 0) <= now  # due at once
    await engine.upkeep(ref.qualified)  # what the worker holding the shard runs
    stats = await engine.stats(ref)
    assert (stats.stored, stats.bytes, stats.last_removed_ms) == (0, 0, None)


async def test_threads_no_longer_used_are_forgotten_while_the_connection_stays_active(
    engine: Engine, redis_client: Redis
) -> None:
    """Every request opens a thread: a wallet polling for hours must not pile up thread
    state. Orders of a thread still in use carry over a generation's turn."""
    threads = keys.connection_keys(f"threads-{random.random()}").threads

    # "kept" is used once a generation, each time its turn is due: it stays in reach as long
    # as each step below (the polls, sent at once; the wait; one call) takes under a time to
    # live, which a loaded machine's round trips keep far under 1 s.
    ttl_ms = 1000

    async def order(thid: str, theirs: int = 0) -> list[int]:
        r = await engine.scripts.call("thread_order", [threads], [thid, theirs, ttl_ms])
        return [int(v) for v in r]

    assert await order("kept", 3) == [0, 3]
    for generation in range(3):
        born = int(await redis_client.hget(threads, "@m"))
        await asyncio.gather(*(order(f"poll-{generation}-{i}") for i in range(20)))
        await until_redis_ms(redis_client, born + ttl_ms)  # the generation's turn is due
        # Used again after the turn (this call makes it): carried over.
        assert await order("kept") == [generation + 1, 3]  # ours counts on, theirs is kept
    fields = await redis_client.hlen(threads) + await redis_client.hlen(threads + ":o")
    assert fields <= 2 * (2 * 21 + 1)  # two generations at most, not all 60 polls


async def test_a_thread_hash_of_an_earlier_version_turns_on_its_birth_in_seconds(
    engine: Engine, redis_client: Redis
) -> None:
    """Earlier versions kept a generation's birth in whole seconds (`@`)."""
    now_s = await redis_ms(redis_client) // 1000
    for age_s, turned in ((0, False), (700, True)):
        threads = keys.connection_keys(f"threads-{random.random()}").threads
        await redis_client.hset(threads, mapping={"@": now_s - age_s, "r:t": 4, "s:t": 2})
        # A 600 s time to live, the nodes' default.
        r = await engine.scripts.call("thread_order", [threads], ["t", 5, 600_000])
        assert [int(v) for v in r] == [2, 5]  # ours and theirs carry over a turn
        assert await redis_client.exists(threads + ":o") == turned


async def test_a_queues_own_timer_in_seconds_beats_a_default_in_ms(
    redis_client: Redis, qname: str
) -> None:
    """A namespace whose queues keep the defaults out of their hashes: a timer the hash
    holds, in either form, is the queue's; one it lacks is the default's, in either form."""
    defaults = QueueConfig(retention_ms=1500, visibility_timeout_ms=250)
    engine = Engine(redis_client, defaults={NS: defaults})
    own, plain = QueueRef(NS, qname), QueueRef(NS, qname + "-plain")
    await engine.create_queue(plain, defaults)
    await engine.create_queue(own, defaults)
    # As an earlier version wrote a recipient's own retention and visibility: in seconds.
    await redis_client.hset(keys.queue_keys(own.qualified).cfg, mapping={"ret": 2, "vt": 1})
    assert (await engine.get_queue(own)).config.retention_ms == 2000
    assert (await engine.get_queue(plain)).config == defaults
    for ref, hidden_for in ((own, 1000), (plain, 250)):
        await engine.send(ref, [tagged("x", "k")])
        got = await engine.receive(ref, 1)
        assert got.messages[0].visible_at_ms - got.now_ms == hidden_for
    stored = await redis_client.hgetall(keys.queue_keys(plain.qualified).cfg)
    assert not {b"ret", b"vt", b"dly", b"ret_ms", b"vt_ms", b"dly_ms"} & set(stored)
