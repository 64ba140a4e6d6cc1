"""The `servers` table: one row per Redis server (primaries and replicas) per snapshot, from
its INFO, and on a cluster its slots and `CLUSTER SLOT-STATS` (Valkey 8+, Redis 8.2+)."""

from __future__ import annotations

from typing import Any

import redis

from spark.source.topology import Server, Topology
from spark.tables.columns import Column, Table, struct_list

C = Column
SLOT_STATS = [
    ("slot", "int"),
    ("keys", "long"),
    ("cpu_usec", "long"),
    ("network_bytes_in", "long"),
    ("network_bytes_out", "long"),
]
SERVERS = Table(
    "servers",
    (
        C("server", "string", "host:port"),
        C("role", "string", "primary or replica"),
        C("primary", "string", "a replica's primary"),
        C("read", "boolean", "the snapshot read mailboxes from this server"),
        C("version", "string", "redis_version (Valkey reports a compatible one)"),
        C("used_memory", "long", "bytes the allocator gave the dataset and overhead"),
        C("used_memory_peak", "long", "the most used_memory has been since start"),
        C("maxmemory", "long", "the configured limit; 0: none"),
        C("total_system_memory", "long", "the host's memory"),
        C("maxmemory_policy", "string", "what happens at maxmemory (noeviction for us)"),
        C("used_memory_rss", "long", "resident set size"),
        C("fragmentation", "double", "mem_fragmentation_ratio: RSS / used"),
        C("keys", "long", "keys in the database"),
        C("ops_per_sec", "long", "instantaneous_ops_per_sec"),
        C("clients", "long", "connected_clients"),
        C("evicted_keys", "long", "keys evicted since start"),
        C(
            "replication_lag_seconds",
            "double",
            "a replica: seconds since its primary heard"
            " from it (its primary's view), else since it heard from its primary",
        ),
        C("replication_lag_bytes", "long", "a replica: primary offset minus its own"),
        C("aof_enabled", "boolean", "append-only file on"),
        C("aof_size", "long", "aof_current_size"),
        C("slots", "int", "cluster slots held (primaries); 16384 outside a cluster"),
        C("engine_shards", "int", "the engine's 1,024 shards it holds (primaries)"),
        struct_list("slot_stats", SLOT_STATS, "CLUSTER SLOT-STATS of its slots, where known"),
    ),
)


def server_rows(topology: Topology, read: set[str]) -> list[dict[str, Any]]:
    """A row per server; a server that does not answer is a StorageError (raised by INFO)."""
    infos = {s.endpoint.address: _info(topology, s) for s in topology.servers}
    rows = []
    for s in topology.servers:
        info = infos[s.endpoint.address]
        row = _from_info(info)
        row.update(
            server=s.endpoint.address,
            role=s.role,
            primary=s.primary.address if s.primary else None,
            read=s.endpoint.address in read,
        )
        if s.role == "replica" and s.primary is not None:
            row.update(_lag(infos.get(s.primary.address, {}), info, s))
        else:
            row.update(replication_lag_seconds=None, replication_lag_bytes=None)
        if s.role == "primary":
            held = sum(last - first + 1 for first, last in s.slots) if s.slots else 16384
            row.update(slots=held, engine_shards=len(s.shards))
            row["slot_stats"] = _slot_stats(topology, s) if s.slots else None
        else:
            row.update(slots=None, engine_shards=None, slot_stats=None)
        rows.append(row)
    return rows


def _info(topology: Topology, s: Server) -> dict[str, Any]:
    client = topology.auth.connect(s.endpoint)
    try:
        info: dict[str, Any] = client.info("everything")
    finally:
        client.close()
    return info


def _int(info: dict[str, Any], name: str) -> int | None:
    value = info.get(name)
    return None if value is None else int(value)


def _from_info(info: dict[str, Any]) -> dict[str, Any]:
    keyspace = sum(
        int(v.get("keys", 0)) for k, v in info.items() if k.startswith("db") and isinstance(v, dict)
    )
    return {
        "version": str(info.get("redis_version", "")),
        "used_memory": _int(info, "used_memory"),
        "used_memory_peak": _int(info, "used_memory_peak"),
        "maxmemory": _int(info, "maxmemory"),
        "total_system_memory": _int(info, "total_system_memory"),
        "maxmemory_policy": info.get("maxmemory_policy"),
        "used_memory_rss": _int(info, "used_memory_rss"),
        "fragmentation": float(info.get("mem_fragmentation_ratio", 0.0)),
        "keys": keyspace,
        "ops_per_sec": _int(info, "instantaneous_ops_per_sec"),
        "clients": _int(info, "connected_clients"),
        "evicted_keys": _int(info, "evicted_keys"),
        "aof_enabled": bool(int(info.get("aof_enabled", 0))),
        "aof_size": _int(info, "aof_current_size"),
    }


def _lag(primary: dict[str, Any], replica: dict[str, Any], s: Server) -> dict[str, Any]:
    seconds: float | None = None
    for name, value in primary.items():
        if not (name.startswith("slave") and isinstance(value, dict)):
            continue
        if int(value.get("port", -1)) == s.endpoint.port and value.get("lag") is not None:
            seconds = float(value["lag"])
    if seconds is None and replica.get("master_last_io_seconds_ago") is not None:
        seconds = float(replica["master_last_io_seconds_ago"])
    ahead = primary.get("master_repl_offset")
    behind = replica.get("slave_repl_offset")
    lag_bytes = None if ahead is None or behind is None else max(0, int(ahead) - int(behind))
    return {"replication_lag_seconds": seconds, "replication_lag_bytes": lag_bytes}


def _slot_stats(topology: Topology, s: Server) -> list[dict[str, int]] | None:
    client = topology.auth.connect(s.endpoint)
    out: list[dict[str, int]] = []
    try:
        for first, last in s.slots:
            reply = client.execute_command(  # type: ignore[no-untyped-call]
                "CLUSTER SLOT-STATS", "SLOTSRANGE", first, last
            )
            for slot, stats in reply:
                flat = stats if isinstance(stats, list) else [x for kv in stats.items() for x in kv]
                named = {_s(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 2)}
                out.append(
                    {
                        "slot": int(slot),
                        "keys": named.get("key-count", 0),
                        "cpu_usec": named.get("cpu-usec", 0),
                        "network_bytes_in": named.get("network-bytes-in", 0),
                        "network_bytes_out": named.get("network-bytes-out", 0),
                    }
                )
    except redis.ResponseError:
        return None  # a server without the command (Redis before 8.2, Valkey before 8)
    finally:
        client.close()
    return out


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
