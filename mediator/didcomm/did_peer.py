"""did:peer (the DID Peer method spec): the forms a handshake peer may present.

- numalgo 1 (`did:peer:1zQm…`): the DID is the hash of a genesis document, which travels as
  the handshake's `did_doc~attach`; we check the hash when the document's bytes allow it.
- numalgo 2 (`did:peer:2.Vz6Mk….Ez6LS….SeyJ…`): keys and services in the DID itself.
- numalgo 4 (`did:peer:4zQm…:z…`): the long form carries the whole document; its hash prefix
  is checked. The short form alone cannot be resolved.

Also writes the mediator's own DIDs: a did:peer:2 (one Ed25519 key, its X25519 twin, a
service per endpoint), and a did:peer:1 or long-form did:peer:4 of a whole document, for
requesters that asked in those forms (mediator_did.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import base58

from mediator.didcomm.envelope import b64url_decode, b64url_encode
from mediator.didcomm.keys import (
    ED25519_MULTICODEC,
    X25519_MULTICODEC,
    KeyPair,
    b58decode,
    b58encode,
)
from mediator.errors import DidError, EnvelopeError, InvalidKey

PEER = "did:peer:"
_MULTIHASH_SHA256 = b"\x12\x20"
_MULTICODEC_JSON = b"\x80\x04"  # varint of 0x0200
_MAX_DID = 16_384  # a long-form did:peer:4 with a few services stays far below this
_B58_ALPHABET = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58 = frozenset(_B58_ALPHABET.decode())
_B58_VALUES = bytes.maketrans(_B58_ALPHABET, bytes(range(58)))

_PURPOSES = {
    "A": "assertionMethod",
    "E": "keyAgreement",
    "V": "authentication",
    "I": "capabilityInvocation",
    "D": "capabilityDelegation",
}
# ASCII JSON encodes to base64url '-' or '_' only where '>', '?', '~' or DEL fall on the third
# byte of a group, and Credo's did:peer regex admits neither: written as \u escapes, they
# never appear (a JSON string may escape any character).
_BASE64URL_TRAPS = (("?", "\\u003f"), (">", "\\u003e"), ("~", "\\u007e"), ("\x7f", "\\u007f"))
_SERVICE_WORDS = {"t": "type", "s": "serviceEndpoint", "r": "routingKeys", "a": "accept"}
_SERVICE_TYPES = {"dm": "DIDCommMessaging"}


def load_json(data: bytes | str, what: str) -> Any:
    """JSON a peer sent inside a DID or an attachment: DidError for anything unreadable,
    nesting deeper than the parser's recursion limit included."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise DidError(f"{what} is not JSON ({type(exc).__name__})") from exc


def numalgo(did: str) -> int | None:
    """1, 2 or 4 for a did:peer of that kind, None when `did` is no did:peer."""
    if not did.startswith(PEER) or len(did) <= len(PEER):
        return None
    code = did[len(PEER)]
    if code not in "0123456789":
        raise DidError(f"{did[:40]!r} is not a did:peer")
    return int(code)


def _b58_document(value: str) -> bytes:
    """Base58btc of a document (keys' decoder stops at key-sized input). Digit by digit,
    decoding is quadratic: a 16 KiB did:peer:4 cost 120 ms of a node's CPU per handshake.
    Halves are decoded and joined instead (CPython multiplies large numbers in
    sub-quadratic time): about 3 ms."""
    if not value or not _B58.issuperset(value):
        raise DidError("not base58btc")
    digits = value.encode("ascii").translate(_B58_VALUES)
    n = _b58_number(digits, {})
    zeros = len(value) - len(value.lstrip("1"))  # each leading "1" is a zero byte
    return bytes(zeros) + n.to_bytes((n.bit_length() + 7) // 8, "big")


def _b58_number(digits: bytes, powers: dict[int, int]) -> int:
    """The number base-58 `digits` (0..57 each) write, most significant first."""
    if len(digits) <= 64:
        n = 0
        for d in digits:
            n = n * 58 + d
        return n
    low = len(digits) // 2
    if low not in powers:
        powers[low] = 58**low
    high = _b58_number(digits[:-low], powers)
    return high * powers[low] + _b58_number(digits[-low:], powers)


def _hash(data: bytes) -> str:
    return "z" + b58encode(_MULTIHASH_SHA256 + hashlib.sha256(data).digest())


def check_numalgo1(did: str, doc_bytes: bytes, doc: dict[str, Any]) -> None:
    """The did:peer:1 must be the hash of its genesis document: of the attachment's bytes,
    or of the document without its `id` as compact JSON (the forms agents write)."""
    if not did.startswith(PEER + "1zQm"):
        raise DidError(f"{did[:60]!r} is not a did:peer:1")
    if not isinstance(doc, dict):
        raise DidError("a did:peer:1 genesis document must be a JSON object")
    if not any(did[len(PEER) + 1 :] == _hash(c) for c in _genesis_forms(doc_bytes, doc)):
        raise DidError(f"{did[:60]!r} is not the hash of the attached DID document")


def _genesis_forms(doc_bytes: bytes, doc: dict[str, Any]) -> Iterator[bytes]:
    """The bytes a did:peer:1 may hash: the attachment's own, then the document without its
    `id` as compact JSON, written as Credo does and ASCII-only. A form that cannot be
    written (a lone surrogate in a string) is no candidate."""
    yield doc_bytes
    stored = {k: v for k, v in doc.items() if k != "id"}
    for ascii_only in (False, True):
        try:
            yield json.dumps(stored, separators=(",", ":"), ensure_ascii=ascii_only).encode()
        except (ValueError, RecursionError):
            continue


def _key_method(did: str, index: int, multibase: str) -> dict[str, Any]:
    try:
        raw = b58decode(multibase[1:]) if multibase.startswith("z") else b""
    except InvalidKey as exc:
        raise DidError(f"a did:peer:2 key is not base58btc: {exc}") from exc
    if raw.startswith(ED25519_MULTICODEC) and len(raw) == 34:
        kind = "Ed25519VerificationKey2020"
    elif raw.startswith(X25519_MULTICODEC) and len(raw) == 34:
        kind = "X25519KeyAgreementKey2020"
    else:
        raise DidError("did:peer:2 keys must be Ed25519 or X25519 multikeys ('z6Mk…', 'z6LS…')")
    return {
        "id": f"#key-{index}",
        "type": kind,
        "controller": did,
        "publicKeyMultibase": multibase,
    }


def _expand_service(value: dict[str, Any]) -> dict[str, Any]:
    out = {_SERVICE_WORDS.get(k, k): v for k, v in value.items()}
    if isinstance(out.get("type"), str):
        out["type"] = _SERVICE_TYPES.get(out["type"], out["type"])
    return out


def resolve_numalgo2(did: str) -> dict[str, Any]:
    """The DID document a did:peer:2 encodes. A did-communication service that names no
    recipient keys gets the DID's authentication keys, as agents that omit them intend."""
    if len(did) > _MAX_DID:
        raise DidError("the did:peer:2 is too long")
    elements = did[len(PEER) + 1 :].split(".")
    if elements[0] != "" or len(elements) < 2:
        raise DidError(f"{did[:60]!r} is not a did:peer:2 ('did:peer:2.<purpose><key>…')")
    doc: dict[str, Any] = {"id": did, "verificationMethod": [], "service": []}
    for element in elements[1:]:
        purpose, value = element[:1], element[1:]
        if purpose in _PURPOSES:
            method = _key_method(did, len(doc["verificationMethod"]) + 1, value)
            doc["verificationMethod"].append(method)
            doc.setdefault(_PURPOSES[purpose], []).append(method["id"])
        elif purpose == "S":
            try:
                encoded = b64url_decode(value, "a did:peer:2 service")
            except EnvelopeError as exc:
                raise DidError(f"a did:peer:2 service is not base64url JSON: {exc}") from exc
            decoded = load_json(encoded, "a did:peer:2 service")
            for entry in decoded if isinstance(decoded, list) else [decoded]:
                if not isinstance(entry, dict):
                    raise DidError("a did:peer:2 service must be a JSON object")
                service = _expand_service(entry)
                n = len(doc["service"])
                service.setdefault("id", "#service" if n == 0 else f"#service-{n}")
                doc["service"].append(service)
        else:
            raise DidError(f"unknown did:peer:2 purpose code {purpose!r}")
    auth = doc.get("authentication", [])
    for service in doc["service"]:
        if service.get("type") == "did-communication" and "recipientKeys" not in service:
            service["recipientKeys"] = list(auth)
    return doc


def resolve_numalgo4(did: str) -> dict[str, Any]:
    """The document of a long-form did:peer:4, its hash checked."""
    if len(did) > _MAX_DID:
        raise DidError("the did:peer:4 is too long")
    rest = did[len(PEER) + 1 :]
    if ":" not in rest:
        raise DidError("a short-form did:peer:4 cannot be resolved: send the long form")
    hashed, encoded = rest.split(":", 1)
    if _hash(encoded.encode()) != hashed:
        raise DidError("the did:peer:4's hash does not match its document")
    raw = _b58_document(encoded[1:]) if encoded.startswith("z") else b""
    if not raw.startswith(_MULTICODEC_JSON):
        raise DidError("the did:peer:4 document is not multicodec JSON")
    doc = load_json(raw[len(_MULTICODEC_JSON) :], "the did:peer:4 document")
    if not isinstance(doc, dict):
        raise DidError("the did:peer:4 document must be a JSON object")
    doc["id"] = did
    return doc


def resolve(did: str) -> dict[str, Any]:
    """The document of a DID that carries it: a did:peer:2 or a long-form did:peer:4."""
    algo = numalgo(did)
    if algo == 2:
        return resolve_numalgo2(did)
    if algo == 4:
        return resolve_numalgo4(did)
    raise DidError(f"{did[:60]!r} carries no document (a did:peer:2 or long did:peer:4 does)")


def short_numalgo4(did: str) -> str:
    return did.rsplit(":", 1)[0] if did.count(":") == 3 else did


def numalgo2_did(keys: KeyPair, endpoints: list[str], routing_keys: tuple[str, ...] = ()) -> str:
    """The mediator's did:peer:2 (or a mediated wallet's, with its mediator's `routing_keys`
    as did:key): its Ed25519 key (V), the X25519 twin (E), and one did-communication service
    per endpoint, in order of preference."""
    ed = "z" + b58encode(ED25519_MULTICODEC + keys.verkey)
    x = "z" + b58encode(X25519_MULTICODEC + keys.x25519_public)
    parts = [PEER + "2", "V" + ed, "E" + x]
    for priority, endpoint in enumerate(endpoints):
        service = {
            "t": "did-communication",
            "s": endpoint,
            "r": list(routing_keys),
            "recipientKeys": ["#key-1"],
            "priority": priority,
            "a": ["didcomm/aip1", "didcomm/aip2;env=rfc19"],
        }
        parts.append(service_element(service))
    return ".".join(parts)


def service_element(service: dict[str, Any]) -> str:
    """A did:peer:2 service element (`S` and the service's compact JSON in base64url),
    written so that its base64url has no `-` or `_` (see _BASE64URL_TRAPS)."""
    text = json.dumps(service, separators=(",", ":"))
    for char, escaped in _BASE64URL_TRAPS:
        text = text.replace(char, escaped)
    return "S" + b64url_encode(text.encode())


def _stored(doc: dict[str, Any]) -> bytes:
    """A document without its `id`, as compact JSON: what numalgo 1 and 4 hash."""
    stored = {k: v for k, v in doc.items() if k != "id"}
    return json.dumps(stored, separators=(",", ":"), ensure_ascii=False).encode()


def numalgo1_did(doc: dict[str, Any]) -> str:
    """The did:peer:1 of a genesis document (the hash of its compact JSON without `id`)."""
    return PEER + "1" + _hash(_stored(doc))


def numalgo4_did(doc: dict[str, Any]) -> str:
    """The long-form did:peer:4 of an input document: the hash of the encoded document, a
    colon, and the document itself (multicodec JSON in base58btc)."""
    encoded = "z" + base58.b58encode(_MULTICODEC_JSON + _stored(doc)).decode()
    return PEER + "4" + _hash(encoded.encode()) + ":" + encoded
