"""Real DIDComm v2 wallets, unmodified, use our mediator as they would any v2 mediator:
Veramo 7 agents get mediation (coordinate-mediation 3.0 and 2.0), register their DIDs,
send each other basic messages through us (Veramo wraps the routing 2.0 forward itself)
and pick them up with Pickup 3.0; Identus SDK 7 agents get mediation (2.0), announce a
routed DID (its keylist-update answer waits in the queue) and receive each other's
messages live over the WebSocket or by polling, also messages that waited while they were
offline. Each once on one node and once through a balancer that sends each connection to
the next of two nodes (the socket on one, forwards answered by the other)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import orjson
import pytest

from mediator.client.recipient import delivered
from mediator.didcomm import did_peer
from mediator.didcomm.keys import ED25519_MULTICODEC, X25519_MULTICODEC, KeyPair, b58encode
from mediator.didcomm.v2.jwk import PrivateKey
from mediator.didcomm.v2.unpack import unpack
from tests.didcomm_peer import Peer, forward, mediator_key
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


async def test_a_dual_stack_wallet_gets_a_veramo_message_and_a_v1_forward_in_one_mailbox(
    mediator: Node,
) -> None:
    """The wallet registered its recipient key over coordinate-mediation 1.0; its v2 DID
    names the same key's X25519 twin and routes through the mediator's DID. A real Veramo
    sender's message to that DID and a v1 forward to the key both reach the one mailbox,
    each once, and Pickup 2.0 hands out both."""
    med = await mediator_key(mediator.base)
    mediator_did = await v2_did(mediator.base)
    async with Peer(mediator.base, med) as wallet:
        key = await wallet.mediate()
        twin = wallet.recipient_keys[key]
        did = dual_stack_did(twin, mediator_did)
        assert (await forward(mediator.base, med, key, {"from": "v1"})).status_code == 202
        async with V2Agent("veramo", "sender") as veramo:
            await veramo.request("start", mediator_did=mediator_did)
            sent = await veramo.request("send", to=did, content="from veramo")
            assert sent["delivered_to_mediator"], sent
        delivery = await wallet.delivery_request(limit=10)
        got = delivered(delivery)
        assert len(got) == 2, delivery
        assert wallet.open(got[0][1]) == {"from": "v1"}
        secret = PrivateKey.from_x25519_bytes(twin.x25519_secret)
        opened = unpack(orjson.loads(got[1][1]), lambda kid: secret).message
        assert opened["body"]["content"] == "from veramo" and opened["to"] == [did]
        await wallet.messages_received([i for i, _ in got])
        assert (await wallet.status())["message_count"] == 0


def dual_stack_did(keys: KeyPair, mediator_did: str) -> str:
    """A did:peer:2 of a v1 recipient key (its X25519 twin to agree, itself to sign) whose
    DIDComm service is the mediator's DID (DIDComm v2's DID as endpoint)."""
    x = "z" + b58encode(X25519_MULTICODEC + keys.x25519_public)
    ed = "z" + b58encode(ED25519_MULTICODEC + keys.verkey)
    service = did_peer.service_element({"t": "dm", "s": {"uri": mediator_did, "a": ["didcomm/v2"]}})
    return f"did:peer:2.E{x}.V{ed}.{service}"
