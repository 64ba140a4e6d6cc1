"""Out-of-Band invitations, DID Exchange 1.0/1.1 and connections 1.0 against the app in
process (conftest's dc_app; app_b as a second node): what a requester sees, and that a
refused request changes nothing."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import base58
import httpx
import pytest

from mediator.client import Recipient
from mediator.client.transports import ClientError
from mediator.didcomm.did_doc import parse_doc
from mediator.didcomm.did_peer import numalgo2_did, resolve
from mediator.didcomm.keys import KeyPair, did_key_to_verkey
from mediator.didcomm.signatures import sign_attachment, verify_attachment, verify_connection
from tests.didcomm_peer import ENVELOPE, Peer
from tests.inprocess import AppNode

QUEUE = "didcomm:transport/queue"


def _decode_url_param(url: str, name: str) -> dict[str, Any]:
    value = url.split(f"?{name}=", 1)[1]
    return json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))


def _multihash(data: bytes) -> str:
    return "z" + base58.b58encode(b"\x12\x20" + hashlib.sha256(data).digest()).decode()


def _core_doc(keys: KeyPair, endpoint: str = QUEUE) -> dict[str, Any]:
    return {
        "@context": ["https://www.w3.org/ns/did/v1"],
        "verificationMethod": [
            {
                "id": "#key-1",
                "type": "Ed25519VerificationKey2018",
                "controller": "#id",
                "publicKeyBase58": keys.verkey_b58,
            }
        ],
        "authentication": ["#key-1"],
        "service": [
            {
                "id": "#didcomm-1",
                "type": "did-communication",
                "priority": 0,
                "recipientKeys": ["#key-1"],
                "routingKeys": [],
                "serviceEndpoint": endpoint,
            }
        ],
    }


def peer1(keys: KeyPair) -> tuple[str, dict[str, Any]]:
    """A did:peer:1 and its signed `did_doc~attach`, as Credo sends them."""
    payload = json.dumps(_core_doc(keys)).encode()
    did = "did:peer:1" + _multihash(payload)
    return did, {
        "@id": "a1",
        "mime-type": "application/json",
        "data": sign_attachment(payload, keys),
    }


def peer4(keys: KeyPair) -> str:
    doc = json.dumps(_core_doc(keys), separators=(",", ":")).encode()
    encoded = "z" + base58.b58encode(b"\x80\x04" + doc).decode()
    return f"did:peer:4{_multihash(encoded.encode())}:{encoded}"


def request(version: str, did: str, attach: dict[str, Any] | None = None, **extra: Any) -> dict:
    msg: dict[str, Any] = Recipient.message(f"didexchange/{version}/request", label="t", did=did)
    if attach is not None:
        msg["did_doc~attach"] = attach
    msg.update(extra)
    return msg


def wallet_of(node: AppNode, med: str, transport: str, http: httpx.AsyncClient) -> Recipient:
    """The project's plain client, reaching the app in process through `http`."""
    return Recipient(node.base, med, transport, client=http, connector=node.open_websocket)


async def _peer(node: AppNode, med: str, transport: str = "http") -> Peer:
    peer = Peer(node, med, transport)
    await peer._open_channel()
    return peer


# ------------------------------------------------------------------ invitation


async def test_invitation_offers_the_handshakes_with_one_service_and_a_legacy_form(
    dc_app: AppNode, med: str
) -> None:
    async with dc_app.client() as client:
        answer = (await client.get("/invitation")).json()
    oob = answer["invitation"]
    assert oob["@type"] == "https://didcomm.org/out-of-band/1.1/invitation"
    assert oob["handshake_protocols"] == [
        "https://didcomm.org/didexchange/1.1",
        "https://didcomm.org/didexchange/1.0",
        "https://didcomm.org/connections/1.0",
    ]
    [service] = oob["services"]
    assert did_key_to_verkey(service["recipientKeys"][0]) == med
    assert service["serviceEndpoint"] == dc_app.base
    assert _decode_url_param(answer["invitation_url"], "oob") == oob
    legacy = _decode_url_param(answer["legacy_invitation_url"], "c_i")
    assert legacy["@type"] == "https://didcomm.org/connections/1.0/invitation"
    assert legacy["recipientKeys"] == [med] and legacy["serviceEndpoint"] == dc_app.base
    assert answer["multi_use"] is True


# ------------------------------------------------------------------ DID Exchange


@pytest.mark.parametrize("transport", ["http", "ws"])
async def test_did_exchange_1_1_with_did_peer_2_then_mediation(
    dc_app: AppNode, med: str, transport: str
) -> None:
    http = dc_app.client()
    async with http, wallet_of(dc_app, med, transport, http) as wallet:
        response = await wallet.exchange()
        assert response["@type"] == "https://didcomm.org/didexchange/1.1/response"
        # A whole document (typed services, which Credo 0.6+ needs), signed by the invitation
        # key through did_rotate~attach: a long did:peer:4 with no document attached.
        assert response["did"].startswith("did:peer:4") and response["did"].count(":") == 3
        assert "did_doc~attach" not in response
        payload, signers = verify_attachment(response["did_rotate~attach"]["data"])
        assert signers == {med} and payload.decode() == response["did"]
        doc = parse_doc(resolve(response["did"]))
        # HTTP first (ACA-Py posts there), WebSocket second (Credo needs it for live mode).
        assert [s.endpoint for s in doc.services] == [dc_app.base, "ws" + dc_app.base[4:]]
        # Our key on this connection is its own, not the cluster's (nor another's).
        assert doc.recipient_key == wallet.mediator != med
        key = await wallet.mediate()
        assert key in wallet.recipient_keys
        # Forwards still go to the cluster's routing key.
        assert wallet.routing_key == med
        async with wallet_of(dc_app, med, transport, http) as other:
            await other.exchange()
            assert other.mediator not in (med, wallet.mediator)


async def test_did_exchange_1_0_with_signed_did_peer_1(dc_app: AppNode, med: str) -> None:
    wallet = await _peer(dc_app, med)
    did, attach = peer1(wallet.keys)
    oob = (await wallet.web.get("/invitation")).json()["invitation"]
    msg = request("1.0", did, attach, **{"~thread": {"pthid": oob["@id"]}})
    response = await wallet.request_message(msg)
    assert response["@type"] == "https://didcomm.org/didexchange/1.0/response"
    assert response["~thread"]["thid"] == msg["@id"]
    assert response["~thread"]["pthid"] == oob["@id"]
    assert "did_rotate~attach" not in response
    _, signers = verify_attachment(response["did_doc~attach"]["data"])
    assert signers == {med}
    assert (await wallet.mediate_request())["@type"].endswith("/mediate-grant")
    await wallet.close()


async def test_did_exchange_with_long_did_peer_4(dc_app: AppNode, med: str) -> None:
    wallet = await _peer(dc_app, med)
    response = await wallet.request_message(request("1.1", peer4(wallet.keys)))
    assert response["@type"].endswith("/didexchange/1.1/response")
    assert (await wallet.mediate_request())["@type"].endswith("/mediate-grant")
    await wallet.close()


async def test_anoncrypted_request_is_answered_to_the_did_documents_key(
    dc_app: AppNode, med: str
) -> None:
    wallet = await _peer(dc_app, med)
    msg = request("1.1", numalgo2_did(wallet.keys, [QUEUE]))
    answer = await wallet.post(wallet.pack(msg, anon=True))
    assert answer.status_code == 200
    response, sender = wallet.unpack(answer.content)
    assert response["@type"].endswith("/response")
    wallet.take_response(response)
    assert sender == wallet.mediator != med  # authcrypted by our key on the new connection
    await wallet.close()


BAD_REQUESTS = {
    "unsigned did:peer:1": lambda k: request(
        "1.1", peer1(k)[0], {**peer1(k)[1], "data": {"base64": peer1(k)[1]["data"]["base64"]}}
    ),
    "did:peer:1 signed by another key": lambda k: request(
        "1.1",
        peer1(k)[0],
        {
            **peer1(k)[1],
            "data": sign_attachment(
                base64.urlsafe_b64decode(peer1(k)[1]["data"]["base64"] + "=="), KeyPair.generate()
            ),
        },
    ),
    "did:peer:1 that is not the document's hash": lambda k: request(
        "1.1", peer1(KeyPair.generate())[0], peer1(k)[1]
    ),
    "short did:peer:4": lambda k: request("1.1", peer4(k).rsplit(":", 1)[0]),
    "did:peer:2 with a bad key": lambda k: request("1.1", "did:peer:2.Vz6MkBAD.SeyJ0IjoiZG0ifQ"),
    "no did": lambda k: Recipient.message("didexchange/1.1/request", label="t"),
    "foreign invitation": lambda k: request(
        "1.1", numalgo2_did(k, [QUEUE]), **{"~thread": {"pthid": "not-our-invitation"}}
    ),
}


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
async def test_bad_requests_are_refused_and_change_nothing(
    dc_app: AppNode, med: str, case: str
) -> None:
    wallet = await _peer(dc_app, med)
    msg = BAD_REQUESTS[case](wallet.keys)
    try:
        answer = await wallet.send(msg)
    except ClientError as refused:  # no key we could answer to: a JSON 400
        assert refused.status == 400 and refused.code == "request_not_accepted"
    else:
        assert answer is not None
        assert answer["@type"].endswith("/problem_report")
        assert answer["problem-code"] == "request_not_accepted"
    # No connection was made: the wallet is still a stranger.
    problem = await wallet.request("coordinate-mediation/1.0/mediate-request")
    assert problem["description"]["code"] == "unknown-connection"
    await wallet.close()


async def test_replayed_request_gets_a_problem_report_and_changes_nothing(
    dc_app: AppNode, med: str
) -> None:
    wallet = await _peer(dc_app, med)
    msg = request("1.1", numalgo2_did(wallet.keys, [QUEUE]))
    first = await wallet.request_message(msg)
    assert first["@type"].endswith("/response")
    assert (await wallet.mediate_request())["@type"].endswith("/mediate-grant")
    again = await wallet.request_message(msg)
    assert again["@type"].endswith("/didexchange/1.1/problem_report")
    assert again["~thread"]["thid"] == msg["@id"]
    # Still granted: the replay did not reset the connection.
    status = await wallet.status()
    assert status["@type"].endswith("/status")
    await wallet.close()


async def test_a_key_someone_connected_with_cannot_be_claimed_again(
    dc_app: AppNode, med: str
) -> None:
    victim = await _peer(dc_app, med)
    await victim.exchange()
    thief = await _peer(dc_app, med)
    # The thief names the victim's key (it cannot authcrypt with it, so sends anoncrypted).
    msg = request("1.1", numalgo2_did(victim.keys, ["http://thief.example/"]))
    answer = await thief.post(thief.pack(msg, anon=True))
    assert answer.status_code == 200
    problem, _ = victim.unpack(answer.content)  # encrypted to the named key, not the thief
    assert problem["problem-code"] == "request_not_accepted"
    assert (await victim.mediate_request())["@type"].endswith("/mediate-grant")
    await victim.close()
    await thief.close()


async def test_authcrypted_request_must_come_from_a_key_of_its_document(
    dc_app: AppNode, med: str
) -> None:
    wallet = await _peer(dc_app, med)
    other = KeyPair.generate()
    answer = await wallet.send(request("1.1", numalgo2_did(other, [QUEUE])))
    assert answer is None or answer["problem-code"] == "request_not_accepted"
    assert (await wallet.request("coordinate-mediation/1.0/mediate-request"))["description"][
        "code"
    ] == "unknown-connection"
    await wallet.close()


async def test_unsupported_handshake_version_is_refused(dc_app: AppNode, med: str) -> None:
    wallet = await _peer(dc_app, med)
    msg = request("1.1", numalgo2_did(wallet.keys, [QUEUE]))
    msg["@type"] = "https://didcomm.org/didexchange/2.0/request"
    answer = await wallet.request_message(msg)
    assert answer["description"]["code"] == "unsupported-message-type"
    problem = await wallet.request("coordinate-mediation/1.0/mediate-request")
    assert problem["description"]["code"] == "unknown-connection"
    await wallet.close()


async def test_strangers_get_unknown_connection(dc_app: AppNode, med: str) -> None:
    wallet = await _peer(dc_app, med)
    for suffix in ("coordinate-mediation/1.0/mediate-request", "messagepickup/2.0/status-request"):
        problem = await wallet.request(suffix)
        assert problem["description"]["code"] == "unknown-connection"
    ping = wallet.pack(Recipient.message("trust_ping/1.0/ping", response_requested=True))
    pong, sender = wallet.unpack((await wallet.post(ping)).content)
    assert pong["@type"].endswith("/ping_response")  # pings need no connection
    assert sender == med  # answered from the key it was sent to: no connection key exists
    await wallet.close()


async def test_complete_on_another_thread_is_refused(dc_app: AppNode, med: str) -> None:
    wallet = await _peer(dc_app, med)
    await wallet.request_message(request("1.1", numalgo2_did(wallet.keys, [QUEUE])))
    wrong = Recipient.message("didexchange/1.1/complete", **{"~thread": {"thid": "x" * 12}})
    answer = await wallet.request_message(wrong)
    assert answer["description"]["code"] == "complete_not_accepted"
    await wallet.close()


# ------------------------------------------------------------------ connections 1.0


def legacy_doc(keys: KeyPair, did: str) -> dict[str, Any]:
    return {
        "@context": "https://w3id.org/did/v1",
        "id": did,
        "publicKey": [
            {
                "id": f"{did}#1",
                "type": "Ed25519VerificationKey2018",
                "controller": did,
                "publicKeyBase58": keys.verkey_b58,
            }
        ],
        "service": [
            {
                "id": f"{did};indy",
                "type": "IndyAgent",
                "recipientKeys": [keys.verkey_b58],
                "routingKeys": [],
                "serviceEndpoint": QUEUE,
            }
        ],
    }


@pytest.mark.parametrize("transport", ["http", "ws"])
async def test_connections_1_0_with_an_unqualified_did(
    dc_app: AppNode, med: str, transport: str
) -> None:
    wallet = await _peer(dc_app, med, transport)
    did = base58.b58encode(wallet.keys.verkey[:16]).decode()
    msg = Recipient.message(
        "connections/1.0/request",
        label="legacy",
        connection={"DID": did, "DIDDoc": legacy_doc(wallet.keys, did)},
    )
    response = await wallet.request_message(msg)
    assert response["@type"] == "https://didcomm.org/connections/1.0/response"
    assert response["~thread"]["thid"] == msg["@id"]
    signed, signer = verify_connection(response["connection~sig"])
    assert signer == med
    ours = parse_doc(signed["DIDDoc"], signed["DID"])
    assert ours.recipient_key != med
    assert [s.endpoint for s in ours.services] == [dc_app.base, "ws" + dc_app.base[4:]]
    # The first authcrypted message (a ping) completes it; mediation then works, and every
    # answer comes from our key in the document we sent.
    wallet.mediator = ours.recipient_key
    await wallet.request("trust_ping/1.0/ping")
    grant = wallet.pack(Recipient.message("coordinate-mediation/1.0/mediate-request"))
    if transport == "http":
        answer, sender = wallet.unpack((await wallet.post(grant)).content)
        assert answer["@type"].endswith("/mediate-grant") and sender == ours.recipient_key
    else:
        assert (await wallet.mediate_request())["@type"].endswith("/mediate-grant")
    await wallet.close()


async def test_connections_request_with_a_did_sov_prefix_type(dc_app: AppNode, med: str) -> None:
    wallet = await _peer(dc_app, med)
    did = base58.b58encode(wallet.keys.verkey[:16]).decode()
    msg = Recipient.message(
        "did:sov:BzCbsNYhMrjHiqZDTUASHg;spec/connections/1.0/request",
        label="old",
        connection={"DID": did, "DIDDoc": legacy_doc(wallet.keys, did)},
    )
    response = await wallet.request_message(msg)
    assert response["@type"] == "did:sov:BzCbsNYhMrjHiqZDTUASHg;spec/connections/1.0/response"
    await wallet.close()


# ------------------------------------------------------------------ cluster and single use


async def test_a_handshake_begun_on_one_node_continues_on_another(
    dc_app: AppNode, app_b: AppNode, med: str
) -> None:
    wallet = await _peer(dc_app, med)
    msg = request("1.1", numalgo2_did(wallet.keys, [QUEUE]))
    wallet.take_response(await wallet.request_message(msg))
    http = app_b.client()
    async with http, wallet_of(app_b, med, "http", http) as same:  # the same keys, via node B
        same.keys, same.mediator = wallet.keys, wallet.mediator  # our key on the connection
        complete = Recipient.message("didexchange/1.1/complete", route=None)
        complete["~thread"] = {"thid": msg["@id"]}
        assert await same.send(complete) is None
        assert (await same.mediate_request())["@type"].endswith("/mediate-grant")
    await wallet.close()


async def test_single_use_invitations(redis_url: str) -> None:
    node = await AppNode(redis_url, "single-use", invitation_multi_use=False).start()
    try:
        async with node.client() as client:
            one = (await client.get("/invitation")).json()
            two = (await client.get("/invitation")).json()
        assert one["multi_use"] is False
        key_one = did_key_to_verkey(one["invitation"]["services"][0]["recipientKeys"][0])
        key_two = did_key_to_verkey(two["invitation"]["services"][0]["recipientKeys"][0])
        assert key_one != key_two
        first = await _peer(node, key_one)
        response = await first.exchange(one["invitation"])
        # The response is signed by the invitation's key; the connection then uses ours.
        _, signers = verify_attachment(response["did_rotate~attach"]["data"])
        assert signers == {key_one}
        second = await _peer(node, key_one)
        with pytest.raises(ClientError) as used:
            await second.exchange(one["invitation"])
        assert used.value.status == 400  # the invitation's key is gone: nothing opens it
        # The cluster key (the grant's routing key) takes no requests when invitations are
        # single-use.
        grant = await first.mediate_request()
        cluster_key = did_key_to_verkey(grant["routing_keys"][0])
        assert cluster_key not in (key_one, first.mediator)
        third = await _peer(node, cluster_key)
        problem = await third.request_message(request("1.1", numalgo2_did(third.keys, [QUEUE])))
        assert problem["problem-code"] == "request_not_accepted"
        for p in (first, second, third):
            await p.close()
    finally:
        await node.stop()


async def test_envelope_for_nobody_here_is_refused(dc_app: AppNode) -> None:
    from mediator.didcomm import envelope

    data = envelope.pack(b"{}", [KeyPair.generate().verkey_b58], KeyPair.generate())
    async with dc_app.client() as client:
        answer = await client.post("/", content=data, headers=ENVELOPE)
    assert answer.status_code == 400 and answer.json()["code"] == "unreadable-envelope"


async def test_connections_without_mediation_expire_and_a_grant_keeps_them(
    dc_app: AppNode, med: str, redis_url: str
) -> None:
    import redis as sync_redis

    from mediator.engine import keys

    r = sync_redis.Redis.from_url(redis_url)
    wallet = await _peer(dc_app, med)
    await wallet.exchange()
    record = keys.connection_keys(wallet.verkey).record
    pending = keys.our_key_pending(wallet.mediator)
    assert 0 < r.ttl(record) <= 86400 and 0 < r.ttl(pending) <= 86400
    await wallet.mediate_request()
    # Kept for good: the record loses its expiry, our key moves into the key map's buckets.
    raw = base58.b58decode(wallet.mediator)
    assert r.ttl(record) == -1 and not r.exists(pending)
    assert r.hget(keys.ours_bucket(raw), raw) == base58.b58decode(wallet.verkey)
    r.close()
    await wallet.close()
