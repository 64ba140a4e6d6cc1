"""Group commit (mediator/engine/group_commit.py): sends in flight together share one
pipelined connection, and each is still its own write: its own answer, limits and order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.exceptions import NoScriptError, ResponseError

from mediator.engine import Engine, QueueConfig, QueueRef, SendMessage, keys
from mediator.engine.durability import Durability
from mediator.engine.replies import queue_stats
from mediator.engine.scripts import source
from mediator.errors import LimitExceeded
from mediator.storage.clients import STORAGE_ERRORS, Backend
from tests.servers import start_binary_server

pytestmark = pytest.mark.engine

NS = "mqs"


def cfg(**kw: int | None) -> QueueConfig:
    return QueueConfig(retention_ms=3_600_000, visibility_timeout_ms=30_000, **kw)


class Grouped:
    """An engine as a node makes it (a cluster's lines go to each primary), and how many
    calls were in flight on its line as each call went."""

    def __init__(self, backend: Backend) -> None:
        self.sizes: list[int] = []
        self.engine = Engine(
            backend.client, confirmed=Durability(backend), observe_calls=self.sizes.append
        )


@pytest.fixture
async def grouped(backend: Backend, qname: str) -> AsyncIterator[Grouped]:
    made = Grouped(backend)
    for primary in backend.primaries():  # the send script is loaded (see the flushed test)
        await primary.script_load(source("send"))
    yield made


async def stored_bodies(engine: Engine, ref: QueueRef) -> list[bytes]:
    got = await engine.receive(ref, 1000)
    return [m.body for m in got.messages]


async def held_bodies(engine: Engine, ref: QueueRef) -> list[bytes]:
    """What the queue holds, read without changing it, again while the connection the
    read took from the pool turns out killed (the tests kill every client)."""
    for attempt in range(5):
        try:
            return [m.body for m in await engine.peek(ref, 1000)]
        except STORAGE_ERRORS:
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


async def test_sends_in_flight_together_each_get_their_own_answer_in_order(
    grouped: Grouped, qname: str
):
    engine = grouped.engine
    free, counted, small = (QueueRef(NS, f"{qname}-{s}") for s in ("free", "counted", "small"))
    await engine.create_queue(free, cfg())
    await engine.create_queue(counted, cfg(max_messages=5))
    await engine.create_queue(small, cfg(max_message_bytes=100))
    plan: list[tuple[QueueRef, bytes]] = []
    for i in range(90):
        ref = (free, counted, small)[i % 3]
        body = f"{i:03}".encode() * (50 if ref is small and i % 2 else 1)  # 150 B: too large
        plan.append((ref, body))

    answers = await asyncio.gather(
        *(engine.send(ref, [SendMessage(body, "text/plain")]) for ref, body in plan),
        return_exceptions=True,
    )

    assert len(grouped.sizes) == 90  # each went once
    assert max(grouped.sizes) > 1  # in flight together
    by_queue: dict[str, list[object]] = {}
    for (ref, _), answer in zip(plan, answers, strict=True):
        by_queue.setdefault(ref.name, []).append(answer)
    assert not any(isinstance(a, Exception) for a in by_queue[free.name])
    refused = [a for a in by_queue[counted.name] if isinstance(a, LimitExceeded)]
    assert len(refused) == 25 and {a.kind for a in refused} == {"count"}
    too_large = [a for a in by_queue[small.name] if isinstance(a, Exception)]
    assert len(too_large) == 15
    assert all(isinstance(a, LimitExceeded) and a.kind == "message_size" for a in too_large)
    # Each queue holds what it accepted, in the order the sends were made.
    assert await stored_bodies(engine, free) == [b for r, b in plan if r is free]
    assert await stored_bodies(engine, counted) == [b for r, b in plan if r is counted][:5]
    assert await stored_bodies(engine, small) == [
        b for r, b in plan if r is small and len(b) <= 100
    ]


async def test_a_write_whose_script_fails_fails_alone(grouped: Grouped, qname: str):
    engine = grouped.engine
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg())
    sends = [engine.send(ref, [SendMessage(f"m{i}".encode())]) for i in range(10)]
    broken = engine.group.write("send", keys.queue_keys(ref.qualified).all, [], confirm=False)
    answers = await asyncio.gather(*sends[:5], broken, *sends[5:], return_exceptions=True)

    assert isinstance(answers[5], ResponseError)  # a script error: its caller gets it
    assert not any(isinstance(a, Exception) for a in answers[:5] + answers[6:])
    assert max(grouped.sizes) > 1
    assert await stored_bodies(engine, ref) == [f"m{i}".encode() for i in range(10)]


async def test_calls_side_by_side_run_in_order_and_fail_alone(
    grouped: Grouped, backend: Backend, qname: str
):
    """A pickup's calls written together on the line (one after the other on a cluster):
    each its own reply in the order given, a failing script and a script the server lost
    (NOSCRIPT: not run) answered as errors without holding up the others."""
    engine = grouped.engine
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg())
    await engine.send(ref, [SendMessage(b"one"), SendMessage(b"two")])
    qk = keys.queue_keys(ref.qualified).all
    for primary in backend.primaries():
        await primary.script_flush()
        await primary.script_load(source("queue_stats"))
    stats = ("queue_stats", qk, [ref.qualified])
    broken = ("queue_stats", qk, [])  # no queue name: the script fails

    replies = await engine.group.side_by_side([stats, broken, ("peek", qk, [10]), stats])

    assert isinstance(replies[1], ResponseError) and isinstance(replies[2], NoScriptError)
    first, last = queue_stats(replies[0]), queue_stats(replies[3])
    assert first is not None and last is not None
    assert (first.stored, first.bytes) == (last.stored, last.bytes) == (2, len(b"onetwo"))
    assert first.now_ms <= last.now_ms  # in the order given


async def test_writes_to_a_server_that_lost_its_scripts_each_run_once(
    grouped: Grouped, backend: Backend, qname: str
):
    engine = grouped.engine
    ref = QueueRef(NS, qname)
    await engine.create_queue(ref, cfg())
    for primary in backend.primaries():
        await primary.script_flush()

    answers = await asyncio.gather(
        *(engine.send(ref, [SendMessage(f"m{i}".encode())]) for i in range(40))
    )

    assert len({a.message_ids[0] for a in answers}) == 40
    assert max(grouped.sizes) > 1
    # Each once; in any order (each caller loads the script and goes again on its own).
    assert sorted(await stored_bodies(engine, ref)) == sorted(f"m{i}".encode() for i in range(40))


async def test_a_lost_connection_fails_only_the_writes_it_carried(tmp_path: Path, qname: str):
    """Connections killed under a group (on a server of its own: every client is killed):
    its writes fail with a storage error or were stored; none hangs, none is stored twice,
    and the next sends go."""
    server = start_binary_server(tmp_path / "data")
    backend = Backend(server.url)
    try:
        await backend.start()
        engine = Grouped(backend).engine
        ref = QueueRef(NS, qname)
        await engine.create_queue(ref, cfg())
        bodies = [f"m{i}".encode() for i in range(60)]
        sends = [asyncio.ensure_future(engine.send(ref, [SendMessage(b)])) for b in bodies]
        await asyncio.sleep(0.01)  # they are on their way
        await backend.client.client_kill_filter(_type="normal", skipme=True)
        answers = await asyncio.wait_for(asyncio.gather(*sends, return_exceptions=True), 30)

        failed = [a for a in answers if isinstance(a, Exception)]
        assert failed and all(isinstance(a, STORAGE_ERRORS) for a in failed), failed
        accepted = {b for b, a in zip(bodies, answers, strict=True) if not isinstance(a, Exception)}
        await engine.send(ref, [SendMessage(b"later")])
        stored = await held_bodies(engine, ref)
        assert len(stored) == len(set(stored))  # nothing twice
        assert accepted | {b"later"} <= set(stored) <= set(bodies) | {b"later"}
    finally:
        await backend.aclose()
        server.stop()


@pytest.mark.parametrize("confirmed", [False, True], ids=["plain", "waitaof"])
async def test_connections_killed_again_and_again_leave_no_send_waiting(
    tmp_path: Path, qname: str, confirmed: bool
):
    """Sends keep coming while their connection is killed, round after round: every send
    is answered (stored, or a storage error), none hangs, none is stored twice; with
    --wait-fsync too (WAITAOF, on a line of its own)."""
    server = start_binary_server(tmp_path / "data")
    backend = Backend(server.url)
    try:
        await backend.start()
        engine = Engine(backend.client, confirmed=Durability(backend, fsync=confirmed))
        ref = QueueRef(NS, qname)
        await engine.create_queue(ref, cfg())
        accepted: set[bytes] = set()
        sent: set[bytes] = set()
        for round_ in range(15):
            bodies = [f"r{round_}-{i}".encode() for i in range(40)]
            sent.update(bodies)
            sends = [asyncio.ensure_future(engine.send(ref, [SendMessage(b)])) for b in bodies]
            await asyncio.sleep(0.001 * (round_ % 4))
            await backend.client.client_kill_filter(_type="normal", skipme=True)
            more = [f"r{round_}-late{i}".encode() for i in range(10)]  # right after the kill
            sent.update(more)
            sends += [asyncio.ensure_future(engine.send(ref, [SendMessage(b)])) for b in more]
            answers = await asyncio.wait_for(asyncio.gather(*sends, return_exceptions=True), 30)
            for body, answer in zip([*bodies, *more], answers, strict=True):
                if isinstance(answer, Exception):
                    assert isinstance(answer, STORAGE_ERRORS), answer
                else:
                    accepted.add(body)
        assert accepted  # most went through
        stored = await held_bodies(engine, ref)
        assert len(stored) == len(set(stored))  # nothing twice
        assert accepted <= set(stored) <= sent
    finally:
        await backend.aclose()
        server.stop()
