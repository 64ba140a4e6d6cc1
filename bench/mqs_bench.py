"""mqs benchmark: throughput, long-poll wake-up latency and Redis memory, in one run.

Every throughput figure is a ratio to an anchor measured in the same run on the same machine,
in interleaved blocks (anchor, subject, anchor, subject, ...) after a warm-up, so that a
shared or noisy machine moves both sides alike. The anchor (bench/anchor_app.py) is a bare
Starlette app on uvicorn that parses a JSON body and does one XADD: what a Python HTTP front
to Redis costs at the least. Workloads:

  send      POST /messages/<q>, one 1 KiB message             ratio to anchor     >= 0.5
  recv      GET /messages/<q> (1 message) + DELETE by id       ratio to anchor     >= 0.4
  batch     POST /messages/<q>, multipart of 10 x 1 KiB        ratio to single send >= 5
  latency   long poll on node 1 woken by a send on node 2      p99                 <= 5 ms
            (from the send's answer to the poll's answer; end to end also shown)
            (next to a bare redis-py PUBLISH -> subscriber floor)
  memory    Redis used_memory per queued 1 KiB message         <= 1536 B

It starts its own Redis-compatible server (the embedded valkey, AOF everysec, noeviction),
two `mediator serve` nodes and the anchor app, pins the server under test to one CPU and the
load generator and Redis to the other (taskset, when there are two CPUs), prints one line per
workload and a summary, and writes bench/results/mqs-<timestamp>.json. It exits 0 even when a
target is missed (the line says MISSED), and non-zero only when something failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import platform
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import profiling
from loadgen import (
    Connection,
    HttpError,
    LoadResult,
    Operation,
    Response,
    build_request,
    check_loopback,
    close_connections,
    closed_loop,
    cpu_shares,
    cpu_times,
    expect,
    open_connections,
    proc_cpu_seconds,
)
from redis.asyncio import Redis

from mediator.embedded import EmbeddedServer, free_port
from mediator.mqs import multipart

HOST = "127.0.0.1"
BENCH_DIR = Path(__file__).resolve().parent
KIB = 1024
WORKLOADS = ("memory", "send", "recv", "batch", "latency")
QUEUE_HEADERS = {"X-MQS-RETENTION-SECONDS": "3600", "X-MQS-VISIBILITY-TIMEOUT-SECONDS": "30"}
OCTET = {"Content-Type": "application/octet-stream"}
PR_SET_PDEATHSIG = 1
# A block is "disturbed" when other processes used this share of the server's CPU.
DISTURBED = 0.10
RUN_TIMEOUT_S = 20 * 60  # the whole run, whatever the options

TARGETS = {
    "send": (">=", 0.5),
    "recv": (">=", 0.4),
    "batch": (">=", 5.0),
    "latency": ("<=", 5.0),
    "memory": ("<=", 1536.0),
}


class BenchError(Exception):
    """Something failed: the run cannot give figures."""


# --------------------------------------------------------------------------- output


_T0 = time.monotonic()


def progress(text: str) -> None:
    print(f"[{time.monotonic() - _T0:6.1f}s] {text}", flush=True)


def fmt_rate(value: float) -> str:
    return f"{value:,.0f}"


def met(kind: str, value: float, target: float) -> bool:
    return value >= target if kind == ">=" else value <= target


def verdict(name: str, value: float) -> str:
    kind, target = TARGETS[name]
    return "OK" if met(kind, value, target) else "MISSED"


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (p in 0..100)."""
    data = sorted(values)
    if not data:
        return float("nan")
    k = (len(data) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (k - lo)


# --------------------------------------------------------------------------- processes


@dataclass
class Pinning:
    used: bool
    load_cpu: int | None = None
    server_cpu: int | None = None
    note: str = ""


class Proc:
    """A subprocess of the benchmark (a node or the anchor app) with its log file."""

    def __init__(
        self, name: str, argv: list[str], env: dict[str, str], log_dir: Path, port: int
    ) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.port = port
        self.log_path = log_dir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> None:
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches the bench only, which stops us in order
                preexec_fn=_die_with_parent,
            )

    @property
    def running(self) -> bool:
        """Started and not stopped (a node started for one workload may be gone)."""
        return self.proc is not None and self.proc.poll() is None

    def cpu_seconds(self) -> float:
        return proc_cpu_seconds(self.pid)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    async def wait_ready(self, path: str, limit_s: float = 30.0) -> None:
        request = build_request("GET", path)
        deadline = time.monotonic() + limit_s
        last = ""
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise BenchError(f"{self.name} exited during start-up:\n{self.log_tail()}")
            conn = Connection(HOST, self.port, timeout=2)
            try:
                await conn.open()
                resp = await conn.request(request)
                if resp.status == 200:
                    return
                last = f"status {resp.status}"
            except (OSError, TimeoutError, HttpError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            finally:
                await conn.close()
            await asyncio.sleep(0.1)
        raise BenchError(f"{self.name} not ready after {limit_s} s ({last}):\n{self.log_tail()}")


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM if the benchmark dies without stopping us."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _base_env() -> dict[str, str]:
    """This process's environment without any MEDIATOR_* setting."""
    return {k: v for k, v in os.environ.items() if not k.startswith("MEDIATOR_")}


def pinned(argv: list[str], cpu: int | None) -> list[str]:
    return argv if cpu is None else ["taskset", "-c", str(cpu), *argv]


# --------------------------------------------------------------------------- control API


class Api:
    """Setup and cleanup calls (not timed) on one keep-alive connection to a node."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._conn: Connection | None = None

    async def call(
        self,
        method: str,
        path: str,
        statuses: Sequence[int],
        headers: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> Response:
        raw = build_request(method, path, headers, body)
        for attempt in range(2):
            if self._conn is None:
                self._conn = await Connection(HOST, self.port).open()
            try:
                resp = await self._conn.request(raw)
            except (OSError, TimeoutError, HttpError) as exc:
                await self.close()
                if attempt or (isinstance(exc, HttpError) and exc.status):
                    raise BenchError(f"{method} {path}: {exc}") from exc
                continue
            if resp.status not in statuses:
                raise BenchError(
                    f"{method} {path}: status {resp.status}, wanted {list(statuses)}: "
                    f"{resp.body[:300]!r}"
                )
            return resp
        raise BenchError(f"{method} {path}: no answer")

    async def create_queue(self, name: str) -> None:
        await self.call("PUT", f"/queues/{name}", [201], QUEUE_HEADERS)

    async def delete_queue(self, name: str) -> None:
        await self.call("DELETE", f"/queues/{name}", [200, 404])

    async def visible(self, name: str) -> int:
        resp = await self.call("GET", f"/queues/{name}", [200])
        return int(json.loads(resp.body)["status"]["visibleMessages"])

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


async def bulk(port: int, requests: list[bytes], statuses: Sequence[int], conns: int = 8) -> int:
    """Run prebuilt requests over a few connections (setup work, not timed)."""
    pending = list(reversed(requests))
    done = 0

    async def worker(conn: Connection) -> None:
        nonlocal done
        while pending:
            raw = pending.pop()
            resp = await conn.request(raw)
            if resp.status not in statuses:
                raise BenchError(f"bulk request: status {resp.status}: {resp.body[:300]!r}")
            done += 1

    opened = await open_connections(HOST, port, max(1, min(conns, len(requests))))
    try:
        await asyncio.wait_for(asyncio.gather(*(worker(c) for c in opened)), 300)
    finally:
        await close_connections(opened)
    return done


# --------------------------------------------------------------------------- blocks


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


@dataclass
class Side:
    """One side of a pair: the server, and how to prepare, load and clean up one block."""

    label: str
    target: Target
    prepare: Callable[[str], Awaitable[Operation]]
    cleanup: Callable[[str], Awaitable[None]]
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


# --------------------------------------------------------------------------- the bench


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.run_id = secrets.token_hex(3)
        self.tmp = Path(tempfile.mkdtemp(prefix="mqs-bench-"))
        self.server: EmbeddedServer | None = None
        self.redis_url: str = args.redis_url or ""
        self.redis: Redis | None = None
        self.redis_pid: int | None = None
        self.procs: list[Proc] = []
        self.node1: Proc | None = None
        self.node2: Proc | None = None
        self.anchor: Proc | None = None
        self.anchor_port = 0
        self.api1: Api | None = None
        self.pinning = Pinning(used=False)
        self.results: dict[str, Any] = {}
        self.lines: list[str] = []
        self.summary: list[tuple[str, str, str, str]] = []
        self.errors: list[str] = []
        self.queues: set[str] = set()
        self.body = secrets.token_bytes(KIB)
        self.json_body = json.dumps({"body": secrets.token_urlsafe(768)[:KIB]}).encode()

    # ------------------------------------------------------------------ setup

    def q(self, suffix: str) -> str:
        name = f"bench-{self.run_id}-{suffix}"
        self.queues.add(name)
        return name

    def decide_pinning(self) -> None:
        cpus = sorted(os.sched_getaffinity(0))
        if self.args.no_pin:
            self.pinning = Pinning(used=False, note="disabled with --no-pin")
        elif len(cpus) < 2:
            self.pinning = Pinning(used=False, note=f"only {len(cpus)} CPU available")
        elif not shutil.which("taskset"):
            self.pinning = Pinning(used=False, note="taskset not found")
        else:
            self.pinning = Pinning(used=True, load_cpu=cpus[0], server_cpu=cpus[1])
            # The load generator (this process) and the Redis server it starts share a CPU.
            os.sched_setaffinity(0, {cpus[0]})
            self.pinning.note = (
                f"server under test on cpu {cpus[1]}; load generator, Redis and node 2 on "
                f"cpu {cpus[0]}"
            )

    async def start(self) -> None:
        self.decide_pinning()
        progress(f"pinning: {self.pinning.note}")
        if self.redis_url:
            parts = urlsplit(self.redis_url)
            check_loopback(parts.hostname or "")
            progress(f"using the Redis server at {self.redis_url} (not started, not pinned)")
        else:
            self.server = EmbeddedServer(self.tmp / "redis", lock=False)
            self.server.start()
            assert self.server.process is not None
            self.redis_pid = self.server.process.pid
            self.redis_url = self.server.url
            if self.pinning.used:
                pin = await asyncio.create_subprocess_exec(
                    *["taskset", "-a", "-cp", str(self.pinning.load_cpu), str(self.redis_pid)],
                    stdout=subprocess.DEVNULL,
                )
                if await asyncio.wait_for(pin.wait(), 10) != 0:
                    raise BenchError("taskset could not pin the Redis server")
            progress(f"embedded server {self.server.binary} at {self.redis_url}")
        self.redis = Redis.from_url(
            self.redis_url, decode_responses=False, socket_timeout=10, client_name="bench-ctl"
        )
        await self.redis.ping()

        base_env = _base_env()
        server_cpu, load_cpu = self.pinning.server_cpu, self.pinning.load_cpu
        anchor_port = self.anchor_port = free_port()  # known to the nodes' settings
        self.node1 = self.node_proc("node1", True, server_cpu)
        self.node2 = self.node_proc("node2", False, load_cpu)
        self.anchor = Proc(
            "anchor",
            pinned(
                [
                    sys.executable,
                    str(BENCH_DIR / "anchor_app.py"),
                    "--port",
                    str(anchor_port),
                    "--redis-url",
                    self.redis_url,
                ],
                server_cpu,
            ),
            base_env,
            self.tmp,
            anchor_port,
        )
        for p in (self.node1, self.node2, self.anchor):
            p.start()
            self.procs.append(p)
        await asyncio.gather(
            self.node1.wait_ready("/readyz"),
            self.node2.wait_ready("/readyz"),
            self.anchor.wait_ready("/readyz"),
        )
        self.api1 = Api(self.node1.port)
        progress(
            f"node1 :{self.node1.port} (pid {self.node1.pid}), node2 :{self.node2.port} "
            f"(pid {self.node2.pid}), anchor :{self.anchor.port} (pid {self.anchor.pid}) ready"
        )

    def node_proc(self, name: str, in_process_worker: bool, cpu: int | None) -> Proc:
        """A `mediator serve` node on the shared Redis (not started), pinned to `cpu`."""
        port = free_port()
        env = {
            **_base_env(),
            "MEDIATOR_REDIS_URL": self.redis_url,
            "MEDIATOR_PORT": str(port),
            "MEDIATOR_HOST": HOST,
            "MEDIATOR_LOG_LEVEL": "warning",
            "MEDIATOR_IN_PROCESS_WORKER": "true" if in_process_worker else "false",
            "MEDIATOR_NODE_ID": f"bench-{name}",
            "MEDIATOR_WORKER_HEALTH_FILE": str(self.tmp / f"{name}.health"),
        }
        argv = pinned([sys.executable, "-m", "mediator", "serve"], cpu)
        return Proc(name, argv, env, self.tmp, port)

    async def stop(self) -> None:
        with contextlib.suppress(Exception):
            await self.cleanup_queues()
        if self.api1 is not None:
            await self.api1.close()
        for p in self.procs:
            p.stop()
        if self.redis is not None:
            with contextlib.suppress(Exception):
                if self.server is None:  # a server we do not own: remove what we wrote
                    match = f"bench:anchor:{self.run_id}-*"
                    keys = [k async for k in self.redis.scan_iter(match=match)]
                    if keys:
                        await self.redis.unlink(*keys)
            with contextlib.suppress(Exception):
                await self.redis.aclose()
        if self.server is not None:
            self.server.stop()
        if self.args.keep_tmp:
            progress(f"kept logs and Redis data in {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    async def cleanup_queues(self) -> None:
        if self.node1 is None or not self.queues:
            return
        requests = [build_request("DELETE", f"/queues/{q}") for q in sorted(self.queues)]
        await bulk(self.node1.port, requests, [200, 404], conns=8)
        self.queues.clear()

    def node_log_problems(self) -> list[str]:
        lines = []
        for p in self.procs:
            for line in p.log_tail(200_000).splitlines():
                if line.strip():
                    lines.append(f"{p.name}: {line[:300]}")
        return lines

    # ------------------------------------------------------------------ sanity

    async def sanity(self) -> None:
        """The API behaves as the benchmark assumes (fails loudly otherwise)."""
        assert self.api1 is not None
        q = self.q("sanity")
        api = self.api1
        await api.create_queue(q)
        empty = await api.call("GET", f"/messages/{q}", [200], {"X-MQS-MAX-MESSAGES": "1"})
        if empty.body.strip() != b"[]" or empty.header(b"x-mqs-message-count") != b"0":
            raise BenchError(f"an empty receive answered {empty.headers!r} {empty.body[:100]!r}")
        sent = await api.call("POST", f"/messages/{q}", [201], OCTET, self.body)
        ids = json.loads(sent.body)["messageIds"]
        ctype, batch = multipart.encode([(OCTET, self.body) for _ in range(10)])
        sent10 = await api.call("POST", f"/messages/{q}", [201], {"Content-Type": ctype}, batch)
        if len(json.loads(sent10.body)["messageIds"]) != 10:
            raise BenchError(f"a batch of 10 answered {sent10.body[:300]!r}")
        got = await api.call("GET", f"/messages/{q}", [200], {"X-MQS-MAX-MESSAGES": "1"})
        mid = got.header(b"x-mqs-message-id").decode()
        if got.body != self.body or mid != ids[0]:
            raise BenchError("the first message received is not the one sent first")
        await api.call("DELETE", f"/messages/{mid}", [204])
        await api.call("DELETE", f"/messages/{mid}", [404])
        if await api.visible(q) != 10:
            raise BenchError("the queue does not show the 10 messages of the batch")
        await api.delete_queue(q)
        progress("sanity checks passed (send, batch, receive, delete, empty receive)")

    # ------------------------------------------------------------------ blocks

    async def run_block(self, side: Side, seconds: float, tag: str) -> Block:
        op = await side.prepare(tag)
        conns = await open_connections(HOST, side.target.port, self.args.connections)
        try:
            await asyncio.sleep(0.05)
            events0 = await self.redis_counters()
            sys0 = cpu_times()
            others = {p.name: p.pid for p in self.procs if p.running and p.pid != side.target.pid}
            others0 = {name: proc_cpu_seconds(pid) for name, pid in others.items()}
            cpu0 = proc_cpu_seconds(side.target.pid)
            redis0 = proc_cpu_seconds(self.redis_pid) if self.redis_pid else None
            load0 = time.process_time()
            result: LoadResult = await closed_loop(conns, op, seconds)
            load1 = time.process_time()
            cpu1 = proc_cpu_seconds(side.target.pid)
            redis1 = proc_cpu_seconds(self.redis_pid) if self.redis_pid else None
            sys1 = cpu_times()
            others1 = {name: proc_cpu_seconds(pid) for name, pid in others.items()}
            events1 = await self.redis_counters()
        finally:
            await close_connections(conns)
        await side.cleanup(tag)
        events = {k: events1[k] - events0.get(k, 0) for k in events1 if not k.startswith("client:")}
        events["aof_rewrite_in_progress"] = events1.get("aof_rewrite_in_progress", 0)
        # Clients gone before the end are missed; the servers keep their pools open.
        events["client_commands"] = sum(
            v - events0.get(k, 0) for k, v in events1.items() if k.startswith("client:")
        )
        server_cpu = cpu1 - cpu0
        elapsed = result.elapsed
        machine = cpu_shares(sys0, sys1)
        foreign = None
        if self.pinning.used and f"cpu{self.pinning.server_cpu}" in machine:
            busy = machine[f"cpu{self.pinning.server_cpu}"]["busy"]
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

    async def redis_counters(self) -> dict[str, int]:
        """Counters that tell whether Redis forked or waited on the disk during a block, how
        many commands the servers' clients ran (`tot-cmds` of CLIENT LIST: a script call counts
        with every command it runs), how many script calls and how many PUBLISH there were."""
        assert self.redis is not None
        info = await self.redis.info("all")
        names = ("total_forks", "aof_rewrites", "aof_delayed_fsync", "aof_rewrite_in_progress")
        out = {k: int(info[k]) for k in names if k in info}
        for cmd in ("publish", "evalsha"):
            stat = info.get(f"cmdstat_{cmd}")
            out[f"{cmd}_calls"] = int(stat["calls"]) if isinstance(stat, dict) else 0
        for client in await self.redis.client_list():
            if "tot-cmds" in client and not str(client.get("name", "")).startswith("bench-"):
                out[f"client:{client['id']}"] = int(client["tot-cmds"])
        return out

    @staticmethod
    def describe(b: Block) -> str:
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
        ] + [
            f"{cpu} iowait {v['iowait']:.0%}" for cpu, v in b.machine.items() if v["iowait"] >= 0.02
        ]
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

    async def paired(self, name: str, a: Side, b: Side) -> PairedResult:
        args = self.args
        result = PairedResult(name, a.label, b.label, [], [], [], [])
        if args.warmup > 0:
            for side in (a, b):
                blk = await self.run_block(side, args.warmup, f"w{side.label}")
                result.warmup.append(blk)
                progress(f"{name} warm-up: {self.describe(blk)}")
                await asyncio.sleep(args.pause)
        for i in range(args.pairs):
            ba = await self.run_block(a, args.seconds, f"{i}a")
            await asyncio.sleep(args.pause)
            bb = await self.run_block(b, args.seconds, f"{i}b")
            await asyncio.sleep(args.pause)
            ratio = bb.rate / ba.rate if ba.rate else float("nan")
            cpu_ratio = bb.cpu_norm / ba.cpu_norm if ba.cpu_norm else float("nan")
            result.a_blocks.append(ba)
            result.b_blocks.append(bb)
            result.ratios.append(ratio)
            result.cpu_ratios.append(cpu_ratio)
            dry = f"  QUEUE RAN DRY {bb.idle_ops} times" if bb.idle_ops else ""
            progress(
                f"{name} pair {i + 1}/{args.pairs}: {self.describe(ba)} | {self.describe(bb)}"
                f"  ratio {ratio:.2f}{dry}"
            )
        self.errors += result.errors()
        if args.profile:
            for side in (a, b):
                result.profiles[side.label] = await self.profile_block(name, side)
        return result

    async def profile_block(self, name: str, side: Side) -> dict[str, Any]:
        """One more block (not counted) with py-spy sampling the server under test."""
        py_spy = profiling.find_py_spy()
        if py_spy is None:
            progress("profile: py-spy not found (pip install py-spy); skipped")
            return {}
        seconds = self.args.seconds
        out_dir = Path(self.args.output_dir)  # made by main()
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        path = out_dir / f"profile-{stamp}-{name}-{side.label}.folded"
        spy = await asyncio.create_subprocess_exec(
            *[py_spy, "record", "--pid", str(side.target.pid), "--rate", "200"],
            *["--duration", str(max(1, round(seconds))), "--nonblocking"],
            *["--format", "raw", "--output", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        await asyncio.sleep(0.3)  # attached before the load starts
        block = await self.run_block(side, seconds, f"p{side.label}")
        try:
            _, err = await asyncio.wait_for(spy.communicate(), seconds + 30)
        except TimeoutError:
            spy.kill()
            await spy.wait()
            err = b"py-spy did not finish"
        await asyncio.sleep(self.args.pause)
        if spy.returncode != 0 or not path.exists():
            progress(f"profile {name}/{side.label} failed: {err.decode(errors='replace')[-300:]}")
            return {"error": err.decode(errors="replace")[-300:]}
        summary = profiling.summarise(path)
        summary["file"] = str(path)
        summary["block_rate_while_sampled"] = block.rate
        summary["server_cpu_us_per_message"] = (
            block.server_cpu_s / block.messages * 1e6 if block.messages else None
        )
        print(profiling.format_summary(f"{name}/{side.label}", summary), flush=True)
        return summary

    # ------------------------------------------------------------------ sides

    def anchor_side(self) -> Side:
        assert self.anchor is not None and self.redis is not None
        target = Target("anchor", self.anchor.port, self.anchor.pid)
        redis = self.redis
        body = self.json_body

        async def prepare(tag: str) -> Operation:
            stream = f"{self.run_id}-{tag}"
            await redis.unlink(f"bench:anchor:{stream}")
            raw = build_request(
                "POST", f"/xadd/{stream}", {"Content-Type": "application/json"}, body
            )

            async def op(conn: Connection) -> int:
                expect(await conn.request(raw), 201)
                return 1

            return op

        async def cleanup(tag: str) -> None:
            await redis.unlink(f"bench:anchor:{self.run_id}-{tag}")

        return Side("anchor", target, prepare, cleanup)

    def node1_target(self) -> Target:
        assert self.node1 is not None
        return Target("node1", self.node1.port, self.node1.pid)

    def send_side(self, label: str, per_request: int) -> Side:
        """Sends of `per_request` 1 KiB messages (1: plain body, more: multipart/mixed)."""
        api = self.api1
        assert api is not None
        if per_request == 1:
            headers, body = OCTET, self.body
        else:
            ctype, body = multipart.encode([(OCTET, self.body) for _ in range(per_request)])
            headers = {"Content-Type": ctype}

        async def prepare(tag: str) -> Operation:
            queue = self.q(f"{label}-{tag}")
            await api.create_queue(queue)
            raw = build_request("POST", f"/messages/{queue}", headers, body)

            async def op(conn: Connection) -> int:
                expect(await conn.request(raw), 201)
                return per_request

            return op

        async def cleanup(tag: str) -> None:
            queue = self.q(f"{label}-{tag}")
            await api.delete_queue(queue)
            self.queues.discard(queue)

        return Side(label, self.node1_target(), prepare, cleanup)

    def recv_side(self, queue: str) -> tuple[Side, dict[str, Any]]:
        api = self.api1
        assert api is not None and self.node1 is not None
        port = self.node1.port
        state: dict[str, Any] = {"rate": 1000.0, "refills": [], "dry": 0}
        get_raw = build_request("GET", f"/messages/{queue}", {"X-MQS-MAX-MESSAGES": "1"})
        delete_head = b"DELETE /messages/"
        delete_tail = b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        ctype, batch100 = multipart.encode([(OCTET, self.body) for _ in range(100)])
        batch_raw = build_request("POST", f"/messages/{queue}", {"Content-Type": ctype}, batch100)

        async def prepare(tag: str) -> Operation:
            seconds = self.args.warmup if tag.startswith("w") else self.args.seconds
            # Enough for the block at 2.5 times the last rate seen, so it never runs dry.
            need = min(300_000, max(5_000, int(state["rate"] * seconds * 2.5)))
            have = await api.visible(queue)
            if have < need:
                batches = (need - have + 99) // 100
                await bulk(port, [batch_raw] * batches, [201], conns=8)
                state["refills"].append({"block": tag, "had": have, "added": batches * 100})

            async def op(conn: Connection) -> int:
                got = await conn.request(get_raw)
                if got.status != 200:
                    expect(got, 200)
                mid = got.headers.get(b"x-mqs-message-id")
                if not mid:
                    if got.headers.get(b"x-mqs-message-count") == b"0":
                        return 0  # the queue ran dry: counted as an idle op
                    raise HttpError("a receive answered without a message id", 200, got.body)
                expect(await conn.request(delete_head + mid + delete_tail), 204)
                return 1

            return op

        async def cleanup(tag: str) -> None:
            return None

        def observe(block: Block) -> None:
            state["rate"] = max(state["rate"], block.rate)
            state["dry"] += block.idle_ops

        side = Side("mqs-recv+delete", self.node1_target(), prepare, cleanup, observe)
        return side, state

    # ------------------------------------------------------------------ workloads

    async def workload_send(self) -> None:
        r = await self.paired("send", self.anchor_side(), self.send_side("mqs-send", 1))
        self.results["send"] = r.to_json()
        self.report_ratio("send", "send 1KiB", r, f"anchor {fmt_rate(r.a_rate)}/s", "target >= 0.5")

    async def workload_recv(self) -> None:
        assert self.api1 is not None
        queue = self.q("recv")
        await self.api1.create_queue(queue)
        # The side learns the rate as it goes, so that each refill is big enough.
        side, state = self.recv_side(queue)
        r = await self.paired("recv", self.anchor_side(), side)
        dry_total = sum(b.idle_ops for b in r.b_blocks)
        left = await self.api1.visible(queue)
        await self.api1.delete_queue(queue)
        self.queues.discard(queue)
        out = r.to_json()
        out.update({"refills": state["refills"], "dry_receives": dry_total, "left": left})
        self.results["recv"] = out
        note = "target >= 0.4" + (f"  (queue ran dry {dry_total} times!)" if dry_total else "")
        self.report_ratio("recv", "receive+delete", r, f"anchor {fmt_rate(r.a_rate)}/s", note)

    async def workload_batch(self) -> None:
        r = await self.paired(
            "batch", self.send_side("mqs-single", 1), self.send_side("mqs-batch10", 10)
        )
        self.results["batch"] = r.to_json()
        self.report_ratio(
            "batch",
            "batch 10x1KiB",
            r,
            f"single {fmt_rate(r.a_rate)}/s",
            "target >= 5x",
            suffix="x",
        )

    def report_ratio(
        self, key: str, title: str, r: PairedResult, other: str, target: str, suffix: str = ""
    ) -> None:
        status = verdict(key, r.ratio)
        disturbed = sum(
            1
            for a, b in zip(r.a_blocks, r.b_blocks, strict=True)
            if max(a.foreign_load or 0.0, b.foreign_load or 0.0) >= DISTURBED
        )
        if disturbed:
            target += f"  ({disturbed} of {len(r.ratios)} pairs disturbed by other load)"
        line = (
            f"{title}: {fmt_rate(r.b_rate)} msg/s (cpu-norm {fmt_rate(r.b_cpu_norm)}/s)  "
            f"{other}  ratio {r.ratio:.2f}{suffix} (min {min(r.ratios):.2f}, "
            f"max {max(r.ratios):.2f}; {len(r.ratios)} pairs)  {target}  {status}"
        )
        self.lines.append(line)
        print(line, flush=True)
        self.results[key]["target"] = TARGETS[key][1]
        self.results[key]["status"] = status
        self.results[key]["pairs_disturbed_by_other_load"] = disturbed
        self.summary.append(
            (
                title,
                f"{r.ratio:.2f}{suffix} ({min(r.ratios):.2f}-{max(r.ratios):.2f})",
                f"{TARGETS[key][0]} {TARGETS[key][1]:g}{suffix}",
                f"{status}  [rate {fmt_rate(r.b_rate)}/s; cpu-norm ratio {r.cpu_ratio:.2f}]",
            )
        )

    async def workload_latency(self) -> None:
        assert self.node1 is not None and self.node2 is not None and self.api1 is not None
        args = self.args
        rounds, park = args.rounds, args.park_ms / 1000
        queue = self.q("longpoll")
        await self.api1.create_queue(queue)
        poll_raw = build_request(
            "GET", f"/messages/{queue}", {"X-MQS-MAX-MESSAGES": "1", "X-MQS-WAIT-TIME": "10"}
        )
        send_raw = build_request("POST", f"/messages/{queue}", OCTET, self.body)
        poll_conn = await Connection(HOST, self.node1.port).open()
        send_conn = await Connection(HOST, self.node2.port).open()
        total: list[float] = []
        after_send: list[float] = []
        send_rtt: list[float] = []
        perf = time.perf_counter

        async def arrival() -> tuple[Response, float]:
            resp = await poll_conn.receive(limit_s=15)
            return resp, perf()

        try:
            # A few unmeasured rounds first (connections, scripts, code paths warm).
            for i in range(-min(20, rounds), rounds):
                await poll_conn.send(poll_raw)
                task = asyncio.create_task(arrival())
                await asyncio.sleep(park)
                if task.done():
                    resp, _ = task.result()
                    raise BenchError(
                        f"the long poll answered before any send: {resp.status} {resp.body[:200]!r}"
                    )
                t0 = perf()
                sent = await send_conn.request(send_raw)
                t1 = perf()
                resp, t2 = await asyncio.wait_for(task, 15)
                expect(sent, 201)
                expect(resp, 200)
                mid = resp.header(b"x-mqs-message-id").decode()
                if mid != json.loads(sent.body)["messageIds"][0]:
                    raise BenchError(f"the long poll got {mid!r}, not the message just sent")
                if i >= 0:
                    total.append((t2 - t0) * 1000)
                    after_send.append((t2 - t1) * 1000)
                    send_rtt.append((t1 - t0) * 1000)
                expect(await poll_conn.request(build_request("DELETE", f"/messages/{mid}")), 204)
                if i >= 0 and (i + 1) % 100 == 0:
                    progress(
                        f"latency: {i + 1}/{rounds} rounds, p50 {percentile(total, 50):.2f} ms "
                        f"p99 {percentile(total, 99):.2f} ms"
                    )
        finally:
            await poll_conn.close()
            await send_conn.close()
        await self.api1.delete_queue(queue)
        self.queues.discard(queue)
        progress(
            f"latency: the send through node 2 itself was answered in p50 "
            f"{percentile(send_rtt, 50):.2f} ms, p99 {percentile(send_rtt, 99):.2f} ms"
        )
        floor = await self.publish_floor(rounds, park)
        # The wake-up is judged from the moment the send is answered (the message is in the
        # queue) to the poll's answer. The end-to-end figure adds the send request itself,
        # which on an idle node of this VM is mostly the cost of waking an idle process.
        p50, p99 = percentile(after_send, 50), percentile(after_send, 99)
        status = verdict("latency", p99)
        line = (
            f"long-poll wake-up (send answered -> poll answered): p50 {p50:.2f} ms "
            f"p99 {p99:.2f} ms (max {max(after_send):.2f}; {len(total)} rounds)  "
            f"end to end from send issued: p50 {percentile(total, 50):.2f} ms "
            f"p99 {percentile(total, 99):.2f} ms  "
            f"floor PUBLISH->subscriber p50 {percentile(floor, 50):.2f} ms "
            f"p99 {percentile(floor, 99):.2f} ms  target p99 <= 5 ms  {status}"
        )
        self.lines.append(line)
        print(line, flush=True)
        self.results["latency"] = {
            "rounds": len(total),
            "park_ms": args.park_ms,
            "send_start_to_poll_answer_ms": _dist(total),
            "send_answer_to_poll_answer_ms": _dist(after_send),
            "send_round_trip_ms": _dist(send_rtt),
            "floor_publish_to_subscriber_ms": _dist(floor),
            "target_p99_ms": TARGETS["latency"][1],
            "status": status,
            "samples_ms": [round(x, 4) for x in total],
        }
        self.summary.append(
            (
                "long-poll wake-up p99",
                f"{p99:.2f} ms (p50 {p50:.2f})",
                "<= 5 ms",
                f"{status}  [end to end p99 {percentile(total, 99):.2f} ms; "
                f"floor p99 {percentile(floor, 99):.2f} ms]",
            )
        )

    async def publish_floor(self, rounds: int, park: float) -> list[float]:
        """Bare redis-py: PUBLISH on one connection -> the subscriber task on another wakes."""
        sub = Redis.from_url(self.redis_url, decode_responses=False, client_name="bench-sub")
        pub = Redis.from_url(self.redis_url, decode_responses=False, client_name="bench-pub")
        channel = f"bench:floor:{self.run_id}"
        pubsub = sub.pubsub()
        await pubsub.subscribe(channel)
        loop = asyncio.get_running_loop()
        waiting: list[asyncio.Future[float]] = []
        perf = time.perf_counter

        async def listen() -> None:
            async for message in pubsub.listen():
                if message.get("type") == "message" and waiting:
                    fut = waiting.pop()
                    if not fut.done():
                        fut.set_result(perf())

        listener = asyncio.create_task(listen())
        out: list[float] = []
        try:
            await asyncio.sleep(0.1)
            for i in range(-min(20, rounds), rounds):
                await asyncio.sleep(park)
                fut: asyncio.Future[float] = loop.create_future()
                waiting.append(fut)
                t0 = perf()
                await pub.publish(channel, b"x")
                t1 = await asyncio.wait_for(fut, 5)
                if i >= 0:
                    out.append((t1 - t0) * 1000)
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await listener
            with contextlib.suppress(Exception):
                await pubsub.aclose()
            await sub.aclose()
            await pub.aclose()
        progress(
            f"floor: PUBLISH->subscriber p50 {percentile(out, 50):.3f} ms "
            f"p99 {percentile(out, 99):.3f} ms ({len(out)} rounds)"
        )
        return out

    async def used_memory(self) -> int:
        assert self.redis is not None
        await asyncio.sleep(self.args.memory_settle)
        values = []
        for _ in range(3):
            info = await self.redis.info("memory")
            values.append(int(info["used_memory"]))
            await asyncio.sleep(0.05)
        return int(statistics.median(values))

    async def workload_memory(self) -> None:
        assert self.api1 is not None and self.node1 is not None
        port = self.node1.port
        n = self.args.memory_messages
        per = 100
        ctype, batch = multipart.encode([(OCTET, self.body) for _ in range(per)])
        # Warm the scripts and the global keys on a throw-away queue first.
        warm = self.q("mem-warm")
        await self.api1.create_queue(warm)
        await bulk(
            port,
            [build_request("POST", f"/messages/{warm}", {"Content-Type": ctype}, batch)],
            [201],
        )
        await self.api1.delete_queue(warm)
        self.queues.discard(warm)

        queue = self.q("mem")
        await self.api1.create_queue(queue)
        before = await self.used_memory()
        raw = build_request("POST", f"/messages/{queue}", {"Content-Type": ctype}, batch)
        await bulk(port, [raw] * (n // per), [201], conns=4)
        sent = (n // per) * per
        after = await self.used_memory()
        per_msg = (after - before) / sent
        progress(f"memory: {sent:,} messages in one queue: +{after - before:,} B")

        # One message in each of many queues.
        nq = self.args.memory_queues
        names = [self.q(f"mq{i}") for i in range(nq)]
        base = await self.used_memory()
        await bulk(
            port, [build_request("PUT", f"/queues/{x}", QUEUE_HEADERS) for x in names], [201]
        )
        created = await self.used_memory()
        await bulk(
            port, [build_request("POST", f"/messages/{x}", OCTET, self.body) for x in names], [201]
        )
        filled = await self.used_memory()
        await bulk(port, [build_request("DELETE", f"/queues/{x}") for x in [*names, queue]], [200])
        for x in [*names, queue]:
            self.queues.discard(x)
        emptied = await self.used_memory()
        per_queue_msg = (filled - created) / nq
        per_queue_total = (filled - base) / nq
        status = verdict("memory", per_msg)
        line = (
            f"memory per 1KiB message: {per_msg:,.0f} B ({sent:,} messages in one queue)  "
            f"target <= 1536 B  {status}"
        )
        line2 = (
            f"memory, 1 message in each of {nq:,} queues: {per_queue_msg:,.0f} B per message, "
            f"{per_queue_total:,.0f} B per queue with its message (info)"
        )
        for text in (line, line2):
            self.lines.append(text)
            print(text, flush=True)
        self.results["memory"] = {
            "messages": sent,
            "used_memory_before": before,
            "used_memory_after": after,
            "bytes_per_message": per_msg,
            "queues": nq,
            "one_per_queue_bytes_per_message": per_queue_msg,
            "one_per_queue_bytes_per_queue_total": per_queue_total,
            "used_memory_base": base,
            "used_memory_queues_created": created,
            "used_memory_queues_filled": filled,
            "used_memory_after_deleting_all": emptied,
            "residual_after_delete_bytes": emptied - before,
            "target_bytes": TARGETS["memory"][1],
            "status": status,
        }
        self.summary.append(("memory per 1KiB message", f"{per_msg:,.0f} B", "<= 1536 B", status))
        self.summary.append(
            (f"memory, 1 msg x {nq:,} queues", f"{per_queue_msg:,.0f} B/msg", "(info)", "")
        )

    # ------------------------------------------------------------------ run

    async def run(self) -> dict[str, Any]:
        selected = self.args.only
        started = datetime.now(UTC)
        loadavg0 = os.getloadavg()
        await self.start()
        await self.sanity()
        steps: dict[str, Callable[[], Awaitable[None]]] = {
            "memory": self.workload_memory,
            "send": self.workload_send,
            "recv": self.workload_recv,
            "batch": self.workload_batch,
            "latency": self.workload_latency,
        }
        for name in WORKLOADS:
            if name in selected:
                progress(f"--- {name}")
                await steps[name]()
        problems = self.node_log_problems()
        return {
            "started": started.isoformat(timespec="seconds"),
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine(loadavg0),
            "options": {k: v for k, v in vars(self.args).items() if k != "only"}
            | {"only": sorted(selected)},
            "pinning": asdict(self.pinning),
            "redis_url": self.redis_url,
            "redis_embedded": self.server is not None,
            "anchor_json": await self.anchor_json_lib(),
            "loadgen_loop": type(asyncio.get_running_loop()).__module__,
            "results": self.results,
            "lines": self.lines,
            "errors": self.errors,
            "server_log_lines": problems[:200],
        }

    async def anchor_json_lib(self) -> str:
        assert self.anchor is not None
        conn = await Connection(HOST, self.anchor.port).open()
        try:
            resp = await conn.request(build_request("GET", "/readyz"))
            return str(json.loads(resp.body).get("json", "?"))
        finally:
            await conn.close()


def _dist(values: list[float]) -> dict[str, float]:
    return {
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "min": min(values),
        "max": max(values),
        "mean": statistics.fmean(values),
    }


def print_summary(bench: Bench) -> None:
    rows = [("workload", "measured", "target", "status"), *bench.summary]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    print("\nSummary", flush=True)
    for i, r in enumerate(rows):
        print(f"  {r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}")
        if i == 0:
            print("  " + "-" * (sum(widths) + 6 + 10))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="What each figure means, and figures measured: bench/README.md.",
    )
    parser.add_argument(
        "--redis-url",
        default="",
        help="use this (loopback) Redis server instead of starting an embedded one; "
        "queues are created and deleted under the names bench-<run id>-*",
    )
    parser.add_argument(
        "--seconds", type=float, default=4.0, help="length of one measured block (default 4)"
    )
    parser.add_argument(
        "--pairs", type=int, default=3, help="anchor/subject block pairs per workload (default 3)"
    )
    parser.add_argument(
        "--warmup", type=float, default=2.0, help="warm-up block length per side (default 2)"
    )
    parser.add_argument(
        "--pause", type=float, default=0.3, help="idle seconds between blocks (default 0.3)"
    )
    parser.add_argument(
        "--connections",
        type=int,
        default=32,
        help="concurrent keep-alive connections of the load generator (default 32)",
    )
    parser.add_argument(
        "--rounds", type=int, default=300, help="long-poll latency rounds (default 300)"
    )
    parser.add_argument(
        "--park-ms",
        type=float,
        default=50.0,
        help="how long the long poll is left parked before the send (default 50)",
    )
    parser.add_argument(
        "--memory-messages",
        type=int,
        default=10_000,
        help="1 KiB messages sent to one fresh queue for the memory figure (default 10000)",
    )
    parser.add_argument(
        "--memory-queues",
        type=int,
        default=1_000,
        help="queues holding one message each for the second memory figure (default 1000)",
    )
    parser.add_argument(
        "--memory-settle",
        type=float,
        default=1.2,
        help="seconds to wait before each used_memory reading (default 1.2)",
    )
    parser.add_argument(
        "--only",
        default=",".join(WORKLOADS),
        help=f"comma-separated workloads to run (default all: {','.join(WORKLOADS)})",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 1.5 s blocks, 1 pair, 0.5 s warm-up, 60 latency rounds, "
        "2000 messages / 200 queues for memory",
    )
    parser.add_argument(
        "--no-pin", action="store_true", help="do not pin processes to CPUs with taskset"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after each throughput workload, run one more block per side (not counted) "
        "with py-spy sampling the server, and print where its CPU time goes",
    )
    parser.add_argument(
        "--keep-tmp",
        action="store_true",
        help="keep the temporary folder (server logs, Redis data and log) for inspection",
    )
    parser.add_argument(
        "--output-dir",
        default=str(BENCH_DIR / "results"),
        help="where to write mqs-<timestamp>.json (default bench/results)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.pairs, args.warmup = 1.5, 1, 0.5
        args.rounds, args.memory_messages, args.memory_queues = 60, 2_000, 200
        args.memory_settle = 0.6
    only = {w.strip() for w in args.only.split(",") if w.strip()}
    unknown = only - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads {sorted(unknown)}; choose from {list(WORKLOADS)}")
    args.only = only
    if not (0.1 <= args.seconds <= 120 and 1 <= args.pairs <= 50 and 0 <= args.warmup <= 120):
        parser.error("--seconds must be 0.1..120, --pairs 1..50, --warmup 0..120")
    if not (1 <= args.connections <= 512 and 1 <= args.rounds <= 100_000):
        parser.error("--connections must be 1..512 and --rounds 1..100000")
    if not (100 <= args.memory_messages <= 1_000_000 and 1 <= args.memory_queues <= 100_000):
        parser.error("--memory-messages must be 100..1000000 and --memory-queues 1..100000")
    if not 1 <= args.park_ms <= 5000:
        parser.error("--park-ms must be 1..5000")
    return args


async def amain(args: argparse.Namespace) -> tuple[Bench, dict[str, Any]]:
    bench = Bench(args)
    try:
        async with asyncio.timeout(RUN_TIMEOUT_S):
            report = await bench.run()
    except BaseException:
        for p in bench.procs:
            tail = p.log_tail(1500).strip()
            if tail:
                print(f"--- {p.name} log (last lines) ---\n{tail}", file=sys.stderr)
        raise
    finally:
        await bench.stop()
    return bench, report


async def run_guarded(bench: Any, part: Awaitable[Any], limit_s: float) -> Any:
    """Run a benchmark's parts within `limit_s` seconds; on a failure show each process's last log
    lines; stop everything it started either way."""
    try:
        async with asyncio.timeout(limit_s):
            return await part
    except BaseException:
        for p in bench.procs:
            tail = p.log_tail(1500).strip()
            if tail:
                print(f"--- {p.name} log (last lines) ---\n{tail}", file=sys.stderr)
        raise
    finally:
        await bench.stop()


def run_report(
    bench: Any, kind: str, started: datetime, loadavg: tuple[float, float, float],
    **extra: Any,
) -> dict[str, Any]:  # fmt: skip
    """The report a long benchmark (scale, capacity) writes: its options, pinning, machine,
    results and what went wrong, with `extra` fields of its own."""
    args = bench.args
    return {
        "benchmark": kind,
        "started": started.isoformat(timespec="seconds"),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": (datetime.now(UTC) - started).total_seconds(),
        "options": {k: v for k, v in vars(args).items() if k != "only"}
        | {"only": sorted(args.only)},
        "pinning": asdict(bench.pinning),
        **extra,
        "machine": machine(loadavg),
        "results": bench.results,
        "lines": bench.lines,
        "errors": bench.errors,
        "server_log_lines": bench.node_log_problems()[:200],
    }


def run_main(
    runner: Callable[[], tuple[Any, dict[str, Any]]], prefix: str,
    failures: tuple[type[BaseException], ...] = (BenchError,),
) -> int:  # fmt: skip
    """A benchmark's exit status: `finish`'s, 2 for a failure it names, 130 interrupted."""
    try:
        bench, report = runner()
    except failures as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return finish(bench, report, prefix)


def machine(loadavg_before: tuple[float, float, float]) -> dict[str, Any]:
    """What a report says of the machine it ran on."""
    return {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "loadavg_before": loadavg_before,
        "loadavg_after": os.getloadavg(),
    }


def finish(bench: Bench, report: dict[str, Any], prefix: str = "mqs") -> int:
    """The summary, the report as <output-dir>/<prefix>-<time>.json, and the exit status:
    1 when errors happened during the run."""
    print_summary(bench)
    out_dir = Path(bench.args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{prefix}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    took = f" (run took {report['seconds'] / 60:.1f} min)" if "seconds" in report else ""
    print(f"\nresults written to {path}{took}")
    if report.get("server_log_lines"):
        print(f"note: the servers logged {len(report['server_log_lines'])} lines (see the JSON)")
    if bench.errors:
        print("errors during the run:", *bench.errors, sep="\n  ", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    Path(args.output_dir).mkdir(parents=True, exist_ok=True)
    try:
        import uvloop

        runner: Callable[[Any], tuple[Bench, dict[str, Any]]] = uvloop.run
    except ImportError:
        runner = asyncio.run
    try:
        bench, report = runner(amain(args))
        return finish(bench, report)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
