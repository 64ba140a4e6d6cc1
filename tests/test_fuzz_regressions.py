"""Every crash the fuzzer (tests/soak/fuzz.py) found, as its minimal input against the app in
process (conftest's dc_app): each used to end in `500 internal-error` (HTTP) or an
`internal-error` frame, or in a traceback in a node's push loop; each must now get a clear
answer."""

from __future__ import annotations

import base64
import json
from typing import Any

import orjson
import pytest

from mediator.client import Recipient, forward_envelope
from mediator.didcomm import envelope
from mediator.didcomm.did_peer import numalgo2_did
from mediator.didcomm.keys import KeyPair
from mediator.didcomm.signatures import sign_attachment
from tests.didcomm_peer import ENVELOPE, Peer
from tests.inprocess import AppNode

ORG = "https://didcomm.org/"
DEEP = b"[" * 5000 + b"]" * 5000  # deeper than Python's json parser recurses


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def doc_of(did: str, keys: KeyPair, endpoint: str = "didcomm:transport/queue") -> dict[str, Any]:
    return {
        "id": did,
        "verificationMethod": [
            {
                "id": "#key-1",
                "type": "Ed25519VerificationKey2018",
                "controller": did,
                "publicKeyBase58": keys.verkey_b58,
            }
        ],
        "service": [
            {
                "id": "#didcomm",
                "type": "did-communication",
                "serviceEndpoint": endpoint,
                "recipientKeys": ["#key-1"],
            }
        ],
    }


def attach(payload: bytes, keys: KeyPair) -> dict[str, Any]:
    return {
        "@id": "attach-1",
        "mime-type": "application/json",
        "data": sign_attachment(payload, keys),
    }


async def request(
    node: AppNode, med: str, keys: KeyPair, did: str, **fields: Any
) -> dict[str, Any]:
    """A DID Exchange request authcrypted by `keys` with return route; the answer opened."""
    msg = {
        "@type": ORG + "didexchange/1.1/request",
        "@id": Recipient.new_id(),
        "label": "fuzz regression",
        "did": did,
        "~transport": {"return_route": "all"},
        **fields,
    }
    data = envelope.pack(json.dumps(msg).encode(), [med], keys)
    async with node.client(30) as http:
        answer = await http.post("/", content=data, headers=ENVELOPE)
    assert answer.status_code == 200, answer.text
    opened = envelope.unpack(answer.content, {keys.verkey_b58: keys}.get)
    reply: dict[str, Any] = json.loads(opened.message)
    return reply


def assert_refused(reply: dict[str, Any], words: str) -> None:
    assert reply["@type"] == ORG + "didexchange/1.1/problem_report", reply
    assert reply["problem-code"] == "request_not_accepted"
    assert words in reply["explain"], reply["explain"]


async def test_did_doc_attachment_nested_too_deep(dc_app: AppNode, med: str) -> None:
    keys = KeyPair.generate()
    reply = await request(
        dc_app, med, keys, "did:sov:abc", **{"did_doc~attach": attach(DEEP, keys)}
    )
    assert_refused(reply, "did_doc~attach is not JSON")


async def test_jws_protected_header_nested_too_deep(dc_app: AppNode, med: str) -> None:
    keys = KeyPair.generate()
    signed = attach(json.dumps(doc_of("did:sov:abc", keys)).encode(), keys)
    signed["data"]["jws"]["protected"] = b64(DEEP)
    reply = await request(dc_app, med, keys, "did:sov:abc", **{"did_doc~attach": signed})
    assert_refused(reply, "the JWS is malformed")


async def test_did_peer_2_service_nested_too_deep(dc_app: AppNode, med: str) -> None:
    keys = KeyPair.generate()
    reply = await request(dc_app, med, keys, numalgo2_did(keys, []) + ".S" + b64(DEEP))
    assert_refused(reply, "a did:peer:2 service is not JSON")


async def test_did_peer_4_document_nested_too_deep(dc_app: AppNode, med: str) -> None:
    import base58

    from mediator.didcomm.did_peer import _hash

    encoded = "z" + base58.b58encode(b"\x80\x04" + b"[" * 1200 + b"]" * 1200).decode()
    keys = KeyPair.generate()
    reply = await request(dc_app, med, keys, "did:peer:4" + _hash(encoded.encode()) + ":" + encoded)
    assert_refused(reply, "the did:peer:4 document is not JSON")


@pytest.mark.parametrize(
    ("genesis", "words"),
    [(b"[]", "must be a JSON object"), (b'{"a": "\\ud800"}', "is not the hash")],
    ids=["list", "lone-surrogate"],
)
async def test_did_peer_1_genesis_document_unusual(
    dc_app: AppNode, med: str, genesis: bytes, words: str
) -> None:
    keys = KeyPair.generate()
    did = "did:peer:1zQm" + "a" * 44
    reply = await request(dc_app, med, keys, did, **{"did_doc~attach": attach(genesis, keys)})
    assert_refused(reply, words)


async def test_push_endpoint_that_is_no_url(dc_app: AppNode, med: str) -> None:
    """Accepted, this endpoint made the push loop raise (httpx.InvalidURL) on every push."""
    keys = KeyPair.generate()
    did = "did:sov:" + keys.verkey_b58[:22]
    payload = json.dumps(doc_of(did, keys, "https://[::1")).encode()
    reply = await request(dc_app, med, keys, did, **{"did_doc~attach": attach(payload, keys)})
    assert_refused(reply, "is not a URL we can send to")


@pytest.mark.parametrize("transport", ["http", "ws"])
async def test_envelope_kid_of_key_length_that_is_not_base58(
    dc_app: AppNode, transport: str
) -> None:
    """A 44-character kid with a character base58 lacks ('l'): looked up as one of our
    per-connection keys, it raised InvalidKey (500) instead of not being ours."""
    header = {
        "enc": "xchacha20poly1305_ietf",
        "typ": "JWM/1.0",
        "alg": "Anoncrypt",
        "recipients": [{"encrypted_key": "AAAA", "header": {"kid": "l" * 44}}],
    }
    data = orjson.dumps(
        {"protected": b64(orjson.dumps(header)), "iv": "AAAA", "ciphertext": "AAAA", "tag": "AAAA"}
    )
    if transport == "http":
        async with dc_app.client() as http:
            answer = await http.post("/", content=data, headers=ENVELOPE)
        assert answer.status_code == 400
        body = answer.json()
    else:
        ws = await dc_app.open_websocket()
        try:
            await ws.send(data.decode())
            frame = await ws.receive()
        finally:
            await ws.close()
        assert frame is not None
        body = json.loads(frame)
    assert body["code"] == "unreadable-envelope"
    assert "not addressed" in body["error"]


@pytest.mark.parametrize(
    ("extra", "as_json"),
    [(b'"n":' + b"9" * 40, True), (b'"deep":' + b"[" * 1000 + b"]" * 1000, False)],
    ids=["integer-over-64-bits", "nested-1000-deep"],
)
async def test_batch_pickup_of_a_queued_envelope_python_json_reads_otherwise(
    peer: Peer, extra: bytes, as_json: bool
) -> None:
    """A forward's `msg` may be JSON text; it is stored as sent. Pickup 1.0 parsed it back
    with the standard library, which reads a 40-digit integer that the reply's writer
    (orjson) refuses, and fails on nesting orjson reads: both ended in a 500."""
    await peer.mediate_request()
    key = await peer.register_key()
    text = (envelope.pack(b"{}", [key])[:-1] + b"," + extra + b"}").decode()
    await peer.send(peer.message("routing/1.0/forward", route=None, to=key, msg=text))
    batch = await peer.batch_pickup(5)
    carried = batch["messages~attach"]
    assert len(carried) == 1
    assert carried[0]["message"] == (orjson.loads(text) if as_json else text)


async def test_forward_whose_inner_envelope_names_a_kid_that_is_not_base58(
    dc_app: AppNode, med: str
) -> None:
    """Besides `to`, a forward is queued for every recipient of the inner envelope that is
    registered here; a kid with a character base58 lacks ('!') made that lookup raise (500)
    instead of being nobody's key."""
    async with Peer(dc_app, med, "http") as peer:
        await peer.mediate_request()
        key = await peer.register_key()
        inner = orjson.loads(envelope.pack(b"{}", [key]))
        header = orjson.loads(base64.urlsafe_b64decode(inner["protected"] + "=="))
        header["recipients"].append({"encrypted_key": "AAAA", "header": {"kid": "7!" * 17}})
        inner["protected"] = b64(orjson.dumps(header))
        data = forward_envelope(orjson.dumps(inner), key, med)
        async with dc_app.client() as http:
            answer = await http.post("/", content=data, headers=ENVELOPE)
        assert answer.status_code == 202, answer.text
        assert answer.headers["x-mediator-queued"] == "1"
        delivery = await peer.delivery_request(5)
        assert len(delivery["~attach"]) == 1
