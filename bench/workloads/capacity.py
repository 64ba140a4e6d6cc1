"""Capacity benchmark: what the capacity jobs (spark/) cost and how fast they are, on the
scale benchmark's data set.

It loads N DIDComm recipients (default 1,000,000; a share of them with 1-5 queued 1 KiB
messages) with bench/support/bulk_load.py, as the scale benchmark does, or uses a Redis already
loaded that way (--redis-url), and measures:

  anchor    a plain single-process walk of the same Redis, as RedisInsight's database
            analysis does it: SCAN (COUNT 1000) over every key, and MEMORY USAGE of each
            key, pipelined per SCAN page (redis-py, transaction=False): keys/s
  snapshot  `mediator capacity snapshot --max-commands-per-second 0` (local[*]), timed end to
            end as a subprocess: mailbox rows/s, commands, bytes written, and rows/s
            against the anchor's keys/s (reading far more per row)       >= 1.0x
  rate      the same at the default command budget: rows/s, and what it costs Redis
            (INFO total_commands_processed, instantaneous_ops_per_sec, the server's CPU)
            while it reads, against Redis idle just before
  live      closed-loop forwards to distinct recipients (scale_bench's forwards, node1)
            in blocks of --seconds without a snapshot and while default-rate snapshots
            read, alternating, the order reversed every other pair: forwards/s during a
            snapshot / without                                            >= 0.8x
  report    a 30-day history made from the unthrottled snapshot's three tables (one copy
            a day, the servers' used memory growing a little a day), and
            `mediator capacity report --days 30` over it, timed: seconds, rows read, the
            size of report.html, summary.json and the history

The nodes run without the limit that would cap the live part's forwards (forwards per
recipient per second: bench/harness/limits.py).

Each figure is printed with its target and what it is measured against in the same run;
results go to bench/results/capacity-<timestamp>.json. The exit status is 0 when it ran,
even with targets missed (the line says MISSED), 1 when errors happened during the run, 2
when it could not run. bench/README.md describes the method.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import secrets
import shutil
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.harness import cli
from bench.harness.blocks import Block, BlockOptions, Blocks, Side, Target, describe, timed_side
from bench.harness.errors import BenchError
from bench.harness.limits import FORWARDS_PER_RECIPIENT
from bench.harness.output import Goal, dist, fmt_rate, percentile, progress
from bench.harness.processes import base_env
from bench.harness.report import Report
from bench.harness.run import long_main
from bench.harness.servers import Servers
from bench.support.bulk_load import MEDIATOR_SEED, Plan, load
from bench.support.forwards import pack_forwards, regions
from bench.support.redis_probes import rewrite_aof
from bench.support.topology import start_plan_nodes
from bench.workloads.capacity_jobs import (
    READING,
    SCAN_COUNT,
    JobRun,
    RedisLoad,
    SnapshotKeeper,
    build_history,
    folder_size,
    on_cpus,
    process_stat,
    walk,
)
from mediator.engine import keys
from spark.cli import snapshot_command

PARTS = ("anchor", "snapshot", "rate", "live", "report")
RUN_TIMEOUT_S = 3 * 3600
LIMITS_OFF = (FORWARDS_PER_RECIPIENT,)
# The snapshot's default command budget per partition, as its CLI has it.
DEFAULT_RATE = float(
    str(next(p.default for p in snapshot_command.params if p.name == "max_commands_per_second"))
)
REPORT_LINE = re.compile(r"report: (?P<html>.+) \((?P<bytes>[\d,]+) bytes\), (?P<summary>\S+)")
GOALS = {
    "snapshot_vs_anchor": Goal(">=", 1.0, ">= 1.0x"),
    "live_during_vs_without": Goal(">=", 0.8, ">= 0.8x"),
}


class CapacityBench:
    """The capacity parts on a loaded Redis (loaded here, or given) and two nodes on it."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.plan = Plan(args.recipients, args.share)
        self.report = Report(LIMITS_OFF)
        self.servers = Servers("capacity-bench-", args.redis_url, LIMITS_OFF)
        self.blocks = Blocks(self.servers, BlockOptions.from_args(args), self.report)
        self.started_nodes = False
        self.all_cpus = sorted(os.sched_getaffinity(0))
        self.hash_key: list[str] | None = None
        self.unthrottled: Path | None = None  # the unthrottled snapshot's history
        self.runs = 0

    def judge(self, name: str, label: str, shown: str, value: float) -> str:
        return self.report.judge(GOALS, name, label, shown, value)

    async def start_nodes(self) -> None:
        if not self.started_nodes:
            await start_plan_nodes(self.servers, self.plan)
            self.started_nodes = True

    # ------------------------------------------------------------------ Redis

    async def prepare_redis(self) -> None:
        """The loaded data set: loaded here into the embedded server, or the --redis-url
        one as it is."""
        if self.args.redis_url:
            await self.attach_redis()
            return
        progress(f"pinning: {self.servers.pin(self.args.no_pin).note}")
        await self.servers.start_redis(socket_timeout=600)
        progress("--- load")
        for phase in ("recipients", "messages"):
            made = await load(
                self.servers.redis_url,
                self.plan,
                phase,
                processes=self.args.load_processes,
                report=progress,
                every=self.args.progress_seconds,
            )
            progress(f"{phase}: {made.items:,} ({made.made:,} made) in {made.seconds:.0f} s")
        redis = self.servers.redis
        progress(f"AOF rewritten after the load, in {await rewrite_aof(redis):.0f} s")

    async def attach_redis(self) -> None:
        servers = self.servers
        note = servers.pin(self.args.no_pin).note
        progress(f"pinning: {note} (the Redis at --redis-url is not pinned)")
        await servers.start_redis(socket_timeout=600)
        redis = servers.redis
        pid = int((await redis.info("server")).get("process_id", 0))
        servers.redis_pid = pid if process_stat(pid) is not None else None
        last = self.plan.recipients - 1
        record = keys.connection_keys(self.plan.wallet(last).verkey_b58).record
        if not await redis.exists(record):
            raise BenchError(
                f"{servers.redis_url} has no recipient {last:,} of the plan: load it with "
                f"bench/bulk_load.py --recipients {self.plan.recipients} (same --share)"
            )
        progress(
            f"using the Redis at {servers.redis_url} ({await redis.dbsize():,} keys, pid "
            f"{servers.redis_pid or 'unknown'}), loaded with {self.plan.recipients:,} recipients"
        )

    async def snapshot_args(self) -> list[str]:
        """--hash-key-file when the deployment has no mediator identity in Redis (nodes
        started with MEDIATOR_KEY_SEED, as the loader's and scale_bench's, never store one)."""
        if self.hash_key is None:
            self.hash_key = []
            if not await self.servers.redis.hexists(keys.mediator_identity(), keys.IDENTITY_SEED):
                path = self.servers.tmp / "pseudonym.key"
                path.write_text(secrets.token_hex(32))
                self.hash_key = ["--hash-key-file", str(path)]
                progress("no mediator identity in Redis (MEDIATOR_KEY_SEED): --hash-key-file")
        return self.hash_key

    # ------------------------------------------------------------------ jobs

    async def snapshot(self, label: str, rate: float | None, cpus: str = "all") -> JobRun:
        """A snapshot subprocess, started (not awaited)."""
        self.runs += 1
        out = self.servers.tmp / f"history-{self.runs}-{label}"
        argv = [sys.executable, "-m", "mediator", "capacity", "snapshot"]
        argv += [
            "--redis-url",
            self.servers.redis_url,
            "--out",
            str(out),
            *await self.snapshot_args(),
        ]
        if rate is not None:
            argv += ["--max-commands-per-second", f"{rate:g}"]
        pinning = self.servers.pinning
        where = self.all_cpus if pinning.used else None
        if cpus == "load" and pinning.used:
            assert pinning.load_cpu is not None
            where = [pinning.load_cpu]
            argv += ["--master", f"local[{len(self.all_cpus)}]"]  # as many tasks as local[*]
        return await JobRun(f"snapshot {label}", on_cpus(argv, where), base_env(), out).start()

    async def finished(self, run: JobRun) -> dict[str, Any]:
        code = await run.wait()
        if code != 0:
            raise BenchError(f"{run.label} exited {code}:\n{run.tail[-1500:]}")
        return run.summary() | run.timeline()

    # ------------------------------------------------------------------ anchor

    async def phase_anchor(self) -> None:
        redis = self.servers.redis
        dbsize = await redis.dbsize()
        progress(f"anchor: SCAN + MEMORY USAGE over {dbsize:,} keys")
        meter = RedisLoad(redis, self.servers.redis_pid)
        before = await meter.read()
        done = await asyncio.to_thread(walk, self.servers.redis_url, self.all_cpus)
        after = await meter.read()
        redis_cpu = (after.cpu - before.cpu) / max(after.at - before.at, 1e-9)
        self.report.results["anchor"] = asdict(done) | {
            "keys_per_second": done.rate,
            "commands": done.keys + done.pages,
            "dbsize": dbsize,
            "redis_cpu": redis_cpu,
        }
        self.report.info("anchor SCAN + MEMORY USAGE", f"{fmt_rate(done.rate)} keys/s")
        commands = done.keys + done.pages
        self.report.emit(
            f"anchor: SCAN (COUNT {SCAN_COUNT}) + pipelined MEMORY USAGE over {done.keys:,} keys "
            f"(DBSIZE {dbsize:,}) in {done.seconds:.1f} s: {fmt_rate(done.rate)} keys/s, "
            f"{commands:,} commands ({commands / max(done.keys, 1):.3f} per key), "
            f"{done.memory_bytes / 1e6:,.1f} MB counted, Redis {redis_cpu:.0%} of a core"
        )

    # ------------------------------------------------------------------ snapshot

    async def phase_snapshot(self) -> None:
        progress("snapshot: --max-commands-per-second 0, local[*], timed end to end")
        meter = RedisLoad(self.servers.redis, self.servers.redis_pid)
        meter.start()
        run = await self.snapshot("unthrottled", 0)
        try:
            s = await self.finished(run)
        finally:
            await meter.stop()
        self.unthrottled = run.out
        s["redis"] = meter.window(*run.reading_window)
        s["rows_per_second"] = s["rows"] / s["wall_seconds"]
        s["rows_per_second_job"] = s["rows"] / s["job_seconds"]
        s["rows_per_second_reading"] = s["rows"] / max(s["reading_seconds"], 1e-9)
        s["commands_per_row"] = s["commands"] / max(s["rows"], 1)
        self.report.results["snapshot"] = s
        self.snapshot_lines(s)

    def snapshot_lines(self, s: dict[str, Any]) -> None:
        anchor = self.report.results.get("anchor")
        shown = f"{fmt_rate(s['rows_per_second'])} rows/s"
        line = (
            f"snapshot unthrottled: {s['rows']:,} mailboxes in {s['wall_seconds']:.1f} s end to "
            f"end ({s['job_seconds']:.1f} s by the job, reading {s['reading_seconds']:.1f} s): "
            f"{shown} ({fmt_rate(s['rows_per_second_job'])}/s by the job's clock, "
            f"{fmt_rate(s['rows_per_second_reading'])}/s while it read)"
        )
        if anchor:
            ratio = s["rows_per_second"] / anchor["keys_per_second"]
            s["ratio_to_anchor"] = ratio
            status = self.judge(
                "snapshot_vs_anchor",
                "snapshot rows/s / anchor keys/s",
                f"{ratio:.2f}x ({shown})",
                ratio,
            )
            line += (
                f" / anchor {fmt_rate(anchor['keys_per_second'])} keys/s = {ratio:.2f}x  "
                f"target >= 1.0  {status}"
            )
        else:
            self.report.info("snapshot unthrottled", shown)
        self.report.emit(line)
        per_key = (
            f"; the anchor 1 MEMORY USAGE per key, {anchor['dbsize'] / max(s['rows'], 1):.2f} "
            "keys per mailbox row"
            if anchor
            else ""
        )
        self.report.emit(
            f"  read per row: {s['commands_per_row']:.2f} commands ({s['commands']:,} in "
            f"{s['partitions']} partitions: config hash and presence of every mailbox, 8 reads "
            f"more for one that may hold messages, MEMORY USAGE of its keys for 1 %){per_key}; "
            f"highest rate {s['peak']:,} commands/s in a partition; {s['bytes']:,} bytes "
            f"written; Redis {s['redis']['commands_per_second']:,.0f} commands/s and "
            f"{s['redis']['cpu']:.0%} of a core while it read; the job used "
            f"{s['cpu_seconds']:.0f} CPU-s"
        )
        self.report.emit(f"  phases (s from start): {self.fmt_phases(s)}")

    @staticmethod
    def fmt_phases(s: dict[str, Any]) -> str:
        def at(text: str) -> str:
            found = [t for line, t in s["phases"].items() if text in line]
            return f"{found[0]:.1f}" if found else "-"

        stage = s.get("tasks_started")
        return (
            f"'{READING}' line {at(READING)}, first Spark stage "
            f"{'-' if stage is None else f'{stage:.1f}'}, 'writing the history' "
            f"{at('writing the history')}, exit {s['wall_seconds']:.1f}"
        )

    # ------------------------------------------------------------------ rate

    async def phase_rate(self) -> None:
        meter = RedisLoad(self.servers.redis, self.servers.redis_pid)
        progress(f"rate: Redis idle for {self.args.idle_seconds:g} s, then a default-rate snapshot")
        meter.start()
        try:
            t0 = time.monotonic()
            await asyncio.sleep(self.args.idle_seconds)
            idle = meter.window(t0, time.monotonic())
            run = await self.snapshot("rate", None)
            s = await self.finished(run)
        finally:
            await meter.stop()
        shutil.rmtree(run.out or "", ignore_errors=True)
        s["redis"], s["redis_idle"] = meter.window(*run.reading_window), idle
        s["rows_per_second"] = s["rows"] / s["wall_seconds"]
        s["budget"] = DEFAULT_RATE
        s["ceiling"] = DEFAULT_RATE * min(s["partitions"], len(self.all_cpus))
        self.report.results["rate"] = s
        self.rate_lines(s)

    def rate_lines(self, s: dict[str, Any]) -> None:
        r, idle = s["redis"], s["redis_idle"]
        self.report.info("snapshot at the default rate", f"{fmt_rate(s['rows_per_second'])} rows/s")
        self.report.info(
            "Redis while it reads", f"{r['commands_per_second']:,.0f} cmds/s, {r['cpu']:.0%}"
        )
        self.report.emit(
            f"snapshot at the default rate ({DEFAULT_RATE:,.0f} commands/s per partition): "
            f"{s['rows']:,} mailboxes in {s['wall_seconds']:.1f} s end to end (reading "
            f"{s['reading_seconds']:.1f} s): {fmt_rate(s['rows_per_second'])} rows/s; highest "
            f"rate {s['peak']:,} commands/s in a partition (budget {DEFAULT_RATE:,.0f}; at most "
            f"{s['ceiling']:,.0f}/s with {min(s['partitions'], len(self.all_cpus))} partitions "
            f"at once)  (info)"
        )
        self.report.emit(
            f"  Redis while it read ({r['seconds']:.0f} s): {r['commands_per_second']:,.0f} "
            f"commands/s (instantaneous_ops_per_sec median {r['ops_median']:,.0f}, max "
            f"{r['ops_max']:,.0f}), redis-server {r['cpu']:.0%} of a core; idle before "
            f"({idle['seconds']:.0f} s): {idle['commands_per_second']:,.1f} commands/s, "
            f"{idle['cpu']:.1%}; the job used {s['cpu_seconds']:.0f} CPU-s"
        )
        self.report.emit(f"  phases (s from start): {self.fmt_phases(s)}")

    # ------------------------------------------------------------------ live

    async def forward_requests(self) -> list[bytes]:
        """Forwards to distinct recipients drawn at random over the loaded ones."""
        pool = regions(self.plan)["distinct"]
        picked = random.Random(11).sample(pool, min(self.args.forward_envelopes, len(pool)))
        progress(f"live: packing {len(picked):,} forwards to distinct recipients")
        started = time.monotonic()
        packed, inner = await asyncio.to_thread(pack_forwards, self.plan, picked, 2)
        progress(f"live: packed in {time.monotonic() - started:.0f} s (inner envelope {inner:,} B)")
        return packed

    async def phase_live(self) -> None:
        await self.start_nodes()
        args = self.args
        latencies: dict[str, list[float]] = {}
        node1 = self.servers.node1
        assert node1 is not None
        target = Target("node1", node1.port, node1.pid)
        side, used = timed_side("forwards", target, await self.forward_requests(), latencies)
        if args.warmup > 0:
            warm = await self.blocks.run(side, args.warmup, "warm")
            progress(f"live warm-up: {describe(warm)}")
            await asyncio.sleep(args.pause)
        rounds = []
        for r in range(args.pairs):
            order = ("without", "during") if r % 2 == 0 else ("during", "without")
            row: dict[str, Any] = {"order": list(order)}
            for kind in order:
                row[kind] = await self.live_block(side, kind, f"{r}{kind}", latencies)
                await asyncio.sleep(args.pause)
            self.live_round(row, r)
            rounds.append(row)
        self.live_report(rounds, used[0])

    async def live_block(
        self, side: Side, kind: str, tag: str, latencies: dict[str, list[float]]
    ) -> dict[str, Any]:
        if kind == "without":
            block = await self.blocks.run(side, self.args.seconds, tag)
            return self.block_row(block, latencies[tag])
        keeper = SnapshotKeeper(lambda: self.snapshot("live", None, self.args.live_snapshot_cpus))
        try:
            if not await keeper.begin(600):
                raise BenchError(f"the live snapshot did not start reading: {keeper.failures()}")
            cpu0, t0 = keeper.cpu(), time.monotonic()
            block = await self.blocks.run(side, self.args.seconds, tag)
            t1 = time.monotonic()
        finally:
            await keeper.stop()
        for run in keeper.runs:
            shutil.rmtree(run.out or "", ignore_errors=True)
        self.report.errors += [f"live: {f}" for f in keeper.failures()]
        row = self.block_row(block, latencies[tag])
        row["snapshots"] = len(keeper.runs)
        row["snapshot_reading_share"] = keeper.coverage(t0, t1)
        row["snapshot_cpu"] = (keeper.cpu() - cpu0) / (t1 - t0)
        return row

    def block_row(self, block: Block, timings: list[float]) -> dict[str, Any]:
        if block.errors:
            self.report.errors.append(
                f"live/{block.label}: {block.errors} errors: {block.first_error}"
            )
        return {
            "block": asdict(block),
            "rate": block.rate,
            "p99_ms": percentile(timings, 99) * 1000,
            "latency_ms": dist([x * 1000 for x in timings]) if timings else None,
            "described": describe(block),
        }

    def live_round(self, row: dict[str, Any], r: int) -> None:
        d, w = row["during"], row["without"]
        row["ratio"] = d["rate"] / w["rate"] if w["rate"] else float("nan")
        row["p99_ratio"] = d["p99_ms"] / w["p99_ms"] if w["p99_ms"] else float("nan")
        shown = {
            kind: f"{row[kind]['described']} p99 {row[kind]['p99_ms']:.1f} ms"
            for kind in row["order"]
        }
        progress(
            f"live pair {r + 1}/{self.args.pairs}: "
            + " | ".join(f"{kind}: {shown[kind]}" for kind in row["order"])
            + f" [{d['snapshots']} snapshot(s) reading {d['snapshot_reading_share']:.0%} of the "
            f"block, using {d['snapshot_cpu']:.0%} of a core]  during/without {row['ratio']:.2f}"
        )

    def live_report(self, rounds: list[dict[str, Any]], used: int) -> None:
        ratio = float(statistics.median(r["ratio"] for r in rounds))
        p99 = float(statistics.median(r["p99_ratio"] for r in rounds))
        during = statistics.median(r["during"]["rate"] for r in rounds)
        without = statistics.median(r["without"]["rate"] for r in rounds)
        self.report.results["live"] = {
            "rounds": rounds,
            "during_vs_without": ratio,
            "p99_during_vs_without": p99,
            "forwards_sent": used,
            "snapshot_cpus": self.args.live_snapshot_cpus,
        }
        shown = f"{ratio:.2f}x ({fmt_rate(during)}/s vs {fmt_rate(without)}/s)"
        status = self.judge(
            "live_during_vs_without", "forwards/s during a snapshot / without", shown, ratio
        )
        spread = ", ".join(f"{r['ratio']:.2f}" for r in rounds)
        self.report.emit(
            f"forwards to distinct recipients of {self.plan.recipients:,} during a default-rate "
            f"snapshot: {fmt_rate(during)}/s vs {fmt_rate(without)}/s without: {ratio:.2f}x "
            f"(pairs {spread})  target >= 0.8  {status}; p99 {p99:.2f}x (info)"
        )

    # ------------------------------------------------------------------ report

    async def phase_report(self) -> None:
        if self.unthrottled is None:
            raise BenchError("no unthrottled snapshot to make the history from")
        args = self.args
        history, out = self.servers.tmp / "history-30d", self.servers.tmp / "report"
        progress(f"report: a {args.days}-day history from the unthrottled snapshot")
        started = time.monotonic()
        rows = await asyncio.to_thread(
            build_history, self.unthrottled, history, args.days, args.report_growth
        )
        made = time.monotonic() - started
        argv = [sys.executable, "-m", "mediator", "capacity", "report", "--history", str(history)]
        argv += ["--out", str(out), "--days", str(args.days)]
        progress(f"report: history written in {made:.0f} s; mediator capacity report, timed")
        for p in self.servers.procs:  # the nodes' idle work is no part of it
            p.stop()
        where = self.all_cpus if self.servers.pinning.used else None
        run = await JobRun("report", on_cpus(argv, where), base_env(), out).start()
        code = await run.wait()
        if code != 0:
            raise BenchError(f"the report exited {code}:\n{run.tail[-1500:]}")
        self.report_lines(run, rows, history, out, made)

    def report_lines(
        self, run: JobRun, rows: dict[str, int], history: Path, out: Path, made: float
    ) -> None:
        args = self.args
        found = REPORT_LINE.search(run.stdout)
        if found is None:
            raise BenchError(f"the report printed no summary line: {run.stdout[-500:]!r}")
        html, summary = out / "report.html", out / "summary.json"
        seconds = run.ended - run.started
        read = rows["mailboxes"] * args.days
        r = {
            "seconds": seconds,
            "mailbox_rows_read": read,
            "rows_per_snapshot": rows,
            "rows_per_second": read / seconds,
            "history_bytes": folder_size(history),
            "history_build_seconds": made,
            "html_bytes": html.stat().st_size,
            "summary_bytes": summary.stat().st_size,
            "cpu_seconds": run.cpu,
            "notes": [line for line in run.stdout.splitlines() if line.startswith("note:")],
            "verdict": self.verdict_of(summary),
        }
        self.report.results["report"] = r
        self.report.info(f"report over {args.days} days", f"{seconds:.1f} s")
        v = r["verdict"]
        self.report.emit(
            f"report over {args.days} days ({read:,} mailbox rows, {rows['servers']} server and "
            f"{rows['cluster']} cluster rows a day; history {r['history_bytes'] / 1e6:,.1f} MB on "
            f"disk): {seconds:.1f} s end to end ({fmt_rate(r['rows_per_second'])} rows/s, the job "
            f"used {run.cpu:.0f} CPU-s); report.html {r['html_bytes']:,} B, summary.json "
            f"{r['summary_bytes']:,} B  (info)"
        )
        self.report.emit(
            f"  its verdict {v['status']} ({'; '.join(v['reasons'])}), forecast {v['forecast']} "
            f"(slope {(v['slope'] or 0) / 1e6:,.2f} MB/day); notes: {r['notes'] or 'none'}"
        )

    @staticmethod
    def verdict_of(path: Path) -> dict[str, Any]:
        summary = json.loads(path.read_text())
        forecast = summary.get("forecast", {})
        return {
            "status": summary.get("verdict", {}).get("status"),
            "reasons": summary.get("verdict", {}).get("reasons", []),
            "forecast": forecast.get("status"),
            "slope": forecast.get("slope_bytes_per_day"),
        }

    # ------------------------------------------------------------------ run

    async def run(self) -> list[str]:
        """The parts, and what the servers logged (read before their folder goes)."""
        await self.run_parts()
        return self.servers.log_problems()

    async def stop(self) -> None:
        await self.servers.stop(self.args.keep_tmp)

    async def run_parts(self) -> None:
        await self.prepare_redis()
        steps = {
            "anchor": self.phase_anchor,
            "snapshot": self.phase_snapshot,
            "rate": self.phase_rate,
            "live": self.phase_live,
            "report": self.phase_report,
        }
        for part in PARTS:
            if part in self.args.only:
                progress(f"--- {part}")
                try:
                    await steps[part]()
                except BenchError as exc:  # the other parts' figures still count
                    self.report.errors.append(f"{part}: {exc}")
                    progress(f"{part} FAILED: {exc}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.new_parser(
        __doc__ or "",
        "Method: bench/README.md (Capacity benchmark). Quick run: --recipients 20000 "
        "--seconds 5 --pairs 1.",
    )
    cli.add_plan(parser)
    cli.add_only(parser, PARTS, "report needs the unthrottled snapshot, so it runs snapshot too")
    cli.add_redis_url(
        parser,
        "use this Redis (loopback only), already loaded by bench/bulk_load.py or "
        "scale_bench with the same --recipients and --share, instead of starting one and "
        "loading it; not pinned; the live part adds the messages it forwards",
    )
    add = parser.add_argument
    add("--load-processes", type=int, default=2, help="loading processes (2: one per CPU)")
    cli.add_blocks(
        parser,
        seconds=20.0,
        pairs=2,
        warmup=5.0,
        seconds_help="length of each live block, with and without a snapshot",
        pairs_help="live pairs of blocks (without, during), the order reversed every other pair",
        warmup_help="a live warm-up block without a snapshot, not counted (0: none)",
        connections_help="closed-loop HTTP connections",
    )
    add(
        "--forward-envelopes",
        type=int,
        default=60_000,
        help="forwards packed ahead for the live blocks, each to another recipient drawn at "
        "random (60000; taken in turn, reused if a run needs more)",
    )
    add(
        "--live-snapshot-cpus",
        choices=("load", "all"),
        default="load",
        help="where the live part's snapshots run: 'load' (default) on the CPU of Redis and "
        "the load generator, away from the nodes' CPU, with as many Spark tasks as local[*] "
        "gives; 'all' on every CPU (local[*]); without pinning both mean every CPU",
    )
    add(
        "--idle-seconds",
        type=float,
        default=5.0,
        help="Redis's idle window before the default-rate snapshot, its baseline (5)",
    )
    add("--days", type=int, default=30, help="days of history for the report part (30)")
    add(
        "--report-growth",
        type=float,
        default=0.01,
        help="the servers' used memory in the history grows by this share of the snapshot's "
        "a day, so that the forecast has a trend (0.01)",
    )
    add("--progress-seconds", type=float, default=10.0, help="load progress interval (10)")
    cli.add_run(
        parser,
        "capacity",
        no_pin_help="do not pin processes to CPUs (by default, with two CPUs and taskset: "
        "Redis and this process on cpu 0, the nodes on cpu 1, the jobs and the anchor walk on "
        "both)",
        keep_tmp_help="keep logs, Redis data, the snapshots' histories and the report",
    )
    args = parser.parse_args(argv)
    args.only = cli.parse_only(parser, args.only, PARTS)
    if "report" in args.only:
        args.only.add("snapshot")
    cli.check_plan(parser, args)
    cli.check_blocks(parser, args)
    if not 1 <= args.days <= 3650:
        parser.error("--days must be 1..3650")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    parts = [p for p in PARTS if p in args.only]
    return long_main(
        lambda: CapacityBench(args),
        "capacity",
        args,
        parts,
        RUN_TIMEOUT_S,
        mediator_key_seed=MEDIATOR_SEED,
        default_commands_per_second=DEFAULT_RATE,
    )
