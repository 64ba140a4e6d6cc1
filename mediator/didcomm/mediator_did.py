"""The DIDs and DID documents the mediator presents in handshakes.

One Ed25519 key serves every connection (the cluster's identity), so each form is a pure
function of the key and the public endpoints and every node writes the same bytes. The DID
document lists the HTTP endpoint first and the WebSocket endpoint second: ACA-Py posts to
the first, and Credo opens a socket for live mode and implicit pickup only when a service
has a ws(s) endpoint.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from mediator.didcomm.did_peer import numalgo2_did, resolve_numalgo2
from mediator.didcomm.keys import KeyPair, b58encode


@dataclass(frozen=True)
class MediatorDid:
    keys: KeyPair
    endpoints: tuple[str, ...]  # http(s) first, then ws(s)

    @functools.cached_property
    def peer2(self) -> str:
        return numalgo2_did(self.keys, list(self.endpoints))

    @functools.cached_property
    def peer2_doc(self) -> dict[str, Any]:
        return resolve_numalgo2(self.peer2)

    @functools.cached_property
    def unqualified(self) -> str:
        """The Indy-style DID of connections 1.0: the first 16 bytes of the verkey."""
        return b58encode(self.keys.verkey[:16])

    @functools.cached_property
    def legacy_doc(self) -> dict[str, Any]:
        """The connections 1.0 document (RFC 0160's Indy shape), one IndyAgent per endpoint."""
        did = self.unqualified
        verkey = self.keys.verkey_b58
        return {
            "@context": "https://w3id.org/did/v1",
            "id": did,
            "publicKey": [
                {
                    "id": f"{did}#1",
                    "type": "Ed25519VerificationKey2018",
                    "controller": did,
                    "publicKeyBase58": verkey,
                }
            ],
            "authentication": [
                {"type": "Ed25519SignatureAuthentication2018", "publicKey": f"{did}#1"}
            ],
            "service": [
                {
                    "id": f"{did};indy{'' if i == 0 else f'-{i}'}",
                    "type": "IndyAgent",
                    "priority": i,
                    "recipientKeys": [verkey],
                    "routingKeys": [],
                    "serviceEndpoint": endpoint,
                }
                for i, endpoint in enumerate(self.endpoints)
            ],
        }

    @functools.cached_property
    def core_doc(self) -> dict[str, Any]:
        """A DID Core document for `did:sov:`-less unqualified DIDs in DID Exchange 1.0."""
        did = f"did:sov:{self.unqualified}"
        return {
            "@context": ["https://www.w3.org/ns/did/v1"],
            "id": did,
            "verificationMethod": [
                {
                    "id": f"{did}#key-1",
                    "type": "Ed25519VerificationKey2018",
                    "controller": did,
                    "publicKeyBase58": self.keys.verkey_b58,
                }
            ],
            "authentication": [f"{did}#key-1"],
            "service": [
                {
                    "id": f"{did}#did-communication{'' if i == 0 else f'-{i}'}",
                    "type": "did-communication",
                    "priority": i,
                    "recipientKeys": [self.keys.did_key],
                    "routingKeys": [],
                    "serviceEndpoint": endpoint,
                    "accept": ["didcomm/aip1", "didcomm/aip2;env=rfc19"],
                }
                for i, endpoint in enumerate(self.endpoints)
            ],
        }
