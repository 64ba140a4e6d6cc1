"""The mediator's own DIDComm v2 identity, the same on every node and after every restart
for the same key seed and endpoints.

Its keys: the cluster key's X25519 twin (`#key-1`), the Ed25519 key itself to sign
(`#key-2`), and P-256 (`#key-3`) and P-384 (`#key-4`) key agreement keys derived from the
same seed (HKDF-SHA256, one label per curve), so that a wallet that speaks only the NIST
curves can encrypt to us and get authcrypted answers (ECDH-1PU needs both parties on one
curve). The NIST keys are listed in the DIDs only with MEDIATOR_V2_NIST_KEYS (Identus 7
cannot resolve a did:peer:2 that has one), and read whether listed or not. X25519 comes
first: a sender that takes a DID's first key agreement key takes it.

Its DIDs, all for the same keys and DIDCommMessaging services (HTTP(S) first, then WS(S)):
the did:peer:2 (what invitations and grants name), the did:peer:4 of the same document
(long form, and its short form once a peer has seen the long one), and `did:web:<host>`
when the operator serves `/.well-known/did.json` (MEDIATOR_DID_WEB).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from mediator.didcomm import did_peer
from mediator.didcomm.keys import ED25519_MULTICODEC, X25519_MULTICODEC, KeyPair, b58encode
from mediator.didcomm.v2.dids import (
    DIDCOMM_V2,
    P256_MULTICODEC,
    P384_MULTICODEC,
    Doc,
    resolve,
)
from mediator.didcomm.v2.jwk import NIST, X25519, PrivateKey, PublicKey

# The group orders of the NIST curves: a derived scalar is reduced into [1, n - 1].
ORDERS = {
    "P-256": 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551,
    "P-384": int(
        "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFC7634D81F4372DDF581A0DB248B0A77AECEC196ACCC52973",
        16,
    ),
}
MULTICODECS = {"P-256": P256_MULTICODEC, "P-384": P384_MULTICODEC}
# Fragment of each key agreement key, in the did:peer:2's order (`#key-2` signs).
AGREEMENT = (("key-1", X25519), ("key-3", "P-256"), ("key-4", "P-384"))
SIGNING = "key-2"


def multikey_x25519(public: bytes) -> str:
    """An X25519 public key as a multibase multikey (`z6LS…`), as did:peer:2 writes it."""
    return "z" + b58encode(X25519_MULTICODEC + public)


def multikey(key: PublicKey) -> str:
    """A key agreement public key as a multikey (a NIST point compressed, as did:key)."""
    if key.crv == X25519:
        return multikey_x25519(key.x)
    point = key.native().public_bytes(Encoding.X962, PublicFormat.CompressedPoint)
    return "z" + b58encode(MULTICODECS[key.crv] + point)


def derived_nist_key(seed: bytes, crv: str) -> PrivateKey:
    """A NIST key agreement key derived from the cluster's key seed: 16 bytes more than
    the order's size, reduced, so that the scalar is uniform to within 2**-128."""
    size = (ORDERS[crv].bit_length() + 7) // 8 + 16
    hkdf = HKDF(hashes.SHA256(), size, salt=None, info=b"mediator didcomm v2 " + crv.encode())
    scalar = int.from_bytes(hkdf.derive(seed), "big") % (ORDERS[crv] - 1) + 1
    return PrivateKey.of_native(ec.derive_private_key(scalar, NIST[crv]))


@dataclass(frozen=True)
class MediatorV2:
    """The mediator's DIDComm v2 identity: its keys and its DIDs (see the module)."""

    keys: KeyPair
    endpoints: tuple[str, ...]  # http(s) first, then ws(s)
    nist: bool = False  # the NIST keys listed in the DIDs

    @functools.cached_property
    def agreement_keys(self) -> dict[str, PrivateKey]:
        """Our key agreement keys by fragment (`key-1`…), X25519 first."""
        seed = self.keys.sigkey[:32]
        out = {"key-1": PrivateKey.from_x25519_bytes(self.keys.x25519_secret)}
        for fragment, crv in AGREEMENT[1:]:
            out[fragment] = derived_nist_key(seed, crv)
        return out

    @property
    def agreement(self) -> PrivateKey:
        """The X25519 key (`#key-1`)."""
        return self.agreement_keys["key-1"]

    @property
    def agreement_kid(self) -> str:
        return f"{self.did}#key-1"

    @property
    def signing_kid(self) -> str:
        return f"{self.did}#{SIGNING}"

    def sender_for(self, crv: str, did: str = "") -> tuple[str, PrivateKey] | None:
        """Our key on `crv` to authcrypt with (its kid under `did`, one of ours, else the
        did:peer:2), if our DIDs list one on that curve."""
        for fragment in self.listed:
            key = self.agreement_keys[fragment]
            if key.crv == crv:
                return f"{did or self.did}#{fragment}", key
        return None

    @property
    def listed(self) -> tuple[str, ...]:
        """The fragments of the key agreement keys our DIDs list."""
        return tuple(fragment for fragment, _ in AGREEMENT[: None if self.nist else 1])

    def _multikeys(self) -> list[tuple[str, str]]:
        """(fragment, multikey) of every key listed, in the did:peer:2's order."""
        keys = self.agreement_keys
        ed = "z" + b58encode(ED25519_MULTICODEC + self.keys.verkey)
        return [
            ("key-1", multikey(keys["key-1"].public)),
            (SIGNING, ed),
            *((fragment, multikey(keys[fragment].public)) for fragment in self.listed[1:]),
        ]

    @functools.cached_property
    def did(self) -> str:
        """The did:peer:2: keys E, V, E, E (so `#key-N` names them in that order), then a
        service per endpoint."""
        parts = [did_peer.PEER + "2"]
        for fragment, value in self._multikeys():
            parts.append(("V" if fragment == SIGNING else "E") + value)
        for endpoint in self.endpoints:
            parts.append(
                did_peer.service_element({"t": "dm", "s": {"uri": endpoint, "a": [DIDCOMM_V2]}})
            )
        return ".".join(parts)

    @functools.cached_property
    def doc(self) -> Doc:
        return resolve(self.did)

    def document(self, did: str = "") -> dict[str, Any]:
        """The DID document of these keys and services under `did` (ids relative to the
        document when `did` is empty: did:peer:4's input document)."""
        methods = [
            {
                "id": f"{did}#{fragment}",
                "type": "Multikey",
                **({"controller": did} if did else {}),
                "publicKeyMultibase": value,
            }
            for fragment, value in self._multikeys()
        ]
        return {
            "@context": ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1"],
            **({"id": did} if did else {}),
            "verificationMethod": methods,
            "keyAgreement": [f"{did}#{fragment}" for fragment in self.listed],
            "authentication": [f"{did}#{SIGNING}"],
            "assertionMethod": [f"{did}#{SIGNING}"],
            "service": [
                {
                    "id": f"{did}#didcomm-{i}",
                    "type": "DIDCommMessaging",
                    "serviceEndpoint": {"uri": endpoint, "accept": [DIDCOMM_V2]},
                }
                for i, endpoint in enumerate(self.endpoints)
            ],
        }

    @functools.cached_property
    def peer4(self) -> str:
        """The long-form did:peer:4 of the same document."""
        return did_peer.numalgo4_did(self.document())

    @property
    def peer4_short(self) -> str:
        return did_peer.short_numalgo4(self.peer4)

    def peer4_document(self, short: bool = False) -> dict[str, Any]:
        """The did:peer:4's resolved document, as its spec has it: under the form asked
        for, the other form in `alsoKnownAs`."""
        did, other = (self.peer4_short, self.peer4) if short else (self.peer4, self.peer4_short)
        return {**self.document(did), "alsoKnownAs": [other]}

    def web_document(self, host: str) -> dict[str, Any]:
        """`did:web:<host>`'s document (what `https://<host>/.well-known/did.json` serves)."""
        return self.document(web_did(host))

    def dids(self, web_host: str = "") -> tuple[str, ...]:
        """Every DID we answer to: did:peer:2, did:peer:4 (both forms), did:web if served."""
        out = (self.did, self.peer4, self.peer4_short)
        return (*out, web_did(web_host)) if web_host else out


def web_did(host: str) -> str:
    return "did:web:" + host.replace(":", "%3A")


@functools.lru_cache(maxsize=16)
def mediator_v2(keys: KeyPair, endpoints: tuple[str, ...], nist: bool = False) -> MediatorV2:
    """The node's one MediatorV2 (its keys are derived once)."""
    return MediatorV2(keys, endpoints, nist)
