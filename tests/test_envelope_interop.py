"""Our DIDComm v1 envelopes against those of two independent Python implementations,
aries-staticagent and didcomm-messaging (its legacy, DIDComm v1 crypto), both directions."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from aries_staticagent import crypto as staticagent
from didcomm_messaging.legacy import crypto as dm_legacy

from mediator.didcomm import envelope
from mediator.didcomm.keys import (
    KeyPair,
    did_key_to_verkey,
    normalize_key,
    verkey_to_did_key,
)
from mediator.errors import EnvelopeError, InvalidKey

LIBRARIES = [
    pytest.param(staticagent, id="aries-staticagent"),
    pytest.param(dm_legacy, id="didcomm-messaging"),
]


def unb64(text: str) -> bytes:
    """Envelopes are written unpadded (as askar and ACA-Py write them)."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def finder(*pairs: KeyPair) -> Callable[[str], KeyPair | None]:
    return {p.verkey_b58: p for p in pairs}.get


def as_bytes(packed: Any) -> bytes:
    return packed if isinstance(packed, bytes) else json.dumps(packed).encode()


@pytest.mark.parametrize("lib", LIBRARIES)
@pytest.mark.parametrize("authcrypt", [True, False], ids=["authcrypt", "anoncrypt"])
def test_we_open_what_they_pack(lib: ModuleType, authcrypt: bool) -> None:
    me, other, sender = KeyPair.generate(), KeyPair.generate(), KeyPair.generate()
    packed = lib.pack_message(
        '{"hello": "world"}',
        [other.verkey, me.verkey],
        sender.verkey if authcrypt else None,
        sender.sigkey if authcrypt else None,
    )
    opened = envelope.unpack(as_bytes(packed), finder(me))
    assert json.loads(opened.message) == {"hello": "world"}
    assert opened.recipient_verkey == me.verkey_b58
    assert opened.sender_verkey == (sender.verkey_b58 if authcrypt else None)
    assert envelope.recipient_kids(as_bytes(packed)) == [other.verkey_b58, me.verkey_b58]


@pytest.mark.parametrize("lib", LIBRARIES)
@pytest.mark.parametrize("authcrypt", [True, False], ids=["authcrypt", "anoncrypt"])
def test_they_open_what_we_pack(lib: ModuleType, authcrypt: bool) -> None:
    them, other, sender = KeyPair.generate(), KeyPair.generate(), KeyPair.generate()
    packed = envelope.pack(
        b'{"n": 1}', [other.verkey_b58, them.verkey_b58], sender if authcrypt else None
    )
    message, sender_vk, recipient_vk = lib.unpack_message(packed, them.verkey, them.sigkey)
    assert json.loads(message) == {"n": 1}
    assert recipient_vk == them.verkey_b58
    assert sender_vk == (sender.verkey_b58 if authcrypt else None)


def test_what_we_write_says_what_real_agents_say() -> None:
    sender, to = KeyPair.generate(), KeyPair.generate()
    outer = json.loads(envelope.pack(b"{}", [to.verkey_b58], sender))
    header = json.loads(unb64(outer["protected"]))
    assert header["enc"] == "xchacha20poly1305_ietf" and header["typ"] == "JWM/1.0"
    assert header["alg"] == "Authcrypt"
    assert len(unb64(outer["iv"])) == 12  # ChaCha20-Poly1305 IETF, as all do
    assert set(header["recipients"][0]["header"]) == {"kid", "sender", "iv"}


def test_xchacha_content_with_a_24_byte_nonce_is_read_too() -> None:
    import nacl.bindings as sodium

    to = KeyPair.generate()
    outer = json.loads(envelope.pack(b'{"x": 1}', [to.verkey_b58]))
    # Re-encrypt the content as the header's name says, with the same content key.
    recipient = json.loads(unb64(outer["protected"]))["recipients"][0]
    cek = sodium.crypto_box_seal_open(
        unb64(recipient["encrypted_key"]),
        sodium.crypto_sign_ed25519_pk_to_curve25519(to.verkey),
        sodium.crypto_sign_ed25519_sk_to_curve25519(to.sigkey),
    )
    nonce = b"n" * 24
    sealed = sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(
        b'{"x": 2}', outer["protected"].encode(), nonce, cek
    )
    outer.update(
        iv=base64.urlsafe_b64encode(nonce).decode().rstrip("="),  # unpadded, as askar writes
        ciphertext=base64.urlsafe_b64encode(sealed[:-16]).decode().rstrip("="),
        tag=base64.urlsafe_b64encode(sealed[-16:]).decode().rstrip("="),
    )
    opened = envelope.unpack(json.dumps(outer).encode(), finder(to))
    assert json.loads(opened.message) == {"x": 2}


def _tampered(field: str) -> Callable[[dict[str, Any]], None]:
    def change(outer: dict[str, Any]) -> None:
        raw = bytearray(base64.urlsafe_b64decode(outer[field] + "=="))
        raw[0] ^= 1
        outer[field] = base64.urlsafe_b64encode(bytes(raw)).decode()

    return change


@pytest.mark.parametrize(
    "spoil",
    [
        _tampered("ciphertext"),
        _tampered("tag"),
        _tampered("iv"),
        lambda o: o.update(protected="!!!"),
        lambda o: o.pop("ciphertext"),
        lambda o: o.update(
            protected=base64.urlsafe_b64encode(b'{"alg":"X","recipients":[]}').decode()
        ),
    ],
    ids=["ciphertext", "tag", "iv", "protected-not-base64", "no-ciphertext", "no-recipients"],
)
def test_spoiled_envelopes_raise_envelope_error(spoil: Callable[[dict[str, Any]], None]) -> None:
    to = KeyPair.generate()
    outer = json.loads(envelope.pack(b"{}", [to.verkey_b58], KeyPair.generate()))
    spoil(outer)
    with pytest.raises(EnvelopeError):
        envelope.unpack(json.dumps(outer).encode(), finder(to))


def test_not_for_us_and_not_json() -> None:
    packed = envelope.pack(b"{}", [KeyPair.generate().verkey_b58])
    with pytest.raises(EnvelopeError, match="not addressed"):
        envelope.unpack(packed, finder(KeyPair.generate()))
    for junk in (b"", b"[]", b"not json", b'{"protected": 5}'):
        with pytest.raises(EnvelopeError):
            envelope.unpack(junk, finder())


def test_did_key_vectors() -> None:
    # Aries RFC 0360's example pair (also in Credo's and ACA-Py's test suites).
    did = "did:key:z6MkmjY8GnV5i9YTDtPETC2uUAW6ejw3nk5mXF5yci5ab7th"
    verkey = "8HH5gYEeNc3z7PYXmd54d4x6qAfCNrqQqEB3nS7Zfu7K"
    assert did_key_to_verkey(did) == verkey
    assert did_key_to_verkey(did + "#z6MkmjY8GnV5i9YTDtPETC2uUAW6ejw3nk5mXF5yci5ab7th") == verkey
    assert verkey_to_did_key(verkey) == did
    assert normalize_key(did) == normalize_key(verkey) == verkey
    for bad in ("", "did:key:zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme", "0OIl", "abc"):
        with pytest.raises(InvalidKey):
            normalize_key(bad)
