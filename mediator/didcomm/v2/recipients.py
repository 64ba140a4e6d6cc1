"""Which recipient a DIDComm v2 name (a forward's `next`, a keylist's `recipient_did`)
is, in the routing table that v1 recipient keys use.

v1 routes by Ed25519 verkey (its 32 raw bytes). A v2 wallet names itself by a DID or a key
agreement key, usually X25519: the Montgomery form of an Ed25519 key, which loses the sign
of the Edwards x coordinate. So an X25519 key stands for two Ed25519 encodings (sign 0 and
sign 1), and both are route ids of it: a v2 registration stores the first (sign 0), a
lookup tries both, so a key registered as a v1 verkey and the same key registered as an
X25519 did:key or did:peer:2 key agreement key find the same recipient, without a second
table or a migration of the routes already stored. An Ed25519 did:key is its verkey. A
P-256 or P-384 key has no Ed25519 form: its route id is the SHA-256 of its compressed point
with the curve's name.
"""

from __future__ import annotations

import hashlib

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from mediator.didcomm.v2 import dids
from mediator.didcomm.v2.jwk import NIST, X25519, PublicKey
from mediator.errors import DidError

P = 2**255 - 19
# How many DIDs a node remembers the route ids of (mediator/mediation/wallets_v2.py, in
# base58): a wallet's DID is forwarded to again and again, and resolving it and working out
# its X25519 key's candidates costs about 100 µs; both caches full hold about 11 MB of
# wallets' DIDs, 64 MB at most (only DIDs up to dids.CACHED_DID are remembered).
ROUTE_CACHE = 16_384


def ed25519_candidates(x25519: bytes) -> tuple[bytes, ...]:
    """The Ed25519 encodings whose X25519 form is `x25519` (sign 0 first); none for the
    one u with no Edwards point (u = -1)."""
    u = (int.from_bytes(x25519, "little") & ((1 << 255) - 1)) % P
    if (u + 1) % P == 0:
        return ()
    y = (u - 1) * pow(u + 1, -1, P) % P
    return (y.to_bytes(32, "little"), (y | (1 << 255)).to_bytes(32, "little"))


def route_ids_of_key(key: PublicKey) -> tuple[bytes, ...]:
    if key.crv == X25519:
        return ed25519_candidates(key.x)
    point = ec.EllipticCurvePublicNumbers(
        int.from_bytes(key.x, "big"), int.from_bytes(key.y, "big"), NIST[key.crv]
    ).public_key()
    compressed = point.public_bytes(Encoding.X962, PublicFormat.CompressedPoint)
    return (hashlib.sha256(key.crv.encode() + compressed).digest(),)


def key_route_ids(name: str) -> tuple[tuple[bytes, ...], ...]:
    """For each key `name` stands for, its route ids (an X25519 key's two candidates, sign
    0 first; one id for any other key): an Ed25519 did:key's verkey; a key agreement key's
    ids (a DID URL names one key, a DID all of its key agreement keys, in order). DidError
    when it cannot be read or names no key a message can be routed to."""
    doc = dids.resolve(name.split("#", 1)[0])
    if "#" in name:
        key = doc.find(doc.agreement, name)
        keys = [key] if key is not None else []
    else:
        keys = list(doc.agreement)
    out: list[tuple[bytes, ...]] = []
    for key in keys:
        if key.verifying is not None and key.verifying.alg == "EdDSA":
            out.append((key.verifying.native.public_bytes_raw(),))  # an Ed25519 did:key
        elif key.agreement is not None:
            ids = route_ids_of_key(key.agreement)
            if ids:
                out.append(ids)
    if not out:
        raise DidError(f"{name[:80]!r} names no key a message can be routed to")
    return tuple(out)


def route_ids(name: str) -> tuple[bytes, ...]:
    """Every route id `name` stands for (key_route_ids, flattened), the one a
    registration of its first key stores first."""
    return tuple(dict.fromkeys(i for ids in key_route_ids(name) for i in ids))
