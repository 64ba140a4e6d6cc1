"""Reading one partition's shards into `mailboxes` rows.

Per shard, one round trip of plain reads: the registries (SSCAN, never KEYS or SCAN) name
its queues, and its oldest index and schedule say which of them may hold messages. Then a
page of queues a round trip: one read-only script call (snapshot_page.lua, EVALSHA_RO, so
replicas serve it) reads each queue where it lives, so the client parses one reply per page
instead of one per command, plus `MEMORY USAGE` of the sampled queues' keys. A page holds at
most a tenth of a second's command budget. Figures follow the engine's queue_stats exactly,
at the server's clock.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import pyarrow as pa
from redis.exceptions import NoScriptError, ResponseError

from mediator.engine import keys
from mediator.engine.model import QUEUE_FIELDS, QueueConfig
from mediator.mediation import record
from spark import pseudonyms
from spark.source.wire import Command, Wire, checked
from spark.tables.mailboxes import MAILBOXES

MAX_PAGE = 200  # queues a round trip
UNLIMITED_PAGE_COMMANDS = 4000  # commands a page may cost without a budget
SCAN_COUNT = 1000
INFLIGHT_LISTED = 1000
IDLE_COST, HELD_COST = 2, 9  # commands the script runs for a queue, without receive counts
# Suffixes beside keys.QUEUE_SUFFIXES (keys.queue_keys' refs and digests,
# keys.connection_keys' others); checked against them in tests/capacity/test_reader_keys.py.
REFS, DIGESTS, PRESENCE, THREADS, THREADS_BEFORE, DEVICE = ":rf", ":dg", ":p", ":t", ":t:o", ":d"
SCRIPT = (resources.files("spark.source") / "snapshot_page.lua").read_text()
SCRIPT_SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()


Defaults = tuple[tuple[str, str], ...]  # config fields and values, sorted


@dataclass(frozen=True)
class ReadPlan:
    """What a partition needs to know besides its shards, from the driver."""

    hash_key: bytes = field(repr=False)
    memory_sample_rate: float
    alive_nodes: frozenset[str]
    defaults: dict[str, Defaults]  # namespace -> config fields kept out of its hashes


class _Queue:
    """One queue of the shard being read: its key names, built from the shard the registry
    named it in (no hashing of the name again)."""

    __slots__ = ("base", "mailbox", "maybe_messages", "mqs", "name", "namespace", "sampled")

    def __init__(
        self, shard: int, namespace: str, name: str, maybe: bool, mailbox: str, sampled: bool
    ) -> None:
        self.namespace, self.name, self.mailbox = namespace, name, mailbox
        self.maybe_messages, self.sampled = maybe, sampled
        self.mqs = namespace == keys.MQS_NAMESPACE
        self.base = f"q:{{{shard}}}:{namespace}:{name}"  # keys.queue_keys(...).cfg

    @property
    def cost(self) -> int:
        return (HELD_COST if self.maybe_messages else IDLE_COST) + (2 if self.mqs else 0)

    @property
    def script_keys(self) -> list[str]:
        b, s = self.base, keys.QUEUE_SUFFIXES
        return [b, b + s["stream"], b + s["inflight"], b + s["receives"], b + s["delayed"],
                b + s["delayed_bodies"], b + REFS, b + s["outbox"], b + PRESENCE]  # fmt: skip

    @property
    def flags(self) -> str:
        return ("m" if self.maybe_messages else "") + ("q" if self.mqs else "")

    @property
    def memory_keys(self) -> list[str]:
        b = self.base
        own = [b, *(b + x for x in keys.QUEUE_SUFFIXES.values()), b + REFS, b + DIGESTS]
        if self.mqs:
            return own
        return [*own, *(b + x for x in (PRESENCE, THREADS, THREADS_BEFORE, DEVICE))]


def read_shards(
    wire: Wire, server: str, shards: list[int], plan: ReadPlan
) -> Iterator[pa.RecordBatch]:
    budget = int(wire.pacer.rate / 10) if wire.pacer.rate > 0 else UNLIMITED_PAGE_COMMANDS
    checked(wire.run([("SCRIPT", "LOAD", SCRIPT)])[0])
    for shard in shards:
        queues = _list_shard(wire, shard, plan)
        rows = MAILBOXES.empty_columns()
        # Every page of the shard goes out before the first reply is read, so the client
        # builds rows while Redis runs the next page's script.
        sent = [(page, _send_page(wire, page)) for page in _pages(queues, max(1, budget))]
        for page, (call, replies) in sent:
            _take_page(wire, page, call, replies, plan, server, shard, rows)
        if rows["mailbox"]:
            yield MAILBOXES.batch(rows)


def _pages(queues: list[_Queue], budget: int) -> Iterator[list[_Queue]]:
    page: list[_Queue] = []
    cost = 0
    for q in queues:
        extra = q.cost + (len(q.memory_keys) if q.sampled else 0)
        if page and (cost + extra > budget or len(page) == MAX_PAGE):
            yield page
            page, cost = [], 0
        page.append(q)
        cost += extra
    if page:
        yield page


def _list_shard(wire: Wire, shard: int, plan: ReadPlan) -> list[_Queue]:
    """The shard's queues, those that may hold messages marked: one round trip for most
    shards (a registry longer than a scan page takes more)."""
    registries = [keys.shard_registry(shard, ns) for ns in keys.NAMESPACES]
    head = wire.run(
        [("ZRANGE", keys.shard_due(shard), 0, -1)]
        + [("ZRANGE", keys.shard_oldest(shard, ns), 0, -1) for ns in keys.NAMESPACES]
        + [("SSCAN", key, 0, "COUNT", SCAN_COUNT) for key in registries]
    )
    due = {m.decode() for m in checked(head[0])}
    out: list[_Queue] = []
    n = len(keys.NAMESPACES)
    for i, ns in enumerate(keys.NAMESPACES):
        holding = {m.decode() for m in checked(head[1 + i])}
        for name in _registry(wire, registries[i], checked(head[1 + n + i])):
            qualified = f"{ns}:{name}"
            mailbox = pseudonyms.pseudonym(plan.hash_key, qualified)
            held = name in holding or qualified in due
            sampled = pseudonyms.sampled(mailbox, plan.memory_sample_rate)
            out.append(_Queue(shard, ns, name, held, mailbox, sampled))
    return out


def _registry(wire: Wire, key: str, first: list[Any]) -> Iterator[str]:
    cursor, members = first
    while True:
        for m in members:
            yield m.decode()
        if int(cursor) == 0:
            return
        cursor, members = checked(wire.run([("SSCAN", key, cursor, "COUNT", SCAN_COUNT)])[0])


PageCall = tuple[Command, int]  # the script call and its estimated cost


def _send_page(wire: Wire, page: list[_Queue]) -> tuple[PageCall, int]:
    """Send the page's script call and its MEMORY USAGE reads; how many replies will come."""
    script_keys = [k for q in page for k in q.script_keys]
    call: Command = ("EVALSHA_RO", SCRIPT_SHA, len(script_keys), *script_keys,
                     INFLIGHT_LISTED, *(q.flags for q in page))  # fmt: skip
    memory: list[Command] = [
        ("MEMORY", "USAGE", k) for q in page if q.sampled for k in q.memory_keys
    ]
    estimate = sum(q.cost for q in page)
    wire.send([call, *memory], weight=estimate + len(memory))
    return (call, estimate), 1 + len(memory)


def _take_page(
    wire: Wire, page: list[_Queue], call: PageCall, replies: int, plan: ReadPlan,
    server: str, shard: int, rows: dict[str, list[Any]],
) -> None:  # fmt: skip
    got = wire.receive(replies)
    if isinstance(got[0], NoScriptError):  # the server lost its scripts (a restart)
        wire.run([("SCRIPT", "LOAD", SCRIPT)])
        got[0] = wire.run([call[0]], weight=call[1])[0]
    reply = checked(got[0])
    now, calls = int(reply[0]), int(reply[1])
    wire.pacer.correct(calls - call[1])
    sizes = iter(got[1:])
    for q, r in zip(page, reply[2:], strict=True):
        used = [next(sizes) for _ in q.memory_keys] if q.sampled else []
        row = _row(q, r, now, plan)
        if row is None:
            continue
        row.update(server=server, shard=shard, read_ms=now, memory_sampled=q.sampled)
        known = [int(m) for m in used if m is not None and not isinstance(m, ResponseError)]
        row["memory_bytes"] = sum(known) if q.sampled else None
        for name, values in rows.items():
            values.append(row.get(name))


def _row(q: _Queue, r: list[Any], now: int, plan: ReadPlan) -> dict[str, Any] | None:
    flat, held, stored, oldest, newest, in_flight, counts, delayed, users, outbox = r
    cfg = {flat[i].decode("latin-1"): flat[i + 1] for i in range(0, len(flat), 2)}
    if "created" not in cfg:
        return None  # deleted between the registry read and this one
    row: dict[str, Any] = {
        "namespace": q.namespace, "mailbox": q.mailbox, "name": q.name if q.mqs else None,
        "stored": int(stored), "visible": int(stored) - int(in_flight),
        "in_flight": int(in_flight), "delayed": int(delayed),
        "oldest_ms": _time(oldest), "newest_ms": _time(newest),
        "inflight_delivery_counts": [int(c) for c in counts],
        "dead_letter_sources": int(users) if q.mqs else None,
        "outbox": int(outbox) if q.mqs else None,
    }  # fmt: skip
    row.update(_config(cfg, plan.defaults.get(q.namespace, ())))
    if q.mqs:
        row.update(_NO_CONNECTION, live=False, live_node=None)
    else:
        row.update(_connection(cfg), **_presence(held, plan.alive_nodes))
    return row


_NO_CONNECTION: dict[str, Any] = {
    "connection_state": None, "handshake_protocol": None, "connection_ms": None, "keys": None,
    "explicit_pickup": None, "push_registered": None, "push_failures": None,
}  # fmt: skip


def _time(value: Any) -> int | None:
    return None if int(value) < 0 else int(value)


def _presence(value: bytes, alive: frozenset[str]) -> dict[str, Any]:
    if not value:
        return {"live": False, "live_node": None}
    node = value.decode().partition("/")[0]
    return {"live": node in alive, "live_node": node}


def _ms(value: bytes | None) -> int | None:
    return None if value is None else int(value)


def _config(cfg: dict[str, bytes], defaults: Defaults) -> dict[str, Any]:
    out = _settings(tuple((k, cfg[k]) for k in CONFIG_FIELDS if k in cfg), defaults)
    return {
        **out,
        "created_ms": _ms(cfg.get("created")),
        "bytes": int(cfg.get("bytes", b"0")),
        "last_added_ms": _ms(cfg.get("la")),
        "last_delivered_ms": _ms(cfg.get("ld")),
        "last_removed_ms": _ms(cfg.get("lr")),
    }


CONFIG_FIELDS = tuple(f for f in QUEUE_FIELDS if f not in ("bytes", "created", "la", "ld", "lr"))


@functools.lru_cache(maxsize=4096)
def _settings(stored: tuple[tuple[str, bytes], ...], defaults: Defaults) -> dict[str, Any]:
    """A queue's settings from the fields it stores over the namespace's defaults (most
    mailboxes store none: the answer is cached)."""
    config = QueueConfig.from_fields({**dict(defaults), **{k: v.decode() for k, v in stored}})
    return {
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
