"""Abuse limits, as a stranger meets them: handshakes and new connections per client address,
forwards per recipient per second, bytes per sender (a minute's, and what it has queued),
the WebSocket's own limits, and who a client is behind the operator's proxies (never a
stranger's X-Forwarded-For)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest
import websockets

from mediator.client import ClientError, Recipient, Sender
from mediator.client.recipient import delivered
from mediator.engine import keys
from mediator.mediation.senders import REFRESH_SECONDS
from mediator.ops.metrics import LIMITS
from mediator.storage.clients import Backend
from mediator.transport.client_address import client_address
from tests.didcomm_peer import ENVELOPE, Peer, forward, mediator_key
from tests.eventually import eventually
from tests.scrape import samples, value
from tests.servers import Node, RedisUnderTest

pytestmark = pytest.mark.topology


@pytest.fixture(scope="module")
def limited_redis(redis_server: RedisUnderTest) -> str:
    return redis_server.isolated_url()


def _node(url: str, **env: str) -> Iterator[Node]:
    node = Node(url, **env).start()
    yield node
    node.stop()


@pytest.fixture(scope="module")
def strict(limited_redis: str) -> Iterator[Node]:
    """A node with small limits behind a "proxy" on 127.0.0.1: a request naming a client in
    X-Forwarded-For counts against that client; one without (the test's own wallets, from
    127.0.0.1) against no one (loopback exempt, as by default)."""
    yield from _node(
        limited_redis,
        MEDIATOR_LIMIT_HANDSHAKES_PER_MINUTE="4",
        MEDIATOR_LIMIT_CONNECTIONS_PER_MINUTE="3",
        MEDIATOR_LIMIT_FORWARDS_PER_SECOND="5",
        MEDIATOR_LIMIT_SENDER_BYTES_PER_MINUTE="2000000",
        MEDIATOR_WEBSOCKET_MESSAGES_PER_SECOND="5",
        MEDIATOR_WEBSOCKET_SOCKETS_PER_ADDRESS="3",
        MEDIATOR_WEBSOCKET_HANDSHAKE_SECONDS="1",
        MEDIATOR_TRUSTED_PROXIES="127.0.0.1/32",
        MEDIATOR_LIMIT_EXEMPT_NETWORKS="127.0.0.1/32",
    )


def _forwards_window(connection: str) -> str:
    """The key holding a recipient's forwards of the current second (take_budget in
    _lib.lua: it expires with the window)."""
    return keys.queue_keys(f"{keys.DIDCOMM_NAMESPACE}:{connection}").cfg + ":fr"


async def _window_has_room(url: str, connection: str, budget: int) -> None:
    """Until the recipient's forwards window takes one more (a new window, or room left)."""
    backend = Backend(url)
    await backend.start()
    try:
        window = _forwards_window(connection)
        used = await eventually(
            lambda: backend.client.get(window),
            lambda n: n is None or int(n) < budget,
            within=5,
            interval=0.02,
        )
        assert used is None or int(used) < budget
    finally:
        await backend.aclose()


async def _refusals(node: Node) -> dict[str, float]:
    """What the node's /metrics counts refused so far, by limit."""
    async with httpx.AsyncClient() as http:
        scraped = (await http.get(node.base + "/metrics")).text
    return {labels["limit"]: n for labels, n in samples(scraped, "mediator_limit_refusals_total")}


def _more(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    """The refusals counted between two scrapes, by limit (those that moved)."""
    return {
        limit: n - before.get(limit, 0.0)
        for limit, n in after.items()
        if n != before.get(limit, 0.0)
    }


async def _exchange(base: str, med: str, forwarded_for: str) -> Recipient:
    """A new wallet's DID Exchange, coming through a proxy that names it `forwarded_for`."""
    recipient = Recipient(base, med)
    channel = recipient.channel
    assert hasattr(channel, "client")
    channel.client.headers["x-forwarded-for"] = f"198.51.100.200, {forwarded_for}"
    await recipient.exchange()
    return recipient


@pytest.mark.full
async def test_handshakes_and_connections_per_address_are_limited_cluster_wide(
    strict: Node, limited_redis: str
) -> None:
    med = await mediator_key(strict.base)
    other = Node(
        limited_redis,
        MEDIATOR_LIMIT_CONNECTIONS_PER_MINUTE="3",
        MEDIATOR_TRUSTED_PROXIES="127.0.0.1/32",
        MEDIATOR_LIMIT_EXEMPT_NETWORKS="none",
    ).start()
    try:
        # Three connections from one address, over two nodes: the fourth is refused.
        for base in (strict.base, other.base, strict.base):
            await (await _exchange(base, med, "203.0.113.7")).close()
        with pytest.raises(ClientError) as refused:
            await _exchange(other.base, med, "203.0.113.7")
        assert refused.value.status == 429
        body = json.loads(refused.value.body)
        assert body["code"] == "rate-limited" and 1 <= body["retry_after"] <= 60
        assert _more(await _refusals(other), {}) == {"connections": 1}
        # Another address behind the same proxy has a budget of its own.
        await (await _exchange(strict.base, med, "203.0.113.8")).close()
    finally:
        other.stop()


@pytest.mark.full
async def test_a_strangers_forwarded_for_header_is_not_trusted(limited_redis: str) -> None:
    """Without --trusted-proxies, X-Forwarded-For changes nothing: every request of the
    test counts against 127.0.0.1, whatever address it claims."""
    for node in _node(
        limited_redis,
        MEDIATOR_LIMIT_HANDSHAKES_PER_MINUTE="2",
        MEDIATOR_LIMIT_EXEMPT_NETWORKS="none",
    ):
        med = await mediator_key(node.base)
        # Operators see every limit's count from the start, at 0.
        assert await _refusals(node) == dict.fromkeys(LIMITS, 0.0)
        await (await _exchange(node.base, med, "192.0.2.1")).close()
        await (await _exchange(node.base, med, "192.0.2.2")).close()
        with pytest.raises(ClientError) as refused:
            await _exchange(node.base, med, "192.0.2.3")
        assert refused.value.status == 429
        assert _more(await _refusals(node), {}) == {"handshakes": 1}


def test_the_client_address_is_the_nearest_untrusted_hop() -> None:
    headers = [(b"x-forwarded-for", b"1.2.3.4, 10.0.0.5"), (b"x-forwarded-for", b"10.0.0.9")]
    assert client_address(("10.0.0.2", 1), headers, "10.0.0.0/8") == "1.2.3.4"
    assert client_address(("10.0.0.2", 1), headers, "") == "10.0.0.2"
    assert client_address(("8.8.8.8", 1), headers, "10.0.0.0/8") == "8.8.8.8"
    assert (
        client_address(("10.0.0.2", 1), [(b"x-forwarded-for", b"junk")], "10.0.0.0/8") == "10.0.0.2"
    )
    assert client_address(None, [], "") == "unknown"


@pytest.mark.full
async def test_a_flood_against_one_recipient_does_not_starve_another(
    strict: Node, limited_redis: str
) -> None:
    med = await mediator_key(strict.base)
    async with Peer(strict.base, med) as flooded, Peer(strict.base, med) as calm:
        target, other = await flooded.mediate(), await calm.mediate()
        before = await _refusals(strict)
        answers = await asyncio.gather(
            *(forward(strict.base, med, target, {"n": i}) for i in range(20))
        )
        statuses = [a.status_code for a in answers]
        assert statuses.count(202) >= 5 and statuses.count(429) >= 10
        limited = next(a for a in answers if a.status_code == 429)
        assert limited.headers["retry-after"] == "1"
        assert limited.json()["code"] == "rate-limited"
        assert _more(await _refusals(strict), before) == {
            "forwards_per_second": statuses.count(429)
        }
        # The other wallet's messages go through meanwhile, and the flooded one's accepted
        # messages are all there.
        assert (await forward(strict.base, med, other, {"calm": True})).status_code == 202
        assert (await flooded.status())["message_count"] == statuses.count(202)
        await _window_has_room(limited_redis, flooded.verkey, 5)  # the next second's window
        assert (await forward(strict.base, med, target, {"later": True})).status_code == 202


@pytest.mark.full
async def test_bytes_per_sender_are_limited(strict: Node, limited_redis: str) -> None:
    med = await mediator_key(strict.base)
    async with Peer(strict.base, med) as peer, httpx.AsyncClient(base_url=strict.base) as http:
        key = await peer.mediate()
        data = Sender(med).wrap(key, {"pad": "x" * 150_000})
        headers = {**ENVELOPE, "x-forwarded-for": "203.0.113.50"}
        before = await _refusals(strict)
        statuses = []
        for _ in range(20):
            await _window_has_room(limited_redis, peer.verkey, 5)  # under the per-recipient rate
            statuses.append((await http.post("/", content=data, headers=headers)).status_code)
        # 2 MB a minute from one sender address: about a dozen 200 KB envelopes (sent
        # again and again: duplicates are accepted without being stored), then 429s.
        assert 6 <= statuses.count(202) <= 16
        assert statuses[-1] == 429
        assert _more(await _refusals(strict), before) == {
            "sender_bytes_per_minute": statuses.count(429)
        }
        # Another sender is not held back by the first one's budget.
        other = {**ENVELOPE, "x-forwarded-for": "203.0.113.51"}
        assert (await http.post("/", content=data, headers=other)).status_code == 202


@pytest.mark.full
async def test_websocket_frames_per_second_sockets_per_address_and_the_deadline(
    strict: Node,
) -> None:
    url = strict.base.replace("http", "ws", 1)
    before = await _refusals(strict)
    # A socket that sends nothing valid is closed once its deadline passes (1 s here).
    async with websockets.connect(url) as idle:
        await idle.send("not an envelope")
        assert json.loads(await idle.recv())["code"] == "invalid-json"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(idle.recv(), 5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    # Three sockets from one address; the fourth is closed at once.
    behind = {"x-forwarded-for": "203.0.113.60"}
    held = [await websockets.connect(url, additional_headers=behind) for _ in range(3)]
    try:
        async with websockets.connect(url, additional_headers={"x-forwarded-for": "203.0.113.61"}):
            pass  # another address is let in meanwhile
        async with websockets.connect(url, additional_headers=behind) as extra:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(extra.recv(), 5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    finally:
        for ws in held:
            await ws.close()
    await asyncio.sleep(0.05)
    # Over 5 frames a second: one `rate-limited` answer; at four times that, closed.
    async with websockets.connect(url) as noisy:
        for _ in range(6):
            await noisy.send("{}")
        codes = [json.loads(await noisy.recv())["code"] for _ in range(6)]
        assert codes.count("rate-limited") == 1
        with pytest.raises(websockets.ConnectionClosed) as closed:
            for _ in range(30):
                await noisy.send("{}")
            while True:
                await asyncio.wait_for(noisy.recv(), 5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    # Each counted under its limit: the frames over the rate (the one answered, those
    # dropped, the one that closed the socket), one socket of too many, the idle socket's
    # deadline (and the noisy one's, never valid either, should a slow machine let it
    # reach its deadline before its rate).
    more = _more(await _refusals(strict), before)
    assert more.pop("websocket_messages") >= 1
    assert more.pop("websocket_first_message") in (1, 2)
    assert more == {"websocket_sockets": 1}


@pytest.mark.full
async def test_an_honest_socket_is_not_closed_by_the_deadline(strict: Node) -> None:
    med = await mediator_key(strict.base)
    url = strict.base.replace("http", "ws", 1)
    async with Peer(strict.base, med, "ws") as peer:  # DID Exchange over the socket
        await peer.mediate()
        # A socket opened after it that sends nothing is closed at its deadline (1 s): the
        # honest socket's has passed too.
        async with websockets.connect(url) as silent:
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(silent.recv(), 5)
        assert (await peer.status())["message_count"] == 0


@pytest.mark.full
async def test_a_frame_over_the_envelope_limit_closes_the_socket(limited_redis: str) -> None:
    for node in _node(limited_redis, MEDIATOR_MAX_ENVELOPE_BYTES="10000"):
        url = node.base.replace("http", "ws", 1)
        async with websockets.connect(url, max_size=None) as ws:
            await ws.send("x" * 200_000)
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


async def _take_all(peer: Peer) -> int:
    """Pick up and acknowledge everything queued for `peer`; how many messages."""
    taken = 0
    while True:
        reply = await peer.delivery_request(limit=50)
        got = delivered(reply)
        if not got:
            return taken
        await peer.messages_received([mid for mid, _ in got])
        taken += len(got)


@pytest.mark.full
async def test_bytes_a_sender_has_queued_are_limited_cluster_wide(
    redis_server: RedisUnderTest,
) -> None:
    """A sender (an address behind the proxy) forwarding to recipients who do not pick up is
    refused on every node once it has the limit queued, within the few seconds the count
    lags; another sender is not; everything accepted is there; once the recipients took
    the messages, the sender is accepted again. On storage of its own: every worker there
    must have the nodes' limit (the module's other nodes have the default)."""
    url = redis_server.isolated_url("abuse-limits")
    backend = Backend(url)
    await backend.start()
    await backend.client.flushdb()
    await backend.aclose()
    env = {
        "MEDIATOR_LIMIT_SENDER_QUEUED_BYTES": "60000",
        "MEDIATOR_TRUSTED_PROXIES": "127.0.0.1/32",
        "MEDIATOR_LIMIT_EXEMPT_NETWORKS": "127.0.0.1/32",
    }
    a, b = Node(url, **env).start(), Node(url, **env).start()
    try:
        med = await mediator_key(a.base)
        async with Peer(a.base, med) as one, Peer(b.base, med) as two, httpx.AsyncClient() as http:
            targets = [await one.mediate(), await two.mediate()]
            sender = {**ENVELOPE, "x-forwarded-for": "203.0.113.60"}

            sent: dict[int, bytes] = {}

            async def post(
                i: int, base: str, headers: dict[str, str], data: bytes | None = None
            ) -> httpx.Response:
                if data is None:
                    data = Sender(med).wrap(targets[i % 2], {"n": i, "pad": "x" * 6000})
                sent[i] = data
                return await http.post(base + "/", content=data, headers=headers)

            accepted, refused = 0, None
            for i in range(80):
                answer = await post(i, (a.base, b.base)[i % 2], sender)
                if answer.status_code == 429:
                    refused = answer
                    break
                assert answer.status_code == 202, answer.text
                accepted += 1
                await asyncio.sleep(0.25)
            # About 8 KB each: the eighth passes 60,000 bytes; the count lags a few seconds.
            assert refused is not None and 8 <= accepted < 40, accepted
            assert refused.json()["code"] == "rate-limited"
            assert "queued here" in refused.json()["error"]
            assert 1 <= int(refused.headers["retry-after"]) <= 30
            # Refused on both nodes, once each reads the refusals again (each node does
            # once a second): until then, a node takes a copy of an envelope it queued
            # (a duplicate: not stored again). Another sender still gets through. (That
            # node a refuses too is also what makes the 202 below mean the sender went
            # under: a node whose list predates the listing would accept it anyway.)
            for i, node in enumerate((a, b)):
                copy = await eventually(
                    lambda i=i, base=node.base: post(i, base, sender, sent[i]),
                    lambda r: r.status_code == 429,
                    within=REFRESH_SECONDS + 5,
                )
                assert copy.status_code == 429, node.base
            assert (await post(100, b.base, sender)).status_code == 429
            other = {**ENVELOPE, "x-forwarded-for": "203.0.113.61"}
            assert (await post(101, a.base, other)).status_code == 202
            # Operators see it: one sender refused, on every node's /metrics, and each
            # refusal counted under the limit.
            scraped = (await http.get(b.base + "/metrics")).text
            assert value(scraped, "mediator_senders_over_queued_bytes") == 1
            assert value(scraped, "mediator_limit_refusals_total", limit="sender_queued_bytes")
            # Nothing accepted is lost: the recipients take every message.
            assert await _take_all(one) + await _take_all(two) == accepted + 1
            # With its messages taken, the sender is accepted again: a settle unlists it
            # about a second later, and node a reads the list a second after that.
            again = await eventually(
                lambda: post(102, a.base, sender), lambda r: r.status_code == 202, within=15
            )
            assert again.status_code == 202, again.text
            scraped = (await http.get(a.base + "/metrics")).text
            assert value(scraped, "mediator_senders_over_queued_bytes") == 0
    finally:
        a.stop()
        b.stop()
