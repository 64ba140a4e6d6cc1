"""The client without the mediator: forward wrapping (RFC 0094), the Agent's envelopes, what
each Recipient call puts on the wire, and how replies are told apart from other frames on a
WebSocket. The "mediator" here is a few lines over our envelope module: an httpx handler, and
a real WebSocket server on a loopback port."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from aries_staticagent import crypto as staticagent
from websockets.asyncio.server import ServerConnection, serve

from mediator.client import (
    Agent,
    ClientError,
    HttpTransport,
    Recipient,
    Sender,
    WsConnection,
    WsTransport,
    connect_websocket,
    delivered,
    fetch_invitation,
    forward_envelope,
    mediator_key,
    message,
    ws_url,
)
from mediator.didcomm import envelope
from mediator.didcomm.keys import KeyPair
from mediator.errors import EnvelopeError

FORWARD = "https://didcomm.org/routing/1.0/forward"


def open_with(pair: KeyPair, data: bytes | dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    raw = json.dumps(data).encode() if isinstance(data, dict) else data
    opened = envelope.unpack(raw, {pair.verkey_b58: pair}.get)
    result: dict[str, Any] = json.loads(opened.message)
    return result, opened.sender_verkey


# ------------------------------------------------------------------- forwarding


def test_a_forward_is_anoncrypted_to_the_mediator_and_names_the_recipient() -> None:
    mediator, recipient = KeyPair.generate(), KeyPair.generate()
    sender = Sender(mediator.did_key)
    wrapped = sender.wrap(recipient.did_key, {"@type": "https://example.org/x/1.0/y", "n": 1})

    fwd, outer_sender = open_with(mediator, wrapped)

    assert outer_sender is None  # the mediator does not learn who sent it
    assert set(fwd) == {"@type", "@id", "to", "msg"}
    assert fwd["@type"] == FORWARD
    assert fwd["to"] == recipient.verkey_b58  # base58 even when given a did:key
    assert envelope.recipient_kids(json.dumps(fwd["msg"]).encode()) == [recipient.verkey_b58]
    inner, inner_sender = open_with(recipient, fwd["msg"])
    assert inner == {"@type": "https://example.org/x/1.0/y", "n": 1}
    assert inner_sender == sender.verkey


def test_forward_envelope_keeps_the_inner_envelope_intact() -> None:
    mediator, recipient = KeyPair.generate(), KeyPair.generate()
    inner = envelope.pack(b'{"deep": true}', [recipient.verkey_b58])
    fwd, _ = open_with(mediator, forward_envelope(inner, recipient.verkey_b58, mediator.verkey_b58))
    assert fwd["msg"] == json.loads(inner)


def test_routing_keys_nest_nearest_the_recipient_first() -> None:
    # RFC 0067: routingKeys are ordered "from most destward to most srcward".
    mediator, near, far, recipient = (KeyPair.generate() for _ in range(4))
    inner = envelope.pack(b'{"deep": true}', [recipient.verkey_b58])
    wrapped = forward_envelope(
        inner, recipient.verkey_b58, mediator.verkey_b58, [near.did_key, far.did_key]
    )

    at_mediator, _ = open_with(mediator, wrapped)
    assert at_mediator["to"] == far.verkey_b58
    at_far, _ = open_with(far, at_mediator["msg"])
    assert at_far["to"] == near.verkey_b58
    at_near, _ = open_with(near, at_far["msg"])
    assert at_near["to"] == recipient.verkey_b58
    assert at_near["msg"] == json.loads(inner)


def test_a_grants_routing_keys_are_not_wrapped_twice_for_the_mediator() -> None:
    mediator, recipient = KeyPair.generate(), KeyPair.generate()
    inner = envelope.pack(b"{}", [recipient.verkey_b58])
    wrapped = forward_envelope(inner, recipient.verkey_b58, mediator.verkey_b58, [mediator.did_key])
    fwd, _ = open_with(mediator, wrapped)
    assert fwd["to"] == recipient.verkey_b58 and fwd["msg"] == json.loads(inner)


async def test_send_to_posts_the_forward_and_raises_when_refused() -> None:
    mediator, recipient = KeyPair.generate(), KeyPair.generate()
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            return httpx.Response(202)
        return httpx.Response(404, json={"error": "no such recipient", "code": "unknown-recipient"})

    sender = Sender(mediator.verkey_b58)
    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    async with HttpTransport("http://mediator.test", client=client) as http:
        await sender.send_to(recipient.verkey_b58, {"hi": 1}, http)
        with pytest.raises(ClientError) as refused:
            await sender.send_to(recipient.verkey_b58, {"hi": 2}, http)
    await client.aclose()

    assert str(seen[0].url) == "http://mediator.test/"
    assert seen[0].headers["content-type"] == "application/didcomm-envelope-enc"
    fwd, _ = open_with(mediator, seen[0].content)
    assert open_with(recipient, fwd["msg"]) == ({"hi": 1}, sender.verkey)
    assert refused.value.status == 404 and refused.value.code == "unknown-recipient"
    assert refused.value.error == "no such recipient"


# ------------------------------------------------------------------------ agent


def test_agents_round_trip_authcrypt_and_anoncrypt() -> None:
    mediator = KeyPair.generate()
    alice, bob = Agent(mediator.verkey_b58), Agent(mediator.did_key)
    msg = message("basicmessage/1.0/message", content="hi")

    assert bob.unpack(alice.pack(msg, [bob.verkey])) == (msg, alice.verkey)
    assert bob.unpack(alice.pack(msg, [bob.did_key], anon=True)) == (msg, None)
    assert open_with(mediator, alice.pack(msg)) == (msg, alice.verkey)  # to the mediator
    assert bob.mediator == mediator.verkey_b58


def test_agent_json_is_ascii_so_aries_staticagent_reads_it() -> None:
    alice, bob = Agent(KeyPair.generate().verkey_b58), KeyPair.generate()
    msg = {"@type": "https://didcomm.org/basicmessage/1.0/message", "content": "grüß dich ✓"}
    text, sender, _ = staticagent.unpack_message(
        alice.pack(msg, [bob.verkey_b58]), bob.verkey, bob.sigkey
    )
    assert json.loads(text) == msg and sender == alice.verkey


def test_messages_get_a_type_an_id_and_a_return_route() -> None:
    ping = message("trust_ping/1.0/ping", response_requested=True)
    assert ping["@type"] == "https://didcomm.org/trust_ping/1.0/ping"
    assert len(ping["@id"]) == 36 and ping["response_requested"] is True
    assert ping["~transport"] == {"return_route": "all"}
    assert "~transport" not in message("noop/1.0/noop", route=None)
    assert message("queue/1.0/status-request", route="thread")["~transport"] == {
        "return_route": "thread"
    }
    sov = "did:sov:BzCbsNYhMrjHiqZDTUASHg;spec/queue/1.0/status-request"
    assert message(sov)["@type"] == sov
    assert Agent.new_id() != Agent.new_id()


def test_open_forwarded_uses_every_key_the_agent_holds() -> None:
    agent = Agent(KeyPair.generate().verkey_b58)
    key = agent.add_key()
    assert key in agent.recipient_keys and key != agent.verkey
    for to in (key, agent.verkey):
        sealed = envelope.pack(b'{"for": "us"}', [to], KeyPair.generate())
        assert agent.open_forwarded(sealed) == {"for": "us"}
    with pytest.raises(EnvelopeError, match="not addressed"):
        agent.open_forwarded(envelope.pack(b"{}", [KeyPair.generate().verkey_b58]))
    with pytest.raises(EnvelopeError, match="not a JSON object"):
        agent.open_forwarded(envelope.pack(b"[1]", [key]))


def test_delivered_reads_every_pickup_shape() -> None:
    sealed = envelope.pack(b'{"m": 1}', [KeyPair.generate().verkey_b58])
    b64 = base64.urlsafe_b64encode(sealed).decode()
    delivery = {
        "@type": "https://didcomm.org/messagepickup/2.0/delivery",
        "~attach": [
            {"@id": "a", "data": {"base64": b64}},
            {"@id": "b", "data": {"base64": b64.rstrip("=")}},
            {"@id": "c", "data": {"json": json.loads(sealed)}},
        ],
    }
    got = delivered(delivery)
    assert [i for i, _ in got] == ["a", "b", "c"]
    assert got[0][1] == got[1][1] == sealed
    assert json.loads(got[2][1]) == json.loads(sealed)
    batch_v1 = {"messages~attach": [{"id": "p1", "message": json.loads(sealed)}]}
    batch_queue = {"messages": [{"id": "q1", "msg": sealed.decode()}]}
    assert delivered(batch_v1)[0][0] == "p1" and delivered(batch_queue)[0] == ("q1", sealed)
    assert delivered({"@type": "https://didcomm.org/messagepickup/2.0/status"}) == []


# ---------------------------------------------------------- recipient over HTTP


class FakeMediator:
    """Opens what a recipient sends and answers with `reply(request)`, authcrypted back."""

    def __init__(self) -> None:
        self.keys = KeyPair.generate()
        self.received: list[tuple[dict[str, Any], str | None]] = []

    def open(self, data: bytes) -> dict[str, Any]:
        msg, sender = open_with(self.keys, data)
        self.received.append((msg, sender))
        return msg

    def answer(self, request: dict[str, Any], sender: str, **body: Any) -> bytes:
        reply = {
            "@type": request["@type"].rsplit("/", 1)[0] + "/reply",
            "@id": Agent.new_id(),
            "~thread": {"thid": request["@id"]},
            **body,
        }
        return envelope.pack(json.dumps(reply).encode(), [sender], self.keys)

    def http(self) -> httpx.AsyncClient:
        def handle(request: httpx.Request) -> httpx.Response:
            msg = self.open(request.content)
            if msg["@type"].endswith("/noop"):
                return httpx.Response(202)
            sender = self.received[-1][1]
            assert sender is not None
            return httpx.Response(200, content=self.answer(msg, sender, echo=msg["@type"]))

        return httpx.AsyncClient(transport=httpx.MockTransport(handle))


CALLS: list[tuple[Callable[[Recipient], Awaitable[Any]], str, dict[str, Any]]] = [
    (lambda r: r.mediate_request(), "coordinate-mediation/1.0/mediate-request", {}),
    (
        lambda r: r.keylist_update(add=["did:key:zA"], remove=["B"]),
        "coordinate-mediation/1.0/keylist-update",
        {
            "updates": [
                {"recipient_key": "did:key:zA", "action": "add"},
                {"recipient_key": "B", "action": "remove"},
            ]
        },
    ),
    (lambda r: r.keylist_query(), "coordinate-mediation/1.0/keylist-query", {}),
    (
        lambda r: r.keylist_query(offset=2, limit=5),
        "coordinate-mediation/1.0/keylist-query",
        {"paginate": {"offset": 2, "limit": 5}},
    ),
    (lambda r: r.status(), "messagepickup/2.0/status-request", {}),
    (lambda r: r.status("K"), "messagepickup/2.0/status-request", {"recipient_key": "K"}),
    (lambda r: r.delivery_request(3), "messagepickup/2.0/delivery-request", {"limit": 3}),
    (
        lambda r: r.delivery_request(3, recipient_key="K"),
        "messagepickup/2.0/delivery-request",
        {"limit": 3, "recipient_key": "K"},
    ),
    (
        lambda r: r.messages_received(["m1", "m2"]),
        "messagepickup/2.0/messages-received",
        {"message_id_list": ["m1", "m2"]},
    ),
    (
        lambda r: r.live_delivery(False),
        "messagepickup/2.0/live-delivery-change",
        {"live_delivery": False},
    ),
    (lambda r: r.batch_pickup(4), "messagepickup/1.0/batch-pickup", {"batch_size": 4}),
    (lambda r: r.queue_status(), "queue/1.0/status-request", {}),
    (
        lambda r: r.queue_update(will_queue=False),
        "queue/1.0/status-update-request",
        {"update": {"will_queue": False}},
    ),
    (lambda r: r.queue_fetch(7), "queue/1.0/fetch-request", {"message_count_limit": 7}),
    (lambda r: r.ping(), "trust_ping/1.0/ping", {"response_requested": True}),
]


@pytest.mark.parametrize(("call", "suffix", "fields"), CALLS, ids=[c[1] + str(c[2]) for c in CALLS])
async def test_each_call_sends_one_authcrypted_message_and_returns_the_reply(
    call: Callable[[Recipient], Awaitable[Any]], suffix: str, fields: dict[str, Any]
) -> None:
    mediator = FakeMediator()
    client = mediator.http()
    async with Recipient(HttpTransport("http://m.test", client=client), mediator.keys.did_key) as r:
        reply = await call(r)
    await client.aclose()

    [(sent, sender)] = mediator.received
    assert sender == r.verkey
    assert sent["@type"] == "https://didcomm.org/" + suffix
    assert sent["~transport"] == {"return_route": "all"}
    assert {k: v for k, v in sent.items() if k not in ("@type", "@id", "~transport")} == fields
    assert reply["~thread"]["thid"] == sent["@id"] and reply["echo"] == sent["@type"]


async def test_noop_over_http_returns_what_came_back_or_none() -> None:
    mediator = FakeMediator()
    client = mediator.http()
    r = Recipient(HttpTransport("http://m.test", client=client), mediator.keys.verkey_b58)
    assert await r.noop() is None
    assert mediator.received[-1][0]["@type"] == "https://didcomm.org/noop/1.0/noop"
    await client.aclose()


async def test_http_errors_become_client_errors() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": "not an envelope", "code": "unreadable-envelope"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(refuse))
    r = Recipient(HttpTransport("http://m.test/", client=client), KeyPair.generate().verkey_b58)
    with pytest.raises(ClientError) as refused:
        await r.status()
    await client.aclose()
    assert (refused.value.status, refused.value.code) == (400, "unreadable-envelope")
    assert r.transport == "http" and r.inbox.empty()


# ------------------------------------------------------ recipient over WebSocket

Script = Callable[[ServerConnection, FakeMediator, dict[str, Any], str], Awaitable[None]]


@pytest.fixture
async def ws_mediator() -> AsyncIterator[tuple[str, FakeMediator, list[Script]]]:
    """A WebSocket "mediator"; each frame received is answered by the next script."""
    mediator = FakeMediator()
    scripts: list[Script] = []

    async def handler(ws: ServerConnection) -> None:
        async for frame in ws:
            msg = mediator.open(frame.encode() if isinstance(frame, str) else frame)
            sender = mediator.received[-1][1]
            assert sender is not None
            await scripts.pop(0)(ws, mediator, msg, sender)

    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}", mediator, scripts


def _live_delivery(mediator: FakeMediator, to: str, inner: bytes) -> bytes:
    delivery = {
        "@type": "https://didcomm.org/messagepickup/2.0/delivery",
        "@id": Agent.new_id(),
        "~attach": [{"@id": "q-1", "data": {"base64": base64.urlsafe_b64encode(inner).decode()}}],
    }
    return envelope.pack(json.dumps(delivery).encode(), [to], mediator.keys)


async def test_ws_replies_are_matched_by_thread_and_the_rest_goes_to_the_inbox(
    ws_mediator: tuple[str, FakeMediator, list[Script]],
) -> None:
    base, mediator, scripts = ws_mediator
    async with Recipient(WsTransport(base), mediator.keys.verkey_b58) as r:
        key = r.add_key()
        drained = envelope.pack(b'{"drained": 1}', [key], KeyPair.generate())
        live_inner = envelope.pack(b'{"live": 1}', [key], KeyPair.generate())

        async def busy(ws: ServerConnection, m: FakeMediator, msg: dict[str, Any], s: str) -> None:
            await ws.send(_live_delivery(m, s, live_inner).decode())  # not a reply: no thread
            await ws.send(drained.decode())  # a queued message, raw, for a recipient key
            await ws.send(m.answer({"@type": "x/y", "@id": "someone-else"}, s).decode())
            await ws.send(m.answer(msg, s, message_count=0).decode())

        scripts.append(busy)
        status = await r.status()

        assert status["message_count"] == 0 and status["~thread"]["thid"]
        live = await r.next_message()
        assert live["@type"].endswith("/delivery")
        assert [r.open_forwarded(body) for _, body in delivered(live)] == [{"live": 1}]
        assert r.open_forwarded(await r.next_frame()) == {"drained": 1}
        assert (await r.next_message())["~thread"]["thid"] == "someone-else"
        assert r.inbox.empty()


async def test_ws_problem_reports_answer_by_pthid(
    ws_mediator: tuple[str, FakeMediator, list[Script]],
) -> None:
    base, mediator, scripts = ws_mediator

    async def report(ws: ServerConnection, m: FakeMediator, msg: dict[str, Any], s: str) -> None:
        problem = {
            "@type": "https://didcomm.org/notification/1.0/problem-report",
            "@id": Agent.new_id(),
            "~thread": {"pthid": msg["@id"]},
            "description": {"en": "no", "code": "not-granted"},
        }
        await ws.send(envelope.pack(json.dumps(problem).encode(), [s], m.keys).decode())

    scripts.append(report)
    async with Recipient(base, mediator.keys.verkey_b58, "ws") as r:
        answer = await r.delivery_request(1)
    assert answer["description"]["code"] == "not-granted"


async def test_ws_error_frames_fail_the_waiting_request(
    ws_mediator: tuple[str, FakeMediator, list[Script]],
) -> None:
    base, mediator, scripts = ws_mediator

    async def refuse(ws: ServerConnection, m: FakeMediator, msg: dict[str, Any], s: str) -> None:
        await ws.send(json.dumps({"error": "storage unavailable", "code": "storage-unavailable"}))

    async def silent(ws: ServerConnection, m: FakeMediator, msg: dict[str, Any], s: str) -> None:
        return None

    async def hang_up(ws: ServerConnection, m: FakeMediator, msg: dict[str, Any], s: str) -> None:
        await ws.close()

    scripts.extend([refuse, silent, hang_up])
    async with Recipient(WsTransport(base), mediator.keys.verkey_b58, timeout=0.3) as r:
        with pytest.raises(ClientError) as refused:
            await r.status()
        assert refused.value.code == "storage-unavailable" and r.inbox.empty()
        with pytest.raises(TimeoutError):
            await r.ping()
        with pytest.raises(ClientError, match="closed"):
            await r.ping()
        assert not r.ws.connected


async def test_ws_transport_alone_queues_every_frame(
    ws_mediator: tuple[str, FakeMediator, list[Script]],
) -> None:
    base, mediator, scripts = ws_mediator
    agent = Agent(mediator.keys.verkey_b58)

    async def two(ws: ServerConnection, m: FakeMediator, msg: dict[str, Any], s: str) -> None:
        await ws.send(m.answer(msg, s, n=1).decode())
        await ws.send(b'{"error": "binary frames arrive as bytes too"}')

    scripts.append(two)
    assert ws_url(base).startswith("ws://127.0.0.1:") and ws_url(base).endswith("/")
    async with WsTransport(ws_url(base)) as ws:
        await ws.send(agent.pack(message("trust_ping/1.0/ping")))
        reply, sender = agent.unpack(await ws.receive(5))
        assert reply["n"] == 1 and sender == mediator.keys.verkey_b58
        assert json.loads(await ws.receive(5))["error"].startswith("binary")
        with pytest.raises(TimeoutError):
            await ws.receive(0.05)
    with pytest.raises(ClientError, match="not connected"):
        await ws.receive(0.05)


async def test_ws_raw_sends_leave_their_answers_in_the_inbox(
    ws_mediator: tuple[str, FakeMediator, list[Script]],
) -> None:
    base, mediator, scripts = ws_mediator

    async def echo(ws: ServerConnection, m: FakeMediator, msg: dict[str, Any], s: str) -> None:
        await ws.send(m.answer(msg, s).decode())

    scripts.extend([echo, echo])
    async with Recipient(WsTransport(base), mediator.keys.verkey_b58) as r:
        assert await r.send(message("trust_ping/1.0/ping", route=None)) is None
        first = await r.next_message()
        await r.ws.send(r.pack(message("trust_ping/1.0/ping")))
        second = await r.next_message()
    assert first["@type"] == second["@type"] == "https://didcomm.org/trust_ping/1.0/reply"


# ------------------------------------------------------------- a pluggable network


async def test_the_network_is_whatever_client_and_connector_are_given(
    ws_mediator: tuple[str, FakeMediator, list[Script]],
) -> None:
    """HTTP through the httpx client given, WebSockets through the connector given (the
    suites' app in process); the defaults, real sockets, stay for everyone else."""
    base, mediator, scripts = ws_mediator
    invitation = {
        "invitation_url": "http://m.test/?oob=x",
        "invitation": {"services": [{"recipientKeys": [mediator.keys.did_key]}]},
    }
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        if request.method == "GET":
            return httpx.Response(200, json=invitation)
        msg = mediator.open(request.content)
        sender = mediator.received[-1][1]
        assert sender is not None
        return httpx.Response(200, content=mediator.answer(msg, sender))

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    assert await mediator_key("http://m.test/", client=client) == mediator.keys.verkey_b58
    assert (await fetch_invitation("http://m.test", client=client)) == invitation
    async with Recipient("http://m.test", mediator.keys.verkey_b58, client=client) as r:
        await r.ping()
    assert asked == ["http://m.test/invitation"] * 2 + ["http://m.test/"]
    assert not client.is_closed  # not the recipient's to close
    await client.aclose()

    opened: list[WsConnection] = []

    async def connector(url: str) -> WsConnection:
        assert url == ws_url(base)
        opened.append(await connect_websocket(url))
        return opened[-1]

    async def hang_up(ws: ServerConnection, m: FakeMediator, msg: dict[str, Any], s: str) -> None:
        await ws.close(code=1008)

    scripts.append(hang_up)
    async with Recipient(base, mediator.keys.verkey_b58, "ws", connector=connector) as r:
        assert r.ws.connection is opened[0]
        with pytest.raises(ClientError, match="closed"):
            await r.ping()
    assert opened[0].close_code == 1008
