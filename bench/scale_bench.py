"""Scale benchmark: a node's cost at a million recipients, in one run.

It loads N DIDComm recipients (default 1,000,000) with bench/bulk_load.py, through the
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

Each figure is printed with its target and the anchor measured in the same run; results
go to bench/results/scale-<timestamp>.json. The exit status is 0 when it ran, even with
targets missed (the line says MISSED), non-zero when something failed. bench/README.md
describes the method.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mqs_bench
import profiling
from bulk_load import MEDIATOR_SEED, Plan, load
from cluster_probes import CpuMeter
from loadgen import Connection, build_request
from mqs_bench import (
    HOST,
    Bench,
    BenchError,
    Proc,
    fmt_rate,
    pinned,
    progress,
    run_guarded,
    run_main,
    run_report,
)
from redis.asyncio import Redis
from scale_redis import (
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
from scale_traffic import TrafficWorkloads

from mediator.embedded import EmbeddedServer, free_port
from mediator.engine import keys
from mediator.engine.books import Totals, recount
from mediator.settings import Settings

PARTS = ("idle", "freshness", "forwards", "sockets", "live", "sigterm", "cluster")
RUN_TIMEOUT_S = 3 * 3600
SIGTERM_LIMIT_S = 60.0
TARGETS: dict[str, tuple[str, float, str]] = {  # name -> (kind, value, as printed)
    "bytes_per_recipient": ("<=", 512, "<= 512 B"),
    "bytes_per_message": ("<=", 1536, "<= 1,536 B"),
    "idle_node_cpu": ("<=", 0.05, "<= 5 %"),
    "idle_redis_cpu": ("<=", 0.05, "<= 5 %"),
    "freshness": ("<=", 30.0, "<= 30 s"),
    "forward_distinct_vs_8": (">=", 0.9, ">= 0.9x"),
    "forward_p99_vs_8": ("<=", 1.2, "<= 1.2x"),
    "forward_vs_anchor": (">=", 0.5, ">= 0.5x"),
    "socket_rss": ("<=", 30_000, "<= 30 KB"),
    "socket_node_cpu": ("<=", 0.10, "<= 10 %"),
    "socket_redis_cmds": ("<=", 1000, "<= 1,000/s"),
    "live_cpu_ms": ("<=", 0.4, "<= 0.4 ms"),
    "sigterm": ("<=", 3.0, "<= 3 s"),
    "balance": ("<=", 1.2, "<= 1.2"),
}


def verdict(name: str, value: float) -> str:
    kind, goal, _ = TARGETS[name]
    ok = value >= goal if kind == ">=" else value <= goal
    return "OK" if ok else "MISSED"


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text as `name{labels}` -> value."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                out[name] = float(value)
    return out


class ScaleBench(TrafficWorkloads, Bench):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.plan = Plan(args.recipients, args.share)
        self.started_nodes = False

    # ------------------------------------------------------------------ servers

    @property
    def base(self) -> str:
        assert self.node1 is not None
        return f"http://{HOST}:{self.node1.port}"

    async def start_redis(self) -> None:
        """The embedded server (AOF everysec, noeviction) in a temporary folder, pinned
        with the load generator."""
        self.decide_pinning()
        progress(f"pinning: {self.pinning.note}")
        self.server = EmbeddedServer(self.tmp / "redis", lock=False)
        self.server.start()
        assert self.server.process is not None
        self.redis_pid = self.server.process.pid
        self.redis_url = self.server.url
        if self.pinning.used:
            pin = await asyncio.create_subprocess_exec(
                *["taskset", "-a", "-cp", str(self.pinning.load_cpu), str(self.redis_pid)],
                stdout=asyncio.subprocess.DEVNULL,
            )
            if await asyncio.wait_for(pin.wait(), 10) != 0:
                raise BenchError("taskset could not pin the Redis server")
        self.redis = Redis.from_url(
            self.redis_url, decode_responses=False, socket_timeout=600, client_name="bench-ctl"
        )
        await self.redis.ping()
        progress(f"embedded server {self.server.binary} at {self.redis_url}")

    async def start_nodes(self) -> None:
        """node1 (in-process worker) and node2 (none), both with the loader's mediator
        key, and the anchor, all on the server CPU."""
        if self.started_nodes:
            return
        cpu = self.pinning.server_cpu
        self.node1 = self.node_proc("node1", True, cpu)
        self.node2 = self.node_proc("node2", False, cpu)
        for node in (self.node1, self.node2):
            node.env["MEDIATOR_KEY_SEED"] = self.plan.mediator_seed
        port = free_port()
        argv = [sys.executable, str(mqs_bench.BENCH_DIR / "anchor_app.py"), "--port", str(port)]
        argv += ["--redis-url", self.redis_url]
        self.anchor = Proc("anchor", pinned(argv, cpu), mqs_bench._base_env(), self.tmp, port)
        started = time.monotonic()
        for p in (self.node1, self.node2, self.anchor):
            p.start()
            self.procs.append(p)
        await asyncio.gather(
            *(p.wait_ready("/readyz", 120) for p in (self.node1, self.node2, self.anchor))
        )
        self.started_nodes = True
        progress(
            f"node1 :{self.node1.port} (pid {self.node1.pid}, worker), node2 "
            f":{self.node2.port} (pid {self.node2.pid}), anchor :{port} ready in "
            f"{time.monotonic() - started:.1f} s"
        )

    async def metrics(self, proc: Proc | None = None) -> dict[str, float]:
        node = proc or self.node1
        assert node is not None
        conn = await Connection(HOST, node.port, timeout=60).open()
        try:
            answer = await conn.request(build_request("GET", "/metrics"))
        finally:
            await conn.close()
        if answer.status != 200:
            raise BenchError(f"GET /metrics answered {answer.status}")
        return parse_metrics(answer.body.decode())

    def emit(self, line: str) -> None:
        self.lines.append(line)
        print(line, flush=True)

    def judge(self, name: str, label: str, shown: str, value: float) -> str:
        """The verdict on a figure, added to the summary and the JSON."""
        status = verdict(name, value)
        self.summary.append((label, shown, TARGETS[name][2], status))
        self.results.setdefault("verdicts", {})[name] = status
        return status

    # ------------------------------------------------------------------ memory

    async def phase_load(self) -> None:
        """Recipients, then their messages, each with used_memory before and after."""
        assert self.redis is not None
        plan, args = self.plan, self.args
        await load_scripts(self.redis)
        before = await used_memory(self.redis)
        made = await load(
            self.redis_url,
            plan,
            "recipients",
            processes=args.load_processes,
            report=progress,
            every=args.progress_seconds,
        )
        progress(f"{made.items:,} recipients in {made.seconds:.0f} s ({fmt_rate(made.rate)}/s)")
        idle = await used_memory(self.redis)
        queued = await load(
            self.redis_url,
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
        full = await used_memory(self.redis)
        per_recipient = (idle["used_memory"] - before["used_memory"]) / plan.recipients
        per_message = (full["used_memory"] - idle["used_memory"]) / max(queued.made, 1)
        progress("memory by key shape (MEMORY USAGE)")
        found = await shapes(self.redis, plan, args.memory_sample)
        self.results["load"] = {
            "recipients": {**asdict(made), "rate": made.rate},
            "messages": {**asdict(queued), "rate": queued.rate},
            "used_memory": {"before": before, "recipients": idle, "messages": full},
        }
        self.results["memory"] = {
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
        self.emit(
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
        self.emit(
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
        self.emit(f"  per {per_what}, by key shape (MEMORY USAGE):")
        for s in rows:
            self.emit(
                f"    {s.name:<44} {s.bytes / max(count, 1):8,.1f} B   "
                f"({s.keys:,} keys, {s.sampled:,} measured)"
            )
        self.emit(f"    {'sum':<44} {total:8,.1f} B")
        self.emit(
            f"    {'rest of used_memory (keyspace, allocator)':<44} {measured - total:8,.1f} B"
        )

    # ------------------------------------------------------------------ idle

    async def phase_idle(self) -> None:
        """Warm-up (the first stats pass, the audit under way), then `--idle-seconds`
        with no traffic: CPU of node1, node2 and Redis, Redis commands by command."""
        assert self.redis is not None and self.node1 is not None and self.node2 is not None
        args = self.args
        ages = await self.warm_up(args.idle_warmup)
        m0 = await self.metrics()
        servers = {p.name: p.pid for p in self.procs if p.running}
        p0 = await client_commands(self.redis, servers)
        c0 = await commands(self.redis)
        meter = CpuMeter(self.cpu_pids())
        progress(f"idle: measuring {args.idle_seconds:g} s with no traffic")
        await asyncio.sleep(args.idle_seconds)
        shares = meter.shares()
        window = time.perf_counter() - meter.start[0]
        c1 = await commands(self.redis)
        by_process = process_rates(p0, await client_commands(self.redis, servers), window)
        m1 = await self.metrics()
        cmd = rates(c0, c1, window)
        upkeeps = m1.get("mediator_worker_upkeeps_total", 0) - m0.get(
            "mediator_worker_upkeeps_total", 0
        )
        audited = m1.get("mediator_worker_audited_queues_total", 0) - m0.get(
            "mediator_worker_audited_queues_total", 0
        )
        self.results["idle"] = {
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
        self.emit(
            f"idle with {self.plan.recipients:,} recipients over {window:.0f} s: node1 (worker) "
            f"{node:.1%} of a core  target <= 5 %  {s1}; Redis {redis_cpu:.1%}  target <= 5 %  "
            f"{s2}; node2 (no worker) {shares['node2']:.1%}, anchor {shares['anchor']:.1%} "
            f"[others {shares['others']:.0%}]"
        )
        self.emit(
            f"  Redis: {cmd.total:,.1f} commands/s ({cmd.scripts:,.1f} script calls/s, "
            f"{cmd.usec_per_second / 1e4:.2f} % of a core in commands): {cmd.top(10)}"
        )
        self.emit(
            "  Redis commands/s by the process that sent them: "
            + ", ".join(f"{name} {rate:,.1f}" for name, rate in by_process.items())
        )
        self.emit(
            f"  worker: {upkeeps:.0f} upkeeps run, {audited:,.0f} queues audited "
            f"({audited / window:,.0f}/s) in the window"
        )
        progress(f"idle: sampling what the nodes send ({args.monitor_seconds:g} s MONITOR)")
        sent = await top_level(self.redis, args.monitor_seconds, servers)
        self.results["idle"]["top_level"] = sent
        self.emit(f"  what the nodes send (MONITOR, after the window): {fmt_top_level(sent)}")
        if args.profile:
            self.results["idle"]["profile"] = await self.profile("idle-node1", self.node1.pid)

    async def profile(self, name: str, pid: int) -> dict[str, Any]:
        """py-spy on a process for --profile-seconds (outside any measured window),
        summed by library."""
        py_spy = profiling.find_py_spy()
        if py_spy is None:
            progress("profile: py-spy not found (pip install py-spy); skipped")
            return {}
        seconds = self.args.profile_seconds
        out = Path(self.args.output_dir) / (
            f"profile-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{name}.folded"
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        progress(f"profile: py-spy on {name} for {seconds:g} s")
        spy = await asyncio.create_subprocess_exec(
            *[py_spy, "record", "--pid", str(pid), "--rate", "200", "--nonblocking"],
            *["--duration", str(round(seconds)), "--format", "raw", "--output", str(out)],
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await spy.communicate()
        if spy.returncode != 0 or not out.exists():
            progress(f"profile {name} failed: {err.decode(errors='replace')[-300:]}")
            return {"error": err.decode(errors="replace")[-300:]}
        summary = profiling.summarise(out)
        summary["file"] = str(out)
        print(profiling.format_summary(name, summary), flush=True)
        return summary

    def cpu_pids(self) -> dict[str, int]:
        pids = {p.name: p.pid for p in self.procs if p.running}
        if self.redis_pid:
            pids["redis"] = self.redis_pid
        return pids

    async def warm_up(self, seconds: float) -> list[float]:
        """Wait, reading node1's stats age every 2 s: the ages seen."""
        progress(f"warm-up {seconds:g} s (stats passes, audit)")
        ages: list[float] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = await self.metrics()
            ages.append(found.get("mediator_queue_stats_age_seconds", float("nan")))
            await asyncio.sleep(min(2.0, max(0.0, deadline - time.monotonic())))
        return ages

    # ------------------------------------------------------------------ freshness

    async def phase_freshness(self) -> None:
        """The stats age /metrics reports, and its totals against a full recount."""
        assert self.redis is not None
        ages = list(self.results.get("idle", {}).get("stats_ages_during_warmup", []))
        if not ages:
            ages = await self.warm_up(max(12.0, self.args.idle_warmup))
        found = await self.metrics()
        ages.append(found["mediator_queue_stats_age_seconds"])
        progress("freshness: recounting every queue (a full walk)")
        started = time.monotonic()
        counted = await recount(self.redis, range(keys.SHARDS))
        walk = time.monotonic() - started
        after = await self.metrics()
        mismatches = []
        for ns, totals in counted.items():
            shown = self.shown_totals(after, ns)
            expected = {
                "queues": totals.values["q"],
                "visible": totals.visible,
                "in_flight": totals.values["fl"],
                "delayed": totals.values["d"],
                "bytes": totals.values["b"],
            }
            mismatches += [
                f"{ns} {name}: /metrics {shown[name]:,.0f}, recount {value:,}"
                for name, value in expected.items()
                if shown[name] != value
            ]
        worst = max(a for a in ages if a == a)  # NaN-free
        self.results["freshness"] = {
            "stats_ages": ages,
            "max_age": worst,
            "recount_seconds": walk,
            "recount": {ns: self.totals_json(t) for ns, t in counted.items()},
            "metrics": {ns: self.shown_totals(after, ns) for ns in keys.NAMESPACES},
            "mismatches": mismatches,
        }
        status = self.judge("freshness", "stats age in /metrics", f"{worst:.1f} s", worst)
        equal = "equal to" if not mismatches else "DIFFERENT from"
        self.emit(
            f"freshness at {self.plan.recipients:,} recipients: mediator_queue_stats_age_seconds "
            f"at most {worst:.1f} s over {len(ages)} readings  target <= 30 s  {status}; totals "
            f"{equal} a full recount ({walk:.0f} s walk)"
        )
        if mismatches:
            self.errors.append("metrics totals differ from the recount: " + "; ".join(mismatches))
            for line in mismatches:
                self.emit(f"  {line}")
        self.summary.append(
            ("/metrics totals vs recount", "equal" if not mismatches else "DIFFERENT", "equal", "")
        )

    @staticmethod
    def shown_totals(m: dict[str, float], ns: str) -> dict[str, float]:
        def get(name: str) -> float:
            return m.get(name, 0.0)

        return {
            "queues": get(f'mediator_queues{{namespace="{ns}"}}'),
            "visible": get(f'mediator_queue_messages{{namespace="{ns}",state="visible"}}'),
            "in_flight": get(f'mediator_queue_messages{{namespace="{ns}",state="in_flight"}}'),
            "delayed": get(f'mediator_queue_messages{{namespace="{ns}",state="delayed"}}'),
            "bytes": get(f'mediator_queue_bytes{{namespace="{ns}"}}'),
        }

    @staticmethod
    def totals_json(t: Totals) -> dict[str, Any]:
        return {**t.values, "oldest_ms": t.oldest_ms}

    # ------------------------------------------------------------------ sigterm

    async def phase_sigterm(self) -> None:
        """node1 (worker on, no socket open) from SIGTERM to its exit."""
        node = self.node1
        assert node is not None and node.proc is not None
        await asyncio.sleep(2)  # nothing in flight
        proc = node.proc
        started = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        try:
            code: int | None = await asyncio.to_thread(proc.wait, SIGTERM_LIMIT_S)
        except subprocess.TimeoutExpired:
            code = None
            proc.kill()
            self.errors.append(
                f"node1 had not exited {SIGTERM_LIMIT_S:.0f} s after SIGTERM (killed); its "
                f"log ends: {node.log_tail(600)!r}"
            )
        seconds = time.perf_counter() - started
        self.results["sigterm"] = {"seconds": seconds, "exit_code": code}
        status = self.judge("sigterm", "SIGTERM to exit", f"{seconds:.2f} s", seconds)
        self.emit(
            f"SIGTERM to exit of node1 (in-process worker on, no sockets) at "
            f"{self.plan.recipients:,} recipients: {seconds:.2f} s, exit code {code}  "
            f"target <= 3 s  {status}"
        )
        if code not in (0, None):
            self.errors.append(f"node1 exited with {code} after SIGTERM")

    # ------------------------------------------------------------------ cluster

    async def phase_cluster(self) -> None:
        """The loader against a three-primary Redis Cluster (tests/topologies.py): keys and
        bytes per primary."""
        sys.path.insert(0, str(mqs_bench.BENCH_DIR.parent))
        from tests.topologies import LocalCluster

        args = self.args
        plan = Plan(args.cluster_recipients, args.share)
        root = Path(tempfile.mkdtemp(prefix="scale-cluster-", dir=self.tmp))
        cluster = LocalCluster(root)
        await asyncio.to_thread(cluster.start)
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
        self.results["cluster"] = {
            "recipients": plan.recipients,
            "messages": queued.made,
            "load_seconds": made.seconds + queued.seconds,
            "load_rate": made.rate,
            **spread.to_json(),
        }
        worst = max(keys_ratio, bytes_ratio)
        status = self.judge("balance", "cluster balance max/mean", f"{worst:.3f}", worst)
        self.emit(
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
            "forwards": self.phase_forwards,
            "sockets": self.phase_sockets,
            "live": self.phase_live,
            "sigterm": self.phase_sigterm,
        }
        for part in standalone:
            progress(f"--- {part}")
            await self.start_nodes()
            await steps[part]()
        if "cluster" in only:
            await self.stop_standalone()
            progress("--- cluster")
            await self.phase_cluster()

    async def stop_standalone(self) -> None:
        """Free the CPUs and memory before the cluster loads."""
        for p in self.procs:
            p.stop()
        if self.redis is not None:
            with contextlib.suppress(Exception):
                await self.redis.aclose()
            self.redis = None
        if self.server is not None:
            self.server.stop()
            self.server = None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Method and figures measured: bench/README.md (Scale benchmark).",
    )
    parser.add_argument(
        "--recipients", type=int, default=1_000_000, help="recipients loaded (1000000)"
    )
    parser.add_argument(
        "--share",
        type=float,
        default=0.1,
        help="share of recipients with 1-5 queued 1 KiB messages (0.1)",
    )
    parser.add_argument(
        "--only",
        default=",".join(("memory", *PARTS)),
        help="comma-separated parts (default all: memory," + ",".join(PARTS) + "); memory "
        "is the load itself, which every part but cluster needs",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run, about a minute and a half: 10,000 recipients (5,000 on the "
        "cluster), 3 s warm-up, 5 s idle windows, 1 round of 1 s forward blocks, 300 "
        "sockets, 5 s of live deliveries",
    )
    parser.add_argument(
        "--load-processes", type=int, default=2, help="loading processes (2: one per CPU)"
    )
    parser.add_argument(
        "--memory-sample",
        type=int,
        default=3000,
        help="recipients whose keys MEMORY USAGE measures for the breakdown (3000)",
    )
    parser.add_argument(
        "--idle-warmup",
        type=float,
        default=30.0,
        help="seconds after the nodes start before the idle window: stats passes and the "
        "audit under way (30)",
    )
    parser.add_argument(
        "--idle-seconds",
        type=float,
        default=60.0,
        help="length of the idle window without sockets (60)",
    )
    parser.add_argument(
        "--sockets-seconds",
        type=float,
        default=Settings().live_recheck_seconds,
        help="length of the idle window with the sockets: by default one live recheck "
        "interval (MEDIATOR_LIVE_RECHECK_SECONDS, %(default)g), so that each socket's "
        "recheck falls in it about once",
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="forward block length (4)")
    parser.add_argument(
        "--pairs", type=int, default=3, help="rounds of forward blocks: anchor, 8, distinct (3)"
    )
    parser.add_argument("--warmup", type=float, default=2.0, help="forward warm-up blocks (2)")
    parser.add_argument(
        "--pause", type=float, default=0.3, help="idle seconds between blocks (0.3)"
    )
    parser.add_argument(
        "--connections", type=int, default=32, help="closed-loop HTTP connections (32)"
    )
    parser.add_argument(
        "--forward-envelopes",
        type=int,
        default=60_000,
        help="forwards packed ahead for the distinct-recipients blocks, each to another "
        "recipient (60000; reused in turn if a run needs more, and then reported)",
    )
    parser.add_argument(
        "--sockets",
        type=int,
        default=19_500,
        help="idle live sockets on node2, at most what its open-files limit leaves (19500)",
    )
    parser.add_argument(
        "--sockets-per-process",
        type=int,
        default=9_000,
        help="sockets each client process holds (9000; the limit is 20,000 open files)",
    )
    parser.add_argument(
        "--live-rate", type=float, default=100.0, help="forwards/s of the live phase (100)"
    )
    parser.add_argument(
        "--live-seconds", type=float, default=30.0, help="length of the live phase (30)"
    )
    parser.add_argument(
        "--live-recipients", type=int, default=4, help="live sockets of the live phase (4)"
    )
    parser.add_argument(
        "--cluster-recipients",
        type=int,
        default=0,
        help="recipients loaded into the cluster (default: --recipients)",
    )
    parser.add_argument(
        "--progress-seconds", type=float, default=10.0, help="progress line interval (10)"
    )
    parser.add_argument(
        "--monitor-seconds",
        type=float,
        default=10.0,
        help="after each idle window, seconds of MONITOR that show what each node sends (10)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="py-spy, summed by library: on node1 after the idle window, on node2 after the "
        "sockets' window, on node1 during one more forward block of each side, and on node2 "
        "during more live deliveries after the measured ones",
    )
    parser.add_argument(
        "--profile-seconds", type=float, default=20.0, help="length of each profile (20)"
    )
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    parser.add_argument("--keep-tmp", action="store_true", help="keep logs and Redis data")
    parser.add_argument(
        "--output-dir",
        default=str(mqs_bench.BENCH_DIR / "results"),
        help="where scale-<timestamp>.json goes (bench/results)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.recipients, args.cluster_recipients = 10_000, args.cluster_recipients or 5_000
        args.idle_warmup, args.idle_seconds, args.sockets_seconds = 3.0, 5.0, 5.0
        args.seconds, args.pairs, args.warmup = 1.0, 1, 0.5
        args.forward_envelopes, args.sockets, args.live_seconds = 6_000, 300, 5.0
        args.memory_sample, args.progress_seconds = 1000, 5.0
        args.monitor_seconds, args.profile_seconds = 3.0, 5.0
    args.cluster_recipients = args.cluster_recipients or args.recipients
    only = {w.strip() for w in args.only.split(",") if w.strip()}
    if only - {"memory", *PARTS}:
        parser.error(f"unknown parts {sorted(only - {'memory', *PARTS})}")
    args.only = only
    if not (100 <= args.recipients <= 10_000_000 and 0 <= args.share <= 1):
        parser.error("--recipients must be 100..10000000 and --share 0..1")
    if not (1 <= args.load_processes <= 16 and 1 <= args.sockets_per_process <= 19_500):
        parser.error("--load-processes must be 1..16, --sockets-per-process 1..19500")
    reserved = args.sockets + 8 * (args.pairs + 1) + args.live_recipients
    if "sockets" in only and reserved > args.recipients:
        parser.error(f"--recipients must be at least {reserved} for these sockets")
    args.redis_url = ""  # what the mqs machinery reads
    return args


async def amain(args: argparse.Namespace) -> tuple[ScaleBench, dict[str, Any]]:
    bench = ScaleBench(args)
    started, loadavg = datetime.now(UTC), os.getloadavg()
    progress(
        f"scale run: {args.recipients:,} recipients, parts {sorted(args.only)}; load "
        f"average {loadavg[0]:.2f} ({os.cpu_count()} CPUs)"
    )
    await run_guarded(bench, bench.run_parts(), RUN_TIMEOUT_S)
    return bench, run_report(bench, "scale", started, loadavg, mediator_key_seed=MEDIATOR_SEED)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_main(lambda: asyncio.run(amain(args)), "scale", (BenchError, RuntimeError))


if __name__ == "__main__":
    sys.exit(main())
