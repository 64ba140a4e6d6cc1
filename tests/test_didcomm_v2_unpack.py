"""Reading DIDComm v2 messages addressed to the mediator (mediator/didcomm/v2/unpack.py):
every layering a hop may use opens and says what it proved; inconsistent layers (a `from`
that is not the sender's or the signer's DID), forbidden nestings and invalid rotations are
refused; what the mediator packs, a wallet opens."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from mediator.didcomm.envelope import b64url_encode
from mediator.didcomm.keys import ED25519_MULTICODEC, X25519_MULTICODEC, KeyPair, b58encode
from mediator.didcomm.v2 import content, jwe, jws
from mediator.didcomm.v2.dids import resolve
from mediator.didcomm.v2.identity import MediatorV2
from mediator.didcomm.v2.jwk import PrivateKey
from mediator.didcomm.v2.unpack import pack, unpack
from mediator.errors import EnvelopeError, NotAddressedHere

MEDIATOR = MediatorV2(KeyPair.from_seed(bytes(range(32))), ("https://m.example/",))


class Wallet:
    """A v2 wallet: a did:peer:2 of an X25519 key (key-1) and an Ed25519 key (key-2)."""

    def __init__(self) -> None:
        self.agreement = PrivateKey.generate("X25519")
        self.signing = ed25519.Ed25519PrivateKey.generate()
        x = "z" + b58encode(X25519_MULTICODEC + self.agreement.public.x)
        ed = "z" + b58encode(ED25519_MULTICODEC + self.signing.public_key().public_bytes_raw())
        self.did = f"did:peer:2.E{x}.V{ed}"

    def message(self, **extra: Any) -> dict[str, Any]:
        return {"id": "m-1", "type": "https://didcomm.org/trust-ping/2.0/ping",
                "from": self.did, "to": [MEDIATOR.did], "body": {}, **extra}  # fmt: skip

    def authcrypt(self, message: dict[str, Any] | bytes) -> dict[str, Any]:
        raw = message if isinstance(message, bytes) else orjson.dumps(message)
        return jwe.encrypt(raw, self._to(), sender=(f"{self.did}#key-1", self.agreement))

    def sign(self, message: dict[str, Any]) -> dict[str, Any]:
        return jws.sign(orjson.dumps(message), f"{self.did}#key-2", self.signing)

    def opens(self, sealed: dict[str, Any]) -> dict[str, Any]:
        kid = f"{self.did}#key-1"
        ours = {kid: self.agreement}.get
        return unpack(sealed, ours).message

    @staticmethod
    def _to() -> list[tuple[str, Any]]:
        key = resolve(MEDIATOR.did).agreement_key(MEDIATOR.agreement_kid)
        return [(MEDIATOR.agreement_kid, key)]


def _ours(kid: str) -> PrivateKey | None:
    return MEDIATOR.agreement if resolve(MEDIATOR.did).agreement_key(kid) else None


def _anoncrypt(payload: dict[str, Any] | bytes) -> dict[str, Any]:
    raw = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    return jwe.encrypt(raw, Wallet._to(), enc="XC20P")


def test_authcrypt_proves_the_sender() -> None:
    alice = Wallet()
    got = unpack(alice.authcrypt(alice.message()), _ours, (MEDIATOR.did,))
    assert got.layers == ("authcrypt",) and got.sender == alice.did
    assert got.recipient_kid == MEDIATOR.agreement_kid and got.addressed_here
    assert got.message["type"].endswith("/ping")


def test_anoncrypt_leaves_the_sender_anonymous() -> None:
    got = unpack(_anoncrypt({"id": "1", "type": "https://didcomm.org/routing/2.0/forward"}), _ours)
    assert got.layers == ("anoncrypt",) and got.sender is None and got.encrypted


def test_anoncrypt_of_authcrypt_hides_and_still_proves_the_sender() -> None:
    alice = Wallet()
    inner = alice.authcrypt(alice.message())
    got = unpack(_anoncrypt(inner), _ours)
    assert got.layers == ("anoncrypt", "authcrypt") and got.sender == alice.did


def test_anoncrypt_of_a_signed_message_proves_the_signer() -> None:
    alice = Wallet()
    got = unpack(_anoncrypt(alice.sign(alice.message())), _ours)
    assert got.layers == ("anoncrypt", "signed") and got.sender == alice.did


def test_a_signed_message_alone_and_a_plaintext_message_are_read() -> None:
    alice = Wallet()
    signed = unpack(alice.sign(alice.message()), _ours)
    assert signed.layers == ("signed",) and signed.sender == alice.did and not signed.encrypted
    plain = unpack(orjson.dumps(alice.message()), _ours)
    assert plain.layers == () and plain.sender is None


def test_a_from_that_is_not_the_senders_did_is_refused() -> None:
    alice, mallory = Wallet(), Wallet()
    with pytest.raises(EnvelopeError, match="not the DID of its skid"):
        unpack(mallory.authcrypt(alice.message()), _ours)
    with pytest.raises(EnvelopeError, match="not the DID of its signer"):
        unpack(_anoncrypt(mallory.sign(alice.message())), _ours)


def test_authcrypt_of_a_message_signed_by_another_is_refused() -> None:
    alice, bob = Wallet(), Wallet()
    signed_by_bob = bob.sign(alice.message())
    with pytest.raises(EnvelopeError, match="not the DID of its signer"):
        unpack(alice.authcrypt(orjson.dumps(signed_by_bob)), _ours)


@pytest.mark.parametrize("nesting", ["authcrypt(anoncrypt)", "anoncrypt(anoncrypt)", "a(a(sign))"])
def test_nestings_the_spec_forbids_are_refused(nesting: str) -> None:
    alice = Wallet()
    if nesting == "authcrypt(anoncrypt)":
        sealed = alice.authcrypt(orjson.dumps(_anoncrypt(alice.message())))
    elif nesting == "anoncrypt(anoncrypt)":
        sealed = _anoncrypt(_anoncrypt(alice.message()))
    else:
        sealed = _anoncrypt(alice.authcrypt(orjson.dumps(alice.sign(alice.message()))))
    with pytest.raises(EnvelopeError, match=r"nested|not allowed"):
        unpack(sealed, _ours)


def test_a_message_for_someone_else_says_so() -> None:
    other = PrivateKey.generate("X25519")
    sealed = jwe.encrypt(b"{}", [("did:example:carol#key-1", other.public)])
    with pytest.raises(NotAddressedHere):
        unpack(sealed, _ours)
    alice = Wallet()
    got = unpack(alice.authcrypt(alice.message(to=["did:example:carol"])), _ours, (MEDIATOR.did,))
    assert not got.addressed_here  # read, and noted: the spec allows no refusal


def _from_prior(old: Wallet, new_did: str, kid_did: str | None = None) -> str:
    header = {"typ": "JWT", "alg": "EdDSA", "kid": f"{kid_did or old.did}#key-2"}
    claims = {"sub": new_did, "iss": old.did, "iat": 1700000000}
    signing = f"{b64url_encode(orjson.dumps(header))}.{b64url_encode(orjson.dumps(claims))}"
    return f"{signing}.{b64url_encode(old.signing.sign(signing.encode()))}"


def test_a_rotation_signed_by_the_prior_did_is_honoured() -> None:
    old, new = Wallet(), Wallet()
    got = unpack(new.authcrypt(new.message(from_prior=_from_prior(old, new.did))), _ours)
    assert got.rotated_from == old.did and got.sender == new.did


def test_a_rotation_not_signed_by_the_prior_did_is_refused() -> None:
    old, new, mallory = Wallet(), Wallet(), Wallet()
    forged = _from_prior(mallory, new.did)
    claims = forged.split(".")
    header_claims = orjson.dumps({"sub": new.did, "iss": old.did})
    forged = ".".join([claims[0], b64url_encode(header_claims), claims[2]])
    with pytest.raises(EnvelopeError):
        unpack(new.authcrypt(new.message(from_prior=forged)), _ours)
    with pytest.raises(EnvelopeError, match="sub must be"):
        unpack(new.authcrypt(new.message(from_prior=_from_prior(old, mallory.did))), _ours)


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ({"type": "t"}, "string id"),
        ({"id": "1", "type": "t", "body": []}, "body is a JSON object"),
        ({"id": "1", "type": "t", "to": "did:x"}, "to is a list"),
        ({"id": "1", "type": "t", "from": 5}, "from is a string"),
    ],
)
def test_malformed_plaintext_is_refused(message: dict[str, Any], said: str) -> None:
    with pytest.raises(EnvelopeError, match=said):
        unpack(_anoncrypt(message), _ours)


def test_what_the_mediator_packs_the_wallet_opens() -> None:
    alice = Wallet()
    reply = {"id": "r-1", "type": "https://didcomm.org/trust-ping/2.0/ping-response",
             "from": MEDIATOR.did, "to": [alice.did], "thid": "m-1", "body": {}}  # fmt: skip
    sealed = pack(reply, alice.did, sender=(MEDIATOR.agreement_kid, MEDIATOR.agreement))
    assert alice.opens(sealed) == reply
    anonymous = {k: v for k, v in reply.items() if k != "from"}
    assert alice.opens(pack(anonymous, alice.did)) == anonymous


@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 1000])
def test_a256cbc_pads_and_unpads_every_length_and_refuses_bad_padding(size: int) -> None:
    """PKCS#7 as the spec's A256CBC-HS512 has it, whatever the plaintext's length; a
    block whose padding is wrong (a key that passes the tag) is refused, never returned."""
    enc = content.algorithm("A256CBC-HS512")
    key, plaintext = enc.new_key(), bytes(range(256)) * 4
    sealed = enc.encrypt(key, plaintext[:size], b"aad")
    assert len(sealed.ciphertext) == (size // 16 + 1) * 16
    assert enc.decrypt(key, sealed, b"aad") == plaintext[:size]
    mac_key, enc_key = key[:32], key[32:]
    bad = Cipher(algorithms.AES(enc_key), modes.CBC(sealed.iv)).encryptor()
    ciphertext = bad.update(b"\x00" * 16) + bad.finalize()  # a last byte of 0 is no padding
    forged = content.Sealed(
        sealed.iv, ciphertext, content._cbc_tag(mac_key, b"aad", sealed.iv, ciphertext)
    )
    with pytest.raises(EnvelopeError, match="padding"):
        enc.decrypt(key, forged, b"aad")
