"""The DIDs and DID documents the mediator presents in handshakes.

One Ed25519 key serves every connection (the cluster's identity), so each form is a pure
function of the key and the public endpoints and every node writes the same bytes. The DID
document lists the HTTP endpoint first and the WebSocket endpoint second: ACA-Py posts to
the first, and Credo opens a socket for live mode and implicit pickup only when a service
has a ws(s) endpoint.

DID Exchange answers with a whole document (`for_request`): a did:peer:1 with its document
attached to a did:peer:1 request, a long-form did:peer:4 to a did:peer:2 or 4 one. Credo
0.6+ keeps typed `did-communication` services only from whole documents: from a did:peer:2
it keeps generic services, in which it cannot find the WebSocket that implicit pickup
needs. Requesters with older DIDs (unqualified, did:sov) get the did:peer:2.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from mediator.didcomm.did_peer import (
    numalgo,
    numalgo1_did,
    numalgo2_did,
    numalgo4_did,
    resolve_numalgo2,
    resolve_numalgo4,
)
from mediator.didcomm.keys import KeyPair, b58encode
from mediator.errors import DidError

ACCEPT = ["didcomm/aip1", "didcomm/aip2;env=rfc19"]


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
    def input_doc(self) -> dict[str, Any]:
        """The document numalgo 1 and 4 are made from: references relative, no `id` and no
        `controller` (resolvers set both to the DID; ACA-Py refuses a relative controller)."""
        return {
            "@context": [
                "https://www.w3.org/ns/did/v1",
                "https://w3id.org/security/suites/ed25519-2018/v1",
                "https://w3id.org/security/suites/x25519-2019/v1",
            ],
            "verificationMethod": [
                {
                    "id": "#key-1",
                    "type": "Ed25519VerificationKey2018",
                    "publicKeyBase58": self.keys.verkey_b58,
                },
                {
                    "id": "#key-2",
                    "type": "X25519KeyAgreementKey2019",
                    "publicKeyBase58": b58encode(self.keys.x25519_public),
                },
            ],
            "authentication": ["#key-1"],
            "keyAgreement": ["#key-2"],
            "service": [
                {
                    "id": f"#did-communication-{i}",
                    "type": "did-communication",
                    "priority": i,
                    "recipientKeys": ["#key-1"],
                    "routingKeys": [],
                    "serviceEndpoint": endpoint,
                    "accept": ACCEPT,
                }
                for i, endpoint in enumerate(self.endpoints)
            ],
        }

    @functools.cached_property
    def genesis_doc(self) -> dict[str, Any]:
        """The did:peer:1's genesis document: as Credo writes them, the keys' controller is
        `#id` (the DID is the document's hash, so the document cannot name it)."""
        doc = dict(self.input_doc)
        doc["verificationMethod"] = [
            {**method, "controller": "#id"} for method in doc["verificationMethod"]
        ]
        return doc

    @functools.cached_property
    def peer1(self) -> str:
        return numalgo1_did(self.genesis_doc)

    @functools.cached_property
    def peer4(self) -> str:
        return numalgo4_did(self.input_doc)

    @functools.cached_property
    def peer1_doc(self) -> dict[str, Any]:
        """The did:peer:1's document as attached: the genesis document with its `id`."""
        return {"id": self.peer1, **self.genesis_doc}

    def for_request(
        self, their_did: object, version: str = "1.1"
    ) -> tuple[str, dict[str, Any] | None]:
        """Our DID for a DID Exchange request, and the document to attach (None: the
        long-form did:peer:4 carries its own, and 1.1's `did_rotate~attach` signs it). In
        1.0, which has no `did_rotate~attach`, the signed attachment is the only binding of
        our DID to the invitation: it is always sent, and a did:peer:2 requester gets ours."""
        try:
            algo = numalgo(their_did) if isinstance(their_did, str) else None
        except DidError:
            algo = None
        if algo == 4 and version == "1.0":
            return self.peer4, resolve_numalgo4(self.peer4)
        if algo in (2, 4) and version != "1.0":
            return self.peer4, None
        if algo == 1:
            return self.peer1, self.peer1_doc
        return self.peer2, self.peer2_doc

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
                    "accept": ACCEPT,
                }
                for i, endpoint in enumerate(self.endpoints)
            ],
        }
