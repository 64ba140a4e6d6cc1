"""DID documents as peers send them in handshakes, reduced to what a mediator needs: the keys
a connection encrypts with and the endpoints it can be reached at.

Two shapes arrive: DID Core documents (`verificationMethod`, services of type
`did-communication`, keys referenced as `#key-1` or `did:key:…`), which Credo and ACA-Py
attach in DID Exchange and which did:peer:2/4 expand to; and the older Indy shape
(`publicKey`, `IndyAgent` services with raw base58 keys) of connections 1.0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from mediator.didcomm.envelope import b64url_decode
from mediator.didcomm.keys import (
    DID_KEY,
    ED25519_MULTICODEC,
    b58decode,
    b58encode,
    did_key_to_verkey,
    normalize_key,
)
from mediator.errors import DidError, EnvelopeError, InvalidKey

DIDCOMM_V1_SERVICES = ("did-communication", "IndyAgent")
# The endpoint a peer with no inbound transport names (RFC 0092): reach it by return route.
QUEUE_ENDPOINT = "didcomm:transport/queue"
PUSH_SCHEMES = ("http://", "https://", "ws://", "wss://")

_MAX_ENTRIES = 32  # services, methods, keys per list: far above what any agent writes
_MAX_TEXT = 2048  # an endpoint or a key reference


@dataclass(frozen=True)
class Service:
    endpoint: str
    recipient_keys: tuple[str, ...]  # base58 Ed25519 verkeys
    routing_keys: tuple[str, ...]  # base58, in the order the RFC 0067 wrapping needs
    priority: int = 0


@dataclass(frozen=True)
class PeerDoc:
    """A peer's DID and its DIDComm v1 services, most preferred first."""

    did: str
    services: tuple[Service, ...]
    keys: tuple[str, ...]  # every Ed25519 key the document names (verification methods)

    @property
    def recipient_key(self) -> str:
        """The key the peer encrypts with: its first service's first recipient key."""
        return self.services[0].recipient_keys[0]

    @property
    def push_services(self) -> tuple[Service, ...]:
        """Services with an endpoint the mediator can send to (not a return-route queue)."""
        return tuple(s for s in self.services if s.endpoint.startswith(PUSH_SCHEMES))


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise DidError(f"{what} must be a list")
    if len(value) > _MAX_ENTRIES:
        raise DidError(f"{what} has more than {_MAX_ENTRIES} entries")
    return value


def _method_key(method: dict[str, Any]) -> str | None:
    """The base58 Ed25519 key of a verification method, or None for other kinds (X25519)."""
    kind = str(method.get("type", ""))
    if "X25519" in kind:
        return None
    try:
        if "publicKeyBase58" in method:
            return normalize_key(method["publicKeyBase58"])
        if "publicKeyMultibase" in method:
            value = method["publicKeyMultibase"]
            if not isinstance(value, str) or not value.startswith("z"):
                raise DidError("publicKeyMultibase must be base58btc ('z')")
            raw = b58decode(value[1:])
            if raw.startswith(ED25519_MULTICODEC) and len(raw) == 34:
                return b58encode(raw[2:])
            if len(raw) == 32 and "Ed25519" in kind:
                return b58encode(raw)
            return None
        if "publicKeyJwk" in method:
            jwk = method["publicKeyJwk"]
            if isinstance(jwk, dict) and jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519":
                return normalize_key(b58encode(b64url_decode(jwk.get("x"), "publicKeyJwk.x")))
            return None
    except (InvalidKey, EnvelopeError) as exc:
        raise DidError(f"verification method {str(method.get('id'))[:80]!r}: {exc}") from exc
    return None


def _fragment(ref: str) -> str:
    return ref[ref.index("#") :] if "#" in ref else ref


class _Keys:
    """Verification methods by id, so `#key-1` and `did:peer:…#key-1` both resolve."""

    def __init__(self, did: str, doc: dict[str, Any]) -> None:
        self.did = did
        self.by_id: dict[str, str] = {}
        methods = _list(doc.get("verificationMethod"), "verificationMethod")
        methods += _list(doc.get("publicKey"), "publicKey")
        for entry in _list(doc.get("authentication"), "authentication"):
            if isinstance(entry, dict) and "id" in entry and "type" in entry:
                methods.append(entry)  # a method embedded in authentication
        for method in methods:
            if not isinstance(method, dict) or not isinstance(method.get("id"), str):
                raise DidError("a verification method needs a string id")
            key = _method_key(method)
            if key is not None:
                self.by_id[_fragment(method["id"])] = key

    def resolve(self, ref: Any, what: str) -> str:
        if not isinstance(ref, str) or not ref or len(ref) > _MAX_TEXT:
            raise DidError(f"{what} must be key references (strings)")
        try:
            if ref.startswith(DID_KEY):
                return did_key_to_verkey(ref)
            if "#" in ref:
                base = ref.split("#", 1)[0]
                found = self.by_id.get(_fragment(ref))
                if found is None or base not in ("", self.did):
                    raise DidError(f"{what}: {ref[:80]!r} names no key of the document")
                return found
            if ref.startswith("did:"):
                raise DidError(f"{what}: {ref[:80]!r} is not a key reference we can resolve")
            return normalize_key(ref)
        except InvalidKey as exc:
            raise DidError(f"{what}: {exc}") from exc


def _endpoint(value: Any) -> str:
    if isinstance(value, dict):  # DIDCommMessaging's {uri, accept, routingKeys}
        value = value.get("uri")
    if not isinstance(value, str) or not value or len(value) > _MAX_TEXT:
        raise DidError("a service needs a serviceEndpoint string")
    if value.startswith(PUSH_SCHEMES) and not _is_url(value):
        raise DidError(f"serviceEndpoint {value[:80]!r} is not a URL we can send to")
    return value


def _is_url(value: str) -> bool:
    """Whether an HTTP(S) or WS(S) endpoint parses as the push clients will parse it."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (raises ValueError for a port that is not one)
        httpx.URL(value)
    except (ValueError, httpx.InvalidURL):
        return False
    return bool(parts.hostname)


def parse_doc(doc: Any, did: str | None = None) -> PeerDoc:
    """The DIDComm v1 view of a DID document; DidError when it offers no usable service."""
    if not isinstance(doc, dict):
        raise DidError("a DID document must be a JSON object")
    doc_id = doc.get("id")
    did = did or (doc_id if isinstance(doc_id, str) else "")
    if not did:
        raise DidError("the DID document has no id")
    if len(did) > _MAX_TEXT:
        raise DidError(f"the DID is longer than {_MAX_TEXT} characters")
    keys = _Keys(did, doc)
    services = []
    for raw in _list(doc.get("service"), "service"):
        if not isinstance(raw, dict) or raw.get("type") not in DIDCOMM_V1_SERVICES:
            continue
        recipient = _list(raw.get("recipientKeys"), "recipientKeys")
        if not recipient:
            raise DidError("a DIDComm service needs recipientKeys")
        priority = raw.get("priority", 0)
        services.append(
            Service(
                endpoint=_endpoint(raw.get("serviceEndpoint")),
                recipient_keys=tuple(keys.resolve(k, "recipientKeys") for k in recipient),
                routing_keys=tuple(
                    keys.resolve(k, "routingKeys")
                    for k in _list(raw.get("routingKeys"), "routingKeys")
                ),
                priority=priority if isinstance(priority, int) else 0,
            )
        )
    if not services:
        raise DidError("the DID document has no DIDComm v1 service (did-communication)")
    services.sort(key=lambda s: s.priority)
    return PeerDoc(did=did, services=tuple(services), keys=tuple(keys.by_id.values()))
