"""Synthetic Askar stores of old mediators: what ACA-Py 1.7 and Credo 0.5/0.6 mediators leave
behind (docs/import-sources.md), for the importer's tests and its million-connection bench.

Every record has the category, name, tags and value layout the real agents write, checked
against stores dumped from real mediator runs: ACA-Py values are `json.dumps` text with its
spaces, Credo's compact `JSON.stringify`; DIDs are valid encodings whose documents name the
keys the records point to. Keys and ids come from a counter hashed with the plan's seed, so
the same plan makes the same records, and what an importer must find comes back as a truth.

    python -m bench.support.askar_stores acapy --connections 1000000 --out m.db --key-method raw
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import sys
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import chain, islice
from pathlib import Path
from typing import Any, Literal

import base58
import nacl.bindings as sodium
from aries_askar import Key, KeyAlg, Store

AcapyClient = Literal["sov", "peer1", "peer4", "peer2"]
CredoClient = Literal["peer1", "peer4"]
CredoVersion = Literal["0.5", "0.6"]
InvitationForm = Literal["oob", "connections"]
Progress = Callable[[int, int], None]
"""Called after each commit with (connections written, connections planned)."""

KEY_METHODS = ("kdf:argon2i:mod", "kdf:argon2i:int", "raw")
DEFAULT_PASS_KEY = "mediator-wallet-key"
ENDPOINTS = ("https://mediator.example.org", "wss://mediator.example.org")
QUEUE_ENDPOINT = "didcomm:transport/queue"  # a mobile wallet's: replies on return route only
ACAPY_VERSION = "v1.7.0"
CREDO_STORAGE_VERSION = "0.5"  # what 0.5, 0.6 and 0.7 all write
DIDEXCHANGE = "https://didcomm.org/didexchange"
OOB_INVITATION = "https://didcomm.org/out-of-band/1.1/invitation"
CONNECTIONS_INVITATION = "https://didcomm.org/connections/1.0/invitation"
DID_V1_OLD = "https://w3id.org/did/v1"
DID_V1 = "https://www.w3.org/ns/did/v1"
MULTIKEY_V1 = "https://w3id.org/security/multikey/v1"
USE_DID_KEYS = {"https://didcomm.org/coordinate-mediation/1.0": True}
ED25519_CODEC = b"\xed\x01"
X25519_CODEC = b"\xec\x01"
_SHA256_MULTIHASH = b"\x12\x20"
_JSON_MULTICODEC = b"\x80\x04"
_IN_FLIGHT = 16  # Askar calls queued at once: the next records are built while these run
_START = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
_CONNECTION_SPACING = timedelta(seconds=7)


# --- plans --------------------------------------------------------------------------------


@dataclass(frozen=True)
class AcapyPlan:
    """An ACA-Py 1.7 mediator (`--open-mediation --invite --invite-multi-use`) and its clients.

    Connection i's client is `clients[i % len(clients)]`, named by the DID it sent: `sov` an
    ACA-Py client over didexchange/1.0 (unqualified DIDs, legacy DID doc), `peer1` Credo 0.5,
    `peer4` Credo 0.6/0.7, `peer2` an ACA-Py 1.x client emitting did:peer:2. Mediation of
    connections 0..requested-1 is still `request`, of the next `denied` ones `denied`.
    """

    connections: int = 10
    clients: tuple[AcapyClient, ...] = ("sov", "peer1", "peer4", "peer2")
    recipient_keys: int = 1  # forward_route records per granted connection
    invitations: int = 1  # multi-use templates (ACA-Py makes one per start)
    # "oob": 1.x's `--invite` (OOB 1.1, didexchange/1.0); "connections": 0.12's
    # `--connections-invite`, as aries-mediator-service runs it (RFC 0160, no oob_record)
    invitation_form: InvitationForm = "oob"
    requested: int = 0
    denied: int = 0
    requests: bool = True  # keep each connection's `connection_request` (not needed to route)
    noise: bool = False  # records an importer must skip or report (AcapyTruth.noise)
    endpoints: tuple[str, ...] = ENDPOINTS
    label: str = "Mediator"
    key_method: str = "kdf:argon2i:mod"
    pass_key: str | None = None  # None: DEFAULT_PASS_KEY, or a raw key made from `seed`
    seed: str = "acapy"
    batch: int = 5000  # connections per transaction
    truth_every: int = 1  # keep every n-th connection's truth (1: all, 0: none)
    progress: Progress | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class CredoPlan:
    """A Credo mediator (`MediatorModule`, or didcomm-mediator-credo's queue) and its clients.

    `version` "0.5": base58-named keys and routing keys; "0.6": UUID-named keys that records
    point to by `kmsKeyId`; in a 0.6 store, connections 0..legacy_connections-1 (and the
    routing key with `legacy_routing`) are as a 0.5 mediator left them before the upgrade.
    `peer1` is a Credo 0.5 client (did:peer:1 both ways), `peer4` a 0.6/0.7 client.
    """

    version: CredoVersion = "0.5"
    connections: int = 10
    clients: tuple[CredoClient, ...] = ("peer1", "peer4")
    recipient_keys: int = 1
    invitations: int = 1
    requested: int = 0
    denied: int = 0
    did_key_every: int = 2  # every n-th connection sent did:key keylist updates (0: none)
    queued: int = 0  # granted connections with queued MessageRecords
    messages: int = 3  # MessageRecords per queue
    split_mediations: int = 0  # first n granted: one MediationRecord per key (old converter)
    legacy_connections: int = 0
    legacy_routing: bool = False
    noise: bool = False
    endpoints: tuple[str, ...] = ENDPOINTS
    label: str = "Credo Mediator"
    store_id: str = "credo-mediator"
    key_method: str = "kdf:argon2i:mod"
    pass_key: str | None = None
    seed: str = "credo"
    batch: int = 5000
    truth_every: int = 1
    progress: Progress | None = field(default=None, compare=False, repr=False)


# --- truths -------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyTruth:
    """A key of the mediator: base58 verkey, its 32-byte Ed25519 seed, the Askar key name."""

    verkey: str
    seed: bytes
    name: str


@dataclass(frozen=True)
class InvitationTruth:
    """A multi-use invitation: its `@id`, key, label, the JSON as stored, and the record that
    holds it (ACA-Py: the template connection's id; Credo: the OutOfBandRecord's id)."""

    id: str
    key: KeyTruth
    label: str
    invitation: dict[str, Any]
    record: str


@dataclass(frozen=True)
class ConnectionTruth:
    """One client connection as an importer must carry it. DIDs are as the connection record
    holds them (ACA-Py: short did:peer:4; Credo: long)."""

    id: str
    client: str
    state: str
    protocol: str
    their_label: str
    their_did: str
    their_verkey: str  # the recipient key of their DIDComm service (they authcrypt with it)
    their_seed: bytes  # its secret: a test speaks as the wallet with it
    their_endpoint: str
    our_did: str
    our_verkey: str
    our_seed: bytes
    our_key_name: str
    invitation_id: str
    created_at: str
    mediation_state: str | None  # as stored: ACA-Py request/granted/denied, Credo requested/…
    recipient_keys: tuple[str, ...]  # base58, in keylist order
    recipient_seeds: tuple[bytes, ...]  # the client's secrets of those keys (to open queues)
    did_keys_in_keylist: bool  # Credo metadata _internal/useDidKeysForProtocol
    queued: tuple[bytes, ...] = ()  # each queued JWE as compact JSON, oldest first


@dataclass(frozen=True)
class NoiseTruth:
    """A record an importer must skip or report, and why."""

    category: str
    name: str
    reason: str


@dataclass
class StoreTruth:
    """What a generated store holds. `connections` has every `truth_every`-th connection."""

    path: Path
    uri: str
    pass_key: str
    key_method: str
    profile: str
    endpoints: tuple[str, ...]
    routing_keys: list[KeyTruth]
    invitations: list[InvitationTruth] = field(default_factory=list)
    connections: list[ConnectionTruth] = field(default_factory=list)
    connection_count: int = 0
    noise: list[NoiseTruth] = field(default_factory=list)
    items: dict[str, int] = field(default_factory=dict)  # items written per category
    keys: int = 0  # Askar keys written
    seconds: float = 0.0


@dataclass
class AcapyTruth(StoreTruth):
    routing_did: str = ""


@dataclass
class CredoTruth(StoreTruth):
    version: str = "0.5"
    store_id: str = ""


# --- deterministic material ---------------------------------------------------------------


class _Ids:
    """Seeds and ids hashed from the plan's seed and a counter: the same plan, the same store."""

    def __init__(self, seed: str) -> None:
        self._salt = hashlib.sha256(seed.encode()).digest()

    def bytes(self, *parts: object) -> bytes:
        text = "/".join(str(p) for p in parts).encode()
        return hashlib.sha256(self._salt + text).digest()

    def uuid(self, *parts: object) -> str:
        """A uuid4 (as ACA-Py's model records and Credo name theirs)."""
        return str(uuid.UUID(bytes=self.bytes(*parts)[:16], version=4))

    def hex(self, *parts: object) -> str:
        """uuid4 hex (as ACA-Py names plain StorageRecords)."""
        return uuid.UUID(bytes=self.bytes(*parts)[:16], version=4).hex


@dataclass(frozen=True, slots=True)
class _Ed:
    """An Ed25519 key pair from a seed, with the encodings records use."""

    seed: bytes
    public: bytes
    secret: bytes  # NaCl's 64 bytes: seed then public
    verkey: str

    @classmethod
    def of(cls, seed: bytes) -> _Ed:
        public, secret = sodium.crypto_sign_seed_keypair(seed)
        return cls(seed, public, secret, _b58(public))

    @property
    def multikey(self) -> str:
        return _multikey(ED25519_CODEC, self.public)

    @property
    def did_key(self) -> str:
        return "did:key:" + self.multikey

    @property
    def x25519(self) -> bytes:
        return sodium.crypto_sign_ed25519_pk_to_curve25519(self.public)

    def sign(self, data: bytes) -> bytes:
        return sodium.crypto_sign(data, self.secret)[:64]

    def truth(self, name: str | None = None) -> KeyTruth:
        return KeyTruth(self.verkey, self.seed, name or self.verkey)


def _acapy_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _credo_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _moment(index: int, seconds: float = 0.0) -> datetime:
    return _START + _CONNECTION_SPACING * index + timedelta(seconds=seconds)


# --- encodings ----------------------------------------------------------------------------


def _b58(data: bytes) -> str:
    return base58.b58encode(data).decode("ascii")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _multikey(codec: bytes, public: bytes) -> str:
    return "z" + _b58(codec + public)


def _multihash(data: bytes) -> str:
    return "z" + _b58(_SHA256_MULTIHASH + hashlib.sha256(data).digest())


def _aj(value: object) -> str:
    """JSON as ACA-Py stores it (`json.dumps`, with spaces)."""
    return json.dumps(value)


def _cj(value: object) -> str:
    """JSON as Credo stores it (`JSON.stringify`, compact)."""
    return json.dumps(value, separators=(",", ":"))


def sov_did(public: bytes) -> str:
    """An unqualified Indy DID: base58 of the first 16 bytes of the verkey."""
    return _b58(public[:16])


def did_peer_1(doc: dict[str, Any]) -> str:
    """did:peer:1: the multihash of the genesis document without its `id`, compact JSON."""
    stored = {k: v for k, v in doc.items() if k != "id"}
    return "did:peer:1" + _multihash(_cj(stored).encode())


def did_peer_2(keys: Iterable[tuple[str, str]], services: Iterable[dict[str, Any]]) -> str:
    """did:peer:2 of (purpose, multikey) pairs and services, abbreviated as the spec says and
    written as ACA-Py's did_peer_2 writes them (one `.S` element per service)."""
    words = {"type": "t", "serviceEndpoint": "s", "routingKeys": "r", "accept": "a"}
    parts = ["did:peer:2"] + [purpose + key for purpose, key in keys]
    for service in services:
        short = {words.get(k, k): v for k, v in service.items()}
        if short.get("t") == "DIDCommMessaging":
            short["t"] = "dm"
        parts.append("S" + _b64url(_cj(short).encode()))
    return ".".join(parts)


def did_peer_4(doc: dict[str, Any]) -> tuple[str, str]:
    """(long form, short form) of a did:peer:4 input document: the document as multicodec
    JSON in base58btc, prefixed by the multihash of that encoded text."""
    encoded = "z" + _b58(_JSON_MULTICODEC + _cj(doc).encode())
    short = "did:peer:4" + _multihash(encoded.encode())
    return short + ":" + encoded, short


def credo_tags(tags: dict[str, Any]) -> dict[str, str]:
    """Credo's tags as its Askar storage writes them: booleans "1"/"0", the strings "1"/"0"
    as "n__1"/"n__0", one `<tag>:<element>` = "1" per array element, null left out."""
    out: dict[str, str] = {}
    for name, value in tags.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[name] = "1" if value else "0"
        elif isinstance(value, list):
            out.update({f"{name}:{item}": "1" for item in value})
        elif value in ("1", "0"):
            out[name] = f"n__{value}"
        else:
            out[name] = str(value)
    return out


def authcrypt(
    message: bytes, recipient: bytes, sender: _Ed, ids: _Ids, *salt: object
) -> dict[str, str]:
    """An RFC 0019 authcrypt envelope (JWM/1.0) to the Ed25519 key `recipient`, as Askar
    writes them: the header says xchacha20poly1305_ietf, the content is ChaCha20-Poly1305
    IETF under a 12-byte iv, the CEK is crypto_box-ed and the sender's verkey sealed."""
    recipient_x = sodium.crypto_sign_ed25519_pk_to_curve25519(recipient)
    sender_x = sodium.crypto_sign_ed25519_sk_to_curve25519(sender.secret)
    cek, nonce, iv = (
        ids.bytes("cek", *salt),
        ids.bytes("nonce", *salt)[:24],
        ids.bytes("iv", *salt)[:12],
    )
    header = {
        "kid": _b58(recipient),
        "sender": _b64url(sodium.crypto_box_seal(sender.verkey.encode(), recipient_x)),
        "iv": _b64url(nonce),
    }
    encrypted_key = sodium.crypto_box(cek, nonce, recipient_x, sender_x)
    protected = _b64url(
        _cj(
            {
                "enc": "xchacha20poly1305_ietf",
                "typ": "JWM/1.0",
                "alg": "Authcrypt",
                "recipients": [{"encrypted_key": _b64url(encrypted_key), "header": header}],
            }
        ).encode()
    )
    sealed = sodium.crypto_aead_chacha20poly1305_ietf_encrypt(message, protected.encode(), iv, cek)
    return {
        "protected": protected,
        "iv": _b64url(iv),
        "ciphertext": _b64url(sealed[:-16]),
        "tag": _b64url(sealed[-16:]),
    }


def _attachment(
    doc_json: str, signer: _Ed, ids: _Ids, credo: bool, *salt: object
) -> dict[str, Any]:
    """A signed `did_doc~attach` as a requester sends it: the document in base64 and a JWS
    over it by the DID's key (ACA-Py puts the kid in the JWK too and writes spaced JSON)."""
    jwk: dict[str, str] = {"kty": "OKP", "crv": "Ed25519", "x": _b64url(signer.public)}
    if not credo:
        jwk["kid"] = signer.did_key
    protected = _b64url((_cj if credo else _aj)({"alg": "EdDSA", "jwk": jwk}).encode())
    payload = _b64url(doc_json.encode())
    signature = signer.sign(f"{protected}.{payload}".encode())
    return {
        "@id": ids.uuid("attach", *salt),
        "mime-type": "application/json",
        "data": {
            "base64": base64.b64encode(doc_json.encode()).decode("ascii"),
            "jws": {
                "header": {"kid": signer.did_key},
                "protected": protected,
                "signature": _b64url(signature),
            },
        },
    }


# --- DID documents as each agent writes them ----------------------------------------------


def legacy_diddoc(did: str, key: _Ed, endpoint: str) -> dict[str, Any]:
    """An ACA-Py client's DIDDoc (connections-era JSON, IndyAgent service)."""
    qualified = "did:sov:" + did
    return {
        "@context": DID_V1_OLD,
        "id": qualified,
        "publicKey": [
            {
                "id": qualified + "#1",
                "type": "Ed25519VerificationKey2018",
                "controller": qualified,
                "publicKeyBase58": key.verkey,
            }
        ],
        "authentication": [
            {"type": "Ed25519SignatureAuthentication2018", "publicKey": qualified + "#1"}
        ],
        "service": [
            {
                "id": qualified + ";indy",
                "type": "IndyAgent",
                "priority": 0,
                "recipientKeys": [key.verkey],
                "serviceEndpoint": endpoint,
            }
        ],
    }


def credo_doc(key: _Ed, endpoints: Iterable[str], context: str, controller: bool) -> dict[str, Any]:
    """A Credo peer DID document: one did-communication service per endpoint, the Ed25519
    key `#key-1` and its X25519 twin `#key-2` (did:peer:1 documents add `controller`)."""
    services = [
        {
            "id": f"#inline-{n}",
            "serviceEndpoint": endpoint,
            "type": "did-communication",
            "priority": n,
            "recipientKeys": ["#key-1"],
            "routingKeys": [],
        }
        for n, endpoint in enumerate(endpoints)
    ]
    owner = {"controller": "#id"} if controller else {}
    return {
        "@context": [context],
        "service": services,
        "authentication": [
            {
                "id": "#key-1",
                "type": "Ed25519VerificationKey2018",
                **owner,
                "publicKeyBase58": key.verkey,
            }
        ],
        "keyAgreement": [
            {
                "id": "#key-2",
                "type": "X25519KeyAgreementKey2019",
                **owner,
                "publicKeyBase58": _b58(key.x25519),
            }
        ],
    }


def with_id(did: str, doc: dict[str, Any]) -> dict[str, Any]:
    """A did:peer:1 document as stored: `id` second, after `@context`."""
    context, rest = doc["@context"], {k: v for k, v in doc.items() if k != "@context"}
    return {"@context": context, "id": did, **rest}


def acapy_peer4_doc(key: _Ed, endpoints: Iterable[str]) -> dict[str, Any]:
    """ACA-Py 1.x's did:peer:4 input document: one Multikey for signing and key agreement."""
    return {
        "@context": [DID_V1, MULTIKEY_V1],
        "verificationMethod": [
            {"id": "#key-0", "type": "Multikey", "publicKeyMultibase": key.multikey}
        ],
        "authentication": ["#key-0"],
        "keyAgreement": ["#key-0"],
        "service": [
            {
                "id": f"#didcomm-{n}",
                "type": "did-communication",
                "recipientKeys": ["#key-0"],
                "routingKeys": [],
                "serviceEndpoint": endpoint,
                "priority": n,
            }
            for n, endpoint in enumerate(endpoints)
        ],
    }


def acapy_peer2(key: _Ed, agreement: bytes, endpoints: Iterable[str]) -> str:
    """ACA-Py 1.x's did:peer:2: Ed25519 `#key-1` (V), a separate X25519 `#key-2` (E), one
    service per endpoint."""
    services = [
        {
            "id": f"#didcomm-{n}",
            "type": "did-communication",
            "priority": n,
            "recipientKeys": ["#key-1"],
            "routingKeys": [],
            "serviceEndpoint": endpoint,
        }
        for n, endpoint in enumerate(endpoints)
    ]
    keys = [("V", key.multikey), ("E", _multikey(X25519_CODEC, agreement))]
    return did_peer_2(keys, services)


# --- writing ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Row:
    category: str
    name: str
    value: str | bytes
    tags: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class _KeyRow:
    name: str
    secret: bytes
    metadata: str | None = None
    tags: dict[str, Any] | None = None
    alg: KeyAlg = KeyAlg.ED25519


@dataclass
class _Unit:
    """What one transaction step inserts: usually one connection with all its records."""

    rows: list[_Row] = field(default_factory=list)
    keys: list[_KeyRow] = field(default_factory=list)
    connections: int = 0

    def calls(self, txn: Any) -> Iterator[Coroutine[Any, Any, Any]]:
        for row in self.rows:
            yield txn.insert(row.category, row.name, row.value, row.tags)
        for key in self.keys:
            secret = Key.from_secret_bytes(key.alg, key.secret)
            yield txn.insert_key(key.name, secret, metadata=key.metadata, tags=key.tags)


async def _provision(path: Path, key_method: str, pass_key: str, profile: str | None) -> Any:
    if key_method not in KEY_METHODS:
        raise ValueError(f"key method {key_method!r}: one of {', '.join(KEY_METHODS)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    uri = f"sqlite://{path}"
    return await Store.provision(uri, key_method, pass_key, profile=profile, recreate=True)


def _pass_key(plan_key: str | None, method: str, ids: _Ids) -> str:
    if plan_key is not None:
        return plan_key
    if method == "raw":
        return str(Store.generate_raw_key(ids.bytes("raw store key")))
    return DEFAULT_PASS_KEY


async def _write(
    store: Any,
    units: Iterator[_Unit],
    truth: StoreTruth,
    batch: int,
    total: int,
    progress: Progress | None,
) -> None:
    """Insert the units, `batch` of them per transaction, counting items and keys."""
    counts: Counter[str] = Counter()
    while (first := next(units, None)) is not None:
        chunk = chain([first], islice(units, batch - 1))
        async with store.transaction() as txn:
            await _insert(txn, chunk, counts, truth)
            await txn.commit()
        if progress is not None:
            progress(truth.connection_count, total)
    truth.items = dict(sorted(counts.items()))


async def _insert(
    txn: Any, units: Iterable[_Unit], counts: Counter[str], truth: StoreTruth
) -> None:
    """Keep up to _IN_FLIGHT Askar calls queued, so that building the next units in Python
    overlaps Askar's encryption and SQLite work on the ones before."""
    flight: deque[asyncio.Future[Any]] = deque()
    try:
        for unit in units:
            counts.update(row.category for row in unit.rows)
            truth.keys += len(unit.keys)
            truth.connection_count += unit.connections
            flight.extend(asyncio.ensure_future(call) for call in unit.calls(txn))
            while len(flight) > _IN_FLIGHT:
                await flight.popleft()
        while flight:
            await flight.popleft()
    except BaseException:
        for pending in flight:
            pending.cancel()
        raise


def _kept(index: int, every: int) -> bool:
    return every > 0 and index % every == 0


def _mediation_state(index: int, requested: int, denied: int, words: tuple[str, str, str]) -> str:
    """(requested, denied, granted) word for connection `index`."""
    if index < requested:
        return words[0]
    if index < requested + denied:
        return words[1]
    return words[2]


# --- ACA-Py -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Side:
    """One side of a connection: the DID the connection names, the records and keys behind
    it, and (their side) what the request carried."""

    did: str
    rows: list[_Row]
    keys: list[_KeyRow] = field(default_factory=list)
    request: dict[str, Any] | None = None


class _Acapy:
    """Builds an ACA-Py 1.7 mediator's records."""

    def __init__(self, plan: AcapyPlan, truth: AcapyTruth) -> None:
        self.plan, self.truth, self.ids = plan, truth, _Ids(plan.seed)
        self.routing = _Ed.of(self.ids.bytes("routing"))
        self.invitation_keys = [
            _Ed.of(self.ids.bytes("invitation", n)) for n in range(plan.invitations)
        ]

    def units(self) -> Iterator[_Unit]:
        yield self.header()
        for index in range(self.plan.connections):
            unit, connection = self.client(index)
            if _kept(index, self.plan.truth_every):
                self.truth.connections.append(connection)
            yield unit
        if self.plan.noise:
            yield from self.noise()

    def header(self) -> _Unit:
        """Version records, the routing DID and the multi-use invitations."""
        unit = _Unit()
        unit.rows += [
            _Row("acapy_version", self.ids.hex("version"), ACAPY_VERSION),
            _Row("acapy_storage_type", self.ids.hex("storage"), "askar"),
            _Row("config", "default_public_did", _aj({"did": None})),
        ]
        did = sov_did(self.routing.public)
        metadata = {"type": "routing_did"}
        unit.rows += [
            _Row(
                "routing_did",
                "routing_did",
                _aj({"verkey": self.routing.verkey, "metadata": metadata}),
                {"did": did},
            ),
            self.did_row(did, "sov", self.routing.verkey, metadata),
        ]
        unit.keys.append(_KeyRow(self.routing.verkey, self.routing.seed, _aj(metadata)))
        self.truth.routing_did = did
        self.truth.routing_keys.append(self.routing.truth())
        for n, key in enumerate(self.invitation_keys):
            self.invitation(unit, n, key)
        return unit

    def invitation(self, unit: _Unit, n: int, key: _Ed) -> None:
        """A template connection, its OOB 1.1 invitation and oob_record, and the key."""
        template, msg_id, created = (
            self.ids.uuid("template", n),
            self.ids.uuid("invitation", n),
            _acapy_time(_moment(-100 + n)),
        )
        if self.plan.invitation_form == "connections":
            self.connections_invitation(unit, n, key, template, msg_id, created)
            return
        invitation = {
            "@type": OOB_INVITATION,
            "@id": msg_id,
            "label": self.plan.label,
            "handshake_protocols": [f"{DIDEXCHANGE}/1.0"],
            "services": [
                {
                    "id": "#inline",
                    "type": "did-communication",
                    "recipientKeys": [f"{key.did_key}#{key.multikey}"],
                    "serviceEndpoint": self.plan.endpoints[0],
                }
            ],
        }
        tags = {
            "invitation_key": key.verkey,
            "invitation_msg_id": msg_id,
            "state": "invitation",
            "their_role": "invitee",
        }
        value = {
            "invitation_key": key.verkey,
            "invitation_msg_id": msg_id,
            "their_role": "invitee",
            "state": "invitation",
            "created_at": created,
            "updated_at": created,
            **self.connection_defaults("multi", None, "didexchange/1.0"),
        }
        oob_tags = {
            "connection_id": template,
            "invi_msg_id": msg_id,
            "our_recipient_key": key.verkey,
        }
        oob = {
            "our_recipient_key": key.verkey,
            "invi_msg_id": msg_id,
            "connection_id": template,
            "created_at": created,
            "updated_at": created,
            "state": "await-response",
            "their_service": None,
            "role": "sender",
            "multi_use": True,
            "invitation": invitation,
        }
        self.template(unit, n, template, (value, tags), invitation)
        unit.rows.append(_Row("oob_record", self.ids.uuid("oob", n), _aj(oob), oob_tags))
        unit.keys.append(_KeyRow(key.verkey, key.seed, "{}", {"multikey": key.multikey}))
        self.truth.invitations.append(
            InvitationTruth(msg_id, key.truth(), self.plan.label, invitation, template)
        )

    def template(
        self,
        unit: _Unit,
        n: int,
        template: str,
        record: tuple[dict[str, Any], dict[str, str]],
        invitation: dict[str, Any],
    ) -> None:
        """The template connection (value, tags) and its `connection_invitation`."""
        value, tags = record
        unit.rows += [
            _Row("connection", template, _aj(value), tags),
            _Row(
                "connection_invitation",
                self.ids.hex("invitation record", n),
                _aj(invitation),
                {"connection_id": template},
            ),
        ]

    def connections_invitation(
        self, unit: _Unit, n: int, key: _Ed, template: str, msg_id: str, created: str
    ) -> None:
        """0.12's `--connections-invite`: a template connection (no `invitation_msg_id`) and
        its RFC 0160 invitation (base58 keys, one endpoint), no oob_record; and the key
        (made by `create_local_did`'s path in 0.12: no tags)."""
        invitation = {
            "@type": CONNECTIONS_INVITATION,
            "@id": msg_id,
            "label": self.plan.label,
            "recipientKeys": [key.verkey],
            "serviceEndpoint": self.plan.endpoints[0],
            "routingKeys": [],
        }
        tags = {"invitation_key": key.verkey, "state": "invitation", "their_role": "invitee"}
        value = {
            **tags,
            "created_at": created,
            "updated_at": created,
            **self.connection_defaults("multi", None, "connections/1.0"),
        }
        self.template(unit, n, template, (value, tags), invitation)
        unit.keys.append(_KeyRow(key.verkey, key.seed, "{}"))
        self.truth.invitations.append(
            InvitationTruth(msg_id, key.truth(), self.plan.label, invitation, template)
        )

    @staticmethod
    def connection_defaults(mode: str, label: str | None, protocol: str | None) -> dict[str, Any]:
        return {
            "inbound_connection_id": None,
            "accept": "auto",
            "invitation_mode": mode,
            "alias": None,
            "error_msg": None,
            "their_label": label,
            "their_public_did": None,
            "connection_protocol": protocol,
        }

    @staticmethod
    def did_row(did: str, method: str, verkey: str, metadata: dict[str, Any] | None = None) -> _Row:
        tags = {"method": method, "verkey": verkey, "verkey_type": "ed25519"}
        return _Row("did", did, _aj({"did": did, **tags, "metadata": metadata or {}}), tags)

    # each client

    def client(self, index: int, with_key: bool = True) -> tuple[_Unit, ConnectionTruth]:
        kind = self.plan.clients[index % len(self.plan.clients)]
        ours, theirs = _Ed.of(self.ids.bytes("our", index)), _Ed.of(self.ids.bytes("their", index))
        n = index % len(self.invitation_keys)
        inviter, invitation_id = self.invitation_keys[n], self.ids.uuid("invitation", n)
        conn_id, request_id = self.ids.uuid("connection", index), self.ids.uuid("request", index)
        label, endpoint, protocol = self.client_profile(kind, index)
        our = self.our_side(kind, ours, index)
        their = self.their_side(kind, theirs, index, endpoint, label, request_id, invitation_id)
        created, updated = _acapy_time(_moment(index)), _acapy_time(_moment(index, 0.4))
        tags = {
            "invitation_key": inviter.verkey,
            "invitation_msg_id": invitation_id,
            "my_did": our.did,
            "request_id": request_id,
            "state": "active",
            "their_did": their.did,
            "their_role": "invitee",
        }
        value = {
            "invitation_key": inviter.verkey,
            "my_did": our.did,
            "invitation_msg_id": invitation_id,
            "their_role": "invitee",
            "state": "active",
            "request_id": request_id,
            "their_did": their.did,
            "created_at": created,
            "updated_at": updated,
            **self.connection_defaults("once", label, protocol),
        }
        unit = _Unit(connections=1)
        unit.rows.append(_Row("connection", conn_id, _aj(value), tags))
        if self.plan.requests and their.request is not None:
            unit.rows.append(
                _Row(
                    "connection_request",
                    self.ids.hex("request record", index),
                    _aj(their.request),
                    {"connection_id": conn_id},
                )
            )
        unit.rows += our.rows + their.rows
        if with_key:
            unit.keys += our.keys
        state = _mediation_state(
            index, self.plan.requested, self.plan.denied, ("request", "denied", "granted")
        )
        recipients = self.mediation(unit, index, conn_id, state)
        truth = ConnectionTruth(
            id=conn_id,
            client=kind,
            state="active",
            protocol=protocol,
            their_label=label,
            their_did=their.did,
            their_verkey=theirs.verkey,
            their_seed=theirs.seed,
            their_endpoint=endpoint,
            our_did=our.did,
            our_verkey=ours.verkey,
            our_seed=ours.seed,
            our_key_name=ours.verkey,
            invitation_id=invitation_id,
            created_at=created,
            mediation_state=state,
            recipient_keys=tuple(r.verkey for r in recipients),
            recipient_seeds=tuple(r.seed for r in recipients),
            did_keys_in_keylist=False,
        )
        return unit, truth

    @staticmethod
    def client_profile(kind: str, index: int) -> tuple[str, str, str]:
        """(their label, their endpoint, the connection's protocol) for a kind of client."""
        if kind == "sov":
            return f"ACA-Py client {index}", f"https://agent-{index}.example.net", "didexchange/1.0"
        if kind == "peer2":
            return f"ACA-Py client {index}", f"https://agent-{index}.example.net", "didexchange/1.1"
        if kind == "peer1":
            return f"wallet-{index}", QUEUE_ENDPOINT, "didexchange/1.1"
        return "", QUEUE_ENDPOINT, "didexchange/1.1"  # Credo 0.6+ sends an empty label

    def our_side(self, kind: str, key: _Ed, index: int) -> _Side:
        """Our DID: ACA-Py answers did:peer:2 with did:peer:2, did:peer:1/4 with did:peer:4
        (long and short records, the connection on the short), anything else with sov."""
        if kind == "sov":
            did = sov_did(key.public)
            return _Side(
                did, [self.did_row(did, "sov", key.verkey)], [_KeyRow(key.verkey, key.seed, "{}")]
            )
        if kind == "peer2":
            agreement_seed = self.ids.bytes("our x25519", index)
            agreement = sodium.crypto_scalarmult_base(agreement_seed)
            did = acapy_peer2(key, agreement, self.plan.endpoints)
            x_name = _b58(agreement)
            keys = [
                _KeyRow(
                    key.verkey, key.seed, "{}", {"multikey": key.multikey, "kid": [did + "#key-1"]}
                ),
                _KeyRow(
                    x_name,
                    agreement_seed,
                    "{}",
                    {"multikey": _multikey(X25519_CODEC, agreement), "kid": [did + "#key-2"]},
                    KeyAlg.X25519,
                ),
            ]
            return _Side(did, [self.did_row(did, "did:peer:2", key.verkey)], keys)
        long, short = did_peer_4(acapy_peer4_doc(key, self.plan.endpoints))
        rows = [
            self.did_row(long, "did:peer:4", key.verkey),
            self.did_row(short, "did:peer:4", key.verkey),
        ]
        return _Side(short, rows, [_KeyRow(key.verkey, key.seed, "{}", {"multikey": key.multikey})])

    def their_side(
        self,
        kind: str,
        key: _Ed,
        index: int,
        endpoint: str,
        label: str,
        request_id: str,
        invitation_id: str,
    ) -> _Side:
        """Their DID, the records ACA-Py keeps of it, and the request that carried it."""
        if kind == "sov":
            did = sov_did(key.public)
            doc = legacy_diddoc(did, key, endpoint)
            request = self.request("1.0", request_id, invitation_id, label, did, True)
            request["did_doc~attach"] = _attachment(_aj(doc), key, self.ids, False, index)
            return _Side(
                did,
                [self.did_doc_row(did, doc, index), self.did_key_row(did, key, index)],
                [],
                request,
            )
        if kind == "peer1":
            doc = credo_doc(key, [endpoint], DID_V1_OLD, controller=True)
            did = did_peer_1(doc)
            doc = with_id(did, doc)
            request = self.request("1.1", request_id, invitation_id, label, did, False)
            request["did_doc~attach"] = _attachment(_cj(doc), key, self.ids, True, index)
            return _Side(
                did,
                [self.did_doc_row(did, doc, index), self.did_key_row(did, key, index)],
                [],
                request,
            )
        if kind == "peer2":
            agreement = sodium.crypto_scalarmult_base(self.ids.bytes("their x25519", index))
            did = acapy_peer2(key, agreement, [endpoint])
            request = self.request("1.1", request_id, invitation_id, label, did, True)
            return _Side(did, [self.did_key_row(did, key, index)], [], request)
        long, short = did_peer_4(credo_doc(key, [endpoint], DID_V1, controller=False))
        request = self.request("1.1", request_id, invitation_id, label, long, False)
        rows = [_Row("long_peer_did_4_doc", short, long), self.did_key_row(long, key, index)]
        return _Side(short, rows, [], request)

    @staticmethod
    def request(
        version: str, request_id: str, invitation_id: str, label: str, did: str, acapy: bool
    ) -> dict[str, Any]:
        """A DID Exchange request as received: ACA-Py threads it, Credo asks for return route."""
        message: dict[str, Any] = {"@type": f"{DIDEXCHANGE}/{version}/request", "@id": request_id}
        if acapy:
            message["~thread"] = {"thid": request_id, "pthid": invitation_id}
        else:
            message["~thread"] = {"pthid": invitation_id}
            message["~transport"] = {"return_route": "all"}
        message.update({"label": label, "did": did})
        return message

    def did_doc_row(self, did: str, doc: dict[str, Any], index: int) -> _Row:
        return _Row("did_doc", self.ids.hex("did_doc", index), _aj(doc), {"did": did})

    def did_key_row(self, did: str, key: _Ed, index: int) -> _Row:
        return _Row(
            "did_key", self.ids.hex("did_key", index), key.verkey, {"did": did, "key": key.verkey}
        )

    def mediation(self, unit: _Unit, index: int, conn_id: str, state: str) -> list[_Ed]:
        """The mediation_requests record and, once granted, the keylist (forward_route)."""
        created = _moment(index, 0.3)
        value: dict[str, Any] = {
            "role": "server",
            "state": state,
            "connection_id": conn_id,
            "created_at": _acapy_time(created),
            "updated_at": _acapy_time(created + timedelta(milliseconds=4)),
            "routing_keys": [],
            "endpoint": None,
        }
        tags = {"connection_id": conn_id, "role": "server", "state": state}
        unit.rows.append(
            _Row("mediation_requests", self.ids.uuid("mediation", index), _aj(value), tags)
        )
        if state != "granted":
            return []
        recipients = [
            _Ed.of(self.ids.bytes("recipient", index, k)) for k in range(self.plan.recipient_keys)
        ]
        for k, recipient in enumerate(recipients):
            unit.rows.append(
                self.route(
                    self.ids.uuid("route", index, k),
                    conn_id,
                    recipient.verkey,
                    _moment(index, 2 + k),
                )
            )
        return recipients

    @staticmethod
    def route(
        name: str, conn_id: str | None, key: str, moment: datetime, wallet_id: str | None = None
    ) -> _Row:
        """A forward_route: as every ACA-Py record, the tags that are set, the timestamps,
        then the record's own fields (null ones too)."""
        tags = {
            "role": "server",
            "connection_id": conn_id,
            "recipient_key": key,
            "wallet_id": wallet_id,
        }
        present = {k: v for k, v in tags.items() if v is not None}
        stamp = _acapy_time(moment)
        value = {
            **present,
            "created_at": stamp,
            "updated_at": stamp,
            "connection_id": conn_id,
            "wallet_id": wallet_id,
            "recipient_key": key,
        }
        return _Row("forward_route", name, _aj(value), present)

    # noise

    def noise(self) -> Iterator[_Unit]:
        """Records an importer must skip or report, each with the reason it should give."""
        n = self.plan.connections
        yield self.unfinished(n, "error", "the handshake failed (state error)")
        yield self.unfinished(n + 1, "request", "the handshake never finished (state request)")
        unit, lost = self.client(n + 2, with_key=False)
        unit.connections = 0
        self.note(
            "connection",
            lost.id,
            f"our key {lost.our_verkey} of {lost.our_did} is not in the store",
        )
        yield unit
        relay = _Ed.of(self.ids.bytes("relay", n))
        name = self.ids.uuid("relay route", n)
        self.note("forward_route", name, "a multi-tenant relay route (wallet_id, no connection)")
        unit = _Unit([self.route(name, None, relay.verkey, _moment(n), self.ids.hex("wallet", n))])
        broken, odd = self.ids.uuid("broken", n), self.ids.uuid("odd", n)
        self.note("connection", broken, "the value is not JSON")
        self.note("mediation_requests", odd, "the value is JSON of an unknown shape (a list)")
        unit.rows += [
            _Row(
                "connection",
                broken,
                b'{"state": "active", "my_did": "7Xz',
                {"state": "active", "their_role": "invitee"},
            ),
            _Row(
                "mediation_requests",
                odd,
                _aj(["granted", broken]),
                {"state": "granted", "role": "server", "connection_id": broken},
            ),
        ]
        yield unit
        if "peer4" in self.plan.clients:  # a short did:peer:4 whose long form is not kept
            clients = self.plan.clients
            index = next(
                i
                for i in range(n + 3, n + 3 + len(clients))
                if clients[i % len(clients)] == "peer4"
            )
            unit, short = self.client(index)
            unit.connections = 0
            unit.rows = [r for r in unit.rows if r.category != "long_peer_did_4_doc"]
            self.note("connection", short.id, "the wallet's short did:peer:4 has no long form")
            yield unit

    def unfinished(self, index: int, state: str, reason: str) -> _Unit:
        """A connection that never became active (a request left unanswered, or failed)."""
        theirs = _Ed.of(self.ids.bytes("their", index))
        conn_id, request_id = self.ids.uuid("connection", index), self.ids.uuid("request", index)
        inviter, invitation_id = self.invitation_keys[0], self.ids.uuid("invitation", 0)
        did = sov_did(theirs.public)
        moment = _acapy_time(_moment(index))
        tags = {
            "invitation_key": inviter.verkey,
            "invitation_msg_id": invitation_id,
            "request_id": request_id,
            "state": state,
            "their_did": did,
            "their_role": "invitee",
        }
        value = {
            **tags,
            "created_at": moment,
            "updated_at": moment,
            **self.connection_defaults("once", f"client {index}", "didexchange/1.0"),
        }
        if state == "error":
            value["error_msg"] = "Connection request was abandoned"
        self.note("connection", conn_id, reason)
        return _Unit([_Row("connection", conn_id, _aj(value), tags)])

    def note(self, category: str, name: str, reason: str) -> None:
        self.truth.noise.append(NoiseTruth(category, name, reason))


# --- Credo --------------------------------------------------------------------------------


class _Credo:
    """Builds a Credo 0.5 or 0.6 mediator's records."""

    def __init__(self, plan: CredoPlan, truth: CredoTruth) -> None:
        self.plan, self.truth, self.ids = plan, truth, _Ids(plan.seed)
        self.v06 = plan.version == "0.6"
        self.routing = _Ed.of(self.ids.bytes("routing"))
        self.invitation_keys = [
            _Ed.of(self.ids.bytes("invitation", n)) for n in range(plan.invitations)
        ]
        self.queues = 0

    def units(self) -> Iterator[_Unit]:
        yield self.header()
        for index in range(self.plan.connections):
            unit, connection = self.client(index)
            if _kept(index, self.plan.truth_every):
                self.truth.connections.append(connection)
            yield unit
        if self.plan.noise:
            yield from self.noise()

    def key_name(self, kind: str, index: object, key: _Ed, legacy: bool = False) -> str:
        """0.5 names keys by base58 verkey; 0.6's KMS by a random UUID (`kmsKeyId`)."""
        return self.ids.uuid("kms", kind, index) if self.v06 and not legacy else key.verkey

    def header(self) -> _Unit:
        """The storage version, the routing key and the reusable invitations."""
        unit = _Unit()
        version = {
            "_tags": {},
            "metadata": {},
            "id": "STORAGE_VERSION_RECORD_ID",
            "createdAt": _credo_time(_moment(-200)),
        }
        version["storageVersion"] = CREDO_STORAGE_VERSION
        if not self.v06:
            version["updatedAt"] = version["createdAt"]  # 0.6.3 wrote none
        unit.rows.append(_Row("StorageVersionRecord", "STORAGE_VERSION_RECORD_ID", _cj(version)))
        name = self.key_name("routing", 0, self.routing, self.plan.legacy_routing)
        created = _credo_time(_moment(-199))
        legacy = not self.v06 or self.plan.legacy_routing
        entry: Any = (
            self.routing.verkey
            if legacy
            else {"routingKeyFingerprint": self.routing.multikey, "kmsKeyId": name}
        )
        routing = {
            "_tags": {},
            "metadata": {},
            "id": "MEDIATOR_ROUTING_RECORD",
            "createdAt": created,
            "routingKeys": [entry],
            "updatedAt": created,
        }
        tags = (
            None
            if not self.v06
            else credo_tags({"routingKeyFingerprints": [self.routing.multikey]})
        )
        unit.rows.append(
            _Row("MediatorRoutingRecord", "MEDIATOR_ROUTING_RECORD", _cj(routing), tags)
        )
        unit.keys.append(_KeyRow(name, self.routing.seed))
        self.truth.routing_keys.append(self.routing.truth(name))
        for n, key in enumerate(self.invitation_keys):
            self.invitation(unit, n, key)
        return unit

    def invitation(self, unit: _Unit, n: int, key: _Ed) -> None:
        """A reusable OutOfBandRecord (role sender, await-response), one service per endpoint."""
        record, msg_id, name = (
            self.ids.uuid("oob", n),
            self.ids.uuid("invitation", n),
            self.key_name("invitation", n, key),
        )
        created = _credo_time(_moment(-198 + n))
        invitation = {
            "@type": OOB_INVITATION,
            "@id": msg_id,
            "label": self.plan.label,
            "accept": ["didcomm/aip1", "didcomm/aip2;env=rfc19"],
            "handshake_protocols": [f"{DIDEXCHANGE}/1.1", "https://didcomm.org/connections/1.0"],
            "services": [
                {
                    "id": f"#inline-{i}",
                    "serviceEndpoint": endpoint,
                    "type": "did-communication",
                    "recipientKeys": [key.did_key],
                    "routingKeys": [],
                }
                for i, endpoint in enumerate(self.plan.endpoints)
            ],
        }
        value: dict[str, Any] = {
            "_tags": {"recipientKeyFingerprints": [key.multikey, key.multikey]},
            "metadata": {},
            "id": record,
            "createdAt": created,
            "outOfBandInvitation": invitation,
            "role": "sender",
            "state": "await-response",
            "autoAcceptConnection": True,
            "reusable": True,
        }
        if self.v06:
            inline = {"kmsKeyId": name, "recipientKeyFingerprint": key.multikey}
            value["invitationInlineServiceKeys"] = [inline for _ in self.plan.endpoints]
        value["updatedAt"] = created
        tags = {
            "role": "sender",
            "state": "await-response",
            "invitationId": msg_id,
            "threadId": msg_id,
            "recipientKeyFingerprints": [key.multikey],
        }
        unit.rows.append(_Row("OutOfBandRecord", record, _cj(value), credo_tags(tags)))
        unit.keys.append(_KeyRow(name, key.seed))
        self.truth.invitations.append(
            InvitationTruth(msg_id, key.truth(name), self.plan.label, invitation, record)
        )

    # each client

    def client(
        self, index: int, state: str = "completed", with_key: bool = True
    ) -> tuple[_Unit, ConnectionTruth]:
        kind = self.plan.clients[index % len(self.plan.clients)]
        legacy = index < self.plan.legacy_connections
        ours, theirs = _Ed.of(self.ids.bytes("our", index)), _Ed.of(self.ids.bytes("their", index))
        key_name = self.key_name("our", index, ours, legacy)
        n = index % len(self.invitation_keys)
        conn_id, thread, oob = (
            self.ids.uuid("connection", index),
            self.ids.uuid("request", index),
            self.ids.uuid("oob", n),
        )
        label = f"wallet-{index}" if kind == "peer1" else ""
        our_row, our_did = self.our_did(kind, ours, index, key_name, legacy)
        their_row, their_did = self.their_did(kind, theirs, index)
        did_keys = self.plan.did_key_every > 0 and index % self.plan.did_key_every == 0
        unit = _Unit(connections=1 if state == "completed" else 0)
        unit.rows += [
            their_row,
            our_row,
            self.connection(
                index, conn_id, state, our_did, their_did, label, thread, oob, did_keys
            ),
        ]
        if with_key:
            unit.keys.append(_KeyRow(key_name, ours.seed))
        mediation = _mediation_state(
            index, self.plan.requested, self.plan.denied, ("requested", "denied", "granted")
        )
        recipients = self.mediation(unit, index, conn_id, mediation)
        queued = self.queue(unit, index, conn_id, recipients)
        truth = ConnectionTruth(
            id=conn_id,
            client=kind,
            state=state,
            protocol=f"{DIDEXCHANGE}/1.x",
            their_label=label,
            their_did=their_did,
            their_verkey=theirs.verkey,
            their_seed=theirs.seed,
            their_endpoint=QUEUE_ENDPOINT,
            our_did=our_did,
            our_verkey=ours.verkey,
            our_seed=ours.seed,
            our_key_name=key_name,
            invitation_id=self.ids.uuid("invitation", n),
            created_at=_credo_time(_moment(index)),
            mediation_state=mediation,
            recipient_keys=tuple(r.verkey for r in recipients),
            recipient_seeds=tuple(r.seed for r in recipients),
            did_keys_in_keylist=did_keys,
            queued=queued,
        )
        return unit, truth

    def connection(
        self,
        index: int,
        conn_id: str,
        state: str,
        did: str,
        their: str,
        label: str,
        thread: str,
        oob: str,
        did_keys: bool,
    ) -> _Row:
        tags = {
            "did": did,
            "outOfBandId": oob,
            "role": "responder",
            "state": state,
            "theirDid": their,
            "threadId": thread,
        }
        inner = dict(tags)
        value: dict[str, Any] = {
            "_tags": inner,
            "metadata": {"_internal/useDidKeysForProtocol": USE_DID_KEYS} if did_keys else {},
            "connectionTypes": [],
            "previousDids": [],
            "previousTheirDids": [],
            "id": conn_id,
            "createdAt": _credo_time(_moment(index)),
            "did": did,
            "theirDid": their,
            "theirLabel": label,
            "state": state,
            "role": "responder",
            "autoAcceptConnection": True,
            "threadId": thread,
            "protocol": f"{DIDEXCHANGE}/1.x",
            "outOfBandId": oob,
            "updatedAt": _credo_time(_moment(index, 25)),
        }
        if state == "abandoned":
            value["errorMessage"] = "request-received: the request could not be processed"
        if state == "request-received":  # our DID comes with the response
            del value["did"], tags["did"], inner["did"]
        all_tags: dict[str, Any] = {
            **tags,
            "mediatorId": None,
            "invitationDid": None,
            "connectionTypes": [],
            "previousDids": [],
            "previousTheirDids": [],
        }
        return _Row("ConnectionRecord", conn_id, _cj(value), credo_tags(all_tags))

    def our_did(
        self, kind: str, key: _Ed, index: int, key_name: str, legacy: bool
    ) -> tuple[_Row, str]:
        """The DID we created: the requester's numalgo (did:peer:1 with its document, or a
        long did:peer:4 without), one service per endpoint; 0.6 lists the KMS key."""
        context = DID_V1 if self.v06 and not legacy else DID_V1_OLD
        if kind == "peer1":
            doc = credo_doc(key, self.plan.endpoints, context, controller=True)
            did = did_peer_1(doc)
            doc, short = with_id(did, doc), None
        else:
            did, short = did_peer_4(credo_doc(key, self.plan.endpoints, context, controller=False))
            doc = None
        keys = None
        if self.v06 and not legacy:
            keys = [{"didDocumentRelativeKeyId": f"#key-{k}", "kmsKeyId": key_name} for k in (1, 2)]
        row = self.did_record(index, "created", did, short, doc, key, keys, _moment(index, 0.02))
        return row, did

    def their_did(self, kind: str, key: _Ed, index: int) -> tuple[_Row, str]:
        """Their DID as received: a Credo 0.5 wallet's did:peer:1 with its document, or a
        0.6/0.7 wallet's long did:peer:4 (the DID is the document)."""
        if kind == "peer1":
            doc = credo_doc(key, [QUEUE_ENDPOINT], DID_V1_OLD, controller=True)
            did = did_peer_1(doc)
            row = self.did_record(
                index, "received", did, None, with_id(did, doc), key, None, _moment(index, -0.002)
            )
            return row, did
        did, short = did_peer_4(credo_doc(key, [QUEUE_ENDPOINT], DID_V1, controller=False))
        return self.did_record(
            index, "received", did, short, None, key, None, _moment(index, -0.002)
        ), did

    def did_record(
        self,
        index: int,
        role: str,
        did: str,
        short: str | None,
        doc: dict[str, Any] | None,
        key: _Ed,
        keys: list[dict[str, str]] | None,
        moment: datetime,
    ) -> _Row:
        fingerprints = [key.multikey] * (2 if role == "created" else 1)  # as Credo re-saves them
        inner: dict[str, Any] = {"recipientKeyFingerprints": fingerprints}
        if short:
            inner["alternativeDids"] = [short]
        name, created = self.ids.uuid("did", role, index), _credo_time(moment)
        value: dict[str, Any] = {
            "_tags": inner,
            "metadata": {},
            "id": name,
            "did": did,
            "role": role,
        }
        if doc is not None:
            value["didDocument"] = doc
        value["createdAt"] = created
        if keys is not None:
            value["keys"] = keys
        value["updatedAt"] = created
        tags = {
            "role": role,
            "method": "peer",
            "legacyUnqualifiedDid": None,
            "did": did,
            "methodSpecificIdentifier": did[len("did:peer:") :],
            "recipientKeyFingerprints": [key.multikey],
            "alternativeDids": [short] if short else None,
        }
        return _Row("DidRecord", name, _cj(value), credo_tags(tags))

    def mediation(self, unit: _Unit, index: int, conn_id: str, state: str) -> list[_Ed]:
        """MediationRecord(s), role MEDIATOR, keys base58; split per key for the first
        `split_mediations` connections, as acapy-tools' converter wrote them before #84."""
        recipients = []
        if state == "granted":
            recipients = [
                _Ed.of(self.ids.bytes("recipient", index, k))
                for k in range(self.plan.recipient_keys)
            ]
        granted_rank = index - self.plan.requested - self.plan.denied
        split = state == "granted" and granted_rank < self.plan.split_mediations
        groups = [[r] for r in recipients] if split else [recipients]
        for g, group in enumerate(groups):
            thread = self.ids.uuid("mediate", index, g)
            name = self.ids.uuid("mediation", index, g)
            inner = {
                "connectionId": conn_id,
                "role": "MEDIATOR",
                "state": state,
                "threadId": thread,
            }
            value = {
                "_tags": inner,
                "metadata": {},
                "id": name,
                "createdAt": _credo_time(_moment(index, 0.3 + g)),
                "connectionId": conn_id,
                "threadId": thread,
                "recipientKeys": [r.verkey for r in group],
                "routingKeys": [],
                "state": state,
                "role": "MEDIATOR",
                "updatedAt": _credo_time(_moment(index, 27 + g)),
            }
            tags = {**inner, "recipientKeys": [r.verkey for r in group]}
            unit.rows.append(_Row("MediationRecord", name, _cj(value), credo_tags(tags)))
        return recipients

    def queue(
        self, unit: _Unit, index: int, conn_id: str, recipients: list[_Ed]
    ) -> tuple[bytes, ...]:
        """Queued MessageRecords (didcomm-mediator-credo), written newest first so that only
        `createdAt` gives their order."""
        if not recipients or self.queues >= self.plan.queued:
            return ()
        self.queues += 1
        contact = _Ed.of(self.ids.bytes("contact", index))
        queued, rows = [], []
        for m in range(self.plan.messages):
            name = self.ids.uuid("message", index, m)
            text = {
                "@type": "https://didcomm.org/basicmessage/1.0/message",
                "@id": name,
                "content": f"queued {m} for {index}",
            }
            jwe = authcrypt(_cj(text).encode(), recipients[0].public, contact, self.ids, index, m)
            created = _credo_time(_moment(index, 60 + m))
            value = {
                "_tags": {},
                "metadata": {},
                "id": name,
                "createdAt": created,
                "connectionId": conn_id,
                "message": jwe,
                "updatedAt": created,
            }
            rows.append(_Row("MessageRecord", name, _cj(value), {"connectionId": conn_id}))
            queued.append(_cj(jwe).encode())
        unit.rows += reversed(rows)
        return tuple(queued)

    # noise

    def noise(self) -> Iterator[_Unit]:
        """Connections that are not usable, one whose key is gone, unreadable records."""
        n = self.plan.connections
        for offset, state, reason in (
            (0, "abandoned", "the handshake failed (state abandoned)"),
            (1, "request-received", "the handshake never finished (state request-received)"),
        ):
            unit, dead = self.client(n + offset, state)
            unit.rows = [r for r in unit.rows if r.category == "ConnectionRecord"]
            unit.keys = []
            self.truth.noise.append(NoiseTruth("ConnectionRecord", dead.id, reason))
            yield unit
        unit, lost = self.client(n + 2, with_key=False)
        unit.connections = 0
        reason = f"our key {lost.our_verkey} of {lost.our_did[:40]}… is not in the store"
        self.truth.noise.append(NoiseTruth("ConnectionRecord", lost.id, reason))
        broken, odd = self.ids.uuid("broken", n), self.ids.uuid("odd", n)
        self.truth.noise += [
            NoiseTruth("ConnectionRecord", broken, "the value is not JSON"),
            NoiseTruth("MediationRecord", odd, "the value is JSON of an unknown shape (a list)"),
        ]
        unit.rows += [
            _Row(
                "ConnectionRecord",
                broken,
                b'{"_tags":{},"metadata":{},"id":"',
                {"state": "completed", "role": "responder"},
            ),
            _Row(
                "MediationRecord",
                odd,
                _cj(["granted", broken]),
                {"state": "granted", "role": "MEDIATOR", "connectionId": broken},
            ),
        ]
        yield unit


# --- entry points -------------------------------------------------------------------------


def _check(clients: tuple[str, ...], known: tuple[str, ...], invitations: int, batch: int) -> None:
    """A plan's mistakes, refused before anything is written."""
    unknown = sorted(set(clients) - set(known))
    if not clients or unknown:
        raise ValueError(
            f"clients {', '.join(unknown) or '(none)'}: each one of {', '.join(known)}"
        )
    if invitations < 1 or batch < 1:
        raise ValueError("a mediator has at least one invitation, a transaction one connection")


def acapy_connections(plan: AcapyPlan, indices: Iterable[int]) -> list[ConnectionTruth]:
    """What `make_acapy_store(path, plan)` writes for the connections at `indices`, worked
    out again without a store: the plan decides every key."""
    truth = AcapyTruth(Path(), "", "", plan.key_method, "", plan.endpoints, [])
    builder = _Acapy(plan, truth)
    return [builder.client(index)[1] for index in indices]


async def make_acapy_store(path: Path, plan: AcapyPlan) -> AcapyTruth:
    """An ACA-Py 1.7 mediator's SQLite store at `path` (default profile unnamed, so Askar
    names it with a UUID as ACA-Py's), and what an importer must find in it."""
    _check(plan.clients, ("sov", "peer1", "peer4", "peer2"), plan.invitations, plan.batch)
    ids = _Ids(plan.seed)
    pass_key = _pass_key(plan.pass_key, plan.key_method, ids)
    started = time.perf_counter()
    store = await _provision(path, plan.key_method, pass_key, None)
    try:
        profile = str(await store.get_default_profile())
        truth = AcapyTruth(
            path, f"sqlite://{path}", pass_key, plan.key_method, profile, plan.endpoints, []
        )
        builder = _Acapy(plan, truth)
        await _write(store, builder.units(), truth, plan.batch, plan.connections, plan.progress)
    finally:
        await store.close()
    truth.seconds = time.perf_counter() - started
    return truth


async def make_credo_store(path: Path, plan: CredoPlan) -> CredoTruth:
    """A Credo 0.5 or 0.6 mediator's SQLite store at `path` (default profile named after the
    store id), and what an importer must find in it."""
    _check(plan.clients, ("peer1", "peer4"), plan.invitations, plan.batch)
    if plan.version not in ("0.5", "0.6"):
        raise ValueError(f"Credo store format {plan.version!r}: 0.5 or 0.6")
    if plan.version != "0.6" and (plan.legacy_connections or plan.legacy_routing):
        raise ValueError("legacy_connections and legacy_routing describe a 0.6 store")
    ids = _Ids(plan.seed)
    pass_key = _pass_key(plan.pass_key, plan.key_method, ids)
    started = time.perf_counter()
    store = await _provision(path, plan.key_method, pass_key, plan.store_id)
    try:
        truth = CredoTruth(
            path,
            f"sqlite://{path}",
            pass_key,
            plan.key_method,
            plan.store_id,
            plan.endpoints,
            [],
            version=plan.version,
            store_id=plan.store_id,
        )
        await _write(
            store, _Credo(plan, truth).units(), truth, plan.batch, plan.connections, plan.progress
        )
    finally:
        await store.close()
    truth.seconds = time.perf_counter() - started
    return truth


# --- command line -------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.support.askar_stores",
        description="Write a synthetic ACA-Py or Credo mediator store (docs/import-sources.md).",
    )
    parser.add_argument("source", choices=("acapy", "credo"))
    parser.add_argument(
        "--connections", type=int, default=10, help="client connections (default 10)"
    )
    parser.add_argument("--out", type=Path, required=True, help="the SQLite file to write")
    parser.add_argument(
        "--key",
        default=None,
        help="pass key (default: raw key from the seed, or mediator-wallet-key)",
    )
    parser.add_argument(
        "--key-method",
        default="kdf:argon2i:mod",
        choices=KEY_METHODS,
        help="(default kdf:argon2i:mod)",
    )
    parser.add_argument(
        "--clients",
        default=None,
        help="client kinds, cycled (acapy: sov,peer1,peer4,peer2; credo: peer1,peer4)",
    )
    parser.add_argument(
        "--recipient-keys", type=int, default=1, help="keys per granted connection (default 1)"
    )
    parser.add_argument(
        "--version", default="0.5", choices=("0.5", "0.6"), help="Credo store format (default 0.5)"
    )
    parser.add_argument(
        "--queued", type=int, default=0, help="Credo: connections with queued messages"
    )
    parser.add_argument("--noise", action="store_true", help="add records an importer must skip")
    parser.add_argument(
        "--no-requests", action="store_true", help="ACA-Py: leave out connection_request records"
    )
    parser.add_argument(
        "--batch", type=int, default=5000, help="connections per transaction (default 5000)"
    )
    parser.add_argument(
        "--seed", default=None, help="seed of keys and ids (default: the source's name)"
    )
    return parser


def _report(started: float) -> Progress:
    def progress(done: int, total: int) -> None:
        rate = done / max(time.perf_counter() - started, 1e-9)
        print(f"{done}/{total} connections, {rate:,.0f}/s", file=sys.stderr, flush=True)

    return progress


async def _main(args: argparse.Namespace) -> StoreTruth:
    progress = _report(time.perf_counter())
    common: dict[str, Any] = {
        "connections": args.connections,
        "recipient_keys": args.recipient_keys,
        "noise": args.noise,
        "key_method": args.key_method,
        "pass_key": args.key,
        "batch": args.batch,
        "truth_every": 0,
        "progress": progress,
        "seed": args.seed or args.source,
    }
    if args.clients:
        common["clients"] = tuple(args.clients.split(","))
    if args.source == "acapy":
        return await make_acapy_store(args.out, AcapyPlan(requests=not args.no_requests, **common))
    return await make_credo_store(
        args.out, CredoPlan(version=args.version, queued=args.queued, **common)
    )


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    truth = asyncio.run(_main(args))
    size = sum(p.stat().st_size for p in args.out.parent.glob(args.out.name + "*"))
    rate = truth.connection_count / truth.seconds if truth.seconds else 0.0
    print(
        f"{truth.connection_count} connections in {truth.seconds:.1f} s ({rate:,.0f}/s), "
        f"{size / 1e6:.1f} MB, profile {truth.profile}, key method {truth.key_method}",
        file=sys.stderr,
    )
    print(f"pass key: {truth.pass_key}", file=sys.stderr)
    print(args.out)


if __name__ == "__main__":
    main()
