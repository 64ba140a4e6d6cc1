"""Reading one partition's shards into `mailboxes` rows, a page of queues a round trip.

Per shard: its registries (SSCAN, never KEYS or SCAN) name its queues, and its oldest index
and schedule say which of them may hold messages. An empty queue costs two reads (its
config hash, and its presence for a DIDComm mailbox); a queue with messages a few more
(stream length, head and tail, in-flight and delayed sets), and then the receive counts of
its in-flight messages. Figures follow queue_stats.lua exactly, at the server's clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgpack
import pyarrow as pa
from redis.exceptions import ResponseError

from mediator.engine import keys
from mediator.engine.model import QUEUE_FIELDS, QueueConfig
from mediator.mediation import record
from spark import pseudonyms
from spark.source.wire import Command, Wire, checked
from spark.tables.mailboxes import MAILBOXES

PAGE = 200  # queues a round trip
SCAN_COUNT = 1000
INFLIGHT_LISTED = 1000
UNLIMITED = 0


@dataclass(frozen=True)
class ReadPlan:
    """What a partition needs to know besides its shards, from the driver."""

    hash_key: bytes = field(repr=False)
    memory_sample_rate: float
    alive_nodes: frozenset[str]
    defaults: dict[str, dict[str, str]]  # namespace -> config fields kept out of hashes


@dataclass
class _Queue:
    namespace: str
    name: str
    maybe_messages: bool
    oldest_hint: int | None = None
    keys: keys.QueueKeys = field(init=False)
    presence: str = ""
    threads: str = ""

    def __post_init__(self) -> None:
        qualified = f"{self.namespace}:{self.name}"
        self.keys = keys.queue_keys(qualified)
        if self.namespace == keys.DIDCOMM_NAMESPACE:
            conn = keys.connection_keys(self.name)
            self.presence, self.threads = conn.presence, conn.threads

    @property
    def qualified(self) -> str:
        return f"{self.namespace}:{self.name}"


def read_shards(
    wire: Wire, server: str, shards: list[int], plan: ReadPlan
) -> Iterator[pa.RecordBatch]:
    for shard in shards:
        now, queues = _list_shard(wire, shard)
        for start in range(0, len(queues), PAGE):
            yield _batch(
                _read_page(wire, queues[start : start + PAGE], now, plan), server, shard, now
            )


def _list_shard(wire: Wire, shard: int) -> tuple[int, list[_Queue]]:
    """The server's clock and the shard's queues, those that may hold messages marked: one
    round trip for most shards (a registry longer than a scan page takes more)."""
    registries = [keys.shard_registry(shard, ns) for ns in keys.NAMESPACES]
    head = wire.run(
        [("TIME",), ("ZRANGE", keys.shard_due(shard), 0, -1)]
        + [("ZRANGE", keys.shard_oldest(shard, ns), 0, -1, "WITHSCORES") for ns in keys.NAMESPACES]
        + [("SSCAN", key, 0, "COUNT", SCAN_COUNT) for key in registries]
    )
    seconds, micros = checked(head[0])
    now = int(seconds) * 1000 + int(micros) // 1000
    due = {m.decode() for m in checked(head[1])}
    out: list[_Queue] = []
    n = len(keys.NAMESPACES)
    for i, ns in enumerate(keys.NAMESPACES):
        flat = checked(head[2 + i])
        oldest = {flat[j].decode(): int(float(flat[j + 1])) for j in range(0, len(flat), 2)}
        for name in _registry(wire, registries[i], checked(head[2 + n + i])):
            held = name in oldest or f"{ns}:{name}" in due
            out.append(_Queue(ns, name, held, oldest.get(name)))
    return now, out


def _registry(wire: Wire, key: str, first: list[Any]) -> Iterator[str]:
    cursor, members = first
    while True:
        for m in members:
            yield m.decode()
        if int(cursor) == 0:
            return
        cursor, members = checked(wire.run([("SSCAN", key, cursor, "COUNT", SCAN_COUNT)])[0])


def _read_page(wire: Wire, queues: list[_Queue], now: int, plan: ReadPlan) -> list[dict[str, Any]]:
    commands: list[Command] = []
    spans: list[tuple[int, int]] = []
    for q in queues:
        first = len(commands)
        commands.append(("HGETALL", q.keys.cfg))
        if q.presence:
            commands.append(("GET", q.presence))
        if q.maybe_messages:
            commands += _message_reads(q.keys, now)
        if q.namespace == keys.MQS_NAMESPACE:
            commands += [("SCARD", q.keys.refs), ("HLEN", q.keys.outbox)]
        if pseudonyms.sampled(_hash(plan, q), plan.memory_sample_rate):
            commands += [("MEMORY", "USAGE", k) for k in _memory_keys(q)]
        spans.append((first, len(commands)))
    replies = wire.run(commands)
    rows = [_row(q, replies[a:b], now, plan) for q, (a, b) in zip(queues, spans, strict=True)]
    _second_round(wire, queues, rows)
    return [r for r in rows if r is not None]


def _message_reads(k: keys.QueueKeys, now: int) -> list[Command]:
    after = f"({now}"
    return [
        ("XLEN", k.stream),
        ("XRANGE", k.stream, "-", "+", "COUNT", 1),
        ("XREVRANGE", k.stream, "+", "-", "COUNT", 1),
        ("ZCOUNT", k.inflight, after, "+inf"),
        ("ZRANGEBYSCORE", k.inflight, after, "+inf", "LIMIT", 0, INFLIGHT_LISTED),
        ("ZCARD", k.delayed),
        ("ZRANGE", k.delayed, 0, 0),
        ("ZRANGE", k.delayed, -1, -1),
    ]


def _memory_keys(q: _Queue) -> list[str]:
    own = q.keys.own
    return [*own, q.presence, q.threads] if q.presence else own


def _hash(plan: ReadPlan, q: _Queue) -> str:
    return pseudonyms.pseudonym(plan.hash_key, q.qualified)


def _row(q: _Queue, replies: list[Any], now: int, plan: ReadPlan) -> dict[str, Any] | None:
    flat = checked(replies[0])
    cfg = {flat[i].decode("latin-1"): flat[i + 1] for i in range(0, len(flat), 2)}
    if "created" not in cfg:
        return None  # deleted between the registry read and this one
    at = 1
    row: dict[str, Any] = {"namespace": q.namespace, "mailbox": _hash(plan, q)}
    row["name"] = q.name if q.namespace == keys.MQS_NAMESPACE else None
    if q.presence:
        row.update(_presence(checked(replies[at]), plan.alive_nodes))
        at += 1
    else:
        row.update(live=False, live_node=None)
    row.update(_config(cfg, plan.defaults.get(q.namespace, {})))
    row.update(_connection(cfg) if q.presence else _NO_CONNECTION)
    row["_ids"] = []
    if q.maybe_messages:
        row.update(_messages(replies[at : at + 8], now))
        at += 8
    else:
        row.update(_EMPTY)
    if q.namespace == keys.MQS_NAMESPACE:
        row["dead_letter_sources"] = int(checked(replies[at]))
        row["outbox"] = int(checked(replies[at + 1]))
        at += 2
    else:
        row.update(dead_letter_sources=None, outbox=None)
    memory = replies[at:]
    row["memory_sampled"] = bool(memory)
    sizes = [int(m) for m in memory if m is not None and not isinstance(m, ResponseError)]
    row["memory_bytes"] = sum(sizes) if memory else None
    return row


_EMPTY: dict[str, Any] = {
    "stored": 0, "visible": 0, "in_flight": 0, "delayed": 0, "oldest_ms": None,
    "newest_ms": None, "inflight_delivery_counts": [], "_delayed_ends": [],
}  # fmt: skip
_NO_CONNECTION: dict[str, Any] = {
    "connection_state": None, "handshake_protocol": None, "connection_ms": None, "keys": None,
    "explicit_pickup": None, "push_registered": None, "push_failures": None,
}  # fmt: skip


def _presence(value: bytes | None, alive: frozenset[str]) -> dict[str, Any]:
    if value is None:
        return {"live": False, "live_node": None}
    node = value.decode().partition("/")[0]
    return {"live": node in alive, "live_node": node}


def _ms(value: bytes | None) -> int | None:
    return None if value is None else int(value)


def _config(cfg: dict[str, bytes], defaults: dict[str, str]) -> dict[str, Any]:
    stored = {k: cfg[k].decode() for k in QUEUE_FIELDS if k in cfg}
    fields = {**defaults, **stored}
    config = QueueConfig.from_fields(fields)
    return {
        "created_ms": _ms(cfg.get("created")),
        "bytes": int(cfg.get("bytes", b"0")),
        "last_added_ms": _ms(cfg.get("la")),
        "last_delivered_ms": _ms(cfg.get("ld")),
        "last_removed_ms": _ms(cfg.get("lr")),
        "retention_seconds": config.retention_seconds,
        "visibility_timeout_seconds": config.visibility_timeout_seconds,
        "delay_seconds": config.delay_seconds,
        "max_messages": config.max_messages,
        "max_bytes": config.max_bytes,
        "max_message_bytes": config.max_message_bytes,
        "max_receives": config.max_receives,
        "will_queue": config.will_queue,
        "dead_letter_queue": config.dead_letter_queue,
    }


def _connection(cfg: dict[str, bytes]) -> dict[str, Any]:
    mediation = record.state_of(record.MEDIATION, cfg.get(record.MEDIATION))
    handshake = record.state_of(record.HANDSHAKE, cfg.get(record.HANDSHAKE))
    protocol = cfg.get(record.PROTOCOL)
    prefix = record.KEY.decode("latin-1")
    return {
        "connection_state": mediation or handshake,
        "handshake_protocol": protocol.decode() if protocol else None,
        "connection_ms": _ms(cfg.get(record.HANDSHAKE_MS)) or _ms(cfg.get("created")),
        "keys": sum(1 for k in cfg if k.startswith(prefix)),
        "explicit_pickup": record.EXPLICIT in cfg,
        "push_registered": record.SERVICES in cfg,
        "push_failures": int(cfg.get(record.PUSH_ATTEMPTS, b"0")),
    }


def _entry_time(entries: list[Any]) -> int | None:
    if not entries:
        return None
    _, flat = entries[0]
    fields = dict(zip(flat[::2], flat[1::2], strict=True)) if isinstance(flat, list) else flat
    return int(fields[b"z"])


def _messages(r: list[Any], now: int) -> dict[str, Any]:
    stored, in_flight, delayed = int(checked(r[0])), int(checked(r[3])), int(checked(r[5]))
    ids = checked(r[4])
    return {
        "stored": stored,
        "visible": stored - in_flight,
        "in_flight": in_flight,
        "delayed": delayed,
        "oldest_ms": _entry_time(checked(r[1])),
        "newest_ms": _entry_time(checked(r[2])),
        "_ids": ids,
        "_delayed_ends": [*checked(r[6]), *checked(r[7])],
    }


def _second_round(wire: Wire, queues: list[_Queue], rows: list[dict[str, Any] | None]) -> None:
    """What depends on the first round: receive counts of in-flight messages, and the enqueue
    times of the first and last delayed messages (kept in their packed bodies)."""
    commands: list[Command] = []
    asks: list[tuple[dict[str, Any], str]] = []
    for q, row in zip(queues, rows, strict=True):
        if row is None:
            continue
        if row["_ids"]:
            commands.append(("HMGET", q.keys.receives, *row["_ids"]))
            asks.append((row, "receives"))
        if row.get("_delayed_ends"):
            commands.append(("HMGET", q.keys.delayed_bodies, *row["_delayed_ends"]))
            asks.append((row, "delayed"))
    for (row, what), reply in zip(asks, wire.run(commands), strict=True):
        values = checked(reply)
        if what == "receives":
            row["inflight_delivery_counts"] = [int(v) for v in values if v is not None]
        else:
            times = [int(msgpack.unpackb(v)[4]) for v in values if v is not None]
            if times:
                first, last = times[0], times[-1]
                row["oldest_ms"] = (
                    first if row["oldest_ms"] is None else min(first, row["oldest_ms"])
                )
                row["newest_ms"] = last if row["newest_ms"] is None else max(last, row["newest_ms"])
    for row in rows:
        if row is not None:
            row.pop("_ids", None)
            row.pop("_delayed_ends", None)
            row.setdefault("inflight_delivery_counts", [])


def _batch(rows: list[dict[str, Any]], server: str, shard: int, now: int) -> pa.RecordBatch:
    columns = MAILBOXES.empty_columns()
    for row in rows:
        row.update(server=server, shard=shard, read_ms=now)
        for name, values in columns.items():
            values.append(row.get(name))
    return MAILBOXES.batch(columns)
