"""A synthetic history written straight to Parquet with the tables' own Arrow schemas (the
contract between the two jobs): days of snapshots with known memory growth, mailbox sizes,
ages, live sockets, dead letter queues and counters, for the report's tests."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from spark.tables.cluster import CLUSTER
from spark.tables.columns import SCHEMA_VERSION, Table
from spark.tables.mailboxes import MAILBOXES
from spark.tables.servers import SERVERS

START = dt.datetime(2026, 10, 1, 3, 0, tzinfo=dt.UTC)
GIB = 1 << 30


def write_history(
    root: Path, *, days: int, mailboxes: int = 400, slope: float = 50e6, base: float = 2e9,
    primaries: int = 3, skip: tuple[int, ...] = (), seed: int = 7, version: int = SCHEMA_VERSION,
    added_per_day: list[int] | None = None, noise: float = 0.0,
) -> list[dt.datetime]:  # fmt: skip
    """Write `days` daily snapshots (minus the days in `skip`); the primaries' used memory
    summed is exactly `base + slope * day` (plus a normal error of `noise` bytes, when
    asked). Returns the snapshot times."""
    rng = random.Random(seed)
    times = []
    added = 0
    for day in range(days):
        if day in skip:
            continue
        when = START + dt.timedelta(days=day)
        times.append(when)
        added += (added_per_day[day] if added_per_day else 10_000) if day else 0
        used = base + slope * day + (rng.gauss(0, noise) if noise else 0.0)
        _write(root, SERVERS, when, _servers(used, primaries), version)
        _write(root, MAILBOXES, when, _mailboxes(rng, when, mailboxes, primaries), version)
        _write(root, CLUSTER, when, _cluster(added, mailboxes), version)
    return times


def _write(root: Path, table: Table, when: dt.datetime, rows: list[dict[str, Any]], v: int) -> None:
    folder = (
        root / table.name / f"snapshot_date={when:%Y-%m-%d}" / f"snapshot_id={when:%Y%m%dT%H%M%SZ}"
    )
    folder.mkdir(parents=True, exist_ok=True)
    schema = pa.schema(
        [("schema_version", pa.int32()), ("snapshot_time", pa.timestamp("us", tz="UTC"))]
        + [(f.name, f.type) for f in table.arrow_schema]
    )
    columns = {"schema_version": [v] * len(rows), "snapshot_time": [when] * len(rows)}
    columns.update({c: [r.get(c) for r in rows] for c in table.names})
    pq.write_table(pa.Table.from_pydict(columns, schema=schema), folder / "part-0.parquet")


def _servers(used: float, primaries: int) -> list[dict[str, Any]]:
    rows = []
    share = [1.3, 1.0, 0.7][:primaries] if primaries == 3 else [1.0] * primaries
    total = sum(share)
    for i in range(primaries):
        rows.append({
            "server": f"10.0.0.{i + 1}:6379", "role": "primary", "read": True,
            "used_memory": round(used * share[i] / total) if i else 0,
            "maxmemory": 4 * GIB, "total_system_memory": 16 * GIB, "used_memory_rss": 0,
            "used_memory_peak": int(used), "fragmentation": 1.1 + 0.2 * i, "keys": 1000 * (i + 1),
            "ops_per_sec": 100, "clients": 10, "aof_enabled": True, "aof_size": 1000,
            "slots": 16384 // primaries, "engine_shards": 1024 // primaries, "version": "9.0.0",
        })  # fmt: skip
    rows[0]["used_memory"] = int(used) - sum(r["used_memory"] for r in rows[1:])
    return rows


PROTOCOLS = {False: "didexchange/1.1", True: "didcomm/v2"}  # a fifth are v2 wallets


def _mailboxes(
    rng: random.Random, when: dt.datetime, n: int, primaries: int
) -> list[dict[str, Any]]:
    now = int(when.timestamp() * 1000)
    rows = []
    for i in range(n):
        stored = int(rng.paretovariate(1.2)) - 1 if i % 3 else 0
        in_flight = min(stored, rng.choice([0, 0, 0, 1, 2]))
        age = rng.choice([10_000, 4 * 3600_000, 3 * 86_400_000, 40 * 86_400_000])
        idle = rng.choice([3600_000, 10 * 86_400_000, 45 * 86_400_000, 100 * 86_400_000])
        mqs = i % 50 == 0
        dlq = i % 100 == 0
        rows.append({
            "namespace": "mqs" if mqs else "didcomm", "mailbox": f"{i:032x}",
            "name": f"queue-{i}" if mqs else None, "shard": i % 1024,
            "server": f"10.0.0.{(i % primaries) + 1}:6379", "read_ms": now,
            "created_ms": now - 200 * 86_400_000, "stored": stored,
            "visible": stored - in_flight, "in_flight": in_flight, "delayed": 0,
            "bytes": stored * rng.randint(200, 5000),
            "oldest_ms": now - age if stored else None, "newest_ms": now if stored else None,
            "last_delivered_ms": now - idle if i % 4 else None,
            "retention_seconds": 30 * 86_400, "visibility_timeout_seconds": 30,
            "delay_seconds": 0, "will_queue": True,
            "inflight_delivery_counts": [rng.choice([1, 1, 2, 5]) for _ in range(in_flight)],
            "dead_letter_sources": 1 if dlq else (0 if mqs else None),
            "handshake_protocol": None if mqs else PROTOCOLS[i % 5 == 1],
            "live": i % 7 == 0, "live_node": f"node-{i % 2}" if i % 7 == 0 else None,
            "memory_sampled": i % 10 == 0,
            "memory_bytes": 500 + 40 * stored if i % 10 == 0 else None,
        })  # fmt: skip
    return rows


def _cluster(added: int, mailboxes: int) -> list[dict[str, Any]]:
    common = {"mode": "cluster", "nodes_alive": 3, "workers_alive": 2, "read_from": "primary",
              "memory_sample_rate": 0.1, "commands": 5000, "duration_seconds": 12.5,
              "hash_key_id": "abc123def456", "layout_version": 2}  # fmt: skip
    return [
        {"namespace": "didcomm", **common, "queues": mailboxes - mailboxes // 50,
         "rows": mailboxes - mailboxes // 50, "added": added, "delivered": added // 2,
         "acknowledged": added // 3, "expired": added // 10, "dead_lettered": 0},
        {"namespace": "mqs", **common, "queues": mailboxes // 50, "rows": mailboxes // 50,
         "added": 0, "delivered": 0, "acknowledged": 0, "expired": 0, "dead_lettered": 0},
    ]  # fmt: skip
