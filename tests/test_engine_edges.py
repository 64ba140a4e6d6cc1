"""The engine at its edges: crashes between steps, races between nodes, odd inputs.

Each test was first written against a bug an independent review found, then kept.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from mediator.engine import Engine, QueueConfig, QueueRef, SendMessage, keys
from mediator.storage.clients import Backend
from tests.eventually import redis_ms, until_redis_ms

pytestmark = pytest.mark.engine

NS = "mqs"


def cfg(**kw: Any) -> QueueConfig:
    base: dict[str, Any] = {"retention_ms": 3_600_000, "visibility_timeout_ms": 30_000}
    base.update(kw)
    return QueueConfig(**base)


async def _receive_script_only(engine: Engine, ref: QueueRef, n: int) -> Any:
    """The receive script alone: what a node has done when it dies before the hand-over."""
    qk = keys.queue_keys(ref.qualified)
    return await engine.scripts.call("receive", qk.all, [ref.qualified, "", n, "", 0, 5000])


async def test_a_second_hand_over_of_the_same_outbox_entry_changes_nothing(
    engine: Engine, qname: str
):
    """A worker picks up an outbox entry while the receiving node still hands it over: the
    second hand-over must not take "already settled" for "deleted meanwhile"."""
    src, dlq = QueueRef(NS, qname), QueueRef(NS, qname + "-dlq")
    await engine.create_queue(dlq, cfg())
    await engine.create_queue(
        src, cfg(visibility_timeout_ms=0, max_receives=1, dead_letter_queue=dlq.name)
    )
    [mid] = (await engine.send(src, [SendMessage(b"x")])).message_ids
    r = await _receive_script_only(engine, src, 1)
    assert int(r[3]) == 1
    qk = keys.queue_keys(src.qualified)
    up = await engine.scripts.call("upkeep", qk.all, [src.qualified, 1000, 0])
    [packed] = [bytes(p) for p in up[5:]]
    await engine.hand_over(src.qualified, packed)  # the receiving node
    await engine.hand_over(src.qualified, packed)  # the worker, with its copy
    got = await engine.receive(dlq, 10)
    assert [m.message_id for m in got.messages] == [mid]


async def test_a_delete_during_the_hand_over_is_applied_where_the_message_lands(
    engine: Engine, qname: str
):
    src, dlq = QueueRef(NS, qname), QueueRef(NS, qname + "-dlq")
    await engine.create_queue(dlq, cfg(visibility_timeout_ms=0))
    await engine.create_queue(
        src, cfg(visibility_timeout_ms=0, max_receives=1, dead_letter_queue=dlq.name)
    )
    [mid] = (await engine.send(src, [SendMessage(b"x")])).message_ids
    await _receive_script_only(engine, src, 1)
    packed = await engine.redis.hget(keys.queue_keys(src.qualified).outbox, mid)
    assert packed is not None
    await engine.delete_message(NS, mid)  # before the hand-over reached the dead letter queue
    await engine.hand_over(src.qualified, packed)
    assert (await engine.receive(dlq, 10)).messages == []
    assert (await engine.stats(dlq)).messages == 0


async def test_outbox_entry_left_by_a_crash_is_handed_over_within_grace(engine: Engine, qname: str):
    """A node dies right after the receive script dead-lettered a message. The script has
    put the queue's upkeep within the grace in the shard's schedule, and the upkeep hands
    the message over."""
    src, dlq = QueueRef(NS, qname), QueueRef(NS, qname + "-dlq")
    await engine.create_queue(dlq, cfg())
    await engine.create_queue(
        src, cfg(visibility_timeout_ms=0, max_receives=1, dead_letter_queue=dlq.name)
    )
    [mid] = (await engine.send(src, [SendMessage(b"x")])).message_ids
    r = await _receive_script_only(engine, src, 1)  # the node dies right after this
    now = int(r[1])
    # The receive script put the queue's upkeep within the grace time in the shard's
    # schedule itself: no index needs repairing after the crash.
    stats = await engine.stats(src)
    assert stats.sched_ms is not None and stats.sched_ms - now <= 5000
    await engine.upkeep(src.qualified, grace_ms=0)
    assert [m.message_id for m in (await engine.receive(dlq, 10)).messages] == [mid]


async def test_a_queue_recreated_during_a_delete_keeps_its_index_entries(
    engine: Engine, qname: str, redis_url: str
):
    """delete_queue removes the listing entry after its script: a queue of the same name
    created and sent to in between must keep its listing and schedule entries."""
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg())
    other_backend = Backend(redis_url)
    await other_backend.start()
    other = Engine(other_backend.client)
    real_pipeline = engine.redis.pipeline

    def hooked(*a: Any, **kw: Any) -> Any:
        # Only the first pipeline, delete_queue's index removal (a cluster client also
        # pipelines internally, later on).
        del engine.redis.pipeline
        pipe = real_pipeline(*a, **kw)
        real_execute = pipe.execute

        async def execute(*ea: Any, **ekw: Any) -> Any:
            # another node re-creates the queue and sends to it right now
            await other.create_queue(ref, cfg())
            await other.send(ref, [SendMessage(b"y")])
            return await real_execute(*ea, **ekw)

        pipe.execute = execute  # type: ignore[method-assign]
        return pipe

    engine.redis.pipeline = hooked  # type: ignore[method-assign]
    await engine.delete_queue(ref, cascade=True)
    try:
        assert await engine.queue_exists(ref)
        names = [i.name for i in await engine.list_queues(NS, 0, -1)]
        due = await engine.redis.zscore(keys.queue_keys(ref.qualified).due, ref.qualified)
        assert qname in names
        assert due is not None
    finally:
        await other_backend.aclose()


async def test_receive_finds_a_visible_message_behind_many_expired_ones(engine: Engine, qname: str):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg(retention_ms=1000))
    for _ in range(3):
        await engine.send(ref, [SendMessage(b"old")] * 500)
    await until_redis_ms(engine.redis, await redis_ms(engine.redis) + 1000)
    [mid] = (await engine.send(ref, [SendMessage(b"live")])).message_ids
    got = await engine.receive(ref, 1)  # 1,500 expired ahead: more than one script's budget
    assert [m.message_id for m in got.messages] == [mid]
    stats = await engine.stats(ref)
    assert (stats.stored, stats.in_flight) == (1, 1)  # only the live one is left


# ------------------------------------------------------------ empty message bodies
# Lua would send an empty body's size change as "-0", which Redis 7.0 refuses mid-script
# (Valkey accepts it); these run in the `make engine-redis7` pass too.


async def test_dead_lettering_an_empty_message_keeps_it(engine: Engine, qname: str):
    src, dlq = QueueRef(NS, qname), QueueRef(NS, qname + "-dlq")
    await engine.create_queue(dlq, cfg(visibility_timeout_ms=0))
    await engine.create_queue(
        src, cfg(visibility_timeout_ms=0, max_receives=1, dead_letter_queue=dlq.name)
    )
    [mid] = (await engine.send(src, [SendMessage(b"")])).message_ids
    with contextlib.suppress(Exception):
        await engine.receive(src, 1)
    left = [m.message_id for m in (await engine.receive(src, 10)).messages]
    left += [m.message_id for m in (await engine.receive(dlq, 10)).messages]
    assert left == [mid]


async def test_deleting_an_empty_message_succeeds(engine: Engine, qname: str):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg(delay_ms=0))
    [mid] = (await engine.send(ref, [SendMessage(b"")])).message_ids
    await engine.delete_message(NS, mid)
    delayed = QueueRef(NS, qname + "-d")
    await engine.create_queue(delayed, cfg(delay_ms=60_000))
    [mid] = (await engine.send(delayed, [SendMessage(b"")])).message_ids
    await engine.delete_message(NS, mid)
    assert (await engine.stats(ref)).messages == (await engine.stats(delayed)).messages == 0


async def test_upkeep_purges_expired_empty_messages(engine: Engine, qname: str):
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg(retention_ms=50))
    await engine.send(ref, [SendMessage(b""), SendMessage(b"")])
    await until_redis_ms(engine.redis, await redis_ms(engine.redis) + 50)
    await engine.upkeep(ref.qualified)
    assert (await engine.stats(ref)).stored == 0
