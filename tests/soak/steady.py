"""Steady soak: a small cluster at half the forward rate it sustains, for as long as asked,
with live (WebSocket), polling (HTTP pickup) and pushed (the node posts to an endpoint of the
recipient's) recipients. Every message must arrive, with no error, and memory must stay flat.

    python -m tests.soak.steady --help
    python -m tests.soak.steady --minutes 60

First it measures saturation: with the recipients running, `--senders-max` sequential senders
forward to them as fast as they are answered for `--measure` seconds; the rate accepted is
what this cluster sustains on this machine with this client (whose encryption and the wallets'
decryption cost CPU on the same cores). Those forwards must be delivered too. Then it runs at
`--load` (50 %) of that rate for the given time. Every `--sample` seconds it samples the
resident memory of each node process and Redis's `used_memory`; after the warm-up (the first
`--warmup` share of the run) the mean of the last quarter of samples must be within `--flat`
(5 %) of the first quarter's. Redis keeps every request's RFC 0008 thread order for
`MEDIATOR_THREAD_STATE_SECONDS` (600 s) to twice that (it is forgotten a generation at a
time), so its memory grows for 20 minutes by design and then saws between one and two
generations: the warm-up must cover the growth (a 60-minute run's 35 % does; shorter runs pass
`--thread-state-seconds 60`).
The history (tests/soak/history.py) must have nothing lost, duplicated, reordered or stray.
Exits 1 when an invariant broke.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.didcomm_peer import mediator_key
from tests.local_server import LocalServer
from tests.netns import RedisServer
from tests.servers import Node
from tests.soak.actors import Forwarder, LiveWallet, PollingWallet, PushedWallet, Sent, Wallet
from tests.soak.history import History, Verdict

NODE_ENV = {
    "MEDIATOR_OUTBOUND_ALLOW": "127.0.0.0/8",  # the pushed recipients' endpoints
    "MEDIATOR_PUSH_RETRY_MIN_SECONDS": "0.2",
    "MEDIATOR_PUSH_RETRY_MAX_SECONDS": "1",
    "MEDIATOR_WORKER_TICK_SECONDS": "0.5",
}


@dataclass
class Samples:
    at: list[float] = field(default_factory=list)
    nodes_rss: list[int] = field(default_factory=list)  # bytes, all node processes
    redis_used: list[int] = field(default_factory=list)

    def drift(self, series: list[int], warmup: float) -> float | None:
        """(mean of the last quarter / mean of the first quarter) - 1, after the warm-up."""
        keep = series[int(len(series) * warmup) :]
        quarter = len(keep) // 4
        if quarter < 1:
            return None
        first = sum(keep[:quarter]) / quarter
        last = sum(keep[-quarter:]) / quarter
        return last / first - 1


@dataclass
class Result:
    saturation: float  # forwards a second accepted at saturation
    target: float
    achieved: float
    seconds: float
    sent: Sent
    verdict: Verdict
    samples: Samples
    wallet_errors: int
    drifts: dict[str, float | None]
    broken: list[str]
    reordered_by_kind: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        lines = [
            "== steady",
            f"saturation {self.saturation:.0f} forwards/s; target {self.target:.0f}/s, "
            f"achieved {self.achieved:.0f}/s over {self.seconds:.0f} s",
            f"forwards answered {dict(self.sent.statuses)}, unanswered {self.sent.unanswered}; "
            f"wallet errors {self.wallet_errors}",
            f"memory: nodes RSS {_mb(self.samples.nodes_rss[0])} -> "
            f"{_mb(self.samples.nodes_rss[-1])} MB, Redis used {_mb(self.samples.redis_used[0])}"
            f" -> {_mb(self.samples.redis_used[-1])} MB; drift after warm-up "
            + ", ".join(f"{k} {_pct(v)}" for k, v in self.drifts.items()),
            self.verdict.summary(),
            f"reordered by kind of recipient: {self.reordered_by_kind}",
            "BROKEN: " + "; ".join(self.broken) if self.broken else "all invariants held",
        ]
        return "\n".join(lines)


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f}"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:+.1f}%"


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class Endpoints(LocalServer):
    """One HTTP server for every pushed recipient: POST /<name>."""

    def __init__(self) -> None:
        self.wallets: dict[str, PushedWallet] = {}
        super().__init__(Starlette(routes=[Route("/{name}", self._post, methods=["POST"])]))

    async def _post(self, request: Request) -> Response:
        wallet = self.wallets.get(request.path_params["name"])
        if wallet is None:
            return Response(status_code=404)
        wallet.pushed(await request.body())
        return Response(status_code=200)


def say(started: float, text: str) -> None:
    print(f"[{time.monotonic() - started:7.1f}s] {text}", flush=True)


async def saturation(
    wallets: list[Wallet],
    pick: Callable[[], str],
    med: str,
    history: History,
    sent: Sent,
    args: argparse.Namespace,
) -> float:
    """Forwards a second the cluster accepts with `--senders-max` senders flat out while the
    recipients take them: the whole path (forward, queue, delivery, acknowledgement) on
    these cores, the client's encryption and the wallets' decryption included. These
    forwards are in the history like the others: each must be delivered."""
    senders = [Forwarder(f"sat{i}", med, history, sent) for i in range(args.senders_max)]
    stop = asyncio.Event()
    flat_out = 1e9
    tasks = [asyncio.create_task(s.run(wallets, pick, stop, flat_out)) for s in senders]
    await asyncio.sleep(1)  # connections made, caches warm
    before, start = sent.statuses[202], time.monotonic()
    await asyncio.sleep(args.measure)
    rate = (sent.statuses[202] - before) / (time.monotonic() - start)
    stop.set()
    await asyncio.gather(*tasks)
    for s in senders:
        await s.aclose()
    return rate


async def steady(args: argparse.Namespace) -> Result:
    started = time.monotonic()
    seconds = args.seconds if args.seconds else args.minutes * 60
    history, sent = History(), Sent()
    samples = Samples()
    with tempfile.TemporaryDirectory(prefix="steady-redis-") as tmp:
        redis = RedisServer(Path(tmp))
        redis.start()
        env = {**NODE_ENV, "MEDIATOR_THREAD_STATE_SECONDS": str(args.thread_state_seconds)}
        nodes = [Node(redis.url, **env) for _ in range(args.nodes)]
        endpoints = Endpoints()
        await endpoints.start()
        try:
            await asyncio.gather(*(asyncio.to_thread(n.start) for n in nodes))
            bases = [n.base for n in nodes]
            med = await mediator_key(bases[0])

            def pick() -> str:
                return random.choice(bases)

            live = [LiveWallet(f"l{i}", med, history, pick) for i in range(args.live)]
            polling = [
                PollingWallet(f"p{i}", med, history, pick, args.poll) for i in range(args.polling)
            ]
            pushed = [
                PushedWallet(f"h{i}", med, history, f"{endpoints.url}/h{i}")
                for i in range(args.pushed)
            ]
            for w in pushed:
                endpoints.wallets[w.name] = w
            wallets: list[Wallet] = [*live, *polling, *pushed]
            for i in range(0, len(wallets), 10):
                await asyncio.gather(*(w.setup(pick()) for w in wallets[i : i + 10]))
            readers = [asyncio.create_task(w.run()) for w in (*live, *polling)]
            say(started, f"{len(live)} live, {len(polling)} polling, {len(pushed)} pushed")
            sat = await saturation(wallets, pick, med, history, sent, args)
            target = sat * args.load
            say(started, f"saturation {sat:.0f} forwards/s; running at {target:.0f}/s")
            senders = [Forwarder(f"s{i}", med, history, sent) for i in range(args.senders)]
            stop = asyncio.Event()
            per_sender = target / len(senders)
            accepted_before = sent.statuses[202]
            tasks = [asyncio.create_task(s.run(wallets, pick, stop, per_sender)) for s in senders]
            run_start = time.monotonic()
            next_report = run_start + args.progress
            while time.monotonic() - run_start < seconds:
                await asyncio.sleep(args.sample)
                samples.at.append(time.monotonic() - run_start)
                samples.nodes_rss.append(sum(rss(n.proc.pid) for n in nodes if n.proc))
                samples.redis_used.append(redis.used_memory())
                if time.monotonic() >= next_report:
                    next_report += args.progress
                    elapsed = time.monotonic() - run_start
                    say(
                        started,
                        f"{sent.statuses[202]} accepted "
                        f"({(sent.statuses[202] - accepted_before) / elapsed:.0f}/s), "
                        f"{sum(w.seen for w in wallets)} delivered, other answers "
                        f"{ {k: v for k, v in sent.statuses.items() if k != 202} }, nodes "
                        f"{_mb(samples.nodes_rss[-1])} MB, Redis {_mb(samples.redis_used[-1])} MB",
                    )
            stop.set()
            await asyncio.gather(*tasks)
            elapsed = time.monotonic() - run_start
            say(started, "stopped sending; waiting for the last deliveries")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and history.check().lost:  # noqa: ASYNC110
                await asyncio.sleep(0.5)
            for w in wallets:
                w.stopping = True
            await asyncio.gather(*readers, return_exceptions=True)
            for w in wallets:
                await w.finish(bases)
            for s in senders:
                await s.aclose()
        finally:
            await endpoints.stop()
            for n in nodes:
                n.stop()
            redis.stop()
    verdict = history.check()
    drifts = {
        "nodes": samples.drift(samples.nodes_rss, args.warmup),
        "redis": samples.drift(samples.redis_used, args.warmup),
    }
    result = Result(
        sat,
        target,
        (sent.statuses[202] - accepted_before) / elapsed,
        elapsed,
        sent,
        verdict,
        samples,
        sum(w.errors for w in wallets),
        drifts,
        [],
    )
    kinds = {w.key: type(w).__name__ for w in wallets}
    for r in verdict.reordered:
        kind = kinds.get(r.content.recipient, "?")
        result.reordered_by_kind[kind] = result.reordered_by_kind.get(kind, 0) + 1
    check(result, args)
    return result


def check(r: Result, args: argparse.Namespace) -> None:
    if set(r.sent.statuses) - {202} or r.sent.unanswered:
        r.broken.append(f"forwards not accepted: {dict(r.sent.statuses)}, {r.sent.unanswered}")
    if r.wallet_errors:
        r.broken.append(f"{r.wallet_errors} wallet errors")
    if not r.verdict.ok:
        r.broken.append("the history is not clean")
    if args.check_memory:
        for name, drift in r.drifts.items():
            if drift is None or abs(drift) > args.flat:
                r.broken.append(f"{name} memory drifted {_pct(drift)} after the warm-up")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tests.soak.steady",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add: Callable[..., Any] = p.add_argument
    add("--minutes", type=float, default=60.0, help="how long to run at the target rate")
    add("--seconds", type=float, default=0.0, help="run this many seconds instead (short form)")
    add("--nodes", type=int, default=2, help="mediator nodes")
    add("--load", type=float, default=0.5, help="share of the saturation rate to run at")
    add("--measure", type=float, default=8.0, help="seconds the saturation is measured")
    add("--senders-max", type=int, default=24, help="senders flat out, for saturation")
    add("--senders", type=int, default=24, help="sequential senders during the run")
    add("--live", type=int, default=20, help="live (WebSocket) recipients")
    add("--polling", type=int, default=10, help="polling (HTTP pickup) recipients")
    add("--poll", type=float, default=1.0, help="seconds between a polling recipient's pickups")
    add("--pushed", type=int, default=5, help="recipients with an endpoint the node pushes to")
    add("--sample", type=float, default=5.0, help="seconds between memory samples")
    add("--progress", type=float, default=30.0, help="seconds between progress lines")
    add("--warmup", type=float, default=0.35, help="share of the samples left out as warm-up")
    add("--flat", type=float, default=0.05, help="the memory drift allowed after warm-up")
    add(
        "--thread-state-seconds",
        type=int,
        default=600,
        help="the nodes' MEDIATOR_THREAD_STATE_SECONDS: Redis keeps each request's thread "
        "order this long, so its memory grows for this long before it can be flat (the "
        "warm-up must cover it)",
    )
    add(
        "--no-check-memory",
        dest="check_memory",
        action="store_false",
        help="report the memory drift without failing on it (runs too short to tell)",
    )
    return p


def run(argv: list[str]) -> Result:
    args = parser().parse_args(argv)
    result = asyncio.run(steady(args))
    print(result.summary(), flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    return 1 if run(sys.argv[1:] if argv is None else argv).broken else 0


if __name__ == "__main__":
    sys.exit(main())
