"""Capacity benchmark: what the capacity jobs (spark/) cost and how fast they are, on the
scale benchmark's data set.

It loads N DIDComm recipients (default 1,000,000; a share of them with 1-5 queued 1 KiB
messages) with bench/bulk_load.py, as bench/scale_bench.py does, or uses a Redis already
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

Each figure is printed with its target and what it is measured against in the same run;
results go to bench/results/capacity-<timestamp>.json. The exit status is 0 when it ran,
even with targets missed (the line says MISSED), 1 when errors happened during the run, 2
when it could not run. bench/README.md describes the method.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import random
import re
import secrets
import shutil
import signal
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import redis
from bulk_load import MEDIATOR_SEED, load
from loadgen import check_loopback, proc_cpu_seconds
from mqs_bench import (
    BenchError,
    Block,
    Side,
    _base_env,
    _die_with_parent,
    _dist,
    fmt_rate,
    met,
    percentile,
    progress,
    run_guarded,
    run_main,
    run_report,
)
from redis.asyncio import Redis
from scale_bench import ScaleBench
from scale_clients import pack_forwards
from scale_redis import rewrite_aof

from mediator.engine import keys
from spark.cli import snapshot_command
from spark.tables.cluster import CLUSTER
from spark.tables.columns import Table
from spark.tables.mailboxes import MAILBOXES
from spark.tables.servers import SERVERS

PARTS = ("anchor", "snapshot", "rate", "live", "report")
RUN_TIMEOUT_S = 3 * 3600
JOB_LIMIT_S = 2 * 3600  # one snapshot or report subprocess
SCAN_COUNT = 1000
SAMPLE_S = 0.5  # Redis and process-tree readings during a job
CLK = os.sysconf("SC_CLK_TCK")
# The snapshot's default command budget per partition, as its CLI has it.
DEFAULT_RATE = float(
    str(next(p.default for p in snapshot_command.params if p.name == "max_commands_per_second"))
)
PHASE = re.compile(r"^\[snapshot\s+[\d.]+s\] (?P<text>.*)$")
READING = f"reading {keys.SHARDS} shards"
SUMMARY = re.compile(
    r"snapshot (?P<id>\S+): (?P<rows>[\d,]+) mailboxes, (?P<bytes>[\d,]+) bytes written, "
    r"(?P<seconds>[\d.]+) s, (?P<commands>[\d,]+) commands in (?P<partitions>\d+) partitions, "
    r"highest rate (?P<peak>[\d,]+) commands/s in a partition"
)
REPORT_LINE = re.compile(r"report: (?P<html>.+) \((?P<bytes>[\d,]+) bytes\), (?P<summary>\S+)")
TARGETS: dict[str, tuple[str, float, str]] = {  # name -> (kind, value, as printed)
    "snapshot_vs_anchor": (">=", 1.0, ">= 1.0x"),
    "live_during_vs_without": (">=", 0.8, ">= 0.8x"),
}
GROWN = ("used_memory", "used_memory_peak", "used_memory_rss")  # servers' columns that grow


# --------------------------------------------------------------------------- processes


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK


class TreeCpu:
    """CPU seconds of a process and its descendants (the JVM, Spark's Python workers), from
    readings: a process keeps its last reading once it is gone, so one that lives less
    than a reading interval is missed."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.seen: dict[int, float] = {}

    def read(self) -> float:
        stats = {pid: s for pid in _pids() if (s := _stat(pid)) is not None}
        children: dict[int, list[int]] = {}
        for pid, (parent, _) in stats.items():
            children.setdefault(parent, []).append(pid)
        todo = [self.root]
        while todo:
            pid = todo.pop()
            if pid in stats:
                self.seen[pid] = stats[pid][1]
            todo += children.get(pid, [])
        return sum(self.seen.values())


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _on_cpus(argv: list[str], cpus: list[int] | None) -> list[str]:
    return argv if cpus is None else ["taskset", "-c", ",".join(map(str, cpus)), *argv]


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _number(text: str) -> int:
    return int(text.replace(",", ""))


class JobRun:
    """One `mediator capacity snapshot|report` subprocess (in a session of its own, so
    that stopping it stops its JVM and workers): its phase lines as they come, with their
    times, its output, and its process tree's CPU."""

    def __init__(
        self, label: str, argv: list[str], env: dict[str, str], out: Path | None = None
    ) -> None:
        self.label, self.argv, self.env, self.out = label, argv, env, out
        self.proc: asyncio.subprocess.Process | None = None
        self.started = self.ended = 0.0
        self.phases: list[tuple[float, str]] = []  # (monotonic time, phase line)
        self.tasks_at: float | None = None  # Spark's first stage progress after READING
        self.stdout = ""
        self.tail = ""  # the rest of stderr, without progress bars, for errors
        self.stopped = False
        self.cpu = 0.0
        self._tree: TreeCpu | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._reading = asyncio.Event()

    async def start(self) -> JobRun:
        self.started = time.monotonic()
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        self._tree = TreeCpu(self.proc.pid)
        self._tasks = [
            asyncio.create_task(self._read_stderr()),
            asyncio.create_task(self._read_stdout()),
            asyncio.create_task(self._sample_cpu()),
        ]
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def phase_at(self, text: str) -> float | None:
        return next((t for t, line in self.phases if text in line), None)

    @property
    def reading_window(self) -> tuple[float, float]:
        """From the partitions' first reads (Spark's first stage) to the end of reading."""
        start = self.tasks_at or self.phase_at(READING) or self.started
        end = self.phase_at("writing the history") or self.ended or time.monotonic()
        return start, end

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        pending = b""
        while chunk := await self.proc.stderr.read(65536):
            *lines, pending = re.split(rb"[\r\n]", pending + chunk)
            for line in lines:
                self._take(line.decode(errors="replace").strip())
        self._take(pending.decode(errors="replace").strip())
        self._reading.set()

    def _take(self, line: str) -> None:
        now = time.monotonic()
        if found := PHASE.match(line):
            self.phases.append((now, found["text"]))
        elif line.startswith("[Stage"):
            if self.tasks_at is None and self.phase_at(READING) is not None:
                self.tasks_at = now
                self._reading.set()
        elif line:
            self.tail = (self.tail + "\n" + line)[-4000:]

    async def _read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        self.stdout = (await self.proc.stdout.read()).decode(errors="replace")

    async def _sample_cpu(self) -> None:
        assert self.proc is not None and self._tree is not None
        while self.proc.returncode is None:
            self.cpu = self._tree.read()
            await asyncio.sleep(SAMPLE_S)

    async def reading(self, limit: float) -> bool:
        """Wait until its partitions read (Spark's first stage runs after the READING phase
        line), or it ended: True when it reads."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._reading.wait(), limit)
        return self.tasks_at is not None and self.running

    async def wait(self, limit: float = JOB_LIMIT_S) -> int:
        assert self.proc is not None
        try:
            code = await asyncio.wait_for(self.proc.wait(), limit)
        except TimeoutError:
            await self.stop()
            raise BenchError(f"{self.label} did not finish in {limit:.0f} s") from None
        self.ended = self.ended or time.monotonic()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        assert self._tree is not None
        self.cpu = max(self.cpu, self._tree.read())
        return code

    async def stop(self) -> None:
        """SIGTERM to its session (the JVM and the workers too), SIGKILL after 15 s."""
        if self.proc is None or self.proc.returncode is not None:
            return
        self.stopped, self.ended = True, time.monotonic()
        for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), grace)
                break
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def summary(self) -> dict[str, Any]:
        """The snapshot's summary line, parsed."""
        found = SUMMARY.search(self.stdout)
        if found is None:
            raise BenchError(f"{self.label}: no summary line in {self.stdout[-500:]!r}")
        out: dict[str, Any] = {"snapshot_id": found["id"], "job_seconds": float(found["seconds"])}
        for name in ("rows", "bytes", "commands", "partitions", "peak"):
            out[name] = _number(found[name])
        return out

    def timeline(self) -> dict[str, Any]:
        """When the phases came, in seconds from the start."""
        rel = {text: round(t - self.started, 2) for t, text in self.phases}
        start, end = self.reading_window
        return {
            "phases": rel,
            "tasks_started": None
            if self.tasks_at is None
            else round(self.tasks_at - self.started, 2),
            "reading_seconds": round(end - start, 2),
            "wall_seconds": round((self.ended or time.monotonic()) - self.started, 2),
            "cpu_seconds": round(self.cpu, 2),
        }


# --------------------------------------------------------------------------- Redis's load


@dataclass
class Reading:
    at: float
    commands: int  # total_commands_processed
    ops: int  # instantaneous_ops_per_sec
    cpu: float  # the server's CPU seconds


@dataclass
class RedisLoad:
    """Readings of Redis every SAMPLE_S, to give its load over any window."""

    client: Redis
    pid: int | None
    readings: list[Reading] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    async def read(self) -> Reading:
        info = await self.client.info()
        cpu = float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
        if self.pid:
            with contextlib.suppress(OSError):
                cpu = proc_cpu_seconds(self.pid)
        return Reading(
            time.monotonic(),
            int(info["total_commands_processed"]),
            int(info["instantaneous_ops_per_sec"]),
            cpu,
        )

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            self.readings.append(await self.read())
            await asyncio.sleep(SAMPLE_S)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.readings.append(await self.read())

    def window(self, start: float, end: float) -> dict[str, float]:
        """Commands/s, instantaneous ops/s (median, max) and CPU share between two times."""
        inside = [r for r in self.readings if start <= r.at <= end]
        if len(inside) < 2:
            return {
                "seconds": 0.0,
                "commands_per_second": float("nan"),
                "ops_median": 0.0,
                "ops_max": 0.0,
                "cpu": float("nan"),
            }
        a, b = inside[0], inside[-1]
        span = b.at - a.at
        ops = [r.ops for r in inside[1:]]
        return {
            "seconds": round(span, 2),
            "commands_per_second": (b.commands - a.commands) / span,
            "ops_median": float(statistics.median(ops)),
            "ops_max": float(max(ops)),
            "cpu": (b.cpu - a.cpu) / span,
        }


# --------------------------------------------------------------------------- the anchor


@dataclass
class Walk:
    keys: int
    pages: int
    seconds: float
    memory_bytes: int
    missing: int  # keys gone between SCAN and MEMORY USAGE

    @property
    def rate(self) -> float:
        return self.keys / self.seconds if self.seconds > 0 else 0.0


def walk(url: str, cpus: list[int]) -> Walk:
    """SCAN every key, MEMORY USAGE each, pipelined per page: one process, one connection
    (on every CPU, as the snapshot is)."""
    own = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)  # this thread only
    client = redis.Redis.from_url(url, socket_timeout=600, client_name="bench-anchor")
    try:
        return _walk(client)
    finally:
        client.close()
        os.sched_setaffinity(0, own)


def _walk(client: redis.Redis) -> Walk:
    found = pages = total = missing = 0
    started = time.perf_counter()
    cursor = 0
    while True:
        cursor, names = client.scan(cursor, count=SCAN_COUNT)
        pages += 1
        if names:
            pipe = client.pipeline(transaction=False)
            for name in names:
                pipe.memory_usage(name)
            sizes = pipe.execute()
            found += len(names)
            total += sum(s for s in sizes if s is not None)
            missing += sum(1 for s in sizes if s is None)
        if cursor == 0:
            return Walk(found, pages, time.perf_counter() - started, total, missing)


# --------------------------------------------------------------------------- the history


def build_history(src: Path, dst: Path, days: int, growth: float) -> dict[str, int]:
    """`days` daily copies of the one snapshot under `src` (its three tables), at 03:00 UTC
    up to today, cast to the tables' Arrow schemas (as tests/capacity/synthetic.py writes);
    the servers' memory is the snapshot's on the last day and `growth` less a day before.
    Rows per copy, by table."""
    last = datetime.now(UTC).replace(hour=3, minute=0, second=0, microsecond=0)
    rows = {}
    for table in (MAILBOXES, SERVERS, CLUSTER):
        data = _snapshot_table(src, table)
        rows[table.name] = data.num_rows
        for d in range(days):
            when = last - dt.timedelta(days=days - 1 - d)
            day = _dated(data, when)
            if table is SERVERS:
                day = _grown(day, 1 - growth * (days - 1 - d))
            folder = dst / table.name / f"snapshot_date={when:%Y-%m-%d}"
            folder = folder / f"snapshot_id={when:%Y%m%dT%H%M%SZ}"
            folder.mkdir(parents=True)
            pq.write_table(day, folder / "part-0.zstd.parquet", compression="zstd")
    return rows


def _snapshot_table(src: Path, table: Table) -> pa.Table:
    folders = sorted((src / table.name).glob("snapshot_date=*/snapshot_id=*"))
    if len(folders) != 1:
        raise BenchError(f"{src / table.name}: {len(folders)} snapshots, expected one")
    schema = pa.schema(
        [("schema_version", pa.int32()), ("snapshot_time", pa.timestamp("us", tz="UTC"))]
        + [(f.name, f.type) for f in table.arrow_schema]
    )
    return pq.read_table(folders[0]).select(schema.names).cast(schema)


def _dated(data: pa.Table, when: datetime) -> pa.Table:
    column = data.schema.get_field_index("snapshot_time")
    stamp = pa.repeat(pa.scalar(when, type=data.schema.field(column).type), data.num_rows)
    return data.set_column(column, "snapshot_time", stamp)


def _grown(data: pa.Table, factor: float) -> pa.Table:
    for name in GROWN:
        i = data.schema.get_field_index(name)
        scaled = pc.cast(pc.round(pc.multiply(data.column(i), factor)), pa.int64())
        data = data.set_column(i, name, scaled)
    return data


# --------------------------------------------------------------------------- the bench


class SnapshotKeeper:
    """Default-rate snapshots one after another while a block runs: the next one starts
    when one finishes, until stopped."""

    def __init__(self, new: Callable[[], Awaitable[JobRun]]) -> None:
        self.new = new
        self.runs: list[JobRun] = []
        self.stopping = False
        self._task: asyncio.Task[None] | None = None

    async def begin(self, limit: float) -> bool:
        """The first snapshot, once its partitions read: False if it never did."""
        first = await self._start()
        self._task = asyncio.create_task(self._loop(first))
        return await first.reading(limit)

    async def _start(self) -> JobRun:
        run = await self.new()
        self.runs.append(run)
        return run

    async def _loop(self, run: JobRun) -> None:
        while True:
            await run.wait()
            if self.stopping:
                return
            run = await self._start()

    async def stop(self) -> None:
        self.stopping = True
        for run in list(self.runs):
            await run.stop()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, 60)
        for run in self.runs:  # one started meanwhile
            await run.stop()

    def cpu(self) -> float:
        return sum(run.cpu for run in self.runs)

    def coverage(self, start: float, end: float) -> float:
        """The share of [start, end] in which a snapshot was reading."""
        covered = 0.0
        for run in self.runs:
            a, b = run.reading_window
            covered += max(0.0, min(b, end) - max(a, start))
        return min(1.0, covered / (end - start)) if end > start else 0.0

    def failures(self) -> list[str]:
        return [
            f"{r.label} exited {r.proc.returncode}: {r.tail[-300:]!r}"
            for r in self.runs
            if r.proc is not None and r.proc.returncode not in (0, None) and not r.stopped
        ]


class CapacityBench(ScaleBench):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.all_cpus = sorted(os.sched_getaffinity(0))
        self.hash_key: list[str] | None = None
        self.unthrottled: Path | None = None  # the unthrottled snapshot's history
        self.runs = 0

    # ------------------------------------------------------------------ verdicts

    def judge(self, name: str, label: str, shown: str, value: float) -> str:
        kind, goal, printed = TARGETS[name]
        status = "OK" if met(kind, value, goal) else "MISSED"
        self.summary.append((label, shown, printed, status))
        self.results.setdefault("verdicts", {})[name] = status
        return status

    def info(self, label: str, shown: str) -> None:
        self.summary.append((label, shown, "(info)", ""))

    # ------------------------------------------------------------------ Redis

    async def prepare_redis(self) -> None:
        """The loaded data set: loaded here into the embedded server, or the --redis-url
        one as it is."""
        if self.args.redis_url:
            await self.attach_redis()
            return
        await self.start_redis()
        progress("--- load")
        for phase in ("recipients", "messages"):
            made = await load(
                self.redis_url,
                self.plan,
                phase,
                processes=self.args.load_processes,
                report=progress,
                every=self.args.progress_seconds,
            )
            progress(f"{phase}: {made.items:,} ({made.made:,} made) in {made.seconds:.0f} s")
        assert self.redis is not None
        progress(f"AOF rewritten after the load, in {await rewrite_aof(self.redis):.0f} s")

    async def attach_redis(self) -> None:
        self.decide_pinning()
        progress(f"pinning: {self.pinning.note} (the Redis at --redis-url is not pinned)")
        check_loopback(urlsplit(self.redis_url).hostname or "")
        self.redis = Redis.from_url(
            self.redis_url, decode_responses=False, socket_timeout=600, client_name="bench-ctl"
        )
        pid = int((await self.redis.info("server")).get("process_id", 0))
        self.redis_pid = pid if _stat(pid) is not None else None
        last = self.plan.recipients - 1
        record = keys.connection_keys(self.plan.wallet(last).verkey_b58).record
        if not await self.redis.exists(record):
            raise BenchError(
                f"{self.redis_url} has no recipient {last:,} of the plan: load it with "
                f"bench/bulk_load.py --recipients {self.plan.recipients} (same --share)"
            )
        progress(
            f"using the Redis at {self.redis_url} ({await self.redis.dbsize():,} keys, pid "
            f"{self.redis_pid or 'unknown'}), loaded with {self.plan.recipients:,} recipients"
        )

    async def snapshot_args(self) -> list[str]:
        """--hash-key-file when the deployment has no mediator identity in Redis (nodes
        started with MEDIATOR_KEY_SEED, as the loader's and scale_bench's, never store one)."""
        if self.hash_key is None:
            assert self.redis is not None
            self.hash_key = []
            if not await self.redis.hexists(keys.mediator_identity(), "seed"):
                path = self.tmp / "pseudonym.key"
                path.write_text(secrets.token_hex(32))
                self.hash_key = ["--hash-key-file", str(path)]
                progress("no mediator identity in Redis (MEDIATOR_KEY_SEED): --hash-key-file")
        return self.hash_key

    # ------------------------------------------------------------------ jobs

    async def snapshot(self, label: str, rate: float | None, cpus: str = "all") -> JobRun:
        """A snapshot subprocess, started (not awaited)."""
        self.runs += 1
        out = self.tmp / f"history-{self.runs}-{label}"
        argv = [sys.executable, "-m", "mediator", "capacity", "snapshot"]
        argv += ["--redis-url", self.redis_url, "--out", str(out), *await self.snapshot_args()]
        if rate is not None:
            argv += ["--max-commands-per-second", f"{rate:g}"]
        where = self.all_cpus if self.pinning.used else None
        if cpus == "load" and self.pinning.used:
            assert self.pinning.load_cpu is not None
            where = [self.pinning.load_cpu]
            argv += ["--master", f"local[{len(self.all_cpus)}]"]  # as many tasks as local[*]
        return await JobRun(f"snapshot {label}", _on_cpus(argv, where), _base_env(), out).start()

    async def finished(self, run: JobRun) -> dict[str, Any]:
        code = await run.wait()
        if code != 0:
            raise BenchError(f"{run.label} exited {code}:\n{run.tail[-1500:]}")
        return run.summary() | run.timeline()

    # ------------------------------------------------------------------ anchor

    async def phase_anchor(self) -> None:
        assert self.redis is not None
        dbsize = await self.redis.dbsize()
        progress(f"anchor: SCAN + MEMORY USAGE over {dbsize:,} keys")
        meter = RedisLoad(self.redis, self.redis_pid)
        before = await meter.read()
        done = await asyncio.to_thread(walk, self.redis_url, self.all_cpus)
        after = await meter.read()
        redis_cpu = (after.cpu - before.cpu) / max(after.at - before.at, 1e-9)
        self.results["anchor"] = asdict(done) | {
            "keys_per_second": done.rate,
            "commands": done.keys + done.pages,
            "dbsize": dbsize,
            "redis_cpu": redis_cpu,
        }
        self.info("anchor SCAN + MEMORY USAGE", f"{fmt_rate(done.rate)} keys/s")
        commands = done.keys + done.pages
        self.emit(
            f"anchor: SCAN (COUNT {SCAN_COUNT}) + pipelined MEMORY USAGE over {done.keys:,} keys "
            f"(DBSIZE {dbsize:,}) in {done.seconds:.1f} s: {fmt_rate(done.rate)} keys/s, "
            f"{commands:,} commands ({commands / max(done.keys, 1):.3f} per key), "
            f"{done.memory_bytes / 1e6:,.1f} MB counted, Redis {redis_cpu:.0%} of a core"
        )

    # ------------------------------------------------------------------ snapshot

    async def phase_snapshot(self) -> None:
        progress("snapshot: --max-commands-per-second 0, local[*], timed end to end")
        assert self.redis is not None
        meter = RedisLoad(self.redis, self.redis_pid)
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
        self.results["snapshot"] = s
        self.snapshot_lines(s)

    def snapshot_lines(self, s: dict[str, Any]) -> None:
        anchor = self.results.get("anchor")
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
            self.info("snapshot unthrottled", shown)
        self.emit(line)
        per_key = (
            f"; the anchor 1 MEMORY USAGE per key, {anchor['dbsize'] / max(s['rows'], 1):.2f} "
            "keys per mailbox row"
            if anchor
            else ""
        )
        self.emit(
            f"  read per row: {s['commands_per_row']:.2f} commands ({s['commands']:,} in "
            f"{s['partitions']} partitions: config hash and presence of every mailbox, 8 reads "
            f"more for one that may hold messages, MEMORY USAGE of its keys for 1 %){per_key}; "
            f"highest rate {s['peak']:,} commands/s in a partition; {s['bytes']:,} bytes "
            f"written; Redis {s['redis']['commands_per_second']:,.0f} commands/s and "
            f"{s['redis']['cpu']:.0%} of a core while it read; the job used "
            f"{s['cpu_seconds']:.0f} CPU-s"
        )
        self.emit(f"  phases (s from start): {self.fmt_phases(s)}")

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
        assert self.redis is not None
        meter = RedisLoad(self.redis, self.redis_pid)
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
        self.results["rate"] = s
        self.rate_lines(s)

    def rate_lines(self, s: dict[str, Any]) -> None:
        r, idle = s["redis"], s["redis_idle"]
        self.info("snapshot at the default rate", f"{fmt_rate(s['rows_per_second'])} rows/s")
        self.info("Redis while it reads", f"{r['commands_per_second']:,.0f} cmds/s, {r['cpu']:.0%}")
        self.emit(
            f"snapshot at the default rate ({DEFAULT_RATE:,.0f} commands/s per partition): "
            f"{s['rows']:,} mailboxes in {s['wall_seconds']:.1f} s end to end (reading "
            f"{s['reading_seconds']:.1f} s): {fmt_rate(s['rows_per_second'])} rows/s; highest "
            f"rate {s['peak']:,} commands/s in a partition (budget {DEFAULT_RATE:,.0f}; at most "
            f"{s['ceiling']:,.0f}/s with {min(s['partitions'], len(self.all_cpus))} partitions "
            f"at once)  (info)"
        )
        self.emit(
            f"  Redis while it read ({r['seconds']:.0f} s): {r['commands_per_second']:,.0f} "
            f"commands/s (instantaneous_ops_per_sec median {r['ops_median']:,.0f}, max "
            f"{r['ops_max']:,.0f}), redis-server {r['cpu']:.0%} of a core; idle before "
            f"({idle['seconds']:.0f} s): {idle['commands_per_second']:,.1f} commands/s, "
            f"{idle['cpu']:.1%}; the job used {s['cpu_seconds']:.0f} CPU-s"
        )
        self.emit(f"  phases (s from start): {self.fmt_phases(s)}")

    # ------------------------------------------------------------------ live

    async def forward_requests(self) -> list[bytes]:
        """Forwards to distinct recipients drawn at random over the loaded ones."""
        pool = self.regions()["distinct"]
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
        side, used = self.forward_side("forwards", await self.forward_requests(), latencies)
        if args.warmup > 0:
            warm = await self.run_block(side, args.warmup, "warm")
            progress(f"live warm-up: {self.describe(warm)}")
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
            block = await self.run_block(side, self.args.seconds, tag)
            return self.block_row(block, latencies[tag])
        keeper = SnapshotKeeper(lambda: self.snapshot("live", None, self.args.live_snapshot_cpus))
        try:
            if not await keeper.begin(600):
                raise BenchError(f"the live snapshot did not start reading: {keeper.failures()}")
            cpu0, t0 = keeper.cpu(), time.monotonic()
            block = await self.run_block(side, self.args.seconds, tag)
            t1 = time.monotonic()
        finally:
            await keeper.stop()
        for run in keeper.runs:
            shutil.rmtree(run.out or "", ignore_errors=True)
        self.errors += [f"live: {f}" for f in keeper.failures()]
        row = self.block_row(block, latencies[tag])
        row["snapshots"] = len(keeper.runs)
        row["snapshot_reading_share"] = keeper.coverage(t0, t1)
        row["snapshot_cpu"] = (keeper.cpu() - cpu0) / (t1 - t0)
        return row

    def block_row(self, block: Block, timings: list[float]) -> dict[str, Any]:
        if block.errors:
            self.errors.append(f"live/{block.label}: {block.errors} errors: {block.first_error}")
        return {
            "block": asdict(block),
            "rate": block.rate,
            "p99_ms": percentile(timings, 99) * 1000,
            "latency_ms": _dist([x * 1000 for x in timings]) if timings else None,
            "described": self.describe(block),
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
        self.results["live"] = {
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
        self.emit(
            f"forwards to distinct recipients of {self.plan.recipients:,} during a default-rate "
            f"snapshot: {fmt_rate(during)}/s vs {fmt_rate(without)}/s without: {ratio:.2f}x "
            f"(pairs {spread})  target >= 0.8  {status}; p99 {p99:.2f}x (info)"
        )

    # ------------------------------------------------------------------ report

    async def phase_report(self) -> None:
        if self.unthrottled is None:
            raise BenchError("no unthrottled snapshot to make the history from")
        args = self.args
        history, out = self.tmp / "history-30d", self.tmp / "report"
        progress(f"report: a {args.days}-day history from the unthrottled snapshot")
        started = time.monotonic()
        rows = await asyncio.to_thread(
            build_history, self.unthrottled, history, args.days, args.report_growth
        )
        made = time.monotonic() - started
        argv = [sys.executable, "-m", "mediator", "capacity", "report", "--history", str(history)]
        argv += ["--out", str(out), "--days", str(args.days)]
        progress(f"report: history written in {made:.0f} s; mediator capacity report, timed")
        for p in self.procs:  # the nodes' idle work is no part of it
            p.stop()
        where = self.all_cpus if self.pinning.used else None
        run = await JobRun("report", _on_cpus(argv, where), _base_env(), out).start()
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
            "history_bytes": _size(history),
            "history_build_seconds": made,
            "html_bytes": html.stat().st_size,
            "summary_bytes": summary.stat().st_size,
            "cpu_seconds": run.cpu,
            "notes": [line for line in run.stdout.splitlines() if line.startswith("note:")],
            "verdict": self.verdict_of(summary),
        }
        self.results["report"] = r
        self.info(f"report over {args.days} days", f"{seconds:.1f} s")
        v = r["verdict"]
        self.emit(
            f"report over {args.days} days ({read:,} mailbox rows, {rows['servers']} server and "
            f"{rows['cluster']} cluster rows a day; history {r['history_bytes'] / 1e6:,.1f} MB on "
            f"disk): {seconds:.1f} s end to end ({fmt_rate(r['rows_per_second'])} rows/s, the job "
            f"used {run.cpu:.0f} CPU-s); report.html {r['html_bytes']:,} B, summary.json "
            f"{r['summary_bytes']:,} B  (info)"
        )
        self.emit(
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
                    self.errors.append(f"{part}: {exc}")
                    progress(f"{part} FAILED: {exc}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Method: bench/README.md (Capacity benchmark). Quick run: --recipients 20000 "
        "--seconds 5 --pairs 1.",
    )
    add = parser.add_argument
    add("--recipients", type=int, default=1_000_000, help="recipients loaded (1000000)")
    add(
        "--share",
        type=float,
        default=0.1,
        help="share of recipients with 1-5 queued 1 KiB messages, as scale_bench (0.1)",
    )
    add(
        "--only",
        default=",".join(PARTS),
        help=f"comma-separated parts, run in this order (default all: {','.join(PARTS)}); "
        "report needs the unthrottled snapshot, so it runs snapshot too",
    )
    add(
        "--redis-url",
        default="",
        help="use this Redis (loopback only), already loaded by bench/bulk_load.py or "
        "scale_bench with the same --recipients and --share, instead of starting one and "
        "loading it; not pinned; the live part adds the messages it forwards",
    )
    add("--load-processes", type=int, default=2, help="loading processes (2: one per CPU)")
    add(
        "--seconds",
        type=float,
        default=20.0,
        help="length of each live block, with and without a snapshot (20)",
    )
    add(
        "--pairs",
        type=int,
        default=2,
        help="live pairs of blocks (without, during), the order reversed every other pair (2)",
    )
    add(
        "--warmup",
        type=float,
        default=5.0,
        help="a live warm-up block without a snapshot, not counted (5 s; 0: none)",
    )
    add("--pause", type=float, default=0.3, help="idle seconds between blocks (0.3)")
    add("--connections", type=int, default=32, help="closed-loop HTTP connections (32)")
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
    add(
        "--no-pin",
        action="store_true",
        help="do not pin processes to CPUs (by default, with two CPUs and taskset: Redis and "
        "this process on cpu 0, the nodes on cpu 1, the jobs and the anchor walk on both)",
    )
    add(
        "--keep-tmp",
        action="store_true",
        help="keep logs, Redis data, the snapshots' histories and the report",
    )
    add(
        "--output-dir",
        default=str(Path(__file__).resolve().parent / "results"),
        help="where capacity-<timestamp>.json goes (bench/results)",
    )
    args = parser.parse_args(argv)
    only = {w.strip() for w in args.only.split(",") if w.strip()}
    if only - set(PARTS):
        parser.error(f"unknown parts {sorted(only - set(PARTS))}")
    if "report" in only:
        only.add("snapshot")
    args.only = only
    if not (100 <= args.recipients <= 10_000_000 and 0 <= args.share <= 1):
        parser.error("--recipients must be 100..10000000 and --share 0..1")
    if not (args.pairs >= 1 and args.seconds > 0 and 1 <= args.days <= 3650):
        parser.error("--pairs must be at least 1, --seconds above 0, --days 1..3650")
    args.sockets = args.live_recipients = 0  # scale_traffic's regions: no sockets, no live
    return args


async def amain(args: argparse.Namespace) -> tuple[CapacityBench, dict[str, Any]]:
    bench = CapacityBench(args)
    started, loadavg = datetime.now(UTC), os.getloadavg()
    progress(
        f"capacity run: {args.recipients:,} recipients, parts "
        f"{[p for p in PARTS if p in args.only]}; load average {loadavg[0]:.2f} "
        f"({os.cpu_count()} CPUs)"
    )
    await run_guarded(bench, bench.run_parts(), RUN_TIMEOUT_S)
    return bench, run_report(
        bench,
        "capacity",
        started,
        loadavg,
        mediator_key_seed=MEDIATOR_SEED,
        default_commands_per_second=DEFAULT_RATE,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_main(lambda: asyncio.run(amain(args)), "capacity", (BenchError, RuntimeError))


if __name__ == "__main__":
    sys.exit(main())
