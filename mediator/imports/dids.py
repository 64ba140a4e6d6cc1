"""DIDs as the old mediators stored them, reduced to what an import needs: the key a wallet
authcrypts with on its connection, where it can be reached, and the endpoints the old
mediator named in its own DID documents."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mediator.didcomm import did_peer
from mediator.didcomm.did_doc import PeerDoc, Service, parse_doc
from mediator.errors import DidError, InvalidKey

PUSHABLE = ("http://", "https://", "ws://", "wss://")


def carries_document(did: str) -> bool:
    """A did:peer:2, or a long-form did:peer:4: the DID is its own document."""
    algo = did_peer.numalgo(did)
    return algo == 2 or (algo == 4 and did.count(":") == 3)


def peer_doc(did: str, document: Any = None) -> PeerDoc:
    """The DIDComm view of `did`: resolved when it carries its document, else from the
    `document` the store kept for it. DidError when neither gives a usable service."""
    if carries_document(did):
        return parse_doc(did_peer.resolve(did), did)
    if document is None:
        raise DidError(f"{did[:60]!r}: no document was stored for it")
    if isinstance(document, (bytes, str)):
        document = did_peer.load_json(document, "the stored DID document")
    try:
        return parse_doc(document, did)
    except InvalidKey as exc:
        raise DidError(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class Wallet:
    """What an import keeps of a wallet's DID document: the key it authcrypts with and
    where it can be pushed to (an index of a million of these stays small)."""

    verkey: str
    services: tuple[Service, ...]

    @classmethod
    def of(cls, doc: PeerDoc) -> Wallet:
        return cls(doc.recipient_key, doc.push_services)


def digest(did: str) -> bytes:
    """What an index of a million DIDs keeps of each (a long did:peer:4 is 800 characters)."""
    return hashlib.blake2b(did.encode(), digest_size=16).digest()


def endpoints_of(doc: PeerDoc) -> list[str]:
    """The endpoints of a document's services that a peer can send to."""
    return [s.endpoint for s in doc.services if s.endpoint.startswith(PUSHABLE)]


def paths_of(endpoints: list[str]) -> list[str]:
    """The paths other than `/` that the endpoints name (answered like `/` after a move)."""
    paths = []
    for endpoint in endpoints:
        path = urlsplit(endpoint).path
        if path not in ("", "/") and path not in paths:
            paths.append(path)
    return paths
