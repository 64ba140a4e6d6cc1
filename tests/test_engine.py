"""The queue engine against a real Redis-compatible server (also run against Debian's Redis 7)."""

from __future__ import annotations

import asyncio
from unittest.mock import ANY

import pytest
from redis.asyncio import Redis

from mediator.engine import Engine, QueueConfig, QueueRef, SendMessage, keys
from mediator.errors import (
    InvalidQueueConfig,
    LimitExceeded,
    MessageNotFound,
    QueueExists,
    QueueInUse,
    QueueNotFound,
)
from tests.eventually import redis_ms, until_redis_ms

pytestmark = pytest.mark.engine

NS = "mqs"


def cfg(**kw: int | str | None) -> QueueConfig:
    base: dict = {"retention_ms": 3_600_000, "visibility_timeout_ms": 30_000}
    base.update(kw)
    return QueueConfig(**base)


def msg(body: bytes, ctype: str = "application/octet-stream") -> SendMessage:
    return SendMessage(body=body, content_type=ctype)


async def test_send_receive_delete_round_trip_keeps_bytes_and_headers(engine: Engine, qname: str):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg())
    body = bytes(range(256)) * 3 + b"\r\n--x\r\n"
    sent = await engine.send(ref, [SendMessage(body, "image/png", "gzip", "trace-1")])
    got = await engine.receive(ref, 10)
    assert len(got.messages) == 1
    m = got.messages[0]
    assert (m.message_id, m.body, m.content_type, m.content_encoding, m.trace_id) == (
        sent.message_ids[0],
        body,
        "image/png",
        "gzip",
        "trace-1",
    )
    assert m.receives == 1
    assert m.visible_at_ms - got.now_ms == 30_000
    await engine.delete_message(NS, m.message_id)
    with pytest.raises(MessageNotFound):
        await engine.delete_message(NS, m.message_id)
    assert (await engine.receive(ref, 10)).messages == []


async def test_concurrent_receivers_never_share_a_message(engine: Engine, qname: str):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg())
    ids = []
    for i in range(0, 300, 50):
        ids += (await engine.send(ref, [msg(b"%d" % j) for j in range(i, i + 50)])).message_ids

    async def drain() -> list[str]:
        seen = []
        while True:
            r = await engine.receive(ref, 7)
            if not r.messages:
                return seen
            seen += [m.message_id for m in r.messages]

    results = await asyncio.gather(*(drain() for _ in range(8)))
    union = [mid for r in results for mid in r]
    assert len(union) == len(set(union)) == 300
    assert set(union) == set(ids)


async def test_message_comes_back_after_visibility_timeout_with_more_receives(
    engine: Engine, qname: str
):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg(visibility_timeout_ms=1000))
    (mid,) = (await engine.send(ref, [msg(b"a")])).message_ids
    first = await engine.receive(ref, 1)
    assert first.messages[0].receives == 1
    empty = await engine.receive(ref, 1)
    assert empty.messages == []
    assert empty.next_due_ms == first.messages[0].visible_at_ms
    await until_redis_ms(engine.redis, first.messages[0].visible_at_ms)
    again = await engine.receive(ref, 1)
    assert [(m.message_id, m.receives) for m in again.messages] == [(mid, 2)]


async def test_lowering_visibility_timeout_keeps_hidden_messages_hidden(engine: Engine, qname: str):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg(visibility_timeout_ms=30_000))
    await engine.send(ref, [msg(b"a")])
    assert len((await engine.receive(ref, 1)).messages) == 1
    await engine.update_queue(ref, cfg(visibility_timeout_ms=0))
    await asyncio.sleep(0.05)
    assert (await engine.receive(ref, 1)).messages == []
    # New receives use the new timeout: visible again at once.
    await engine.send(ref, [msg(b"b")])
    assert [m.body for m in (await engine.receive(ref, 1)).messages] == [b"b"]
    assert [m.body for m in (await engine.receive(ref, 1)).messages] == [b"b"]


async def test_delayed_message_is_invisible_until_due(engine: Engine, qname: str):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg(delay_ms=1000))
    sent = await engine.send(ref, [msg(b"later")])
    assert sent.delayed == 1
    early = await engine.receive(ref, 1)
    assert early.messages == [] and early.next_due_ms is not None
    assert 500 <= early.next_due_ms - early.now_ms <= 1000
    stats = await engine.stats(ref)
    assert (stats.delayed, stats.visible) == (1, 0)
    await until_redis_ms(engine.redis, early.next_due_ms)
    assert [m.body for m in (await engine.receive(ref, 1)).messages] == [b"later"]


async def test_delayed_message_can_be_deleted_before_due(engine: Engine, qname: str):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg(delay_ms=50))
    (mid,) = (await engine.send(ref, [msg(b"x")])).message_ids
    due_by = await redis_ms(engine.redis) + 50
    await engine.delete_message(NS, mid)
    await until_redis_ms(engine.redis, due_by)
    assert (await engine.receive(ref, 1)).messages == []
    assert (await engine.stats(ref)).bytes == 0


async def test_max_receives_moves_to_dead_letter_queue_on_last_receive(engine: Engine, qname: str):
    src, dlq = QueueRef(NS, qname), QueueRef(NS, qname + "-dlq")
    await engine.create_queue(dlq, cfg(visibility_timeout_ms=0))
    # The last receive's timeout is long enough for a loaded machine to look before it ends.
    await engine.create_queue(
        src, cfg(visibility_timeout_ms=2000, max_receives=2, dead_letter_queue=dlq.name)
    )
    (mid,) = (await engine.send(src, [msg(b"poison")])).message_ids
    (first,) = (await engine.receive(src, 1, visibility_timeout_ms=100)).messages
    assert first.receives == 1
    await until_redis_ms(engine.redis, first.visible_at_ms)
    last = (await engine.receive(src, 1)).messages
    assert [(m.message_id, m.receives) for m in last] == [(mid, 2)]
    # Not in the dead letter queue until its last visibility timeout ends.
    assert (await engine.receive(dlq, 1)).messages == []
    await until_redis_ms(engine.redis, last[0].visible_at_ms)
    assert (await engine.receive(src, 10)).messages == []
    moved = (await engine.receive(dlq, 1)).messages
    assert [(m.message_id, m.body, m.receives) for m in moved] == [(mid, b"poison", 1)]
    assert moved[0].published_ms == last[0].published_ms
    await engine.delete_message(NS, mid)  # the source's id still deletes it
    assert (await engine.receive(dlq, 1)).messages == []
    assert (await engine.stats(dlq)).messages == 0


async def test_dead_letter_handover_left_unfinished_is_completed_by_upkeep(
    engine: Engine, redis_client: Redis, qname: str
):
    src, dlq = QueueRef(NS, qname), QueueRef(NS, qname + "-dlq")
    await engine.create_queue(dlq, cfg(visibility_timeout_ms=0))
    await engine.create_queue(
        src, cfg(visibility_timeout_ms=0, max_receives=1, dead_letter_queue=dlq.name)
    )
    (mid,) = (await engine.send(src, [msg(b"p")])).message_ids
    # The receive script alone, as if the node died before handing the message over.
    qk = keys.queue_keys(src.qualified)
    r = await engine.scripts.call("receive", qk.all, [src.qualified, "", 1, "", 0])
    assert r[3] == 1
    assert await redis_client.hlen(qk.outbox) == 1
    await engine.upkeep(src.qualified, grace_ms=0)
    assert await redis_client.hlen(qk.outbox) == 0
    assert [m.message_id for m in (await engine.receive(dlq, 1)).messages] == [mid]


async def test_retention_counts_from_first_enqueue_in_dead_letter_queue(engine: Engine, qname: str):
    # Timers of seconds: the test looks before the deadline too (docs/testing.md).
    src, dlq = QueueRef(NS, qname), QueueRef(NS, qname + "-dlq")
    await engine.create_queue(dlq, cfg(retention_ms=3000, visibility_timeout_ms=0))
    await engine.create_queue(
        src, cfg(visibility_timeout_ms=0, max_receives=1, dead_letter_queue=dlq.name)
    )
    await engine.send(src, [msg(b"old")])
    await until_redis_ms(engine.redis, await redis_ms(engine.redis) + 1000)
    (moved,) = (await engine.receive(src, 1)).messages  # moved to the DLQ now
    assert len((await engine.receive(dlq, 1)).messages) == 1  # 1 s old: still kept
    # The retention ends 3 s after the first enqueue, some 2 s after the move.
    await until_redis_ms(engine.redis, moved.published_ms + 3000)
    assert (await engine.receive(dlq, 1)).messages == []
    assert (await engine.stats(dlq)).messages == 0


async def test_upkeep_purges_expired_messages_without_a_receive(engine: Engine, qname: str):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg(retention_ms=500))
    await engine.send(ref, [msg(b"x" * 100) for _ in range(5)])
    assert (await engine.stats(ref)).messages == 5
    await until_redis_ms(engine.redis, await redis_ms(engine.redis) + 500)
    await engine.upkeep(ref.qualified)
    stats = await engine.stats(ref)
    assert (stats.messages, stats.bytes, stats.sched_ms) == (0, 0, None)


async def test_upkeep_promotes_due_delayed_messages(
    engine: Engine, redis_client: Redis, qname: str
):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg(delay_ms=50))
    await engine.send(ref, [msg(b"d")])
    due_key = keys.queue_keys(ref.qualified).due
    score = await redis_client.zscore(due_key, ref.qualified)
    assert score is not None
    await until_redis_ms(engine.redis, int(score))
    await engine.upkeep(ref.qualified)
    stats = await engine.stats(ref)
    assert (stats.delayed, stats.visible) == (0, 1)
    # Next upkeep: when the message's retention ends.
    assert await redis_client.zscore(due_key, ref.qualified) == pytest.approx(
        score - 50 + 3_600_000, abs=50
    )


async def test_queue_lifecycle_errors(engine: Engine, qname: str):
    ref = QueueRef(NS, qname)
    with pytest.raises(QueueNotFound):
        await engine.get_queue(ref)
    with pytest.raises(QueueNotFound):
        await engine.send(ref, [msg(b"x")])
    await engine.create_queue(ref, cfg())
    with pytest.raises(QueueExists):
        await engine.create_queue(ref, cfg())
    with pytest.raises(InvalidQueueConfig):
        await engine.update_queue(ref, cfg(max_receives=1, dead_letter_queue=qname))
    with pytest.raises(InvalidQueueConfig):
        await engine.update_queue(ref, cfg(max_receives=1, dead_letter_queue="nope-" + qname))


async def test_delete_queue_with_and_without_cascade(engine: Engine, qname: str):
    src, dlq = QueueRef(NS, qname), QueueRef(NS, qname + "-dlq")
    await engine.create_queue(dlq, cfg())
    await engine.create_queue(src, cfg(max_receives=3, dead_letter_queue=dlq.name))
    with pytest.raises(QueueInUse):
        await engine.delete_queue(dlq, cascade=False)
    assert await engine.queue_exists(dlq)
    await engine.delete_queue(dlq, cascade=True)
    assert not await engine.queue_exists(dlq)
    info = await engine.get_queue(src)
    assert (info.config.dead_letter_queue, info.config.max_receives) == (None, None)


async def test_deleting_a_queue_deletes_its_messages(
    engine: Engine, redis_client: Redis, qname: str
):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg(delay_ms=0))
    await engine.send(ref, [msg(b"a"), msg(b"b")])
    await engine.receive(ref, 1)
    await engine.delete_queue(ref, cascade=True)
    qk = keys.queue_keys(ref.qualified)
    assert await redis_client.exists(*qk.own) == 0
    due_key = keys.queue_keys(ref.qualified).due
    assert await redis_client.zscore(due_key, ref.qualified) is None
    assert not await redis_client.sismember(qk.registry, ref.name)
    await engine.create_queue(ref, cfg())
    assert (await engine.receive(ref, 10)).messages == []


async def test_limits_refuse_whole_batch_and_lazy_creation(engine: Engine, qname: str):
    ref = QueueRef("recipients", qname)
    limits = cfg(max_messages=3, max_bytes=10, max_message_bytes=6)
    await engine.send(ref, [msg(b"1234")], create_with=limits)
    assert (await engine.get_queue(ref)).config.max_messages == 3
    with pytest.raises(LimitExceeded, match="message 2"):
        await engine.send(ref, [msg(b"1"), msg(b"1234567")])
    with pytest.raises(LimitExceeded, match="size limit"):
        await engine.send(ref, [msg(b"123"), msg(b"1234")])
    await engine.send(ref, [msg(b"1"), msg(b"2")])
    with pytest.raises(LimitExceeded, match="count limit"):
        await engine.send(ref, [msg(b"3")])
    stats = await engine.stats(ref)
    assert (stats.messages, stats.bytes) == (3, 6)
    refusing = QueueRef("recipients", qname + "-off")
    await engine.create_queue(refusing, cfg(will_queue=False))
    with pytest.raises(LimitExceeded, match="does not accept"):
        await engine.send(refusing, [msg(b"x")])


async def test_emptied_queue_keeps_no_stream(engine: Engine, redis_client: Redis, qname: str):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg())
    await engine.send(ref, [msg(b"a")])
    qk = keys.queue_keys(ref.qualified)
    assert await redis_client.exists(qk.stream) == 1
    (m,) = (await engine.receive(ref, 1)).messages
    await engine.delete_message(NS, m.message_id)
    assert await redis_client.exists(qk.stream, qk.inflight, qk.receives, qk.ids) == 0
    await engine.send(ref, [msg(b"b")])
    assert [x.body for x in (await engine.receive(ref, 1)).messages] == [b"b"]


async def test_ids_of_another_namespace_or_garbage_are_not_found(engine: Engine, qname: str):
    ref = QueueRef("recipients", qname)
    await engine.send(ref, [msg(b"secret")], create_with=cfg())
    (m,) = (await engine.receive(ref, 1)).messages
    for bad in (m.message_id, "garbage", "a" * 22 + ".!!", "x" * 600):
        with pytest.raises(MessageNotFound):
            await engine.delete_message(NS, bad)
    assert await engine.delete_in_queue(ref, m.message_id)


async def test_shorter_retention_applies_to_stored_messages_at_next_upkeep(
    engine: Engine, redis_client: Redis, qname: str
):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg(retention_ms=3_600_000))
    await engine.send(ref, [msg(b"a"), msg(b"b")])
    await until_redis_ms(engine.redis, await redis_ms(engine.redis) + 50)
    await engine.update_queue(ref, cfg(retention_ms=50))
    due_key = keys.queue_keys(ref.qualified).due
    now = await redis_ms(redis_client)
    score = await redis_client.zscore(due_key, ref.qualified)
    # Due at once. The session's upkeep worker (node_a's twin runs in this process) may
    # already have taken it: its upkeep (one script) purged and unscheduled together.
    if score is not None:
        assert score <= now
        await engine.upkeep(ref.qualified)
    assert (await engine.stats(ref)).messages == 0


async def test_wake_ups_go_only_to_nodes_waiting_on_the_queue(
    engine: Engine, redis_client: Redis, qname: str
):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg())
    other = Engine(redis_client, wake_channel=engine.wake_channel + "-other")
    pubsub = redis_client.pubsub()
    await pubsub.subscribe(engine.wake_channel, other.wake_channel)
    for _ in range(2):
        await pubsub.get_message(timeout=1)  # the subscribe confirmations

    async def wake_ups() -> list[tuple[bytes, list[bytes]]]:
        seen = []
        while (m := await pubsub.get_message(timeout=0.3)) is not None:
            if m["type"] == "message":
                seen.append((m["channel"], m["data"].split()))
        return sorted(seen)

    await engine.send(ref, [msg(b"nobody waits")])
    await engine.receive(ref, 1)
    assert await wake_ups() == []
    assert (await engine.receive(ref, 1, wait_marker_ms=2000)).messages == []
    await engine.send(ref, [msg(b"a"), msg(b"b")])
    # Only the waiting node hears it: wake two of its waiters now.
    mine = engine.wake_channel.encode()
    assert await wake_ups() == [(mine, [b"wake", ref.qualified.encode(), b"2", b"-1", ANY])]
    await engine.receive(ref, 2)
    # Handing them out tells the waiting node when they may become visible again.
    [(_, due)] = await wake_ups()
    assert due[2] == b"0" and int(due[3]) > int(due[4])
    assert (await other.receive(ref, 1, wait_marker_ms=5000)).messages == []
    await engine.send(ref, [msg(b"c")])  # both nodes wait now (the first for 2 s)
    both = sorted([mine, other.wake_channel.encode()])
    assert [channel for channel, _ in await wake_ups()] == both
    await other.receive(ref, 1)
    lapses = int(
        await redis_client.hget(keys.queue_keys(ref.qualified).waiters, engine.wake_channel)
    )
    await until_redis_ms(redis_client, lapses)  # the first node's wait has lapsed
    await wake_ups()  # the due time of what the second node was handed
    await engine.send(ref, [msg(b"d")])
    assert [channel for channel, _ in await wake_ups()] == [other.wake_channel.encode()]
    await pubsub.aclose()


async def test_scripts_are_reloaded_when_the_server_has_lost_them(
    engine: Engine, redis_client: Redis, qname: str
):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg())
    await redis_client.script_flush()
    sent = await engine.send(ref, [msg(b"after flush")])
    assert [m.message_id for m in (await engine.receive(ref, 1)).messages] == sent.message_ids


async def test_a_digest_already_queued_is_not_stored_again_until_the_copy_is_gone(
    engine: Engine, redis_client: Redis, qname: str
):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg(delay_ms=0))
    first = await engine.send(ref, [SendMessage(b"same", digest=b"d1")])
    # One batch: the repeated digest and a second message with the first one's digest.
    batch = await engine.send(
        ref, [SendMessage(b"same", digest=b"d1"), SendMessage(b"other", digest=b"d2")]
    )
    assert batch.duplicates == (True, False)
    assert batch.message_ids[0] == first.message_ids[0]
    assert (batch.visible, batch.delayed) == (1, 0)
    assert (await engine.stats(ref)).messages == 2
    # Without a digest, the same bytes are always a message of their own.
    plain = await engine.send(ref, [msg(b"same"), msg(b"same")])
    assert plain.duplicates == (False, False)
    got = await engine.receive(ref, 10)
    for m in got.messages:
        await engine.delete_message(NS, m.message_id)
    qk = keys.queue_keys(ref.qualified)
    assert await redis_client.exists(qk.digests) == 0  # gone with the queue's last message
    again = await engine.send(ref, [SendMessage(b"same", digest=b"d1")])
    assert again.duplicates == (False,) and again.message_ids != first.message_ids


async def test_digests_of_messages_gone_are_pruned_as_the_queue_turns_over(
    engine: Engine, redis_client: Redis, qname: str
):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg(delay_ms=0))
    await engine.send(ref, [SendMessage(b"kept", digest=b"kept")])
    qk = keys.queue_keys(ref.qualified)
    for i in range(300):
        await engine.send(ref, [SendMessage(b"x", digest=f"d{i}".encode())])
        got = await engine.receive(ref, 10)
        for m in got.messages:
            if m.body != b"kept":
                await engine.delete_message(NS, m.message_id)
    # One message stays queued the whole time: the digest hash never emptied, but it holds
    # no more than a pruning threshold's worth of the gone ones.
    assert await redis_client.hlen(qk.digests) <= 65
    assert (await engine.send(ref, [SendMessage(b"kept", digest=b"kept")])).duplicates == (True,)


async def test_a_config_stored_in_whole_seconds_by_an_earlier_version_is_read_in_ms(
    engine: Engine, redis_client: Redis, qname: str
):
    # The hash fields an earlier version (timers in whole seconds) wrote, as it wrote them.
    ref, later = QueueRef(NS, qname), QueueRef(NS, qname + "-later")
    for queue, delay in ((ref, "0"), (later, "1")):
        cfg_key = keys.queue_keys(queue.qualified).cfg
        fields = {"ret": "2", "vt": "1", "dly": delay, "wq": "1", "created": "1"}
        await redis_client.hset(cfg_key, mapping=fields)
    info = await engine.get_queue(ref)
    assert (info.config.retention_ms, info.config.visibility_timeout_ms) == (2000, 1000)
    assert (await engine.get_queue(later)).config.delay_ms == 1000
    # The scripts read them so too: a visibility deadline 1 s ahead, the upkeep due when
    # the retention of 2 s ends, a delay of 1 s.
    await engine.send(ref, [msg(b"a")])
    got = await engine.receive(ref, 1)
    assert got.messages[0].visible_at_ms - got.now_ms == 1000
    due = await redis_client.zscore(keys.queue_keys(ref.qualified).due, ref.qualified)
    assert due == got.messages[0].published_ms + 2000
    await engine.send(later, [msg(b"b")])
    early = await engine.receive(later, 1)
    assert early.messages == [] and 0 < early.next_due_ms - early.now_ms <= 1000


async def test_whole_seconds_keep_the_earlier_format_and_ms_fields_only_hold_a_part_of_one(
    engine: Engine, redis_client: Redis, qname: str
):
    ref = QueueRef(NS, qname)
    cfg_key = keys.queue_keys(ref.qualified).cfg

    async def timers() -> dict[str, str]:
        values = await redis_client.hmget(
            cfg_key, ["ret", "vt", "dly", "ret_ms", "vt_ms", "dly_ms"]
        )
        names = ("ret", "vt", "dly", "ret_ms", "vt_ms", "dly_ms")
        return {k: v.decode() for k, v in zip(names, values, strict=True) if v is not None}

    # What a node of an earlier version reads: whole seconds in the fields it knows.
    await engine.create_queue(ref, cfg(retention_ms=3_600_000, visibility_timeout_ms=30_000))
    assert await timers() == {"ret": "3600", "vt": "30", "dly": "0"}
    await engine.update_queue(ref, cfg(retention_ms=1500, visibility_timeout_ms=250, delay_ms=0))
    assert await timers() == {"ret_ms": "1500", "vt_ms": "250", "dly": "0"}
    info = await engine.get_queue(ref)
    assert (info.config.retention_ms, info.config.visibility_timeout_ms) == (1500, 250)
    assert (info.config.retention_seconds, info.config.visibility_timeout_seconds) == (2, 1)
    await engine.send(ref, [msg(b"a")])
    got = await engine.receive(ref, 1)
    assert got.messages[0].visible_at_ms - got.now_ms == 250
    # Back to whole seconds: the ms fields go, the hash is in the earlier format again.
    await engine.update_queue(ref, cfg(retention_ms=60_000, visibility_timeout_ms=2000))
    assert await timers() == {"ret": "60", "vt": "2", "dly": "0"}


@pytest.mark.parametrize("flushed", [False, True], ids=["loaded", "scripts-flushed"])
async def test_a_counted_receive_hands_out_once_and_counts_what_is_left(
    engine: Engine, qname: str, flushed: bool
):
    """A pickup's receive with the queue's counts and the answer's thread orders in one
    round trip; on a server that lost its scripts too (each call runs once)."""
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg())
    await engine.send(ref, [msg(f"m{i}".encode()) for i in range(5)])
    if flushed:
        await engine.redis.script_flush()
    thread = (keys.queue_keys(ref.qualified).cfg + ":t", ["thid-1", 7, 60_000])  # its slot
    got, stats, orders = await engine.receive_counted(
        ref, 2, visibility_timeout_ms=30_000, thread=thread
    )
    assert [m.body for m in got.messages] == [b"m0", b"m1"]
    assert (stats.visible, stats.in_flight) == (3, 2)
    assert orders is not None and (orders.ours, orders.highest) == (0, 7)
    again, stats, orders = await engine.receive_counted(
        ref, 2, visibility_timeout_ms=30_000, thread=thread
    )
    assert [m.body for m in again.messages] == [b"m2", b"m3"]
    assert (stats.visible, stats.in_flight) == (1, 4)
    assert orders is not None and orders.ours == 1
