"""Reading a DIDComm v2 message addressed to us, layer by layer, and writing one.

The layers a single hop may use (DIDComm Messaging 2.1 §IANA Media Types): plaintext,
signed, anoncrypt or authcrypt of plaintext, anoncrypt(sign), authcrypt(sign) (accepted,
never written) and anoncrypt(authcrypt). Any other nesting is refused. The checks of
§Message Layer Addressing Consistency are errors: the plaintext's `from` must be the DID of
the authcrypt `skid` and of the signer's `kid`; a `to` that does not name us is only noted
(`addressed_here`). A `from_prior` (DID rotation) is verified: a JWT whose `sub` is the
message's `from`, signed by an authentication key of its `iss`.

Our private keys are found by `kid` (`ours`), the senders' public keys through their DIDs
(`dids.resolve`). Every failure raises EnvelopeError (DidError is one) with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from mediator.didcomm.v2 import dids, jwe, jws
from mediator.didcomm.v2.jwk import PrivateKey
from mediator.errors import DidError, EnvelopeError, NotAddressedHere

PLAIN = "application/didcomm-plain+json"
Ours = Callable[[str], PrivateKey | None]  # our private key agreement key by kid


@dataclass(frozen=True)
class Received:
    """A message read: its plaintext and what the layers around it proved."""

    message: dict[str, Any]
    recipient_kid: str | None  # which of our keys it was encrypted to (None: not encrypted)
    sender_kid: str | None = None  # authcrypt: the sender's key
    signer_kid: str | None = None  # signed: the signer's key
    layers: tuple[str, ...] = ()  # outermost first: anoncrypt, authcrypt, signed
    rotated_from: str | None = None  # the prior DID of a verified from_prior
    addressed_here: bool = True  # `to` absent, or naming one of `our_dids`
    tagless: bool = False  # its authcrypt was ECDH-1PU draft 3's (Veramo): answer alike

    @property
    def sender(self) -> str | None:
        """The DID proven to have sent it (authcrypt or signature), or None: anonymous."""
        kid = self.sender_kid or self.signer_kid
        return None if kid is None else kid.split("#", 1)[0]

    @property
    def encrypted(self) -> bool:
        return self.recipient_kid is not None


def unpack(raw: bytes | dict[str, Any], ours: Ours, our_dids: tuple[str, ...] = ()) -> Received:
    """The plaintext of `raw` and what its layers proved; EnvelopeError when it is not a
    DIDComm v2 message we can read."""
    data = _object(raw, "the message")
    layers: list[str] = []
    recipient_kid = sender_kid = signer_kid = None
    tagless = False
    while kind(data) == "encrypted":
        parsed = jwe.parse(data)
        if layers and (layers != ["anoncrypt"] or not parsed.authcrypt):
            raise EnvelopeError("encryption nested other than anoncrypt(authcrypt)")
        kid, key = _our_key(parsed, ours)
        sender = None
        if parsed.authcrypt:
            sender_kid = parsed.sender_kid
            assert sender_kid is not None  # parse() checks that authcrypt names its sender
            sender = dids.resolve(sender_kid.split("#", 1)[0]).agreement_key(sender_kid)
            if sender is None:
                raise EnvelopeError(
                    f"the sender's DID has no key agreement key {sender_kid[:80]!r}"
                )
        plaintext, dialect = parsed.open(kid, key, sender)
        tagless = tagless or dialect
        recipient_kid = recipient_kid or kid
        layers.append("authcrypt" if parsed.authcrypt else "anoncrypt")
        data = _object(plaintext, "the decrypted message")
    if kind(data) == "signed":
        if "authcrypt" in layers and layers[0] == "anoncrypt":
            raise EnvelopeError("a signed message inside anoncrypt(authcrypt) is not allowed")
        parsed_jws = jws.parse(data)
        signature = parsed_jws.signatures[0]
        signer_kid = signature.kid
        if signer_kid is None:
            raise EnvelopeError("the signature names no kid")
        verifying = dids.resolve(signer_kid.split("#", 1)[0]).verifying_key(signer_kid)
        if verifying is None:
            raise EnvelopeError(f"the signer's DID has no authentication key {signer_kid[:80]!r}")
        data = _object(parsed_jws.verify(signature, verifying), "the signed message")
        layers.append("signed")
        if kind(data) != "plain":
            raise EnvelopeError("a signed message holds a plaintext message")
    received = Received(_plaintext(data), recipient_kid, sender_kid, signer_kid, tuple(layers))
    return _consistent(received, our_dids, tagless)


def kind(data: Any) -> str:
    """encrypted, signed or plain: what a message's JSON object is."""
    if not isinstance(data, dict):
        return "unknown"
    if "ciphertext" in data:
        return "encrypted"
    if "payload" in data and ("signatures" in data or "signature" in data):
        return "signed"
    return "plain"


def first_agreement_curve(did: str) -> str:
    """The curve of a DID's first key agreement key (DidError when it has none)."""
    for key in dids.resolve(did).agreement:
        if key.agreement is not None:
            return key.agreement.crv
    raise DidError(f"{did[:60]!r} has no key agreement key to encrypt to")


def pack(
    message: dict[str, Any],
    to: str,
    *,
    sender: tuple[str, PrivateKey] | None = None,
    tagless: bool = False,
) -> dict[str, Any]:
    """`message` encrypted to every key agreement key of DID `to` on the curve of its first
    one: authcrypt from `sender` (kid, key) when given, else anoncrypt. `tagless`: as
    ECDH-1PU draft 3, for a peer whose own message was (Received.tagless)."""
    doc = dids.resolve(to)
    agreeing = [k for k in doc.agreement if k.agreement is not None]
    if not agreeing:
        raise DidError(f"{to[:60]!r} has no key agreement key to encrypt to")
    first = agreeing[0].agreement
    assert first is not None
    crv = sender[1].crv if sender else first.crv
    keys = [(doc.kid(k), k.agreement) for k in agreeing if k.agreement and k.agreement.crv == crv]
    if not keys:
        raise DidError(f"{to[:60]!r} has no {crv} key agreement key")
    return jwe.encrypt(orjson.dumps(message), keys, sender=sender, tagless=tagless)


def _our_key(parsed: jwe.Jwe, ours: Ours) -> tuple[str, PrivateKey]:
    for kid in parsed.kids:
        key = ours(kid)
        if key is not None:
            return kid, key
    raise NotAddressedHere("the message is not encrypted to any key of ours")


def _plaintext(data: dict[str, Any]) -> dict[str, Any]:
    for name in ("id", "type"):
        if not isinstance(data.get(name), str) or not data[name]:
            raise EnvelopeError(f"a DIDComm v2 message has a string {name}")
    body = data.get("body", {})
    if not isinstance(body, dict):
        raise EnvelopeError("a message's body is a JSON object")
    for name in ("from", "thid", "pthid"):
        if name in data and not isinstance(data[name], str):
            raise EnvelopeError(f"a message's {name} is a string")
    to = data.get("to")
    if to is not None and (not isinstance(to, list) or not all(isinstance(t, str) for t in to)):
        raise EnvelopeError("a message's to is a list of DIDs")
    return data


def _consistent(received: Received, our_dids: tuple[str, ...], tagless: bool) -> Received:
    message = received.message
    sender = message.get("from")
    for kid, what in ((received.sender_kid, "skid"), (received.signer_kid, "signer's kid")):
        if kid is not None and sender != kid.split("#", 1)[0]:
            raise EnvelopeError(f"the message's from is not the DID of its {what}")
    rotated = None
    if "from_prior" in message:
        rotated = _rotation(message.get("from_prior"), sender)
    to = message.get("to")
    here = not to or not our_dids or any(t.split("#", 1)[0] in our_dids for t in to)
    return Received(
        message,
        received.recipient_kid,
        received.sender_kid,
        received.signer_kid,
        received.layers,
        rotated,
        here,
        tagless,
    )


def _rotation(token: Any, sender: Any) -> str:
    """The prior DID of a valid from_prior (EnvelopeError otherwise)."""
    header, claims, parsed = jws.parse_jwt(token)
    prior, new = claims.get("iss"), claims.get("sub")
    if not isinstance(prior, str) or new != sender or not sender:
        raise EnvelopeError("from_prior's sub must be the message's from, its iss the prior DID")
    kid = header.get("kid")
    if not isinstance(kid, str) or kid.split("#", 1)[0] != prior:
        raise EnvelopeError("from_prior is signed by a key of its iss")
    key = dids.resolve(prior).verifying_key(kid)
    if key is None:
        raise EnvelopeError("from_prior's kid is not an authentication key of the prior DID")
    parsed.verify(parsed.signatures[0], key)
    return prior


def _object(raw: bytes | dict[str, Any], what: str) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise EnvelopeError(f"{what} is not JSON") from exc
    if not isinstance(data, dict):
        raise EnvelopeError(f"{what} is not a JSON object")
    return data
