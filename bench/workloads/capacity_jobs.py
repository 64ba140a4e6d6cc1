"""What the capacity benchmark runs and reads: `mediator capacity snapshot|report` as
subprocesses (their phase lines as they come, their process tree's CPU), Redis's load over
a window, a plain SCAN + MEMORY USAGE walk (the anchor), snapshots one after another while
a block runs, and a history of many days made from one snapshot."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import re
import signal
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import redis
from redis.asyncio import Redis

from bench.harness.errors import BenchError
from bench.harness.machine import proc_cpu_seconds
from mediator.embedded import die_with_parent
from mediator.engine import keys
from spark.tables.cluster import CLUSTER
from spark.tables.columns import Table
from spark.tables.mailboxes import MAILBOXES
from spark.tables.servers import SERVERS

JOB_LIMIT_S = 2 * 3600  # one snapshot or report subprocess
SCAN_COUNT = 1000
SAMPLE_S = 0.5  # Redis and process-tree readings during a job
CLK = os.sysconf("SC_CLK_TCK")
PHASE = re.compile(r"^\[snapshot\s+[\d.]+s\] (?P<text>.*)$")
READING = f"reading {keys.SHARDS} shards"
SUMMARY = re.compile(
    r"snapshot (?P<id>\S+): (?P<rows>[\d,]+) mailboxes, (?P<bytes>[\d,]+) bytes written, "
    r"(?P<seconds>[\d.]+) s, (?P<commands>[\d,]+) commands in (?P<partitions>\d+) partitions, "
    r"highest rate (?P<peak>[\d,]+) commands/s in a partition"
)
GROWN = ("used_memory", "used_memory_peak", "used_memory_rss")  # servers' columns that grow


# --------------------------------------------------------------------------- processes


def process_stat(pid: int) -> tuple[int, float] | None:
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
        stats = {pid: s for pid in _pids() if (s := process_stat(pid)) is not None}
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


def on_cpus(argv: list[str], cpus: list[int] | None) -> list[str]:
    return argv if cpus is None else ["taskset", "-c", ",".join(map(str, cpus)), *argv]


def folder_size(path: Path) -> int:
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
            preexec_fn=die_with_parent,
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
