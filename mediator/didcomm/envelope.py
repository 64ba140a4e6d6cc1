"""DIDComm v1 envelopes (RFC 0019, `JWM/1.0`): authcrypt and anoncrypt with libsodium (PyNaCl).

What real implementations do, where the RFC text does not say:

- The header names the cipher `xchacha20poly1305_ietf`, but askar (Credo, ACA-Py),
  aries-staticagent and didcomm-messaging all encrypt with ChaCha20-Poly1305 IETF and a
  12-byte nonce. We write that, and read both (XChaCha20 when the nonce is 24 bytes).
- askar, ACA-Py and didcomm-messaging write unpadded base64url, aries-staticagent padded;
  all of them read either. We write unpadded (as JWE does) and read padded or not, in the
  URL-safe or the standard alphabet.
- didcomm-messaging 0.1 splits ciphertext and tag by the *character* count of the message,
  so for non-ASCII content its `tag` is longer than 16 bytes; every reader joins the two
  again, and so do we.

Every failure to read raises `EnvelopeError` with the reason, never anything else.

What one connection's messages share is computed once and kept (`functools.lru_cache`):
the X25519 shared key of our key and the peer's (`crypto_box_beforenm`), which authcrypt
uses to wrap every content key, and the `sender` field we write, our verkey sealed to the
peer: it says the same thing in every message to the same key, and computing it afresh cost
two X25519 operations per message (about 60 us) to hide nothing the `kid` and the socket
do not show already. A peer's sealed `sender` that recurs is opened once too.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import nacl.bindings as sodium
import nacl.exceptions
import orjson

from mediator.didcomm.keys import KEY_CACHE, KeyPair, normalize_key, x25519_of
from mediator.errors import EnvelopeError, InvalidKey, NotAddressedHere
from mediator.randomness import random_bytes

MAX_RECIPIENTS = 100
ENC = "xchacha20poly1305_ietf"
TYP = "JWM/1.0"
AUTHCRYPT = "Authcrypt"
ANONCRYPT = "Anoncrypt"

_TAG_BYTES = 16
_TO_STANDARD = bytes.maketrans(b"-_", b"+/")
_CRYPTO_ERRORS = (nacl.exceptions.CryptoError, ValueError, TypeError)

Envelope = bytes | str | Mapping[str, Any]
"""An envelope as bytes or text, or its outer JSON object already parsed."""


@dataclass(frozen=True)
class Unpacked:
    message: bytes
    recipient_verkey: str
    sender_verkey: str | None  # None for anoncrypt


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(value: object, what: str = "value") -> bytes:
    """Base64 as any implementation writes it: either alphabet, padded or not."""
    if not isinstance(value, str):
        raise EnvelopeError(f"{what} must be a base64url string")
    try:
        text = value.encode("ascii").rstrip(b"=")
    except UnicodeEncodeError as exc:
        raise EnvelopeError(f"{what} is not base64url") from exc
    if len(text) % 4 == 1:
        raise EnvelopeError(f"{what} is not base64url (truncated)")
    try:
        return binascii.a2b_base64(
            text.translate(_TO_STANDARD) + b"=" * (-len(text) % 4), strict_mode=True
        )
    except binascii.Error as exc:
        raise EnvelopeError(f"{what} is not base64url") from exc


def pack(message: bytes, recipient_verkeys: Sequence[str], sender: KeyPair | None = None) -> bytes:
    """Encrypt `message` for every recipient: authcrypt from `sender`, else anoncrypt.

    Recipients may be base58 verkeys or did:keys; `kid`s are written as base58 (InvalidKey
    for a key that is neither).
    """
    if not recipient_verkeys:
        raise EnvelopeError("an envelope needs at least one recipient")
    if len(recipient_verkeys) > MAX_RECIPIENTS:
        raise EnvelopeError(f"an envelope has at most {MAX_RECIPIENTS} recipients")
    cek = random_bytes(sodium.crypto_aead_chacha20poly1305_ietf_KEYBYTES)
    recipients = [_recipient(cek, normalize_key(k), sender) for k in recipient_verkeys]
    header = {
        "enc": ENC,
        "typ": TYP,
        "alg": AUTHCRYPT if sender is not None else ANONCRYPT,
        "recipients": recipients,
    }
    protected = b64url_encode(orjson.dumps(header))
    iv = random_bytes(sodium.crypto_aead_chacha20poly1305_ietf_NPUBBYTES)
    sealed = sodium.crypto_aead_chacha20poly1305_ietf_encrypt(
        message, protected.encode("ascii"), iv, cek
    )
    return orjson.dumps(
        {
            "protected": protected,
            "iv": b64url_encode(iv),
            "ciphertext": b64url_encode(sealed[:-_TAG_BYTES]),
            "tag": b64url_encode(sealed[-_TAG_BYTES:]),
        }
    )


def _recipient(cek: bytes, verkey: str, sender: KeyPair | None) -> dict[str, Any]:
    target = x25519_of(verkey)
    if sender is None:
        return {
            "encrypted_key": b64url_encode(sodium.crypto_box_seal(cek, target)),
            "header": {"kid": verkey},
        }
    nonce = random_bytes(sodium.crypto_box_NONCEBYTES)
    shared = _shared_key(target, sender.x25519_secret)
    encrypted_key = sodium.crypto_box_afternm(cek, nonce, shared)
    return {
        "encrypted_key": b64url_encode(encrypted_key),
        "header": {
            "kid": verkey,
            "sender": _sealed_sender(sender.verkey_b58, target),
            "iv": b64url_encode(nonce),
        },
    }


@functools.lru_cache(maxsize=KEY_CACHE)
def _shared_key(public: bytes, secret: bytes) -> bytes:
    """The crypto_box key of two X25519 keys (one Diffie-Hellman, then reused)."""
    return bytes(sodium.crypto_box_beforenm(public, secret))


@functools.lru_cache(maxsize=KEY_CACHE)
def _sealed_sender(verkey_b58: str, target: bytes) -> str:
    return b64url_encode(sodium.crypto_box_seal(verkey_b58.encode(), target))


@functools.lru_cache(maxsize=KEY_CACHE)
def _open_sender(sealed: bytes, public: bytes, secret: bytes) -> bytes:
    return bytes(sodium.crypto_box_seal_open(sealed, public, secret))


@dataclass(frozen=True)
class _Parsed:
    outer: Mapping[str, Any]
    protected: str
    alg: str
    recipients: list[dict[str, Any]]


def _parse(envelope: Envelope) -> _Parsed:
    outer: object = envelope
    if isinstance(envelope, bytes | bytearray | memoryview | str):
        try:
            outer = orjson.loads(envelope)
        except (ValueError, RecursionError) as exc:
            raise EnvelopeError("the envelope is not JSON") from exc
    if not isinstance(outer, Mapping):
        raise EnvelopeError("the envelope is not a JSON object")
    protected = outer.get("protected")
    if not isinstance(protected, str):
        raise EnvelopeError("the envelope has no protected header")
    try:
        header = orjson.loads(b64url_decode(protected, "protected"))
    except (ValueError, RecursionError) as exc:
        raise EnvelopeError("the protected header is not JSON") from exc
    if not isinstance(header, dict):
        raise EnvelopeError("the protected header is not a JSON object")
    recipients = header.get("recipients")
    if not isinstance(recipients, list) or not recipients:
        raise EnvelopeError("the protected header names no recipients")
    if len(recipients) > MAX_RECIPIENTS:
        raise EnvelopeError(f"the envelope has more than {MAX_RECIPIENTS} recipients")
    for recipient in recipients:
        if not (
            isinstance(recipient, dict)
            and isinstance(recipient.get("header"), dict)
            and isinstance(recipient["header"].get("kid"), str)
        ):
            raise EnvelopeError("a recipient has no header.kid")
    alg = header.get("alg")
    if alg not in (AUTHCRYPT, ANONCRYPT):
        raise EnvelopeError(f"unknown envelope alg {str(alg)[:40]!r}")
    return _Parsed(outer, protected, alg, recipients)


def recipient_kids(envelope: Envelope) -> list[str]:
    """The `kid`s the envelope is addressed to, as written (to route it or check it is ours)."""
    return [r["header"]["kid"] for r in _parse(envelope).recipients]


def unpack(envelope: Envelope, find_key: Callable[[str], KeyPair | None]) -> Unpacked:
    """Open an envelope with the first recipient key `find_key` knows."""
    parsed = _parse(envelope)
    for recipient in parsed.recipients:
        keypair = find_key(recipient["header"]["kid"])
        if keypair is not None:
            break
    else:
        raise NotAddressedHere("the envelope is not addressed to any key held here")
    if parsed.alg == AUTHCRYPT:
        cek, sender = _authcrypt_cek(recipient, keypair)
    else:
        cek, sender = _anoncrypt_cek(recipient, keypair), None
    message = _decrypt_content(parsed, cek)
    return Unpacked(message=message, recipient_verkey=keypair.verkey_b58, sender_verkey=sender)


def _authcrypt_cek(recipient: dict[str, Any], keypair: KeyPair) -> tuple[bytes, str]:
    header = recipient["header"]
    if header.get("sender") is None or header.get("iv") is None:
        raise EnvelopeError("an Authcrypt recipient needs header.sender and header.iv")
    sealed_sender = b64url_decode(header["sender"], "header.sender")
    nonce = b64url_decode(header["iv"], "header.iv")
    encrypted_key = b64url_decode(recipient.get("encrypted_key"), "encrypted_key")
    if len(nonce) != sodium.crypto_box_NONCEBYTES:
        raise EnvelopeError(f"header.iv is {len(nonce)} bytes, not {sodium.crypto_box_NONCEBYTES}")
    try:
        opened = _open_sender(sealed_sender, keypair.x25519_public, keypair.x25519_secret)
    except _CRYPTO_ERRORS as exc:
        raise EnvelopeError("header.sender does not decrypt with our key") from exc
    try:
        sender = normalize_key(opened.decode("ascii"))
        sender_public = x25519_of(sender)
    except (UnicodeDecodeError, InvalidKey) as exc:
        raise EnvelopeError("header.sender is not a base58 Ed25519 verkey") from exc
    try:
        shared = _shared_key(sender_public, keypair.x25519_secret)
        cek = sodium.crypto_box_open_afternm(encrypted_key, nonce, shared)
    except _CRYPTO_ERRORS as exc:
        raise EnvelopeError("the content key does not decrypt from this sender") from exc
    return _check_cek(cek), sender


def _anoncrypt_cek(recipient: dict[str, Any], keypair: KeyPair) -> bytes:
    encrypted_key = b64url_decode(recipient.get("encrypted_key"), "encrypted_key")
    try:
        cek = sodium.crypto_box_seal_open(
            encrypted_key, keypair.x25519_public, keypair.x25519_secret
        )
    except _CRYPTO_ERRORS as exc:
        raise EnvelopeError("the content key does not decrypt with our key") from exc
    return _check_cek(cek)


def _check_cek(cek: bytes) -> bytes:
    if len(cek) != 32:
        raise EnvelopeError(f"the content key is {len(cek)} bytes, not 32")
    return cek


def _decrypt_content(parsed: _Parsed, cek: bytes) -> bytes:
    outer = parsed.outer
    iv = b64url_decode(outer.get("iv"), "iv")
    sealed = b64url_decode(outer.get("ciphertext"), "ciphertext") + b64url_decode(
        outer.get("tag"), "tag"
    )
    if len(sealed) < _TAG_BYTES:
        raise EnvelopeError("ciphertext and tag are shorter than a tag")
    aad = parsed.protected.encode("ascii")
    if len(iv) == sodium.crypto_aead_chacha20poly1305_ietf_NPUBBYTES:
        decrypt = sodium.crypto_aead_chacha20poly1305_ietf_decrypt
    elif len(iv) == sodium.crypto_aead_xchacha20poly1305_ietf_NPUBBYTES:
        decrypt = sodium.crypto_aead_xchacha20poly1305_ietf_decrypt
    else:
        raise EnvelopeError(f"iv is {len(iv)} bytes: neither ChaCha20 (12) nor XChaCha20 (24)")
    try:
        return bytes(decrypt(sealed, aad, iv, cek))
    except _CRYPTO_ERRORS as exc:
        raise EnvelopeError("the content does not decrypt (wrong key or tampered)") from exc
