"""Ed25519 keys as DIDComm v1 names them: base58 verkeys and did:key (multicodec ed25519-pub).

Wallets write a recipient key either way (Credo sends did:key in keylist updates, raw base58
in forwards and envelope `kid`s), so every key that crosses the wire goes through
`normalize_key` and is compared as canonical base58.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import base58
import nacl.bindings
import nacl.exceptions
import nacl.signing

from mediator.errors import InvalidKey

DID_KEY = "did:key:"
# Entries in each cache of work that recurs per key (conversions, Diffie-Hellman, our
# per-connection keys): the keys of about that many recently active connections, which is
# what a wallet's burst of messages needs. All of them full hold about 10 MiB per node (2.4
# KiB per connection); keys a stranger makes up only push older entries out. At 65,536
# entries each the caches took about 150 MiB, and fuzzing showed a node's memory growing
# for a million inputs before they were full (docs/security.md).
KEY_CACHE = 4096
ED25519_MULTICODEC = b"\xed\x01"  # varint of 0xed, ed25519-pub
X25519_MULTICODEC = b"\xec\x01"  # varint of 0xec, x25519-pub
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_DIGITS = {c: i for i, c in enumerate(_B58)}
_B58_ALPHABET = frozenset(_B58_DIGITS)
_MAX_KEY_TEXT = 128  # far above any key's text; bounds the work done on hostile input


def _show(value: str) -> str:
    """A value as error messages quote it: shortened, so a hostile input stays small."""
    return repr(value if len(value) <= 60 else value[:57] + "...")


def b58encode(data: bytes) -> str:
    return base58.b58encode(data).decode("ascii")


def b58decode(value: str) -> bytes:
    """Strict base58btc (the `base58` package would drop trailing whitespace), and twice as
    fast as that package: a forward to a recipient not seen lately decodes its key."""
    if not isinstance(value, str) or not value:
        raise InvalidKey("expected a non-empty base58 string")
    if len(value) > _MAX_KEY_TEXT or not _B58_ALPHABET.issuperset(value):
        raise InvalidKey(f"{_show(value)} is not base58")
    n = 0
    for ch in value:
        n = n * 58 + _B58_DIGITS[ch]
    zeros = len(value) - len(value.lstrip("1"))  # each leading "1" is a zero byte
    return bytes(zeros) + n.to_bytes((n.bit_length() + 7) // 8, "big")


@dataclass(frozen=True)
class KeyPair:
    """An Ed25519 key pair; the X25519 forms DIDComm v1 encrypts with are derived once."""

    verkey: bytes  # 32-byte Ed25519 public key
    sigkey: bytes = field(repr=False)  # 64-byte NaCl signing key: seed followed by verkey

    def __post_init__(self) -> None:
        if len(self.verkey) != 32:
            raise InvalidKey(f"an Ed25519 verkey is 32 bytes, not {len(self.verkey)}")
        if len(self.sigkey) != 64 or self.sigkey[32:] != self.verkey:
            raise InvalidKey("the signing key is not the 64-byte NaCl key of this verkey")

    @classmethod
    def generate(cls) -> KeyPair:
        signing = nacl.signing.SigningKey.generate()
        return cls.from_seed(bytes(signing))

    @classmethod
    def from_seed(cls, seed: bytes) -> KeyPair:
        if not isinstance(seed, bytes) or len(seed) != 32:
            raise InvalidKey("an Ed25519 seed is 32 bytes")
        public, secret = nacl.bindings.crypto_sign_seed_keypair(seed)
        return cls(bytes(public), bytes(secret))

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


def _verkey_bytes(verkey_b58: str) -> bytes:
    raw = b58decode(verkey_b58)
    if len(raw) != 32:
        raise InvalidKey(
            f"{_show(verkey_b58)} decodes to {len(raw)} bytes; an Ed25519 verkey is 32 bytes"
        )
    return raw


@functools.lru_cache(maxsize=KEY_CACHE)
def verkey_to_did_key(verkey_b58: str) -> str:
    return DID_KEY + "z" + b58encode(ED25519_MULTICODEC + _verkey_bytes(verkey_b58))


@functools.lru_cache(maxsize=KEY_CACHE)
def did_key_to_verkey(did: str) -> str:
    """The base58 verkey of `did:key:z6Mk…`, with or without a `#fragment`."""
    if not isinstance(did, str):
        raise InvalidKey("a did:key must be a string")
    value = did.split("#", 1)[0]
    if not value.startswith(DID_KEY):
        raise InvalidKey(f"{_show(did)} is not a did:key")
    multibase = value[len(DID_KEY) :]
    if not multibase.startswith("z"):
        raise InvalidKey(f"{_show(did)} is not base58btc (multibase 'z')")
    raw = b58decode(multibase[1:])
    if raw.startswith(X25519_MULTICODEC):
        raise InvalidKey(f"{_show(did)} is an X25519 key; DIDComm v1 keys are Ed25519")
    if not raw.startswith(ED25519_MULTICODEC):
        raise InvalidKey(f"{_show(did)} is not an Ed25519 did:key (multicodec 0xed)")
    if len(raw) != 34:
        raise InvalidKey(f"{_show(did)} holds {len(raw) - 2} key bytes; Ed25519 keys are 32")
    return b58encode(raw[2:])


def normalize_key(value: object) -> str:
    """The canonical base58 verkey of either form a wallet may send (raw base58 or did:key)."""
    if not isinstance(value, str) or not value:
        raise InvalidKey("a key must be a base58 Ed25519 verkey or a did:key")
    return _normalize(value)


@functools.lru_cache(maxsize=KEY_CACHE)
def _normalize(value: str) -> str:
    if value.startswith("did:"):
        return did_key_to_verkey(value)
    _verkey_bytes(value)  # 32 bytes, or InvalidKey
    return value  # base58 text and its bytes map one to one: the text is already canonical


@functools.lru_cache(maxsize=KEY_CACHE)
def x25519_of(verkey_b58: str) -> bytes:
    """The X25519 key of a base58 Ed25519 verkey (peers' keys recur: converted once)."""
    return ed25519_to_x25519_public(_verkey_bytes(verkey_b58))


def ed25519_to_x25519_public(verkey: bytes) -> bytes:
    try:
        return bytes(nacl.bindings.crypto_sign_ed25519_pk_to_curve25519(verkey))
    except (nacl.exceptions.CryptoError, ValueError, TypeError) as exc:
        # libsodium refuses points off the curve and small-order points
        raise InvalidKey("not a valid Ed25519 public key") from exc


def ed25519_to_x25519_secret(sigkey: bytes) -> bytes:
    try:
        return bytes(nacl.bindings.crypto_sign_ed25519_sk_to_curve25519(sigkey))
    except (nacl.exceptions.CryptoError, ValueError, TypeError) as exc:
        raise InvalidKey("not a 64-byte Ed25519 signing key") from exc
