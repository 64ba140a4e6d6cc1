"""DIDs, DID documents and handshake signatures, checked against independent implementations
(the `did-peer-2` and `did-peer-4` packages ACA-Py uses) and against spoiled input."""

from __future__ import annotations

import base64
import json
import re
import struct
from typing import Any

import did_peer_2
import did_peer_4
import pytest

from mediator.didcomm import did_peer
from mediator.didcomm.did_doc import parse_doc
from mediator.didcomm.keys import KeyPair, b58encode
from mediator.didcomm.mediator_did import MediatorDid
from mediator.didcomm.signatures import (
    sign_attachment,
    sign_connection,
    verify_attachment,
    verify_connection,
)
from mediator.errors import DidError

ENDPOINTS = ("https://mediator.example/", "wss://mediator.example/")


def multikey(keys: KeyPair) -> str:
    return "z" + b58encode(b"\xed\x01" + keys.verkey)


def x_multikey(keys: KeyPair) -> str:
    return "z" + b58encode(b"\xec\x01" + keys.x25519_public)


def test_our_did_peer_2_resolves_the_same_in_the_reference_library() -> None:
    keys = KeyPair.generate()
    did = did_peer.numalgo2_did(keys, list(ENDPOINTS))
    theirs = did_peer_2.resolve(did)
    ours = did_peer.resolve_numalgo2(did)
    assert [m["publicKeyMultibase"] for m in theirs["verificationMethod"]] == [
        m["publicKeyMultibase"] for m in ours["verificationMethod"]
    ]
    assert [s["serviceEndpoint"] for s in theirs["service"]] == list(ENDPOINTS)
    assert [s["id"] for s in theirs["service"]] == [s["id"] for s in ours["service"]]
    doc = parse_doc(ours, did)
    assert doc.recipient_key == keys.verkey_b58
    assert [s.endpoint for s in doc.services] == list(ENDPOINTS)
    # The library's own document reads the same.
    assert parse_doc(theirs, did).services == doc.services


def test_a_did_peer_2_made_by_the_reference_library_resolves_here() -> None:
    keys = KeyPair.generate()
    did = did_peer_2.generate(
        [
            did_peer_2.KeySpec.verification(multikey(keys)),
            did_peer_2.KeySpec.key_agreement(x_multikey(keys)),
        ],
        [
            {
                "type": "did-communication",
                "serviceEndpoint": "http://agent.example:8020",
                "recipientKeys": ["#key-1"],
                "routingKeys": [],
                "priority": 0,
            }
        ],
    )
    doc = parse_doc(did_peer.resolve_numalgo2(did), did)
    assert doc.recipient_key == keys.verkey_b58
    assert doc.push_services[0].endpoint == "http://agent.example:8020"


def test_did_communication_without_recipient_keys_uses_the_authentication_keys() -> None:
    keys = KeyPair.generate()
    did = did_peer_2.generate(
        [did_peer_2.KeySpec.verification(multikey(keys))],
        [{"type": "did-communication", "serviceEndpoint": "didcomm:transport/queue"}],
    )
    doc = parse_doc(did_peer.resolve_numalgo2(did), did)
    assert doc.recipient_key == keys.verkey_b58
    assert doc.push_services == ()


def _input_doc(keys: KeyPair, endpoint: str) -> dict[str, Any]:
    return {
        "@context": ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1"],
        "verificationMethod": [
            {"id": "#key-1", "type": "Multikey", "publicKeyMultibase": multikey(keys)},
            {"id": "#key-2", "type": "Multikey", "publicKeyMultibase": x_multikey(keys)},
        ],
        "authentication": ["#key-1"],
        "keyAgreement": ["#key-2"],
        "service": [
            {
                "id": "#didcomm-0",
                "type": "did-communication",
                "recipientKeys": ["#key-1"],
                "routingKeys": [],
                "serviceEndpoint": endpoint,
            }
        ],
    }


def test_a_long_did_peer_4_from_the_reference_library_resolves_here() -> None:
    keys = KeyPair.generate()
    did = did_peer_4.encode(_input_doc(keys, "http://agent.example/"))
    doc = parse_doc(did_peer.resolve_numalgo4(did), did)
    assert doc.recipient_key == keys.verkey_b58
    assert doc.push_services[0].endpoint == "http://agent.example/"
    assert did_peer.short_numalgo4(did) == did_peer_4.long_to_short(did)


def test_a_did_peer_4_with_many_services_resolves_whole() -> None:
    """Documents are decoded by halves (a digit-by-digit base58 decode is quadratic): a
    did:peer:4 near the 2,048 characters a handshake takes, from the reference library,
    comes back whole; a longer one is refused, saying why."""

    def did_with(services: int) -> tuple[str, dict[str, Any]]:
        doc = _input_doc(KeyPair.generate(), "http://agent.example/")
        doc["service"] = [
            {**doc["service"][0], "id": f"#d-{i}", "serviceEndpoint": f"https://a{i}.example/"}
            for i in range(services)
        ]
        return did_peer_4.encode(doc), doc

    did, doc = did_with(7)
    assert 1_500 < len(did) <= 2_048
    resolved = did_peer.resolve_numalgo4(did)
    assert resolved == {**doc, "id": did}  # what the reference library encoded, whole
    assert [s.endpoint for s in parse_doc(resolved, did).services][-1] == "https://a6.example/"
    long_did, _ = did_with(40)
    with pytest.raises(DidError, match="longer than 2048"):
        parse_doc(did_peer.resolve_numalgo4(long_did), long_did)


def test_we_answer_a_did_exchange_request_with_a_whole_document() -> None:
    """Credo 0.6+ keeps typed services only from whole documents (did:peer:1 with its
    attachment, long did:peer:4): a did:peer:1 request gets our did:peer:1, a did:peer:2 or
    4 one our long did:peer:4, each with both the HTTP and the WebSocket endpoint; older
    DIDs get our did:peer:2."""
    ours = MediatorDid(KeyPair.generate(), ENDPOINTS)
    assert ours.for_request("did:peer:2.Vz6MkFoo") == ours.for_request("did:peer:4zQmFoo:zBar")
    did4, attached4 = ours.for_request("did:peer:4zQmFoo:zBar")
    assert attached4 is None and did4.startswith("did:peer:4zQm") and did4.count(":") == 3
    resolved = did_peer_4.resolve(did4)  # the reference library agrees on the hash and body
    assert [s["serviceEndpoint"] for s in resolved["service"]] == list(ENDPOINTS)
    assert {s["type"] for s in resolved["service"]} == {"did-communication"}
    assert parse_doc(did_peer.resolve_numalgo4(did4), did4).recipient_key == ours.keys.verkey_b58

    did1, attached1 = ours.for_request("did:peer:1zQmWhatever")
    assert attached1 is not None and attached1["id"] == did1
    did_peer.check_numalgo1(did1, json.dumps(attached1).encode(), attached1)
    doc1 = parse_doc(attached1, did1)
    assert doc1.recipient_key == ours.keys.verkey_b58
    assert [s.endpoint for s in doc1.services] == list(ENDPOINTS)

    for other in ("did:sov:WgWxqztrNooG92RXvxSTWv", "WgWxqztrNooG92RXvxSTWv", "garbage", None):
        assert ours.for_request(other) == (ours.peer2, ours.peer2_doc)

    # DID Exchange 1.0 has no did_rotate~attach: the signed document is always attached.
    did4_10, attached4_10 = ours.for_request("did:peer:4zQmFoo:zBar", "1.0")
    assert did4_10 == did4 and attached4_10 is not None and attached4_10["id"] == did4
    assert ours.for_request("did:peer:2.Vz6MkFoo", "1.0") == (ours.peer2, ours.peer2_doc)


def test_a_did_peer_4_whose_hash_does_not_match_is_refused() -> None:
    keys = KeyPair.generate()
    did = did_peer_4.encode(_input_doc(keys, "http://agent.example/"))
    other = did_peer_4.encode(_input_doc(KeyPair.generate(), "http://agent.example/"))
    forged = did.rsplit(":", 1)[0] + ":" + other.rsplit(":", 1)[1]
    with pytest.raises(DidError, match="hash"):
        did_peer.resolve_numalgo4(forged)
    with pytest.raises(DidError, match="short-form"):
        did_peer.resolve_numalgo4(did_peer_4.long_to_short(did))


@pytest.mark.parametrize(
    "did",
    [
        "did:peer:2",
        "did:peer:2.",
        "did:peer:2.Vz6Mk",
        "did:peer:2.Xz6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
        "did:peer:2.Vz6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK.S!!!",
        "did:peer:2.Vz6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK.SW10",
        "did:peer:2." + "V" * 20_000,
    ],
)
def test_malformed_did_peer_2_is_a_did_error(did: str) -> None:
    with pytest.raises(DidError):
        parse_doc(did_peer.resolve_numalgo2(did), did)


def test_did_peer_1_must_be_the_hash_of_its_document() -> None:
    keys = KeyPair.generate()
    payload = json.dumps(_input_doc(keys, "didcomm:transport/queue")).encode()
    import hashlib

    import base58

    digest = base58.b58encode(b"\x12\x20" + hashlib.sha256(payload).digest()).decode()
    did_peer.check_numalgo1("did:peer:1z" + digest, payload, json.loads(payload))
    with pytest.raises(DidError):
        did_peer.check_numalgo1("did:peer:1z" + digest, payload + b" ", {"other": 1})


def test_legacy_and_core_documents_give_the_same_keys_and_endpoints() -> None:
    ours = MediatorDid(KeyPair.generate(), ENDPOINTS)
    legacy = parse_doc(ours.legacy_doc, ours.unqualified)
    core = parse_doc(ours.core_doc)
    peer2 = parse_doc(ours.peer2_doc, ours.peer2)
    for doc in (legacy, core, peer2):
        assert doc.recipient_key == ours.keys.verkey_b58
        assert [s.endpoint for s in doc.services] == list(ENDPOINTS)


def test_jwk_and_multibase_methods_are_read() -> None:
    keys = KeyPair.generate()
    x = base64.urlsafe_b64encode(keys.verkey).decode().rstrip("=")
    doc = {
        "id": "did:example:1",
        "verificationMethod": [
            {
                "id": "did:example:1#a",
                "type": "JsonWebKey2020",
                "publicKeyJwk": {"kty": "OKP", "crv": "Ed25519", "x": x},
            },
            {
                "id": "#b",
                "type": "Ed25519VerificationKey2020",
                "publicKeyMultibase": multikey(keys),
            },
        ],
        "service": [
            {
                "id": "#s",
                "type": "did-communication",
                "recipientKeys": ["did:example:1#a"],
                "routingKeys": [KeyPair.generate().did_key],
                "serviceEndpoint": "http://a/",
            }
        ],
    }
    parsed = parse_doc(doc)
    assert parsed.recipient_key == keys.verkey_b58
    assert len(parsed.services[0].routing_keys) == 1


@pytest.mark.parametrize(
    "spoil",
    [
        lambda d: d.pop("service"),
        lambda d: d["service"][0].pop("recipientKeys"),
        lambda d: d["service"][0].update(recipientKeys=["#nope"]),
        lambda d: d["service"][0].update(recipientKeys=["did:other:x#key-1"]),
        lambda d: d["service"][0].update(serviceEndpoint=7),
        lambda d: d["verificationMethod"][0].update(publicKeyBase58="0OIl"),
        lambda d: d.update(service=[{"type": "did-communication"}] * 40),
        lambda d: d["verificationMethod"][0].pop("id"),
    ],
)
def test_spoiled_documents_are_did_errors(spoil: Any) -> None:
    keys = KeyPair.generate()
    doc: dict[str, Any] = {
        "id": "did:example:2",
        "verificationMethod": [
            {
                "id": "#key-1",
                "type": "Ed25519VerificationKey2018",
                "publicKeyBase58": keys.verkey_b58,
            }
        ],
        "service": [
            {
                "id": "#s",
                "type": "did-communication",
                "recipientKeys": ["#key-1"],
                "serviceEndpoint": "http://a/",
            }
        ],
    }
    spoil(doc)
    with pytest.raises(DidError):
        parse_doc(doc)


def test_signed_attachments_round_trip_and_spoiled_ones_fail() -> None:
    keys = KeyPair.generate()
    data = sign_attachment(b'{"hello": "world"}', keys)
    payload, signers = verify_attachment(data)
    assert payload == b'{"hello": "world"}' and signers == {keys.verkey_b58}
    protected = json.loads(base64.urlsafe_b64decode(data["jws"]["protected"] + "=="))
    assert "kid" not in protected and "jwk" not in data["jws"]["header"]  # Credo's rule
    tampered = dict(data, base64=base64.urlsafe_b64encode(b'{"hello": "mallory"}').decode())
    with pytest.raises(DidError, match="does not verify"):
        verify_attachment(tampered)
    other = sign_attachment(b"x", KeyPair.generate())
    with pytest.raises(DidError):
        verify_attachment(dict(data, jws=other["jws"]))
    with pytest.raises(DidError):
        verify_attachment({"base64": "!!"})
    assert verify_attachment({"base64": data["base64"]})[1] == set()


def test_connection_signature_round_trip_in_seconds_and_milliseconds() -> None:
    keys = KeyPair.generate()
    signed = sign_connection({"DID": "abc"}, keys, now=1_700_000_000)
    data, signer = verify_connection(signed)
    assert data == {"DID": "abc"} and signer == keys.verkey_b58
    raw = base64.urlsafe_b64decode(signed["sig_data"] + "==")
    assert struct.unpack(">Q", raw[:8])[0] == 1_700_000_000
    # Credo stamps milliseconds; the stamp is not interpreted, so that verifies too.
    import nacl.signing

    ms = struct.pack(">Q", 1_700_000_000_000) + b'{"DID":"x"}'
    sig = nacl.signing.SigningKey(keys.sigkey[:32]).sign(ms).signature
    credo = {
        "signature": base64.urlsafe_b64encode(sig).decode(),
        "sig_data": base64.urlsafe_b64encode(ms).decode(),
        "signer": keys.verkey_b58,
    }
    assert verify_connection(credo)[0] == {"DID": "x"}
    with pytest.raises(DidError):
        verify_connection(dict(credo, signer=KeyPair.generate().verkey_b58))


# Credo 0.5's isValidPeerDid (didPeer.js): base64url '-' and '_' are not admitted in a
# service segment, so a DID that has them does not resolve there.
CREDO_PEER_DID = re.compile(
    r"did:peer:(([01](z)([1-9a-km-zA-HJ-NP-Z]{5,200}))|(2((.[AEVID](z)([1-9a-km-zA-HJ-NP-Z]"
    r"{5,200}))+(.(S)[0-9a-zA-Z=]*)*))|([4](z[1-9a-km-zA-HJ-NP-Z]{46})(:z[1-9a-km-zA-HJ-NP-Z]"
    r"{6,}){0,1}))"
)


@pytest.mark.parametrize(
    "endpoint",
    ["wss://m.example.com/?a=1", "wss://m.example.com/~u/ws", "http://x/>?~~??", "https://a.b/"],
)
def test_our_did_peer_2_passes_credos_check_whatever_the_endpoint(endpoint: str) -> None:
    keys = KeyPair.generate()
    did = did_peer.numalgo2_did(keys, [endpoint, "ws://h:1/?x=~"])
    assert CREDO_PEER_DID.fullmatch(did)
    resolved = did_peer.resolve_numalgo2(did)
    assert resolved["service"][0]["serviceEndpoint"] == endpoint
    assert did_peer_2.resolve(did)["service"][0]["serviceEndpoint"] == endpoint
