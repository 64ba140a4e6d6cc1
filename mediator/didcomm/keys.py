"""Ed25519 keys as DIDComm v1 names them: base58 verkeys and did:key (multicodec ed25519-pub)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import base58
import nacl.bindings
import nacl.signing

from mediator.errors import InvalidKey

DID_KEY = "did:key:"
ED25519_MULTICODEC = b"\xed\x01"


def b58encode(data: bytes) -> str:
    return base58.b58encode(data).decode()


def b58decode(value: str) -> bytes:
    try:
        return base58.b58decode(value.encode("ascii"))
    except (ValueError, UnicodeEncodeError) as exc:
        raise InvalidKey(f"{value[:60]!r} is not base58") from exc


@dataclass(frozen=True)
class KeyPair:
    verkey: bytes  # 32-byte Ed25519 public key
    sigkey: bytes  # 64-byte NaCl signing key (seed + public key)

    @classmethod
    def generate(cls) -> KeyPair:
        signing = nacl.signing.SigningKey.generate()
        return cls(bytes(signing.verify_key), bytes(signing) + bytes(signing.verify_key))

    @classmethod
    def from_seed(cls, seed: bytes) -> KeyPair:
        public, secret = nacl.bindings.crypto_sign_seed_keypair(seed)
        return cls(public, secret)

    @functools.cached_property
    def verkey_b58(self) -> str:
        return b58encode(self.verkey)

    @functools.cached_property
    def did_key(self) -> str:
        return verkey_to_did_key(self.verkey_b58)

    @functools.cached_property
    def x25519_public(self) -> bytes:
        return ed25519_to_x25519_public(self.verkey)

    @functools.cached_property
    def x25519_secret(self) -> bytes:
        return ed25519_to_x25519_secret(self.sigkey)


@functools.lru_cache(maxsize=65536)
def verkey_to_did_key(verkey_b58: str) -> str:
    raw = b58decode(verkey_b58)
    if len(raw) != 32:
        raise InvalidKey("an Ed25519 verkey is 32 bytes")
    return DID_KEY + "z" + b58encode(ED25519_MULTICODEC + raw)


@functools.lru_cache(maxsize=65536)
def did_key_to_verkey(did: str) -> str:
    value = did.split("#", 1)[0]
    if not value.startswith(DID_KEY + "z"):
        raise InvalidKey(f"{did[:60]!r} is not a base58btc did:key")
    raw = b58decode(value[len(DID_KEY) + 1 :])
    if not raw.startswith(ED25519_MULTICODEC) or len(raw) != 34:
        raise InvalidKey(f"{did[:60]!r} is not an Ed25519 did:key")
    return b58encode(raw[2:])


@functools.lru_cache(maxsize=65536)
def normalize_key(value: str) -> str:
    """A base58 verkey from either form a wallet may send (raw base58 or did:key)."""
    if not isinstance(value, str) or not value:
        raise InvalidKey("a key must be a base58 verkey or a did:key")
    if value.startswith("did:"):
        return did_key_to_verkey(value)
    if len(b58decode(value)) != 32:
        raise InvalidKey(f"{value[:60]!r} is not a 32-byte base58 Ed25519 verkey")
    return value


@functools.lru_cache(maxsize=65536)
def x25519_of(verkey_b58: str) -> bytes:
    """The X25519 key of a base58 Ed25519 verkey (peers' keys recur: converted once)."""
    return ed25519_to_x25519_public(b58decode(verkey_b58))


def ed25519_to_x25519_public(verkey: bytes) -> bytes:
    try:
        return bytes(nacl.bindings.crypto_sign_ed25519_pk_to_curve25519(verkey))
    except Exception as exc:  # libsodium refuses points off the curve
        raise InvalidKey("not a valid Ed25519 public key") from exc


def ed25519_to_x25519_secret(sigkey: bytes) -> bytes:
    return bytes(nacl.bindings.crypto_sign_ed25519_sk_to_curve25519(sigkey))
