"""`mediator import credo`, fast tier: Credo 0.5 and 0.6 mediators' stores (made in their
records' real format by bench/support/askar_stores.py) with messages queued for offline
wallets, imported into the session's Redis: each wallet then picks up what waited for it,
in order, exactly once, and keeps the key format it used; a dry run writes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bench.support.askar_stores import ConnectionTruth, CredoPlan, CredoTruth, make_credo_store
from mediator.didcomm.keys import KeyPair
from mediator.engine import keys
from mediator.mediation.keymaps import raw_key
from mediator.storage.clients import RedisClient
from tests.didcomm_peer import Peer, attachments, connected_peer
from tests.inprocess import AppNode
from tests.test_imports import _import

pytestmark = pytest.mark.topology


@pytest.fixture(scope="module", params=["0.5", "0.6"])
async def credo(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    module_redis: RedisClient,
) -> AsyncIterator[tuple[CredoTruth, Any]]:
    version = request.param
    plan = CredoPlan(
        version=version, connections=6, recipient_keys=2, queued=3, messages=4,
        split_mediations=1, key_method="raw", seed=f"test-imports-credo-{version}",
    )  # fmt: skip
    truth = await make_credo_store(tmp_path_factory.mktemp(f"credo{version}") / "sqlite.db", plan)
    source = await _import(module_redis, truth)
    yield truth, source
    await module_redis.delete(keys.imported())


@pytest.fixture(scope="module")
async def app(credo: tuple[CredoTruth, Any], redis_url: str) -> AsyncIterator[AppNode]:
    node = await AppNode(redis_url, "credo-imported").start()
    yield node
    await node.stop()


def _wallet(app: AppNode, c: ConnectionTruth) -> Peer:
    return connected_peer(app, c.our_verkey, KeyPair.from_seed(c.their_seed))


async def test_queued_messages_are_picked_up_in_order_exactly_once(
    credo: tuple[CredoTruth, Any], app: AppNode, module_redis: RedisClient
) -> None:
    truth, source = credo
    waiting = [c for c in truth.connections if c.queued]
    assert waiting and source.report.imported["queued messages"] == sum(
        len(c.queued) for c in waiting
    )
    again = await _import(module_redis, truth)  # a second run queues none of them again
    assert again.report.imported["queued messages"] == 0
    for c in waiting:
        async with _wallet(app, c) as wallet:
            status = await wallet.status()
            assert status["message_count"] == len(c.queued)
            delivery = await wallet.delivery_request(limit=len(c.queued))
            got = attachments(delivery)
            assert [json.loads(body) for _, body in got] == [json.loads(m) for m in c.queued]
            await wallet.messages_received([message_id for message_id, _ in got])
            assert (await wallet.status())["message_count"] == 0


async def test_each_wallet_keeps_the_keylist_key_format_it_used(
    credo: tuple[CredoTruth, Any], app: AppNode
) -> None:
    truth, _ = credo
    granted = [c for c in truth.connections if c.mediation_state == "granted"]
    formats = {c.did_keys_in_keylist for c in granted}
    assert formats == {True, False}  # the plan made both kinds
    for c in granted:
        async with _wallet(app, c) as wallet:
            listed = [k["recipient_key"] for k in (await wallet.keylist_query())["keys"]]
            if c.did_keys_in_keylist:
                assert all(k.startswith("did:key:z6Mk") for k in listed)
            else:
                assert sorted(listed) == sorted(c.recipient_keys)


async def test_a_split_mediation_is_merged_into_one_keylist(
    credo: tuple[CredoTruth, Any], module_redis: RedisClient
) -> None:
    """Stores converted from ACA-Py by acapy-tools before #84 hold one MediationRecord per
    key: the wallet gets all of its keys."""
    truth, _ = credo
    c = next(c for c in truth.connections if c.mediation_state == "granted")
    record = await module_redis.hgetall(keys.connection_keys(c.their_verkey).record)
    assert sum(1 for f in record if f.startswith(b"k:")) == len(c.recipient_keys) == 2


async def test_a_dry_run_reads_everything_and_writes_nothing(
    tmp_path: Path, module_redis: RedisClient
) -> None:
    plan = CredoPlan(connections=4, queued=2, key_method="raw", seed="test-imports-dry-run")
    truth = await make_credo_store(tmp_path / "sqlite.db", plan)
    before = await module_redis.hgetall(keys.imported())
    source = await _import(module_redis, truth, dry_run=True)
    assert source.report.imported["connections"] == len(truth.connections)
    assert source.report.imported["queued messages"] == sum(
        len(c.queued) for c in truth.connections
    )
    assert await module_redis.hgetall(keys.imported()) == before
    for c in truth.connections:
        assert not await module_redis.exists(keys.connection_keys(c.their_verkey).record)
        for key in c.recipient_keys:
            assert await module_redis.hget(keys.routes_bucket(raw_key(key)), raw_key(key)) is None
