"""DIDComm v2 wallets on the same node, endpoint and queues as v1 ones (issue 27): the v2
invitation, coordinate-mediation 2.0/3.0, routing 2.0 forwards, Pickup 3.0/4.0 over HTTP,
a dual-stack wallet that gets v1 and v2 forwards in one mailbox, and bad v2 input refused
with a clear answer. Against the app in process (conftest's dc_app), with the v2 wallet of
tests/didcomm_v2_wallet.py."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from mediator.didcomm.keys import KeyPair, verkey_to_did_key
from mediator.didcomm.v2 import dids, jwe
from mediator.didcomm.v2.identity import MediatorV2
from mediator.didcomm.v2.jwk import PrivateKey, PublicKey
from mediator.didcomm.v2.unpack import pack, unpack
from mediator.engine import keys
from mediator.storage.clients import RedisClient
from tests.didcomm_peer import Peer, forward, message
from tests.didcomm_v2_wallet import (
    ENCRYPTED,
    WalletV2,
    forward_of,
    forward_v2,
    mediator_did,
    sealed_for,
    v2,
    x25519_did_key,
)
from tests.eventually import eventually
from tests.inprocess import AppNode, AsgiWebSocket

pytestmark = pytest.mark.topology  # run again on Sentinel and Redis Cluster


@pytest.fixture
async def mdid(dc_app: AppNode) -> str:
    return await mediator_did(dc_app)


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _carried(attachment: dict[str, Any]) -> bytes:
    """What a delivered attachment holds: its JSON (what the mediator writes)."""
    return orjson.dumps(attachment["data"]["json"])


async def _ping_as(wallet: WalletV2, did: str, key: PublicKey | None) -> dict[str, Any]:
    """A trust ping encrypted to our `key` as `did#key-1` (a DID the test cannot resolve: a
    did:web, a short did:peer:4); the answer, checked to be authcrypted from that kid, and
    opened with the key the test knows."""
    assert key is not None
    message = {**v2("trust-ping/2.0/ping", return_route="all"), "from": wallet.did, "to": [did]}
    sealed = jwe.encrypt(
        orjson.dumps(message),
        [(f"{did}#key-1", key)],
        sender=(f"{wallet.did}#key-1", wallet.agreement),
    )
    answer = await wallet.post(orjson.dumps(sealed))
    assert answer.status_code == 200
    parsed = jwe.parse(answer.content)
    assert parsed.sender_kid == f"{did}#key-1"
    opened: dict[str, Any] = orjson.loads(
        parsed.decrypt(f"{wallet.did}#key-1", wallet.agreement, key)
    )
    return opened


def _delivered(wallet: WalletV2, delivery: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages a delivery carried, opened by the wallet (each a basic message)."""
    return [wallet.open(_carried(a))["body"]["content"] for a in delivery["attachments"]]


async def test_the_v2_invitation_names_the_mediators_did_with_both_endpoints(
    dc_app: AppNode, mdid: str
) -> None:
    async with dc_app.client() as client:
        answer = (await client.get("/v2/invitation")).json()
    invitation = answer["invitation"]
    assert invitation["type"] == "https://didcomm.org/out-of-band/2.0/invitation"
    assert invitation["from"] == mdid and invitation["body"]["goal_code"] == "request-mediate"
    assert answer["invitation_url"].startswith(dc_app.base + "?_oob=")
    oob = orjson.loads(_b64(answer["invitation_url"].split("_oob=")[1]))
    assert oob == invitation
    doc = dids.resolve(mdid)
    uris = [s.uri for s in doc.services]
    assert uris[0] == dc_app.base and uris[1].startswith("ws")
    # X25519 alone by default (MEDIATOR_V2_NIST_KEYS lists P-256 and P-384 after it).
    assert [doc.kid(k) for k in doc.agreement] == [f"{mdid}#key-1"]
    assert [doc.kid(k) for k in doc.authentication] == [f"{mdid}#key-2"]


async def test_mediation_keylist_forward_and_pickup_3(dc_app: AppNode, mdid: str) -> None:
    wallet = WalletV2(dc_app, mdid)
    grant = await wallet.mediate()
    assert grant["body"]["routing_did"] == mdid  # 2.0: one string (Identus reads it so)
    assert grant["thid"] and grant["from"] == mdid and grant["to"] == [wallet.did]
    again = await wallet.send(
        "coordinate-mediation/2.0/keylist-update",
        {"updates": [{"recipient_did": wallet.did, "action": "add"},
                     {"recipient_did": "did:peer:2.nonsense", "action": "add"}]},
    )  # fmt: skip
    assert again is not None
    assert [u["result"] for u in again["body"]["updated"]] == ["no_change", "client_error"]
    listed = await wallet.send("coordinate-mediation/2.0/keylist-query", {})
    assert listed is not None and listed["body"]["keys"] == [{"recipient_did": wallet.did}]

    for n in range(2):
        sent = await forward_v2(dc_app, mdid, wallet.did, sealed_for(wallet.did, {"n": n}))
        assert sent.status_code == 202 and sent.headers["x-mediator-queued"] == "1"
    status = await wallet.send("messagepickup/3.0/status-request")
    assert status is not None and status["type"].endswith("messagepickup/3.0/status")
    assert status["body"]["message_count"] == 2 and status["body"]["live_delivery"] is False
    assert abs(status["body"]["newest_received_time"] - time.time()) < 60  # seconds in 3.0
    delivery = await wallet.send("messagepickup/3.0/delivery-request", {"limit": 10})
    assert delivery is not None and delivery["type"].endswith("/delivery")
    assert _delivered(wallet, delivery) == [{"n": 0}, {"n": 1}]
    ids = [a["id"] for a in delivery["attachments"]]
    after = await wallet.send("messagepickup/3.0/messages-received", {"message_id_list": ids})
    assert after is not None and after["body"]["message_count"] == 0
    empty = await wallet.send("messagepickup/3.0/delivery-request", {"limit": 10})
    assert empty is not None and empty["type"].endswith("/status")  # 3.0: a status


async def test_pickup_4_answers_an_empty_queue_with_an_empty_delivery_and_ms_times(
    dc_app: AppNode, mdid: str
) -> None:
    wallet = WalletV2(dc_app, mdid)
    await wallet.mediate()
    empty = await wallet.send("message-pickup/4.0/delivery-request", {"message_count_limit": 5})
    assert empty is not None and empty["type"] == "https://didcomm.org/message-pickup/4.0/delivery"
    assert empty["attachments"] == []
    await forward_v2(dc_app, mdid, wallet.did, sealed_for(wallet.did, {"v": 4}))
    status = await wallet.send("message-pickup/4.0/status-request", {"recipient_did": wallet.did})
    assert status is not None and status["body"]["message_count"] == 1
    assert status["body"]["recipient_did"] == wallet.did
    assert "longest_waited_seconds" not in status["body"]
    assert abs(status["body"]["oldest_received_time"] - time.time() * 1000) < 60_000
    got = await wallet.send("message-pickup/4.0/delivery-request", {"message_count_limit": 1})
    assert got is not None and _delivered(wallet, got) == [{"v": 4}]


async def test_coordinate_mediation_3_answers_routing_did_as_a_list(
    dc_app: AppNode, mdid: str
) -> None:
    wallet = WalletV2(dc_app, mdid)
    grant = await wallet.send("coordinate-mediation/3.0/mediate-request")
    assert grant is not None and grant["body"]["routing_did"] == [mdid]
    update = await wallet.send(
        "coordinate-mediation/3.0/recipient-update",
        {"updates": [{"recipient_did": wallet.did, "action": "add"}]},
    )
    assert update is not None and update["type"].endswith("3.0/recipient-update-response")
    query = await wallet.send("coordinate-mediation/3.0/recipient-query", {})
    assert query is not None and query["body"]["dids"] == [{"recipient_did": wallet.did}]
    removed = await wallet.send(
        "coordinate-mediation/3.0/recipient-update",
        {"updates": [{"recipient_did": wallet.did, "action": "remove"}]},
    )
    assert removed is not None and removed["body"]["updated"][0]["result"] == "success"
    gone = await forward_v2(dc_app, mdid, wallet.did, sealed_for(wallet.did, {}))
    assert gone.status_code == 404 and gone.json()["code"] == "unknown-recipient"


async def test_an_answer_without_return_route_waits_in_the_queue(
    dc_app: AppNode, mdid: str
) -> None:
    """Identus sends keylist-update without return_route and picks the answer up."""
    wallet = WalletV2(dc_app, mdid)
    await wallet.send("coordinate-mediation/2.0/mediate-request")
    update = {"updates": [{"recipient_did": wallet.did, "action": "add"}]}
    assert await wallet.send("coordinate-mediation/2.0/keylist-update", update, route=False) is None
    delivery = await wallet.send("messagepickup/3.0/delivery-request", {"limit": 5})
    assert delivery is not None and len(delivery["attachments"]) == 1
    answer = wallet.open(_carried(delivery["attachments"][0]))
    assert answer["type"].endswith("/keylist-update-response")
    assert answer["body"]["updated"][0]["result"] == "success"


async def test_a_dual_stack_wallet_gets_v1_and_v2_forwards_in_one_mailbox(
    dc_app: AppNode, med: str, mdid: str
) -> None:
    """Its v1 connection key is its v2 DID's key; its recipient key is registered as a v1
    verkey and again as an X25519 did:key: one recipient, one queue, either pickup."""
    async with Peer(dc_app, med) as peer:
        recipient = await peer.mediate()
        wallet = WalletV2(dc_app, mdid, peer.keys)
        twin = x25519_did_key(peer.recipient_keys[recipient])
        grant = await wallet.send("coordinate-mediation/2.0/mediate-request")
        assert grant is not None and grant["type"].endswith("/mediate-grant")
        update = await wallet.send(
            "coordinate-mediation/2.0/keylist-update",
            {"updates": [{"recipient_did": twin, "action": "add"}]},
        )
        assert update is not None and update["body"]["updated"][0]["result"] == "no_change"
        listed = await wallet.send("coordinate-mediation/2.0/keylist-query", {})
        assert listed is not None
        assert listed["body"]["keys"] == [{"recipient_did": twin}]  # as v2 last named it
        v1_listed = await peer.send(message("coordinate-mediation/1.0/keylist-query"))
        assert v1_listed is not None
        assert v1_listed["keys"] == [{"recipient_key": verkey_to_did_key(recipient)}]

        assert (await forward(dc_app, med, recipient, {"from": "v1"})).status_code == 202
        inner = pack(v2("basicmessage/2.0/message", {"content": {"from": "v2"}}), twin)
        assert (await forward_v2(dc_app, mdid, twin, inner)).status_code == 202
        status = await peer.status()
        assert status["message_count"] == 2  # Pickup 2.0 sees both
        delivery = await wallet.send("messagepickup/3.0/delivery-request", {"limit": 10})
        assert delivery is not None and len(delivery["attachments"]) == 2
        first, second = (_carried(a) for a in delivery["attachments"])
        assert peer.open(first) == {"from": "v1"}  # the v1 envelope, as it was forwarded
        twin_key = PrivateKey.from_x25519_bytes(peer.recipient_keys[recipient].x25519_secret)
        opened = unpack(orjson.loads(second), lambda kid: twin_key).message
        assert opened["body"]["content"] == {"from": "v2"}  # the v2 one, with its twin


async def test_a_forward_that_expired_or_names_nobody_is_refused(
    dc_app: AppNode, mdid: str
) -> None:
    wallet = WalletV2(dc_app, mdid)
    await wallet.mediate()
    inner = sealed_for(wallet.did, {})
    async with dc_app.client() as client:
        late = forward_of(mdid, wallet.did, inner, expires_time=int(time.time()) - 5)
        expired = await client.post("/", content=late, headers=ENCRYPTED)
        assert expired.status_code == 400 and expired.json()["code"] == "expired"
        stranger = WalletV2(dc_app, mdid).did
        nobody = await client.post(
            "/", content=forward_of(mdid, stranger, inner), headers=ENCRYPTED
        )
        assert nobody.status_code == 404
    status = await wallet.send("messagepickup/3.0/status-request")
    assert status is not None and status["body"]["message_count"] == 0


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"protected":"eyJhbGciOiJFQ0RILUVTK0EyNTZLVyJ9","ciphertext":"x","iv":"x","tag":"x"}',
         "unreadable-envelope"),
        (b'{"id":"1","type":"https://didcomm.org/routing/2.0/forward","body":{}}',
         "plaintext-refused"),
    ],
)  # fmt: skip
async def test_unreadable_v2_input_gets_a_json_400(app_a: AppNode, body: bytes, code: str) -> None:
    assert not app_a.settings.didcomm.allow_plaintext
    async with app_a.client() as client:
        response = await client.post("/", content=body, headers=ENCRYPTED)
    assert response.status_code == 400 and response.json()["code"] == code


async def test_pickup_before_mediation_and_live_mode_over_http_get_problem_reports(
    dc_app: AppNode, mdid: str
) -> None:
    wallet = WalletV2(dc_app, mdid)
    refused = await wallet.send("messagepickup/3.0/status-request")
    assert refused is not None and refused["type"].endswith("report-problem/2.0/problem-report")
    assert refused["body"]["code"] == "e.p.msg.mediation-not-granted"
    await wallet.mediate()
    live = await wallet.send("message-pickup/4.0/live-delivery-change", {"live_delivery": True})
    assert live is not None and live["type"].endswith("message-pickup/4.0/problem-report")
    assert live["body"]["code"] == "e.m.live-mode-not-supported"


async def test_trust_ping_and_discover_features(dc_app: AppNode, mdid: str) -> None:
    wallet = WalletV2(dc_app, mdid)
    pong = await wallet.send("trust-ping/2.0/ping", {"response_requested": True})
    assert pong is not None and pong["type"] == "https://didcomm.org/trust-ping/2.0/ping-response"
    query = {"queries": [{"feature-type": "protocol", "match": "https://didcomm.org/message*"}]}
    disclosed = await wallet.send("discover-features/2.0/queries", query)
    assert disclosed is not None
    ids = {d["id"] for d in disclosed["body"]["disclosures"]}
    assert ids == {
        "https://didcomm.org/messagepickup/3.0",
        "https://didcomm.org/message-pickup/4.0",
    }


async def test_v1_keeps_working_beside_v2(dc_app: AppNode, med: str) -> None:
    async with Peer(dc_app, med) as peer:
        key = await peer.mediate()
        await forward(dc_app, med, key, {"still": "v1"})
        assert (await peer.status())["message_count"] == 1
        reply = await peer.send(message("trust_ping/1.0/ping"))
        assert reply is not None and reply["@type"].endswith("trust_ping/1.0/ping_response")


async def _frame(socket: AsgiWebSocket, wallet: WalletV2) -> dict[str, Any]:
    data = await asyncio.wait_for(socket.receive(), 10)
    assert data is not None
    return wallet.open(data)


async def test_live_mode_over_a_websocket_delivers_and_waits_for_the_ack(
    dc_app: AppNode, mdid: str
) -> None:
    wallet = WalletV2(dc_app, mdid)
    await wallet.mediate()
    socket = await dc_app.open_websocket()
    try:
        live = v2("messagepickup/3.0/live-delivery-change", {"live_delivery": True})
        await socket.send(wallet.pack({**live, "return_route": "all"}).decode())
        status = await _frame(socket, wallet)
        assert status["type"].endswith("/status") and status["body"]["live_delivery"] is True
        sent = await forward_v2(dc_app, mdid, wallet.did, sealed_for(wallet.did, {"live": 1}))
        assert sent.status_code == 202
        delivery = await _frame(socket, wallet)
        assert delivery["type"] == "https://didcomm.org/messagepickup/3.0/delivery"
        assert _delivered(wallet, delivery) == [{"live": 1}]
        ids = [a["id"] for a in delivery["attachments"]]
        ack = v2("messagepickup/3.0/messages-received", {"message_id_list": ids})
        await socket.send(wallet.pack({**ack, "return_route": "all"}).decode())
        after = await _frame(socket, wallet)
        assert after["type"].endswith("/status") and after["body"]["message_count"] == 0
        # A status asked over HTTP says live mode is on: the wallet's socket is live.
        over_http = await wallet.send("messagepickup/3.0/status-request")
        assert over_http is not None and over_http["body"]["live_delivery"] is True
    finally:
        await socket.close()

    async def live_over_http() -> bool:
        status = await wallet.send("messagepickup/3.0/status-request")
        assert status is not None
        return bool(status["body"]["live_delivery"])

    assert await eventually(live_over_http, lambda live: not live, within=5) is False


async def test_a_sender_key_id_that_resolves_to_nothing_is_a_400(
    dc_app: AppNode, mdid: str
) -> None:
    """Found by fuzzing: an authcrypt `skid` naming a DID no method here resolves."""
    wallet = WalletV2(dc_app, mdid)
    sealed = orjson.loads(wallet.pack(v2("trust-ping/2.0/ping")))
    header = orjson.loads(_b64(sealed["protected"]))
    header["skid"] = "did:web:nowhere.example#key-1"
    sealed["protected"] = base64.urlsafe_b64encode(orjson.dumps(header)).rstrip(b"=").decode()
    response = await wallet.post(orjson.dumps(sealed))
    assert response.status_code == 400 and response.json()["code"] == "unreadable-envelope"
    assert "did:web:nowhere.example" in response.json()["error"]


async def test_a_v1_connection_granted_through_v2_is_kept_for_good(
    dc_app: AppNode, med: str, mdid: str, redis_client: RedisClient
) -> None:
    """A connection made by a handshake expires unless granted; granted by a v2
    mediate-request (the dual-stack wallet that never asked v1), it is kept like a v1 grant."""
    async with Peer(dc_app, med) as peer:
        record = keys.connection_keys(peer.keys.verkey_b58).record
        assert await redis_client.ttl(record) > 0  # the handshake's record, pending
        wallet = WalletV2(dc_app, mdid, peer.keys)
        grant = await wallet.send("coordinate-mediation/2.0/mediate-request")
        assert grant is not None and grant["type"].endswith("/mediate-grant")
        assert await redis_client.ttl(record) == -1
        pong = await peer.send(message("trust_ping/1.0/ping"))  # its v1 side still opens
        assert pong is not None and pong["@type"].endswith("ping_response")


async def test_metrics_count_v2_messages_apart(dc_app: AppNode, mdid: str) -> None:
    wallet = WalletV2(dc_app, mdid)
    await wallet.mediate()
    await forward_v2(dc_app, mdid, wallet.did, sealed_for(wallet.did, {}))
    async with dc_app.client() as client:
        text = (await client.get("/metrics")).text
    for series in (
        '{didcomm="v2",outcome="ok",type="routing/2/forward"}',
        '{didcomm="v2",outcome="ok",type="coordinate-mediation/2/mediate-request"}',
    ):
        assert "mediator_didcomm_messages_total" + series in text


@pytest.mark.parametrize("version", ["messagepickup/3.0", "message-pickup/4.0"])
async def test_live_mode_3_delivers_the_backlog_4_leaves_it_to_requests(
    dc_app: AppNode, mdid: str, version: str
) -> None:
    """Identus turns 3.0's live mode on and never asks for the queue: 3.0 delivers what
    waited; 4.0 says queued messages MUST still be requested."""
    wallet = WalletV2(dc_app, mdid)
    await wallet.mediate()
    await forward_v2(dc_app, mdid, wallet.did, sealed_for(wallet.did, {"waited": 1}))
    socket = await dc_app.open_websocket()
    try:
        live = v2(f"{version}/live-delivery-change", {"live_delivery": True})
        await socket.send(wallet.pack({**live, "return_route": "all"}).decode())
        status = await _frame(socket, wallet)
        assert status["body"]["live_delivery"] is True and status["body"]["message_count"] == 1
        if version.startswith("messagepickup"):
            delivery = await _frame(socket, wallet)
            assert _delivered(wallet, delivery) == [{"waited": 1}]
        else:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(socket.receive(), 0.3)
            await forward_v2(dc_app, mdid, wallet.did, sealed_for(wallet.did, {"new": 1}))
            delivery = await _frame(socket, wallet)
            assert _delivered(wallet, delivery) == [{"new": 1}]
    finally:
        await socket.close()


async def test_a_message_to_our_did_as_another_node_writes_it_is_read(
    dc_app: AppNode, mdid: str
) -> None:
    """Nodes not behind one address each name their own endpoints in the DID: the same key,
    another DID string. A wallet that got one node's DID is read by every node."""
    services = dc_app.app.state.didcomm.services
    other = MediatorV2(services.identity, ("http://other-node:8080", "ws://other-node:8080")).did
    assert other != mdid
    wallet = WalletV2(dc_app, other)
    pong = await wallet.send("trust-ping/2.0/ping")
    assert pong is not None and pong["type"].endswith("ping-response")
    stranger = MediatorV2(KeyPair.from_seed(bytes(32)), ("http://other-node:8080",)).did
    refused = await WalletV2(dc_app, stranger).post(WalletV2(dc_app, stranger).pack(v2("x/1.0/y")))
    assert refused.status_code == 400 and refused.json()["code"] == "unreadable-envelope"


async def test_did_web_serves_the_same_keys_and_its_key_id_is_read(
    redis_url: str, dc_app: AppNode
) -> None:
    """MEDIATOR_DID_WEB: /.well-known/did.json is the v2 identity as did:web, and a message
    encrypted to `did:web:<host>#key-1` is read; without it, 404."""
    node = await AppNode(redis_url, "web", did_web="mediator.example:8443").start()
    try:
        async with node.client() as client:
            document = (await client.get("/.well-known/did.json")).json()
            peer_did = (await client.get("/v2/invitation")).json()["did"]
        did = "did:web:mediator.example%3A8443"
        assert document["id"] == did
        assert document["keyAgreement"] == [f"{did}#key-1"]
        peer = dids.resolve(peer_did)
        methods = {
            m["id"].split("#")[1]: m["publicKeyMultibase"] for m in document["verificationMethod"]
        }
        assert [methods["key-1"]] == [k.multibase for k in peer.agreement]
        assert [s["serviceEndpoint"]["uri"] for s in document["service"]] == [
            s.uri for s in peer.services
        ]
        pong = await _ping_as(WalletV2(node, peer_did), did, peer.agreement[0].agreement)
        assert pong["type"].endswith("ping-response") and pong["from"] == did
    finally:
        await node.stop()
    async with dc_app.client() as client:  # a node without MEDIATOR_DID_WEB
        assert (await client.get("/.well-known/did.json")).status_code == 404


async def test_a_queued_message_is_delivered_byte_for_byte_when_json_would_change_it(
    dc_app: AppNode, mdid: str
) -> None:
    """A forwarded message with an integer past 64 bits: JSON would read it as a float and
    write it back changed, so it goes as base64 of its bytes."""
    wallet = WalletV2(dc_app, mdid)
    await wallet.mediate()
    inner = sealed_for(wallet.did, {"odd": 1})
    odd = orjson.dumps(inner)[:-1] + b',"x":' + b"9" * 40 + b"}"
    outer = v2("routing/2.0/forward", {"next": wallet.did}, to=[mdid])
    outer["attachments"] = [{"id": "a", "data": {"base64": base64.urlsafe_b64encode(odd).decode()}}]
    async with dc_app.client() as client:
        sent = await client.post("/", content=orjson.dumps(pack(outer, mdid)), headers=ENCRYPTED)
    assert sent.status_code == 202, sent.text
    delivery = await wallet.send("messagepickup/3.0/delivery-request", {"limit": 1})
    assert delivery is not None
    data = delivery["attachments"][0]["data"]
    assert "json" not in data and _b64(data["base64"]) == odd


@pytest.fixture(scope="module")
async def nist_app(redis_url: str) -> AsyncIterator[AppNode]:
    """A node whose DIDs list the NIST keys (MEDIATOR_V2_NIST_KEYS)."""
    node = await AppNode(redis_url, "nist", v2_nist_keys=True).start()
    yield node
    await node.stop()


async def test_the_nist_keys_are_listed_after_x25519_when_asked(nist_app: AppNode) -> None:
    mdid = await mediator_did(nist_app)
    doc = dids.resolve(mdid)
    # X25519 first (a sender that takes the first key takes it), then P-256 and P-384.
    assert [doc.kid(k) for k in doc.agreement] == [f"{mdid}#key-{n}" for n in (1, 3, 4)]
    assert [k.agreement.crv for k in doc.agreement if k.agreement] == ["X25519", "P-256", "P-384"]
    assert [doc.kid(k) for k in doc.authentication] == [f"{mdid}#key-2"]
    async with nist_app.client() as client:
        peer4 = (await client.get("/v2/invitation", params={"did": "peer4"})).json()["did"]
        document = (await client.get(f"/v2/did/{peer4}")).json()
    assert document["keyAgreement"] == [f"{peer4}#key-{n}" for n in (1, 3, 4)]


@pytest.mark.parametrize("curve", ["P-256", "P-384"])
async def test_a_wallet_on_a_nist_curve_is_mediated_and_answered_on_its_curve(
    nist_app: AppNode, curve: str
) -> None:
    """A wallet whose key agreement key is P-256 or P-384 authcrypts to our key on its
    curve; we answer authcrypted from that key; forwards to it reach it."""
    dc_app, mdid = nist_app, await mediator_did(nist_app)
    wallet = WalletV2(dc_app, mdid, curve=curve)
    await wallet.mediate()
    ping = wallet.pack(v2("trust-ping/2.0/ping", {"response_requested": True}, return_route="all"))
    assert (
        orjson.loads(ping)["recipients"][0]["header"]["kid"]
        == f"{mdid}#key-{3 if curve == 'P-256' else 4}"
    )
    answer = await wallet.post(ping)
    assert answer.status_code == 200
    protected = orjson.loads(_b64(orjson.loads(answer.content)["protected"]))
    assert protected["alg"].startswith("ECDH-1PU") and protected["epk"]["crv"] == curve
    assert protected["skid"] == f"{mdid}#key-{3 if curve == 'P-256' else 4}"
    assert wallet.open(answer.content)["type"].endswith("trust-ping/2.0/ping-response")

    sent = await forward_v2(dc_app, mdid, wallet.did, sealed_for(wallet.did, {"on": curve}))
    assert sent.status_code == 202
    delivery = await wallet.send("messagepickup/3.0/delivery-request", {"limit": 10})
    assert delivery is not None and _delivered(wallet, delivery) == [{"on": curve}]


async def test_our_did_peer_4_resolves_and_messages_to_it_are_answered_from_it(
    dc_app: AppNode, mdid: str
) -> None:
    """The long-form did:peer:4 of the same keys: an invitation from it, both forms resolved
    at /v2/did/, and a message encrypted to either form answered from that form."""
    async with dc_app.client() as client:
        answer = (await client.get("/v2/invitation", params={"did": "peer4"})).json()
        long = answer["did"]
        short = long.rsplit(":", 1)[0]
        assert answer["invitation"]["from"] == long and long.startswith("did:peer:4")
        assert answer["dids"] == [mdid, long, short]
        by_short = await client.get(f"/v2/did/{short}")
        by_long = (await client.get(f"/v2/did/{long}")).json()
        assert (await client.get("/v2/did/did:peer:4zQmNotOurs")).status_code == 404
        bad = await client.get("/v2/invitation", params={"did": "peer9"})
        assert bad.status_code == 400 and bad.json()["code"] == "bad-request"
    assert by_short.status_code == 200
    assert by_short.headers["content-type"].startswith("application/did+json")
    document = by_short.json()
    assert document["id"] == short and document["alsoKnownAs"] == [long]
    assert by_long["id"] == long and by_long["alsoKnownAs"] == [short]
    assert document["keyAgreement"] == [f"{short}#key-1"]
    # The same keys as the did:peer:2's.
    peer2, peer4 = dids.resolve(mdid), dids.resolve(long)
    assert [k.agreement for k in peer4.agreement] == [k.agreement for k in peer2.agreement]
    assert [s.uri for s in peer4.services] == [s.uri for s in peer2.services]

    wallet = WalletV2(dc_app, long)
    pong = await wallet.send("trust-ping/2.0/ping", {"response_requested": True})
    assert pong is not None and pong["from"] == long
    assert (await _ping_as(wallet, short, peer4.agreement[0].agreement))["from"] == short
