"""`mediator import`, fast tier: stores of ACA-Py and Credo mediators in their records' real
format (bench/support/askar_stores.py makes them with aries-askar), imported into the
session's Redis, then served by the app in process to the wallets they held, as the wallets
would speak to it: the same keys, the same routing key, the same invitation.

The import into an empty Redis through the command (its refusal of another mediator's Redis
included), and with real old mediators and real wallets, are the full tier's
(tests/test_import_command.py, tests/interop/test_import_*.py).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.support.askar_stores import (
    AcapyPlan,
    AcapyTruth,
    ConnectionTruth,
    CredoPlan,
    CredoTruth,
    make_acapy_store,
    make_credo_store,
)
from mediator.client import Sender
from mediator.didcomm.keys import KeyPair
from mediator.engine import Engine, keys
from mediator.engine.scripts import Scripts
from mediator.engine.snapshot import PageQueue, SnapshotPage, page_call
from mediator.errors import ImportRefused
from mediator.imports.acapy import AcapyReader
from mediator.imports.credo import CredoReader
from mediator.imports.model import Source
from mediator.imports.passes import Passes
from mediator.imports.run import Reader, import_into
from mediator.imports.source import SourceStore
from mediator.imports.writer import Target, Writer
from mediator.mediation import record as rec
from mediator.mediation.identity import load_identity
from mediator.mediation.imported import Sealer
from mediator.mediation.keymaps import raw_key
from mediator.mediation.mailbox import defaults as mailbox_defaults
from mediator.settings import Settings
from mediator.storage.clients import RedisClient
from tests.didcomm_peer import ENVELOPE, Peer, attachments, connected_peer, message
from tests.inprocess import AppNode

pytestmark = pytest.mark.topology


@dataclass
class Imported:
    truth: AcapyTruth | CredoTruth
    source: Source


async def _target(redis: RedisClient) -> Target:
    identity = await load_identity(redis, "")  # the session's nodes' identity
    engine = Engine(redis, defaults={keys.DIDCOMM_NAMESPACE: mailbox_defaults(Settings.of().queue)})
    seconds, micros = await redis.time()
    return Target(redis, engine, Sealer(identity), mailbox_defaults(Settings.of().queue),
                  int(seconds) * 1000 + int(micros) // 1000)  # fmt: skip


def _reader(store: SourceStore, truth: AcapyTruth | CredoTruth, passes: Passes) -> Reader:
    if isinstance(truth, AcapyTruth):
        return AcapyReader(store, passes)
    return CredoReader(store, passes=passes)


async def _import(
    redis: RedisClient, truth: AcapyTruth | CredoTruth, *, dry_run: bool = False, workers: int = 0
) -> Source:
    """`truth`'s store imported into `redis`; its index passes in `workers` processes."""
    store = await SourceStore.open(truth.uri, truth.pass_key, truth.key_method)
    passes = Passes(store, workers)
    try:
        reader = _reader(store, truth, passes)
        source = await reader.mediator()
        writer = Writer(await _target(redis), source.report, dry_run=dry_run)
        await import_into(writer, reader, source)
    finally:
        await passes.close()
        await store.close()
    return source


@pytest.fixture(scope="module")
async def acapy(
    tmp_path_factory: pytest.TempPathFactory, module_redis: RedisClient
) -> AsyncIterator[Imported]:
    """An ACA-Py 1.7 mediator's store with every kind of wallet it serves, and records an
    importer must skip, imported once; what it imported is forgotten after the module (the
    session's other apps must not start as that mediator)."""
    path = tmp_path_factory.mktemp("acapy") / "sqlite.db"
    plan = AcapyPlan(
        connections=12, recipient_keys=2, invitations=2, requested=1, denied=1, noise=True,
        key_method="raw", seed="test-imports-acapy",
    )  # fmt: skip
    truth = await make_acapy_store(path, plan)
    source = await _import(module_redis, truth)
    yield Imported(truth, source)
    await module_redis.delete(keys.imported())


@pytest.fixture(scope="module")
async def app(acapy: Imported, redis_url: str) -> AsyncIterator[AppNode]:
    """A node started after the import: it serves what was imported."""
    node = await AppNode(redis_url, "imported").start()
    yield node
    await node.stop()


def _granted(truth: AcapyTruth | CredoTruth) -> list[ConnectionTruth]:
    return [c for c in truth.connections if c.mediation_state == "granted"]


def _mobile(truth: AcapyTruth | CredoTruth) -> list[ConnectionTruth]:
    """Granted wallets with no endpoint (phones): what is forwarded to them waits for
    pickup (the others' are pushed to their endpoints)."""
    return [c for c in _granted(truth) if not c.their_endpoint.startswith(("http", "ws"))]


def _wallet(app: AppNode, c: ConnectionTruth, transport: str = "http") -> Peer:
    """The wallet of connection `c`, as it was with the old mediator: its own key, talking
    to the old mediator's key on the connection."""
    return connected_peer(
        app, c.our_verkey, KeyPair.from_seed(c.their_seed), transport, c.recipient_seeds
    )


async def test_every_wallet_of_an_acapy_mediator_is_imported(
    acapy: Imported, module_redis: RedisClient
) -> None:
    truth, report = acapy.truth, acapy.source.report
    granted = _granted(truth)
    assert report.imported["routing keys"] == 1
    assert report.imported["invitations"] == 2
    assert report.imported["grants"] == len(granted)
    assert report.imported["mediation requested"] == 1
    assert report.imported["mediation denied"] == 1
    assert report.imported["recipient keys"] == sum(len(c.recipient_keys) for c in granted)
    skipped_or_refused = report.names()
    for noise in truth.noise:  # every record it could not use is reported, with why
        assert noise.name in skipped_or_refused, noise
    for c in granted:
        record = await module_redis.hgetall(keys.connection_keys(c.their_verkey).record)
        assert record[b"h"] == b"c" and record[b"m"] == b"g"
        assert record[rec.KEY_FORMAT.encode()] == b"b"  # ACA-Py answers keylists in base58
        assert {f[2:] for f in record if f.startswith(rec.KEY)} == {
            raw_key(k) for k in c.recipient_keys
        }
        assert b"created" in record  # its queue
        for key in c.recipient_keys:
            raw = raw_key(key)
            assert await module_redis.hget(keys.routes_bucket(raw), raw) == c.their_verkey.encode()
        ours = raw_key(c.our_verkey)
        assert await module_redis.hget(keys.ours_bucket(ours), ours) == raw_key(c.their_verkey)


async def test_imported_private_keys_are_sealed_never_stored_in_clear(
    acapy: Imported, module_redis: RedisClient
) -> None:
    seeds = [c.our_seed for c in acapy.truth.connections] + [
        k.seed for k in acapy.truth.routing_keys
    ]
    stored = [await module_redis.hgetall(keys.imported())]
    stored += [
        await module_redis.hgetall(keys.connection_keys(c.their_verkey).record)
        for c in _granted(acapy.truth)
    ]
    blob = b"".join(k + v for fields in stored for k, v in fields.items())
    for seed in seeds:
        assert seed not in blob and seed.hex().encode() not in blob
    sealed = stored[1][rec.IMPORTED_KEY.encode()]
    assert len(sealed) == 48  # a seed and its tag, nothing else


async def test_a_second_run_imports_nothing_new(acapy: Imported, module_redis: RedisClient) -> None:
    granted = _granted(acapy.truth)
    before = [
        await module_redis.hgetall(keys.connection_keys(c.their_verkey).record) for c in granted
    ]
    again = await _import(module_redis, acapy.truth)
    assert again.report.imported["connections"] == 0
    assert again.report.imported["routing keys"] == 0
    assert again.report.existing["connections"] == acapy.source.report.imported["connections"]
    after = [
        await module_redis.hgetall(keys.connection_keys(c.their_verkey).record) for c in granted
    ]
    assert after == before


async def test_an_imported_wallet_talks_to_its_old_key_and_is_answered_from_it(
    app: AppNode, acapy: Imported
) -> None:
    c = _granted(acapy.truth)[0]
    async with _wallet(app, c) as wallet:
        response = await wallet.post(wallet.pack(message("trust_ping/1.0/ping")))
        assert response.status_code == 200
        answer, sender = wallet.unpack(response.content)
        assert answer["@type"].endswith("trust_ping/1.0/ping_response")
        assert sender == c.our_verkey  # not a key the wallet never met
        keylist = await wallet.keylist_query()
        assert sorted(k["recipient_key"] for k in keylist["keys"]) == sorted(c.recipient_keys)


async def test_a_forward_to_the_old_routing_key_reaches_the_wallet(
    app: AppNode, acapy: Imported
) -> None:
    c = _mobile(acapy.truth)[0]
    routing = acapy.truth.routing_keys[0].verkey
    data = Sender(routing).wrap(c.recipient_keys[0], {"hello": "after the move"})
    async with app.client() as client:
        assert (await client.post("/", content=data, headers=ENVELOPE)).status_code == 202
    async with _wallet(app, c, "ws") as wallet:
        delivery = await wallet.delivery_request()
        assert delivery["@type"].endswith("messagepickup/2.0/delivery")
        [(message_id, body)] = attachments(delivery)
        assert wallet.open(body) == {"hello": "after the move"}
        await wallet.messages_received([message_id])


async def test_the_old_invitation_is_served_and_connects_new_wallets(
    app: AppNode, acapy: Imported
) -> None:
    newest = acapy.truth.invitations[-1]
    async with app.client() as client:
        answer = (await client.get("/invitation")).json()
    invitation = answer["invitation"]
    assert answer["imported"] is True
    assert invitation["@id"] in {i.id for i in acapy.truth.invitations}
    assert invitation["label"] == newest.label
    assert invitation == next(
        i.invitation for i in acapy.truth.invitations if i.id == invitation["@id"]
    )
    key = next(i.key.verkey for i in acapy.truth.invitations if i.id == invitation["@id"])
    async with Peer(app, key) as wallet:  # a new wallet whose app ships the old invitation
        assert wallet.mediator != key  # its connection key is ours, derived from our seed
        routing = await wallet.mediate()
        assert routing
        assert wallet.grant is not None


async def test_scanning_the_old_invitation_again_reuses_the_connection(
    app: AppNode, acapy: Imported
) -> None:
    c = _granted(acapy.truth)[2]
    async with _wallet(app, c) as wallet:
        reuse = message("out-of-band/1.1/handshake-reuse")
        reuse["~thread"] = {"thid": reuse["@id"], "pthid": c.invitation_id}
        answer = await wallet.request_message(reuse)
        assert answer["@type"].endswith("out-of-band/1.1/handshake-reuse-accepted")
        assert answer["~thread"] == {"thid": reuse["@id"], "pthid": c.invitation_id}


async def test_a_redis_holding_another_mediator_is_refused(
    acapy: Imported, module_redis: RedisClient, tmp_path: Path
) -> None:
    other = await make_credo_store(
        tmp_path / "sqlite.db", CredoPlan(connections=2, key_method="raw", seed="another")
    )
    store = await SourceStore.open(other.uri, other.pass_key, other.key_method)
    try:
        source = await CredoReader(store).mediator()
    finally:
        await store.close()
    writer = Writer(await _target(module_redis), source.report, dry_run=False)
    with pytest.raises(ImportRefused, match="another mediator's state"):
        await writer.check(source)
    assert (
        await module_redis.hget(keys.imported(), "source")
        == json.dumps(acapy.source.fingerprint).encode()
    )


async def test_the_capacity_snapshot_never_reads_out_a_sealed_key(
    acapy: Imported, module_redis: RedisClient
) -> None:
    c = _granted(acapy.truth)[0]
    shard = keys.queue_keys(f"{keys.DIDCOMM_NAMESPACE}:{c.their_verkey}").shard
    page = [PageQueue.of(shard, keys.DIDCOMM_NAMESPACE, c.their_verkey, False)]
    script_keys, args = page_call(page, 0)
    reply = await Scripts(module_redis).call("snapshot_page", script_keys, args)
    [reading] = SnapshotPage.decode(reply).queues
    assert reading is not None and reading.record[rec.MEDIATION] == b"g"  # the record, read
    assert rec.IMPORTED_KEY not in reading.record
