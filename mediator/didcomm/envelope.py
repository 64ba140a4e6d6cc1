"""DIDComm v1 envelopes (RFC 0019): authcrypt and anoncrypt with libsodium (PyNaCl).

The header names the cipher `xchacha20poly1305_ietf`, but every real implementation
(askar/Credo, ACA-Py, aries-staticagent) encrypts with ChaCha20-Poly1305 IETF and a 12-byte
nonce. We write what they write and read both.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import nacl.bindings as sodium
import nacl.exceptions
import orjson

from mediator.didcomm.keys import KeyPair, x25519_of
from mediator.errors import EnvelopeError, InvalidKey

MAX_RECIPIENTS = 100
ENC = "xchacha20poly1305_ietf"


@dataclass(frozen=True)
class Unpacked:
    message: bytes
    recipient_verkey: str
    sender_verkey: str | None


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


def b64decode(value: object, what: str) -> bytes:
    """Both alphabets, with or without padding: implementations differ."""
    if not isinstance(value, str):
        raise EnvelopeError(f"{what} must be a base64 string")
    # urlsafe_b64decode also reads the standard alphabet (+/), and padding is optional.
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError) as exc:
        raise EnvelopeError(f"{what} is not base64") from exc


def pack(message: bytes, recipient_verkeys: Sequence[str], sender: KeyPair | None = None) -> bytes:
    if not recipient_verkeys:
        raise EnvelopeError("an envelope needs at least one recipient")
    cek = secrets.token_bytes(32)
    recipients: list[dict[str, Any]] = []
    sender_secret = sender.x25519_secret if sender else None
    for verkey in recipient_verkeys:
        target = x25519_of(verkey)
        if sender is None or sender_secret is None:
            recipients.append(
                {
                    "encrypted_key": b64url(sodium.crypto_box_seal(cek, target)),
                    "header": {"kid": verkey},
                }
            )
            continue
        nonce = secrets.token_bytes(24)
        recipients.append(
            {
                "encrypted_key": b64url(sodium.crypto_box(cek, nonce, target, sender_secret)),
                "header": {
                    "kid": verkey,
                    "sender": b64url(sodium.crypto_box_seal(sender.verkey_b58.encode(), target)),
                    "iv": b64url(nonce),
                },
            }
        )
    header = {
        "enc": ENC,
        "typ": "JWM/1.0",
        "alg": "Authcrypt" if sender else "Anoncrypt",
        "recipients": recipients,
    }
    protected = b64url(orjson.dumps(header))
    iv = secrets.token_bytes(12)
    sealed = sodium.crypto_aead_chacha20poly1305_ietf_encrypt(message, protected.encode(), iv, cek)
    out = {
        "protected": protected,
        "iv": b64url(iv),
        "ciphertext": b64url(sealed[:-16]),
        "tag": b64url(sealed[-16:]),
    }
    return orjson.dumps(out)


def _parse(data: bytes | dict[str, Any]) -> tuple[dict[str, Any], str, dict[str, Any]]:
    if isinstance(data, bytes | str):
        try:
            outer = orjson.loads(data)
        except ValueError as exc:
            raise EnvelopeError("the envelope is not JSON") from exc
    else:
        outer = data
    if not isinstance(outer, dict) or not isinstance(outer.get("protected"), str):
        raise EnvelopeError("the envelope has no protected header")
    try:
        header = orjson.loads(b64decode(outer["protected"], "protected"))
    except ValueError as exc:
        raise EnvelopeError("the protected header is not JSON") from exc
    if not isinstance(header, dict):
        raise EnvelopeError("the protected header is not an object")
    recipients = header.get("recipients")
    if not isinstance(recipients, list) or not recipients:
        raise EnvelopeError("the envelope names no recipients")
    if len(recipients) > MAX_RECIPIENTS:
        raise EnvelopeError(f"more than {MAX_RECIPIENTS} recipients")
    for r in recipients:
        if not (
            isinstance(r, dict)
            and isinstance(r.get("header"), dict)
            and isinstance(r["header"].get("kid"), str)
        ):
            raise EnvelopeError("a recipient has no header.kid")
    return outer, outer["protected"], header


def recipient_kids(envelope: bytes | dict[str, Any]) -> list[str]:
    _, _, header = _parse(envelope)
    return [r["header"]["kid"] for r in header["recipients"]]


def unpack(envelope: bytes | dict[str, Any], find_key: Callable[[str], KeyPair | None]) -> Unpacked:
    """Open an envelope (bytes, or its JSON already parsed)."""
    outer, protected, header = _parse(envelope)
    alg = header.get("alg")
    if alg not in ("Authcrypt", "Anoncrypt"):
        raise EnvelopeError(f"unknown envelope alg {alg!r}")
    for r in header["recipients"]:
        keypair = find_key(r["header"]["kid"])
        if keypair is not None:
            break
    else:
        raise EnvelopeError("the envelope is not addressed to a key of this mediator")
    my_public = keypair.x25519_public
    my_secret = keypair.x25519_secret
    encrypted_key = b64decode(r.get("encrypted_key"), "encrypted_key")
    sender: str | None = None
    try:
        if alg == "Authcrypt":
            sealed_sender = b64decode(r["header"].get("sender"), "sender")
            sender = sodium.crypto_box_seal_open(sealed_sender, my_public, my_secret).decode()
            sender_public = x25519_of(sender)
            nonce = b64decode(r["header"].get("iv"), "iv")
            cek = sodium.crypto_box_open(encrypted_key, nonce, sender_public, my_secret)
        else:
            cek = sodium.crypto_box_seal_open(encrypted_key, my_public, my_secret)
    except (
        nacl.exceptions.CryptoError,
        ValueError,
        TypeError,
        InvalidKey,
        UnicodeDecodeError,
    ) as exc:
        raise EnvelopeError("the content key does not decrypt") from exc
    if len(cek) != 32:
        raise EnvelopeError("the content key is not 32 bytes")
    iv = b64decode(outer.get("iv"), "iv")
    sealed = b64decode(outer.get("ciphertext"), "ciphertext") + b64decode(outer.get("tag"), "tag")
    aad = protected.encode()
    try:
        if len(iv) == 12:
            message = sodium.crypto_aead_chacha20poly1305_ietf_decrypt(sealed, aad, iv, cek)
        elif len(iv) == 24:
            message = sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(sealed, aad, iv, cek)
        else:
            raise EnvelopeError("the content nonce is neither 12 nor 24 bytes")
    except (nacl.exceptions.CryptoError, ValueError, TypeError) as exc:
        raise EnvelopeError("the content does not decrypt") from exc
    return Unpacked(message=message, recipient_verkey=keypair.verkey_b58, sender_verkey=sender)
