"""The traffic parts of the scale benchmark (bench/workloads/scale.py): forwards to
distinct recipients against 8 and against the anchor, a fleet of idle live sockets, and
live deliveries at a fixed rate, on the servers the scale run started.

Recipients are taken from separate ranges of the plan's indexes (support.forwards.regions),
so no part meets another's state: the sockets' recipients first, then the rotating side's 8,
then the live recipients, and the distinct forwards' recipients drawn at random from the
rest."""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics
import time
from dataclasses import asdict
from typing import Any

from bench.harness.blocks import Block, Blocks, Target, describe, timed_side
from bench.harness.loadgen import HOST, Connection, close_connections, open_connections
from bench.harness.machine import CpuMeter, open_files, proc_cpu_seconds, rss_bytes
from bench.harness.output import Goal, dist, fmt_cpu, fmt_rate, percentile, progress
from bench.harness.profiling import profile_process
from bench.harness.report import Report
from bench.harness.servers import Servers, node_metrics
from bench.support.bulk_load import Plan
from bench.support.fleet import SocketFleet
from bench.support.forwards import (
    BASIC,
    ROTATING,
    forward,
    inner_content_length,
    pack_forwards,
    regions,
)
from bench.support.live import LiveSockets, live_sockets, open_loop
from bench.support.redis_probes import (
    client_commands,
    commands,
    fmt_top_level,
    process_rates,
    rates,
    rewrite_aof,
    top_level,
)

HEADROOM_FDS = 150  # descriptors node2 keeps for Redis connections, HTTP, logs
GOALS = {
    "forward_distinct_vs_8": Goal(">=", 0.9, ">= 0.9x"),
    "forward_p99_vs_8": Goal("<=", 1.2, "<= 1.2x"),
    "forward_vs_anchor": Goal(">=", 0.5, ">= 0.5x"),
    "socket_rss": Goal("<=", 30_000, "<= 30 KB"),
    "socket_node_cpu": Goal("<=", 0.10, "<= 10 %"),
    "socket_redis_cmds": Goal("<=", 1000, "<= 1,000/s"),
    "live_cpu_ms": Goal("<=", 0.4, "<= 0.4 ms"),
}


class TrafficParts:
    """forwards, sockets and live on a scale run's servers and loaded plan."""

    def __init__(
        self,
        args: argparse.Namespace,
        plan: Plan,
        servers: Servers,
        blocks: Blocks,
        report: Report,
    ) -> None:
        self.args = args
        self.plan = plan
        self.servers = servers
        self.blocks = blocks
        self.report = report

    def regions(self) -> dict[str, range]:
        return regions(self.plan, self.args.sockets, self.args.live_recipients)

    def judge(self, name: str, label: str, shown: str, value: float) -> str:
        return self.report.judge(GOALS, name, label, shown, value)

    async def profile(self, name: str, pid: int) -> dict[str, Any]:
        return await profile_process(
            name, pid, self.args.profile_seconds, self.blocks.options.output_dir
        )

    def node1_target(self) -> Target:
        node1 = self.servers.node1
        assert node1 is not None
        return Target("node1", node1.port, node1.pid)

    # ------------------------------------------------------------------ forwards

    async def phase_forwards(self) -> None:
        args, plan = self.args, self.plan
        where = self.regions()
        rng = random.Random(11)
        pool = where["distinct"]
        picked = rng.sample(pool, min(args.forward_envelopes, len(pool)))
        # The rotating side sends as many different requests, to 8 recipients in turn, so
        # the two sides differ only in how many recipients they reach.
        eight = [where["rotating"].start + k % ROTATING for k in range(len(picked))]
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
        redis = self.servers.redis
        progress(f"forwards: AOF rewritten first, in {await rewrite_aof(redis):.0f} s")
        latencies: dict[str, list[float]] = {}
        anchor = self.blocks.anchor_side()
        target = self.node1_target()
        spread, used = timed_side("forward-distinct", target, distinct, latencies)
        eight_side, _ = timed_side("forward-8", target, rotating, latencies)
        rounds: list[dict[str, Any]] = []
        for r in range(-1, args.pairs):
            seconds = args.warmup if r < 0 else args.seconds
            order = [anchor, eight_side, spread] if r % 2 == 0 else [spread, eight_side, anchor]
            blocks: dict[str, Block] = {}
            tags: dict[str, str] = {}
            for side in order:
                tag = f"{r}{side.label}"
                blocks[side.label] = await self.blocks.run(side, seconds, tag)
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
                "latency_ms_8": dist([x * 1000 for x in latencies[tags["forward-8"]]]),
                "latency_ms_distinct": dist(
                    [x * 1000 for x in latencies[tags["forward-distinct"]]]
                ),
                "distinct_vs_8": d.rate / b8.rate,
                "p99_distinct_vs_8": p99_d / p99_8,
                "distinct_vs_anchor": d.rate / a.rate,
            }
            label = "warm-up" if r < 0 else f"round {r + 1}/{args.pairs}"
            progress(
                f"forwards {label}: {describe(a)} | {describe(b8)} p99 {p99_8:.2f} ms | "
                f"{describe(d)} p99 {p99_d:.2f} ms  distinct/8 {row['distinct_vs_8']:.2f} "
                f"p99 {row['p99_distinct_vs_8']:.2f}x, distinct/anchor "
                f"{row['distinct_vs_anchor']:.2f}"
            )
            for blk in (a, b8, d):
                if blk.errors:
                    self.report.errors.append(
                        f"forwards/{blk.label}: {blk.errors} errors: {blk.first_error}"
                    )
            if r >= 0:
                rounds.append(row)
        self.forward_report(rounds, used[0], len(distinct), inner)
        if args.profile:
            self.report.results["forwards"]["profiles"] = {
                side.label: await self.blocks.profile_block("forwards", side)
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
        self.report.results["forwards"] = {
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
        self.report.emit(
            f"forwards to {min(used, pool):,} distinct recipients of {self.plan.recipients:,}: "
            f"{fmt_rate(rate_d)}/s vs {fmt_rate(rate_8)}/s rotating over 8: {ratio:.2f}x "
            f"(rounds {spread})  target >= 0.9  {s1}; p99 {p99:.2f}x  target <= 1.2  {s2}"
            + (f" [{reused:,} envelopes reused]" if reused else "")
        )
        self.report.emit(
            f"forwards to distinct recipients vs the anchor's POST + XADD ({fmt_rate(rate_a)}/s): "
            f"{anchor:.2f}x  target >= 0.5  {s3}  (inner envelope {inner:,} B)"
        )

    # ------------------------------------------------------------------ sockets

    async def phase_sockets(self) -> None:
        """Idle live sockets on node2, as many as its open files allow: RSS, CPU and Redis
        commands over --sockets-seconds with all of them live."""
        node1, node = self.servers.node1, self.servers.node2
        assert node1 is not None and node is not None
        args, redis = self.args, self.servers.redis
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
        load_cpu = self.servers.pinning.load_cpu
        fleet = SocketFleet(url, self.plan, range(0, count), processes, load_cpu)
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
            f["node_says"] = (await node_metrics(node)).get("mediator_websockets", float("nan"))
            servers = {"node1": node1.pid, "node2": node.pid}
            p0, c0 = await client_commands(redis, servers), await commands(redis)
            clients = {f"client{k}": p for k, p in enumerate(fleet.pids)}
            meter = CpuMeter(self.servers.cpu_pids() | clients)
            progress(
                f"sockets: measuring {args.sockets_seconds:g} s idle with {fleet.opened:,} live"
            )
            await asyncio.sleep(args.sockets_seconds)
            f["cpu"], window = meter.shares(), time.perf_counter() - meter.started
            c1 = await commands(redis)
            f["redis_commands_by_process"] = process_rates(
                p0, await client_commands(redis, servers), window
            )
            f["redis_commands"] = rates(c0, c1, window).to_json()
            progress(f"sockets: sampling what the nodes send ({args.monitor_seconds:g} s MONITOR)")
            f["top_level"] = await top_level(redis, args.monitor_seconds, servers)
            f["alive"] = fleet.alive
            f["client_processes_rss"] = sum(rss_bytes(pid) for pid in fleet.pids)
            if args.profile:
                f["profile"] = await self.profile("sockets-node2", node.pid)
        finally:
            await fleet.close()
        self.report.errors += [f"socket: {e}" for e in fleet.errors()[:5]]
        self.report_sockets(f)

    def report_sockets(self, f: dict[str, Any]) -> None:
        opened = f["opened"]
        per_socket = (f["rss_after"] - f["rss_before"]) / max(opened, 1)
        f["rss_per_socket"] = per_socket
        node_cpu = f["cpu"]["node2"]
        sent = sum(f["top_level"]["node2"].values())
        inner = f["redis_commands_by_process"]["node2"]
        self.report.results["sockets"] = f
        s1 = self.judge(
            "socket_rss", "RSS per idle live socket", f"{per_socket / 1000:.1f} KB", per_socket
        )
        s2 = self.judge("socket_node_cpu", "node CPU, idle sockets", f"{node_cpu:.1%}", node_cpu)
        s3 = self.judge("socket_redis_cmds", "Redis cmds/s, idle sockets", f"{sent:,.0f}/s", sent)
        self.report.emit(
            f"{opened:,} idle live sockets on one node (node2; {f['alive']:,} open at the end, the "
            f"node counts {f['node_says']:,.0f}; {f['open_files_limit']:,} open files per process "
            f"rule out 20,000): RSS +{(f['rss_after'] - f['rss_before']) / 1e6:,.1f} MB = "
            f"{per_socket / 1000:.1f} KB per socket  target <= 30 KB  {s1}; node2 {node_cpu:.1%} "
            f"of a core  target <= 10 %  {s2}; node2 sends Redis {sent:,.1f} commands/s  "
            f"target <= 1,000/s  {s3}"
        )
        cmd = f["redis_commands"]
        self.report.emit(
            f"  counted as Redis counts them (each command a script runs too): node2 "
            f"{inner:,.0f}/s; all processes {cmd['commands_per_second']:,.0f}/s "
            f"(node1's worker {f['redis_commands_by_process']['node1']:,.0f}/s)"
        )
        self.report.emit(f"  what the nodes send (MONITOR): {fmt_top_level(f['top_level'])}")
        self.report.emit(f"  cpu: {fmt_cpu(f['cpu'])}")
        if f["retried"]:
            self.report.emit(
                f"  {f['retried']:,} opens were refused and tried again (after 1, 2, 4, 8 s), "
                f"e.g. "
                f"{f['refusals'][:1]}"
            )
        if f["failed"] or f["alive"] < opened:
            self.report.errors.append(
                f"sockets: {f['failed']} failed to open, {opened - f['alive']} closed early"
            )

    # ------------------------------------------------------------------ live

    async def _profile_live(
        self, sockets: LiveSockets, conns: list[Connection], idx: list[int]
    ) -> dict[str, Any]:
        """py-spy on node2 during --profile-seconds more of the same traffic, after the
        measured window."""
        node2 = self.servers.node2
        assert node2 is not None
        args, plan = self.args, self.plan
        length = inner_content_length(plan)
        count = max(1, int(args.live_rate * args.profile_seconds))
        packed = [
            forward(plan, idx[k % len(idx)], {"@type": BASIC, "content": "y" * length})
            for k in range(count)
        ]
        sockets.expect([tag for _, tag in packed])
        spy = asyncio.create_task(self.profile("live-node2", node2.pid))
        await open_loop(conns, [raw for raw, _ in packed], args.live_rate)
        await sockets.settle(None, 10.0)
        return await spy

    async def phase_live(self) -> None:
        """A few live recipients on node2, forwards POSTed to node1 at --live-rate: node2's
        CPU per message delivered (and acknowledged)."""
        node1, node2 = self.servers.node1, self.servers.node2
        assert node1 is not None and node2 is not None
        args, plan = self.args, self.plan
        idx = list(self.regions()["live"])
        base2 = f"http://{HOST}:{node2.port}"
        sockets = await live_sockets(plan, idx, base2)
        try:
            await asyncio.sleep(2)
            quiet = CpuMeter({"node2": node2.pid})
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
            conns = await open_connections(HOST, node1.port, 8)
            try:
                meter = CpuMeter(self.servers.cpu_pids())
                t0 = time.perf_counter()
                cpu0 = proc_cpu_seconds(node2.pid)
                run = await open_loop(conns, requests, args.live_rate)
                caught_up = await sockets.settle(None, 10.0)
                cpu1 = proc_cpu_seconds(node2.pid)
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
        self.report.results["live"] = {
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
            "answer_to_frame_ms": dist(latency) if latency else None,
            "send_errors": run.errors[:5],
        }
        if profile is not None:
            self.report.results["live"]["profile"] = profile
        status = self.judge("live_cpu_ms", "CPU per live delivery", f"{per:.2f} ms", per)
        self.report.emit(
            f"live deliveries at {args.live_rate:g}/s (forwards answered by node1, delivered by "
            f"node2 to {len(idx)} sockets, each acknowledged): node2 {per:.2f} ms CPU per "
            f"delivery ({net:.2f} ms net of its idle {baseline:.1%})  target <= 0.4 ms  {status}; "
            f"{delivered:,}/{count:,} delivered in {tally.frames:,} frames, node1 "
            f"{shares.get('node1', 0) * window / max(count, 1) * 1000:.2f} ms per forward"
        )
        if delivered < count or tally.duplicates or run.errors:
            self.report.errors.append(
                f"live: {count - delivered} not delivered, {tally.duplicates} twice, "
                f"{len(run.errors)} send errors"
            )
