"""Reading one partition's shards into `mailboxes` rows.

Per shard, one round trip of plain reads: the registries (SSCAN, never KEYS or SCAN) name
its queues, and its oldest index and schedule say which of them may hold messages. Then a
page of queues a round trip: one call of the engine's read-only script
(mediator/engine/snapshot.py: snapshot_page.lua, EVALSHA_RO, so replicas serve it) reads
each queue where it lives, so the client parses one reply per page instead of one per
command, plus `MEMORY USAGE` of the sampled queues' keys. A page holds at most a tenth of a
second's command budget. Figures are the engine's queue_stats, at the server's clock.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from redis.exceptions import NoScriptError, ResponseError

from mediator.engine import keys, scripts
from mediator.engine.model import Hold, QueueConfig, QueueRef
from mediator.engine.snapshot import SCRIPT, PageQueue, QueueReading, SnapshotPage, page_call
from mediator.mediation import record
from spark import pseudonyms
from spark.source.wire import Command, Wire, checked
from spark.tables.mailboxes import MAILBOXES

MAX_PAGE = 200  # queues a round trip
UNLIMITED_PAGE_COMMANDS = 4000  # commands a page may cost without a budget
SCAN_COUNT = 1000
INFLIGHT_LISTED = 1000


Defaults = tuple[tuple[str, str], ...]  # config fields and values, sorted


@dataclass(frozen=True)
class ReadPlan:
    """What a partition needs to know besides its shards, from the driver."""

    hash_key: bytes = field(repr=False)
    memory_sample_rate: float
    alive_nodes: frozenset[str]
    defaults: dict[str, Defaults]  # namespace -> config fields kept out of its hashes


@dataclass(frozen=True, slots=True)
class _Queue:
    """One queue of the shard being read: the engine's page entry (its keys and cost), its
    pseudonym, and whether its memory is sampled."""

    page: PageQueue
    mailbox: str
    sampled: bool

    @property
    def memory_keys(self) -> list[str]:
        return self.page.memory_keys if self.sampled else []


def read_shards(
    wire: Wire, server: str, shards: list[int], plan: ReadPlan
) -> Iterator[pa.RecordBatch]:
    budget = int(wire.pacer.rate / 10) if wire.pacer.rate > 0 else UNLIMITED_PAGE_COMMANDS
    checked(wire.run([("SCRIPT", "LOAD", scripts.source(SCRIPT))])[0])
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
        extra = q.page.cost + len(q.memory_keys)
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
            qualified = QueueRef(ns, name).qualified
            mailbox = pseudonyms.pseudonym(plan.hash_key, qualified)
            held = name in holding or qualified in due
            sampled = pseudonyms.sampled(mailbox, plan.memory_sample_rate)
            out.append(_Queue(PageQueue.of(shard, ns, name, held), mailbox, sampled))
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
    script_keys, args = page_call([q.page for q in page], INFLIGHT_LISTED)
    call: Command = ("EVALSHA_RO", scripts.sha(SCRIPT), len(script_keys), *script_keys, *args)
    memory: list[Command] = [("MEMORY", "USAGE", k) for q in page for k in q.memory_keys]
    estimate = sum(q.page.cost for q in page)
    wire.send([call, *memory], weight=estimate + len(memory))
    return (call, estimate), 1 + len(memory)


def _take_page(
    wire: Wire, page: list[_Queue], call: PageCall, replies: int, plan: ReadPlan,
    server: str, shard: int, rows: dict[str, list[Any]],
) -> None:  # fmt: skip
    got = wire.receive(replies)
    if isinstance(got[0], NoScriptError):  # the server lost its scripts (a restart)
        wire.run([("SCRIPT", "LOAD", scripts.source(SCRIPT))])
        got[0] = wire.run([call[0]], weight=call[1])[0]
    reply = SnapshotPage.decode(checked(got[0]))
    wire.pacer.correct(reply.commands - call[1])
    sizes = iter(got[1:])
    for q, reading in zip(page, reply.queues, strict=True):
        used = [next(sizes) for _ in q.memory_keys]
        if reading is None:
            continue  # deleted between the registry read and this one
        row = _row(q, reading, plan)
        row.update(server=server, shard=shard, read_ms=reply.now_ms, memory_sampled=q.sampled)
        known = [int(m) for m in used if m is not None and not isinstance(m, ResponseError)]
        row["memory_bytes"] = sum(known) if q.sampled else None
        for name, values in rows.items():
            values.append(row.get(name))


def _row(q: _Queue, r: QueueReading, plan: ReadPlan) -> dict[str, Any]:
    s, ns, mqs = r.stats, q.page.namespace, q.page.mqs
    row: dict[str, Any] = {
        "namespace": ns, "mailbox": q.mailbox, "name": q.page.name if mqs else None,
        "stored": s.stored, "visible": s.visible, "in_flight": s.in_flight,
        "delayed": s.delayed, "oldest_ms": s.oldest_ms, "newest_ms": s.newest_ms,
        "inflight_delivery_counts": list(r.receives),
        "dead_letter_sources": r.dead_letter_users, "outbox": r.outbox,
        "created_ms": r.created_ms, "bytes": s.bytes, "last_added_ms": s.last_added_ms,
        "last_delivered_ms": s.last_delivered_ms, "last_removed_ms": s.last_removed_ms,
    }  # fmt: skip
    row.update(_settings(tuple(r.settings.items()), plan.defaults.get(ns, ())))
    if mqs:
        row.update(_NO_CONNECTION, live=False, live_node=None)
    else:
        row.update(_connection(r), **_presence(r.presence, plan.alive_nodes))
    return row


_NO_CONNECTION: dict[str, Any] = {
    "connection_state": None, "handshake_protocol": None, "connection_ms": None, "keys": None,
    "explicit_pickup": None, "push_registered": None, "push_failures": None,
}  # fmt: skip


def _presence(holder: str, alive: frozenset[str]) -> dict[str, Any]:
    if not holder:
        return {"live": False, "live_node": None}
    node = Hold.node_of(holder)
    return {"live": node in alive, "live_node": node}


@functools.lru_cache(maxsize=4096)
def _settings(stored: tuple[tuple[str, str], ...], defaults: Defaults) -> dict[str, Any]:
    """A queue's settings from the fields it stores over the namespace's defaults (most
    mailboxes store none: the answer is cached)."""
    config = QueueConfig.from_fields(dict(stored), dict(defaults))
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


def _ms(value: bytes | None) -> int | None:
    return None if value is None else int(value)


def _connection(r: QueueReading) -> dict[str, Any]:
    cfg = r.record
    mediation = record.state_of(record.MEDIATION, cfg.get(record.MEDIATION))
    handshake = record.state_of(record.HANDSHAKE, cfg.get(record.HANDSHAKE))
    protocol = cfg.get(record.PROTOCOL)
    prefix = record.KEY.decode("latin-1")
    return {
        "connection_state": mediation or handshake,
        "handshake_protocol": protocol.decode() if protocol else None,
        "connection_ms": _ms(cfg.get(record.HANDSHAKE_MS)) or r.created_ms,
        "keys": sum(1 for k in cfg if k.startswith(prefix)),
        "explicit_pickup": record.EXPLICIT in cfg,
        "push_registered": record.SERVICES in cfg,
        "push_failures": int(cfg.get(record.PUSH_ATTEMPTS, b"0")),
    }
