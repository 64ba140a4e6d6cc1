"""Blocks and paired blocks: the method of every throughput figure.

A block opens --connections keep-alive connections to a server under test, each running the
side's request in a closed loop for --seconds, and reads around it the CPU of the server, of
Redis, of the other servers and of this process, the machine's per-CPU shares and Redis's
counters. A paired workload runs a warm-up block of each side, then --pairs pairs of blocks
A, B (anchor, then subject); each pair gives a ratio B/A, the figure is their median.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import profiling
from bench.harness.conditions import client_commands, redis_counters
from bench.harness.loadgen import (
    HOST,
    Connection,
    LoadResult,
    Operation,
    build_request,
    close_connections,
    closed_loop,
    expect,
    open_connections,
)
from bench.harness.machine import cpu_shares, cpu_times, proc_cpu_seconds
from bench.harness.output import Goal, fmt_rate, progress
from bench.harness.report import Report
from bench.harness.servers import Servers

# A block is "disturbed" when other processes used this share of the server's CPU.
DISTURBED = 0.10


@dataclass
class Block:
    label: str
    seconds: float
    messages: int
    rate: float
    server_cpu_s: float
    cpu_norm: float  # messages per server CPU-second
    server_cpu_util: float
    loadgen_cpu_util: float
    redis_cpu_util: float | None
    others_cpu_util: dict[str, float]  # the idle servers (the other node still gets wake-ups)
    errors: int
    first_error: str
    idle_ops: int
    machine: dict[str, dict[str, float]]  # per CPU: busy, iowait, steal shares
    foreign_load: float | None  # busy share of the server's CPU not used by the server
    redis_events: dict[str, int]  # forks, AOF rewrites and delayed fsyncs during the block


@dataclass
class Target:
    """A server under test: where to send requests and whose CPU time to read."""

    name: str
    port: int
    pid: int


async def _nothing(tag: str) -> None:
    """The cleanup of a side that leaves nothing behind."""


@dataclass
class Side:
    """One side of a pair: the server, and how to prepare, load and clean up one block."""

    label: str
    target: Target
    prepare: Callable[[str], Awaitable[Operation]]
    cleanup: Callable[[str], Awaitable[None]] = _nothing
    observe: Callable[[Block], None] | None = None  # sees every finished block


@dataclass
class PairedResult:
    name: str
    a_label: str
    b_label: str
    ratios: list[float]
    cpu_ratios: list[float]
    a_blocks: list[Block]
    b_blocks: list[Block]
    warmup: list[Block] = field(default_factory=list)
    profiles: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def a_rate(self) -> float:
        return statistics.median(b.rate for b in self.a_blocks)

    @property
    def b_rate(self) -> float:
        return statistics.median(b.rate for b in self.b_blocks)

    @property
    def b_cpu_norm(self) -> float:
        return statistics.median(b.cpu_norm for b in self.b_blocks)

    @property
    def a_cpu_norm(self) -> float:
        return statistics.median(b.cpu_norm for b in self.a_blocks)

    @property
    def cpu_ratio(self) -> float:
        return statistics.median(self.cpu_ratios)

    def errors(self) -> list[str]:
        out = []
        for b in [*self.warmup, *self.a_blocks, *self.b_blocks]:
            if b.errors:
                out.append(f"{self.name}/{b.label}: {b.errors} errors, first: {b.first_error}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a_label,
            "b": self.b_label,
            "ratio_median": self.ratio,
            "ratio_min": min(self.ratios),
            "ratio_max": max(self.ratios),
            "ratios": self.ratios,
            "cpu_norm_ratio_median": self.cpu_ratio,
            "cpu_norm_ratios": self.cpu_ratios,
            "a_rate_median": self.a_rate,
            "b_rate_median": self.b_rate,
            "a_cpu_norm_median": self.a_cpu_norm,
            "b_cpu_norm_median": self.b_cpu_norm,
            "a_blocks": [asdict(b) for b in self.a_blocks],
            "b_blocks": [asdict(b) for b in self.b_blocks],
            "warmup": [asdict(b) for b in self.warmup],
            "profiles": self.profiles,
        }


@dataclass(frozen=True)
class BlockOptions:
    """How long and how many blocks, from the shared command-line arguments."""

    seconds: float
    warmup: float
    pairs: int
    pause: float
    connections: int
    profile: bool
    output_dir: Path

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BlockOptions:
        return cls(
            seconds=args.seconds,
            warmup=args.warmup,
            pairs=args.pairs,
            pause=args.pause,
            connections=args.connections,
            profile=bool(getattr(args, "profile", False)),
            output_dir=Path(args.output_dir),
        )


def describe(b: Block) -> str:
    """A block's progress text: its rate, the CPU of everyone, and what disturbed it."""
    text = (
        f"{b.label} {fmt_rate(b.rate)}/s (server cpu {b.server_cpu_util:.0%}, "
        f"loadgen {b.loadgen_cpu_util:.0%}"
    )
    if b.messages and "client_commands" in b.redis_events:
        per = b.redis_events["client_commands"] / b.messages
        scripts = b.redis_events.get("evalsha_calls", 0) / b.messages
        text += f", redis cmds/msg {per:.1f} (scripts {scripts:.1f})"
    if b.redis_cpu_util is not None:
        text += f", redis {b.redis_cpu_util:.0%}"
    noisy = [
        f"{cpu} steal {v['steal']:.0%}" for cpu, v in b.machine.items() if v["steal"] >= 0.02
    ] + [f"{cpu} iowait {v['iowait']:.0%}" for cpu, v in b.machine.items() if v["iowait"] >= 0.02]
    noisy += [f"{k} cpu {v:.0%}" for k, v in b.others_cpu_util.items() if v >= 0.05]
    if b.foreign_load is not None and b.foreign_load >= 0.05:
        noisy.append(f"other load on the server's cpu {b.foreign_load:.0%}")
    if b.redis_events.get("total_forks"):
        noisy.append(f"redis forked {b.redis_events['total_forks']}x")
    if b.redis_events.get("aof_delayed_fsync"):
        noisy.append(f"aof delayed fsync {b.redis_events['aof_delayed_fsync']}x")
    text += ")"
    if noisy:
        text += " [" + ", ".join(noisy) + "]"
    if b.errors:
        text += f" ERRORS {b.errors}: {b.first_error}"
    return text


class Blocks:
    """Runs blocks against the servers of a run; errors of paired workloads go to `report`."""

    def __init__(self, servers: Servers, options: BlockOptions, report: Report) -> None:
        self.servers = servers
        self.options = options
        self.report = report
        # What the anchor parses: {"body": "<1024 characters>"}.
        self.anchor_body = json.dumps({"body": secrets.token_urlsafe(768)[:1024]}).encode()

    async def run(self, side: Side, seconds: float, tag: str) -> Block:
        servers = self.servers
        op = await side.prepare(tag)
        conns = await open_connections(HOST, side.target.port, self.options.connections)
        try:
            await asyncio.sleep(0.05)
            events0 = await redis_counters(servers.redis)
            sys0 = cpu_times()
            others = {
                p.name: p.pid for p in servers.procs if p.running and p.pid != side.target.pid
            }
            others0 = {name: proc_cpu_seconds(pid) for name, pid in others.items()}
            cpu0 = proc_cpu_seconds(side.target.pid)
            redis_pid = servers.redis_pid
            redis0 = proc_cpu_seconds(redis_pid) if redis_pid else None
            load0 = time.process_time()
            result: LoadResult = await closed_loop(conns, op, seconds)
            load1 = time.process_time()
            cpu1 = proc_cpu_seconds(side.target.pid)
            redis1 = proc_cpu_seconds(redis_pid) if redis_pid else None
            sys1 = cpu_times()
            others1 = {name: proc_cpu_seconds(pid) for name, pid in others.items()}
            events1 = await redis_counters(servers.redis)
        finally:
            await close_connections(conns)
        await side.cleanup(tag)
        events = {k: events1[k] - events0.get(k, 0) for k in events1 if not k.startswith("client:")}
        events["aof_rewrite_in_progress"] = events1.get("aof_rewrite_in_progress", 0)
        events["client_commands"] = client_commands(events0, events1)
        server_cpu = cpu1 - cpu0
        elapsed = result.elapsed
        machine = cpu_shares(sys0, sys1)
        foreign = None
        pinning = servers.pinning
        if pinning.used and f"cpu{pinning.server_cpu}" in machine:
            busy = machine[f"cpu{pinning.server_cpu}"]["busy"]
            foreign = round(max(0.0, busy - server_cpu / elapsed), 3)
        block = Block(
            label=side.label,
            seconds=elapsed,
            messages=result.messages,
            rate=result.rate,
            server_cpu_s=server_cpu,
            cpu_norm=result.messages / server_cpu if server_cpu > 0 else float("nan"),
            server_cpu_util=server_cpu / elapsed,
            loadgen_cpu_util=(load1 - load0) / elapsed,
            redis_cpu_util=None
            if redis0 is None or redis1 is None
            else (redis1 - redis0) / elapsed,
            others_cpu_util={k: round((others1[k] - others0[k]) / elapsed, 3) for k in others},
            errors=result.errors,
            first_error=result.first_error,
            idle_ops=result.idle_ops,
            machine=machine,
            foreign_load=foreign,
            redis_events=events,
        )
        if side.observe is not None:
            side.observe(block)
        return block

    async def paired(self, name: str, a: Side, b: Side) -> PairedResult:
        opts = self.options
        result = PairedResult(name, a.label, b.label, [], [], [], [])
        if opts.warmup > 0:
            for side in (a, b):
                blk = await self.run(side, opts.warmup, f"w{side.label}")
                result.warmup.append(blk)
                progress(f"{name} warm-up: {describe(blk)}")
                await asyncio.sleep(opts.pause)
        for i in range(opts.pairs):
            ba = await self.run(a, opts.seconds, f"{i}a")
            await asyncio.sleep(opts.pause)
            bb = await self.run(b, opts.seconds, f"{i}b")
            await asyncio.sleep(opts.pause)
            ratio = bb.rate / ba.rate if ba.rate else float("nan")
            cpu_ratio = bb.cpu_norm / ba.cpu_norm if ba.cpu_norm else float("nan")
            result.a_blocks.append(ba)
            result.b_blocks.append(bb)
            result.ratios.append(ratio)
            result.cpu_ratios.append(cpu_ratio)
            dry = f"  QUEUE RAN DRY {bb.idle_ops} times" if bb.idle_ops else ""
            progress(
                f"{name} pair {i + 1}/{opts.pairs}: {describe(ba)} | {describe(bb)}"
                f"  ratio {ratio:.2f}{dry}"
            )
        self.report.errors += result.errors()
        if opts.profile:
            for side in (a, b):
                result.profiles[side.label] = await self.profile_block(name, side)
        return result

    async def profile_block(self, name: str, side: Side) -> dict[str, Any]:
        """One more block (not counted) with py-spy sampling the server under test."""
        seconds = self.options.seconds
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        path = self.options.output_dir / f"profile-{stamp}-{name}-{side.label}.folded"
        spy = await profiling.record(side.target.pid, max(1, round(seconds)), path)
        if spy is None:
            return {}
        await asyncio.sleep(0.3)  # attached before the load starts
        block = await self.run(side, seconds, f"p{side.label}")
        summary = await spy.finish(seconds + 30)
        await asyncio.sleep(self.options.pause)
        if "error" in summary:
            progress(f"profile {name}/{side.label} failed: {summary['error']}")
            return summary
        summary["block_rate_while_sampled"] = block.rate
        summary["server_cpu_us_per_message"] = (
            block.server_cpu_s / block.messages * 1e6 if block.messages else None
        )
        print(profiling.format_summary(f"{name}/{side.label}", summary), flush=True)
        return summary

    def anchor_side(self) -> Side:
        """The anchor's `POST /xadd/<stream>` of a 1 KiB JSON body, a fresh stream per
        block."""
        servers = self.servers
        json_body = self.anchor_body
        anchor = servers.anchor
        assert anchor is not None
        target = Target("anchor", anchor.port, anchor.pid)
        redis, run_id = servers.redis, servers.run_id

        async def prepare(tag: str) -> Operation:
            stream = f"{run_id}-{tag}"
            await redis.unlink(f"bench:anchor:{stream}")
            raw = build_request(
                "POST", f"/xadd/{stream}", {"Content-Type": "application/json"}, json_body
            )

            async def op(conn: Connection) -> int:
                expect(await conn.request(raw), 201)
                return 1

            return op

        async def cleanup(tag: str) -> None:
            await redis.unlink(f"bench:anchor:{run_id}-{tag}")

        return Side("anchor", target, prepare, cleanup)


def timed_side(
    label: str, target: Target, requests: list[bytes], latencies: dict[str, list[float]]
) -> tuple[Side, list[int]]:
    """Prebuilt requests POSTed in turn (again from the start if a run needs more), each
    answered 202 and timed one by one into `latencies[tag]`; and the count of requests
    taken so far (its one item)."""
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

    return Side(label, target, prepare), cursor


def report_paired(
    report: Report,
    key: str,
    goal: Goal | None,
    title: str,
    r: PairedResult,
    other: str,
    target: str,
    suffix: str = "",
) -> None:
    """The result line and summary row of a paired workload (its JSON in results[key]),
    with how many pairs other load disturbed; `goal` None: a figure recorded, not judged."""
    status = goal.verdict(r.ratio) if goal is not None else "recorded"
    disturbed = sum(
        1
        for a, b in zip(r.a_blocks, r.b_blocks, strict=True)
        if max(a.foreign_load or 0.0, b.foreign_load or 0.0) >= DISTURBED
    )
    if disturbed:
        target += f"  ({disturbed} of {len(r.ratios)} pairs disturbed by other load)"
    report.emit(
        f"{title}: {fmt_rate(r.b_rate)} msg/s (cpu-norm {fmt_rate(r.b_cpu_norm)}/s)  "
        f"{other}  ratio {r.ratio:.2f}{suffix} (min {min(r.ratios):.2f}, "
        f"max {max(r.ratios):.2f}; {len(r.ratios)} pairs)  {target}  {status}"
    )
    results = report.results[key]
    results["target"] = goal.value if goal is not None else None
    results["status"] = status
    results["pairs_disturbed_by_other_load"] = disturbed
    report.summary.append(
        (
            title,
            f"{r.ratio:.2f}{suffix} ({min(r.ratios):.2f}-{max(r.ratios):.2f})",
            f"{goal.kind} {goal.value:g}{suffix}" if goal is not None else "recorded",
            f"{status}  [rate {fmt_rate(r.b_rate)}/s; cpu-norm ratio {r.cpu_ratio:.2f}]",
        )
    )
