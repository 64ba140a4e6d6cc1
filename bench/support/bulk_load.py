"""Bulk loader: N DIDComm recipients in Redis, made by the mediator's own code, in minutes.

Recipient i is a wallet whose Ed25519 key pair, and the one recipient key it registers, are
derived from (run seed, i), so later phases can speak for any recipient (open its WebSocket,
authcrypt as it, forward to its key) without keeping keys. For each one the loader calls
what a node runs for a wallet that did DID Exchange 1.1, completed it, got mediation granted
and registered one key (mediator/protocols/handshake.py, didexchange.py,
coordinate_mediation.py):

    HandshakeBook.record -> HandshakeBook.complete -> HandshakeBook.keep -> Mailbox.open
    -> MediationStore.set_state(granted) -> MediationStore.add_key

It skips the network and the handshake's cryptography, so it leaves exactly the keys and
fields a real recipient leaves (tests/test_scale.py compares the two), except the thread
orders of a wallet that is talking (`…:t`, a hash with a 10-minute expiry). Messages are
queued by `Mailbox.forward`, the call a forward ends in (one script on a standalone server).

Speed comes from batching, not from other code: many recipients are made concurrently, and
the Redis client sends whatever commands they issued in one event-loop turn as one pipeline
(`AutoPipeline`), so each command is the same command a node sends, in the same order for
each recipient. Several processes share the range of recipients.

    python bench/bulk_load.py --redis-url redis://127.0.0.1:6379/0 --recipients 20000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster

from mediator.didcomm.identity import connection_key, from_seed_setting
from mediator.didcomm.invitation import multi_use_id
from mediator.didcomm.keys import KeyPair
from mediator.engine import Engine, keys, layout
from mediator.mediation.handshakes import Handshake, HandshakeBook
from mediator.mediation.mailbox import Mailbox
from mediator.mediation.mailbox import defaults as mailbox_defaults
from mediator.mediation.store import GRANTED, MediationStore
from mediator.settings import Settings
from mediator.storage.clients import COMMAND_OPTIONS, CONNECTION_CLASS, Backend, RedisClient
from mediator.storage.target import Mode, parse

# The mediator key of every node of a scale run and of the loader (MEDIATOR_KEY_SEED).
MEDIATOR_SEED = hashlib.sha256(b"mediator scale bench").hexdigest()
RUN_SEED = b"scale-1"
KIB = 1024
MOST_MESSAGES = 5
PROTOCOL = "didexchange/1.1"
LABEL = "bulk wallet"
# Commands sent on their own, outside the batches: server-wide ones (SCRIPT LOAD).
FLUSHES = 2  # batches on the wire at once: the next one gathers while they are out
DIRECT = frozenset({"SCRIPT LOAD", "SCRIPT", "INFO", "PING", "DBSIZE"})


# --------------------------------------------------------------------------- who is who


def _derive(seed: bytes, role: bytes, i: int) -> bytes:
    return hashlib.sha256(role + b"\x00" + seed + b"\x00" + i.to_bytes(8, "big")).digest()


@dataclass(frozen=True)
class Plan:
    """Which recipients a run has and what they hold, all derived from the seed."""

    recipients: int
    share: float = 0.1  # the share of recipients with queued messages
    seed: bytes = RUN_SEED
    mediator_seed: str = MEDIATOR_SEED

    def wallet(self, i: int) -> KeyPair:
        """Recipient i's connection key: the wallet's key, what the mediator names it by."""
        return KeyPair.from_seed(_derive(self.seed, b"wallet", i))

    def recipient_key(self, i: int) -> KeyPair:
        """The key recipient i registered (keylist-update): what senders forward to."""
        return KeyPair.from_seed(_derive(self.seed, b"recipient", i))

    @property
    def identity(self) -> KeyPair:
        return from_seed_setting(self.mediator_seed)

    def ours(self, i: int) -> KeyPair:
        """Our key on recipient i's connection (what its authcrypted messages go to)."""
        return connection_key(self.identity, self.wallet(i).verkey_b58)

    def messages(self, i: int) -> int:
        """How many 1 KiB messages recipient i has queued: 0, or 1..MOST_MESSAGES for
        `share` of them."""
        h = int.from_bytes(_derive(self.seed, b"messages", i)[:8], "big")
        if (h >> 8) / 2**56 >= self.share:
            return 0
        return 1 + (h & 0xFF) % MOST_MESSAGES

    def total_messages(self, indexes: range | None = None) -> int:
        return sum(self.messages(i) for i in indexes or range(self.recipients))

    def argv(self) -> list[str]:
        return [
            *["--recipients", str(self.recipients), "--share", repr(self.share)],
            *["--seed", self.seed.hex(), "--mediator-seed", self.mediator_seed],
        ]

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--recipients", type=int, default=20_000, help="how many (20000)")
        parser.add_argument(
            "--share",
            type=float,
            default=0.1,
            help="the share of recipients with 1-5 queued 1 KiB messages (0.1)",
        )
        parser.add_argument(
            "--seed", default=RUN_SEED.hex(), help="run seed (hex): which keys recipient i has"
        )
        parser.add_argument(
            "--mediator-seed",
            default=MEDIATOR_SEED,
            help="the nodes' MEDIATOR_KEY_SEED (64 hex characters)",
        )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Plan:
        return cls(args.recipients, args.share, bytes.fromhex(args.seed), args.mediator_seed)


def body(i: int, j: int) -> bytes:
    """A 1 KiB message shaped like an envelope (the mediator never looks inside)."""
    fill = hashlib.shake_256(f"{i}/{j}".encode()).hexdigest(KIB)
    head = b'{"protected":"'
    tail = b'","iv":"","ciphertext":"","tag":""}'
    return head + fill.encode()[: KIB - len(head) - len(tail)] + tail


# --------------------------------------------------------------------------- the client


class AutoPipeline:
    """redis-py's asyncio client, with every command issued in one event-loop turn (by
    many concurrent tasks) sent together as one pipeline. Each task still awaits each of
    its commands in order: what reaches Redis is what the node would send, batched."""

    _pending: list[tuple[tuple[Any, ...], dict[str, Any], asyncio.Future[Any]]]
    _flushing: set[asyncio.Task[None]]
    direct = DIRECT

    async def _direct(self, *args: Any, **options: Any) -> Any:
        raise NotImplementedError

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        if str(args[0]).upper() in self.direct or "target_nodes" in options:
            return await self._direct(*args, **options)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not hasattr(self, "_pending"):
            self._pending, self._flushing = [], set()
        self._pending.append((args, options, future))
        if len(self._pending) == 1 and len(self._flushing) < FLUSHES:
            loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        task = asyncio.get_running_loop().create_task(self._send(batch))
        self._flushing.add(task)
        task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        """A batch came back: what queued up meanwhile goes next, as one batch."""
        self._flushing.discard(task)
        self._flush()

    async def _send(
        self, batch: list[tuple[tuple[Any, ...], dict[str, Any], asyncio.Future[Any]]]
    ) -> None:
        try:
            pipe = self.pipeline(transaction=False)  # type: ignore[attr-defined]
            for args, options, _ in batch:
                pipe.execute_command(*args, **options)
            results = await pipe.execute(raise_on_error=False)
        except Exception as exc:  # the whole round trip failed: so did each command
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, _, future), result in zip(batch, results, strict=True):
            if future.done():
                continue
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)


class BatchingRedis(AutoPipeline, Redis):  # type: ignore[misc]
    async def _direct(self, *args: Any, **options: Any) -> Any:
        return await Redis.execute_command(self, *args, **options)  # type: ignore[no-untyped-call]


class BatchingCluster(AutoPipeline, RedisCluster):  # type: ignore[misc]
    direct = DIRECT

    async def _direct(self, *args: Any, **options: Any) -> Any:
        return await RedisCluster.execute_command(self, *args, **options)


def batching_client(url: str, concurrency: int, connections: int = 16) -> RedisClient:
    """A client for `url` (standalone or `redis+cluster://`) with the node's options."""
    target = parse(url)
    if target.mode is Mode.STANDALONE:
        # Transactions (HandshakeBook.complete) take a connection each: wait for one.
        pool = BlockingConnectionPool.from_url(
            target.url,
            max_connections=connections,
            timeout=60,
            connection_class=CONNECTION_CLASS,
            **COMMAND_OPTIONS,
        )
        return BatchingRedis(connection_pool=pool)
    if target.mode is Mode.CLUSTER:
        # TIME and transactions go on their own: a connection for each task in flight.
        return BatchingCluster(
            startup_nodes=[ClusterNode(h, p) for h, p in target.hosts],
            max_connections=connections + concurrency,
            username=target.username,
            password=target.password,
            **COMMAND_OPTIONS,
        )
    raise ValueError("the bulk loader takes a standalone or a Redis Cluster URL")


# --------------------------------------------------------------------------- one process


class Loader:
    """The node's own objects (HandshakeBook, MediationStore, Mailbox on an Engine with
    the node's defaults) on one batching client."""

    def __init__(
        self, url: str, plan: Plan, settings: Settings | None = None, concurrency: int = 256
    ) -> None:
        self.url = url
        self.plan = plan
        self.settings = settings or Settings.of(key_seed=plan.mediator_seed)
        self.mode = parse(url).mode
        self.redis = batching_client(url, concurrency)
        self.engine = Engine(
            self.redis, defaults={keys.DIDCOMM_NAMESPACE: mailbox_defaults(self.settings.queue)}
        )
        self.handshakes = HandshakeBook(self.redis)
        self.store = MediationStore(self.redis)
        # Route lookup and send in one script where the node does it so (not a cluster).
        self.mailbox = Mailbox(
            self.engine,
            self.settings.queue,
            forwards_per_second=self.settings.limits.forwards_per_second,
            routed=self.mode is not Mode.CLUSTER,
        )
        self.identity = plan.identity
        self.invitation_id = multi_use_id(self.identity)

    async def start(self) -> None:
        if isinstance(self.redis, RedisCluster):
            await self.redis.initialize()
        await layout.ensure(self.redis)

    async def aclose(self) -> None:
        await self.redis.aclose()

    async def recipient(self, i: int) -> None:
        """What the node writes for wallet i from its DID Exchange request to its first
        keylist-update, in the node's order."""
        settings = self.settings
        wallet = self.plan.wallet(i)
        verkey = wallet.verkey_b58
        ours = connection_key(self.identity, verkey).verkey_b58
        # didexchange.request -> handshake.record
        handshake = Handshake(
            verkey=verkey,
            did=wallet.did_key,  # not stored (a did:peer:2 costs an X25519 conversion)
            label=LABEL,
            protocol=PROTOCOL,
            thid=str(uuid.uuid4()),
            invitation=self.invitation_id,
            services=(),  # a wallet that picks up: no push endpoint
        )
        now = await self.mailbox.now_ms()
        ttl = settings.didcomm.unmediated_connection_seconds
        if not await self.handshakes.record(handshake, ours, now, ttl):
            raise RuntimeError(f"recipient {i} exists already (load into an empty database)")
        # didexchange.complete
        await self.handshakes.complete(verkey)
        # coordinate_mediation.mediate_request
        now = await self.mailbox.now_ms()
        await self.handshakes.keep(verkey, ours)
        await self.mailbox.open(verkey)
        await self.store.set_state(verkey, GRANTED, now)
        # coordinate_mediation.keylist_update (add)
        added = await self.store.add_key(verkey, self.plan.recipient_key(i).verkey_b58)
        if added != "success":
            raise RuntimeError(f"recipient {i}: keylist-update answered {added}")

    async def queue(self, i: int) -> int:
        """Recipient i's messages, each as a forward to its key ends: Mailbox.forward."""
        count = self.plan.messages(i)
        key = self.plan.recipient_key(i).verkey_b58
        for j in range(count):
            if await self.mailbox.forward(key, body(i, j), self.store) is None:
                raise RuntimeError(f"recipient {i}: no route for its key")
        return count

    async def run(
        self,
        indexes: Iterator[int],
        work: Callable[[int], Any],
        concurrency: int,
        done: Callable[[int], None],
    ) -> None:
        """`work(i)` for every index, `concurrency` at a time; `done(n)` after each."""

        async def worker() -> None:
            for i in indexes:  # a shared iterator: each index is taken once
                await work(i)
                done(1)

        await asyncio.gather(*(worker() for _ in range(concurrency)))


# --------------------------------------------------------------------------- processes


PHASES = ("recipients", "messages")


async def load_here(
    url: str,
    plan: Plan,
    phase: str,
    indexes: range,
    *,
    concurrency: int = 256,
    done: Callable[[int], None] = lambda n: None,
) -> int:
    """Load `indexes` in this process and event loop: the recipients themselves, or their
    messages. Returns how many recipients (or messages) it made."""
    loader = Loader(url, plan, concurrency=concurrency)
    made = 0

    def count(n: int) -> None:
        nonlocal made
        made += n
        done(n)

    try:
        await loader.start()
        if phase == "recipients":
            await loader.run(iter(indexes), loader.recipient, concurrency, count)
            return made
        messages = 0

        async def queue(i: int) -> None:
            nonlocal messages
            queued = await loader.queue(i)  # read `messages` only after the await
            messages += queued

        chosen = (i for i in indexes if plan.messages(i))
        await loader.run(chosen, queue, concurrency, count)
        return messages
    finally:
        await loader.aclose()


@dataclass
class LoadReport:
    phase: str
    items: int  # recipients made, or recipients given messages
    made: int  # recipients, or messages
    seconds: float
    processes: int

    @property
    def rate(self) -> float:
        return self.items / self.seconds if self.seconds > 0 else 0.0


def wanted(plan: Plan, phase: str) -> int:
    """How many items a phase handles: recipients, or recipients with messages."""
    if phase == "recipients":
        return plan.recipients
    return sum(1 for i in range(plan.recipients) if plan.messages(i))


async def load(
    url: str,
    plan: Plan,
    phase: str,
    *,
    processes: int = 2,
    concurrency: int = 256,
    report: Callable[[str], None] = print,
    every: float = 5.0,
) -> LoadReport:
    """Load every recipient of `plan` (or their messages) with `processes` processes
    (`python -m bench.support.bulk_load worker ...`, each a slice of the indexes, free to
    run on every CPU), printing progress (rate, ETA) every `every` seconds. Raises when one
    fails."""
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}")
    total = wanted(plan, phase)
    # Once here first: layout.ensure writes its fields one by one, and a second process
    # reading them half-written would refuse the database.
    backend = Backend(url)
    try:
        await backend.start()
        await layout.ensure(backend.client)
    finally:
        await backend.aclose()
    bounds = [plan.recipients * k // processes for k in range(processes + 1)]
    counts = [0] * processes
    results = [0] * processes
    started = time.monotonic()
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.support.bulk_load",
            "worker",
            *plan.argv(),
            *["--redis-url", url, "--phase", phase, "--concurrency", str(concurrency)],
            *["--start", str(bounds[k]), "--stop", str(bounds[k + 1])],
            stdout=asyncio.subprocess.PIPE,
        )
        for k in range(processes)
    ]

    async def follow(k: int, child: asyncio.subprocess.Process) -> None:
        assert child.stdout is not None
        async for line in child.stdout:
            word, _, value = line.decode().partition(" ")
            if word == "made":
                counts[k] = int(value)
            elif word == "result":
                results[k] = int(value)
        await child.wait()

    async def show() -> None:
        while True:
            await asyncio.sleep(every)
            made, elapsed = sum(counts), time.monotonic() - started
            rate = made / elapsed
            eta = (total - made) / rate if rate > 0 else float("inf")
            report(
                f"{phase}: {made:,}/{total:,} ({made / max(total, 1):.0%}) {rate:,.0f}/s, "
                f"ETA {eta:,.0f} s"
            )

    shower = asyncio.create_task(show())
    try:
        await asyncio.gather(*(follow(k, c) for k, c in enumerate(children)))
    finally:
        shower.cancel()
        for child in children:
            if child.returncode is None:
                child.kill()
                await child.wait()
    failed = [k for k, c in enumerate(children) if c.returncode != 0]
    if failed:
        raise RuntimeError(f"loading processes {failed} failed (their output is above)")
    if sum(counts) != total:
        raise RuntimeError(f"{phase}: {sum(counts):,} of {total:,} made")
    return LoadReport(phase, total, sum(results), time.monotonic() - started, processes)


async def _worker(args: argparse.Namespace) -> None:
    """One loading process: report `made <n>` every half second, `result <n>` at the end."""
    made = 0

    def done(n: int) -> None:
        nonlocal made
        made += n

    async def tell() -> None:
        while True:
            await asyncio.sleep(0.5)
            print(f"made {made}", flush=True)

    teller = asyncio.create_task(tell())
    try:
        result = await load_here(
            args.redis_url,
            Plan.from_args(args),
            args.phase,
            range(args.start, args.stop),
            concurrency=args.concurrency,
            done=done,
        )
    finally:
        teller.cancel()
    print(f"made {made}\nresult {result}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "command",
        nargs="?",
        default="load",
        choices=["load", "worker"],
        help="load (the default): recipients, then their messages; worker: one loading "
        "process, as `load` starts them",
    )
    parser.add_argument(
        "--redis-url", required=True, help="an empty database: redis://... or redis+cluster://..."
    )
    Plan.add_arguments(parser)
    parser.add_argument(
        "--processes", type=int, default=2, help="loading processes (2: this machine's CPUs)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=256, help="recipients in flight per process (256)"
    )
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--stop", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.command == "worker":
        # Loaders run on every CPU, whatever the process that started them is pinned to.
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(0, range(os.cpu_count() or 1))
        run = asyncio.run
        with contextlib.suppress(ImportError):
            import uvloop

            run = uvloop.run
        run(_worker(args))
        return 0
    plan = Plan.from_args(args)

    async def both() -> None:
        for phase in PHASES:
            r = await load(
                args.redis_url, plan, phase, processes=args.processes, concurrency=args.concurrency
            )
            print(f"{phase}: {r.items:,} ({r.made:,} made) in {r.seconds:.1f} s ({r.rate:,.0f}/s)")

    try:
        asyncio.run(both())
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
