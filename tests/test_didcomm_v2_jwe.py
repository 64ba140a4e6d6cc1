"""DIDComm v2 envelopes (mediator/didcomm/v2): the spec's test vectors (Appendix C.3, copied
into tests/data/didcomm_v2_vectors.json) decrypt to its plaintext with its keys; what we
write is read back on every curve and content encryption; and what a hostile sender makes
(altered, off-curve, low-order, unknown algorithms, oversized) is refused with a reason."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from mediator.didcomm.envelope import b64url_decode, b64url_encode
from mediator.didcomm.v2 import content, jwe
from mediator.didcomm.v2.jwk import CURVES, PrivateKey, PublicKey
from mediator.errors import EnvelopeError

VECTORS = json.loads((Path(__file__).parent / "data" / "didcomm_v2_vectors.json").read_text())
SECRETS = {s["kid"]: s for s in VECTORS["sender_secrets"] + VECTORS["recipient_secrets"]}


def _open(message: dict[str, Any]) -> Any:
    """A message of the vectors opened with their keys, layer by layer, to its plaintext
    (a signed message's payload)."""
    while "ciphertext" in message:
        parsed = jwe.parse(orjson.dumps(message))
        kid = next(k for k in parsed.kids if k in SECRETS)
        sender = None
        if parsed.authcrypt:
            assert parsed.sender_kid is not None
            sender = PublicKey.from_jwk(SECRETS[parsed.sender_kid])
        plaintext = parsed.decrypt(kid, PrivateKey.from_jwk(SECRETS[kid]), sender)
        for other in parsed.kids:  # every recipient reads the same
            if other != kid and other in SECRETS:
                assert parsed.decrypt(other, PrivateKey.from_jwk(SECRETS[other]), sender) == (
                    plaintext
                )
        message = orjson.loads(plaintext)
    if "signatures" in message:
        return orjson.loads(b64url_decode(message["payload"]))
    return message


@pytest.mark.parametrize("index", range(len(VECTORS["encrypted"])))
def test_the_specs_encrypted_messages_open_to_its_plaintext(index: int) -> None:
    opened = _open(VECTORS["encrypted"][index])
    opened.pop("typ", None)  # the signed ones' payload names its media type too
    # The vectors were made from C.1's message with `type` at http://, where C.1 reads
    # https:// (the spec's own slip, the same in every vector).
    plaintext = dict(
        VECTORS["plaintext"], type=VECTORS["plaintext"]["type"].replace("https:", "http:")
    )
    assert opened == plaintext


def test_the_vectors_cover_anoncrypt_authcrypt_every_curve_and_content_encryption() -> None:
    headers = [jwe.parse(orjson.dumps(m)).header for m in VECTORS["encrypted"]]
    assert {h["alg"] for h in headers} == {jwe.ANONCRYPT, jwe.AUTHCRYPT}
    assert {h["enc"] for h in headers} == set(content.ALGORITHMS)
    assert {h["epk"]["crv"] for h in headers} == {"X25519", "P-384", "P-521", "P-256"}


def _keys(crv: str, n: int = 2) -> list[tuple[str, PrivateKey]]:
    return [(f"did:example:bob#key-{crv}-{i}", PrivateKey.generate(crv)) for i in range(n)]


@pytest.mark.parametrize("enc", list(content.ALGORITHMS))
@pytest.mark.parametrize("crv", CURVES)
def test_anoncrypt_round_trips_on_every_curve_and_content_encryption(crv: str, enc: str) -> None:
    bob = _keys(crv)
    sealed = jwe.encrypt(b'{"id":"1"}', [(kid, key.public) for kid, key in bob], enc=enc)
    parsed = jwe.parse(orjson.dumps(sealed))
    assert parsed.header["typ"] == jwe.TYP and not parsed.authcrypt
    for kid, key in bob:
        assert parsed.decrypt(kid, key) == b'{"id":"1"}'


@pytest.mark.parametrize("crv", CURVES)
def test_authcrypt_round_trips_and_names_its_sender(crv: str) -> None:
    alice = ("did:example:alice#key-1", PrivateKey.generate(crv))
    bob = _keys(crv)
    sealed = jwe.encrypt(b"hello", [(k, key.public) for k, key in bob], sender=alice)
    parsed = jwe.parse(sealed)
    assert parsed.authcrypt and parsed.sender_kid == alice[0]
    assert b64url_decode(parsed.header["apu"]).decode() == alice[0]
    kids = ".".join(sorted(k for k, _ in bob)).encode()
    assert b64url_decode(parsed.header["apv"]) == hashlib.sha256(kids).digest()
    for kid, key in bob:
        assert parsed.decrypt(kid, key, alice[1].public) == b"hello"
    impostor = PrivateKey.generate(crv).public
    with pytest.raises(EnvelopeError, match="does not unwrap"):
        parsed.decrypt(bob[0][0], bob[0][1], impostor)


def test_authcrypt_without_apu_apv_or_skid_as_veramo_writes_it_is_read() -> None:
    alice, (kid, bob) = PrivateKey.generate("X25519"), _keys("X25519", 1)[0]
    sealed = jwe.encrypt(b"x", [(kid, bob.public)], sender=("did:ex:alice#k", alice))
    header = orjson.loads(b64url_decode(sealed["protected"]))
    del header["skid"]  # the sender named by apu alone
    sealed["protected"] = b64url_encode(orjson.dumps(header))
    parsed = jwe.parse(sealed)
    assert parsed.sender_kid == "did:ex:alice#k"
    with pytest.raises(EnvelopeError):  # the header is authenticated: a changed one fails
        parsed.decrypt(kid, bob, alice.public)


def _tampered(sealed: dict[str, Any], field: str) -> dict[str, Any]:
    raw = bytearray(b64url_decode(sealed[field]))
    raw[len(raw) // 2] ^= 1
    return {**sealed, field: b64url_encode(bytes(raw))}


@pytest.mark.parametrize("enc", list(content.ALGORITHMS))
@pytest.mark.parametrize("field", ["ciphertext", "tag", "iv"])
def test_an_altered_message_is_refused(enc: str, field: str) -> None:
    kid, bob = _keys("X25519", 1)[0]
    sealed = jwe.encrypt(b"secret" * 10, [(kid, bob.public)], enc=enc)
    with pytest.raises(EnvelopeError):
        jwe.parse(_tampered(sealed, field)).decrypt(kid, bob)


def _with_header(sealed: dict[str, Any], **changes: Any) -> dict[str, Any]:
    header = orjson.loads(b64url_decode(sealed["protected"]))
    header.update(changes)
    return {**sealed, "protected": b64url_encode(orjson.dumps(header))}


def test_a_point_off_the_curve_is_refused_before_any_agreement() -> None:
    kid, bob = _keys("P-256", 1)[0]
    sealed = jwe.encrypt(b"x", [(kid, bob.public)])
    epk = orjson.loads(b64url_decode(sealed["protected"]))["epk"]
    y = bytearray(b64url_decode(epk["y"]))
    y[-1] ^= 1
    with pytest.raises(EnvelopeError, match="not on its curve"):
        jwe.parse(_with_header(sealed, epk={**epk, "y": b64url_encode(bytes(y))}))


@pytest.mark.parametrize("point", [bytes(32), (1).to_bytes(32, "little")])
def test_a_low_order_x25519_point_is_refused(point: bytes) -> None:
    kid, bob = _keys("X25519", 1)[0]
    sealed = jwe.encrypt(b"x", [(kid, bob.public)])
    epk = {"kty": "OKP", "crv": "X25519", "x": b64url_encode(point)}
    with pytest.raises(EnvelopeError, match="weak"):
        jwe.parse(_with_header(sealed, epk=epk)).decrypt(kid, bob)


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"alg": "RSA-OAEP"}, "unsupported key wrapping"),
        ({"alg": "ECDH-ES"}, "unsupported key wrapping"),
        ({"enc": "A128GCM"}, "unsupported content encryption"),
        ({"epk": {"kty": "EC", "crv": "secp256k1", "x": "AA", "y": "AA"}}, "unsupported curve"),
        ({"epk": {"kty": "EC", "crv": "X25519", "x": "AA"}}, "kty OKP"),
        ({"epk": {"kty": "OKP", "crv": "X25519", "x": "AAAA"}}, "must be 32 bytes"),
        ({"epk": "not a key"}, "JWK object"),
        ({"apv": "!!"}, "apv is not base64url"),
        ({"pad": "x" * 20_000}, "too large"),
    ],
)
def test_unknown_or_malformed_headers_are_refused_with_the_reason(
    changes: dict[str, Any], said: str
) -> None:
    kid, bob = _keys("X25519", 1)[0]
    sealed = jwe.encrypt(b"x", [(kid, bob.public)])
    with pytest.raises(EnvelopeError, match=said):
        jwe.parse(_with_header(sealed, **changes))


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (b"not json", "not JSON"),
        (b"[]", "JSON object"),
        (b"{}", "no protected header"),
        (b'{"protected": "e30"}', "unsupported content encryption"),
    ],
)
def test_what_is_not_a_jwe_is_refused(raw: bytes, said: str) -> None:
    with pytest.raises(EnvelopeError, match=said):
        jwe.parse(raw)


def test_a_message_for_too_many_keys_or_another_curve_is_refused() -> None:
    kid, bob = _keys("X25519", 1)[0]
    sealed = jwe.encrypt(b"x", [(kid, bob.public)])
    many = {**sealed, "recipients": sealed["recipients"] * (jwe.MAX_RECIPIENTS + 1)}
    with pytest.raises(EnvelopeError, match="over 64 recipients"):
        jwe.parse(many)
    with pytest.raises(EnvelopeError, match="not on the message's curve"):
        jwe.parse(sealed).decrypt(kid, PrivateKey.generate("P-256"))
    with pytest.raises(EnvelopeError, match="no recipient"):
        jwe.parse(sealed).decrypt("did:example:carol#1", bob)
    with pytest.raises(EnvelopeError, match="one curve"):
        jwe.encrypt(b"x", [(kid, bob.public), ("k2", PrivateKey.generate("P-384").public)])
    with pytest.raises(EnvelopeError, match="A256CBC-HS512"):
        jwe.encrypt(b"x", [(kid, bob.public)], sender=("a", bob), enc=content.A256GCM)


def test_private_keys_round_trip_as_jwks_and_are_checked() -> None:
    for crv in CURVES:
        key = PrivateKey.generate(crv)
        assert PrivateKey.from_jwk(key.jwk()).public == key.public
    other = PrivateKey.generate("P-256").jwk()
    mismatched = {**PrivateKey.generate("P-256").jwk(), "d": other["d"]}
    with pytest.raises(EnvelopeError, match="does not match"):
        PrivateKey.from_jwk(mismatched)


def test_authcrypt_of_ecdh_1pu_draft_3_is_read_and_written_for_peers_that_use_it() -> None:
    alice, (kid, bob) = PrivateKey.generate("X25519"), _keys("X25519", 1)[0]
    sealed = jwe.encrypt(
        b"x", [(kid, bob.public)], sender=("a#1", alice), enc=content.A256GCM, tagless=True
    )
    assert jwe.parse(sealed).open(kid, bob, alice.public) == (b"x", True)
    spec = jwe.encrypt(b"y", [(kid, bob.public)], sender=("a#1", alice))
    assert jwe.parse(spec).open(kid, bob, alice.public) == (b"y", False)
