"""Counters never drift: the shards' books (mediator/engine/books.py) against a full recount
from the queues themselves, and their cumulative counters against a ledger of what the test
did, on a single server and (marker `topology`) on a Sentinel set and a Redis Cluster. The
senders' queued bytes (mediator/mediation/senders.py) too: each queue's tally and each
sender's count must be what the model says it has queued.

- the engine, after a seeded random mix of everything that changes a queue (every operation
  is followed by a recount of the shards it touched, every phase by a recount of all);
- two real nodes under mqs traffic, one of them SIGKILLed in the middle and restarted;
- a DIDComm connection whose record (its queue's config) expires.

The tests run on storage of their own (`isolated_url`), emptied before and after each.
In-flight buckets count a deadline until the end of its second, so every comparison of the
in-flight count waits until no visibility deadline lies within the last second.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field, replace
from typing import cast

import httpx
import msgpack
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mediator.didcomm.did_peer import numalgo2_did
from mediator.engine import Engine, QueueConfig, QueueRef, ReceivedMessage, SendMessage, keys
from mediator.engine.books import (
    Totals,
    read_each_shard,
    read_shards,
    recount,
    recount_each_shard,
)
from mediator.engine.engine import OUTBOX_GRACE_MS
from mediator.engine.replies import received_message
from mediator.engine.scripts import Scripts
from mediator.errors import LimitExceeded, MessageNotFound, QueueNotFound
from mediator.mediation.senders import SenderBooks
from mediator.mqs import multipart
from mediator.settings import LimitSettings, QueueSettings
from mediator.storage.clients import Backend, RedisClient
from mediator.storage.target import Mode
from tests.didcomm_peer import Peer, mediator_key
from tests.eventually import eventually, redis_ms, until_redis_ms
from tests.local_server import LocalServer
from tests.mqs_client import create, parts, send
from tests.servers import Node, RedisUnderTest

SEED = 20261122
MQS, DC = keys.MQS_NAMESPACE, keys.DIDCOMM_NAMESPACE
NOW_FIELDS = ("q", "n", "d", "b", "fl")  # what a recount can count
CUMULATIVE = ("add", "dlv", "ack", "exp", "dl", "drop")  # what only a ledger can check


# ---------------------------------------------------------------------------- storage


@pytest.fixture(scope="module")
def books_url(redis_server: RedisUnderTest) -> str:
    """One isolated storage for the module (on a cluster: one more cluster, not two)."""
    return redis_server.isolated_url()


@pytest.fixture
async def fresh(books_url: str) -> AsyncIterator[Backend]:
    """The module's storage, emptied before the test and again after it (the next module
    on the same isolated storage expects to find it empty)."""
    backend = Backend(books_url)
    await backend.start()
    await backend.client.flushdb()
    yield backend
    await backend.client.flushdb()
    await backend.aclose()


def shard(qualified: str) -> int:
    return keys.shard_of(qualified)


def _t(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# ---------------------------------------------------------------------------- comparing


@dataclass
class Comparison:
    diffs: list[str]
    books: dict[int, dict[str, Totals]]
    seconds: float


async def compare_books(
    scripts: Scripts,
    redis: RedisClient,
    ledger: Counter[tuple[int, str, str]] | None = None,
) -> Comparison:
    """Every shard's books against a recount of its queues (q, n, d, b, in flight, oldest),
    the flow balance of every shard and namespace (add = ack + exp + dl + drop + n + d), and
    the cumulative counters against `ledger` ((shard, namespace, field) -> count) if given."""
    started = time.monotonic()
    books = await read_each_shard(scripts, range(keys.SHARDS))
    counted = await recount_each_shard(redis, range(keys.SHARDS))
    seconds = time.monotonic() - started
    diffs: list[str] = []
    for s in range(keys.SHARDS):
        for ns in keys.NAMESPACES:
            b, c = books[s][ns], counted[s][ns]
            where = f"shard {s} {ns}"
            diffs += differences(where, b, c, NOW_FIELDS)
            v = b.values
            out = v["ack"] + v["exp"] + v["dl"] + v["drop"] + v["n"] + v["d"]
            if v["add"] != out:
                diffs.append(
                    f"{where} flow: add {v['add']} != ack {v['ack']} + exp {v['exp']} + dl "
                    f"{v['dl']} + drop {v['drop']} + n {v['n']} + d {v['d']} = {out}"
                )
            if ledger is not None:
                for name in CUMULATIVE:
                    want = ledger[(s, ns, name)]
                    if v[name] != want:
                        diffs.append(f"{where} {name}: books {v[name]}, ledger {want}")
    # The namespace totals over all shards, as /metrics would sum them.
    _, summed = await read_shards(scripts, range(keys.SHARDS))
    for ns in keys.NAMESPACES:
        for name in (*NOW_FIELDS, *CUMULATIVE):
            per_shard = sum(books[s][ns].values[name] for s in range(keys.SHARDS))
            if summed[ns].values[name] != per_shard and name != "fl":
                diffs.append(f"all shards {ns} {name}: {summed[ns].values[name]} != {per_shard}")
    return Comparison(diffs, books, seconds)


def differences(where: str, books: Totals, counted: Totals, names: Iterable[str]) -> list[str]:
    """What the books say that the recount does not, field by field, and the oldest time."""
    out = [
        f"{where} {name}: books {books.values[name]}, recount {counted.values[name]}"
        for name in names
        if books.values[name] != counted.values[name]
    ]
    if books.oldest_ms != counted.oldest_ms:
        out.append(f"{where} oldest: books {books.oldest_ms}, recount {counted.oldest_ms}")
    return out


def totals_line(books: dict[int, dict[str, Totals]]) -> str:
    sums = {ns: Counter[str]() for ns in keys.NAMESPACES}
    for per in books.values():
        for ns, t in per.items():
            sums[ns].update(t.values)
    return "; ".join(
        f"{ns}: " + " ".join(f"{k}={sums[ns][k]}" for k in (*NOW_FIELDS, *CUMULATIVE))
        for ns in keys.NAMESPACES
    )


# ---------------------------------------------------------------------------- the model


@dataclass
class Msg:
    mid: str
    queue: str  # qualified name of the queue holding it (its source, while in the outbox)
    size: int
    sent_ms: int  # Redis time before its send: its first enqueue time is not earlier
    tag: str = ""
    outbox_to: str = ""  # the dead letter queue it is on its way to, while in an outbox
    sender: str = ""  # whose queued bytes it counts for ("": nobody's; not once dead-lettered)


@dataclass
class Queue:
    ref: QueueRef
    config: QueueConfig  # as it is now
    original: QueueConfig  # as the test first made it (a re-created queue gets it back)
    min_ret: int  # the shortest retention it had (ms): a purge needs at least that much age
    lazy: bool = False  # DIDComm: created by its first send

    @property
    def q(self) -> str:
        return self.ref.qualified

    @property
    def dead_letters(self) -> str:
        """The qualified dead letter queue, when it has one."""
        c = self.config
        if c.dead_letter_queue is None or c.max_receives is None:
            return ""
        return QueueRef(self.ref.namespace, c.dead_letter_queue).qualified


def cfg(ret_ms: int, vt_ms: int, **kw: int | str | None) -> QueueConfig:
    return QueueConfig(retention_ms=ret_ms, visibility_timeout_ms=vt_ms, **kw)  # type: ignore[arg-type]


HOUR, HALF = 3_600_000, 500  # ms: a retention nothing reaches, a short timer
LONGEST_SHORT = 2 * HALF  # the longest short retention (the "2 s" of whole-second timers)
MQS_QUEUES = {
    "plain": cfg(HOUR, 30_000),
    "short": cfg(HALF, 30_000),  # everything expires within the test
    "short2": cfg(LONGEST_SHORT, HALF),
    "late": cfg(HOUR, 30_000, delay_ms=HALF),
    "late-short": cfg(LONGEST_SHORT, 30_000, delay_ms=HALF),  # some expire on their promotion
    "dlq": cfg(LONGEST_SHORT, 0),  # dead letters expire here (counted from the first enqueue)
    "dlq-long": cfg(HOUR, 30_000),
    "src": cfg(HOUR, HALF, max_receives=2, dead_letter_queue="dlq"),
    "src1": cfg(HOUR, 0, max_receives=1, dead_letter_queue="dlq-long", max_messages=30),
    "src-late": cfg(HOUR, 0, delay_ms=HALF, max_receives=2, dead_letter_queue="dlq-long"),
    "capped": cfg(HOUR, 30_000, max_messages=12, max_bytes=900, max_message_bytes=110),
}
SOURCES = ("src", "src1", "src-late")
DC_DEFAULTS = cfg(HOUR, 30_000, max_messages=25, max_bytes=2500)
DC_CREATED = ("d0", "d1")  # created up front; d2, d3 lazily by their first send
DC_LAZY = ("d2", "d3")
TAGS = ("k0", "k1", "k2")
SENDERS = ("", "senderA", "senderB")


class Mix:
    """The engine, a model of where every message is, and the ledger of what the books'
    cumulative counters must say, per (shard, namespace, field)."""

    def __init__(self, engine: Engine, redis: RedisClient, rng: random.Random, routed: bool):
        self.engine = engine
        self.redis = redis
        self.rng = rng
        # Senders drawn apart, so that the operations' sequence is the seed's alone.
        self.senders = random.Random(SEED + 1)
        self.routed = routed  # forward.lua may run (every key on one server)
        self.queues: dict[str, Queue] = {}  # by qualified name: the ones that exist now
        self.known: dict[str, Queue] = {}  # every queue ever made, by qualified name
        self.msgs: dict[str, Msg] = {}  # messages that exist (stored, delayed, in an outbox)
        self.gone: list[str] = []  # ids acknowledged, expired, dropped (deletes must fail)
        self.ledger: Counter[tuple[int, str, str]] = Counter()
        self.deadlines: list[int] = []  # visibility deadlines handed out (ms)
        self.log: list[str] = []
        self.touched: set[str] = set()  # queues the current operation worked on

    # ------------------------------------------------------------ bookkeeping

    def count(self, qualified: str, name: str, n: int = 1) -> None:
        self.touched.add(qualified)
        if n:
            self.ledger[(shard(qualified), qualified.partition(":")[0], name)] += n

    def note(self, text: str) -> None:
        self.log.append(f"{len(self.log):4d} {text}")

    async def done(self, text: str) -> None:
        """An operation is over: log it, and check the shards it worked on."""
        self.note(text)
        await self.check_touched()

    def forget(self, mid: str) -> None:
        del self.msgs[mid]
        self.gone.append(mid)

    def in_queue(self, q: str) -> list[Msg]:
        return [m for m in self.msgs.values() if m.queue == q and not m.outbox_to]

    def add_queue(self, ref: QueueRef, config: QueueConfig, *, lazy: bool = False) -> Queue:
        known = self.known.get(ref.qualified)
        original = known.original if known else config
        queue = Queue(ref, config, original, config.retention_ms, lazy)
        self.queues[ref.qualified] = self.known[ref.qualified] = queue
        return queue

    def received(
        self, queue: Queue, got: Iterable[ReceivedMessage], moved: list[str] | None
    ) -> None:
        """A receive handed these out: each counts as delivered; those at max receives went
        to the dead letter queue (`moved`: what the script said, for a receive that died
        before its hand-over; None: handed over by the engine in the same call)."""
        self.touched.add(queue.q)
        dlq = queue.dead_letters
        for i, m in enumerate(got):
            mid, receives, visible_at = m.message_id, m.receives, m.visible_at_ms
            msg = self.msgs.get(mid)
            assert msg is not None and msg.queue == queue.q and not msg.outbox_to, (
                f"{queue.q} handed out {mid}, which the model has at {msg}"
            )
            self.count(queue.q, "dlv")
            limit = queue.config.max_receives
            dead = bool(dlq) and limit is not None and receives >= limit
            if moved is not None:
                assert (moved[i] != "") == dead, (queue.q, mid, receives, moved[i])
            if not dead:
                self.deadlines.append(visible_at)
                continue
            self.count(queue.q, "dl")
            msg.sender = ""  # it left its sender's queue: its bytes were given back
            if moved is not None:
                msg.outbox_to = dlq  # left in the outbox: a worker hands it over later
            else:
                self.accept(msg, dlq)

    def accept(self, msg: Msg, dlq: str) -> None:
        """A hand-over: the dead letter queue takes it (as delayed), or it is lost with a
        dead letter queue that is gone; either way it leaves the source's outbox."""
        msg.outbox_to = ""
        if dlq in self.queues:
            msg.queue = dlq
            self.count(dlq, "add")
        else:
            self.forget(msg.mid)

    # ------------------------------------------------------------ raw storage

    async def reconcile(self, label: str, only: Iterable[str] | None = None) -> None:
        """Read every queue (or `only` these) as stored: messages the model holds that are
        gone were purged (past their retention: `exp`); nothing may appear from nowhere; each
        queue's byte count must be the sum of its bodies, each body the size that was sent."""
        now = await redis_ms(self.redis)
        chosen = self.queues if only is None else {q: self.queues[q] for q in only}
        for q, queue in sorted(chosen.items()):
            qk = keys.queue_keys(q)
            pipe = self.redis.pipeline(transaction=False)
            pipe.xrange(qk.stream, "-", "+")
            pipe.hgetall(qk.delayed_bodies)
            pipe.zrange(qk.delayed, 0, -1)
            pipe.hgetall(qk.outbox)
            pipe.hget(qk.cfg, "bytes")
            pipe.hgetall(qk.cfg)
            entries, dbodies, delayed, outbox, size, config = await pipe.execute()
            present: dict[str, int] = {}
            for _, f in entries:
                present[_t(f[b"i"])] = len(f[b"b"])
            for mid in delayed:
                packed = dbodies[mid]
                present[_t(mid)] = len(msgpack.unpackb(packed, raw=True)[5])
            in_outbox = {_t(k) for k, v in outbox.items() if not v.startswith(b"x:")}
            for msg in self.in_queue(q):
                if msg.mid in present:
                    assert present.pop(msg.mid) == msg.size, (label, q, msg)
                    continue
                # Purged: only ever past the queue's retention, counted from the first enqueue.
                age = now - msg.sent_ms
                assert age >= queue.min_ret, (
                    f"[{label}] {msg.mid} vanished from {q} {age} ms after it was sent, "
                    f"retention {queue.min_ret} ms"
                )
                self.count(q, "exp")
                self.forget(msg.mid)
            assert not present, f"[{label}] {q} holds messages the test never put there: {present}"
            expected = {m.mid for m in self.msgs.values() if m.queue == q and m.outbox_to}
            assert in_outbox == expected, (label, q, in_outbox, expected)
            bodies = sum(m.size for m in self.in_queue(q))
            assert int(size or 0) == bodies, f"[{label}] {q}: bytes {size}, bodies {bodies}"
            tally = {_t(k)[2:]: int(v) for k, v in config.items() if _t(k).startswith("q:")}
            assert tally == self.queued_by_sender(self.in_queue(q)), (label, q, tally)

    def queued_by_sender(self, msgs: Iterable[Msg]) -> dict[str, int]:
        out: Counter[str] = Counter()
        for m in msgs:
            if m.sender and m.size:
                out[m.sender] += m.size
        return dict(out)

    async def check_senders(self, label: str) -> None:
        """Every shard's changed senders copied into their counts (as the workers do): each
        count is what the model holds of that sender (stored, delayed or handed out), and
        every shard is left with nothing marked to copy."""
        books = SenderBooks(self.redis, self.engine.scripts, LimitSettings(), QueueSettings())
        now = await redis_ms(self.redis)
        for s in await self.shards_with_senders_to_copy():  # the others' settle finds nothing
            await books.settle(s, now)
        want = self.queued_by_sender(m for m in self.msgs.values() if not m.outbox_to)
        for sender in SENDERS[1:]:
            got = int(await self.redis.hget(keys.sender_queued(sender), "@") or 0)
            assert got == want.get(sender, 0), f"[{label}] {sender}: counted {got}, {want}"
        left = await self.shards_with_senders_to_copy()
        assert not left, f"[{label}] senders left to copy or scheduled in shards {left}"

    async def shards_with_senders_to_copy(self) -> list[int]:
        """The shards with changed senders marked, or their copy scheduled."""
        pipe = self.redis.pipeline(transaction=False)
        for s in range(keys.SHARDS):
            pipe.exists(keys.shard_senders_changed(s))
            pipe.zscore(keys.shard_due(s), keys.SENDERS_MEMBER)
        marks = await pipe.execute()
        return [s for s in range(keys.SHARDS) if marks[2 * s] or marks[2 * s + 1] is not None]

    async def settle_deadlines(self, margin_ms: int) -> None:
        """Wait until no deadline lies in the last second or in the next `margin_ms`: the
        buckets count a deadline until the end of its second, a recount only until it."""
        while True:
            now = await redis_ms(self.redis)
            scores = list(self.deadlines)
            for q in self.queues:
                got = await self.redis.zrangebyscore(
                    keys.queue_keys(q).inflight, now - 1000, now + margin_ms, withscores=True
                )
                scores += [int(s) for _, s in cast(list[tuple[bytes, float]], got) if s == int(s)]
            close = [d for d in scores if now - 1000 < d <= now + margin_ms]
            self.deadlines = [d for d in self.deadlines if d > now - 1000]
            if not close:
                return
            at = max(close) + 1000 + 25  # the margin grows on a slow machine: so may this
            await until_redis_ms(self.redis, at, within=(at - now) / 1000 + 10)

    async def check(self, label: str) -> None:
        margin = 1500
        for _ in range(3):
            await self.settle_deadlines(margin)
            await self.reconcile(label)
            result = await compare_books(self.engine.scripts, self.redis, self.ledger)
            if not result.diffs or result.seconds * 1000 < margin:
                break
            margin = int(result.seconds * 2000) + 500  # slower than the margin: again
        if result.diffs:
            ops = "\n".join(self.log[-60:])
            pytest.fail(
                f"[{label}] seed {SEED}: the books drifted\n"
                + "\n".join(result.diffs)
                + "\nqueues by shard: "
                + ", ".join(f"{q}={shard(q)}" for q in sorted(self.known))
                + f"\ntotals: {totals_line(result.books)}\nlast operations:\n{ops}"
            )
        self.note(f"check {label}: {totals_line(result.books)}")
        await self.check_senders(label)

    # ------------------------------------------------------------ operations

    def pick_queue(self, namespace: str | None = None) -> Queue:
        names = sorted(q for q in self.queues if namespace is None or q.startswith(namespace))
        return self.queues[self.rng.choice(names)]

    def bodies(self, n: int) -> list[bytes]:
        return [self.rng.randbytes(self.rng.choice((0, 5, 40, 90, 120))) for _ in range(n)]

    async def send(self, queue: Queue | QueueRef, n: int) -> None:
        ref = queue.ref if isinstance(queue, Queue) else queue
        bodies = self.bodies(n)
        tags = [self.rng.choice(TAGS) for _ in bodies]
        sender = self.senders.choice(SENDERS)
        lazy = ref.namespace == DC
        before = await redis_ms(self.redis)
        messages = [
            SendMessage(b, trace_id=t, sender=sender) for b, t in zip(bodies, tags, strict=True)
        ]
        try:
            sent = await self.engine.send(ref, messages, create_with=DC_DEFAULTS if lazy else None)
        except (LimitExceeded, QueueNotFound) as exc:
            await self.done(f"send {n} to {ref.qualified}: refused ({exc})")
            return
        if ref.qualified not in self.queues:
            assert lazy, ref
            self.add_queue(ref, DC_DEFAULTS, lazy=True)
        for mid, body, tag in zip(sent.message_ids, bodies, tags, strict=True):
            self.msgs[mid] = Msg(mid, ref.qualified, len(body), before, tag, sender=sender)
        self.count(ref.qualified, "add", n)
        await self.done(f"send {n} to {ref.qualified}: {sent.visible} now, {sent.delayed} later")

    async def forward(self, name: str) -> None:
        """A forward through a route (forward.lua), where the deployment allows it."""
        raw = uuid.uuid5(uuid.NAMESPACE_OID, name).bytes * 2
        bucket = keys.routes_bucket(raw)
        await self.redis.hset(bucket, raw, name)  # type: ignore[arg-type,unused-ignore]
        (body,) = self.bodies(1)
        sender = self.senders.choice(SENDERS)
        before = await redis_ms(self.redis)
        message = SendMessage(body, trace_id="k0", sender=sender)
        try:
            done = await self.engine.send_routed(bucket, raw, message)
        except LimitExceeded as exc:
            await self.done(f"forward to {name}: refused ({exc})")
            return
        assert done is not None
        ref = QueueRef(DC, name)
        if ref.qualified not in self.queues:
            self.add_queue(ref, DC_DEFAULTS, lazy=True)
        (mid,) = done[3].message_ids
        self.msgs[mid] = Msg(mid, ref.qualified, len(body), before, "k0", sender=sender)
        self.count(ref.qualified, "add")
        await self.done(f"forward to {ref.qualified}")

    async def receive(self, queue: Queue) -> None:
        n = self.rng.randint(1, 6)
        vt = self.rng.choice((None, 0, 500, 1000, 60_000))
        if queue.q.removeprefix("mqs:") in SOURCES:
            vt = self.rng.choice((0, 0, 500, None, 60_000))  # mostly back soon: max receives
        got = await self.engine.receive(queue.ref, n, visibility_timeout_ms=vt)
        self.received(queue, got.messages, None)
        await self.done(f"receive {n} vt {vt} from {queue.q}: {len(got.messages)}")

    async def receive_dying(self, queue: Queue) -> None:
        """The receive script alone, as a node that died before its hand-over leaves it."""
        qk = keys.queue_keys(queue.q)
        n = self.rng.randint(1, 4)
        args = [queue.q, "", n, self.rng.choice(("0", "60000")), 0, OUTBOX_GRACE_MS, ""]
        r = await self.engine.scripts.call("receive", qk.all, args)
        count = int(r[3])
        rows = [r[6 + 9 * i : 15 + 9 * i] for i in range(count)]
        got = [received_message(row) for row in rows]
        self.received(queue, got, [_t(row[8]) for row in rows])
        await self.done(f"receive (node dies) {n} from {queue.q}: {count}")

    async def upkeep(self, queue: Queue) -> None:
        """One queue's upkeep, outbox hand-overs included (grace 0: every entry is due)."""
        self.touched.add(queue.q)
        handed = [m for m in self.msgs.values() if m.queue == queue.q and m.outbox_to]
        await self.engine.upkeep(queue.q, grace_ms=0)
        for msg in handed:
            self.accept(msg, msg.outbox_to)
        await self.done(f"upkeep {queue.q}: {len(handed)} handed over")

    async def receive_filtered(self, queue: Queue) -> None:
        n = self.rng.randint(1, 5)
        tag = self.rng.choice((None, *TAGS))
        cut: int | None = None
        if self.rng.random() < 0.5:
            mine = self.in_queue(queue.q)
            cut = self.rng.choice(mine).sent_ms if mine else await redis_ms(self.redis) - 300
        vt = self.rng.choice((None, 500, 1000, 60_000))
        got = await self.engine.receive_filtered(
            queue.ref, n, visibility_timeout_ms=vt, tag=tag, min_enqueue_ms=cut
        )
        for m in got.messages:
            assert tag is None or m.trace_id == tag, (tag, m)
            assert cut is None or m.published_ms >= cut or m.receives > 1, (cut, m)
        self.received(queue, got.messages, None)
        got_n = len(got.messages)
        await self.done(f"receive_filtered {n} tag {tag} cut {cut} from {queue.q}: {got_n}")

    async def reclaim(self, queue: Queue) -> None:
        got = await self.engine.reclaim_inflight(queue.ref, self.rng.choice((500, 60_000)))
        self.received(queue, got, None)
        await self.done(f"reclaim_inflight {queue.q}: {len(got)}")

    async def release(self, queue: Queue) -> None:
        """A socket closed with deliveries unacknowledged: visible again at once."""
        self.touched.add(queue.q)
        mine = [m.mid for m in self.in_queue(queue.q)]
        ids = self.rng.sample(mine, min(len(mine), self.rng.randint(1, 4)))
        released = await self.engine.release(queue.ref, ids)
        await self.done(f"release {len(ids)} in {queue.q}: {released}")

    async def delete_by_id(self) -> None:
        roll = self.rng.random()
        outboxed = sorted(m.mid for m in self.msgs.values() if m.outbox_to)
        live = sorted(m.mid for m in self.msgs.values() if not m.outbox_to)
        if roll < 0.12 and self.gone:
            mid = self.rng.choice(self.gone)
            msg = None
        elif roll < 0.3 and outboxed:
            mid = self.rng.choice(outboxed)
            msg = self.msgs[mid]
        elif live:
            mid = self.rng.choice(live)
            msg = self.msgs[mid]
        else:
            return
        if msg is not None and not msg.outbox_to:
            await self.reconcile("before a delete", [msg.queue])  # purged already?
            if mid not in self.msgs:
                return
        namespace = MQS if msg is None or msg.queue.startswith("mqs:") else DC
        if namespace == DC:
            assert msg is not None
            deleted = await self.engine.delete_in_queue(QueueRef.parse(msg.queue), mid)
        else:
            try:
                await self.engine.delete_message(MQS, mid)
                deleted = True
            except MessageNotFound:
                deleted = False
        where = "gone" if msg is None else ("outbox" if msg.outbox_to else msg.queue)
        await self.done(f"delete {mid[:8]} ({where}): {'deleted' if deleted else 'not found'}")
        assert deleted == (msg is not None), f"delete of {mid} ({where}): {deleted}"
        if msg is None:
            return
        if not msg.outbox_to:
            self.count(msg.queue, "ack")
        self.forget(mid)  # from an outbox: a tombstone, counted once, as dead-lettered

    async def acknowledge(self, queue: Queue) -> None:
        """Several ids deleted in a recipient's own queue in one call (some not in it)."""
        await self.reconcile("before an acknowledge", [queue.q])
        mine = sorted(m.mid for m in self.in_queue(queue.q))
        ids = self.rng.sample(mine, min(len(mine), self.rng.randint(1, 6)))
        foreign = [m for m in self.msgs.values() if m.queue != queue.q][:2]
        answer = await self.engine.acknowledge(queue.ref, [*ids, *(m.mid for m in foreign), "x"])
        deleted = answer[0]  # (deleted, the queue's counts after, ...)
        assert deleted == len(ids), (queue.q, deleted, ids)
        for mid in ids:
            self.count(queue.q, "ack")
            self.forget(mid)
        await self.done(f"acknowledge {len(ids)} (+{len(foreign) + 1} not there) in {queue.q}")

    async def fresh_deadline(self) -> None:
        """A deadline later in the current second is in flight in the books at once (its
        bucket is the second it ends in, rounded up), exactly as the recount says."""
        await self.settle_deadlines(1500)
        candidates = [q for q in self.queues.values() if self.in_queue(q.q)]
        queue = self.rng.choice(sorted(candidates, key=lambda q: q.q))
        now = await redis_ms(self.redis)
        if now % 1000 not in range(50, 350):
            at = now - now % 1000 + 150  # 150 ms into this second, or else the next
            await until_redis_ms(self.redis, at if at > now else at + 1000)
        if queue.ref.namespace == DC:
            got = await self.engine.receive_filtered(queue.ref, 3, visibility_timeout_ms=500)
        else:
            got = await self.engine.receive(queue.ref, 3, visibility_timeout_ms=500)
        self.received(queue, got.messages, None)
        s = shard(queue.q)
        ns = queue.ref.namespace
        books = (await read_shards(self.engine.scripts, [s]))[1][ns].values["fl"]
        counted = (await recount(self.redis, [s]))[ns].values["fl"]
        hidden = sum(1 for m in got.messages if m.visible_at_ms > got.now_ms)
        await self.done(f"fresh deadlines in {queue.q}: {hidden}, books {books}, recount {counted}")
        assert books == counted, f"shard {s} {ns} fl: books {books}, recount {counted}"

    async def reclaim_long(self, queue: Queue) -> None:
        """Hand some out for a minute, then again to a new socket (reclaim_inflight): their
        old deadlines leave the buckets, the new ones are counted until the next check."""
        await self.send(queue, 3)
        got = await self.engine.receive_filtered(queue.ref, 3, visibility_timeout_ms=60_000)
        self.received(queue, got.messages, None)
        again = await self.engine.reclaim_inflight(queue.ref, 60_000)
        self.received(queue, again, None)
        await self.done(f"hand out {len(got.messages)} in {queue.q}, reclaim {len(again)}")

    async def purge_by_receives(self) -> None:
        """Receives that hand nothing out but purge what expired: a filtered receive for a
        recipient key no message has, a plain receive of a queue with nothing visible."""
        for queue in sorted(self.queues.values(), key=lambda q: q.q):
            if queue.ref.namespace == DC:
                got = await self.engine.receive_filtered(queue.ref, 5, tag="nobody")
            else:
                got = await self.engine.receive(queue.ref, 1, visibility_timeout_ms=60_000)
            self.received(queue, got.messages, None)
            await self.done(f"receive that purges {queue.q}: {len(got.messages)}")

    async def delete_elsewhere(self) -> None:
        """delete_in_queue with a queue that does not hold the message changes nothing."""
        dc = [m for m in self.msgs.values() if m.queue.startswith("didcomm:") and not m.outbox_to]
        if not dc:
            return
        msg = self.rng.choice(sorted(dc, key=lambda m: m.mid))
        other = self.pick_queue(DC)
        if other.q == msg.queue:
            return
        assert not await self.engine.delete_in_queue(other.ref, msg.mid)
        await self.done(f"delete {msg.mid[:8]} in {other.q} (not there)")

    async def set_limits(
        self,
        queue: Queue,
        retention: int | None = None,
        count: int | None = None,
        will: bool | None = None,
    ) -> None:
        """Queue Management's limits: a shorter retention applies at once, a count limit
        or will_queue false refuse sends."""
        ret = retention or self.rng.choice((HALF, LONGEST_SHORT, HOUR, HOUR))
        if retention is None:
            count = self.rng.choice((None, 3, 25))
        if will is None:
            will = self.rng.random() > 0.2
        await self.engine.set_limits(
            queue.ref,
            max_messages=count,
            max_bytes=None,
            max_message_bytes=None if retention else self.rng.choice((None, 100)),
            retention_ms=ret,
            will_queue=will,
        )
        queue.config = replace(queue.config, retention_ms=ret, max_messages=count)
        queue.min_ret = min(queue.min_ret, ret)
        await self.done(f"set_limits {queue.q}: retention {ret} ms, count {count}, will {will}")

    async def delete_queue(self, queue: Queue) -> None:
        """Delete a queue with what it holds (some handed out): those count as dropped; an
        outbox's entries are lost (already counted as dead-lettered); queues that used it as
        their dead letter queue lose it (cascade)."""
        self.touched.add(queue.q)
        await self.reconcile(f"before deleting {queue.q}")
        held = self.in_queue(queue.q)
        hidden = await self.redis.zcount(
            keys.queue_keys(queue.q).inflight, f"({await redis_ms(self.redis)}", "+inf"
        )
        await self.engine.delete_queue(queue.ref, cascade=True)
        self.count(queue.q, "drop", len(held))
        for m in [m for m in self.msgs.values() if m.queue == queue.q]:
            self.forget(m.mid)
        del self.queues[queue.q]
        for user in self.queues.values():
            if user.dead_letters == queue.q:
                user.config = replace(user.config, max_receives=None, dead_letter_queue=None)
        await self.done(f"delete queue {queue.q}: {len(held)} dropped, {hidden} of them in flight")

    async def recreate(self, qualified: str) -> None:
        """A deleted queue made again with its first settings (a DIDComm one by a send); the
        queues that used it as their dead letter queue get it back."""
        queue = self.known[qualified]
        if queue.lazy:
            await self.send(queue.ref, 1)
            return
        config = queue.original
        if config.dead_letter_queue and queue.dead_letters not in self.queues:
            config = replace(config, max_receives=None, dead_letter_queue=None)
        await self.engine.create_queue(queue.ref, config)
        self.add_queue(queue.ref, config)
        self.touched.add(qualified)
        for user in list(self.queues.values()):
            wanted = replace(user, config=user.original).dead_letters
            if wanted == qualified and user.dead_letters != qualified:
                await self.engine.update_queue(user.ref, user.original)
                user.config = user.original
                user.min_ret = min(user.min_ret, user.original.retention_ms)
                await self.done(f"update {user.q}: dead letter queue {qualified} again")
        await self.done(f"create queue {qualified} again")

    async def step(self) -> None:
        """One operation, chosen by the seeded generator."""
        ops = (
            ("send", 30),
            ("receive", 16),
            ("receive_dying", 3),
            ("delete", 14),
            ("filtered", 9),
            ("plain_dc", 3),
            ("release", 4),
            ("reclaim", 2),
            ("elsewhere", 1),
            ("acknowledge", 4),
            ("limits", 1),
            ("upkeep", 5),
            ("forward", 2 if self.routed else 0),
        )
        op = self.rng.choices([o for o, _ in ops], weights=[w for _, w in ops])[0]
        if op == "send":
            if self.rng.random() < 0.15:  # a lazy DIDComm queue, or a deleted queue
                ref = QueueRef.parse(self.rng.choice(sorted(self.known)))
                if ref.qualified not in self.queues:
                    await self.send(ref, self.rng.randint(1, 3))
                    return
            await self.send(self.pick_queue(), self.rng.choice((1, 1, 2, 3, 5, 8)))
        elif op == "receive":
            await self.receive(self.pick_queue(MQS))
        elif op == "receive_dying":
            sources = [q for q in self.queues.values() if q.dead_letters]
            if sources:
                await self.receive_dying(self.rng.choice(sorted(sources, key=lambda q: q.q)))
        elif op == "delete":
            await self.delete_by_id()
        elif op == "filtered":
            await self.receive_filtered(self.pick_queue(DC))
        elif op == "plain_dc":
            await self.receive(self.pick_queue(DC))
        elif op == "release":
            await self.release(self.pick_queue(DC))
        elif op == "reclaim":
            await self.reclaim(self.pick_queue(DC))
        elif op == "acknowledge":
            await self.acknowledge(self.pick_queue(DC))
        elif op == "elsewhere":
            await self.delete_elsewhere()
        elif op == "limits":
            await self.set_limits(self.pick_queue(DC))
        elif op == "upkeep":
            await self.upkeep(self.pick_queue())
        elif op == "forward":
            await self.forward(self.rng.choice(("d3", "d1")))

    async def run(self, steps: int) -> None:
        for _ in range(steps):
            await self.step()

    async def check_touched(self) -> None:
        """After each operation, the shards it worked on: everything but the in-flight count
        (which depends on the time) must match a recount at once, the oldest time included
        (a later operation could otherwise put a stale one right)."""
        shards = sorted({shard(q) for q in self.touched})
        self.touched.clear()
        each_books = await read_each_shard(self.engine.scripts, shards)
        each_counted = await recount_each_shard(self.redis, shards)
        for s in shards:
            books, counted = each_books[s], each_counted[s]
            for ns in keys.NAMESPACES:
                diffs = differences(f"shard {s} {ns}", books[ns], counted[ns], ("q", "n", "d", "b"))
                if diffs:
                    ops = "\n".join(self.log[-30:])
                    pytest.fail(
                        f"seed {SEED}: the books drifted in the last operation\n"
                        + "\n".join(diffs)
                        + f"\nqueues in shard {s}: "
                        + ", ".join(q for q in sorted(self.known) if shard(q) == s)
                        + f"\nlast operations:\n{ops}"
                    )


# ---------------------------------------------------------------------------- the engine


@pytest.mark.engine
@pytest.mark.topology
@pytest.mark.timeout(240)  # ~12 s here; ~500 operations and six recounts of 1,024 shards
async def test_books_match_a_recount_and_the_ledger_after_a_random_mix(fresh: Backend) -> None:
    redis = fresh.client
    engine = Engine(
        redis,
        wake_channel=keys.node_channel("books-" + uuid.uuid4().hex[:6]),
        defaults={DC: DC_DEFAULTS},
    )
    mix = Mix(engine, redis, random.Random(SEED), routed=fresh.mode is not Mode.CLUSTER)
    for name in ("dlq", "dlq-long", *sorted(set(MQS_QUEUES) - {"dlq", "dlq-long"})):
        ref = QueueRef(MQS, name)
        await engine.create_queue(ref, MQS_QUEUES[name])
        mix.add_queue(ref, MQS_QUEUES[name])
    for name in DC_CREATED:
        ref = QueueRef(DC, name)
        await engine.create_queue(ref, DC_DEFAULTS)
        mix.add_queue(ref, DC_DEFAULTS)
    for name in DC_LAZY:
        mix.known[f"{DC}:{name}"] = Queue(QueueRef(DC, name), DC_DEFAULTS, DC_DEFAULTS, HOUR, True)
    d0 = mix.queues[f"{DC}:d0"]  # a recipient whose messages expire (Queue Management)
    await engine.set_limits(
        d0.ref,
        max_messages=40,
        max_bytes=None,
        max_message_bytes=None,
        retention_ms=LONGEST_SHORT,
        will_queue=True,
    )
    d0.config = replace(d0.config, retention_ms=LONGEST_SHORT, max_messages=40, max_bytes=None)
    d0.min_ret = LONGEST_SHORT
    await mix.check("created")

    # Phase 1: the mix, with deadlines and short retentions passing in between (on the
    # server's clock, which the timers run on).
    for pause_ms in (0, 300, 550):
        await until_redis_ms(redis, await redis_ms(redis) + pause_ms)
        await mix.run(70)
    await mix.fresh_deadline()
    await mix.reclaim_long(mix.queues[f"{DC}:d1"])
    await mix.check("mix")

    # Phase 2: queues deleted with messages in them, some handed out; a dead letter queue
    # deleted under its sources (cascade) with hand-overs to it still in an outbox.
    for q in ("mqs:src", "mqs:src1"):
        await mix.send(mix.queues[q], 6)
        for _ in range(3):
            await mix.receive_dying(mix.queues[q])
    await mix.send(mix.queues["didcomm:d1"], 4)
    await mix.receive(mix.queues["mqs:plain"])
    await mix.receive_filtered(mix.queues["didcomm:d1"])
    await mix.send(mix.queues["mqs:late"], 3)  # delayed when their queue goes
    for q in ("mqs:plain", "didcomm:d1", "mqs:dlq-long", "mqs:late"):
        await mix.delete_queue(mix.queues[q])
    await mix.run(60)
    await mix.upkeep(mix.queues["mqs:src1"])  # its outbox names a queue that is gone
    await mix.check("deletes")
    for q in ("mqs:dlq-long", "mqs:plain", "didcomm:d1", "mqs:late"):
        if q not in mix.queues:
            await mix.recreate(q)
    await mix.run(80)
    await mix.check("re-created")

    # Phase 3: let every short retention and delay pass, with a live message sent behind
    # what expired; the upkeep purges the mqs queues' (and promotes), filtered receives the
    # recipients' (d-unread's as entries never read); then every queue's upkeep again
    # (hand-overs from the outboxes included).
    await mix.run(40)
    fresh_one = QueueRef(DC, "d-unread")  # nothing of it ever read before it expires
    await mix.send(fresh_one, 2)
    await mix.set_limits(mix.queues[fresh_one.qualified], retention=HALF, count=None, will=True)
    recipients = sorted(q for q in mix.queues if q.startswith(f"{DC}:"))
    for q in recipients:  # not read before they expire (d0): purged as new entries
        await mix.send(mix.queues[q], 3)
    await until_redis_ms(redis, await redis_ms(redis) + LONGEST_SHORT + 100)
    for q in sorted(mix.queues):  # a live one behind what expired
        await mix.send(mix.queues[q], 1)
    for q in sorted(mix.queues):
        if q.startswith(f"{MQS}:"):
            await mix.upkeep(mix.queues[q])
    await mix.purge_by_receives()
    await mix.check("purged")
    for queue in sorted(mix.queues.values(), key=lambda q: q.q):
        await mix.upkeep(queue)
    await mix.fresh_deadline()
    assert not [m for m in mix.msgs.values() if m.outbox_to]  # nothing left in an outbox
    await mix.check("final")
    flow = Counter[str]()
    for (_, ns, name), n in mix.ledger.items():
        flow[f"{ns}:{name}"] += n
    assert all(flow[f"{ns}:{name}"] > 0 for ns in (MQS, DC) for name in ("add", "dlv", "ack"))
    assert all(flow[f"mqs:{name}"] > 0 for name in ("exp", "dl", "drop")), flow
    assert flow["didcomm:exp"] > 0 and flow["didcomm:drop"] > 0, flow


# ---------------------------------------------------------------------------- a node killed


NODE_QUEUES = {
    "n-plain": {"visibility": 1},
    "n-short": {"retention": 2, "visibility": 1},
    "n-delay": {"delay": 1, "visibility": 1},
    "n-dlq": {"visibility": 1},
    "n-src": {"visibility": 1, "max_receives": 2, "dlq": "n-dlq"},
    "n-gone": {"visibility": 1},  # deleted in the middle of the traffic
}
ABANDONED = "n-src1"  # dead letters a killed node left in its outbox: the worker's to hand over
TRAFFIC_SECONDS = 6.0
KILL_AT = 2.5


@dataclass
class Traffic:
    rng: random.Random
    clients: list[httpx.AsyncClient]
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    accepted: Counter[str] = field(default_factory=Counter)  # queue -> messages answered 201
    received: Counter[str] = field(default_factory=Counter)  # queue -> messages handed out
    deleted: int = 0
    failed: int = 0  # requests without an answer (the node was killed or down)
    turn: int = 0

    def client(self) -> httpx.AsyncClient:
        self.turn += 1
        return self.clients[self.turn % len(self.clients)]

    async def sender(self) -> None:
        while not self.stop.is_set():
            name = self.rng.choice(sorted(NODE_QUEUES))
            n = self.rng.choice((1, 1, 3, 10))
            try:
                if n == 1:
                    r = await self.client().post(f"/messages/{name}", content=b"x" * 50)
                else:
                    ctype, body = multipart.encode(
                        [({"Content-Type": "text/plain"}, b"y" * (i * 7)) for i in range(n)]
                    )
                    r = await self.client().post(
                        f"/messages/{name}", content=body, headers={"Content-Type": ctype}
                    )
            except httpx.HTTPError:
                self.failed += 1
                await asyncio.sleep(0.05)
                continue
            if r.status_code == 201:
                self.accepted[name] += len(r.json()["messageIds"])
            else:
                assert r.status_code == 404 and name == "n-gone", (r.status_code, r.text)
            await asyncio.sleep(0.005)

    async def receiver(self) -> None:
        while not self.stop.is_set():
            name = self.rng.choice(sorted(NODE_QUEUES))
            n = self.rng.choice((1, 4, 10))
            try:
                r = await self.client().get(
                    f"/messages/{name}", headers={"X-MQS-MAX-MESSAGES": str(n)}
                )
                if r.status_code == 404 and name == "n-gone":
                    continue
                got = parts(r)
                self.received[name] += len(got)
                for p in got:
                    if self.rng.random() < 0.6:  # the rest come back after 1 s
                        d = await self.client().delete(f"/messages/{p.headers['x-mqs-message-id']}")
                        assert d.status_code in (204, 404), d.text
                        self.deleted += d.status_code == 204
            except httpx.HTTPError:
                self.failed += 1
                await asyncio.sleep(0.05)
                continue
            await asyncio.sleep(0.01)


async def _deadlines_out_of_their_seconds(redis: RedisClient, names: Iterable[str]) -> None:
    """Until every in-flight deadline of these mqs queues is a second past: the books count
    a deadline until the end of its second, a recount only until it."""
    latest = 0
    for name in names:
        top = await redis.zrange(keys.queue_keys(f"mqs:{name}").inflight, -1, -1, withscores=True)
        latest = max([latest, *(int(score) for _, score in top)])
    await until_redis_ms(redis, latest + 1000 + 25)


async def _outboxes_empty(redis: RedisClient) -> bool:
    for name in (*NODE_QUEUES, ABANDONED):
        outbox = await redis.hgetall(keys.queue_keys(f"mqs:{name}").outbox)
        if any(not cast(bytes, v).startswith(b"x:") for v in outbox.values()):
            return False
    return True


@pytest.mark.full
@pytest.mark.topology
async def test_books_match_a_recount_after_a_node_is_killed_mid_traffic(
    fresh: Backend, books_url: str
) -> None:
    env = {
        "MEDIATOR_LEASE_SECONDS": "2",
        "MEDIATOR_WORKER_TICK_SECONDS": "0.2",
        "MEDIATOR_STATS_SECONDS": "1",
        "MEDIATOR_HINT_POLL_SECONDS": "1",
    }
    worker_node = Node(books_url, **env)  # runs the upkeep worker too
    plain_node = Node(books_url, MEDIATOR_IN_PROCESS_WORKER="false", **env)
    await asyncio.gather(asyncio.to_thread(worker_node.start), asyncio.to_thread(plain_node.start))
    redis = fresh.client
    try:
        async with (
            httpx.AsyncClient(base_url=worker_node.base, timeout=10) as a,
            httpx.AsyncClient(base_url=plain_node.base, timeout=10) as b,
        ):
            for name in ("n-dlq", *sorted(set(NODE_QUEUES) - {"n-dlq"})):
                await create(b, name, **NODE_QUEUES[name])  # type: ignore[arg-type]
            await create(b, ABANDONED, visibility=30, max_receives=1, dlq="n-dlq")
            for _ in range(5):
                await send(b, ABANDONED, b"poison")
            traffic = Traffic(random.Random(SEED + 1), [a, b])
            tasks = [asyncio.create_task(traffic.sender()) for _ in range(3)]
            tasks += [asyncio.create_task(traffic.receiver()) for _ in range(4)]
            await asyncio.sleep(KILL_AT)
            # The receive script alone, as the node about to die runs it: the five messages
            # reach max receives and wait in the outbox for a hand-over that never comes.
            qk = keys.queue_keys(f"mqs:{ABANDONED}")
            args = [f"mqs:{ABANDONED}", "", 5, "", 0, OUTBOX_GRACE_MS, ""]
            r = await Engine(redis).scripts.call("receive", qk.all, args)
            assert int(r[3]) == 5 and await redis.hlen(qk.outbox) == 5
            worker_node.kill()  # SIGKILL, requests and upkeep under way
            await asyncio.sleep(0.5)
            gone = await b.delete("/queues/n-gone")  # with messages in it, some handed out
            assert gone.status_code == 200, gone.text
            await asyncio.to_thread(worker_node.start)
            await asyncio.sleep(TRAFFIC_SECONDS - KILL_AT - 0.5)
            traffic.stop.set()
            await asyncio.gather(*tasks)
        # Settle: dead letters left in an outbox by the killed node are handed over by the
        # restarted worker (after the outbox grace); then both nodes go and the last
        # deadlines (1 s visibility) run out of their buckets' seconds.
        emptied = await eventually(
            lambda: _outboxes_empty(redis), bool, within=OUTBOX_GRACE_MS / 1000 + 10
        )
        assert emptied, worker_node.output()[-3000:]
    finally:
        # Frozen at once (SIGKILL; on Python 3.11 a SIGTERM can wait 15 s for a worker task
        # whose cancellation a redis-py write swallowed), with no receive or hand-over under
        # way any more: every script's state change is whole.
        worker_node.kill()
        plain_node.kill()
    await _deadlines_out_of_their_seconds(redis, [*NODE_QUEUES, ABANDONED])
    result = await compare_books(Engine(redis).scripts, redis)
    assert not result.diffs, (
        f"seed {SEED + 1}: the books drifted\n"
        + "\n".join(result.diffs)
        + f"\ntotals: {totals_line(result.books)}"
    )
    # What the clients saw answered is a floor for what the books counted.
    for ns_field, seen in (("add", traffic.accepted), ("dlv", traffic.received)):
        floor = Counter[int]()
        for name, n in seen.items():
            floor[shard(f"mqs:{name}")] += n
        for s, n in floor.items():
            assert result.books[s][MQS].values[ns_field] >= n, (ns_field, s, n)
    assert traffic.failed > 0 and traffic.deleted > 0 and sum(traffic.accepted.values()) > 100


# ---------------------------------------------------------------------------- an expiring record


class RefusingEndpoint(LocalServer):
    """An agent's HTTP endpoint that is down: every push is refused with 503."""

    def __init__(self) -> None:
        self.refused = 0
        super().__init__(Starlette(routes=[Route("/", self._post, methods=["POST"])]))
        self.url += "/"

    async def _post(self, request: Request) -> Response:
        await request.body()
        self.refused += 1
        return Response(status_code=503)


@pytest.mark.full
@pytest.mark.topology
async def test_books_match_a_recount_after_an_unmediated_connection_expires(
    fresh: Backend, books_url: str
) -> None:
    """A connection that never asked for mediation is forgotten after
    MEDIATOR_UNMEDIATED_CONNECTION_SECONDS (its record expires). One with an endpoint of its
    own (as ACA-Py connects) has its answers queued for a push, in a queue whose config is
    that very record: the queue must leave the books when the record goes."""
    node = Node(
        books_url,
        MEDIATOR_UNMEDIATED_CONNECTION_SECONDS="2",
        MEDIATOR_AUDIT_QUEUES_PER_SECOND="50000",
        MEDIATOR_OUTBOUND_ALLOW="127.0.0.1",  # the agent's endpoint is on loopback
        MEDIATOR_PUSH_RETRY_MIN_SECONDS="0.2",
        MEDIATOR_PUSH_RETRY_MAX_SECONDS="0.5",
        MEDIATOR_PUSH_TIMEOUT_SECONDS="2",
        MEDIATOR_WORKER_TICK_SECONDS="0.2",
    )
    endpoint = RefusingEndpoint()
    await endpoint.start()
    await asyncio.to_thread(node.start)
    redis = fresh.client
    try:
        wallet = Peer(node.base, await mediator_key(node.base))
        request = wallet.message(
            "didexchange/1.1/request",
            route=None,
            label="aca-py-like, never mediated",
            did=numalgo2_did(wallet.keys, [endpoint.url]),
        )
        assert await wallet.send(request) is None  # answered through the endpoint: queued
        queue = keys.queue_keys(f"{DC}:{wallet.verkey}")
        refused = await eventually(lambda: _refused(endpoint), bool, within=10)
        assert refused and await redis.xlen(queue.stream) == 1
        books = (await read_shards(Engine(redis).scripts, [queue.shard]))[1][DC]
        counted = (await recount(redis, [queue.shard]))[DC]
        assert books.values["q"] == books.values["n"] == 1
        assert not differences("before", books, counted, ("q", "n", "d", "b"))
        # The record, and with it the queue's config, expires.
        assert not await eventually(lambda: redis.exists(queue.cfg), lambda n: not n, within=10)
        # The workers' audit drops a registry entry whose queue is gone (and its count).
        audited = await eventually(
            lambda: redis.sismember(queue.registry, wallet.verkey),  # type: ignore[arg-type,unused-ignore]
            lambda listed: not listed,
            within=15,
        )
        await wallet.close()
    finally:
        node.kill()
        await endpoint.stop()

    async def in_flight() -> int:  # the last push's deadline leaves its bucket's second
        return int((await read_shards(Engine(redis).scripts, [queue.shard]))[1][DC].values["fl"])

    await eventually(in_flight, lambda n: n == 0, within=5)
    after = await compare_books(Engine(redis).scripts, redis)
    left = [k for k in (queue.cfg, queue.stream, queue.ids) if await redis.exists(k)]
    assert not after.diffs, (
        f"connection {wallet.verkey}: its record expired with a queue in it; the audit "
        f"{'dropped' if not audited else 'kept'} the registry entry; keys left: {left}\n"
        + "\n".join(after.diffs)
    )


async def _refused(endpoint: RefusingEndpoint) -> int:
    return endpoint.refused
