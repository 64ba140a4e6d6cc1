"""DIDs for DIDComm v2 (mediator/didcomm/v2/dids.py): the mediator's own did:peer:2, the
same on every node for a key seed; others' did:peer:2 in the forms libraries write (key ids
`#key-N`, the 8-character prefix, the whole multibase; services old and new; several service
sections), did:key, long did:peer:4; and what cannot be read, refused with the reason."""

from __future__ import annotations

import json

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from mediator.didcomm import did_peer
from mediator.didcomm.envelope import b64url_encode
from mediator.didcomm.keys import ED25519_MULTICODEC, X25519_MULTICODEC, KeyPair, b58encode
from mediator.didcomm.v2 import jwe, jws
from mediator.didcomm.v2.dids import (
    CACHED_DID,
    DIDCOMM_V2,
    MAX_DID,
    P256_MULTICODEC,
    Service,
    _resolve,
    resolve,
)
from mediator.didcomm.v2.identity import ORDERS, MediatorV2, derived_nist_key
from mediator.didcomm.v2.jwk import NIST, PrivateKey
from mediator.errors import DidError

SEED = bytes(range(32))


def _x25519_multibase(key: PrivateKey) -> str:
    return "z" + b58encode(X25519_MULTICODEC + key.public.x)


def _ed25519_multibase(keys: KeyPair) -> str:
    return "z" + b58encode(ED25519_MULTICODEC + keys.verkey)


def _service(value: object) -> str:
    return "S" + b64url_encode(orjson.dumps(value))


def test_the_mediators_did_is_the_same_for_a_seed_and_encrypts_and_signs() -> None:
    endpoints = ("https://mediator.example/", "wss://mediator.example/ws")
    one, other = (
        MediatorV2(KeyPair.from_seed(SEED), endpoints),
        MediatorV2(KeyPair.from_seed(SEED), endpoints),
    )
    assert one.did == other.did and one.did.startswith("did:peer:2.Ez6LS")
    doc = resolve(one.did)
    assert [s.uri for s in doc.services] == list(endpoints)
    assert all(s.accept == (DIDCOMM_V2,) for s in doc.services)
    assert doc.services[1].websocket and not doc.services[0].websocket
    # A wallet encrypts to key-1 of the document; the mediator opens it with its own key.
    public = doc.agreement_key(one.agreement_kid)
    assert public is not None
    sealed = jwe.encrypt(b"ping", [(one.agreement_kid, public)])
    assert jwe.parse(sealed).decrypt(one.agreement_kid, one.agreement) == b"ping"
    # What the mediator signs with key-2 verifies with the document's authentication key.
    signing = ed25519.Ed25519PrivateKey.from_private_bytes(one.keys.sigkey[:32])
    signed = jws.sign(b"{}", one.signing_kid, signing)
    verifying = doc.verifying_key(one.signing_kid)
    assert verifying is not None
    parsed = jws.parse(signed)
    assert parsed.verify(parsed.signatures[0], verifying) == b"{}"


def test_the_nist_keys_are_derived_from_the_seed_and_agree() -> None:
    """P-256 (#key-3) and P-384 (#key-4): the same for a seed, other for another, each a
    scalar below its curve's order, and what is encrypted to them opens."""
    endpoints = ("https://mediator.example/",)
    one = MediatorV2(KeyPair.from_seed(SEED), endpoints, nist=True)
    again = MediatorV2(KeyPair.from_seed(SEED), endpoints, nist=True)
    other = MediatorV2(KeyPair.from_seed(bytes(32)), endpoints, nist=True)
    doc = resolve(one.did)
    for fragment, crv in (("key-3", "P-256"), ("key-4", "P-384")):
        key = one.agreement_keys[fragment]
        assert key.crv == crv and key.public == again.agreement_keys[fragment].public
        assert key.public != other.agreement_keys[fragment].public
        assert doc.agreement_key(f"{one.did}#{fragment}") == key.public
        with pytest.raises(ValueError):  # the order itself is no scalar: ORDERS is right
            ec.derive_private_key(ORDERS[crv], NIST[crv])
        kid = f"{one.did}#{fragment}"
        sealed = jwe.encrypt(b"ping", [(kid, key.public)])
        assert jwe.parse(sealed).decrypt(kid, key) == b"ping"
    assert one.sender_for("P-384") == (f"{one.did}#key-4", one.agreement_keys["key-4"])
    assert one.sender_for("P-521") is None
    unlisted = MediatorV2(KeyPair.from_seed(SEED), endpoints)  # the default
    assert [k.agreement.crv for k in resolve(unlisted.did).agreement if k.agreement] == ["X25519"]
    assert unlisted.sender_for("P-256") is None  # a P-256 peer gets anoncrypt
    assert derived_nist_key(SEED, "P-256").public != derived_nist_key(SEED, "P-384").public


def test_another_seed_or_endpoint_is_another_did() -> None:
    base = MediatorV2(KeyPair.from_seed(SEED), ("https://a.example/",))
    assert base.did != MediatorV2(KeyPair.from_seed(bytes(32)), ("https://a.example/",)).did
    assert base.did != MediatorV2(KeyPair.from_seed(SEED), ("https://b.example/",)).did


def test_a_wallets_did_peer_2_is_read_in_every_key_id_and_service_form() -> None:
    agreement, signing = PrivateKey.generate("X25519"), KeyPair.generate()
    x, ed = _x25519_multibase(agreement), _ed25519_multibase(signing)
    did = ".".join(
        [
            "did:peer:2",
            "E" + x,
            "V" + ed,
            _service({"t": "dm", "s": {"uri": "https://wallet.example", "a": ["didcomm/v2"],
                                        "r": ["did:key:z6Mkrouting#z6LSrouting"]}}),
            _service({"t": "dm", "s": "wss://wallet.example/ws", "a": ["didcomm/v2"]}),
            _service({"t": "other", "s": "https://elsewhere.example"}),
        ]
    )  # fmt: skip
    doc = resolve(did)
    for kid in (f"{did}#key-1", "#key-1", f"{did}#{x[1:9]}", f"{did}#{x}", f"#{x}"):
        assert doc.agreement_key(kid) == agreement.public, kid
    assert doc.agreement_key(f"{did}#key-2") is None  # the signing key does not agree here
    assert doc.verifying_key(f"{did}#key-2") is not None
    assert doc.services == (
        Service("https://wallet.example", ("didcomm/v2",), ("did:key:z6Mkrouting#z6LSrouting",)),
        Service("wss://wallet.example/ws", ("didcomm/v2",)),
    )
    assert doc.kid(doc.agreement[0]) == f"{did}#key-1"


def test_an_ed25519_did_key_agrees_with_its_x25519_twin_by_either_name() -> None:
    keys = KeyPair.generate()
    did = "did:key:" + _ed25519_multibase(keys)
    doc = resolve(did)
    twin = "z" + b58encode(X25519_MULTICODEC + keys.x25519_public)
    for kid in (f"{did}#{did[8:]}", f"{did}#{twin}"):
        found = doc.agreement_key(kid)
        assert found is not None and found.x == keys.x25519_public


def test_a_p256_did_key_both_agrees_and_verifies() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    compressed = private.public_key().public_bytes(Encoding.X962, PublicFormat.CompressedPoint)
    did = "did:key:z" + b58encode(P256_MULTICODEC + compressed)
    doc = resolve(did)
    key = doc.agreement_key(f"{did}#{did[8:]}")
    assert key is not None and key.crv == "P-256"
    assert doc.verifying_key(f"{did}#{did[8:]}") is not None


def test_a_long_did_peer_4_is_read_from_its_document() -> None:
    agreement, signing = PrivateKey.generate("X25519"), KeyPair.generate()
    input_doc = {
        "@context": ["https://www.w3.org/ns/did/v1"],
        "verificationMethod": [
            {"id": "#key-1", "type": "Multikey", "publicKeyMultibase": _ed25519_multibase(signing)},
            {"id": "#key-2", "type": "JsonWebKey2020", "publicKeyJwk": agreement.public.jwk()},
        ],
        "authentication": ["#key-1"],
        "keyAgreement": ["#key-2"],
        "service": [{"id": "#didcomm", "type": "DIDCommMessaging",
                     "serviceEndpoint": {"uri": "https://w.example", "accept": ["didcomm/v2"]}}],
    }  # fmt: skip
    did = did_peer.numalgo4_did(input_doc)
    doc = resolve(did)
    assert doc.agreement_key(f"{did}#key-2") == agreement.public
    assert doc.agreement_key("#key-2") == agreement.public
    assert doc.verifying_key(f"{did}#key-1") is not None
    assert doc.services == (Service("https://w.example", ("didcomm/v2",)),)


@pytest.mark.parametrize(
    ("did", "said"),
    [
        ("did:peer:2.Xz6LSabc", "unknown did:peer:2 purpose"),
        ("did:peer:2.Ez6LS0OIl", "not base58btc"),
        ("did:peer:2.Ezabc", "unsupported key type"),
        ("did:peer:2.Vz" + b58encode(X25519_MULTICODEC + bytes(32)), "must sign"),
        ("did:peer:2.S" + "!!", "not base64url"),
        ("did:web:example.com", "only did:peer:2"),
        ("did:peer:4zQmShort", "cannot be resolved"),
        ("did:peer:2." + "E" * 20_000, "at most 16 KiB"),
    ],
)
def test_what_cannot_be_read_is_refused_with_the_reason(did: str, said: str) -> None:
    with pytest.raises(DidError, match=said):
        resolve(did)


def test_a_service_may_list_its_endpoint_as_did_core_allows() -> None:
    keys = PrivateKey.generate("X25519")
    endpoint = {"uri": "https://w.example", "routingKeys": ["did:key:z6Mkr"]}
    entry = {"type": "DIDCommMessaging", "serviceEndpoint": [endpoint]}
    did = f"did:peer:2.E{_x25519_multibase(keys)}.{_service(entry)}"
    assert resolve(did).services == (Service("https://w.example", (), ("did:key:z6Mkr",)),)
    assert json.loads(json.dumps(entry))  # the entry itself is untouched


def test_only_dids_of_at_most_2_kib_are_remembered() -> None:
    """A wallet's DID is remembered (resolved once); one longer than CACHED_DID (a peer's
    16 KiB DID) is read each time and never held."""
    agreement = PrivateKey.generate("X25519")
    short = f"did:peer:2.E{_x25519_multibase(agreement)}"
    services = ".".join(
        _service({"t": "dm", "s": {"uri": f"https://h{i}.example/"}}) for i in range(60)
    )
    long = f"{short}.{services}"
    assert len(short) <= CACHED_DID < len(long) <= MAX_DID
    before = _resolve.cached_count()
    for _ in range(3):
        assert len(resolve(long).services) == 60
        assert resolve(short).agreement_key("#key-1") == agreement.public
        assert resolve(f"{short}#key-1").did == short  # a DID URL is its DID's document
    assert _resolve.cached_count() == before + 1
