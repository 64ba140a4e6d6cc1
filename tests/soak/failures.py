"""Failures, measured: what wallets and senders see when Redis fills up, when a node is cut
off from Redis, when Redis is slow, and when Redis restarts. Every forward, delivery and
acknowledgement goes into a history whose checker (tests/soak/history.py) finds what was
lost, duplicated or reordered; each scenario prints its figures and exits 1 when an
invariant broke.

    python -m tests.soak.failures --help
    python -m tests.soak.failures maxmemory --fill-mb 8
    python -m tests.soak.failures partition --seconds 60 --cut 20     # root: netns, iptables
    python -m tests.soak.failures slow --delay 0.2 --seconds 60
    python -m tests.soak.failures restart --restarts 5 --down 2

- maxmemory: Redis at `maxmemory` (noeviction) while forwards keep coming: refusals are 507
  with a JSON body, never 500; a refused forward is never delivered (no partial writes);
  `/readyz` stays 200; pickups free memory and forwards are accepted again, no restart.
- partition: one node in a network namespace, iptables dropping its packets to and from
  Redis: it turns unready, refuses forwards with 503, closes its sockets with 1013; its
  wallets move to the other node; after the heal nothing accepted is lost, and no socket
  gets a delivery once its wallet's next socket is live.
- slow: every Redis round trip delayed (a TCP proxy): nothing lost, no 5xx but 503.
- restart: the Redis process SIGKILLed and started again on its append-only file: nodes
  recover by themselves, wallets get everything, nothing accepted is lost.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.didcomm_peer import mediator_key
from tests.netns import DelayProxy, Netns, NetnsNode, RedisServer
from tests.servers import Node
from tests.soak.actors import Forwarder, LiveWallet, PollingWallet, Sent, Wallet
from tests.soak.history import History, Verdict

FAST = {  # short deadlines and leases, so that recoveries happen within a test
    "MEDIATOR_PRESENCE_SECONDS": "3",
    "MEDIATOR_DELIVERY_TIMEOUT_SECONDS": "5",
    "MEDIATOR_WORKER_TICK_SECONDS": "0.5",
    "MEDIATOR_STORAGE_LOST_SECONDS": "2",
}


@dataclass
class Outcome:
    name: str
    verdict: Verdict
    sent: Sent
    facts: dict[str, Any] = field(default_factory=dict)
    broken: list[str] = field(default_factory=list)  # invariants that did not hold

    def summary(self) -> str:
        statuses = ", ".join(f"{s}: {n}" for s, n in sorted(self.sent.statuses.items()))
        lines = [f"== {self.name}", f"forwards answered {{{statuses}}}"]
        lines += [f"  {s}: {body}" for s, body in sorted(self.sent.bodies.items())]
        lines += [f"{k}: {v}" for k, v in self.facts.items()]
        lines.append(self.verdict.summary())
        lines.append("BROKEN: " + "; ".join(self.broken) if self.broken else "all invariants held")
        return "\n".join(lines)


def say(started: float, text: str) -> None:
    print(f"[{time.monotonic() - started:6.1f}s] {text}", flush=True)


async def readyz(base: str) -> int:
    try:
        async with httpx.AsyncClient(timeout=3) as client:
            return (await client.get(base + "/readyz")).status_code
    except httpx.HTTPError:
        return 0


async def until(check: Callable[[], Awaitable[bool]], seconds: float) -> float | None:
    """Seconds until `check` held (polled every 0.1 s), None if it did not within `seconds`."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if await check():
            return round(time.monotonic() - start, 1)
        await asyncio.sleep(0.1)
    return None


async def settle(
    history: History, wallets: list[Wallet], seconds: float, *, acknowledged: bool = False
) -> None:
    """Wait until every accepted content was delivered (and with `acknowledged`, every
    delivery acknowledged: what a wallet got and could not acknowledge is offered again at
    its deadline), or `seconds`."""
    keys = {w.key for w in wallets}

    async def delivered() -> bool:
        if acknowledged and history.unacknowledged(keys):
            return False
        return not history.check().lost

    await until(delivered, seconds)


async def start_nodes(nodes: list[Node]) -> None:
    await asyncio.gather(*(asyncio.to_thread(n.start) for n in nodes))


def stop_all(nodes: list[Node]) -> None:
    for node in nodes:
        node.stop()


@dataclass
class Traffic:
    """Live and polling wallets on random nodes, and senders forwarding to them at a rate,
    until told to stop (the slow and restart scenarios)."""

    live: list[LiveWallet]
    wallets: list[Wallet]
    senders: list[Forwarder]
    tasks: list[asyncio.Task[Any]]
    sending: list[asyncio.Task[Any]]
    stop: asyncio.Event

    @classmethod
    async def start(
        cls, bases: list[str], args: argparse.Namespace, history: History, sent: Sent
    ) -> Traffic:
        med = await mediator_key(bases[0])

        def pick() -> str:
            return random.choice(bases)

        live = [LiveWallet(f"l{i}", med, history, pick) for i in range(args.wallets)]
        polling = [PollingWallet(f"p{i}", med, history, pick, 1.0) for i in range(2)]
        wallets: list[Wallet] = [*live, *polling]
        await asyncio.gather(*(w.setup(pick()) for w in wallets))
        tasks = [asyncio.create_task(w.run()) for w in wallets]
        stop = asyncio.Event()
        senders = [
            Forwarder(f"s{i}", med, history, sent, maybe_stored=True) for i in range(args.senders)
        ]
        sending = [asyncio.create_task(s.run(wallets, pick, stop, args.rate)) for s in senders]
        return cls(live, wallets, senders, tasks, sending, stop)

    async def stop_sending(self) -> None:
        self.stop.set()
        await asyncio.gather(*self.sending)

    async def finish(self, bases: list[str]) -> None:
        """The wallets stop and pick up what is left; the senders close."""
        for w in self.wallets:
            w.stopping = True
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for w in self.wallets:
            await w.finish(bases)
        for s in self.senders:
            await s.aclose()


def no_500(outcome: Outcome, expected: int = 503) -> None:
    """The only 5xx is the scenario's clear refusal: 503 (storage unavailable) or 507
    (storage full)."""
    bad = {s: n for s, n in outcome.sent.statuses.items() if s >= 500 and s != expected}
    if bad:
        outcome.broken.append(f"answers other than {expected} among the 5xx: {bad}")


def nothing_lost(outcome: Outcome) -> None:
    v = outcome.verdict
    if v.lost or v.duplicated or v.stray:
        outcome.broken.append(
            f"lost {len(v.lost)}, duplicated {len(v.duplicated)}, stray {len(v.stray)}"
        )


# ---------------------------------------------------------------------------- maxmemory


async def maxmemory(args: argparse.Namespace) -> Outcome:
    started = time.monotonic()
    history, sent = History(), Sent()
    with tempfile.TemporaryDirectory(prefix="failures-redis-") as tmp:
        redis = RedisServer(Path(tmp))
        redis.start()
        node = Node(redis.url, **FAST)
        try:
            await start_nodes([node])
            med = await mediator_key(node.base)
            live = [LiveWallet(f"l{i}", med, history, lambda: node.base) for i in range(3)]
            polling = [
                PollingWallet(f"p{i}", med, history, lambda: node.base, 0.5) for i in range(3)
            ]
            wallets: list[Wallet] = [*live, *polling]
            for w in wallets:
                await w.setup(node.base)
                await w.pickup_round(w.peer)  # type: ignore[arg-type]
            tasks = [asyncio.create_task(w.run()) for w in wallets]  # type: ignore[attr-defined]
            for w in wallets:
                w.paused = True
            limit = redis.used_memory() + args.fill_mb * 1024 * 1024
            redis.set_maxmemory(limit)
            say(started, f"maxmemory {limit} B; wallets paused; forwarding until refused")
            senders = [Forwarder(f"s{i}", med, history, sent, size=args.size) for i in range(2)]
            refused = 0
            while refused < args.refusals:
                for s in senders:
                    status = await s.forward(node.base, random.choice(wallets))
                    refused += status == 507  # (429: a recipient's own rate, not fullness)
                if sum(sent.statuses.values()) > 100_000:
                    break
            ready_when_full = await readyz(node.base)
            say(started, f"full: {dict(sent.statuses)}, /readyz {ready_when_full}")
            accepted_before = sent.statuses[202]
            for w in wallets:
                w.paused = False
            say(started, "wallets pick up again")
            again: list[int | None] = []

            async def accepted_again() -> bool:
                status = await senders[0].forward(node.base, random.choice(wallets))
                again.append(status)
                return status == 202

            reaccepted = await until(accepted_again, 60)
            say(started, f"forwards accepted again after {reaccepted} s")
            for _ in range(args.after):
                for s in senders:
                    await s.forward(node.base, random.choice(wallets))
            await settle(history, wallets, 30)
            for w in wallets:
                w.stopping = True
            await asyncio.gather(*tasks, return_exceptions=True)
            for w in wallets:
                await w.finish([node.base])
            memory_after = redis.used_memory()
            for s in senders:
                await s.aclose()
        finally:
            stop_all([node])
            redis.stop()
    outcome = Outcome("maxmemory", history.check(), sent)
    outcome.facts = {
        "maxmemory bytes": limit,
        "accepted before refusals": accepted_before,
        "/readyz when full": ready_when_full,
        "seconds until accepted again": reaccepted,
        "used memory at the end": memory_after,
    }
    no_500(outcome, 507)
    nothing_lost(outcome)
    if sent.statuses[507] == 0:
        outcome.broken.append("Redis never filled up: no forward was refused (507)")
    if ready_when_full != 200:
        outcome.broken.append(f"/readyz answered {ready_when_full} when Redis was full")
    if reaccepted is None:
        outcome.broken.append("forwards were not accepted again after pickups")
    return outcome


# ---------------------------------------------------------------------------- partition


async def partition(args: argparse.Namespace) -> Outcome:
    started = time.monotonic()
    history, sent = History(), Sent()
    ns = Netns().create()
    facts: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="failures-redis-") as tmp:
            redis = RedisServer(Path(tmp), also_bind=ns.host_ip)
            redis.start()
            cut_off = NetnsNode(ns, redis.url_for(ns.host_ip), **FAST)
            other = Node(redis.url, **FAST)
            nodes: list[Node] = [cut_off, other]
            try:
                await start_nodes(nodes)
                facts, sent = await _partition(args, started, history, cut_off, other, ns, redis)
            finally:
                stop_all(nodes)
                redis.stop()
    finally:
        ns.destroy()
    outcome = Outcome("partition", history.check(), sent, facts)
    no_500(outcome)
    nothing_lost(outcome)
    if facts["seconds until unready"] is None:
        outcome.broken.append("the cut-off node stayed ready")
    if facts["cut-off node's forwards answered during the cut"] - {503}:
        outcome.broken.append("the cut-off node answered forwards other than 503 while cut")
    if facts["its sockets closed with"] - {1012, 1013}:
        outcome.broken.append("its sockets were not closed with 1012/1013")
    if facts["its wallets that moved"] < facts["its wallets"]:
        outcome.broken.append("some of its wallets never moved to the other node")
    if facts["deliveries to a socket already replaced"]:
        outcome.broken.append("a socket got deliveries after its wallet's next socket was live")
    if facts["seconds until ready after the heal"] is None:
        outcome.broken.append("the node did not become ready after the heal")
    if facts["its forwards after the heal"] != {202}:
        outcome.broken.append("the healed node did not accept forwards")
    return outcome


async def _partition(
    args: argparse.Namespace,
    started: float,
    history: History,
    cut_off: Node,
    other: Node,
    ns: Netns,
    redis: RedisServer,
) -> tuple[dict[str, Any], Sent]:
    sent = Sent()
    med = await mediator_key(other.base)
    bases = [cut_off.base, other.base]
    ready = set(bases)

    def balancer() -> str:
        """What a load balancer with readiness checks picks: a ready node."""
        return random.choice(sorted(ready) or bases)

    wallets_a = [LiveWallet(f"a{i}", med, history, balancer) for i in range(args.wallets)]
    wallets_b = [LiveWallet(f"b{i}", med, history, balancer) for i in range(args.wallets)]
    for w in wallets_a:
        await w.setup(cut_off.base)
    for w in wallets_b:
        await w.setup(other.base)
    wallets: list[Wallet] = [*wallets_a, *wallets_b]
    tasks = [asyncio.create_task(w.run()) for w in (*wallets_a, *wallets_b)]
    stop = asyncio.Event()
    senders = [
        Forwarder(f"s{i}", med, history, sent, maybe_stored=True) for i in range(args.senders)
    ]
    sending = [
        asyncio.create_task(s.run(wallets, lambda: random.choice(bases), stop, args.rate))
        for s in senders
    ]
    say(started, f"{len(wallets)} live wallets on two nodes, {args.senders} senders")
    await asyncio.sleep(args.warm)
    during = Sent()
    ns.cut(redis.port)
    cut_at = time.monotonic()
    say(started, f"cut {cut_off.base} off from Redis")

    async def unready() -> bool:
        return await readyz(cut_off.base) == 503

    seconds_unready = await until(unready, 30)
    ready.discard(cut_off.base)
    say(started, f"unready after {seconds_unready} s")
    probe = Forwarder("probe-cut", med, history, during, maybe_stored=True, timeout=30)
    while time.monotonic() - cut_at < args.cut:
        await probe.forward(cut_off.base, random.choice(wallets_b))
        await asyncio.sleep(0.5)
    ns.heal()
    say(
        started, f"healed after {args.cut} s; probe forwards to it answered {dict(during.statuses)}"
    )

    async def ready_again() -> bool:
        return await readyz(cut_off.base) == 200

    seconds_ready = await until(ready_again, 60)
    ready.add(cut_off.base)
    after = Sent()
    probe_after = Forwarder("probe-healed", med, history, after)
    for _ in range(5):
        await probe_after.forward(cut_off.base, random.choice(wallets_b))
    await asyncio.sleep(args.warm)
    stop.set()
    await asyncio.gather(*sending)
    await settle(history, wallets, 30)
    for w in wallets:
        w.stopping = True
    await asyncio.gather(*tasks, return_exceptions=True)
    for w in wallets:
        await w.finish([other.base])
    for s in (*senders, probe, probe_after):
        await s.aclose()
    for extra in (during, after):
        sent.statuses.update(extra.statuses)
        sent.bodies.update(extra.bodies)
    codes = Counter(
        w.sockets[0].close_code for w in wallets_a if w.sockets[0].close_code is not None
    )
    facts = {
        "its wallets": len(wallets_a),
        "seconds until unready": seconds_unready,
        "cut-off node's forwards answered during the cut": set(during.statuses),
        "its sockets closed with": set(codes),
        "close codes": dict(codes),
        "its wallets that moved": sum(
            1 for w in wallets_a if any(s.base == other.base for s in w.sockets[1:])
        ),
        "deliveries to a socket already replaced": sum(
            s.deliveries_after_replaced for w in wallets_a + wallets_b for s in w.sockets
        ),
        "seconds until ready after the heal": seconds_ready,
        "its forwards after the heal": set(after.statuses),
        "reconnects": sum(len(w.sockets) - 1 for w in wallets_a + wallets_b),
        "its wallets' sockets (port, close code)": [
            [(int(s.base.rsplit(":", 1)[1]), s.close_code) for s in w.sockets] for w in wallets_a
        ],
    }
    return facts, sent


# ---------------------------------------------------------------------------- slow Redis


async def slow(args: argparse.Namespace) -> Outcome:
    started = time.monotonic()
    history, sent = History(), Sent()
    with tempfile.TemporaryDirectory(prefix="failures-redis-") as tmp:
        redis = RedisServer(Path(tmp))
        redis.start()
        proxy = DelayProxy(redis.port, args.delay).start()
        nodes = [Node(proxy.url, **FAST) for _ in range(2)]
        try:
            await start_nodes(nodes)
            say(started, f"two nodes, every Redis round trip {args.delay * 2:.2f} s longer")
            bases = [n.base for n in nodes]
            traffic = await Traffic.start(bases, args, history, sent)
            live, wallets = traffic.live, traffic.wallets
            await asyncio.sleep(args.seconds)
            await traffic.stop_sending()
            say(started, f"sent: {dict(sent.statuses)}; settling")
            await settle(history, wallets, 30)
            ready = [await readyz(b) for b in bases]
            await traffic.finish(bases)
        finally:
            stop_all(nodes)
            proxy.stop()
            redis.stop()
    outcome = Outcome("slow", history.check(), sent)
    outcome.facts = {
        "added per round trip (s)": args.delay * 2,
        "nodes' /readyz at the end": ready,
        "reconnects": sum(len(w.sockets) - 1 for w in live),
    }
    no_500(outcome)
    nothing_lost(outcome)
    if sent.statuses[202] == 0:
        outcome.broken.append("nothing was accepted")
    return outcome


# ---------------------------------------------------------------------------- restart


async def restart(args: argparse.Namespace) -> Outcome:
    started = time.monotonic()
    history, sent = History(), Sent()
    with tempfile.TemporaryDirectory(prefix="failures-redis-") as tmp:
        redis = RedisServer(Path(tmp))
        redis.start()
        nodes = [Node(redis.url, **FAST) for _ in range(2)]
        try:
            await start_nodes(nodes)
            bases = [n.base for n in nodes]
            traffic = await Traffic.start(bases, args, history, sent)
            live, wallets = traffic.live, traffic.wallets
            recoveries = []
            for n in range(args.restarts):
                await asyncio.sleep(args.every)
                redis.kill() if n % 2 == 0 else redis.stop()
                say(started, f"Redis {'killed' if n % 2 == 0 else 'stopped'}")
                await asyncio.sleep(args.down)
                redis.start()

                async def all_ready() -> bool:
                    return all([await readyz(b) == 200 for b in bases])

                recoveries.append(await until(all_ready, 60))
                say(started, f"Redis back; nodes ready after {recoveries[-1]} s")
            await asyncio.sleep(args.every)
            await traffic.stop_sending()
            say(started, f"sent: {dict(sent.statuses)}; settling")
            await settle(history, wallets, 30, acknowledged=True)
            seen_live = [w.seen for w in live]
            await traffic.finish(bases)
            late = {
                w.name: (w.seen - before, len(w.sockets))
                for w, before in zip(live, seen_live, strict=True)
                if w.seen > before
            }
        finally:
            stop_all(nodes)
            redis.stop()
    outcome = Outcome("restart", history.check(), sent)
    outcome.facts = {
        "restarts": args.restarts,
        "seconds down each": args.down,
        "seconds until every node was ready again": recoveries,
        "reconnects": sum(len(w.sockets) - 1 for w in live),
        # Messages a live wallet got only from its last pickup round, once every delivery
        # was acknowledged (wallet: (messages, sockets)): its live socket had stopped
        # delivering them. (A polling wallet's last round is just its next poll.)
        "delivered only by the last pickup round": late,
    }
    no_500(outcome)
    nothing_lost(outcome)
    if any(r is None for r in recoveries):
        outcome.broken.append("a node did not become ready again by itself")
    if late:
        outcome.broken.append(f"messages waited for the wallets' last pickup round: {late}")
    return outcome


SCENARIOS: dict[str, Callable[[argparse.Namespace], Awaitable[Outcome]]] = {
    "maxmemory": maxmemory,
    "partition": partition,
    "slow": slow,
    "restart": restart,
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tests.soak.failures",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    sub = p.add_subparsers(dest="scenario", required=True)

    def common(s: argparse.ArgumentParser, wallets: int, senders: int, rate: float) -> None:
        s.add_argument("--wallets", type=int, default=wallets, help="live wallets (per node)")
        s.add_argument("--senders", type=int, default=senders, help="sequential senders")
        s.add_argument("--rate", type=float, default=rate, help="forwards a second per sender")

    m = sub.add_parser("maxmemory", help="Redis reaches maxmemory under forwards")
    m.add_argument("--fill-mb", type=int, default=4, help="room above the start's usage (MB)")
    m.add_argument("--size", type=int, default=2000, help="padding of each content (bytes)")
    m.add_argument("--refusals", type=int, default=50, help="refused forwards before pickups")
    m.add_argument("--after", type=int, default=100, help="forwards per sender once freed")
    pa = sub.add_parser("partition", help="a node cut off from Redis (root: netns, iptables)")
    common(pa, 5, 2, 20.0)
    pa.add_argument("--warm", type=float, default=3.0, help="seconds before the cut and after")
    pa.add_argument("--cut", type=float, default=10.0, help="seconds the partition lasts")
    sl = sub.add_parser("slow", help="every Redis round trip delayed by a proxy")
    common(sl, 6, 4, 20.0)
    sl.add_argument("--delay", type=float, default=0.05, help="seconds added each way")
    sl.add_argument("--seconds", type=float, default=15.0, help="how long forwards flow")
    r = sub.add_parser("restart", help="Redis killed or stopped, then started on its AOF")
    common(r, 6, 2, 20.0)
    r.add_argument("--restarts", type=int, default=2, help="restarts (kill, stop, kill…)")
    r.add_argument("--down", type=float, default=1.0, help="seconds Redis stays down")
    r.add_argument("--every", type=float, default=4.0, help="seconds between restarts")
    return p


def run(argv: list[str]) -> Outcome:
    args = parser().parse_args(argv)
    outcome = asyncio.run(SCENARIOS[args.scenario](args))
    print(outcome.summary(), flush=True)
    return outcome


def main(argv: list[str] | None = None) -> int:
    return 1 if run(sys.argv[1:] if argv is None else argv).broken else 0


if __name__ == "__main__":
    sys.exit(main())
