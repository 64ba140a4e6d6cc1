"""The scale benchmark's small form, as a check of behaviour (never of timing): 20,000
recipients made by the bulk loader (bench/support/bulk_load.py), a node on them and a few hundred
idle live sockets.

- the loader leaves what a real wallet leaves (the same keys, fields and kinds of value);
- with nothing due, the worker runs no upkeep, and Redis sees only leases, hints, stats and
  the audit;
- `/metrics` totals equal a full recount;
- SIGTERM with the sockets open drains them and exits 0.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from websockets.asyncio.client import ClientConnection

from bench.support.bulk_load import Plan, load
from bench.support.fleet import open_live
from bench.support.redis_probes import script_names
from mediator.client import mediator_key
from mediator.didcomm.identity import connection_key
from mediator.engine import keys
from mediator.engine.books import recount
from mediator.mediation import record as rec
from mediator.mediation.keymaps import raw_key
from mediator.storage.clients import Backend, RedisClient
from mediator.storage.target import Mode, parse
from tests.didcomm_peer import Peer
from tests.eventually import eventually
from tests.servers import Node, RedisUnderTest

RECIPIENTS = 20_000
SOCKETS = 300
TICK = 0.2  # the node's worker tick
STATS = 1.0  # its stats interval
AUDIT_RATE = 1000  # queues/s, the default
WINDOW = 3.0  # seconds of MONITOR
pytestmark = [pytest.mark.timeout(180), pytest.mark.full]


class Scale:
    """The loaded database, its node and its sockets."""

    def __init__(self, url: str, plan: Plan) -> None:
        self.url = url
        self.plan = plan
        self.backend = Backend(url)
        self.node: Node | None = None
        self.sockets: list[ClientConnection] = []
        self.wallets = 0  # recipients made by real wallets besides the loaded ones

    @property
    def redis(self) -> RedisClient:
        return self.backend.client

    async def metrics(self) -> dict[str, float]:
        assert self.node is not None
        async with httpx.AsyncClient(base_url=self.node.base, timeout=30) as client:
            text = (await client.get("/metrics")).text
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out


@pytest.fixture(scope="module")
async def scale(redis_server: RedisUnderTest) -> AsyncIterator[Scale]:
    # A database of its own, not the modules' shared one (3): MONITOR below counts every
    # command sent to it, and another module's node there (pushing to a wallet's endpoint)
    # would count as upkeep.
    url = redis_server.isolated_url("scale")
    plan = Plan(RECIPIENTS, share=0.1)
    setup = Scale(url, plan)
    await setup.backend.start()
    if parse(url).mode is not Mode.CLUSTER:  # a cluster of its own is empty already
        await setup.redis.flushdb()
    for phase in ("recipients", "messages"):
        await load(url, plan, phase, processes=2, report=lambda line: None)
    node = Node(
        url,
        MEDIATOR_KEY_SEED=plan.mediator_seed,
        MEDIATOR_WORKER_TICK_SECONDS=str(TICK),
        MEDIATOR_STATS_SECONDS=str(STATS),
        MEDIATOR_DRAIN_SECONDS="4",
        MEDIATOR_LOG_LEVEL="info",
    )
    await asyncio.to_thread(node.start)
    setup.node = node
    try:
        yield setup
    finally:
        for ws in setup.sockets:
            await ws.close()
        node.stop()
        if parse(url).mode is not Mode.CLUSTER:
            await setup.redis.flushdb()  # 20,000 recipients are nobody else's business
        await setup.backend.aclose()


# ------------------------------------------------------------------ the same keys


def _kind(value: bytes | str) -> str:
    text = value.decode() if isinstance(value, bytes) else value
    return "empty" if text == "" else "int" if text.lstrip("-").isdigit() else "text"


# Fields whose values say what state it is in (mediator/mediation/record.py).
SAME_VALUE = (rec.HANDSHAKE, rec.PROTOCOL, rec.MEDIATION)


def _field(name: bytes, key: str) -> str:
    """A record field's shape: a keylist entry names its key by raw bytes."""
    if name.startswith(rec.KEY):
        return "k:<key>" if name[len(rec.KEY) :] == raw_key(key) else "k:<other>"
    return name.decode()


async def footprint(redis: RedisClient, verkey: str, key: str, ours: str) -> dict[str, Any]:
    """Everything a recipient has in Redis, with names and values reduced to their shape."""
    out: dict[str, Any] = {}
    async for raw in redis.scan_iter(match=f"*{verkey}*", count=1000):
        name = raw.decode()
        shape = name.replace(verkey, "<V>")
        shape = shape.replace(f"{{{keys.shard_of(f'didcomm:{verkey}')}}}", "{S}")
        kind = (await redis.type(name)).decode()
        entry: dict[str, Any] = {"type": kind, "expires": await redis.ttl(name) > 0}
        if kind == "hash":
            fields = await redis.hgetall(name)
            entry["fields"] = sorted((_field(f, key), _kind(v)) for f, v in fields.items())
            entry["values"] = {
                _field(f, key): v.decode()
                for f, v in fields.items()
                if _field(f, key) in SAME_VALUE
            }
            entry["encoding"] = (await redis.object("encoding", name)).decode()
        out[shape] = entry
    pending = [k async for k in redis.scan_iter(match=f"*{ours}*", count=1000)]
    out["keys naming our key"] = len(pending)
    route = keys.routes_bucket(raw_key(key))
    out["routes bucket -> V"] = await redis.hget(route, raw_key(key)) == verkey.encode()
    mine = keys.ours_bucket(raw_key(ours))
    out["our keys bucket -> V"] = await redis.hget(mine, raw_key(ours)) == raw_key(verkey)
    shard = keys.shard_of(f"didcomm:{verkey}")
    out["in the registry"] = bool(
        await redis.sismember(keys.shard_registry(shard, "didcomm"), verkey)
    )
    # The shard's totals count it (their other fields depend on its neighbours' messages).
    out["counted in the shard's totals"] = await redis.hexists(
        keys.shard_totals(shard, "didcomm"), "q"
    )
    return out


async def test_the_loader_leaves_what_a_wallet_leaves(scale: Scale) -> None:
    """A recipient made by a real wallet (DID Exchange 1.1, complete, mediate-request,
    keylist-update against the node) and one made by the loader, both idle."""
    assert scale.node is not None
    plan, redis = scale.plan, scale.redis
    wallet = Peer(scale.node.base, await mediator_key(scale.node.base))
    try:
        await wallet.exchange()
        key = await wallet.mediate()
        scale.wallets += 1
    finally:
        await wallet.close()
    ours = connection_key(plan.identity, wallet.verkey).verkey_b58
    real = await footprint(redis, wallet.verkey, key, ours)
    # A wallet that talks has per-thread sender orders beside its record, kept 10 minutes
    # after its last message; the loader's wallets never talked. Compared without them.
    threads = real.pop("q:{S}:didcomm:<V>:t")
    assert threads["type"] == "hash" and threads["expires"]
    i = next(i for i in range(plan.recipients) if not plan.messages(i))  # idle, like it
    loaded = await footprint(
        redis, plan.wallet(i).verkey_b58, plan.recipient_key(i).verkey_b58, plan.ours(i).verkey_b58
    )
    assert loaded == real
    assert set(real) == {
        "q:{S}:didcomm:<V>",
        "keys naming our key",
        "routes bucket -> V",
        "our keys bucket -> V",
        "in the registry",
        "counted in the shard's totals",
    }
    assert real["q:{S}:didcomm:<V>"]["values"] == {
        rec.HANDSHAKE: rec.CODES[rec.COMPLETED],
        rec.PROTOCOL: "didexchange/1.1",
        rec.MEDIATION: rec.CODES[rec.GRANTED],
    }


# ------------------------------------------------------------------ idle


@pytest.fixture(scope="module")
async def sockets(scale: Scale) -> list[ClientConnection]:
    """A few hundred loaded recipients live on the node, idle: none has a message waiting
    (a delivery nobody acknowledges is offered again 30 s later, which a slow machine
    may reach)."""
    assert scale.node is not None
    url = "ws" + scale.node.base[4:] + "/"
    idle = [i for i in range(scale.plan.recipients) if not scale.plan.messages(i)][:SOCKETS]
    # A few at a time, as wallets reconnect: a burst waits for the node's pooled Redis
    # connections.
    for start in range(0, SOCKETS, 20):
        scale.sockets += await asyncio.gather(
            *(open_live(url, scale.plan, i) for i in idle[start : start + 20])
        )
    shown = await eventually(
        scale.metrics, lambda m: m.get("mediator_websockets") == SOCKETS, within=10
    )
    assert shown["mediator_websockets"] == SOCKETS
    return scale.sockets


# What an idle worker and node may send (top level, not what scripts run inside): the
# leases script, tick reads of the hints, hint polls, stats passes, the audit, the node's
# lease and health checks, and what /metrics reads.
IDLE = ("leases", "shard_stats", "audit")
IDLE_COMMANDS = {
    "ZRANGEBYSCORE",  # a tick: which shards' hints are due
    "ZRANGE",  # hint polls: the head of each schedule
    "ZADD",  # hint polls (LT), the node's lease
    "ZREMRANGEBYSCORE",  # the node's lease: long-gone nodes
    "TIME",
    "SSCAN",  # the audit's pages
    "HEXISTS",  # the audit's check of the mqs listing, after a pass over partition 0
    "HGET",  # the audit's cursor
    "HSET",  # stats summaries, the audit's cursor
    "HGETALL",  # /metrics reads the summaries
    "PING",
    "MULTI",
    "EXEC",
}


async def _monitor(client: aioredis.Redis, seconds: float, out: list[dict[str, Any]]) -> None:
    async with client.monitor() as monitor:
        try:
            async with asyncio.timeout(seconds):
                async for command in monitor.listen():
                    out.append(command)
        except TimeoutError:
            pass


async def test_nothing_due_means_no_upkeep(scale: Scale, sockets: list[ClientConnection]) -> None:
    assert scale.node is not None
    node_db = parse(scale.url).db
    await eventually(
        scale.metrics,
        lambda m: m.get("mediator_queue_stats_age_seconds", 99) < 2 * STATS,
        within=10,
    )
    loop = asyncio.get_running_loop()
    started, before = loop.time(), await scale.metrics()
    seen: list[dict[str, Any]] = []
    primaries = scale.backend.primaries()
    await asyncio.gather(*(_monitor(p, WINDOW, seen) for p in primaries))
    after = await scale.metrics()
    elapsed = loop.time() - started

    # The worker ticked about 15 times and ran no upkeep: nothing was due.
    assert after["mediator_worker_upkeeps_total"] == before["mediator_worker_upkeeps_total"] == 0
    audited = (
        after["mediator_worker_audited_queues_total"]
        - before["mediator_worker_audited_queues_total"]
    )
    # The audit went on at its pace (1,000 queues/s, plus at most a second's credit).
    assert 0 < audited <= AUDIT_RATE * (elapsed + 1)
    ours = [c for c in seen if c["client_type"] != "lua" and int(c["db"]) == node_db]
    words = [str(c["command"]).split(" ", 2) for c in ours]
    named = script_names()
    calls = [(named.get(w[1], w[1]), " ".join(w)[:200]) for w in words if w[0] == "EVALSHA"]
    scripts = [name for name, _ in calls]
    others = {w[0] for w in words if w[0] not in ("EVALSHA", "CLIENT", "INFO", "HELLO")}
    # No upkeep, no receive (the calls shown with their keys if there are).
    assert set(scripts) <= set(IDLE), [call for call in calls if call[0] not in IDLE]
    assert others <= IDLE_COMMANDS, others
    # Stats passes (a script call per shard each), audit pages (each checks one queue or
    # more), lease renewals: bounded by the intervals, whatever the number of recipients.
    assert scripts.count("shard_stats") <= (WINDOW / STATS + 1) * keys.SHARDS
    assert scripts.count("audit") <= audited + 50
    assert scripts.count("leases") <= WINDOW / 3 + 2
    assert all(ws.close_code is None for ws in sockets)  # and the sockets stayed open


async def test_metrics_totals_equal_a_recount(scale: Scale) -> None:
    counted = (await recount(scale.redis, range(keys.SHARDS)))["didcomm"]
    expected = {
        'mediator_queues{queue_namespace="didcomm"}': counted.queues,
        'mediator_queue_messages{queue_namespace="didcomm",state="visible"}': counted.visible,
        'mediator_queue_messages{queue_namespace="didcomm",state="in_flight"}': counted.values[
            "fl"
        ],
        'mediator_queue_messages{queue_namespace="didcomm",state="delayed"}': counted.delayed,
        'mediator_queue_bytes{queue_namespace="didcomm"}': counted.stored_bytes,
    }

    def shown(m: dict[str, float]) -> dict[str, float]:
        return {name: m.get(name, -1) for name in expected}

    found = await eventually(scale.metrics, lambda m: shown(m) == expected, within=10)
    assert shown(found) == expected
    assert counted.queues == RECIPIENTS + scale.wallets
    assert counted.stored == scale.plan.total_messages()


async def test_sigterm_with_sockets_open_drains_and_exits(
    scale: Scale, sockets: list[ClientConnection]
) -> None:
    assert scale.node is not None and scale.node.proc is not None
    proc = scale.node.proc
    proc.send_signal(signal.SIGTERM)
    try:
        code = await asyncio.to_thread(proc.wait, 30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no exit 30 s after SIGTERM; the log ends: {scale.node.output()[-1500:]}")
    assert code == 0, scale.node.output()[-2000:]
    assert f"draining: {SOCKETS} sockets" in scale.node.output()
    closed = await asyncio.gather(*(asyncio.wait_for(ws.wait_closed(), 10) for ws in sockets))
    assert len(closed) == SOCKETS
    assert {ws.close_code for ws in sockets} == {1012}  # reconnect elsewhere
