"""A DIDComm v2 wallet's identity as the client makes one: a did:peer:2 whose key agreement
key (`#key-1`) is the Ed25519 key's X25519 twin (so a v1 recipient key can be a v2 wallet's
too) or a fresh key on a NIST curve, and whose `#key-2` is the Ed25519 key, to sign."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from mediator.didcomm.keys import ED25519_MULTICODEC, KeyPair, b58encode
from mediator.didcomm.v2.identity import multikey
from mediator.didcomm.v2.jwk import X25519, PrivateKey


@dataclass(frozen=True)
class IdentityV2:
    keys: KeyPair
    agreement: PrivateKey
    did: str

    @classmethod
    def make(cls, keys: KeyPair | None = None, curve: str = X25519) -> IdentityV2:
        """From `keys` (new ones when None), agreeing on `curve`."""
        keys = keys or KeyPair.from_seed(uuid.uuid4().bytes * 2)
        if curve == X25519:
            agreement = PrivateKey.from_x25519_bytes(keys.x25519_secret)
        else:
            agreement = PrivateKey.generate(curve)
        ed = "z" + b58encode(ED25519_MULTICODEC + keys.verkey)
        return cls(keys, agreement, f"did:peer:2.E{multikey(agreement.public)}.V{ed}")
