"""Real DIDComm v2 wallets, unmodified, use our mediator as they would any v2 mediator:
Veramo 7 agents get mediation (coordinate-mediation 3.0 and 2.0), register their DIDs,
send each other basic messages through us (Veramo wraps the routing 2.0 forward itself)
and pick them up with Pickup 3.0; Identus SDK 7 agents get mediation (2.0), announce a
routed DID (its keylist-update answer waits in the queue) and receive each other's
messages live over the WebSocket or by polling, also messages that waited while they were
offline. Each once on one node and once through a balancer that sends each connection to
the next of two nodes (the socket on one, forwards answered by the other). A dual-stack
wallet gets a real Credo 0.7.0 agent's (v1) and a real Veramo agent's (v2) messages in one
mailbox."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import orjson
import pytest

from mediator.client.recipient import delivered
from mediator.didcomm import did_peer, envelope
from mediator.didcomm.did_doc import PeerDoc, parse_doc
from mediator.didcomm.keys import (
    ED25519_MULTICODEC,
    X25519_MULTICODEC,
    KeyPair,
    b58encode,
    verkey_to_did_key,
)
from mediator.didcomm.v2.jwk import PrivateKey
from mediator.didcomm.v2.unpack import unpack
from mediator.embedded import free_port
from tests.didcomm_peer import ENVELOPE, Peer, mediator_key
from tests.interop.credo import CredoAgent
from tests.interop.settled import invitation_key
from tests.interop.v2peers import V2Agent
from tests.kube.service import Service
from tests.servers import Node

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def mediator(redis_url: str) -> Iterator[Node]:
    node = Node(redis_url)
    node.start()
    yield node
    node.stop()


@pytest.fixture(scope="module")
def balanced(redis_url: str) -> Iterator[str]:
    """Two nodes behind one round-robin address (tests/kube/service.py); its base URL."""
    with Service() as service:
        nodes = [Node(redis_url, MEDIATOR_ENDPOINT=service.base) for _ in range(2)]
        for node in nodes:
            node.start()
            service.add("127.0.0.1", node.port)
        yield service.base
        for node in nodes:
            node.stop()


async def v2_did(base: str) -> str:
    async with httpx.AsyncClient(base_url=base) as client:
        return str((await client.get("/v2/invitation")).json()["did"])


async def _exchange(base: str, mediation: str) -> None:
    did = await v2_did(base)
    async with V2Agent("veramo", "a") as a, V2Agent("veramo", "b") as b:
        a_did = (await a.request("start", mediator_did=did, mediation=mediation))["did"]
        b_did = (await b.request("start", mediator_did=did, mediation=mediation))["did"]
        for n in range(3):
            sent = await b.request("send", to=a_did, content=f"to a {n}")
            assert sent["delivered_to_mediator"], sent
        got = await a.request("pickup", normalise=False)
        assert got["veramo_native"], got  # Veramo's own handler read our deliveries
        assert sorted(got["contents"]) == ["to a 0", "to a 1", "to a 2"]
        await a.request("send", to=b_did, content="to b")
        back = await b.request("pickup", normalise=False)
        assert back["contents"] == ["to b"]
        after = await a.request("pickup", normalise=False)
        assert after["contents"] == []
        assert after["status"]["body"]["message_count"] == 0  # acknowledged, not just hidden


@pytest.mark.parametrize("mediation", ["3.0", "2.0"])
async def test_veramo_wallets_message_each_other_through_the_mediator(
    mediator: Node, mediation: str
) -> None:
    await _exchange(mediator.base, mediation)


async def test_veramo_wallets_with_a_mediator_that_lists_nist_keys(redis_url: str) -> None:
    """MEDIATOR_V2_NIST_KEYS: our DID has P-256 and P-384 keys after X25519, and Veramo
    (which reads such a did:peer:2, unlike Identus 7) works with it unchanged."""
    node = Node(redis_url, MEDIATOR_V2_NIST_KEYS="true")
    node.start()
    try:
        assert ".EzDn" in await v2_did(node.base)  # a P-256 multikey is listed
        await _exchange(node.base, "3.0")
    finally:
        node.stop()


async def test_veramo_wallets_through_a_balancer_over_two_nodes(balanced: str) -> None:
    await _exchange(balanced, "3.0")


async def _identus(base: str, *, live: bool, offline: bool = False) -> None:
    did = await v2_did(base)
    start = {"mediator_did": did, "live": live, "poll_ms": 500, "fetch": not offline}
    async with V2Agent("identus", "a") as a, V2Agent("identus", "b") as b:
        a_did = (await a.request("start", name="A", **start))["did"]
        b_did = (await b.request("start", name="B", **start))["did"]
        for n in range(3):
            await b.request("send", to=a_did, content=f"to a {n}")
        await a.request("send", to=b_did, content="to b")
        if offline:  # the messages waited in the mailboxes: now the wallets come online
            for agent in (a, b):
                await agent.request("fetch", live=live, poll_ms=500)
        got = await a.request("wait", count=3, timeout_ms=30_000, timeout=45)
        assert not got["timed_out"], got
        assert sorted(m["content"] for m in got["messages"]) == ["to a 0", "to a 1", "to a 2"]
        back = await b.request("wait", count=1, timeout_ms=30_000, timeout=45)
        assert [m["content"] for m in back["messages"]] == ["to b"]


@pytest.mark.parametrize("live", [True, False], ids=["live", "polling"])
@pytest.mark.parametrize("offline", [False, True], ids=["online", "offline-first"])
async def test_identus_wallets_message_each_other_through_the_mediator(
    mediator: Node, live: bool, offline: bool
) -> None:
    await _identus(mediator.base, live=live, offline=offline)


async def test_identus_wallets_live_through_a_balancer_over_two_nodes(balanced: str) -> None:
    await _identus(balanced, live=True)


async def test_a_dual_stack_wallet_gets_credo_and_veramo_messages_in_one_mailbox(
    mediator: Node,
) -> None:
    """The wallet registered its recipient key over coordinate-mediation 1.0 and connected to
    a real Credo 0.7.0 agent with it (DID Exchange 1.1: its did:peer:2 routes through the
    mediator, so Credo's response comes through the mailbox too); its v2 DID names the
    same key's X25519 twin and routes through the mediator's DID. Credo's basic message
    (v1) and a real Veramo sender's message (v2) reach the one mailbox, each once, and
    Pickup 2.0 hands out both."""
    med = await mediator_key(mediator.base)
    mediator_did = await v2_did(mediator.base)
    async with Peer(mediator.base, med) as wallet:
        key = await wallet.mediate()
        twin = wallet.recipient_keys[key]
        did = dual_stack_did(twin, mediator_did)
        credo = CredoAgent("dual-stack-sender", version="0.7.0", inbound_port=free_port())
        try:
            await credo.start()
            connection = await _credo_connects(credo, wallet, key, mediator.base, med)
            await credo.send(connection, "from credo")
        finally:
            await credo.stop()
        async with V2Agent("veramo", "sender") as veramo:
            await veramo.request("start", mediator_did=mediator_did)
            sent = await veramo.request("send", to=did, content="from veramo")
            assert sent["delivered_to_mediator"], sent
        delivery = await wallet.delivery_request(limit=10)
        got = delivered(delivery)
        assert len(got) == 2, delivery  # each once
        v1 = wallet.open(got[0][1])
        assert v1["@type"].endswith("basicmessage/1.0/message") and v1["content"] == "from credo"
        secret = PrivateKey.from_x25519_bytes(twin.x25519_secret)
        opened = unpack(orjson.loads(got[1][1]), lambda kid: secret).message
        assert opened["body"]["content"] == "from veramo" and opened["to"] == [did]
        await wallet.messages_received([i for i, _ in got])
        assert (await wallet.status())["message_count"] == 0


async def _credo_connects(credo: CredoAgent, wallet: Peer, key: str, base: str, med: str) -> str:
    """The wallet, as the owner of recipient key `key`, answers Credo's invitation with a
    DID Exchange 1.1 request (a did:peer:2 of that key whose service is the mediator's
    endpoint with its routing key), picks Credo's response up from its mailbox and
    completes; Credo's id of the connection."""
    invitation = await credo.command("create-invitation", multiUse=False)
    url, oob_id = invitation["url"], invitation["outOfBandId"]
    encoded = parse_qs(urlsplit(url).query)["oob"][0]
    oob = orjson.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    keys = wallet.recipient_keys[key]
    routing = verkey_to_did_key(med)  # as a DID URL to its key: how Credo reads one
    ours = did_peer.numalgo2_did(keys, [base], (f"{routing}#{routing.rsplit(':', 1)[1]}",))
    request_id = wallet.new_id()
    thread = {"thid": request_id, "pthid": oob["@id"]}
    request = {"@type": "https://didcomm.org/didexchange/1.1/request", "@id": request_id,
               "~thread": thread, "label": "dual-stack wallet", "did": ours}  # fmt: skip
    endpoint = oob["services"][0]["serviceEndpoint"]
    await _post(endpoint, request, invitation_key(url), keys)

    delivery = await _delivery_within(wallet, 30)
    assert delivery["@type"].endswith("/delivery"), f"no response: {credo.log_tail()}"
    [(message_id, sealed)] = delivered(delivery)
    response = wallet.open(sealed)
    assert response["@type"].endswith("didexchange/1.1/response"), response
    assert response["~thread"]["thid"] == request_id
    await wallet.messages_received([message_id])
    theirs = _their_doc(response)
    complete = {"@type": "https://didcomm.org/didexchange/1.1/complete", "@id": wallet.new_id(),
                "~thread": thread}  # fmt: skip
    await _post(theirs.services[0].endpoint, complete, theirs.recipient_key, keys)

    for _ in range(100):
        made = [c for c in await credo.connections() if c["outOfBandId"] == oob_id]
        if made and made[0]["state"] == "completed":
            return str(made[0]["id"])
        await asyncio.sleep(0.1)
    raise AssertionError(f"Credo's connection never completed: {made}\n{credo.log_tail()}")


async def _post(endpoint: str, message: dict[str, Any], to: str, keys: KeyPair) -> None:
    """`message` authcrypted from `keys` to verkey `to`, posted to a peer's endpoint."""
    packed = envelope.pack(orjson.dumps(message), [to], keys)
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await http.post(endpoint, content=packed, headers=ENVELOPE)
    assert answer.status_code in (200, 202), answer.text


async def _delivery_within(wallet: Peer, seconds: float) -> dict[str, Any]:
    """The wallet's next Pickup 2.0 delivery (Credo answers through the mediator a moment
    after it accepted the request)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        reply = await wallet.delivery_request(limit=10)
        if reply["@type"].endswith("/delivery") or loop.time() > deadline:
            return reply
        await asyncio.sleep(0.2)


def _their_doc(response: dict[str, Any]) -> PeerDoc:
    """The DIDComm v1 view of the responder's DID: a did:peer:2/4 carries its document, a
    did:peer:1 comes with `did_doc~attach`."""
    did = response["did"]
    if did_peer.numalgo(did) in (2, 4):
        return parse_doc(did_peer.resolve(did), did)
    data = response["did_doc~attach"]["data"]
    raw = data["json"] if "json" in data else orjson.loads(base64.b64decode(data["base64"] + "=="))
    return parse_doc(raw, did)


def dual_stack_did(keys: KeyPair, mediator_did: str) -> str:
    """A did:peer:2 of a v1 recipient key (its X25519 twin to agree, itself to sign) whose
    DIDComm service is the mediator's DID (DIDComm v2's DID as endpoint)."""
    x = "z" + b58encode(X25519_MULTICODEC + keys.x25519_public)
    ed = "z" + b58encode(ED25519_MULTICODEC + keys.verkey)
    service = did_peer.service_element({"t": "dm", "s": {"uri": mediator_did, "a": ["didcomm/v2"]}})
    return f"did:peer:2.E{x}.V{ed}.{service}"
