"""The servers of a run: a Redis-compatible server (the embedded valkey, AOF everysec,
noeviction, in a temporary folder; or a loopback one given by URL), `mediator serve` nodes
on it and the anchor app (bench/harness/anchor_app.py), with a control client of Redis.
The nodes run without the abuse limits a benchmark names (bench/harness/limits.py). Each
process is ready when `GET /readyz` answers 200; all are stopped together."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from redis.asyncio import Redis

from bench.harness import limits
from bench.harness.conditions import Since, watch
from bench.harness.errors import BenchError
from bench.harness.limits import Limit
from bench.harness.loadgen import HOST, Connection, build_request, check_loopback
from bench.harness.output import progress
from bench.harness.processes import Pinning, Proc, base_env, decide_pinning, pin_process, pinned
from mediator.embedded import EmbeddedServer, free_port


class Servers:
    """Redis, the nodes and the anchor of one run, and its temporary folder (logs, data)."""

    def __init__(self, prefix: str, redis_url: str = "", limits_off: Sequence[Limit] = ()) -> None:
        self.run_id = secrets.token_hex(3)
        self.tmp = Path(tempfile.mkdtemp(prefix=prefix))
        self.pinning = Pinning(used=False)
        self.server: EmbeddedServer | None = None
        self.redis_url = redis_url
        self.client: Redis | None = None
        self.redis_pid: int | None = None
        self.procs: list[Proc] = []
        self.node1: Proc | None = None
        self.node2: Proc | None = None
        self.anchor: Proc | None = None
        self.anchor_port = free_port()  # known to the nodes' settings before it starts
        self.limits_off = tuple(limits_off)  # the abuse limits every node runs without
        self.node_env: dict[str, str] = {}  # settings every node gets on top of the usual

    # ------------------------------------------------------------------ Redis

    def pin(self, no_pin: bool) -> Pinning:
        self.pinning = decide_pinning(no_pin)
        return self.pinning

    @property
    def redis(self) -> Redis:
        """The control client (named bench-ctl: its commands are not the servers')."""
        if self.client is None:
            raise BenchError("Redis is not started")
        return self.client

    async def start_redis(self, socket_timeout: float = 10.0) -> None:
        """The server at the URL given (loopback only, not started, not pinned), or the
        embedded one, pinned with the load generator."""
        if self.redis_url:
            check_loopback(urlsplit(self.redis_url).hostname or "")
        else:
            self.server = EmbeddedServer(self.tmp / "redis", lock=False)
            self.server.start()
            assert self.server.process is not None
            self.redis_pid = self.server.process.pid
            self.redis_url = self.server.url
            if self.pinning.used:
                assert self.pinning.load_cpu is not None
                await pin_process(self.redis_pid, self.pinning.load_cpu)
            progress(f"embedded server {self.server.binary} at {self.redis_url}")
        self.client = Redis.from_url(
            self.redis_url,
            decode_responses=False,
            socket_timeout=socket_timeout,
            client_name="bench-ctl",
        )
        await self.client.ping()

    # ------------------------------------------------------------------ nodes

    def node(self, name: str, in_process_worker: bool, cpu: int | None) -> Proc:
        """A `mediator serve` node on the shared Redis (not started), pinned to `cpu`."""
        port = free_port()
        env = {
            **base_env(),
            "MEDIATOR_REDIS_URL": self.redis_url,
            "MEDIATOR_PORT": str(port),
            "MEDIATOR_HOST": HOST,
            "MEDIATOR_LOG_LEVEL": "warning",
            "MEDIATOR_IN_PROCESS_WORKER": "true" if in_process_worker else "false",
            "MEDIATOR_NODE_ID": f"bench-{name}",
            "MEDIATOR_WORKER_HEALTH_FILE": str(self.tmp / f"{name}.health"),
            **limits.node_env(self.limits_off),
            **self.node_env,
        }
        argv = pinned([sys.executable, "-m", "mediator", "serve"], cpu)
        return Proc(name, argv, env, self.tmp, port)

    def anchor_proc(self, cpu: int | None) -> Proc:
        """The anchor app on `anchor_port` (not started), pinned to `cpu`."""
        argv = [sys.executable, "-m", "bench.harness.anchor_app", "--port", str(self.anchor_port)]
        argv += ["--redis-url", self.redis_url]
        return Proc("anchor", pinned(argv, cpu), base_env(), self.tmp, self.anchor_port)

    async def start(self, procs: Sequence[Proc], limit_s: float = 30.0) -> None:
        """Start `procs` and wait until each is ready."""
        for p in procs:
            p.start()
            self.procs.append(p)
        await asyncio.gather(*(p.wait_ready("/readyz", limit_s) for p in procs))

    async def start_trio(self, node2_cpu: int | None, limit_s: float = 30.0) -> None:
        """node1 (in-process worker on: the server under test) and the anchor on the server
        CPU, node2 (worker off) on `node2_cpu`."""
        progress(limits.shown(self.limits_off))
        cpu = self.pinning.server_cpu
        self.node1 = self.node("node1", True, cpu)
        self.node2 = self.node("node2", False, node2_cpu)
        self.anchor = self.anchor_proc(cpu)
        await self.start([self.node1, self.node2, self.anchor], limit_s)

    async def start_all(self, no_pin: bool) -> None:
        """The usual run: pinning, Redis, then node1 and the anchor on the server CPU and
        node2 with the load generator, said on the console."""
        progress(f"pinning: {self.pin(no_pin).note}")
        if self.redis_url:
            progress(f"using the Redis server at {self.redis_url} (not started, not pinned)")
        await self.start_redis()
        await self.start_trio(self.pinning.load_cpu)
        node1, node2, anchor = self.node1, self.node2, self.anchor
        assert node1 is not None and node2 is not None and anchor is not None
        progress(
            f"node1 :{node1.port} (pid {node1.pid}), node2 :{node2.port} "
            f"(pid {node2.pid}), anchor :{anchor.port} (pid {anchor.pid}) ready"
        )

    def cpu_pids(self, procs: Sequence[Proc] | None = None) -> dict[str, int]:
        """Pids to measure the CPU of: `procs` (default: every running process) and Redis."""
        chosen = [p for p in self.procs if p.running] if procs is None else procs
        pids = {p.name: p.pid for p in chosen}
        if self.redis_pid:
            pids["redis"] = self.redis_pid
        return pids

    async def watch(self, procs: Sequence[Proc] | None = None) -> Since:
        """CPU of `procs` (node1 and node2 by default), Redis, this process and the machine,
        and Redis's events, from now until the function returned is awaited."""
        if procs is None:
            assert self.node1 is not None and self.node2 is not None
            procs = [self.node1, self.node2]
        return await watch(self.redis, self.cpu_pids(procs))

    def log_problems(self) -> list[str]:
        """What the processes logged (they log warnings and worse only)."""
        lines = []
        for p in self.procs:
            for line in p.log_tail(200_000).splitlines():
                if line.strip():
                    lines.append(f"{p.name}: {line[:300]}")
        return lines

    def print_log_tails(self) -> None:
        for p in self.procs:
            tail = p.log_tail(1500).strip()
            if tail:
                print(f"--- {p.name} log (last lines) ---\n{tail}", file=sys.stderr)

    # ------------------------------------------------------------------ stop

    async def stop_servers(self) -> None:
        """Stop every process and Redis (removing what this run wrote to a Redis it does
        not own)."""
        for p in self.procs:
            p.stop()
        client, self.client = self.client, None
        if client is not None:
            with contextlib.suppress(Exception):
                if self.server is None:  # a server we do not own: remove what we wrote
                    match = f"bench:anchor:{self.run_id}-*"
                    keys = [k async for k in client.scan_iter(match=match)]
                    if keys:
                        await client.unlink(*keys)
            with contextlib.suppress(Exception):
                await client.aclose()
        if self.server is not None:
            self.server.stop()
            self.server = None

    async def stop(self, keep_tmp: bool) -> None:
        await self.stop_servers()
        if keep_tmp:
            progress(f"kept logs and Redis data in {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text as `name{labels}` -> value."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                out[name] = float(value)
    return out


async def node_metrics(node: Proc) -> dict[str, float]:
    """A node's `/metrics`, parsed."""
    conn = await Connection(HOST, node.port, timeout=60).open()
    try:
        answer = await conn.request(build_request("GET", "/metrics"))
    finally:
        await conn.close()
    if answer.status != 200:
        raise BenchError(f"GET /metrics answered {answer.status}")
    return parse_metrics(answer.body.decode())
