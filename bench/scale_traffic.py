"""The traffic parts of the scale benchmark (bench/scale_bench.py): forwards to distinct
recipients against 8 and against the anchor, a fleet of idle live sockets, and live
deliveries at a fixed rate. Mixed into ScaleBench, which provides the servers.

Recipients are taken from separate ranges of the plan's indexes, so no part meets another's
state: the sockets' recipients first, then the rotating side's 8, then the live
recipients, and the distinct forwards' recipients drawn at random from the rest."""

from __future__ import annotations

import asyncio
import math
import os
import random
import statistics
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from bulk_load import Plan
from cluster_probes import CpuMeter, LiveSockets, fmt_cpu, open_loop
from loadgen import (
    Connection,
    Operation,
    close_connections,
    expect,
    open_connections,
    proc_cpu_seconds,
)
from mqs_bench import (
    HOST,
    Block,
    Pinning,
    Proc,
    Side,
    Target,
    _dist,
    fmt_rate,
    percentile,
    progress,
)
from redis.asyncio import Redis
from scale_clients import (
    BASIC,
    SocketFleet,
    forward,
    inner_content_length,
    live_sockets,
    pack_forwards,
)
from scale_redis import (
    client_commands,
    commands,
    fmt_top_level,
    process_rates,
    rates,
    rewrite_aof,
    top_level,
)

ROTATING = 8
HEADROOM_FDS = 150  # descriptors node2 keeps for Redis connections, HTTP, logs


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def open_files(pid: int) -> tuple[int, int]:
    """(descriptors open now, the soft limit) of a process."""
    soft = 0
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                soft = int(line.split()[3])
    return len(os.listdir(f"/proc/{pid}/fd")), soft


class TrafficWorkloads:
    """What the traffic parts use of ScaleBench (declared for the type checker)."""

    args: Any
    plan: Plan
    redis: Redis | None
    redis_pid: int | None
    node1: Proc | None
    node2: Proc | None
    anchor: Proc | None
    pinning: Pinning
    results: dict[str, Any]
    errors: list[str]

    if TYPE_CHECKING:  # given by ScaleBench and Bench

        def emit(self, line: str) -> None: ...
        def judge(self, name: str, label: str, shown: str, value: float) -> str: ...
        def cpu_pids(self) -> dict[str, int]: ...
        def anchor_side(self) -> Side: ...
        def describe(self, b: Block) -> str: ...
        async def run_block(self, side: Side, seconds: float, tag: str) -> Block: ...
        async def metrics(self, proc: Proc | None = None) -> dict[str, float]: ...
        async def profile(self, name: str, pid: int) -> dict[str, Any]: ...
        async def profile_block(self, name: str, side: Side) -> dict[str, Any]: ...

    # ------------------------------------------------------------------ who is where

    def regions(self) -> dict[str, range]:
        """Index ranges of the parts' recipients (see the module docstring)."""
        a = self.args
        sockets = range(0, a.sockets)
        rotating = range(sockets.stop, sockets.stop + ROTATING)
        live = range(rotating.stop, rotating.stop + a.live_recipients)
        return {
            "sockets": sockets,
            "rotating": rotating,
            "live": live,
            "distinct": range(live.stop, self.plan.recipients),
        }

    # ------------------------------------------------------------------ forwards

    def forward_side(
        self, label: str, requests: list[bytes], latencies: dict[str, list[float]]
    ) -> tuple[Side, list[int]]:
        """Forwards POSTed to node1, each answered 202, timed one by one; the blocks take
        `requests` in turn (again from the start if a run needs more)."""
        assert self.node1 is not None
        node = self.node1
        perf = time.perf_counter
        cursor = [0]

        async def prepare(tag: str) -> Operation:
            timings = latencies.setdefault(tag, [])

            async def op(conn: Connection) -> int:
                k = cursor[0]
                cursor[0] += 1
                t0 = perf()
                expect(await conn.request(requests[k % len(requests)]), 202)
                timings.append(perf() - t0)
                return 1

            return op

        async def cleanup(tag: str) -> None:
            return None

        return Side(label, Target("node1", node.port, node.pid), prepare, cleanup), cursor

    async def phase_forwards(self) -> None:
        args, plan = self.args, self.plan
        regions = self.regions()
        rng = random.Random(11)
        pool = regions["distinct"]
        picked = rng.sample(pool, min(args.forward_envelopes, len(pool)))
        # The rotating side sends as many different requests, to 8 recipients in turn, so
        # the two sides differ only in how many recipients they reach.
        eight = [regions["rotating"].start + k % ROTATING for k in range(len(picked))]
        progress(
            f"forwards: packing {len(picked):,} forwards to distinct recipients and as many "
            f"to {ROTATING}"
        )
        started = time.monotonic()
        distinct, inner = await asyncio.to_thread(pack_forwards, plan, picked, 2)
        rotating, _ = await asyncio.to_thread(pack_forwards, plan, eight, 2)
        progress(
            f"forwards: packed in {time.monotonic() - started:.0f} s (inner envelope "
            f"{inner:,} B, request {len(distinct[0]):,} B)"
        )
        assert self.redis is not None
        progress(f"forwards: AOF rewritten first, in {await rewrite_aof(self.redis):.0f} s")
        latencies: dict[str, list[float]] = {}
        anchor = self.anchor_side()
        spread, used = self.forward_side("forward-distinct", distinct, latencies)
        eight_side, _ = self.forward_side("forward-8", rotating, latencies)
        rounds: list[dict[str, Any]] = []
        for r in range(-1, args.pairs):
            seconds = args.warmup if r < 0 else args.seconds
            order = [anchor, eight_side, spread] if r % 2 == 0 else [spread, eight_side, anchor]
            blocks: dict[str, Block] = {}
            tags: dict[str, str] = {}
            for side in order:
                tag = f"{r}{side.label}"
                blocks[side.label] = await self.run_block(side, seconds, tag)
                tags[side.label] = tag
                await asyncio.sleep(args.pause)
            a, b8, d = (blocks[s.label] for s in (anchor, eight_side, spread))
            p99_8 = percentile(latencies[tags["forward-8"]], 99) * 1000
            p99_d = percentile(latencies[tags["forward-distinct"]], 99) * 1000
            row = {
                "anchor": asdict(a),
                "rotating_8": asdict(b8),
                "distinct": asdict(d),
                "p99_ms_8": p99_8,
                "p99_ms_distinct": p99_d,
                "latency_ms_8": _dist([x * 1000 for x in latencies[tags["forward-8"]]]),
                "latency_ms_distinct": _dist(
                    [x * 1000 for x in latencies[tags["forward-distinct"]]]
                ),
                "distinct_vs_8": d.rate / b8.rate,
                "p99_distinct_vs_8": p99_d / p99_8,
                "distinct_vs_anchor": d.rate / a.rate,
            }
            label = "warm-up" if r < 0 else f"round {r + 1}/{args.pairs}"
            progress(
                f"forwards {label}: {self.describe(a)} | {self.describe(b8)} p99 {p99_8:.2f} ms | "
                f"{self.describe(d)} p99 {p99_d:.2f} ms  distinct/8 {row['distinct_vs_8']:.2f} "
                f"p99 {row['p99_distinct_vs_8']:.2f}x, distinct/anchor "
                f"{row['distinct_vs_anchor']:.2f}"
            )
            for blk in (a, b8, d):
                if blk.errors:
                    self.errors.append(
                        f"forwards/{blk.label}: {blk.errors} errors: {blk.first_error}"
                    )
            if r >= 0:
                rounds.append(row)
        self.forward_report(rounds, used[0], len(distinct), inner)
        if args.profile:
            self.results["forwards"]["profiles"] = {
                side.label: await self.profile_block("forwards", side)
                for side in (eight_side, spread)
            }

    def forward_report(
        self, rounds: list[dict[str, Any]], used: int, pool: int, inner: int
    ) -> None:
        def med(key: str) -> float:
            return float(statistics.median(r[key] for r in rounds))

        ratio, p99, anchor = (
            med("distinct_vs_8"),
            med("p99_distinct_vs_8"),
            med("distinct_vs_anchor"),
        )
        rate_d = statistics.median(r["distinct"]["rate"] for r in rounds)
        rate_8 = statistics.median(r["rotating_8"]["rate"] for r in rounds)
        rate_a = statistics.median(r["anchor"]["rate"] for r in rounds)
        reused = max(0, used - pool)
        self.results["forwards"] = {
            "rounds": rounds,
            "distinct_vs_8": ratio,
            "p99_distinct_vs_8": p99,
            "distinct_vs_anchor": anchor,
            "forwards_to_distinct_recipients": used,
            "distinct_envelopes": pool,
            "reused": reused,
            "inner_envelope_bytes": inner,
        }
        s1 = self.judge("forward_distinct_vs_8", "forwards distinct/8", f"{ratio:.2f}x", ratio)
        s2 = self.judge("forward_p99_vs_8", "forward p99 distinct/8", f"{p99:.2f}x", p99)
        s3 = self.judge("forward_vs_anchor", "forwards distinct/anchor", f"{anchor:.2f}x", anchor)
        spread = ", ".join(f"{r['distinct_vs_8']:.2f}" for r in rounds)
        self.emit(
            f"forwards to {min(used, pool):,} distinct recipients of {self.plan.recipients:,}: "
            f"{fmt_rate(rate_d)}/s vs {fmt_rate(rate_8)}/s rotating over 8: {ratio:.2f}x "
            f"(rounds {spread})  target >= 0.9  {s1}; p99 {p99:.2f}x  target <= 1.2  {s2}"
            + (f" [{reused:,} envelopes reused]" if reused else "")
        )
        self.emit(
            f"forwards to distinct recipients vs the anchor's POST + XADD ({fmt_rate(rate_a)}/s): "
            f"{anchor:.2f}x  target >= 0.5  {s3}  (inner envelope {inner:,} B)"
        )

    # ------------------------------------------------------------------ sockets

    async def phase_sockets(self) -> None:
        """Idle live sockets on node2, as many as its open files allow: RSS, CPU and Redis
        commands over --sockets-seconds with all of them live."""
        assert self.node1 is not None and self.node2 is not None and self.redis is not None
        args, node = self.args, self.node2
        fds, limit = open_files(node.pid)
        count = min(args.sockets, limit - fds - HEADROOM_FDS)
        processes = max(1, math.ceil(count / args.sockets_per_process))
        progress(
            f"sockets: {count:,} for node2 (open-files limit {limit:,}, {fds} open), held by "
            f"{processes} client processes"
        )
        await asyncio.sleep(2)
        f: dict[str, Any] = {"requested": args.sockets, "open_files_limit": limit}
        f["rss_before"], cpu0 = rss_bytes(node.pid), proc_cpu_seconds(node.pid)
        url = f"ws://{HOST}:{node.port}/"
        fleet = SocketFleet(url, self.plan, range(0, count), processes, self.pinning.load_cpu)
        started = time.monotonic()
        try:
            await fleet.open(progress, every=args.progress_seconds)
            f["opening_seconds"] = time.monotonic() - started
            f["opened"], f["failed"], f["retried"] = fleet.opened, fleet.failed, fleet.retried
            f["refusals"] = fleet.refusals()
            f["node_cpu_ms_per_socket_opened"] = (
                (proc_cpu_seconds(node.pid) - cpu0) / max(fleet.opened, 1) * 1000
            )
            progress(
                f"sockets: {fleet.opened:,} open in {f['opening_seconds']:.0f} s "
                f"({fleet.retried} refused and retried, {fleet.failed} failed); node2 "
                f"{f['node_cpu_ms_per_socket_opened']:.2f} ms CPU per socket opened"
            )
            await asyncio.sleep(10)  # claims, first receives and replies settle
            f["rss_after"] = rss_bytes(node.pid)
            f["node_says"] = (await self.metrics(node)).get("mediator_websockets", float("nan"))
            servers = {"node1": self.node1.pid, "node2": node.pid}
            p0, c0 = await client_commands(self.redis, servers), await commands(self.redis)
            meter = CpuMeter(self.cpu_pids() | {f"client{k}": p for k, p in enumerate(fleet.pids)})
            progress(
                f"sockets: measuring {args.sockets_seconds:g} s idle with {fleet.opened:,} live"
            )
            await asyncio.sleep(args.sockets_seconds)
            f["cpu"], window = meter.shares(), time.perf_counter() - meter.start[0]
            c1 = await commands(self.redis)
            f["redis_commands_by_process"] = process_rates(
                p0, await client_commands(self.redis, servers), window
            )
            f["redis_commands"] = rates(c0, c1, window).to_json()
            progress(f"sockets: sampling what the nodes send ({args.monitor_seconds:g} s MONITOR)")
            f["top_level"] = await top_level(self.redis, args.monitor_seconds, servers)
            f["alive"] = fleet.alive
            f["client_processes_rss"] = sum(rss_bytes(pid) for pid in fleet.pids)
            if args.profile:
                f["profile"] = await self.profile("sockets-node2", node.pid)
        finally:
            await fleet.close()
        self.errors += [f"socket: {e}" for e in fleet.errors()[:5]]
        self.report_sockets(f)

    def report_sockets(self, f: dict[str, Any]) -> None:
        opened = f["opened"]
        per_socket = (f["rss_after"] - f["rss_before"]) / max(opened, 1)
        f["rss_per_socket"] = per_socket
        node_cpu = f["cpu"]["node2"]
        sent = sum(f["top_level"]["node2"].values())
        inner = f["redis_commands_by_process"]["node2"]
        self.results["sockets"] = f
        s1 = self.judge(
            "socket_rss", "RSS per idle live socket", f"{per_socket / 1000:.1f} KB", per_socket
        )
        s2 = self.judge("socket_node_cpu", "node CPU, idle sockets", f"{node_cpu:.1%}", node_cpu)
        s3 = self.judge("socket_redis_cmds", "Redis cmds/s, idle sockets", f"{sent:,.0f}/s", sent)
        self.emit(
            f"{opened:,} idle live sockets on one node (node2; {f['alive']:,} open at the end, the "
            f"node counts {f['node_says']:,.0f}; {f['open_files_limit']:,} open files per process "
            f"rule out 20,000): RSS +{(f['rss_after'] - f['rss_before']) / 1e6:,.1f} MB = "
            f"{per_socket / 1000:.1f} KB per socket  target <= 30 KB  {s1}; node2 {node_cpu:.1%} "
            f"of a core  target <= 10 %  {s2}; node2 sends Redis {sent:,.1f} commands/s  "
            f"target <= 1,000/s  {s3}"
        )
        cmd = f["redis_commands"]
        self.emit(
            f"  counted as Redis counts them (each command a script runs too): node2 "
            f"{inner:,.0f}/s; all processes {cmd['commands_per_second']:,.0f}/s "
            f"(node1's worker {f['redis_commands_by_process']['node1']:,.0f}/s)"
        )
        self.emit(f"  what the nodes send (MONITOR): {fmt_top_level(f['top_level'])}")
        self.emit(f"  cpu: {fmt_cpu(f['cpu'])}")
        if f["retried"]:
            self.emit(
                f"  {f['retried']:,} opens were refused and tried again (after 1, 2, 4, 8 s), "
                f"e.g. "
                f"{f['refusals'][:1]}"
            )
        if f["failed"] or f["alive"] < opened:
            self.errors.append(
                f"sockets: {f['failed']} failed to open, {opened - f['alive']} closed early"
            )

    # ------------------------------------------------------------------ live

    async def _profile_live(
        self, sockets: LiveSockets, conns: list[Connection], idx: list[int]
    ) -> dict[str, Any]:
        """py-spy on node2 during --profile-seconds more of the same traffic, after the
        measured window."""
        assert self.node2 is not None
        args, plan = self.args, self.plan
        length = inner_content_length(plan)
        count = max(1, int(args.live_rate * args.profile_seconds))
        packed = [
            forward(plan, idx[k % len(idx)], {"@type": BASIC, "content": "y" * length})
            for k in range(count)
        ]
        sockets.expect([tag for _, tag in packed])
        spy = asyncio.create_task(self.profile("live-node2", self.node2.pid))
        await open_loop(conns, [raw for raw, _ in packed], args.live_rate)
        await sockets.settle(None, 10.0)
        return await spy

    async def phase_live(self) -> None:
        """A few live recipients on node2, forwards POSTed to node1 at --live-rate: node2's
        CPU per message delivered (and acknowledged)."""
        assert self.node1 is not None and self.node2 is not None
        args, plan = self.args, self.plan
        idx = list(self.regions()["live"])
        base2 = f"http://{HOST}:{self.node2.port}"
        sockets = await live_sockets(plan, idx, base2)
        try:
            await asyncio.sleep(2)
            quiet = CpuMeter({"node2": self.node2.pid})
            await asyncio.sleep(5)
            baseline = quiet.shares()["node2"]
            count = max(1, int(args.live_rate * args.live_seconds))
            length = inner_content_length(plan)
            requests, tags = [], []
            for k in range(count):
                raw, tag = forward(
                    plan, idx[k % len(idx)], {"@type": BASIC, "content": "x" * length}
                )
                requests.append(raw)
                tags.append(tag)
            tally = sockets.expect(tags)
            conns = await open_connections(HOST, self.node1.port, 8)
            try:
                meter = CpuMeter(self.cpu_pids())
                t0 = time.perf_counter()
                cpu0 = proc_cpu_seconds(self.node2.pid)
                run = await open_loop(conns, requests, args.live_rate)
                caught_up = await sockets.settle(None, 10.0)
                cpu1 = proc_cpu_seconds(self.node2.pid)
                window = time.perf_counter() - t0
                shares = meter.shares()
                delivered = len(tally.arrived)
                profile = await self._profile_live(sockets, conns, idx) if args.profile else None
            finally:
                await close_connections(conns)
        finally:
            await sockets.close()
        cpu = cpu1 - cpu0
        per = cpu / max(delivered, 1) * 1000
        net = (cpu - baseline * window) / max(delivered, 1) * 1000
        latency = [(tally.arrived[k] - run.answered[k]) * 1000 for k in tally.arrived]
        self.results["live"] = {
            "rate": args.live_rate,
            "sent": count,
            "delivered": delivered,
            "duplicates": tally.duplicates,
            "caught_up": caught_up,
            "frames": tally.frames,
            "window_seconds": window,
            "node2_cpu_seconds": cpu,
            "node2_idle_share": baseline,
            "cpu_ms_per_delivery": per,
            "cpu_ms_per_delivery_net_of_idle": net,
            "cpu": shares,
            "answer_to_frame_ms": _dist(latency) if latency else None,
            "send_errors": run.errors[:5],
        }
        if profile is not None:
            self.results["live"]["profile"] = profile
        status = self.judge("live_cpu_ms", "CPU per live delivery", f"{per:.2f} ms", per)
        self.emit(
            f"live deliveries at {args.live_rate:g}/s (forwards answered by node1, delivered by "
            f"node2 to {len(idx)} sockets, each acknowledged): node2 {per:.2f} ms CPU per "
            f"delivery ({net:.2f} ms net of its idle {baseline:.1%})  target <= 0.4 ms  {status}; "
            f"{delivered:,}/{count:,} delivered in {tally.frames:,} frames, node1 "
            f"{shares.get('node1', 0) * window / max(count, 1) * 1000:.2f} ms per forward"
        )
        if delivered < count or tally.duplicates or run.errors:
            self.errors.append(
                f"live: {count - delivered} not delivered, {tally.duplicates} twice, "
                f"{len(run.errors)} send errors"
            )
