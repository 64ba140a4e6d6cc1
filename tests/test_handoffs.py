"""Hand-offs (cluster/handoffs.py, hand_off in engine/lua/_lib.lua): a send gives its message
straight to the live socket that waits for it, when it is the only visible one, and the
socket's node writes it without a receive. Against a real server: the engine and a node's
wake-up subscription; then a live wallet on the app in process."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from redis.asyncio import Redis

from mediator.cluster.handoffs import Handoffs, Inbox
from mediator.engine import Engine, QueueConfig, QueueRef, SendMessage, keys
from mediator.engine.model import Hold, ReceivedMessage
from mediator.engine.wakeups import WakeHub
from mediator.mediation.mailbox import queue_of
from mediator.storage.clients import Backend
from tests.didcomm_peer import Peer, attachments, forward, mediator_key, message
from tests.eventually import eventually, until_redis_ms
from tests.inprocess import AppNode
from tests.subscribers import cut, subscribers

pytestmark = [pytest.mark.topology, pytest.mark.engine]  # again on Redis 7, Sentinel, Cluster

NS = "didcomm"
DEADLINE_MS = 30_000
COUNT_BASE = 10**15  # _lib.lua: the hand-off count is stored above it


@dataclass
class Socket:
    """A node's side: its wake-up subscription, hand-offs, and one socket's live loop
    (`taking`: whether it still takes them)."""

    engine: Engine
    hub: WakeHub
    handoffs: Handoffs
    socket_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    taken: list[tuple[str, int, ReceivedMessage]] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    taking: bool = True
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    losses: int = 0

    def lost(self) -> None:
        self.losses += 1

    def accept(self, connection: str, number: int, message: ReceivedMessage) -> bool:
        if self.taking:
            self.taken.append((connection, number, message))
        self.arrived.set()
        return self.taking

    def hold(self, ref: QueueRef) -> Hold:
        owner = Hold.owner_of(self.engine.wake_channel, self.socket_id)
        return Hold(keys.connection_keys(ref.name).presence, owner, 60_000)

    async def live_receive(self, ref: QueueRef, since_ms: int = 0) -> int | None:
        """The socket's delivery loop's receive (live since `since_ms`): nothing there, its
        marker written."""
        got = await self.engine.receive_filtered(
            ref,
            10,
            visibility_timeout_ms=DEADLINE_MS,
            min_enqueue_ms=since_ms,
            wait_marker_ms=10_000,
            hold=self.hold(ref),
            handoffs=True,
        )
        assert got.messages == []
        return got.handed

    async def next_take(self) -> None:
        await asyncio.wait_for(self.arrived.wait(), 5)
        self.arrived.clear()


@pytest.fixture
async def socket(engine: Engine, backend: Backend) -> AsyncIterator[Socket]:
    hub = WakeHub(backend.subscriber, engine.wake_channel)
    released: list[str] = []

    async def give_back(connection: str, messages: list[ReceivedMessage]) -> int:
        released.extend(m.message_id for m in messages)
        return sum([await engine.give_back(QueueRef(NS, connection), m) for m in messages])

    made = Socket(engine, hub, Handoffs(give_back), released=released)
    made.handoffs.register(made.socket_id, made.accept, made.lost)
    hub.on_bytes("take", made.handoffs.on_take, made.handoffs.reset)
    await hub.start()
    yield made
    await made.handoffs.stop()
    await hub.stop()


async def held_queue(engine: Engine, redis: Redis, socket: Socket, name: str) -> QueueRef:
    ref = QueueRef(NS, name)
    await engine.create_queue(ref, QueueConfig(retention_ms=3_600_000, visibility_timeout_ms=0))
    hold = socket.hold(ref)
    await redis.set(hold.key, hold.owner)
    return ref


async def test_a_send_hands_its_message_to_the_waiting_socket(
    socket: Socket, engine: Engine, redis_client: Redis, qname: str
) -> None:
    ref = await held_queue(engine, redis_client, socket, qname)
    assert await socket.live_receive(ref) == 0

    for i in range(3):
        await engine.send(ref, [SendMessage(f"m{i}".encode(), trace_id="k")])
        await socket.next_take()

    assert [(c, n, m.body) for c, n, m in socket.taken] == [
        (qname, 1, b"m0"),
        (qname, 2, b"m1"),
        (qname, 3, b"m2"),
    ]
    # Handed out as a receive would: in flight until the socket's deadline, counted.
    first = socket.taken[0][2]
    stats = await engine.stats(ref)
    assert (stats.stored, stats.in_flight, stats.visible) == (3, 3, 0)
    assert first.receives == 1 and first.visible_at_ms >= stats.now_ms + DEADLINE_MS - 1_000
    assert stats.last_delivered_ms is not None
    assert (await engine.receive(ref, 10)).messages == []
    # The socket's next receive counts them, and its acknowledgement deletes them.
    assert await socket.live_receive(ref) == 3
    deleted, after, _ = await engine.acknowledge(ref, [m.message_id for _, _, m in socket.taken])
    assert deleted == 3 and after.stored == 0


async def test_only_the_only_visible_message_is_handed_off(
    socket: Socket, engine: Engine, redis_client: Redis, qname: str
) -> None:
    """A message that waits visible (from before live mode, which leaves it to a pickup)
    keeps the sends after it in the queue, in order; so does one too large for the node
    channel."""
    ref = await held_queue(engine, redis_client, socket, qname)
    await engine.send(ref, [SendMessage(b"other")])
    live_since = (await engine.stats(ref)).now_ms + 1
    await until_redis_ms(redis_client, live_since)  # "other" arrived before it
    await socket.live_receive(ref, since_ms=live_since)  # skips it: left visible
    await engine.send(ref, [SendMessage(b"after")])
    stats = await engine.stats(ref)  # the send decided: nothing handed out
    assert (stats.visible, stats.in_flight) == (2, 0) and socket.taken == []
    fetched = await engine.receive(ref, 10)
    assert [m.body for m in fetched.messages] == [b"other", b"after"]
    await engine.acknowledge(ref, [m.message_id for m in fetched.messages])

    await socket.live_receive(ref)
    big = b"b" * 70_000
    await engine.send(ref, [SendMessage(big)])
    await engine.send(ref, [SendMessage(b"small")])
    stats = await engine.stats(ref)  # the large one waits visible, so the next one waits too
    assert (stats.visible, stats.in_flight) == (2, 0) and socket.taken == []
    assert [m.body for m in (await engine.receive(ref, 10)).messages] == [big, b"small"]


async def test_a_hand_off_no_loop_takes_is_visible_again_at_once(
    socket: Socket, engine: Engine, redis_client: Redis, qname: str
) -> None:
    ref = await held_queue(engine, redis_client, socket, qname)
    await socket.live_receive(ref)
    socket.taking = False  # the socket closed, or left live mode

    sent = await engine.send(ref, [SendMessage(b"lost?")])
    await socket.next_take()

    async def visible() -> int:
        return (await engine.stats(ref)).visible

    assert await eventually(visible, lambda v: v == 1, within=5, interval=0.02) == 1
    assert socket.released == sent.message_ids
    assert [m.body for m in (await engine.receive(ref, 10)).messages] == [b"lost?"]


async def test_a_newer_socket_s_receive_takes_the_hand_offs_over(
    socket: Socket, engine: Engine, backend: Backend, redis_client: Redis, qname: str
) -> None:
    ref = await held_queue(engine, redis_client, socket, qname)
    await socket.live_receive(ref)
    newer = Socket(engine, socket.hub, socket.handoffs)
    socket.handoffs.register(newer.socket_id, newer.accept, newer.lost)
    hold = newer.hold(ref)
    await redis_client.set(hold.key, hold.owner)  # its claim
    await newer.live_receive(ref)

    await engine.send(ref, [SendMessage(b"to the newer")])
    await newer.next_take()

    assert [m.body for _, _, m in newer.taken] == [b"to the newer"]
    assert socket.taken == []
    markers = [f for f in await redis_client.hkeys(keys.queue_keys(ref.qualified).waiters)]
    assert [f for f in markers if f.startswith(b"@h ")] == [
        f"@h {hold.owner} {engine.wake_channel} {DEADLINE_MS}".encode()
    ]


async def test_no_hand_off_once_the_socket_gave_its_hold_up(
    socket: Socket, engine: Engine, redis_client: Redis, qname: str
) -> None:
    """A socket that closed or left live mode releases its hold: its marker stands until
    it lapses, but sends no longer hand off to it."""
    ref = await held_queue(engine, redis_client, socket, qname)
    await socket.live_receive(ref)
    await redis_client.delete(socket.hold(ref).key)

    await engine.send(ref, [SendMessage(b"after close")])

    stats = await engine.stats(ref)  # the send decided: nothing handed out
    assert (stats.visible, stats.in_flight) == (1, 0) and socket.taken == []
    assert [m.body for m in (await engine.receive(ref, 10)).messages] == [b"after close"]


async def test_a_socket_that_does_not_receive_is_handed_a_batch_at_most(
    socket: Socket, engine: Engine, redis_client: Redis, qname: str
) -> None:
    """Ten hand-offs between two of its receives; the next send waits in the queue (and
    the ones after it behind it) for the receive its wake-up brings."""
    ref = await held_queue(engine, redis_client, socket, qname)
    await socket.live_receive(ref)
    for i in range(12):
        await engine.send(ref, [SendMessage(f"m{i}".encode())])
    stats = await engine.stats(ref)
    assert (stats.in_flight, stats.visible) == (10, 2)
    while len(socket.taken) < 10:
        await socket.next_take()

    assert [m.body for _, _, m in socket.taken] == [f"m{i}".encode() for i in range(10)]
    got = await engine.receive_filtered(
        ref, 10, visibility_timeout_ms=DEADLINE_MS, hold=socket.hold(ref), handoffs=True
    )
    assert [m.body for m in got.messages] == [b"m10", b"m11"] and got.handed == 10


async def test_giving_back_never_undoes_a_newer_socket_s_reclaim(
    socket: Socket, engine: Engine, redis_client: Redis, qname: str
) -> None:
    ref = await held_queue(engine, redis_client, socket, qname)
    await socket.live_receive(ref)
    await engine.send(ref, [SendMessage(b"handed")])
    await socket.next_take()
    [(_, _, handed)] = socket.taken
    [again] = await engine.reclaim_inflight(ref, DEADLINE_MS * 2)  # a newer socket's

    assert not await engine.give_back(ref, handed)  # the old socket's, too late
    assert (await engine.stats(ref)).in_flight == 1
    assert await engine.give_back(ref, again)  # that one is still the newer socket's own
    assert [m.body for m in (await engine.receive(ref, 10)).messages] == [b"handed"]


async def test_a_subscription_that_comes_back_tells_the_loops_hand_offs_were_lost(
    socket: Socket, backend: Backend
) -> None:
    """What was published while it was down is gone: each socket's loop hears of it (and
    reclaims; see the wallet's test below)."""
    others = await subscribers(backend)
    hub = WakeHub(backend.subscriber, keys.node_channel(uuid.uuid4().hex[:8]))
    hub.on_bytes("take", socket.handoffs.on_take, socket.handoffs.reset)
    await hub.start()
    try:
        [ours] = await subscribers(backend) - others
        before = socket.losses
        hub.connected.clear()
        await cut(backend, ours)
        await asyncio.wait_for(hub.connected.wait(), 5)
        assert socket.losses == before + 1
    finally:
        await hub.stop()


# ------------------------------------------------------------------ the loop's inbox


def _message(mid: str) -> ReceivedMessage:
    return ReceivedMessage(mid, mid.encode(), "", "", "", 0, 1, 0)


async def test_an_inbox_gives_what_came_before_a_receive_first_in_number_order() -> None:
    inbox = Inbox()
    assert inbox.counted(4) is None  # the loop's first receive: 1-4 went to other sockets
    inbox.put(6, _message("f"))
    inbox.put(5, _message("e"))
    assert inbox.counted(7) == 7  # hand-off 7 was made before the receive: wait for it

    async def late() -> None:
        await asyncio.sleep(0.01)
        inbox.put(7, _message("g"))

    arriving = asyncio.create_task(late())
    while inbox.seen < 7:
        await inbox.wait(1)
    await arriving
    inbox.put(8, _message("h"))  # after the receive
    assert [m.message_id for m in inbox.take(upto=7)] == ["e", "f", "g"]
    assert [m.message_id for m in inbox.take()] == ["h"]
    assert inbox.counted(8) is None  # seen already


# ------------------------------------------------------------------ a live wallet


async def test_a_live_wallet_gets_each_forward_handed_off_in_order(
    dc_app: AppNode, med: str, redis_client: Redis
) -> None:
    """What a wallet sees is unchanged (one delivery per forward, in order, once); the
    queue's count says they went as hand-offs, a large one by the socket's receive."""
    async with Peer(dc_app, med, "ws") as peer:
        key = await peer.mediate()
        status = await peer.send(
            message("messagepickup/2.0/live-delivery-change", live_delivery=True)
        )
        assert status is not None and status["live_delivery"] is True
        waiters = keys.queue_keys(queue_of(peer.verkey).qualified).waiters

        async def marked() -> list[bytes]:
            return [f for f in await redis_client.hkeys(waiters) if f.startswith(b"@h ")]

        assert await eventually(marked, bool, within=5, interval=0.01)  # its loop's receive
        contents: list[dict[str, object]] = [{"n": n} for n in range(5)]
        contents.insert(3, {"n": "large", "pad": "x" * 80_000})
        seen = []
        for content in contents:
            await forward(dc_app, med, key, content)
            items = attachments(await peer.next_message())
            seen += [peer.open(body) for _, body in items]
            await peer.ack([i for i, _ in items])
        assert seen == contents
        count = int(await redis_client.hget(waiters, "@n") or 0) - COUNT_BASE
        assert count == 5  # all but the large one
        assert await peer.no_frame(0.3)


async def test_a_wallet_that_left_live_mode_finds_its_message_waiting(
    dc_app: AppNode, med: str
) -> None:
    async with Peer(dc_app, med, "ws") as peer:
        key = await peer.mediate()
        await peer.send(message("messagepickup/2.0/live-delivery-change", live_delivery=True))
        await peer.send(message("messagepickup/2.0/live-delivery-change", live_delivery=False))
        await forward(dc_app, med, key, {"while": "not live"})
        assert await peer.no_frame(0.3)
        got = attachments(await peer.deliver())
        assert [peer.open(b) for _, b in got] == [{"while": "not live"}]


@pytest.fixture
async def long_deadline(redis_url: str, backend: Backend) -> AsyncIterator[tuple[AppNode, str]]:
    """A node in process with the production delivery deadline (30 s), and its wake-up
    subscription's connection."""
    others = await subscribers(backend)
    node = await AppNode(redis_url, "handoff", delivery_timeout_seconds=30).start()
    [ours] = await subscribers(backend) - others
    yield node, ours  # type: ignore[misc]
    await node.stop()


async def test_a_hand_off_lost_with_the_subscription_is_delivered_at_once(
    long_deadline: tuple[AppNode, tuple[int, str]], backend: Backend, redis_client: Redis
) -> None:
    """The node's subscription is cut and the forward's hand-off goes nowhere: once it is
    back, the socket reclaims what was handed out, long before its 30 s deadline."""
    node, subscription = long_deadline
    med = await mediator_key(node)
    async with Peer(node, med, "ws") as peer:
        key = await peer.mediate()
        await peer.send(message("messagepickup/2.0/live-delivery-change", live_delivery=True))
        waiters = keys.queue_keys(queue_of(peer.verkey).qualified).waiters

        async def marked() -> list[bytes]:
            return [f for f in await redis_client.hkeys(waiters) if f.startswith(b"@h ")]

        assert await eventually(marked, bool, within=5, interval=0.01)
        await cut(backend, subscription)
        await forward(node, med, key, {"while": "cut off"})
        got = attachments(await peer.next_message(wait=10))
        assert [peer.open(b) for _, b in got] == [{"while": "cut off"}]
        await peer.ack([i for i, _ in got])
