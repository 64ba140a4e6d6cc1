"""The snapshot job against real nodes and a real Redis: every figure in the Parquet equals
what the engine reports for the same queue (run again on Sentinel, reading its replica,
and on the three-primary cluster by `make topologies`)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis

from mediator.engine import books, keys
from mediator.engine.scripts import Scripts
from mediator.storage.clients import Backend
from mediator.storage.target import parse
from spark import pseudonyms
from tests.capacity.scenario import NODE_ENV, Deployment, capacity, drive, parquet_rows
from tests.servers import Node, RedisUnderTest

pytestmark = [pytest.mark.topology, pytest.mark.full, pytest.mark.timeout(600)]
TOPOLOGY = os.environ.get("MEDIATOR_TEST_TOPOLOGY", "standalone") or "standalone"
READ_FROM = "replica" if TOPOLOGY == "sentinel" else "primary"


@pytest.fixture(scope="module")
async def deployment(redis_server: RedisUnderTest) -> AsyncIterator[Deployment]:
    url = redis_server.isolated_url()
    if TOPOLOGY != "cluster":
        _client(url).flushdb()
    node = Node(url, **NODE_ENV)
    node.start()
    d = await drive(url, node)
    yield d
    for peer in d.live:
        await peer.close()
    node.stop()


@pytest.fixture(scope="module")
async def snapshot(
    deployment: Deployment, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    history = tmp_path_factory.mktemp("history")
    stats = await deployment.stats()
    # In a thread: the live wallet's socket keeps answering the node's pings meanwhile (a
    # long snapshot on a loaded machine would otherwise outlast them, and the wallet go).
    done = await asyncio.to_thread(
        capacity, "snapshot", "--redis-url", deployment.url, "--out", str(history),
        "--memory-sample-rate", "1", "--read-from", READ_FROM,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return {"history": history, "stats": stats, "out": done.stdout, "err": done.stderr}


def _client(url: str) -> Any:
    target = parse(url)
    if target.mode.value == "cluster":
        host, port = target.hosts[0]
        return redis.RedisCluster(host=host, port=port)
    if target.mode.value == "sentinel":
        from redis.sentinel import Sentinel

        return Sentinel(list(target.hosts)).master_for(target.service, db=target.db)
    return redis.Redis.from_url(url)


def _rows_by_queue(deployment: Deployment, history: Path) -> dict[str, dict[str, Any]]:
    seed = _client(deployment.url).hget(keys.mediator_identity(), keys.IDENTITY_SEED)
    key = pseudonyms.derive(bytes.fromhex(seed.decode()))
    by_hash = {r["mailbox"]: r for r in parquet_rows(history, "mailboxes")}
    names = [f"didcomm:{v}" for v in deployment.didcomm.values()]
    names += [f"mqs:{n}" for n in deployment.mqs]
    return {q: by_hash[pseudonyms.pseudonym(key, q)] for q in names}


async def test_every_queue_figure_equals_the_engines(
    deployment: Deployment, snapshot: dict[str, Any]
) -> None:
    rows = _rows_by_queue(deployment, snapshot["history"])
    names = ("stored", "in_flight", "delayed", "bytes", "oldest_ms", "newest_ms",
             "last_added_ms", "last_delivered_ms", "last_removed_ms")  # fmt: skip
    for qualified, s in snapshot["stats"].items():
        row = rows[qualified]
        assert {n: row[n] for n in names} == {n: getattr(s, n) for n in names}, qualified
        assert row["visible"] == s.stored - s.in_flight
        assert len(row["inflight_delivery_counts"]) == s.in_flight
        assert row["memory_sampled"] and row["memory_bytes"] > 0


async def test_states_a_report_tells_apart(
    deployment: Deployment, snapshot: dict[str, Any]
) -> None:
    rows = _rows_by_queue(deployment, snapshot["history"])
    d = {role: rows[f"didcomm:{v}"] for role, v in deployment.didcomm.items()}
    assert d["empty"]["stored"] == 0 and d["empty"]["oldest_ms"] is None
    assert (d["waiting"]["stored"], d["waiting"]["in_flight"]) == (3, 0)
    assert (d["in_flight"]["stored"], d["in_flight"]["in_flight"]) == (5, 2)
    assert d["in_flight"]["inflight_delivery_counts"] == [1, 1]
    assert d["expiring"]["stored"] == 0 and d["expiring"]["retention_seconds"] == 1
    assert d["live"]["live"] is True and d["live"]["live_node"]
    assert not any(r["live"] for role, r in d.items() if role != "live")
    for role, r in d.items():
        assert r["connection_state"] == "granted" and r["keys"] == 1, role
        assert r["name"] is None and r["namespace"] == "didcomm"
        assert (r["handshake_protocol"] == "didcomm/v2") == (role == "v2"), role
    assert (d["v2"]["stored"], d["v2"]["in_flight"]) == (1, 0)
    q = {n: rows[f"mqs:{n}"] for n in deployment.mqs}
    assert q["orders"]["dead_letter_queue"] == "orders-dlq" and q["orders"]["max_receives"] == 1
    assert q["orders-dlq"]["dead_letter_sources"] == 1 and q["orders-dlq"]["stored"] >= 1
    assert (q["jobs"]["stored"], q["jobs"]["in_flight"], q["jobs"]["visible"]) == (4, 2, 2)
    assert (q["later"]["delayed"], q["later"]["stored"]) == (1, 0)
    assert q["orders"]["name"] == "orders"


async def test_cluster_table_holds_the_books(
    deployment: Deployment, snapshot: dict[str, Any]
) -> None:
    by_ns = {r["namespace"]: r for r in parquet_rows(snapshot["history"], "cluster")}
    backend = Backend(deployment.url)
    await backend.start()
    try:
        _, kept = await books.read_shards(Scripts(backend.client), range(keys.SHARDS))
    finally:
        await backend.aclose()
    for ns, t in kept.items():
        row = by_ns[ns]
        assert row["added"] == t.values["add"] and row["expired"] == t.values["exp"], ns
        assert row["delivered"] == t.values["dlv"] and row["dead_lettered"] == t.values["dl"]
        assert row["queues"] == t.values["q"] and row["stored"] == t.values["n"]
    assert by_ns["didcomm"]["rows"] == len(deployment.didcomm)
    assert by_ns["mqs"]["rows"] == len(deployment.mqs)
    assert by_ns["didcomm"]["expired"] >= 2 and by_ns["mqs"]["dead_lettered"] >= 1
    assert by_ns["didcomm"]["nodes_alive"] == 1
    assert by_ns["didcomm"]["mode"] == TOPOLOGY


async def test_servers_table(snapshot: dict[str, Any]) -> None:
    rows = parquet_rows(snapshot["history"], "servers")
    primaries = [r for r in rows if r["role"] == "primary"]
    assert primaries and all(r["used_memory"] > 0 and r["keys"] > 0 for r in primaries)
    assert sum(r["engine_shards"] for r in primaries) == keys.SHARDS
    assert len(primaries) == (3 if TOPOLOGY == "cluster" else 1)
    read = [r for r in rows if r["read"]]
    assert read and all(
        r["role"] == ("replica" if READ_FROM == "replica" else "primary") for r in read
    )
    if READ_FROM == "replica":
        assert all(r["replication_lag_bytes"] is not None for r in read)
        lag = {r["replica_lag_bytes"] for r in parquet_rows(snapshot["history"], "cluster")}
        assert None not in lag
    assert all(r["schema_version"] == 1 for r in rows)
    if TOPOLOGY == "cluster":  # Valkey 8+ counts each slot's keys
        for r in primaries:
            assert len(r["slot_stats"]) == r["slots"]
            assert sum(s["keys"] for s in r["slot_stats"]) == r["keys"]


def _all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


async def test_no_raw_key_or_did_in_the_history(
    deployment: Deployment, snapshot: dict[str, Any]
) -> None:
    blob = _all_bytes(Path(snapshot["history"]))
    assert blob
    for secret in deployment.recipient_keys:
        assert secret.encode() not in blob, secret


async def test_the_command_budget_holds(deployment: Deployment, tmp_path: Path) -> None:
    """One partition for every shard, 2,000 commands a second: the job says it stayed
    within the budget (a second's worth, give or take a page), and did read at that pace."""
    done = capacity("snapshot", "--redis-url", deployment.url, "--out", str(tmp_path),
                    "--max-commands-per-second", "2000", "--shards-per-partition", "1024",
                    "--memory-sample-rate", "0", "--read-from", READ_FROM)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    peak = int(done.stdout.rsplit("highest rate ", 1)[1].split(" ")[0].replace(",", ""))
    assert 1000 <= peak <= 2200, done.stdout


async def test_progress_and_summary(snapshot: dict[str, Any]) -> None:
    assert "discovering the servers" in snapshot["err"]
    assert "reading 1024 shards" in snapshot["err"]
    summary = snapshot["out"]
    assert "mailboxes" in summary and "bytes written" in summary and "commands" in summary


@pytest.fixture(scope="module")
def report(snapshot: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    done = capacity("report", "--history", str(snapshot["history"]), "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Only one day of history" in done.stdout
    return out


async def test_report_of_one_snapshot(deployment: Deployment, report: Path) -> None:
    summary = json.loads((report / "summary.json").read_text())
    assert summary["history"]["days_with_data"] == 1
    assert summary["history"]["mode"] == TOPOLOGY
    assert any("Only one day" in n for n in summary["notices"])
    assert summary["forecast"]["status"] == "not_enough_history"
    boxes = summary["mailboxes"]
    assert (boxes["count"], boxes["didcomm"], boxes["mqs"]) == (
        len(deployment.didcomm) + len(deployment.mqs), len(deployment.didcomm), len(deployment.mqs)
    )  # fmt: skip
    assert boxes["didcomm_v2"] == 1
    assert summary["live"]["sockets"] == 1
    assert summary["inflight"]["histogram"] == [{"deliveries": 1, "messages": 4}]
    assert [d["queue"] for d in summary["dead_letters"]] == ["orders-dlq"]
    assert summary["coverage"]["mailboxes_read"] == boxes["count"]
    assert summary["verdict"]["status"] in ("under", "right", "over")
    assert "Only one day" in (report / "report.html").read_text()


async def test_no_raw_key_or_did_in_the_report(deployment: Deployment, report: Path) -> None:
    blob = _all_bytes(report)
    assert b"<svg" in blob
    for secret in deployment.recipient_keys:
        assert secret.encode() not in blob, secret
