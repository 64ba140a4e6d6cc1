"""DIDs as DIDComm v2 uses them: the keys to encrypt to (`keyAgreement`), the keys that
authenticate a signer (`authentication`), and the DIDCommMessaging services, of did:peer:2,
long-form did:peer:4 and did:key (the mediator's own: mediator/didcomm/v2/identity.py).

Key ids differ between libraries, so a key is found by any of the ids in use: `#key-N`
(the current did:peer spec: N counts the DID's keys in order), the first 8 characters of
the key's multibase after its `z` (older peer-did libraries), and the whole multibase. The
DID may be absent (`#key-1`) or present. Services come in both did:peer:2 forms: the
current `{"t":"dm","s":{"uri":…,"a":[…],"r":[…]}}` and the older one with `s` a string,
and a DID may carry several service sections (Identus writes one per endpoint).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from cryptography.hazmat.primitives.asymmetric import ec

from mediator.didcomm import did_peer
from mediator.didcomm.envelope import b64url_decode, b64url_encode
from mediator.didcomm.keys import (
    ED25519_MULTICODEC,
    X25519_MULTICODEC,
    b58decode,
    b58encode,
    ed25519_to_x25519_public,
)
from mediator.didcomm.v2.jwk import SIZES, PublicKey
from mediator.didcomm.v2.jws import VerifyingKey
from mediator.errors import DidError, EnvelopeError, InvalidKey

DID_KEY = "did:key:"
P256_MULTICODEC = b"\x80\x24"  # varint of 0x1200, p256-pub (compressed point)
P384_MULTICODEC = b"\x81\x24"  # varint of 0x1201, p384-pub
DIDCOMM_V2 = "didcomm/v2"
MAX_DID = 16_384
CACHED_DID = 2_048  # the longest DID whose answers are cached (short_cache)
T = TypeVar("T")


@dataclass(frozen=True)
class Service:
    """A DIDCommMessaging service: where to send, and through which mediators."""

    uri: str
    accept: tuple[str, ...] = ()
    routing_keys: tuple[str, ...] = ()

    @property
    def websocket(self) -> bool:
        return self.uri.startswith(("ws://", "wss://"))


@dataclass(frozen=True)
class Key:
    """A key of a DID: the fragments of its ids (every spelling it is known by; a kid is
    one of them after the DID or after `#` alone) and what it is. Fragments, not whole ids:
    a DID is hundreds of bytes, and resolved documents are cached."""

    fragments: frozenset[str]
    multibase: str
    agreement: PublicKey | None = None  # an X25519 / NIST key agreement key
    verifying: VerifyingKey | None = field(default=None, compare=False)  # Ed25519 / ES


@dataclass(frozen=True)
class Doc:
    """What DIDComm v2 needs of a DID document."""

    did: str
    agreement: tuple[Key, ...]  # in the document's order: the first is the default
    authentication: tuple[Key, ...]
    services: tuple[Service, ...]

    def agreement_key(self, kid: str) -> PublicKey | None:
        """The key agreement key named `kid` in any spelling in use, or None."""
        found = self.find(self.agreement, kid)
        return None if found is None else found.agreement

    def verifying_key(self, kid: str) -> VerifyingKey | None:
        found = self.find(self.authentication, kid)
        return None if found is None else found.verifying

    def find(self, keys: tuple[Key, ...], kid: str) -> Key | None:
        """The key of `keys` (this document's) that `kid` names: `did#fragment` or
        `#fragment`."""
        did, hashed, fragment = kid.partition("#")
        if not hashed or (did and did != self.did):
            return None
        return next((key for key in keys if fragment in key.fragments), None)

    def kid(self, key: Key) -> str:
        """The id we write for one of its keys: `did#key-N` when it has one."""
        best = min(key.fragments, key=lambda f: (not f.startswith("key-"), len(f)))
        return f"{self.did}#{best}"


def short_cache(maxsize: int) -> Callable[[Callable[[str], T]], ShortCached[T]]:
    """An LRU cache of a function of a DID (or a DID URL) for the DIDs at most CACHED_DID
    long: a wallet's DID recurs in every message it sends, and a wallet's did:peer:2 is well
    under 1 KiB; a longer one is computed each time (cached, peers sending 16 KiB DIDs
    would fill 16 KiB an entry)."""

    def decorate(function: Callable[[str], T]) -> ShortCached[T]:
        return ShortCached(function, maxsize)

    return decorate


class ShortCached(Generic[T]):
    def __init__(self, function: Callable[[str], T], maxsize: int) -> None:
        self.function = function
        self.cached = functools.lru_cache(maxsize=maxsize)(function)
        functools.update_wrapper(self, function)

    def __call__(self, did: str) -> T:
        return self.cached(did) if len(did) <= CACHED_DID else self.function(did)

    def cached_count(self) -> int:
        return self.cached.cache_info().currsize


def resolve(did: str) -> Doc:
    """The v2 view of a did:peer:2, a long-form did:peer:4 or a did:key (DidError when it
    cannot be read). A document costs about 2.4 KB cached (a wallet's did:peer:2 naming our
    DID in its service): 4096 of them about 10 MB."""
    if not isinstance(did, str) or len(did) > MAX_DID:
        raise DidError("a DID is a string of at most 16 KiB")
    return _resolve(did.split("#", 1)[0])


@short_cache(4096)
def _resolve(did: str) -> Doc:
    if did.startswith(DID_KEY):
        return _did_key(did)
    algo = did_peer.numalgo(did)
    if algo == 2:
        return _peer2(did)
    if algo == 4:
        return _document(did, did_peer.resolve_numalgo4(did))
    raise DidError(f"{did[:60]!r}: only did:peer:2, long did:peer:4 and did:key resolve here")


def _fragments(multibase: str, index: int | None, extra: tuple[str, ...] = ()) -> frozenset[str]:
    fragments = {multibase, multibase[1:9], *extra}
    if index is not None:
        fragments.add(f"key-{index}")
    return frozenset(fragments)


def _multikey(multibase: str) -> tuple[PublicKey | None, VerifyingKey | None]:
    """What a multibase multikey is: a key agreement key, or a signing key (Ed25519 is
    both: its X25519 twin agrees)."""
    if not isinstance(multibase, str) or not multibase.startswith("z") or len(multibase) > 200:
        raise DidError("a key is a base58btc multikey ('z…')")
    try:
        raw = b58decode(multibase[1:])
    except InvalidKey as exc:
        raise DidError(f"a key is not base58btc: {exc}") from exc
    codec, body = raw[:2], raw[2:]
    try:
        if codec == X25519_MULTICODEC and len(body) == 32:
            return PublicKey.from_jwk(
                {"kty": "OKP", "crv": "X25519", "x": b64url_encode(body)}
            ), None
        if codec == ED25519_MULTICODEC and len(body) == 32:
            twin = ed25519_to_x25519_public(body)
            agreement = PublicKey.from_jwk(
                {"kty": "OKP", "crv": "X25519", "x": b64url_encode(twin)}
            )
            return agreement, VerifyingKey.ed25519(body)
        for prefix, crv, curve in (
            (P256_MULTICODEC, "P-256", ec.SECP256R1()),
            (P384_MULTICODEC, "P-384", ec.SECP384R1()),
        ):
            if codec == prefix:
                point = ec.EllipticCurvePublicKey.from_encoded_point(curve, body)
                numbers, size = point.public_numbers(), SIZES[crv]
                jwk = {
                    "kty": "EC",
                    "crv": crv,
                    "x": b64url_encode(numbers.x.to_bytes(size, "big")),
                    "y": b64url_encode(numbers.y.to_bytes(size, "big")),
                }
                return PublicKey.from_jwk(jwk), VerifyingKey.from_jwk(jwk)
    except (ValueError, InvalidKey, EnvelopeError) as exc:
        raise DidError(f"an unusable key {multibase[:20]!r}: {exc}") from exc
    raise DidError(f"unsupported key type in {multibase[:20]!r}")


def _did_key(did: str) -> Doc:
    """A did:key: its one key; an Ed25519 one also agrees with its X25519 twin, named by
    either multikey (`did:key:z6Mk…#z6LS…` is how several libraries write it)."""
    multibase = did[len(DID_KEY) :]
    agreement, verifying = _multikey(multibase)
    twin: tuple[str, ...] = ()
    if verifying is not None and agreement is not None and agreement.crv == "X25519":
        twin = ("z" + b58encode(X25519_MULTICODEC + agreement.x),)
    key = Key(_fragments(multibase, None, twin), multibase, agreement, verifying)
    return Doc(did, (key,) if agreement else (), (key,) if verifying else (), ())


def _peer2(did: str) -> Doc:
    elements = did[len(did_peer.PEER) + 1 :].split(".")
    if elements[0] != "" or len(elements) < 2:
        raise DidError(f"{did[:60]!r} is not a did:peer:2")
    agreement: list[Key] = []
    authentication: list[Key] = []
    services: list[Service] = []
    index = 0
    for element in elements[1:]:
        purpose, value = element[:1], element[1:]
        if purpose == "S":
            services += _services(value)
            continue
        if purpose not in "EVAID" or not purpose:
            raise DidError(f"unknown did:peer:2 purpose code {purpose!r}")
        index += 1
        public, verifying = _multikey(value)
        if purpose == "E":
            if public is None:
                raise DidError("a did:peer:2 key agreement key must agree")
            agreement.append(Key(_fragments(value, index), value, public))
        elif purpose == "V":
            if verifying is None:
                raise DidError("a did:peer:2 authentication key must sign")
            authentication.append(Key(_fragments(value, index), value, None, verifying))
    return Doc(did, tuple(agreement), tuple(authentication), tuple(services))


def _services(value: str) -> list[Service]:
    try:
        decoded = did_peer.load_json(b64url_decode(value, "a service"), "a did:peer:2 service")
    except EnvelopeError as exc:
        raise DidError(f"a did:peer:2 service is not base64url JSON: {exc}") from exc
    out = []
    for entry in decoded if isinstance(decoded, list) else [decoded]:
        service = _service(entry)
        if service is not None:
            out.append(service)
    return out


def _service(entry: Any) -> Service | None:
    """A DIDCommMessaging service in any form written (None for other kinds)."""
    if not isinstance(entry, dict):
        raise DidError("a service must be a JSON object")
    kind = entry.get("t", entry.get("type"))
    if kind not in ("dm", "DIDCommMessaging"):
        return None
    endpoint = entry.get("s", entry.get("serviceEndpoint"))
    accept, routing = entry.get("a", entry.get("accept")), entry.get("r", entry.get("routingKeys"))
    if isinstance(endpoint, list) and endpoint:  # DID Core allows a list of endpoint objects
        endpoint = endpoint[0]
    if isinstance(endpoint, dict):
        accept = endpoint.get("accept", endpoint.get("a", accept))
        routing = endpoint.get("routingKeys", endpoint.get("r", routing))
        endpoint = endpoint.get("uri")
    if not isinstance(endpoint, str) or not endpoint:
        return None
    return Service(endpoint, _strings(accept), _strings(routing))


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _document(did: str, doc: dict[str, Any]) -> Doc:
    """A whole DID document (a long did:peer:4's): its methods by id, the relationships'
    references or embedded methods, its DIDCommMessaging services."""
    methods: dict[str, Any] = {}
    for method in doc.get("verificationMethod") or []:
        if isinstance(method, dict) and isinstance(method.get("id"), str):
            methods[method["id"]] = method

    def keys(relationship: str) -> tuple[Key, ...]:
        out = []
        for ref in doc.get(relationship) or []:
            method = methods.get(ref) if isinstance(ref, str) else ref
            if isinstance(ref, str) and method is None:
                method = methods.get(ref.replace(did, "", 1)) or methods.get(did + ref)
            if not isinstance(method, dict):
                continue
            out.append(_method_key(method))
        return tuple(out)

    services = [_service(s) for s in doc.get("service") or []]
    return Doc(did, keys("keyAgreement"), keys("authentication"), tuple(s for s in services if s))


def _method_key(method: dict[str, Any]) -> Key:
    ident = str(method.get("id", ""))
    fragment = ident.split("#", 1)[-1]
    multibase = method.get("publicKeyMultibase")
    if isinstance(multibase, str):
        agreement, verifying = _multikey(multibase)
        return Key(_fragments(multibase, None, (fragment,)), multibase, agreement, verifying)
    jwk = method.get("publicKeyJwk")
    try:
        if isinstance(jwk, dict) and jwk.get("crv") in SIZES:
            return Key(frozenset({fragment}), fragment, PublicKey.from_jwk(jwk))
        if isinstance(jwk, dict):
            key = VerifyingKey.from_jwk(jwk)
            return Key(frozenset({fragment}), fragment, None, key)
    except EnvelopeError as exc:
        raise DidError(f"an unusable key {fragment[:20]!r}: {exc}") from exc
    raise DidError(f"the key {fragment[:20]!r} has no publicKeyMultibase or publicKeyJwk")
