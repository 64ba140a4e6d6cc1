"""One routing table for v1 and v2 (mediator/didcomm/v2/recipients.py): a v1 verkey and
the same key named the v2 ways (an Ed25519 did:key, its X25519 twin as a did:key, a
did:peer:2 key agreement key) share a route id; other keys do not."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from mediator.didcomm.keys import ED25519_MULTICODEC, X25519_MULTICODEC, KeyPair, b58encode
from mediator.didcomm.v2.dids import P256_MULTICODEC
from mediator.didcomm.v2.jwk import PrivateKey
from mediator.didcomm.v2.recipients import ed25519_candidates, route_ids
from mediator.errors import DidError


def test_every_ed25519_key_is_a_candidate_of_its_x25519_twin() -> None:
    for _ in range(200):
        keys = KeyPair.generate()
        candidates = ed25519_candidates(keys.x25519_public)
        assert keys.verkey in candidates and candidates[0][31] & 0x80 == 0


def test_a_v1_key_and_its_v2_names_share_a_route_id() -> None:
    keys = KeyPair.generate()
    ed = "z" + b58encode(ED25519_MULTICODEC + keys.verkey)
    x = "z" + b58encode(X25519_MULTICODEC + keys.x25519_public)
    assert route_ids(f"did:key:{ed}") == (keys.verkey,)
    assert keys.verkey in route_ids(f"did:key:{x}")
    did = f"did:peer:2.E{x}.V{ed}"
    assert keys.verkey in route_ids(did)
    assert keys.verkey in route_ids(f"{did}#key-1")
    assert route_ids(f"did:key:{x}")[0] == route_ids(did)[0]  # what a registration stores


def test_a_did_with_two_key_agreement_keys_names_both_and_a_key_url_one() -> None:
    one, two = PrivateKey.generate("X25519"), PrivateKey.generate("X25519")
    m1 = "z" + b58encode(X25519_MULTICODEC + one.public.x)
    m2 = "z" + b58encode(X25519_MULTICODEC + two.public.x)
    did = f"did:peer:2.E{m1}.E{m2}"
    assert len(route_ids(did)) == 4
    assert set(route_ids(f"{did}#key-2")) == set(ed25519_candidates(two.public.x))


def test_a_p256_key_has_a_route_id_of_its_own() -> None:
    point = ec.generate_private_key(ec.SECP256R1()).public_key()
    compressed = point.public_bytes(Encoding.X962, PublicFormat.CompressedPoint)
    did = "did:key:z" + b58encode(P256_MULTICODEC + compressed)
    (only,) = route_ids(did)
    assert len(only) == 32 and route_ids(did) == (only,)


def test_a_name_with_no_routable_key_is_refused() -> None:
    signing = "z" + b58encode(ED25519_MULTICODEC + KeyPair.generate().verkey)
    with pytest.raises(DidError, match="no key a message can be routed to"):
        route_ids(f"did:peer:2.V{signing}")
