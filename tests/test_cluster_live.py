"""Live delivery across nodes: the presence registry, a second socket taking over from the
first (on another node), and a node killed with deliveries in flight. Real node processes
with the production delivery deadline (30 s), so every re-offer seen here is a takeover's,
not a deadline's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import redis

from mediator.client import attachments
from mediator.engine import keys
from tests.didcomm_peer import Peer, collect, forward, live_peer, mediator_key
from tests.eventually import eventually
from tests.servers import Node

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)

# Node leases of 2 s, and idle live sockets re-reading their queue (and renewing their
# holds, which then live three re-checks: 1.5 s) every half second.
FAST = {"MEDIATOR_PRESENCE_SECONDS": "2", "MEDIATOR_LIVE_RECHECK_SECONDS": "0.5"}
HOLD_MS = 1500


def _server_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


async def _until_server_ms(r: redis.Redis, at_ms: int) -> None:
    """Until the server's clock (the one leases and holds run on) reads `at_ms`."""
    while True:
        now = _server_ms(r)
        if now >= at_ms:
            return
        await asyncio.sleep(min(0.05, (at_ms - now) / 1000))


async def _held(r: redis.Redis, verkey: str) -> bytes:
    """The hold on the connection, "<node>/<socket>": the node claims it once the status
    that answers live-delivery-change is sent, so a wallet may read that status first."""

    async def holder() -> bytes | None:
        value = r.get(keys.connection_keys(verkey).presence)
        return value if isinstance(value, bytes) else None

    held = await eventually(holder, lambda v: v is not None, within=5, interval=0.02)
    assert held is not None and b"/" in held, "no socket holds the connection"
    return held


@pytest.fixture(scope="module")
def pair(redis_url: str) -> Iterator[tuple[Node, Node]]:
    nodes = (
        Node(redis_url, **FAST),
        Node(redis_url, **FAST, MEDIATOR_IN_PROCESS_WORKER="false"),
    )
    for node in nodes:
        node.start()
    yield nodes
    for node in nodes:
        node.stop()


def _ids(delivery: dict) -> list[str]:  # type: ignore[type-arg]
    return [i for i, _ in attachments(delivery)]


async def test_a_second_socket_on_another_node_takes_over(
    pair: tuple[Node, Node], redis_url: str
) -> None:
    a, b = pair
    med = await mediator_key(a.base)
    first = await live_peer(a.base, med)
    [key] = first.recipient_keys
    r = redis.Redis.from_url(redis_url)
    holder = await _held(r, first.verkey)

    await forward(b.base, med, key, {"n": 1})  # sent through the other node
    one = await first.next_message()
    assert [first.open(b_) for _, b_ in attachments(one)] == [{"n": 1}]

    second = await live_peer(b.base, med, like=first)  # same connection, node B, not acked yet
    again = await second.next_message(wait=5)  # offered again at once, not after 30 s
    assert _ids(again) == _ids(one)
    assert r.get(keys.connection_keys(first.verkey).presence) != holder

    await forward(a.base, med, key, {"n": 2})
    two = await second.next_message()
    assert [second.open(b_) for _, b_ in attachments(two)] == [{"n": 2}]
    assert await first.no_frame(1.0)  # the first socket delivers no more
    await second.ack(_ids(again) + _ids(two))
    assert (await second.status())["message_count"] == 0
    r.close()
    await first.close()
    await second.close()


async def test_an_idle_socket_keeps_its_hold_and_gives_it_up_when_it_closes(
    pair: tuple[Node, Node], redis_url: str
) -> None:
    a, b = pair
    med = await mediator_key(a.base)
    peer = await live_peer(a.base, med)
    # The same wallet asks the other node for its status over HTTP: live mode is on.
    over_http = Peer(b.base, med, "http")
    over_http.keys, over_http.mediator = peer.keys, peer.mediator
    assert (await over_http.status())["live_delivery"] is True
    r = redis.Redis.from_url(redis_url)
    presence = keys.connection_keys(peer.verkey).presence
    holder = await _held(r, peer.verkey)
    # Past the hold's own lifetime (1.5 s): the socket's re-checks (every half second)
    # renewed it, and its node's lease, which covers it, runs.
    await _until_server_ms(r, _server_ms(r) + HOLD_MS + 200)
    assert r.get(presence) == holder and 0 < r.pttl(presence) <= HOLD_MS
    node = holder.decode().split("/")[0]
    assert r.zscore(keys.nodes(), node) > r.time()[0] * 1000
    await peer.close()
    for _ in range(50):
        if r.get(presence) is None:
            break
        await asyncio.sleep(0.05)
    assert r.get(presence) is None
    assert (await over_http.status())["live_delivery"] is False
    await over_http.close()
    r.close()


async def test_a_lost_takeover_message_is_caught_by_the_next_receive(
    pair: tuple[Node, Node], redis_url: str
) -> None:
    """Another socket took the recipient but its `takeover` message never arrived (pub/sub
    drops messages while a subscriber reconnects): the old socket's next receive finds the
    hold gone and stops delivering, so the message waits for the holder."""
    a, b = pair
    med = await mediator_key(a.base)
    first = await live_peer(a.base, med)
    [key] = first.recipient_keys
    r = redis.Redis.from_url(redis_url)
    presence = keys.connection_keys(first.verkey).presence
    await _held(r, first.verkey)  # the first socket's claim, then another's over it
    r.set(presence, "elsewhere/socket", px=60_000)  # a claim whose message was lost
    await _until_server_ms(r, _server_ms(r) + 600)  # one re-check of the first socket
    await forward(b.base, med, key, {"n": "for the new holder"})
    assert await first.no_frame(2.0)  # the first socket delivers no more
    assert r.get(presence) == b"elsewhere/socket"  # and did not take the hold back
    # It arrived before any live socket held the recipient: fetched, as Pickup 2.0 says.
    later = await live_peer(b.base, med, like=first)
    got = await later.deliver()
    assert [later.open(b_) for _, b_ in attachments(got)] == [{"n": "for the new holder"}]
    await later.ack(_ids(got))
    r.close()
    await first.close()
    await later.close()


async def test_deliveries_of_a_killed_node_are_offered_at_once_on_reconnect(
    pair: tuple[Node, Node], redis_url: str
) -> None:
    _, b = pair
    doomed = Node(redis_url, **FAST, MEDIATOR_NODE_ID="doomed", MEDIATOR_IN_PROCESS_WORKER="false")
    await asyncio.to_thread(doomed.start)
    r = redis.Redis.from_url(redis_url)
    try:
        med = await mediator_key(doomed.base)
        first = await live_peer(doomed.base, med)
        [key] = first.recipient_keys
        await forward(b.base, med, key, {"n": "in flight"})
        carried = await first.next_message()
        doomed.kill()  # SIGKILL with the delivery unacknowledged
        await first.close()
        loop = asyncio.get_running_loop()
        started = loop.time()
        second = await live_peer(b.base, med, like=first)
        again = await second.next_message(wait=5)
        assert _ids(again) == _ids(carried)
        assert loop.time() - started < 5  # not the 30 s deadline
        assert [second.open(b_) for _, b_ in attachments(again)] == [{"n": "in flight"}]
        await second.ack(_ids(again))
        await second.close()
        # The dead node's lease, which covered its sockets' holds, runs out.
        await _until_server_ms(r, int(r.zscore(keys.nodes(), "doomed")) + 1)
        assert r.zscore(keys.nodes(), "doomed") < _server_ms(r)
    finally:
        r.close()
        doomed.stop()


@pytest.fixture(scope="module")
def trio(pair: tuple[Node, Node], redis_url: str) -> Iterator[tuple[Node, Node, Node]]:
    third = Node(redis_url, **FAST, MEDIATOR_IN_PROCESS_WORKER="false")
    third.start()
    yield (*pair, third)
    third.stop()


async def test_three_nodes_deliver_every_forward_live_in_order_per_sender(
    trio: tuple[Node, Node, Node],
) -> None:
    a, b, c = trio
    med = await mediator_key(a.base)
    peer = await live_peer(a.base, med)
    [key] = peer.recipient_keys

    async def sender(name: str, via: Node) -> None:
        for n in range(20):
            answer = await forward(via.base, med, key, {"sender": name, "n": n})
            assert answer.status_code == 202

    await asyncio.gather(sender("b", b), sender("c", c))
    seen: dict[str, dict] = {}  # type: ignore[type-arg]
    await collect(peer, 40, seen)
    got = list(seen.values())
    assert len(got) == 40
    for name in ("b", "c"):
        assert [m["n"] for m in got if m["sender"] == name] == list(range(20))
    await peer.close()


async def test_a_node_killed_mid_stream_loses_nothing(
    trio: tuple[Node, Node, Node], redis_url: str
) -> None:
    _, b, c = trio
    doomed = Node(redis_url, MEDIATOR_IN_PROCESS_WORKER="false")
    await asyncio.to_thread(doomed.start)
    try:
        med = await mediator_key(doomed.base)
        first = await live_peer(doomed.base, med)
        [key] = first.recipient_keys
        seen: dict[str, dict] = {}  # type: ignore[type-arg]
        stream = asyncio.create_task(_send_stream(c.base, med, key, 60))
        await collect(first, 20, seen, wait=10)
        doomed.kill()  # mid-stream, with deliveries on the wire and unacknowledged
        await first.close()
        second = await live_peer(b.base, med, like=first)
        await stream
        # Messages queued while nobody was live wait in the queue: fetch them as Credo does.
        await collect(second, 60, seen, wait=5)
        while len(seen) < 60:
            delivery = attachments(await second.deliver())
            if not delivery:
                break
            for mid, body in delivery:
                seen.setdefault(mid, second.open(body))
            await second.ack([mid for mid, _ in delivery])
        assert sorted(m["n"] for m in seen.values()) == list(range(60))  # none lost
        assert (await second.status())["message_count"] == 0
        await second.close()
    finally:
        doomed.stop()


async def _send_stream(base: str, med: str, key: str, count: int) -> None:
    for n in range(count):
        answer = await forward(base, med, key, {"n": n})
        assert answer.status_code == 202
        await asyncio.sleep(0.02)
