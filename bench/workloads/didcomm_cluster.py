"""The cluster workloads of the DIDComm benchmark: forward throughput over 1, 2 and 3 nodes
(`forward-nodes`), and cross-node live latency at fixed fractions of saturation against
the PUBLISH -> WebSocket floor (`live-cross-rates`). bench/workloads/didcomm.py runs them;
its docstring describes the figures."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from bench.harness.blocks import Block, Blocks, describe
from bench.harness.conditions import (
    client_commands,
    disturbances,
    redis_counters,
    redis_events,
)
from bench.harness.errors import BenchError
from bench.harness.floors import publish_floor, websocket_floor
from bench.harness.loadgen import (
    HOST,
    Connection,
    Operation,
    build_request,
    close_connections,
    closed_loop,
    open_connections,
    rotating,
)
from bench.harness.machine import CpuMeter
from bench.harness.output import Goal, dist, fmt_cpu, fmt_rate, percentile, progress
from bench.harness.processes import Proc
from bench.harness.report import Report
from bench.harness.servers import Servers, node_metrics
from bench.support.live import (
    ENVELOPE,
    LiveSockets,
    Schedule,
    Tally,
    ciphertext_tag,
    open_loop,
    slowest,
)
from bench.support.recipients import Recipients
from bench.support.topology import more_nodes, spread_cpus
from mediator.client import Sender, forward_envelope

NODE_COUNTS = (1, 2, 3)  # forward-nodes: node1, then node2, then node3 join
VERDICT_FRACTION = 0.25  # live-cross-rates is judged at this fraction of saturation
GOAL = Goal("<=", 3.0)  # live-cross-rates: p99 as a multiple of the floor's p99
SETTLE_LIMIT_S = 30.0  # how long the live sockets may take to catch up after a phase
RATE_LIMIT_S = 30.0  # longest schedule of one fixed rate, whatever the options
RATE_MAX_MESSAGES = 20_000
# Distinct forwards the saturation blocks take in turn. A forward whose message its
# recipient still holds is a duplicate, answered 202 and not stored again: the pool must
# outlast the deliveries in flight, which the node's duplicate count checks.
SATURATION_POOL = 4_000
DUPLICATES = "mediator_didcomm_duplicate_forwards_total"


@dataclass
class NodesBlock:
    """One closed-loop block of forwards spread over `nodes` nodes."""

    nodes: int
    seconds: float
    forwards: int
    rate: float
    cpu: dict[str, float]  # share of one CPU: each node, Redis, this process
    machine: dict[str, dict[str, float]]
    redis_events: dict[str, int]
    redis_cmds_per_forward: float | None
    errors: int
    first_error: str

    @property
    def node_cpu(self) -> float:
        return sum(v for k, v in self.cpu.items() if k.startswith("node"))

    @property
    def cpu_norm(self) -> float:
        """Forwards per second of node CPU (all nodes together)."""
        return self.rate / self.node_cpu if self.node_cpu > 0 else float("nan")

    def describe(self) -> str:
        nodes = "+".join(f"{v:.0%}" for k, v in self.cpu.items() if k.startswith("node"))
        text = (
            f"{self.nodes} node{'s' if self.nodes > 1 else ''} {fmt_rate(self.rate)}/s "
            f"(nodes cpu {nodes}, redis {self.cpu.get('redis', 0):.0%}, "
            f"loadgen {self.cpu['bench']:.0%}"
        )
        if self.redis_cmds_per_forward is not None:
            text += f", redis cmds/fwd {self.redis_cmds_per_forward:.1f}"
        text += ")" + disturbances(self.cpu, self.machine, self.redis_events)
        if self.errors:
            text += f" ERRORS {self.errors}: {self.first_error}"
        return text


class ClusterWorkloads:
    """forward-nodes and live-cross-rates on the servers of a DIDComm run."""

    def __init__(
        self,
        args: argparse.Namespace,
        servers: Servers,
        blocks: Blocks,
        report: Report,
        recipients: Recipients,
    ) -> None:
        self.args = args
        self.servers = servers
        self.blocks = blocks
        self.report = report
        self.recipients = recipients

    # ------------------------------------------------------------------ forward-nodes

    async def nodes_block(self, nodes: list[Proc], seconds: float) -> NodesBlock:
        """Forwards in a closed loop on --connections connections split evenly over `nodes`
        (one group per node)."""
        op = await self.recipients.forward_op()
        redis = self.servers.redis
        total = self.args.connections
        conns: list[Connection] = []
        try:
            for i, node in enumerate(nodes):
                share = total // len(nodes) + (1 if i < total % len(nodes) else 0)
                conns += await open_connections(HOST, node.port, share)
            await asyncio.sleep(0.05)
            counters0 = await redis_counters(redis)
            meter = CpuMeter(self.servers.cpu_pids(nodes))
            result = await closed_loop(conns, op, seconds)
            cpu, machine = meter.shares(), meter.machine()
            counters1 = await redis_counters(redis)
        finally:
            await close_connections(conns)
        commands = client_commands(counters0, counters1)
        return NodesBlock(
            nodes=len(nodes),
            seconds=result.elapsed,
            forwards=result.messages,
            rate=result.rate,
            cpu=cpu,
            machine=machine,
            redis_events=redis_events(counters0, counters1),
            redis_cmds_per_forward=commands / result.messages if result.messages else None,
            errors=result.errors,
            first_error=result.first_error,
        )

    async def node_rounds(
        self, nodes: list[Proc]
    ) -> tuple[list[Block], dict[int, list[NodesBlock]]]:
        """A warm-up (anchor, all nodes), then --pairs rounds of anchor, 1, 2, 3 nodes (the
        node counts in reverse order every other round, so a drift of the machine does not
        favour one of them)."""
        args = self.args
        anchor_side = self.blocks.anchor_side()
        if args.warmup > 0:
            warm_anchor = await self.blocks.run(anchor_side, args.warmup, "wn-anchor")
            progress(f"forward-nodes warm-up: {describe(warm_anchor)}")
            warm = await self.nodes_block(nodes, args.warmup)
            progress(f"forward-nodes warm-up: {warm.describe()}")
            await asyncio.sleep(args.pause)
        anchors: list[Block] = []
        blocks: dict[int, list[NodesBlock]] = {n: [] for n in NODE_COUNTS}
        for r in range(args.pairs):
            anchor = await self.blocks.run(anchor_side, args.seconds, f"n{r}-anchor")
            anchors.append(anchor)
            label = f"forward-nodes round {r + 1}/{args.pairs}"
            progress(f"{label}: {describe(anchor)}")
            await asyncio.sleep(args.pause)
            for n in NODE_COUNTS if r % 2 == 0 else tuple(reversed(NODE_COUNTS)):
                block = await self.nodes_block(nodes[:n], args.seconds)
                blocks[n].append(block)
                progress(f"{label}: {block.describe()} = {block.rate / anchor.rate:.2f}x anchor")
                if block.errors:
                    self.report.errors.append(
                        f"forward-nodes/{n}: {block.errors} errors: {block.first_error}"
                    )
                await asyncio.sleep(args.pause)
        return anchors, blocks

    def nodes_note(self, pins: dict[str, int | None]) -> str:
        """Where the processes of forward-nodes run, and what that allows."""
        cpus = os.cpu_count()
        pinning = self.servers.pinning
        if not pinning.used:
            return f"not pinned ({pinning.note}): every process may run on any CPU"
        where = ", ".join(f"{name} on cpu {cpu}" for name, cpu in pins.items())
        return (
            f"{where}; the load generator and Redis on cpu {pinning.load_cpu}. With "
            f"{cpus} CPUs node2 shares one with Redis and the load generator and node3 shares "
            "node1's: the figures say how much spare CPU another node can use here, not how "
            "the design scales on more cores"
        )

    async def workload_forward_nodes(self) -> None:
        pins = spread_cpus(self.servers.pinning, max(NODE_COUNTS))
        progress(f"forward-nodes: {self.nodes_note(pins)}")
        nodes = await more_nodes(self.servers, pins)
        try:
            anchors, blocks = await self.node_rounds(nodes)
        finally:
            for node in nodes[2:]:
                node.stop()
        self.report_nodes(anchors, blocks, pins)

    def report_nodes(
        self,
        anchors: list[Block],
        blocks: dict[int, list[NodesBlock]],
        pins: dict[str, int | None],
    ) -> None:
        report, pinning = self.report, self.servers.pinning
        out: dict[str, Any] = {"pinning": pins, "redis_cpu": pinning.load_cpu, "nodes": {}}
        for n in NODE_COUNTS:
            ratios = [b.rate / a.rate for a, b in zip(anchors, blocks[n], strict=True)]
            rate = statistics.median(b.rate for b in blocks[n])
            cpu_norm = statistics.median(b.cpu_norm for b in blocks[n])
            node_cpu = statistics.median(b.node_cpu for b in blocks[n])
            report.emit(
                f"forward 1KiB over {n} node{'s' if n > 1 else ''}: {fmt_rate(rate)}/s = "
                f"{statistics.median(ratios):.2f}x the anchor (min {min(ratios):.2f}, max "
                f"{max(ratios):.2f}; {len(ratios)} rounds), nodes cpu {node_cpu:.0%}, "
                f"{fmt_rate(cpu_norm)} forwards per node-CPU-second"
            )
            out["nodes"][str(n)] = {
                "rate_median": rate,
                "ratio_median": statistics.median(ratios),
                "ratios": ratios,
                "node_cpu_median": node_cpu,
                "forwards_per_node_cpu_second_median": cpu_norm,
                "blocks": [asdict(b) for b in blocks[n]],
            }
            report.summary.append(
                (
                    f"forward, {n} node{'s' if n > 1 else ''}",
                    f"{statistics.median(ratios):.2f}x anchor ({min(ratios):.2f}-"
                    f"{max(ratios):.2f})",
                    "recorded",
                    f"[rate {fmt_rate(rate)}/s; nodes cpu {node_cpu:.0%}]",
                )
            )
        scaling = {
            n: [b.rate / one.rate for one, b in zip(blocks[1], blocks[n], strict=True)]
            for n in NODE_COUNTS[1:]
        }
        text = ", ".join(
            f"{n} nodes / 1 node {statistics.median(v):.2f}x ({min(v):.2f}-{max(v):.2f})"
            for n, v in scaling.items()
        )
        where = (
            "node2 shares a CPU with Redis and the load generator, node3 shares node1's"
            if pinning.used
            else "not pinned"
        )
        report.emit(
            f"forward scaling: {text} (paired within each round). {os.cpu_count()} CPUs "
            f"only: {where}"
        )
        out["scaling"] = {
            f"{n}/1": {"median": statistics.median(v), "ratios": v} for n, v in scaling.items()
        }
        out["anchor_blocks"] = [asdict(a) for a in anchors]
        report.results["forward-nodes"] = out
        report.summary.append(
            (
                f"forward scaling ({os.cpu_count()} CPUs)",
                text.replace(" / 1 node", "/1"),
                "recorded",
                "",
            )
        )

    # ------------------------------------------------------------------ live-cross-rates

    async def websocket_floor(self, rounds: int, gap: float) -> list[float]:
        servers = self.servers
        return await websocket_floor(
            servers.anchor_port, servers.redis_url, servers.run_id, rounds, gap
        )

    async def live_sockets(self, count: int) -> LiveSockets:
        """`count` recipients in live mode, one WebSocket each on node1."""
        sockets = LiveSockets(await self.recipients.live(count))
        sockets.start()
        return sockets

    @staticmethod
    def live_forwards(
        sockets: LiveSockets, count: int, phase: str
    ) -> tuple[list[bytes], list[str]]:
        """`count` forwards (POST / requests) to the live recipients in turn, and the
        ciphertext tag of the message each carries."""
        senders = [(Sender(r.routing_key), key) for r, key in sockets.recipients]
        requests, tags = [], []
        for k in range(count):
            sender, key = senders[k % len(senders)]
            inner = sender.pack({"phase": phase, "n": k}, [key])
            wrapped = forward_envelope(inner, key, sender.mediator)
            requests.append(build_request("POST", "/", ENVELOPE, wrapped))
            tags.append(ciphertext_tag(inner))
        return requests, tags

    async def saturation_block(
        self, sockets: LiveSockets, op: Operation, seconds: float
    ) -> dict[str, Any]:
        """One closed-loop block of forwards on node2 while node1 delivers them live; then
        wait (bounded) for the deliveries to catch up."""
        node2 = self.servers.node2
        assert node2 is not None
        tally = sockets.expect([])
        duplicates = (await node_metrics(node2)).get(DUPLICATES, 0.0)
        conns = await open_connections(HOST, node2.port, self.args.connections)
        try:
            since = await self.servers.watch()
            start = time.perf_counter()
            result = await closed_loop(conns, op, seconds)
            delivered, conditions = tally.delivered, await since()
        finally:
            await close_connections(conns)
        duplicates = (await node_metrics(node2)).get(DUPLICATES, 0.0) - duplicates
        # A duplicate is never delivered: wait only for the forwards that were stored.
        caught_up = await sockets.settle(result.messages - int(duplicates), SETTLE_LIMIT_S)
        through = min(tally.delivered, result.messages)  # all of them, unless some were lost
        if result.errors:
            self.report.errors.append(
                f"live-cross-rates saturation: {result.errors} errors, first: {result.first_error}"
            )
        return {
            "seconds": result.elapsed,
            "answered_per_second": result.rate,
            "delivered_per_second": delivered / result.elapsed,
            "last_delivered_after_s": tally.last_at - start,
            "rate": through / max(tally.last_at - start, 1e-9),
            "frames": tally.frames,
            "messages_per_frame": tally.delivered / tally.frames if tally.frames else None,
            "backlog_at_end": result.messages - delivered,
            "caught_up_after": caught_up,
            "duplicates": int(duplicates),
            **conditions,
            "errors": result.errors,
        }

    async def live_saturation(self, sockets: LiveSockets) -> tuple[float, list[dict[str, Any]]]:
        """The saturation of the cross-node live path: the highest over --pairs blocks (after
        a warm-up) of the forwards node2 answered in a closed loop of --connections, divided
        by the time from the block's start to the live delivery of the last of them (of as
        many as were delivered, if the sockets did not catch up within 30 s)."""
        args = self.args
        requests, _ = self.live_forwards(sockets, SATURATION_POOL, "saturation")
        op = rotating(requests, 202)

        blocks: list[dict[str, Any]] = []
        for b in range(-1, args.pairs):
            seconds = args.warmup if b < 0 else args.seconds
            if seconds <= 0:
                continue
            info = await self.saturation_block(sockets, op, seconds)
            label = "warm-up" if b < 0 else f"block {b + 1}/{args.pairs}"
            progress(
                f"live-cross-rates saturation {label}: {fmt_rate(info['rate'])} forwards/s "
                f"through (node2 answered {fmt_rate(info['answered_per_second'])}/s; "
                f"{info['backlog_at_end']} not yet delivered when the block ended, the last "
                f"{(info['last_delivered_after_s'] - info['seconds']) * 1000:.0f} ms later; "
                f"{info['messages_per_frame'] or 0:.1f} messages per frame"
                + (f"; {info['duplicates']} DUPLICATES, not stored" if info["duplicates"] else "")
                + f") (cpu {fmt_cpu(info['cpu'])})"
                + disturbances(info["cpu"], info["machine"], info["redis"])
            )
            if b >= 0:
                blocks.append(info)
            await asyncio.sleep(args.pause)
        # The highest block: other load only ever lowers a block, and a higher saturation
        # makes the fixed rates, and so the verdict, stricter.
        saturation = max(x["rate"] for x in blocks)
        if saturation <= 0:
            raise BenchError("no forward got through the cross-node live path")
        return saturation, blocks

    async def live_at_rate(
        self, sockets: LiveSockets, rate: float
    ) -> tuple[Schedule, Tally, dict[str, Any]]:
        """Forwards sent to node2 on a fixed schedule at `rate`, for --rate-seconds (at least
        --rounds messages, at most 30 s), what the live sockets saw of them, and the CPU use
        and disturbances over the run (until the last delivery, at most 10 s after it)."""
        node2 = self.servers.node2
        assert node2 is not None
        args = self.args
        count = int(min(max(rate * args.rate_seconds, args.rounds), rate * RATE_LIMIT_S))
        count = max(1, min(count, RATE_MAX_MESSAGES))
        requests, tags = self.live_forwards(sockets, count, f"{rate:.0f}")
        tally = sockets.expect(tags)
        conns = await open_connections(HOST, node2.port, self.args.connections)
        try:
            since = await self.servers.watch()
            run = await open_loop(conns, requests, rate)
            await sockets.settle(None, 10.0)
            conditions = await since()
        finally:
            await close_connections(conns)
        return run, tally, conditions

    async def workload_live_cross_rates(self) -> None:
        args = self.args
        sockets = await self.live_sockets(args.live_recipients)
        progress(
            f"live-cross-rates: {args.live_recipients} recipients live on node1, forwards "
            f"answered by node2; saturation first ({args.connections} connections, closed loop)"
        )
        rates: list[dict[str, Any]] = []
        # The floor is measured in slices before each rate and after the last, so that it
        # sees the same drift of the machine as the rates do.
        floor: list[float] = []
        rounds, gap = max(20, min(args.rounds, 300) // 3), 1 / args.live_rate
        try:
            saturation, blocks = await self.live_saturation(sockets)
            progress(f"live-cross-rates: saturation {fmt_rate(saturation)} forwards/s")
            for fraction in args.rate_fractions:
                floor += await self.websocket_floor(rounds, gap)
                rate = fraction * saturation
                run, tally, conditions = await self.live_at_rate(sockets, rate)
                rates.append(self.rate_figures(fraction, rate, run, tally, conditions))
            floor += await self.websocket_floor(rounds, gap)
        finally:
            await sockets.close()
        self.report.errors += sockets.errors
        servers = self.servers
        bare = await publish_floor(servers.redis_url, servers.run_id, min(args.rounds, 300), gap)
        self.report_rates(saturation, blocks, rates, floor, bare)

    def rate_figures(
        self, fraction: float, rate: float, run: Schedule, tally: Tally, conditions: dict[str, Any]
    ) -> dict[str, Any]:
        """Per message: ms from the forward's answer (and from its sending) to the arrival of
        the delivery frame that carried it."""
        after_answer, after_sent = [], []
        for k, at in tally.arrived.items():
            if not math.isnan(run.answered[k]):
                after_answer.append((at - run.answered[k]) * 1000)
                after_sent.append((at - run.sent[k]) * 1000)
        answered = sum(1 for t in run.answered if not math.isnan(t))
        lost = sum(
            1 for k, t in enumerate(run.answered) if not math.isnan(t) and k not in tally.arrived
        )
        if run.errors:
            self.report.errors.append(
                f"live-cross-rates {fraction:.0%}: {len(run.errors)} forwards failed, first: "
                f"{run.errors[0]}"
            )
        if lost or tally.duplicates:
            self.report.errors.append(
                f"live-cross-rates {fraction:.0%}: {lost} forwards answered 202 were not "
                f"delivered within 10 s, {tally.duplicates} delivered twice"
            )
        lag = run.lag_ms()
        figures = {
            "fraction": fraction,
            "rate_per_second": rate,
            "sent": len(run.sent),
            "answered_202": answered,
            "delivered": len(tally.arrived),
            "lost": lost,
            "duplicates": tally.duplicates,
            "unexpected": tally.unknown,
            "frames": tally.frames,
            "delivered_before_answer_read": sum(1 for x in after_answer if x < 0),
            "forward_answer_to_delivery_ms": dist(after_answer) if after_answer else None,
            "forward_sent_to_delivery_ms": dist(after_sent) if after_sent else None,
            "schedule_lag_ms": dist(lag),
            **conditions,
            "slowest": slowest(run, tally),
        }
        progress(
            f"live-cross-rates {fraction:.0%} of saturation ({fmt_rate(rate)}/s, "
            f"{len(run.sent):,} forwards): answered -> delivery p50 "
            f"{percentile(after_answer, 50):.2f} ms p99 {percentile(after_answer, 99):.2f} ms; "
            f"from sent p50 {percentile(after_sent, 50):.2f} ms p99 "
            f"{percentile(after_sent, 99):.2f} ms; lost {lost}, duplicated {tally.duplicates}; "
            f"send lag p99 {percentile(lag, 99):.2f} ms (cpu {fmt_cpu(conditions['cpu'])})"
            + disturbances(conditions["cpu"], conditions["machine"], conditions["redis"])
        )
        return figures

    def report_rates(
        self,
        saturation: float,
        blocks: list[dict[str, Any]],
        rates: list[dict[str, Any]],
        floor: list[float],
        bare: list[float],
    ) -> None:
        floor_p99 = max(percentile(floor, 99), 1e-6)
        self.report.summary.append(
            (
                "cross-node live saturation",
                f"{fmt_rate(saturation)} forwards/s",
                "(info)",
                f"[floor p99 {percentile(floor, 99):.2f} ms]",
            )
        )
        self.report.emit(
            f"cross-node live path saturation: {fmt_rate(saturation)} forwards/s (the highest "
            f"of {len(blocks)} closed-loop blocks: "
            f"{', '.join(fmt_rate(b['rate']) for b in blocks)})"
        )
        judged: dict[str, Any] | None = None
        for r in rates:
            ms = r["forward_answer_to_delivery_ms"] or {"p50": math.nan, "p99": math.nan}
            r["p99_to_floor_p99"] = ms["p99"] / floor_p99
            is_judged = math.isclose(r["fraction"], VERDICT_FRACTION)
            status = GOAL.verdict(r["p99_to_floor_p99"]) if is_judged else ""
            r["status"] = status or "info"
            if is_judged:
                judged = r
            self.report.emit(
                f"cross-node live at {r['fraction']:.0%} of saturation "
                f"({fmt_rate(r['rate_per_second'])}/s, open loop): answered -> delivery p50 "
                f"{ms['p50']:.2f} ms p99 {ms['p99']:.2f} ms = {r['p99_to_floor_p99']:.2f}x "
                f"the floor's p99" + (f"  target <= 3x  {status}" if is_judged else "")
            )
            self.report.summary.append(
                (
                    f"cross-node live p99 @{r['fraction']:.0%}",
                    f"{r['p99_to_floor_p99']:.2f}x floor ({ms['p99']:.2f} ms, p50 {ms['p50']:.2f})",
                    "<= 3x" if is_judged else "(info)",
                    f"{status}  [{fmt_rate(r['rate_per_second'])}/s]".strip(),
                )
            )
        self.report.emit(
            f"floors (one at a time at {self.args.live_rate:g}/s): PUBLISH->subscriber->"
            f"WebSocket p50 {percentile(floor, 50):.2f} ms p99 {percentile(floor, 99):.2f} ms "
            f"({len(floor)} rounds, in slices between the rates); bare PUBLISH->subscriber "
            f"p50 {percentile(bare, 50):.2f} ms p99 {percentile(bare, 99):.2f} ms"
        )
        if judged is None:
            self.report.emit(f"live-cross-rates: no rate at {VERDICT_FRACTION:.0%}: not judged")
        self.report.results["live-cross-rates"] = {
            "saturation_per_second": saturation,
            "saturation_definition": "highest over closed-loop blocks of: forwards answered "
            "202 by node2 / seconds from the block's start to the live delivery on node1 of "
            "the last of them",
            "saturation_blocks": blocks,
            "recipients": self.args.live_recipients,
            "rates": rates,
            "floor_publish_to_websocket_ms": dist(floor),
            "floor_publish_to_subscriber_ms": dist(bare),
            "target": f"p99 <= 3x the floor's p99 at {VERDICT_FRACTION:.0%} of saturation",
            "status": judged["status"] if judged else "not judged",
        }
