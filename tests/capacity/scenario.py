"""A small deployment driven by real clients, for the capacity tests: DIDComm recipients in
every state a snapshot must tell apart (empty, waiting, in flight, live, expired, a DIDComm
v2 wallet), and mqs
queues with a dead letter queue, delayed messages and messages handed out."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from mediator.engine import Engine, keys
from mediator.engine.model import QueueRef, QueueStats
from mediator.mediation.wallets_v2 import names_of
from mediator.storage.clients import Backend
from tests import mqs_client as mqs
from tests.didcomm_peer import Peer, Remote, forward, live_peer, mediator_key
from tests.didcomm_v2_wallet import WalletV2, forward_v2, mediator_did, sealed_for
from tests.eventually import eventually, until_redis_ms
from tests.servers import Node

NODE_ENV = {
    "MEDIATOR_WORKER_TICK_SECONDS": "0.2",
    "MEDIATOR_STATS_SECONDS": "1",
    "MEDIATOR_DELIVERY_TIMEOUT_SECONDS": "300",
}


@dataclass
class Deployment:
    url: str
    node: Node
    didcomm: dict[str, str] = field(default_factory=dict)  # role -> connection verkey
    mqs: list[str] = field(default_factory=list)
    recipient_keys: list[str] = field(default_factory=list)  # every key and DID we used
    live: list[Peer] = field(default_factory=list)

    async def stats(self) -> dict[str, QueueStats]:
        """The engine's own figures for every queue, qualified name -> stats."""
        backend = Backend(self.url)
        await backend.start()
        try:
            engine = Engine(backend.client)
            refs = [QueueRef(keys.DIDCOMM_NAMESPACE, v) for v in self.didcomm.values()]
            refs += [QueueRef(keys.MQS_NAMESPACE, n) for n in self.mqs]
            return {ref.qualified: await engine.stats(ref) for ref in refs}
        finally:
            await backend.aclose()


async def drive(url: str, node: Node) -> Deployment:
    """Recipients and queues in known states; the live socket stays open."""
    d = Deployment(url, node)
    med = await mediator_key(node.base)
    peers: dict[str, Peer] = {}
    for role in ("empty", "waiting", "in_flight", "expiring"):
        peer = Peer(node.base, med, "http")
        await peer.__aenter__()
        key = await peer.mediate()
        peers[role] = peer
        d.didcomm[role] = peer.verkey
        d.recipient_keys += [peer.verkey, key, peer.recipient_keys[key].did_key]
    for role, n in (("waiting", 3), ("in_flight", 5)):
        key = next(iter(peers[role].recipient_keys))
        for i in range(n):
            r = await forward(node.base, med, key, {"@type": "test", "n": i, "pad": "x" * 200 * i})
            assert r.status_code == 202, r.text
    got = await peers["in_flight"].delivery_request(limit=2)
    assert len(got.get("~attach", [])) == 2
    await peers["expiring"].queue_update(duration_limit=1)
    key = next(iter(peers["expiring"].recipient_keys))
    for i in range(2):
        assert (await forward(node.base, med, key, {"@type": "test", "n": i})).status_code == 202
    live = await live_peer(node.base, med)
    d.live.append(live)
    d.didcomm["live"] = live.verkey
    d.recipient_keys += [live.verkey, *live.recipient_keys]
    # A DIDComm v2 wallet, mediated, one message waiting.
    reach = Remote(node.base)
    v2_did = await mediator_did(reach)
    wallet = WalletV2(reach, v2_did)
    await wallet.mediate()
    sent = await forward_v2(reach, v2_did, wallet.did, sealed_for(wallet.did, {"n": 0}))
    assert sent.status_code == 202, sent.text
    d.didcomm["v2"] = names_of(wallet.did)[0]
    d.recipient_keys += [wallet.did, d.didcomm["v2"]]
    for peer in peers.values():
        await peer.close()

    async with httpx.AsyncClient(base_url=node.base, timeout=30) as http:
        await mqs.create(http, "orders-dlq")
        await mqs.create(http, "orders", visibility=1, max_receives=1, dlq="orders-dlq")
        await mqs.create(http, "jobs", visibility=300)
        for i in range(3):
            await mqs.send(http, "orders", f"order {i}".encode())
        await mqs.send_batch(http, "jobs", [b"j" * 500 * (i + 1) for i in range(4)])
        await mqs.create(http, "later", delay=600)
        await mqs.send(http, "later", b"not yet")
        [order] = await mqs.receive(http, "orders")
        assert len(await mqs.receive(http, "jobs", n=2)) == 2
        # Once the order handed out is past its deadline (it went to the dead letters), the
        # next receive moves another one there; the dead letters become visible in the dead
        # letter queue at those deadlines.
        await _until(url, mqs.header_ms(order, "X-MQS-MESSAGE-VISIBLE-AT"))
        [other] = await mqs.receive(http, "orders")
        await _until(url, mqs.header_ms(other, "X-MQS-MESSAGE-VISIBLE-AT"))
    d.mqs = ["orders-dlq", "orders", "jobs", "later"]

    async def dead_letters() -> QueueStats:
        return (await d.stats())["mqs:orders-dlq"]

    arrived = await eventually(dead_letters, lambda s: s.delayed == 0, within=10)
    assert arrived.stored == 2, arrived
    await _wait_expired(d)
    return d


async def _until(url: str, at_ms: int) -> None:
    """Until the server's clock (the one the queues' deadlines run on) reads `at_ms`."""
    backend = Backend(url)
    await backend.start()
    try:
        await until_redis_ms(backend.client, at_ms)
    finally:
        await backend.aclose()


async def _wait_expired(d: Deployment) -> None:
    for _ in range(100):
        stats = await d.stats()
        if stats[f"didcomm:{d.didcomm['expiring']}"].stored == 0:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the worker did not expire the messages past their duration limit")


def capacity(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`mediator capacity ...` as an SRE runs it, with the nodes' settings (the mailboxes'
    defaults come from the same MEDIATOR_* environment)."""
    return subprocess.run(
        [sys.executable, "-m", "mediator", "capacity", *args],
        env={**os.environ, **NODE_ENV},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def parquet_rows(history: Path, table: str) -> list[dict[str, object]]:
    import pyarrow.dataset as ds

    data = ds.dataset(history / table, format="parquet", partitioning="hive")
    rows: list[dict[str, object]] = data.to_table().to_pylist()
    return rows
