"""DIDComm v2 encrypted messages: JWEs in General JSON form, anoncrypt (ECDH-ES+A256KW)
and authcrypt (ECDH-1PU+A256KW, draft-madden-jose-ecdh-1pu-04), as DIDComm Messaging 2.1
§Message Encryption describes them.

Reading is two steps, so that the caller can find keys (ours by `kid`, the sender's by
`skid` through its DID document) between them: `parse` checks the structure and the
protected header and says who it is for; `Jwe.decrypt` unwraps the content key with our
private key (and, authcrypt, the sender's public key) and decrypts.

What the field writes and we read (be liberal in what you accept): `apu` and `apv` may be
missing (Veramo's authcrypt writes neither) and are then empty in the key derivation; the
sender is named by `skid`, or by `apu` alone; A256GCM and XC20P are read in authcrypt too
(Veramo's authcrypt defaults to A256GCM), though the spec allows only A256CBC-HS512 there;
and Veramo 7 derives authcrypt's key-wrapping key as ECDH-1PU draft 3 did, without the
content's tag (the spec follows draft 4, which binds the tag): tried when draft 4 fails,
and said (`Jwe.open`), so that an answer to such a peer is written the way it reads.

What we write follows the spec to the letter (common `epk`, `apv`, and `apu` and `skid`
in the protected header), but for that answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap, aes_key_wrap

from mediator.didcomm.envelope import b64url_decode, b64url_encode
from mediator.didcomm.v2 import content
from mediator.didcomm.v2.jwk import PrivateKey, PublicKey
from mediator.errors import EnvelopeError

ANONCRYPT = "ECDH-ES+A256KW"
AUTHCRYPT = "ECDH-1PU+A256KW"
TYP = "application/didcomm-encrypted+json"
MAX_RECIPIENTS = 64  # far above any real envelope; bounds the work on hostile input
MAX_HEADER = 16_384  # bytes of the protected header, decoded


@dataclass(frozen=True)
class Recipient:
    kid: str
    encrypted_key: bytes


@dataclass(frozen=True)
class Jwe:
    """A parsed JWE: its protected header, checked, and what decrypting needs."""

    header: dict[str, Any]
    aad: bytes  # the protected header as written
    alg: str
    enc: content.Algorithm
    epk: PublicKey
    recipients: tuple[Recipient, ...]
    sealed: content.Sealed

    @property
    def authcrypt(self) -> bool:
        return self.alg == AUTHCRYPT

    @property
    def sender_kid(self) -> str | None:
        """Authcrypt: the sender's key id (`skid`, else the decoded `apu`)."""
        if not self.authcrypt:
            return None
        skid = self.header.get("skid")
        if isinstance(skid, str) and skid:
            return skid
        try:
            apu = b64url_decode(self.header.get("apu"), "apu").decode()
        except (EnvelopeError, UnicodeDecodeError):
            return None
        return apu or None

    @property
    def kids(self) -> list[str]:
        return [r.kid for r in self.recipients]

    def decrypt(self, kid: str, ours: PrivateKey, sender: PublicKey | None = None) -> bytes:
        """The plaintext, with our private key of recipient `kid` (authcrypt: and the
        sender's public key, found from `sender_kid`)."""
        return self.open(kid, ours, sender)[0]

    def open(
        self, kid: str, ours: PrivateKey, sender: PublicKey | None = None
    ) -> tuple[bytes, bool]:
        """The plaintext, and whether its authcrypt derived the key without the content's
        tag (ECDH-1PU draft 3, as Veramo 7 writes it: tried when draft 4 fails, so that
        the answer can be written the same way)."""
        recipient = next((r for r in self.recipients if r.kid == kid), None)
        if recipient is None:
            raise EnvelopeError(f"the message has no recipient {kid[:80]!r}")
        if ours.crv != self.epk.crv:
            raise EnvelopeError(f"the key of {kid[:80]!r} is not on the message's curve")
        z = ours.agree(self.epk)
        tags: tuple[bytes, ...] = (b"",)
        if self.authcrypt:
            if sender is None:
                raise EnvelopeError("an authcrypt message needs its sender's key")
            if sender.crv != self.epk.crv:
                raise EnvelopeError("the sender's key is not on the message's curve")
            z += ours.agree_static(sender)
            tags = (self.sealed.tag, b"")  # draft 4 (the spec's), then draft 3
        apu, apv = self._party("apu"), self._party("apv")
        for tag in tags:
            try:
                key = aes_key_unwrap(_kdf(z, self.alg, apu, apv, tag), recipient.encrypted_key)
            except (InvalidUnwrap, ValueError):
                continue
            return self.enc.decrypt(key, self.sealed, self.aad), self.authcrypt and not tag
        raise EnvelopeError("the content key does not unwrap: not encrypted for this key")

    def _party(self, name: str) -> bytes:
        value = self.header.get(name)
        return b"" if value in (None, "") else b64url_decode(value, name)


def parse(raw: bytes | str | dict[str, Any]) -> Jwe:
    """A JWE in General JSON form (or flattened: one recipient at the top level), checked;
    EnvelopeError says what is wrong."""
    data = _json(raw) if not isinstance(raw, dict) else raw
    if not isinstance(data, dict):
        raise EnvelopeError("an encrypted message is a JSON object")
    protected = data.get("protected")
    if not isinstance(protected, str) or not protected:
        raise EnvelopeError("the message has no protected header")
    decoded = b64url_decode(protected, "protected")
    if len(decoded) > MAX_HEADER:
        raise EnvelopeError("the protected header is too large")
    header = _json(decoded)
    if not isinstance(header, dict):
        raise EnvelopeError("the protected header is not a JSON object")
    alg, enc = header.get("alg"), content.algorithm(header.get("enc"))
    if alg not in (ANONCRYPT, AUTHCRYPT):
        raise EnvelopeError(f"unsupported key wrapping {str(alg)[:30]!r}")
    epk = PublicKey.from_jwk(header.get("epk"), "epk")
    for name in ("apu", "apv"):
        if header.get(name) not in (None, ""):
            b64url_decode(header.get(name), name)  # readable, or EnvelopeError
    recipients = _recipients(data)
    sealed = content.Sealed(
        b64url_decode(data.get("iv"), "iv"),
        b64url_decode(data.get("ciphertext"), "ciphertext"),
        b64url_decode(data.get("tag"), "tag"),
    )
    jwe = Jwe(header, protected.encode("ascii"), alg, enc, epk, recipients, sealed)
    if jwe.authcrypt and jwe.sender_kid is None:
        raise EnvelopeError("an authcrypt message names its sender in skid or apu")
    return jwe


def encrypt(
    plaintext: bytes,
    to: Sequence[tuple[str, PublicKey]],
    *,
    sender: tuple[str, PrivateKey] | None = None,
    enc: str = content.A256CBC_HS512,
    tagless: bool = False,
) -> dict[str, Any]:
    """`plaintext` encrypted for each (kid, key) of `to` (all on one curve): anoncrypt, or
    authcrypt from `sender` (its kid and private key). The JWE as a JSON object.
    `tagless`: authcrypt's key derived without the tag (ECDH-1PU draft 3), only to answer
    a peer that wrote it so (Veramo 7, which reads nothing else)."""
    if not to or len(to) > MAX_RECIPIENTS:
        raise EnvelopeError("a message is encrypted for 1 to 64 keys")
    crv = to[0][1].crv
    if any(key.crv != crv for _, key in to) or (sender and sender[1].crv != crv):
        raise EnvelopeError("the keys of one message are all on one curve")
    algorithm = content.algorithm(enc)
    if sender is not None and algorithm.name != content.A256CBC_HS512 and not tagless:
        raise EnvelopeError("authcrypt encrypts with A256CBC-HS512")
    ephemeral = PrivateKey.generate(crv)
    apv = hashlib.sha256(".".join(sorted(kid for kid, _ in to)).encode()).digest()
    header: dict[str, Any] = {
        "typ": TYP,
        "alg": AUTHCRYPT if sender else ANONCRYPT,
        "enc": algorithm.name,
        "epk": ephemeral.public.jwk(),
        "apv": b64url_encode(apv),
    }
    apu = b""
    if sender is not None:
        apu = sender[0].encode()
        header.update(skid=sender[0], apu=b64url_encode(apu))
    protected = b64url_encode(orjson.dumps(header))
    key = algorithm.new_key()
    sealed = algorithm.encrypt(key, plaintext, protected.encode("ascii"))
    recipients = []
    for kid, public in to:
        z = ephemeral.agree(public)
        tag = b""
        if sender is not None:
            z += sender[1].agree_static(public)
            tag = b"" if tagless else sealed.tag
        kek = _kdf(z, header["alg"], apu, apv, tag)
        recipients.append(
            {"header": {"kid": kid}, "encrypted_key": b64url_encode(aes_key_wrap(kek, key))}
        )
    return {
        "protected": protected,
        "recipients": recipients,
        "iv": b64url_encode(sealed.iv),
        "ciphertext": b64url_encode(sealed.ciphertext),
        "tag": b64url_encode(sealed.tag),
    }


def _kdf(z: bytes, alg: str, apu: bytes, apv: bytes, tag: bytes) -> bytes:
    """The 256-bit key-wrapping key: Concat KDF with SHA-256 (RFC 7518 §4.6.2), one round;
    ECDH-1PU with key wrapping appends the content's tag to SuppPubInfo (draft §2.3)."""
    supp_pub = (256).to_bytes(4, "big") + (_prefixed(tag) if tag else b"")
    other = _prefixed(alg.encode()) + _prefixed(apu) + _prefixed(apv) + supp_pub
    return hashlib.sha256(b"\x00\x00\x00\x01" + z + other).digest()


def _prefixed(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _recipients(data: dict[str, Any]) -> tuple[Recipient, ...]:
    entries = data.get("recipients")
    if entries is None and "encrypted_key" in data:  # flattened form
        entries = [{"header": data.get("header"), "encrypted_key": data["encrypted_key"]}]
    if not isinstance(entries, list) or not entries:
        raise EnvelopeError("the message has no recipients")
    if len(entries) > MAX_RECIPIENTS:
        raise EnvelopeError(f"the message has over {MAX_RECIPIENTS} recipients")
    out = []
    for entry in entries:
        header = entry.get("header") if isinstance(entry, dict) else None
        kid = header.get("kid") if isinstance(header, dict) else None
        if not isinstance(kid, str) or not kid or len(kid) > 4096:
            raise EnvelopeError("a recipient of the message has no kid")
        out.append(Recipient(kid, b64url_decode(entry.get("encrypted_key"), "encrypted_key")))
    return tuple(out)


def _json(raw: bytes | str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise EnvelopeError("the encrypted message is not JSON") from exc
