"""The synthetic old-mediator stores (bench/support/askar_stores.py), opened with aries-askar
as the importer opens them: every record where docs/import-sources.md says it is, each key
fetchable by the name the records give and equal to the truth, every DID resolving to the
keys the truth names."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import base58
import pytest
from aries_askar import KeyAlg, Store
from aries_askar.error import AskarError

from bench.support.askar_stores import (
    AcapyPlan,
    AcapyTruth,
    ConnectionTruth,
    CredoPlan,
    CredoTruth,
    credo_tags,
    main,
    make_acapy_store,
    make_credo_store,
)
from mediator.didcomm.did_peer import check_numalgo1, resolve, short_numalgo4
from mediator.didcomm.envelope import unpack
from mediator.didcomm.keys import KeyPair, b58decode, did_key_to_verkey

ACAPY_PLAN = AcapyPlan(
    connections=10,  # each of the four client kinds, twice or more
    recipient_keys=2,
    invitations=2,
    requested=1,
    denied=1,
    noise=True,
    key_method="raw",
)


class Opened:
    """A generated store opened read-write by the test (it is a throw-away copy)."""

    def __init__(self, store: Any, profile: str) -> None:
        self.store, self.profile = store, profile

    async def all(self, category: str, tags: dict[str, Any] | None = None) -> list[Any]:
        async with self.store.session(self.profile) as session:
            return list(await session.fetch_all(category, tags))

    async def one(self, category: str, name: str) -> Any:
        async with self.store.session(self.profile) as session:
            entry = await session.fetch(category, name)
        assert entry is not None, f"no {category} named {name}"
        return entry

    async def key(self, name: str) -> Any:
        async with self.store.session(self.profile) as session:
            return await session.fetch_key(name)


async def opened(truth: AcapyTruth | CredoTruth) -> AsyncIterator[Opened]:
    store = await Store.open(truth.uri, None, truth.pass_key)
    try:
        yield Opened(store, await store.get_default_profile())
    finally:
        await store.close()


def value(entry: Any) -> Any:
    return json.loads(bytes(entry.value))


def service_key(doc: dict[str, Any]) -> str:
    """The base58 key of the first DIDComm service of a document (as its holder encrypts)."""
    service = next(s for s in doc["service"] if s["type"] in ("did-communication", "IndyAgent"))
    ref = service["recipientKeys"][0]
    if not ref.startswith("#"):
        return str(ref)
    methods = doc.get("verificationMethod", []) + doc.get("authentication", [])
    method = next(m for m in methods if isinstance(m, dict) and m["id"] == ref)
    if "publicKeyBase58" in method:
        return str(method["publicKeyBase58"])
    return did_key_to_verkey("did:key:" + method["publicKeyMultibase"])


async def assert_key(db: Opened, name: str, seed: bytes, verkey: str) -> Any:
    """The key named `name` exists, holds `seed` and is the Ed25519 key `verkey`."""
    entry = await db.key(name)
    assert entry is not None, f"no key named {name}"
    assert entry.key.algorithm == KeyAlg.ED25519
    assert bytes(entry.key.get_secret_bytes()) == seed
    assert bytes(entry.key.get_public_bytes()) == b58decode(verkey)
    return entry


# --- ACA-Py -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def acapy(tmp_path_factory: pytest.TempPathFactory) -> AcapyTruth:
    return await make_acapy_store(tmp_path_factory.mktemp("acapy") / "sqlite.db", ACAPY_PLAN)


@pytest.fixture
async def acapy_db(acapy: AcapyTruth) -> AsyncIterator[Opened]:
    async for db in opened(acapy):
        yield db


async def test_acapy_store_opens_as_acapy_leaves_it(acapy: AcapyTruth, acapy_db: Opened) -> None:
    # ACA-Py provisions without a profile name: Askar names the default one with a UUID4.
    assert uuid.UUID(acapy_db.profile).version == 4
    assert acapy_db.profile == acapy.profile
    assert await acapy_db.store.list_profiles() == [acapy.profile]
    assert acapy.connection_count == len(acapy.connections) == ACAPY_PLAN.connections
    for category, count in acapy.items.items():
        assert len(await acapy_db.all(category)) == count, category
    [version] = await acapy_db.all("acapy_version")
    assert bytes(version.value) == b"v1.7.0"
    [storage] = await acapy_db.all("acapy_storage_type")
    assert bytes(storage.value) == b"askar"


async def test_acapy_routing_did(acapy: AcapyTruth, acapy_db: Opened) -> None:
    [routing] = acapy.routing_keys
    record = await acapy_db.one("routing_did", "routing_did")
    assert record.tags == {"did": acapy.routing_did}
    assert value(record) == {"verkey": routing.verkey, "metadata": {"type": "routing_did"}}
    did = await acapy_db.one("did", acapy.routing_did)
    assert value(did)["method"] == "sov" and value(did)["verkey"] == routing.verkey
    assert value(did)["metadata"] == {"type": "routing_did"}
    assert b58decode(routing.verkey)[:16] == b58decode(acapy.routing_did)
    key = await assert_key(acapy_db, routing.name, routing.seed, routing.verkey)
    assert json.loads(key.metadata) == {"type": "routing_did"} and not key.tags


async def test_acapy_invitations(acapy: AcapyTruth, acapy_db: Opened) -> None:
    assert len(acapy.invitations) == ACAPY_PLAN.invitations
    templates = await acapy_db.all("connection", {"state": "invitation"})
    assert {t.name for t in templates} == {i.record for i in acapy.invitations}
    for invitation in acapy.invitations:
        template = value(await acapy_db.one("connection", invitation.record))
        assert template["invitation_mode"] == "multi"
        assert template["invitation_key"] == invitation.key.verkey
        assert template["invitation_msg_id"] == invitation.id
        assert "my_did" not in template and "their_did" not in template
        [stored] = await acapy_db.all("connection_invitation", {"connection_id": invitation.record})
        assert value(stored) == invitation.invitation
        assert invitation.invitation["@id"] == invitation.id
        [service] = invitation.invitation["services"]
        assert service["serviceEndpoint"] == acapy.endpoints[0]
        did_key, fragment = service["recipientKeys"][0].split("#")
        assert did_key_to_verkey(did_key) == invitation.key.verkey and did_key.endswith(fragment)
        [oob] = await acapy_db.all("oob_record", {"invi_msg_id": invitation.id})
        assert value(oob)["invitation"] == invitation.invitation
        assert oob.tags["our_recipient_key"] == invitation.key.verkey
        assert value(oob)["multi_use"] is True and value(oob)["state"] == "await-response"
        key = await assert_key(
            acapy_db, invitation.key.name, invitation.key.seed, invitation.key.verkey
        )
        assert key.tags == {"multikey": "z" + service["recipientKeys"][0].split("#z")[1]}


async def test_acapy_connections_point_to_their_keys(acapy: AcapyTruth, acapy_db: Opened) -> None:
    assert {c.client for c in acapy.connections} == {"sov", "peer1", "peer2", "peer4"}
    invitation_ids = {i.id: i.key.verkey for i in acapy.invitations}
    for conn in acapy.connections:
        record = await acapy_db.one("connection", conn.id)
        assert record.tags["state"] == "active" and record.tags["their_role"] == "invitee"
        assert record.tags["my_did"] == conn.our_did
        assert record.tags["their_did"] == conn.their_did
        assert record.tags["invitation_key"] == invitation_ids[conn.invitation_id]
        assert value(record)["connection_protocol"] == conn.protocol
        assert value(record)["their_label"] == conn.their_label
        # Our DID -> did record -> its verkey names the Askar key.
        did = value(await acapy_db.one("did", conn.our_did))
        assert did["verkey"] == conn.our_verkey == conn.our_key_name
        key = await assert_key(acapy_db, did["verkey"], conn.our_seed, conn.our_verkey)
        await check_our_did(acapy_db, conn, key)
        assert await their_acapy_key(acapy_db, conn) == conn.their_verkey
        [did_key] = await acapy_db.all("did_key", {"key": conn.their_verkey})
        assert bytes(did_key.value).decode() == conn.their_verkey


async def check_our_did(db: Opened, conn: ConnectionTruth, key: Any) -> None:
    """Our DID in the shape ACA-Py answers each kind of requester with."""
    if conn.client == "sov":
        assert b58decode(conn.our_did) == b58decode(conn.our_verkey)[:16]
        assert not key.tags
    elif conn.client == "peer2":
        doc = resolve(conn.our_did)
        assert service_key(doc) == conn.our_verkey
        assert (doc["authentication"], doc["keyAgreement"]) == (["#key-1"], ["#key-2"])
        assert key.tags["kid"] == conn.our_did + "#key-1"
        agreement = next(m for m in doc["verificationMethod"] if m["id"] == "#key-2")
        x_key = await db.key(_b58_of_multikey(agreement["publicKeyMultibase"]))
        assert x_key.key.algorithm == KeyAlg.X25519 and x_key.tags["kid"] == conn.our_did + "#key-2"
        assert (
            "z" + _b58(b"\xec\x01" + bytes(x_key.key.get_public_bytes()))
            == agreement["publicKeyMultibase"]
        )
    else:  # did:peer:4, long and short both recorded, the connection on the short
        [long] = [
            d for d in await db.all("did", {"verkey": conn.our_verkey}) if d.name != conn.our_did
        ]
        assert short_numalgo4(long.name) == conn.our_did
        assert service_key(resolve(long.name)) == conn.our_verkey
        assert key.tags == {"multikey": _multikey(conn.our_verkey)}


async def their_acapy_key(db: Opened, conn: ConnectionTruth) -> str:
    """Their DIDComm key, found the way an importer must for each kind of DID."""
    if conn.client in ("sov", "peer1"):
        [record] = await db.all("did_doc", {"did": conn.their_did})
        doc = value(record)
        if conn.client == "peer1":
            check_numalgo1(conn.their_did, bytes(record.value), doc)
            assert doc["id"] == conn.their_did
        else:
            assert doc["id"] == "did:sov:" + conn.their_did
        assert service_key(doc)  # the endpoint is theirs
        assert doc["service"][0]["serviceEndpoint"] == conn.their_endpoint
        return service_key(doc)
    if conn.client == "peer4":
        long = bytes((await db.one("long_peer_did_4_doc", conn.their_did)).value).decode()
        assert short_numalgo4(long) == conn.their_did
        [did_key] = await db.all("did_key", {"did": long})  # the long form, as sent
        assert did_key.tags["key"] == service_key(resolve(long))
        return service_key(resolve(long))
    return service_key(resolve(conn.their_did))


async def test_acapy_mediation_and_keylists(acapy: AcapyTruth, acapy_db: Opened) -> None:
    states = sorted(str(c.mediation_state) for c in acapy.connections)
    assert states == ["denied", *["granted"] * 8, "request"]
    for conn in acapy.connections:
        [mediation] = await acapy_db.all("mediation_requests", {"connection_id": conn.id})
        assert mediation.tags == {
            "connection_id": conn.id,
            "role": "server",
            "state": conn.mediation_state,
        }
        assert value(mediation)["routing_keys"] == [] and value(mediation)["endpoint"] is None
        routes = await acapy_db.all("forward_route", {"connection_id": conn.id, "role": "server"})
        assert sorted(r.tags["recipient_key"] for r in routes) == sorted(conn.recipient_keys)
        assert all(value(r)["wallet_id"] is None for r in routes)
        expected = ACAPY_PLAN.recipient_keys if conn.mediation_state == "granted" else 0
        assert len(conn.recipient_keys) == expected
        for key, seed in zip(conn.recipient_keys, conn.recipient_seeds, strict=True):
            assert KeyPair.from_seed(seed).verkey_b58 == key


async def test_acapy_noise_is_there_and_explained(acapy: AcapyTruth, acapy_db: Opened) -> None:
    reasons = {n.name: n for n in acapy.noise}
    assert len(reasons) == 7
    for noise in acapy.noise:
        await acapy_db.one(noise.category, noise.name)
    states = {
        n.name: (await acapy_db.one("connection", n.name)).tags.get("state")
        for n in acapy.noise
        if n.category == "connection"
    }
    assert sorted(s for s in states.values() if s) == [
        "active", "active", "active", "error", "request"
    ]  # fmt: skip
    [lost] = [n for n in acapy.noise if "not in the store" in n.reason]
    record = value(await acapy_db.one("connection", lost.name))
    did = value(await acapy_db.one("did", record["my_did"]))
    assert await acapy_db.key(did["verkey"]) is None and did["verkey"] in lost.reason
    [relay] = [n for n in acapy.noise if n.category == "forward_route"]
    route = await acapy_db.one("forward_route", relay.name)
    assert "connection_id" not in route.tags and route.tags["wallet_id"]
    [broken] = [n for n in acapy.noise if "not JSON" in n.reason]
    with pytest.raises(ValueError):
        value(await acapy_db.one("connection", broken.name))
    [odd] = [n for n in acapy.noise if "unknown shape" in n.reason]
    assert isinstance(value(await acapy_db.one(odd.category, odd.name)), list)
    [short] = [n for n in acapy.noise if "long form" in n.reason]
    their_did = value(await acapy_db.one("connection", short.name))["their_did"]
    assert their_did.startswith("did:peer:4") and their_did.count(":") == 2
    assert await acapy_db.all("long_peer_did_4_doc", {}) != []  # the others' are kept
    with pytest.raises(AssertionError, match="no long_peer_did_4_doc named"):
        await acapy_db.one("long_peer_did_4_doc", their_did)


async def test_the_same_plan_makes_the_same_store(tmp_path: Path, acapy: AcapyTruth) -> None:
    again = await make_acapy_store(tmp_path / "again.db", ACAPY_PLAN)
    assert again.connections == acapy.connections
    assert again.routing_keys == acapy.routing_keys and again.pass_key == acapy.pass_key
    other = await make_acapy_store(
        tmp_path / "other.db", AcapyPlan(connections=1, key_method="raw", seed="x")
    )
    assert other.connections[0].our_seed != acapy.connections[0].our_seed


async def test_a_kdf_store_and_sampled_truths(tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    plan = AcapyPlan(
        connections=7,
        clients=("sov",),
        key_method="kdf:argon2i:int",
        batch=3,
        truth_every=3,
        progress=lambda d, t: seen.append((d, t)),
    )
    truth = await make_acapy_store(tmp_path / "kdf.db", plan)
    assert [c.id for c in truth.connections] == [
        c.id
        for c in (
            await make_acapy_store(
                tmp_path / "all.db", AcapyPlan(connections=7, clients=("sov",), key_method="raw")
            )
        ).connections
    ][::3]
    # Three transactions: the header and two connections, three, two more.
    assert seen == [(2, 7), (5, 7), (7, 7)]
    with pytest.raises(AskarError, match="mismatch"):
        await Store.open(truth.uri, "raw", truth.pass_key)
    store = await Store.open(truth.uri, "kdf:argon2i:int", truth.pass_key)
    await store.close()


def test_the_command_line_writes_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli.db"
    main(
        [
            "credo",
            "--connections",
            "3",
            "--out",
            str(out),
            "--key-method",
            "raw",
            "--version",
            "0.6",
        ]
    )
    captured = capsys.readouterr()
    assert captured.out.strip() == str(out)
    assert "3/3 connections" in captured.err and "pass key: " in captured.err
    assert out.stat().st_size > 0


# --- Credo --------------------------------------------------------------------------------


def credo_plan(version: str) -> CredoPlan:
    return CredoPlan(
        version="0.6" if version == "0.6" else "0.5",
        connections=8,
        recipient_keys=2,
        requested=1,
        queued=2,
        messages=3,
        split_mediations=1,
        legacy_connections=2 if version == "0.6" else 0,
        noise=True,
        key_method="raw",
    )


@pytest.fixture(scope="module", params=["0.5", "0.6"])
async def credo(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> CredoTruth:
    path = tmp_path_factory.mktemp("credo") / "sqlite.db"
    return await make_credo_store(path, credo_plan(request.param))


@pytest.fixture
async def credo_db(credo: CredoTruth) -> AsyncIterator[Opened]:
    async for db in opened(credo):
        yield db


async def test_credo_store_is_named_after_its_id(credo: CredoTruth, credo_db: Opened) -> None:
    assert credo_db.profile == credo.store_id == credo.profile
    assert await credo_db.store.list_profiles() == [credo.store_id]
    [version] = await credo_db.all("StorageVersionRecord")
    assert version.name == "STORAGE_VERSION_RECORD_ID" and value(version)["storageVersion"] == "0.5"
    assert ("updatedAt" in value(version)) == (credo.version == "0.5")  # as 0.5.19 and 0.6.3 wrote
    for category, count in credo.items.items():
        assert len(await credo_db.all(category)) == count, category


async def test_credo_routing_key(credo: CredoTruth, credo_db: Opened) -> None:
    [routing] = credo.routing_keys
    record = await credo_db.one("MediatorRoutingRecord", "MEDIATOR_ROUTING_RECORD")
    [entry] = value(record)["routingKeys"]
    if credo.version == "0.5":
        assert entry == routing.verkey == routing.name and not record.tags
    else:
        assert entry == {
            "routingKeyFingerprint": _multikey(routing.verkey),
            "kmsKeyId": routing.name,
        }
        assert uuid.UUID(routing.name).version == 4
        assert record.tags == {f"routingKeyFingerprints:{_multikey(routing.verkey)}": "1"}
    key = await assert_key(credo_db, routing.name, routing.seed, routing.verkey)
    assert key.metadata == "" and not key.tags


async def test_credo_invitation(credo: CredoTruth, credo_db: Opened) -> None:
    [invitation] = credo.invitations
    record = await credo_db.one("OutOfBandRecord", invitation.record)
    stored = value(record)
    assert stored["outOfBandInvitation"] == invitation.invitation
    assert (stored["role"], stored["state"], stored["reusable"]) == (
        "sender",
        "await-response",
        True,
    )
    services = invitation.invitation["services"]
    assert [s["serviceEndpoint"] for s in services] == list(credo.endpoints)
    assert {did_key_to_verkey(s["recipientKeys"][0]) for s in services} == {invitation.key.verkey}
    fingerprint = _multikey(invitation.key.verkey)
    assert record.tags == {
        "role": "sender",
        "state": "await-response",
        "invitationId": invitation.id,
        "threadId": invitation.id,
        f"recipientKeyFingerprints:{fingerprint}": "1",
    }
    if credo.version == "0.6":
        inline = {"kmsKeyId": invitation.key.name, "recipientKeyFingerprint": fingerprint}
        assert stored["invitationInlineServiceKeys"] == [inline] * len(services)
    else:
        assert (
            "invitationInlineServiceKeys" not in stored
            and invitation.key.name == invitation.key.verkey
        )
    await assert_key(credo_db, invitation.key.name, invitation.key.seed, invitation.key.verkey)


async def test_credo_connections_point_to_their_keys(credo: CredoTruth, credo_db: Opened) -> None:
    assert {c.client for c in credo.connections} == {"peer1", "peer4"}
    for n, conn in enumerate(credo.connections):
        record = await credo_db.one("ConnectionRecord", conn.id)
        stored = value(record)
        assert (stored["did"], stored["theirDid"]) == (conn.our_did, conn.their_did)
        assert (record.tags["state"], record.tags["role"]) == ("completed", "responder")
        assert stored["outOfBandId"] == credo.invitations[0].record
        assert stored["protocol"] == "https://didcomm.org/didexchange/1.x"
        did_keys = "_internal/useDidKeysForProtocol" in stored["metadata"]
        assert did_keys == conn.did_keys_in_keylist
        [ours] = await credo_db.all("DidRecord", {"did": conn.our_did, "role": "created"})
        legacy = credo.version == "0.5" or n < 2
        if legacy:
            assert "keys" not in value(ours) and conn.our_key_name == conn.our_verkey
        else:
            assert [k["kmsKeyId"] for k in value(ours)["keys"]] == [conn.our_key_name] * 2
        await assert_key(credo_db, conn.our_key_name, conn.our_seed, conn.our_verkey)
        assert credo_did_key(ours, conn.our_did) == conn.our_verkey
        assert ours.tags[f"recipientKeyFingerprints:{_multikey(conn.our_verkey)}"] == "1"
        [theirs] = await credo_db.all("DidRecord", {"did": conn.their_did, "role": "received"})
        assert credo_did_key(theirs, conn.their_did) == conn.their_verkey
        if conn.client == "peer4":
            short = short_numalgo4(conn.their_did)
            assert theirs.tags[f"alternativeDids:{short}"] == "1"
            assert [
                t.name for t in await credo_db.all("DidRecord", {f"alternativeDids:{short}": "1"})
            ] == [theirs.name]


def credo_did_key(record: Any, did: str) -> str:
    """The DIDComm key of a DidRecord: from its document (did:peer:1, hash checked) or
    from the long did:peer:4 itself."""
    stored = value(record)
    if did.startswith("did:peer:1"):
        doc = stored["didDocument"]
        check_numalgo1(did, json.dumps(doc).encode(), doc)
        return service_key(doc)
    assert "didDocument" not in stored
    return service_key(resolve(did))


async def test_credo_mediation_records_and_tag_encoding(
    credo: CredoTruth, credo_db: Opened
) -> None:
    for conn in credo.connections:
        records = await credo_db.all("MediationRecord", {"connectionId": conn.id})
        assert {r.tags["state"] for r in records} == {conn.mediation_state}
        assert all(r.tags["role"] == "MEDIATOR" for r in records)
        keys = [k for r in records for k in value(r)["recipientKeys"]]
        assert sorted(keys) == sorted(conn.recipient_keys)
        for key in conn.recipient_keys:  # Credo's forward lookup: tag recipientKeys:<base58>
            [found] = await credo_db.all("MediationRecord", {f"recipientKeys:{key}": "1"})
            assert found.tags["connectionId"] == conn.id
    assert credo.connections[0].mediation_state == "requested"
    assert credo.connections[0].recipient_keys == ()
    # The first granted connection's keys are split one per record (the old converter).
    first = credo.connections[1]
    assert len(await credo_db.all("MediationRecord", {"connectionId": first.id})) == 2


def test_credo_tag_encoding() -> None:
    assert credo_tags(
        {
            "b": True,
            "f": False,
            "one": "1",
            "zero": "0",
            "s": "x",
            "n": None,
            "a": ["k", "l"],
            "e": [],
        }
    ) == {
        "b": "1",
        "f": "0",
        "one": "n__1",
        "zero": "n__0",
        "s": "x",
        "a:k": "1",
        "a:l": "1",
    }


async def test_credo_queued_messages_open_with_the_clients_key(
    credo: CredoTruth, credo_db: Opened
) -> None:
    queued = [c for c in credo.connections if c.queued]
    assert len(queued) == 2 and all(len(c.queued) == 3 for c in queued)
    for conn in queued:
        records = await credo_db.all("MessageRecord", {"connectionId": conn.id})
        ordered = sorted(records, key=lambda r: value(r)["createdAt"])
        stamps = [value(r)["createdAt"] for r in ordered]
        assert len(set(stamps)) == len(stamps)  # createdAt alone orders them
        assert [
            json.dumps(value(r)["message"], separators=(",", ":")).encode() for r in ordered
        ] == list(conn.queued)
        recipient = KeyPair.from_seed(conn.recipient_seeds[0])
        keys = {recipient.verkey_b58: recipient}
        for m, jwe in enumerate(conn.queued):
            opened_message = unpack(jwe, keys.get)
            assert (
                json.loads(opened_message.message)["content"]
                == f"queued {m} for {credo.connections.index(conn)}"
            )
            assert opened_message.sender_verkey is not None
    others = {c.id for c in credo.connections if not c.queued}
    assert not [r for r in await credo_db.all("MessageRecord") if r.tags["connectionId"] in others]


async def test_credo_noise(credo: CredoTruth, credo_db: Opened) -> None:
    assert len(credo.noise) == 5
    states = []
    for noise in credo.noise:
        record = await credo_db.one(noise.category, noise.name)
        states.append(record.tags.get("state"))
    assert states == ["abandoned", "request-received", "completed", "completed", "granted"]
    unanswered = await credo_db.one("ConnectionRecord", credo.noise[1].name)
    assert "did" not in unanswered.tags and "did" not in value(unanswered)  # ours comes later
    lost = value(await credo_db.one("ConnectionRecord", credo.noise[2].name))
    [did] = await credo_db.all("DidRecord", {"did": lost["did"], "role": "created"})
    assert credo_did_key(did, lost["did"]) in credo.noise[2].reason
    async with credo_db.store.session(credo_db.profile) as session:
        held = {bytes(k.key.get_public_bytes()) for k in await session.fetch_all_keys()}
    assert b58decode(credo_did_key(did, lost["did"])) not in held
    assert len(held) == credo.keys
    with pytest.raises(ValueError):
        value(await credo_db.one("ConnectionRecord", credo.noise[3].name))


# --- helpers ------------------------------------------------------------------------------


def _b58(data: bytes) -> str:
    return base58.b58encode(data).decode()


def _multikey(verkey: str) -> str:
    return "z" + _b58(b"\xed\x01" + b58decode(verkey))


def _b58_of_multikey(multikey: str) -> str:
    return _b58(base58.b58decode(multikey[1:])[2:])


async def test_a_plan_with_unknown_clients_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="peer3"):
        await make_acapy_store(tmp_path / "a.db", AcapyPlan(clients=("sov", "peer3")))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sov"):
        await make_credo_store(tmp_path / "c.db", CredoPlan(clients=("sov",)))  # type: ignore[arg-type]
    assert not (tmp_path / "a.db").exists() and not (tmp_path / "c.db").exists()
