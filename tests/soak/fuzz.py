"""Fuzzing at scale: two real nodes on one real Redis, hostile input over HTTP and WebSocket
at every layer (bytes, JSON, envelopes, the plaintext of well-encrypted messages from a
real connection, handshakes, valid messages in hostile orders), while honest recipients'
traffic runs the whole time. Prints progress and a summary; exits 1 when a target is missed:

- every input sent (--inputs);
- no 5xx answer (a 507 for a full queue the fuzzer shrank itself is counted apart);
- no socket or handler loop ended by an exception (node logs, close code 1011, error frames
  with `internal-error`);
- nothing lost or duplicated for the honest recipients (tests/soak/history.py);
- node RSS within +-5 % after warm-up (runs long enough to have three samples after it).

    python -m tests.soak.fuzz --help
    python -m tests.soak.fuzz --inputs 1000000
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import importlib.util
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from mediator.client import Recipient, ws_url
from mediator.client.transports import fetch_invitation
from mediator.didcomm.keys import KeyPair, did_key_to_verkey
from tests.servers import Node, RedisUnderTest
from tests.soak import fuzz_orders
from tests.soak.fuzz_honest import Honest, send_numbered
from tests.soak.fuzz_inputs import (
    EnvelopeMutator,
    HandshakeMutator,
    PlaintextMutator,
    json_shape,
    raw_bytes,
)
from tests.soak.fuzz_v2 import V2Mutator, WalletKeys, mediated_wallet
from tests.soak.fuzz_watch import LogWatch, RssSeries
from tests.soak.history import History, Verdict

Gen = Callable[[], tuple[str, bytes]]
CONTENT_TYPES = ("application/didcomm-envelope-enc",) * 6 + (
    "application/ssi-agent-wire",
    "application/json",
    "",
    "text/plain",
    b"x/\xff",
)
RECURSION_LIMIT = 20_000  # the generators nest JSON deeper than a node reads
# Normal; a policy close (a limit); a frame over the server's own WebSocket limit.
EXPECTED_CLOSES = (1000, 1008, 1009)
MQS_TOKEN = "fuzz-mqs-token"


@dataclass
class Tally:
    inputs: Counter[str] = field(default_factory=Counter)  # per layer
    http: Counter[int] = field(default_factory=Counter)  # status codes
    frames: Counter[str] = field(default_factory=Counter)  # error frame codes, "envelope"
    closes: Counter[int] = field(default_factory=Counter)  # close codes seen by fuzz sockets
    problems: Counter[str] = field(default_factory=Counter)  # problem-report codes (sampled)
    findings: list[tuple[str, str, bytes]] = field(default_factory=list)  # kind, layer, input
    mqs: dict[str, int] = field(default_factory=dict)

    @property
    def sent(self) -> int:
        return sum(self.inputs.values())

    @property
    def server_errors(self) -> int:
        return sum(n for code, n in self.http.items() if code >= 500 and code != 507)

    @property
    def loop_crashes(self) -> int:
        bad_closes = sum(n for code, n in self.closes.items() if code not in EXPECTED_CLOSES)
        return bad_closes + self.frames["internal-error"]

    def find(self, kind: str, layer: str, data: bytes) -> None:
        if len(self.findings) < 200:
            self.findings.append((kind, layer, data[:100_000]))


@dataclass
class Budget:
    left: int

    def take(self, n: int) -> int:
        got = min(n, max(0, self.left))
        self.left -= got
        return got


# ------------------------------------------------------------------------------- workers


def _sync_frame(n: int) -> bytes:
    """A frame whose answer is known: an error naming `SYNC-n` (an unknown alg)."""
    header = {"alg": f"SYNC-{n}", "recipients": [{"header": {"kid": "k"}}]}
    protected = base64.urlsafe_b64encode(orjson.dumps(header)).rstrip(b"=").decode()
    return orjson.dumps({"protected": protected})


class SocketGone(Exception):
    """The node closed a fuzzing socket (its close code says how)."""


class FuzzSocket:
    """One WebSocket whose frames are read all the time (a peer that stops reading would
    stall the node's sends, and so its reads: a deadlock of our own making), classified as
    they come, and matched to sync frames."""

    def __init__(self, ws: ClientConnection, tally: Tally, opener: KeyPair | None) -> None:
        self.ws = ws
        self.tally = tally
        self.opener = opener
        self.sent: list[tuple[str, bytes]] = []
        self.synced = 0
        self.changed = asyncio.Event()
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for frame in self.ws:
                data = frame.encode() if isinstance(frame, str) else bytes(frame)
                if data.startswith(b'{"error"') and b"SYNC-" in data:
                    self.synced = int(data.split(b"SYNC-")[1].split(b"'")[0])
                    self.changed.set()
                else:
                    _classify(data, self.tally, self.sent, self.opener)
        self.changed.set()

    async def sync(self, n: int, seconds: float = 120) -> None:
        """Until the node answered sync frame `n` (so it read every frame before it)."""
        await self.ws.send(_sync_frame(n).decode())
        async with asyncio.timeout(seconds):
            while self.synced < n:
                self.changed.clear()
                if self.reader.done():
                    raise SocketGone
                await self.changed.wait()

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close()
        self.reader.cancel()
        with contextlib.suppress(BaseException):
            await self.reader


async def ws_worker(
    base: str, gen: Gen, budget: Budget, tally: Tally, opener: KeyPair | None, batch: int = 24
) -> None:
    """Frames in batches on one socket, each batch closed by a sync frame whose answer says
    the node read them all; a socket that closes is reconnected (its close code counted)."""
    rng = random.Random(id(gen))
    sock: FuzzSocket | None = None
    n = 0
    while True:
        count = budget.take(batch)
        if not count:
            break
        if sock is None:
            ws = await connect(ws_url(base), max_size=None, open_timeout=30, ping_interval=None)
            sock = FuzzSocket(ws, tally, opener)
        sock.sent = sent = []
        try:
            for _ in range(count):
                layer, data = gen()
                tally.inputs[layer] += 1
                sent.append((layer, data))
                if rng.random() < 0.2:
                    await sock.ws.send(data)
                else:
                    try:
                        await sock.ws.send(data.decode())
                    except UnicodeDecodeError:
                        await sock.ws.send(data)
            n += 1
            await sock.sync(n)
        except (ConnectionClosed, SocketGone, TimeoutError) as exc:
            code = -1 if isinstance(exc, TimeoutError) else sock.ws.close_code
            tally.closes[code if code is not None else 1006] += 1
            if code not in EXPECTED_CLOSES:
                for layer, data in sent:
                    tally.find(f"socket closed {code}", layer, data)
            await sock.close()
            sock = None
            budget.left += count - len(sent)  # what a closed socket did not send
    if sock is not None:
        await sock.close()


def _classify(
    frame: bytes, tally: Tally, sent: list[tuple[str, bytes]], opener: KeyPair | None
) -> None:
    if frame.startswith(b'{"error"'):
        code = str(orjson.loads(frame).get("code"))
        tally.frames[code] += 1
        if code == "internal-error":
            for layer, data in sent:
                tally.find("internal-error frame", layer, data)
        return
    tally.frames["envelope"] += 1
    if opener is not None and tally.frames["envelope"] % 8 == 0:
        from mediator.didcomm import envelope

        try:
            opened = orjson.loads(envelope.unpack(frame, {opener.verkey_b58: opener}.get).message)
        except Exception:
            return
        if opened.get("@type", "").endswith("problem-report"):
            tally.problems[str(opened.get("description", {}).get("code"))] += 1
        else:
            tally.problems["(reply) " + opened.get("@type", "").rsplit("/", 1)[-1]] += 1


async def http_worker(base: str, gen: Gen, budget: Budget, tally: Tally) -> None:
    rng = random.Random(id(gen))
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        while budget.take(1):
            layer, data = gen()
            tally.inputs[layer] += 1
            media = rng.choice(CONTENT_TYPES)
            try:
                answer = await http.post("/", content=data, headers={"content-type": media})
            except httpx.HTTPError as exc:
                tally.http[-1] += 1
                tally.find(f"http error {type(exc).__name__}", layer, data)
                continue
            tally.http[answer.status_code] += 1
            if answer.status_code >= 500 and answer.status_code != 507:
                tally.find(f"http {answer.status_code}", layer, data)
            elif answer.status_code >= 400 and not answer.content.startswith(b'{"error"'):
                tally.find(f"http {answer.status_code} without a JSON body", layer, data)


# The kinds of input (`--layers`): the raw mix's, the plaintext of a real connection's
# messages, and valid messages in hostile orders.
RAW_LAYERS = frozenset({"bytes", "json", "envelope", "handshake", "v2"})
LAYERS = RAW_LAYERS | {"plaintext", "order"}


def mix(rng: random.Random, parts: list[tuple[str, float, Callable[[], bytes]]]) -> Gen:
    names = [p[0] for p in parts]
    weights = [p[1] for p in parts]
    makers = {p[0]: p[2] for p in parts}

    def gen() -> tuple[str, bytes]:
        name = rng.choices(names, weights)[0]
        for _ in range(10):
            try:
                return name, makers[name]()
            except (RecursionError, ValueError, TypeError):  # a shape even we cannot write
                continue
        return name, b"{}"

    return gen


def raw_mix(
    rng: random.Random,
    sample: bytes,
    mediator: str,
    v2: tuple[str, WalletKeys],
    layers: frozenset[str] = LAYERS,
) -> Gen:
    """Bytes, JSON shapes, mutated envelopes and handshakes, and DIDComm v2 messages of every
    layer (from `v2`: the mediator's v2 DID and a mediated v2 wallet); those of `layers`."""
    r1, r2 = random.Random(rng.random()), random.Random(rng.random())
    parts: list[tuple[str, float, Callable[[], bytes]]] = [
        ("bytes", 2, lambda: raw_bytes(r1, sample)),
        ("json", 2, lambda: json_shape(r2)),
        (
            "envelope",
            3,
            EnvelopeMutator(random.Random(rng.random()), mediator, KeyPair.generate()),
        ),
        ("handshake", 2, HandshakeMutator(random.Random(rng.random()), mediator)),
        ("v2", 3, V2Mutator(random.Random(rng.random()), *v2)),
    ]
    return mix(rng, [part for part in parts if part[0] in layers])


def plain_mix(
    rng: random.Random, agent: Recipient, key: str, others: Callable[[], list[str]]
) -> Gen:
    mutator = PlaintextMutator(random.Random(rng.random()), agent, key, others)
    return mix(rng, [("plaintext", 1, mutator)])


async def fuzz_agent(base: str) -> tuple[Recipient, str]:
    """A connection that did DID Exchange, got mediation and registered a key."""
    agent = await Recipient.connect_to(base, "http")
    await agent.mediate_request()
    key = await agent.register_key()
    await agent.close()
    return agent, key


# ------------------------------------------------------------------------------- the run


@dataclass
class Report:
    tally: Tally
    verdict: Verdict
    order_verdict: Verdict
    crashes: LogWatch
    rss: RssSeries
    seconds: float
    inputs_wanted: int
    warm_inputs: int
    honest_errors: list[str]

    @property
    def rss_drift(self) -> list[float]:
        return self.rss.drift(self.warm_inputs)

    def misses(self) -> list[str]:
        t, out = self.tally, []
        if t.sent < self.inputs_wanted:
            out.append(f"sent {t.sent} inputs of {self.inputs_wanted}")
        if t.server_errors or t.mqs.get("5xx"):
            out.append(f"{t.server_errors} answers 5xx, {t.mqs.get('5xx', 0)} from mqs")
        if t.loop_crashes or self.crashes.total:
            out.append(f"{t.loop_crashes} sockets crashed, {self.crashes.total} in node logs")
        for name, v in (("honest", self.verdict), ("hostile-order", self.order_verdict)):
            if v.lost or v.duplicated:
                out.append(f"{name}: {len(v.lost)} lost, {len(v.duplicated)} duplicated")
        if self.verdict.accepted == 0:
            out.append("no honest message was accepted")
        if any(d > 0.05 for d in self.rss_drift):
            out.append("node RSS moved more than 5 % after warm-up")
        return out

    def summary(self) -> str:
        t = self.tally
        rate = t.sent / self.seconds if self.seconds else 0
        lines = [
            f"inputs {t.sent} in {self.seconds:.0f} s ({rate:.0f}/s)  per layer: "
            + ", ".join(f"{k} {v}" for k, v in sorted(t.inputs.items())),
            f"HTTP answers: {dict(sorted(t.http.items()))}  (5xx other than 507: "
            f"{t.server_errors})",
            f"WebSocket frames: {dict(t.frames.most_common(12))}",
            f"WebSocket closes: {dict(t.closes)}  loop crashes: {t.loop_crashes}  "
            f"node log crash lines: {dict(self.crashes.crashes)}",
            f"problem-report codes (sampled): {dict(t.problems.most_common(15))}",
            "honest " + self.verdict.summary(),
            "hostile-order " + self.order_verdict.summary(),
            f"RSS (KiB->MiB, per node; warm-up until {self.warm_inputs} inputs): {self.rss.show()}",
            f"RSS drift after warm-up: {[f'{d:.1%}' for d in self.rss_drift] or 'too short'}",
        ]
        if t.mqs:
            lines.append(f"mqs (schemathesis): {t.mqs}")
        if self.honest_errors:
            lines.append(f"honest errors: {self.honest_errors[:5]}")
        if self.crashes.examples:
            lines.append("first crash in the node logs:\n" + self.crashes.examples[0])
        misses = self.misses()
        lines.append("TARGETS MET" if not misses else "TARGETS MISSED: " + "; ".join(misses))
        return "\n".join(lines)


def _mqs_runner() -> Callable[..., dict[str, int]] | None:
    if importlib.util.find_spec("tests.soak.fuzz_mqs") is None:
        return None
    from tests.soak import fuzz_mqs

    runner: Callable[..., dict[str, int]] = fuzz_mqs.run
    return runner


async def run(
    inputs: int,
    seed: int = 1,
    *,
    redis_url: str | None = None,
    workers: int = 4,
    mqs: bool = True,
    progress: Callable[[str], None] = print,
    progress_every: float = 10.0,
    findings: Path | None = None,
    layers: frozenset[str] = LAYERS,
) -> Report:
    """Start Redis (unless `redis_url`) and two nodes, fuzz them with `inputs` inputs,
    and return the report. The recursion limit is raised only meanwhile: the test
    process may also run the app in process (tests/inprocess.py), which must read JSON
    with the limit a node has."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION_LIMIT))
    try:
        return await _fuzz(
            inputs,
            seed,
            redis_url=redis_url,
            workers=workers,
            mqs=mqs,
            progress=progress,
            progress_every=progress_every,
            findings=findings,
            layers=layers,
        )
    finally:
        sys.setrecursionlimit(limit)


async def _fuzz(
    inputs: int,
    seed: int,
    *,
    redis_url: str | None,
    workers: int,
    mqs: bool,
    progress: Callable[[str], None],
    progress_every: float,
    findings: Path | None,
    layers: frozenset[str],
) -> Report:
    redis = None
    if redis_url is None:
        redis = RedisUnderTest()
        redis.start()
        redis_url = redis.url
    mqs_run = _mqs_runner() if mqs else None
    env = {
        "MEDIATOR_FORWARD_UNKNOWN_KEY_WAIT_SECONDS": "0.02",
        "MEDIATOR_HANDSHAKE_PUSH_DELAY_SECONDS": "0.2",
        "MEDIATOR_PUSH_TIMEOUT_SECONDS": "2",
        "MEDIATOR_DELIVERY_TIMEOUT_SECONDS": "10",  # fuzz_orders.REOFFERED_WITHIN is past it
        # One client address sends everything here: the per-client limits would only
        # measure themselves (their refusals are answers, not crashes, either way).
        "MEDIATOR_WEBSOCKET_MESSAGES_PER_SECOND": "0",
        "MEDIATOR_WEBSOCKET_SOCKETS_PER_ADDRESS": "0",
        "MEDIATOR_WEBSOCKET_HANDSHAKE_SECONDS": "0",
        "MEDIATOR_LIMIT_FORWARDS_PER_SECOND": "0",
        "MEDIATOR_LIMIT_SENDER_BYTES_PER_MINUTE": "0",
    }
    if mqs_run is not None:
        env["MEDIATOR_API_TOKENS"] = MQS_TOKEN
    nodes = [Node(redis_url, **env), Node(redis_url, MEDIATOR_IN_PROCESS_WORKER="false", **env)]
    tally, history, order_history = Tally(), History(), History()
    watch, rss = LogWatch(nodes), RssSeries(nodes)
    started = time.monotonic()
    mqs_share = inputs // 20 if mqs_run is not None else 0
    budget = Budget(inputs - mqs_share)
    warm = inputs // 4
    try:
        await asyncio.gather(*(asyncio.to_thread(n.start) for n in nodes))
        a, b = nodes[0].base, nodes[1].base
        oob = (await fetch_invitation(a))["invitation"]
        mediator = did_key_to_verkey(oob["services"][0]["recipientKeys"][0])
        honest = await Honest.start(a, b, history)
        agents = await asyncio.gather(*(fuzz_agent(n.base) for n in nodes * workers))

        def other_ids() -> list[str]:
            return [*honest.seen_ids[-60:], honest.live_key]

        rng = random.Random(seed)
        sample = (await fuzz_agent(a))[0].pack({"@type": "x", "@id": "12345678"})
        v2 = await mediated_wallet(a)
        raw_gens = [
            raw_mix(random.Random(rng.random()), sample, mediator, v2, layers)
            for _ in range(workers)
        ]
        plain_gens = [
            plain_mix(random.Random(rng.random()), agent, key, other_ids) for agent, key in agents
        ]
        stop_honest = asyncio.Event()
        background = [
            asyncio.create_task(honest.run_live()),
            asyncio.create_task(honest.run_polling()),
            asyncio.create_task(send_numbered(honest, "sender-a", a, stop_honest)),
            asyncio.create_task(send_numbered(honest, "sender-b", b, stop_honest)),
        ]
        orders = asyncio.create_task(
            fuzz_orders.run(nodes, mediator, budget, tally, order_history, honest, seed)
            if "order" in layers
            else asyncio.sleep(0)
        )
        tasks = []
        for i in range(workers if layers & RAW_LAYERS else 0):
            base = nodes[i % 2].base
            tasks.append(ws_worker(base, raw_gens[i], budget, tally, None))
            tasks.append(http_worker(nodes[(i + 1) % 2].base, raw_gens[i], budget, tally))
        for i, (agent, _) in enumerate(agents if "plaintext" in layers else []):
            base = nodes[i % 2].base
            if i % 4 == 3:
                tasks.append(http_worker(base, plain_gens[i], budget, tally))
            else:
                tasks.append(ws_worker(base, plain_gens[i], budget, tally, agent.keys))
        mqs_thread = None
        if mqs_run is not None and mqs_share:
            mqs_thread = threading.Thread(
                target=lambda: tally.mqs.update(mqs_run(a, MQS_TOKEN, mqs_share, seed)),
                name="fuzz-mqs",
                daemon=True,
            )
            mqs_thread.start()
        fuzzing = asyncio.gather(*tasks)
        rss.sample(0)
        while not fuzzing.done():
            await asyncio.wait([fuzzing], timeout=progress_every)
            rss.sample(tally.sent)
            watch.scan()
            elapsed = time.monotonic() - started
            progress(
                f"[{elapsed:7.1f}s] inputs {tally.sent}/{inputs} ({tally.sent / elapsed:.0f}/s)  "
                f"5xx {tally.server_errors}  loop crashes {tally.loop_crashes}  "
                f"log crashes {watch.total}  honest events {len(honest.history)}  "
                f"RSS {'/'.join(str(v // 1024) + 'M' for v in rss.samples[-1][2])}"
            )
        await fuzzing
        await orders
        if mqs_thread is not None:
            await asyncio.to_thread(mqs_thread.join, 600)
            tally.inputs["mqs"] = tally.mqs.get("inputs", 0)
        stop_honest.set()
        await asyncio.gather(*background[2:])
        await honest.finish(settle=30)
        await asyncio.gather(*background[:2], return_exceptions=True)
        rss.sample(tally.sent)
        watch.scan()
    finally:
        await asyncio.gather(*(asyncio.to_thread(n.stop) for n in nodes))
        if redis is not None:
            redis.stop()
    report = Report(
        tally,
        history.check(),
        order_history.check(),
        watch,
        rss,
        time.monotonic() - started,
        inputs,
        warm,
        honest.errors,
    )
    if findings is not None and tally.findings:
        write_findings(findings, tally.findings)
    return report


def write_findings(folder: Path, findings: list[tuple[str, str, bytes]]) -> None:
    """Each input that crashed something, and what it did, for a regression test."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, (kind, layer, data) in enumerate(findings):
        (folder / f"{i:03d}-{layer}.bin").write_bytes(data)
        (folder / f"{i:03d}-{layer}.txt").write_text(kind)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.soak.fuzz", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--inputs", type=int, default=1_000_000, help="inputs to send (1000000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (1)")
    parser.add_argument(
        "--workers", type=int, default=4, help="parallel fuzzers of each kind per run (4)"
    )
    parser.add_argument(
        "--progress-every", type=float, default=10.0, help="seconds between progress lines (10)"
    )
    parser.add_argument(
        "--findings",
        type=Path,
        default=Path("fuzz-findings"),
        help="where inputs that crashed something are written (./fuzz-findings)",
    )
    parser.add_argument("--no-mqs", action="store_true", help="skip the mqs API fuzzer")
    parser.add_argument(
        "--layers",
        default=",".join(sorted(LAYERS)),
        help="the kinds of input to send, comma-separated (all: %(default)s); e.g. v2 alone "
        "to watch the v2 paths' memory; honest traffic runs whatever the choice",
    )
    args = parser.parse_args(argv)
    layers = frozenset(args.layers.split(","))
    if not layers or not layers <= LAYERS:
        parser.error(f"--layers: some of {', '.join(sorted(LAYERS))}")
    report = asyncio.run(
        run(
            args.inputs,
            args.seed,
            workers=args.workers,
            mqs=not args.no_mqs,
            progress=lambda line: print(line, flush=True),
            progress_every=args.progress_every,
            findings=args.findings,
            layers=layers,
        )
    )
    print(report.summary(), flush=True)
    return 1 if report.misses() else 0


if __name__ == "__main__":
    sys.exit(main())
