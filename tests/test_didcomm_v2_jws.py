"""DIDComm v2 signed messages (mediator/didcomm/v2/jws.py): the spec's signed test vectors
(Appendix C.2: EdDSA, ES256, ES256K) verify with the sender's keys and give its plaintext;
an altered payload, another key or a mismatched alg does not verify; both JSON forms read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519

from mediator.didcomm.envelope import b64url_decode, b64url_encode
from mediator.didcomm.v2 import jws
from mediator.errors import EnvelopeError

VECTORS = json.loads((Path(__file__).parent / "data" / "didcomm_v2_vectors.json").read_text())
ALICE = {s["kid"]: s for s in VECTORS["sender_secrets"]}


def _key(kid: str) -> jws.VerifyingKey:
    public = {k: v for k, v in ALICE[kid].items() if k != "d"}
    return jws.VerifyingKey.from_jwk(public)


@pytest.mark.parametrize("index", range(3))
def test_the_specs_signed_messages_verify_and_give_its_plaintext(index: int) -> None:
    parsed = jws.parse(orjson.dumps(VECTORS["signed"][index]))
    (signature,) = parsed.signatures
    assert signature.kid is not None
    payload = orjson.loads(parsed.verify(signature, _key(signature.kid)))
    assert payload["id"] == VECTORS["plaintext"]["id"]
    assert payload["body"] == VECTORS["plaintext"]["body"]


def test_the_vectors_cover_eddsa_es256_and_es256k() -> None:
    algs = {jws.parse(m).signatures[0].header["alg"] for m in VECTORS["signed"]}
    assert algs == {"EdDSA", "ES256", "ES256K"}


def _altered_payload(message: dict[str, Any]) -> dict[str, Any]:
    payload = orjson.loads(b64url_decode(message["payload"]))
    payload["body"] = {"messagespecificattribute": "another value"}
    return {**message, "payload": b64url_encode(orjson.dumps(payload))}


@pytest.mark.parametrize("index", range(3))
def test_an_altered_payload_or_another_key_does_not_verify(index: int) -> None:
    message = VECTORS["signed"][index]
    parsed = jws.parse(_altered_payload(message))
    signature = parsed.signatures[0]
    assert signature.kid is not None
    with pytest.raises(EnvelopeError, match="does not verify"):
        parsed.verify(signature, _key(signature.kid))
    other = "did:example:alice#key-1" if signature.kid.endswith("-2") else "did:example:alice#key-2"
    with pytest.raises(EnvelopeError, match="not its key's"):  # the alg names the key kind
        jws.parse(message).verify(signature, _key(other))


def test_eddsa_signed_here_verifies_in_both_forms() -> None:
    private = ed25519.Ed25519PrivateKey.generate()
    signed = jws.sign(b'{"id":"1"}', "did:example:mediator#key-2", private)
    key = jws.VerifyingKey.ed25519(private.public_key().public_bytes_raw())
    parsed = jws.parse(signed)
    assert parsed.verify(parsed.signatures[0], key) == b'{"id":"1"}'
    entry = signed["signatures"][0]
    flattened = {"payload": signed["payload"], **entry}
    again = jws.parse(flattened)
    assert again.verify(again.signatures[0], key) == b'{"id":"1"}'


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ({"payload": "e30"}, "1 to 16 signatures"),
        ({"payload": 1, "signatures": []}, "with a payload"),
        ({"payload": "e30", "signatures": [{"signature": "AA"}]}, "no protected header"),
        (
            {"payload": "e30", "signatures": [{"protected": b64url_encode(b'{"alg":"none"}'),
                                               "signature": ""}]},
            "unsupported signature alg",
        ),
    ],
)  # fmt: skip
def test_what_is_not_a_jws_is_refused(message: dict[str, Any], said: str) -> None:
    with pytest.raises(EnvelopeError, match=said):
        jws.parse(message)


def test_a_jwt_is_read_and_verified() -> None:
    private = ed25519.Ed25519PrivateKey.generate()
    header = b64url_encode(orjson.dumps({"typ": "JWT", "alg": "EdDSA", "kid": "did:ex:old#1"}))
    claims = b64url_encode(orjson.dumps({"sub": "did:ex:new", "iss": "did:ex:old"}))
    token = f"{header}.{claims}.{b64url_encode(private.sign(f'{header}.{claims}'.encode()))}"
    head, body, parsed = jws.parse_jwt(token)
    assert head["kid"] == "did:ex:old#1" and body["iss"] == "did:ex:old"
    key = jws.VerifyingKey.ed25519(private.public_key().public_bytes_raw())
    parsed.verify(parsed.signatures[0], key)
    with pytest.raises(EnvelopeError, match="three base64url parts"):
        jws.parse_jwt("a.b")
