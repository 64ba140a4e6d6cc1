"""`mediator import`'s edges, fast tier: an old mediator whose WebSocket endpoint has a path
of its own, ACA-Py 0.12's connections 1.0 invitation, a wallet whose key already has a
connection here, a wallet's queued messages coming in two groups, passwords in a store's
URI."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import base58
import pytest

from bench.support.askar_stores import AcapyPlan, AcapyTruth, make_acapy_store
from mediator.client import Recipient, Sender
from mediator.didcomm.did_doc import parse_doc
from mediator.didcomm.signatures import verify_connection
from mediator.engine import keys
from mediator.imports.model import QueuedMessage, Report
from mediator.imports.source import describe
from mediator.imports.writer import Writer
from mediator.mediation.keymaps import raw_key
from mediator.storage.clients import RedisClient
from tests.didcomm_peer import ENVELOPE, Peer
from tests.inprocess import AppNode
from tests.test_handshakes import legacy_doc
from tests.test_imports import _import, _target

pytestmark = pytest.mark.topology


@pytest.fixture
async def forgetting(module_redis: RedisClient) -> AsyncIterator[None]:
    """What a test imports into the session's Redis is forgotten after it (the session's
    other apps must not start as that mediator)."""
    before = await module_redis.hgetall(keys.imported())
    yield
    await module_redis.delete(keys.imported())
    if before:
        await module_redis.hset(keys.imported(), mapping=before)


async def test_the_path_of_the_old_websocket_endpoint_is_answered(
    tmp_path: Path, module_redis: RedisClient, redis_url: str, forgetting: None
) -> None:
    """ACA-Py's invitation names only its first endpoint; its DID documents name the
    others: a `wss://host/ws` there is answered after the switch."""
    plan = AcapyPlan(
        connections=4, clients=("peer2",), key_method="raw", seed="test-imports-paths",
        endpoints=("https://m.example.org", "wss://m.example.org/ws"),
    )  # fmt: skip
    truth = await make_acapy_store(tmp_path / "sqlite.db", plan)
    source = await _import(module_redis, truth)
    assert source.endpoints == ["https://m.example.org", "wss://m.example.org/ws"]
    assert json.loads(await module_redis.hget(keys.imported(), "paths")) == ["/ws"]
    node = await AppNode(redis_url, "paths").start()
    try:
        c = next(c for c in truth.connections if c.mediation_state == "granted")
        data = Sender(truth.routing_keys[0].verkey).wrap(c.recipient_keys[0], {"via": "/ws"})
        async with node.client() as client:
            assert (await client.post("/ws", content=data, headers=ENVELOPE)).status_code == 202
            elsewhere = await client.post("/elsewhere", content=data, headers=ENVELOPE)
            assert elsewhere.status_code in (404, 405)  # no other path became DIDComm's
    finally:
        await node.stop()


async def test_the_connections_invitation_of_acapy_0_12_is_served_and_answered(
    tmp_path: Path, module_redis: RedisClient, redis_url: str, forgetting: None
) -> None:
    """ACA-Py 0.12 as aries-mediator-service runs it (`--connections-invite`) hands out an
    RFC 0160 invitation: after the switch it is served as it was (`?c_i=`), and a wallet
    whose app ships it gets a connections 1.0 response signed by its key, then mediation."""
    plan = AcapyPlan(
        connections=2, clients=("sov",), invitation_form="connections", key_method="raw",
        seed="test-imports-c-i",
    )  # fmt: skip
    truth = await make_acapy_store(tmp_path / "sqlite.db", plan)
    source = await _import(module_redis, truth)
    assert source.report.imported["invitations"] == 1
    [old] = truth.invitations
    node = await AppNode(redis_url, "c-i").start()
    try:
        async with node.client() as client:
            answer = (await client.get("/invitation")).json()
        assert answer["invitation"] == old.invitation
        url = urlsplit(answer["invitation_url"])
        [encoded] = parse_qs(url.query)["c_i"]
        assert json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))) == (
            old.invitation
        )
        wallet = Peer(node, old.key.verkey)
        try:
            did = base58.b58encode(wallet.keys.verkey[:16]).decode()
            request = Recipient.message(
                "connections/1.0/request",
                label="shipped with the old invitation",
                connection={"DID": did, "DIDDoc": legacy_doc(wallet.keys, did)},
            )
            request["~thread"] = {"thid": request["@id"], "pthid": old.id}
            response = await wallet.request_message(request)
            assert response["@type"] == "https://didcomm.org/connections/1.0/response"
            signed, signer = verify_connection(response["connection~sig"])
            assert signer == old.key.verkey  # the old invitation's key signs our new DID
            ours = parse_doc(signed["DIDDoc"], signed["DID"])
            wallet.mediator = ours.recipient_key  # from our own seed, as every new one
            assert wallet.mediator != old.key.verkey
            assert (await wallet.mediate_request())["@type"].endswith("/mediate-grant")
        finally:
            await wallet.close()
    finally:
        await node.stop()


async def test_a_wallet_whose_key_has_a_connection_here_is_refused_and_leaves_nothing(
    tmp_path: Path, module_redis: RedisClient, forgetting: None
) -> None:
    plan = AcapyPlan(connections=3, clients=("peer4",), key_method="raw", seed="test-taken")
    truth: AcapyTruth = await make_acapy_store(tmp_path / "sqlite.db", plan)
    taken = truth.connections[0]
    record = keys.connection_keys(taken.their_verkey).record
    await module_redis.hset(record, "h", "c")  # a connection made here, with that key
    source = await _import(module_redis, truth)
    assert source.report.refused["a wallet whose key has a connection here already"] == 1
    assert source.report.imported["connections"] == 2
    for key in taken.recipient_keys:  # its routes went again
        assert await module_redis.hget(keys.routes_bucket(raw_key(key)), raw_key(key)) is None
    ours = raw_key(taken.our_verkey)
    assert await module_redis.hget(keys.ours_bucket(ours), ours) is None
    assert await module_redis.hgetall(record) == {b"h": b"c"}  # untouched


async def test_a_wallets_messages_in_two_groups_are_each_imported_once(
    tmp_path: Path, module_redis: RedisClient, forgetting: None
) -> None:
    """A Credo mediator's wallet may have messages in its store and in a Postgres queue:
    the second group goes in after the first, once, however often the import runs."""
    plan = AcapyPlan(connections=1, clients=("peer4",), key_method="raw", seed="test-groups")
    truth = await make_acapy_store(tmp_path / "sqlite.db", plan)
    await _import(module_redis, truth)
    wallet = truth.connections[0].their_verkey
    first = [_queued(wallet, i) for i in range(3)]
    second = [_queued(wallet, i) for i in range(3, 5)]
    for _ in range(2):  # a second run finds every one of them in
        report = Report()
        writer = Writer(await _target(module_redis), report, dry_run=False)
        await writer.write_messages(wallet, first, 0)
        await writer.write_messages(wallet, second, len(first))
    assert report.imported["queued messages"] == 0
    assert report.existing["queued messages"] == 5
    stream = keys.queue_keys(f"{keys.DIDCOMM_NAMESPACE}:{wallet}").stream
    bodies = [fields[b"b"] for _, fields in await module_redis.xrange(stream)]
    assert bodies == [m.payload for m in first + second]


def _queued(wallet: str, i: int) -> QueuedMessage:
    payload = json.dumps({"protected": "e30", "iv": "aXY", "ciphertext": f"m{i}", "tag": "dA"})
    return QueuedMessage(f"m-{i}", wallet, payload.encode(), "", f"2026-11-28T00:00:0{i}Z")


def test_a_stores_passwords_never_reach_a_message() -> None:
    uri = "postgres://acapy:s3cret@db:5432/mediator?admin_account=pg&admin_password=ADM1N"
    shown = describe(uri)
    assert "s3cret" not in shown and "ADM1N" not in shown
    assert shown.startswith("postgres://acapy:***@db:5432/mediator?")
    assert describe("sqlite:///var/lib/acapy/sqlite.db") == "sqlite:///var/lib/acapy/sqlite.db"
