"""Scale benchmark: a node's cost at a million recipients, in one run.

It loads N DIDComm recipients (default 1,000,000) with bench/support/bulk_load.py, through the
mediator's own code (records, grants, keys; no network, no handshake cryptography), gives
a share of them 1-5 queued 1 KiB messages, starts two `mediator serve` nodes and the anchor
app on that Redis, and measures (targets from the issue):

  memory      Redis bytes per idle recipient (used_memory delta / N), with a breakdown by
              key shape (MEMORY USAGE)                                    <= 512 B
              Redis bytes per queued 1 KiB message at N recipients        <= 1.5 KiB
  idle        node1 (in-process worker) and Redis CPU over 60 s with no traffic, after a
              warm-up; Redis commands/s by command                        <= 5 % each
  freshness   mediator_queue_stats_age_seconds, and /metrics totals equal to a full recount
                                                                          <= 30 s, equal
  forwards    anoncrypted routing/1.0 forwards of a 1 KiB inner envelope, POST / answered
              202, closed loop: to distinct recipients across the N, against the same
              rotating over 8 recipients                 forwards/s >= 0.9x, p99 <= 1.2x
              and against the anchor's POST + XADD                        >= 0.5x
  sockets     idle live WebSockets on node2 (as many as its 20,000 open files allow): RSS
              per socket, node CPU and Redis commands/s over one live recheck (300 s)
                                                      <= 30 KB, <= 10 %, <= 1,000/s
  live        node2's CPU per live delivery at 100 forwards/s POSTed to node1 (forward
              answered -> frame written -> acknowledged)                  <= 0.4 ms
  sigterm     SIGTERM to exit of node1 (in-process worker on), no socket open   <= 3 s
  cluster     the loader against a three-primary Redis Cluster at the same N: keys and
              bytes per primary, max/mean                                 <= 1.2

The nodes run without the limits that would cap these figures (bench/harness/limits.py):
forwards per recipient per second (the side rotating over 8) and WebSocket frames per
second (the live sockets' acknowledgements).

Each figure is printed with its target and the anchor measured in the same run; results
go to bench/results/scale-<timestamp>.json. The exit status is 0 when it ran, even with
targets missed (the line says MISSED), non-zero when something failed. bench/README.md
describes the method.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench.harness import cli
from bench.harness.blocks import BlockOptions, Blocks
from bench.harness.limits import FORWARDS_PER_RECIPIENT, WEBSOCKET_FRAMES
from bench.harness.loadgen import HOST
from bench.harness.machine import CpuMeter
from bench.harness.output import Goal, fmt_rate, progress
from bench.harness.processes import Proc
from bench.harness.profiling import profile_process
from bench.harness.report import Report
from bench.harness.run import long_main
from bench.harness.servers import Servers, node_metrics
from bench.support.bulk_load import MEDIATOR_SEED, Plan, load
from bench.support.redis_probes import (
    balance,
    client_commands,
    commands,
    fmt_top_level,
    load_scripts,
    primary_memory,
    process_rates,
    rates,
    shapes,
    top_level,
    used_memory,
)
from bench.support.topology import start_cluster, start_plan_nodes
from bench.workloads.scale_traffic import TrafficParts
from mediator.engine import keys
from mediator.engine.books import Totals, recount
from mediator.settings import Settings

PARTS = ("idle", "freshness", "forwards", "sockets", "live", "sigterm", "cluster")
RUN_TIMEOUT_S = 3 * 3600
SIGTERM_LIMIT_S = 60.0
LIMITS_OFF = (FORWARDS_PER_RECIPIENT, WEBSOCKET_FRAMES)
GOALS = {
    "bytes_per_recipient": Goal("<=", 512, "<= 512 B"),
    "bytes_per_message": Goal("<=", 1536, "<= 1,536 B"),
    "idle_node_cpu": Goal("<=", 0.05, "<= 5 %"),
    "idle_redis_cpu": Goal("<=", 0.05, "<= 5 %"),
    "freshness": Goal("<=", 30.0, "<= 30 s"),
    "sigterm": Goal("<=", 3.0, "<= 3 s"),
    "balance": Goal("<=", 1.2, "<= 1.2"),
}


def shown_value(value: float) -> str:
    return "absent" if value != value else f"{value:,.0f}"  # NaN: the metric is not there


class ScaleBench:
    """The scale parts on a bulk-loaded Redis and the nodes started on it."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.plan = Plan(args.recipients, args.share)
        self.report = Report(LIMITS_OFF)
        self.servers = Servers("scale-bench-", limits_off=LIMITS_OFF)
        self.blocks = Blocks(self.servers, BlockOptions.from_args(args), self.report)
        self.traffic = TrafficParts(args, self.plan, self.servers, self.blocks, self.report)
        self.started_nodes = False

    def node1(self) -> Proc:
        node = self.servers.node1
        assert node is not None
        return node

    def judge(self, name: str, label: str, shown: str, value: float) -> str:
        """The verdict on a figure, added to the summary and the JSON."""
        return self.report.judge(GOALS, name, label, shown, value)

    # ------------------------------------------------------------------ servers

    async def start_redis(self) -> None:
        """The embedded server (AOF everysec, noeviction) in a temporary folder, pinned
        with the load generator."""
        progress(f"pinning: {self.servers.pin(self.args.no_pin).note}")
        await self.servers.start_redis(socket_timeout=600)

    async def start_nodes(self) -> None:
        if not self.started_nodes:
            await start_plan_nodes(self.servers, self.plan)
            self.started_nodes = True

    # ------------------------------------------------------------------ memory

    async def phase_load(self) -> None:
        """Recipients, then their messages, each with used_memory before and after."""
        redis = self.servers.redis
        plan, args = self.plan, self.args
        await load_scripts(redis)
        before = await used_memory(redis)
        made = await load(
            self.servers.redis_url,
            plan,
            "recipients",
            processes=args.load_processes,
            report=progress,
            every=args.progress_seconds,
        )
        progress(f"{made.items:,} recipients in {made.seconds:.0f} s ({fmt_rate(made.rate)}/s)")
        idle = await used_memory(redis)
        queued = await load(
            self.servers.redis_url,
            plan,
            "messages",
            processes=args.load_processes,
            report=progress,
            every=args.progress_seconds,
        )
        progress(
            f"{queued.made:,} messages for {queued.items:,} recipients in "
            f"{queued.seconds:.0f} s ({fmt_rate(queued.made / queued.seconds)}/s)"
        )
        full = await used_memory(redis)
        per_recipient = (idle["used_memory"] - before["used_memory"]) / plan.recipients
        per_message = (full["used_memory"] - idle["used_memory"]) / max(queued.made, 1)
        progress("memory by key shape (MEMORY USAGE)")
        found = await shapes(redis, plan, args.memory_sample)
        self.report.results["load"] = {
            "recipients": {**asdict(made), "rate": made.rate},
            "messages": {**asdict(queued), "rate": queued.rate},
            "used_memory": {"before": before, "recipients": idle, "messages": full},
        }
        self.report.results["memory"] = {
            "bytes_per_recipient": per_recipient,
            "bytes_per_message": per_message,
            "dataset_bytes_per_recipient": (
                idle["used_memory_dataset"] - before["used_memory_dataset"]
            )
            / plan.recipients,
            "shapes": {s.name: s.to_json() for s in found},
        }
        status = self.judge(
            "bytes_per_recipient",
            "Redis bytes per idle recipient",
            f"{per_recipient:,.0f} B",
            per_recipient,
        )
        self.report.emit(
            f"Redis bytes per idle recipient: {per_recipient:,.0f} B (used_memory +"
            f"{idle['used_memory'] - before['used_memory']:,} B for {plan.recipients:,} "
            f"recipients, loaded at {fmt_rate(made.rate)}/s)  target <= 512 B  {status}"
        )
        self.report_shapes(found, "recipient", plan.recipients, per_recipient)
        status = self.judge(
            "bytes_per_message",
            "Redis bytes per queued 1 KiB message",
            f"{per_message:,.0f} B",
            per_message,
        )
        self.report.emit(
            f"Redis bytes per queued 1 KiB message at {plan.recipients:,} recipients: "
            f"{per_message:,.0f} B ({queued.made:,} messages, 1-5 each for "
            f"{queued.items:,} recipients)  target <= 1,536 B  {status}"
        )
        self.report_shapes(found, "message", queued.made, per_message)

    def report_shapes(self, found: list[Any], per_what: str, count: int, measured: float) -> None:
        """The MEMORY USAGE breakdown per recipient or per message, and what it leaves out
        of the used_memory figure (the keyspace table, allocator slack)."""
        rows = [s for s in found if s.per == per_what]
        total = sum(s.bytes for s in rows) / max(count, 1)
        self.report.emit(f"  per {per_what}, by key shape (MEMORY USAGE):")
        for s in rows:
            self.report.emit(
                f"    {s.name:<44} {s.bytes / max(count, 1):8,.1f} B   "
                f"({s.keys:,} keys, {s.sampled:,} measured)"
            )
        self.report.emit(f"    {'sum':<44} {total:8,.1f} B")
        self.report.emit(
            f"    {'rest of used_memory (keyspace, allocator)':<44} {measured - total:8,.1f} B"
        )

    # ------------------------------------------------------------------ idle

    async def phase_idle(self) -> None:
        """Warm-up (the first stats pass, the audit under way), then `--idle-seconds`
        with no traffic: CPU of node1, node2 and Redis, Redis commands by command."""
        node1 = self.servers.node1
        assert node1 is not None
        redis, args = self.servers.redis, self.args
        ages = await self.warm_up(args.idle_warmup)
        m0 = await node_metrics(self.node1())
        servers = {p.name: p.pid for p in self.servers.procs if p.running}
        p0 = await client_commands(redis, servers)
        c0 = await commands(redis)
        meter = CpuMeter(self.servers.cpu_pids())
        progress(f"idle: measuring {args.idle_seconds:g} s with no traffic")
        await asyncio.sleep(args.idle_seconds)
        shares = meter.shares()
        window = time.perf_counter() - meter.started
        c1 = await commands(redis)
        by_process = process_rates(p0, await client_commands(redis, servers), window)
        m1 = await node_metrics(self.node1())
        cmd = rates(c0, c1, window)
        upkeeps = m1.get("mediator_worker_upkeeps_total", 0) - m0.get(
            "mediator_worker_upkeeps_total", 0
        )
        audited = m1.get("mediator_worker_audited_queues_total", 0) - m0.get(
            "mediator_worker_audited_queues_total", 0
        )
        self.report.results["idle"] = {
            "seconds": window,
            "cpu": shares,
            "machine": meter.machine(),
            "redis_commands": cmd.to_json(),
            "redis_commands_per_second_by_process": by_process,
            "upkeeps": upkeeps,
            "audited_queues": audited,
            "stats_ages_during_warmup": ages,
        }
        node, redis_cpu = shares["node1"], shares["redis"]
        s1 = self.judge("idle_node_cpu", "idle node CPU", f"{node:.1%}", node)
        s2 = self.judge("idle_redis_cpu", "idle Redis CPU", f"{redis_cpu:.1%}", redis_cpu)
        self.report.emit(
            f"idle with {self.plan.recipients:,} recipients over {window:.0f} s: node1 (worker) "
            f"{node:.1%} of a core  target <= 5 %  {s1}; Redis {redis_cpu:.1%}  target <= 5 %  "
            f"{s2}; node2 (no worker) {shares['node2']:.1%}, anchor {shares['anchor']:.1%} "
            f"[others {shares['others']:.0%}]"
        )
        self.report.emit(
            f"  Redis: {cmd.total:,.1f} commands/s ({cmd.scripts:,.1f} script calls/s, "
            f"{cmd.usec_per_second / 1e4:.2f} % of a core in commands): {cmd.top(10)}"
        )
        self.report.emit(
            "  Redis commands/s by the process that sent them: "
            + ", ".join(f"{name} {rate:,.1f}" for name, rate in by_process.items())
        )
        self.report.emit(
            f"  worker: {upkeeps:.0f} upkeeps run, {audited:,.0f} queues audited "
            f"({audited / window:,.0f}/s) in the window"
        )
        progress(f"idle: sampling what the nodes send ({args.monitor_seconds:g} s MONITOR)")
        sent = await top_level(redis, args.monitor_seconds, servers)
        self.report.results["idle"]["top_level"] = sent
        self.report.emit(
            f"  what the nodes send (MONITOR, after the window): {fmt_top_level(sent)}"
        )
        if args.profile:
            self.report.results["idle"]["profile"] = await profile_process(
                "idle-node1", node1.pid, args.profile_seconds, Path(args.output_dir)
            )

    async def warm_up(self, seconds: float) -> list[float]:
        """Wait, reading node1's stats age every 2 s: the ages seen."""
        progress(f"warm-up {seconds:g} s (stats passes, audit)")
        ages: list[float] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = await node_metrics(self.node1())
            ages.append(found.get("mediator_queue_stats_age_seconds", float("nan")))
            await asyncio.sleep(min(2.0, max(0.0, deadline - time.monotonic())))
        return ages

    # ------------------------------------------------------------------ freshness

    async def phase_freshness(self) -> None:
        """The stats age /metrics reports, and its totals against a full recount."""
        redis = self.servers.redis
        ages = list(self.report.results.get("idle", {}).get("stats_ages_during_warmup", []))
        if not ages:
            ages = await self.warm_up(max(12.0, self.args.idle_warmup))
        found = await node_metrics(self.node1())
        ages.append(found["mediator_queue_stats_age_seconds"])
        progress("freshness: recounting every queue (a full walk)")
        started = time.monotonic()
        counted = await recount(redis, range(keys.SHARDS))
        walk = time.monotonic() - started
        after = await node_metrics(self.node1())
        mismatches = []
        for ns, totals in counted.items():
            shown = self.shown_totals(after, ns)
            expected = {
                "queues": totals.queues,
                "visible": totals.visible,
                "in_flight": totals.in_flight,
                "delayed": totals.delayed,
                "bytes": totals.stored_bytes,
            }
            mismatches += [
                f"{ns} {name}: /metrics {shown_value(shown[name])}, recount {value:,}"
                for name, value in expected.items()
                if shown[name] != value
            ]
        worst = max(a for a in ages if a == a)  # NaN-free
        self.report.results["freshness"] = {
            "stats_ages": ages,
            "max_age": worst,
            "recount_seconds": walk,
            "recount": {ns: self.totals_json(t) for ns, t in counted.items()},
            "metrics": {  # null: not in /metrics
                ns: {k: v if v == v else None for k, v in self.shown_totals(after, ns).items()}
                for ns in keys.NAMESPACES
            },
            "mismatches": mismatches,
        }
        status = self.judge("freshness", "stats age in /metrics", f"{worst:.1f} s", worst)
        equal = "equal to" if not mismatches else "DIFFERENT from"
        self.report.emit(
            f"freshness at {self.plan.recipients:,} recipients: mediator_queue_stats_age_seconds "
            f"at most {worst:.1f} s over {len(ages)} readings  target <= 30 s  {status}; totals "
            f"{equal} a full recount ({walk:.0f} s walk)"
        )
        if mismatches:
            self.report.errors.append(
                "metrics totals differ from the recount: " + "; ".join(mismatches)
            )
            for line in mismatches:
                self.report.emit(f"  {line}")
        self.report.summary.append(
            ("/metrics totals vs recount", "equal" if not mismatches else "DIFFERENT", "equal", "")
        )

    @staticmethod
    def shown_totals(m: dict[str, float], ns: str) -> dict[str, float]:
        """The queue totals /metrics shows for namespace `ns` (NaN: not shown at all)."""
        label = f'queue_namespace="{ns}"'

        def get(name: str) -> float:
            return m.get(name, float("nan"))

        return {
            "queues": get(f"mediator_queues{{{label}}}"),
            "visible": get(f'mediator_queue_messages{{{label},state="visible"}}'),
            "in_flight": get(f'mediator_queue_messages{{{label},state="in_flight"}}'),
            "delayed": get(f'mediator_queue_messages{{{label},state="delayed"}}'),
            "bytes": get(f"mediator_queue_bytes{{{label}}}"),
        }

    @staticmethod
    def totals_json(t: Totals) -> dict[str, Any]:
        return {**t.values, "oldest_ms": t.oldest_ms}

    # ------------------------------------------------------------------ sigterm

    async def phase_sigterm(self) -> None:
        """node1 (worker on, no socket open) from SIGTERM to its exit."""
        node = self.node1()
        assert node.proc is not None
        await asyncio.sleep(2)  # nothing in flight
        proc = node.proc
        started = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        try:
            code: int | None = await asyncio.to_thread(proc.wait, SIGTERM_LIMIT_S)
        except subprocess.TimeoutExpired:
            code = None
            proc.kill()
            self.report.errors.append(
                f"node1 had not exited {SIGTERM_LIMIT_S:.0f} s after SIGTERM (killed); its "
                f"log ends: {node.log_tail(600)!r}"
            )
        seconds = time.perf_counter() - started
        self.report.results["sigterm"] = {"seconds": seconds, "exit_code": code}
        status = self.judge("sigterm", "SIGTERM to exit", f"{seconds:.2f} s", seconds)
        self.report.emit(
            f"SIGTERM to exit of node1 (in-process worker on, no sockets) at "
            f"{self.plan.recipients:,} recipients: {seconds:.2f} s, exit code {code}  "
            f"target <= 3 s  {status}"
        )
        if code not in (0, None):
            self.report.errors.append(f"node1 exited with {code} after SIGTERM")

    # ------------------------------------------------------------------ cluster

    async def phase_cluster(self) -> None:
        """The loader against a three-primary Redis Cluster (support/topology.py): keys and
        bytes per primary."""
        args = self.args
        plan = Plan(args.cluster_recipients, args.share)
        root = Path(tempfile.mkdtemp(prefix="scale-cluster-", dir=self.servers.tmp))
        cluster = await start_cluster(root)
        clients = [
            Redis(host=HOST, port=n.port, decode_responses=False, socket_timeout=600)
            for n in cluster.nodes
        ]
        try:
            for c in clients:
                await load_scripts(c)
            baseline = await primary_memory(clients)
            progress(f"cluster: three primaries at {cluster.url}; loading {plan.recipients:,}")
            made = await load(
                cluster.url,
                plan,
                "recipients",
                processes=args.load_processes,
                report=progress,
                every=args.progress_seconds,
            )
            queued = await load(
                cluster.url,
                plan,
                "messages",
                processes=args.load_processes,
                report=progress,
                every=args.progress_seconds,
            )
            spread = await balance(clients, baseline)
        finally:
            for c in clients:
                await c.aclose()
            await asyncio.to_thread(cluster.stop)
        keys_ratio, bytes_ratio = spread.spread(spread.keys), spread.spread(spread.bytes)
        self.report.results["cluster"] = {
            "recipients": plan.recipients,
            "messages": queued.made,
            "load_seconds": made.seconds + queued.seconds,
            "load_rate": made.rate,
            **spread.to_json(),
        }
        worst = max(keys_ratio, bytes_ratio)
        status = self.judge("balance", "cluster balance max/mean", f"{worst:.3f}", worst)
        self.report.emit(
            f"slot balance on 3 primaries at {plan.recipients:,} recipients (loaded at "
            f"{fmt_rate(made.rate)}/s): keys {', '.join(f'{k:,}' for k in spread.keys)} "
            f"(max/mean {keys_ratio:.3f}), bytes "
            f"{', '.join(f'{b / 1e6:,.1f} MB' for b in spread.bytes)} (max/mean "
            f"{bytes_ratio:.3f}), slots {spread.slots}  target <= 1.2  {status}"
        )

    # ------------------------------------------------------------------ run

    async def run_parts(self) -> None:
        only = self.args.only
        standalone = [p for p in PARTS if p != "cluster" and p in only]
        if standalone or "memory" in only:
            await self.start_redis()
            progress("--- load (memory)")
            await self.phase_load()
        steps = {
            "idle": self.phase_idle,
            "freshness": self.phase_freshness,
            "forwards": self.traffic.phase_forwards,
            "sockets": self.traffic.phase_sockets,
            "live": self.traffic.phase_live,
            "sigterm": self.phase_sigterm,
        }
        for part in standalone:
            progress(f"--- {part}")
            await self.start_nodes()
            await steps[part]()
        if "cluster" in only:
            await self.servers.stop_servers()  # free the CPUs and memory before the load
            progress("--- cluster")
            await self.phase_cluster()

    async def run(self) -> list[str]:
        """The parts, and what the servers logged (read before their folder goes)."""
        await self.run_parts()
        return self.servers.log_problems()

    async def stop(self) -> None:
        await self.servers.stop(self.args.keep_tmp)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.new_parser(
        __doc__ or "", "Method and figures measured: bench/README.md (Scale benchmark)."
    )
    cli.add_plan(parser)
    cli.add_only(
        parser, ("memory", *PARTS), "memory is the load itself, which every part but cluster needs"
    )
    add = parser.add_argument
    add(
        "--quick",
        action="store_true",
        help="smoke run, about a minute and a half: 10,000 recipients (5,000 on the "
        "cluster), 3 s warm-up, 5 s idle windows, 1 round of 1 s forward blocks, 300 "
        "sockets, 5 s of live deliveries",
    )
    add("--load-processes", type=int, default=2, help="loading processes (2: one per CPU)")
    add(
        "--memory-sample",
        type=int,
        default=3000,
        help="recipients whose keys MEMORY USAGE measures for the breakdown (3000)",
    )
    add(
        "--idle-warmup",
        type=float,
        default=30.0,
        help="seconds after the nodes start before the idle window: stats passes and the "
        "audit under way (30)",
    )
    add(
        "--idle-seconds",
        type=float,
        default=60.0,
        help="length of the idle window without sockets (60)",
    )
    add(
        "--sockets-seconds",
        type=float,
        default=Settings().websocket.live_recheck_seconds,
        help="length of the idle window with the sockets: by default one live recheck "
        "interval (MEDIATOR_LIVE_RECHECK_SECONDS, %(default)g), so that each socket's "
        "recheck falls in it about once",
    )
    cli.add_blocks(
        parser,
        seconds_help="forward block length",
        pairs_help="rounds of forward blocks: anchor, 8, distinct",
        warmup_help="forward warm-up blocks",
        connections_help="closed-loop HTTP connections",
    )
    add(
        "--forward-envelopes",
        type=int,
        default=60_000,
        help="forwards packed ahead for the distinct-recipients blocks, each to another "
        "recipient (60000; reused in turn if a run needs more, and then reported)",
    )
    add(
        "--sockets",
        type=int,
        default=19_500,
        help="idle live sockets on node2, at most what its open-files limit leaves (19500)",
    )
    add(
        "--sockets-per-process",
        type=int,
        default=9_000,
        help="sockets each client process holds (9000; the limit is 20,000 open files)",
    )
    add("--live-rate", type=float, default=100.0, help="forwards/s of the live phase (100)")
    add("--live-seconds", type=float, default=30.0, help="length of the live phase (30)")
    add("--live-recipients", type=int, default=4, help="live sockets of the live phase (4)")
    add(
        "--cluster-recipients",
        type=int,
        default=0,
        help="recipients loaded into the cluster (default: --recipients)",
    )
    add("--progress-seconds", type=float, default=10.0, help="progress line interval (10)")
    add(
        "--monitor-seconds",
        type=float,
        default=10.0,
        help="after each idle window, seconds of MONITOR that show what each node sends (10)",
    )
    cli.add_profile(
        parser,
        "py-spy, summed by library: on node1 after the idle window, on node2 after the "
        "sockets' window, on node1 during one more forward block of each side, and on node2 "
        "during more live deliveries after the measured ones",
    )
    add("--profile-seconds", type=float, default=20.0, help="length of each profile (20)")
    cli.add_run(parser, "scale")
    args = parser.parse_args(argv)
    if args.quick:
        args.recipients, args.cluster_recipients = 10_000, args.cluster_recipients or 5_000
        args.idle_warmup, args.idle_seconds, args.sockets_seconds = 3.0, 5.0, 5.0
        args.seconds, args.pairs, args.warmup = 1.0, 1, 0.5
        args.forward_envelopes, args.sockets, args.live_seconds = 6_000, 300, 5.0
        args.memory_sample, args.progress_seconds = 1000, 5.0
        args.monitor_seconds, args.profile_seconds = 3.0, 5.0
    args.cluster_recipients = args.cluster_recipients or args.recipients
    args.only = cli.parse_only(parser, args.only, ("memory", *PARTS))
    cli.check_plan(parser, args)
    cli.check_blocks(parser, args)
    if not (1 <= args.load_processes <= 16 and 1 <= args.sockets_per_process <= 19_500):
        parser.error("--load-processes must be 1..16, --sockets-per-process 1..19500")
    reserved = args.sockets + 8 * (args.pairs + 1) + args.live_recipients
    # The sockets' recipients come first in the plan, then the forwards' and the live ones.
    if {"sockets", "forwards", "live"} & set(args.only) and reserved > args.recipients:
        parser.error(
            f"--recipients must be at least {reserved} for --sockets {args.sockets} and "
            f"--live-recipients {args.live_recipients} (lower --sockets for a small run)"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return long_main(
        lambda: ScaleBench(args),
        "scale",
        args,
        sorted(args.only),
        RUN_TIMEOUT_S,
        mediator_key_seed=MEDIATOR_SEED,
    )
