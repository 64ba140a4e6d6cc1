"""Where the servers of a run stand: the nodes of a run on a bulk-loaded plan, more nodes
spread over the CPUs for the cluster workloads, and a Redis Cluster of three primaries on
loopback ports, from the embedded server's binary with its append-only file on. The
tests' deployments (tests/topologies.py) build on the server process and the cluster here."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from bench.harness.loadgen import HOST
from bench.harness.output import progress
from bench.harness.processes import Pinning, Proc
from bench.harness.servers import Servers
from bench.support.bulk_load import Plan
from mediator.embedded import default_binary, die_with_parent, free_port

# What every server of the Redis Cluster runs with, as in production.
DATA_ARGS = ("--appendonly", "yes", "--save", "", "--maxmemory-policy", "noeviction")


async def start_plan_nodes(servers: Servers, plan: Plan) -> None:
    """node1 (in-process worker) and node2 (none), both with the loader's mediator key,
    and the anchor, all on the server CPU."""
    servers.node_env["MEDIATOR_KEY_SEED"] = plan.mediator_seed
    started = time.monotonic()
    await servers.start_trio(servers.pinning.server_cpu, limit_s=120)
    node1, node2, anchor = servers.node1, servers.node2, servers.anchor
    assert node1 is not None and node2 is not None and anchor is not None
    progress(
        f"node1 :{node1.port} (pid {node1.pid}, worker), node2 "
        f":{node2.port} (pid {node2.pid}), anchor :{anchor.port} ready in "
        f"{time.monotonic() - started:.1f} s"
    )


def spread_cpus(pinning: Pinning, count: int) -> dict[str, int | None]:
    """Where node1..node<count> run: spread over the CPUs starting from the server's, so
    node1 and node3 share the server CPU and node2 the load generator's (with Redis)."""
    cpus = [pinning.server_cpu, pinning.load_cpu] if pinning.used else [None]
    return {f"node{i}": cpus[(i - 1) % len(cpus)] for i in range(1, count + 1)}


async def more_nodes(servers: Servers, cpus: dict[str, int | None]) -> list[Proc]:
    """node1, node2 and the nodes named in `cpus` after them, started (no in-process
    worker, like node2) and ready."""
    assert servers.node1 is not None and servers.node2 is not None
    nodes = [servers.node1, servers.node2]
    extra = [servers.node(name, False, cpu) for name, cpu in list(cpus.items())[len(nodes) :]]
    await servers.start(extra)
    progress(", ".join(f"{n.name} :{n.port} (pid {n.pid})" for n in extra) + " ready")
    return nodes + extra


def wait_for(what: str, ok: Callable[[], object], limit_s: float = 20.0) -> None:
    """Poll `ok` until it is true, a Redis or socket error counting as not yet."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            if ok():
                return
        except (redis.RedisError, OSError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


class ServerExited(RuntimeError):
    """The server process ended before it answered."""


class ServerProcess:
    """One server process on a free loopback port (or `port`), its files in `folder`; in a
    cluster (`cluster_bus`) with a free port for the cluster bus too. Its first start may move
    to other ports if the picked ones were taken; a restart keeps them."""

    STARTS = 3  # a picked port can still be taken before the server binds it: pick again

    def __init__(
        self, binary: str, folder: Path, *args: str, port: int = 0, cluster_bus: bool = False
    ) -> None:
        self.binary = binary
        self.folder = folder
        self.port = port or free_port()
        self._port_given = bool(port)
        self.bus_port = free_port() if cluster_bus else 0
        self.args = list(args)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        self.folder.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, self.STARTS + 1):
            try:
                self._spawn()
                wait_for(f"{self.binary} on {self.port}", self._answers)
                self._port_given = True  # known to its peers now: a restart keeps it
                return self
            except ServerExited as exc:
                if self._port_given or attempt == self.STARTS:
                    raise RuntimeError(f"{exc}; its log ends:\n{self.log_tail()}") from exc
                progress(f"{exc}; starting it again on other ports")
                self.port = free_port()
                self.bus_port = free_port() if self.bus_port else 0
        raise AssertionError("unreachable")

    def _spawn(self) -> None:
        bus = ["--cluster-port", str(self.bus_port)] if self.bus_port else []
        self.proc = subprocess.Popen(
            [
                self.binary,
                *self.args,
                *bus,
                *["--bind", HOST, "--port", str(self.port), "--dir", str(self.folder)],
                *["--logfile", str(self.folder / "server.log")],
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent,  # no server outlives a run that was killed
        )

    def _answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise ServerExited(f"{self.binary} on {self.port} exited with {self.proc.returncode}")
        # A short timeout and no retries: if something else listens on the port, the next
        # look sees the server's exit instead of waiting out the default retries.
        probe = redis.Redis(
            host=HOST, port=self.port, socket_connect_timeout=1, socket_timeout=1,
            retry=Retry(NoBackoff(), 0),
        )  # fmt: skip
        try:
            return bool(probe.ping())
        finally:
            probe.close()

    def log_tail(self, lines: int = 5) -> str:
        try:
            return "\n".join((self.folder / "server.log").read_text().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def client(self) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.port, socket_connect_timeout=1, socket_timeout=5)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class LocalCluster:
    """A Redis Cluster of `primaries` primaries (no replicas), the slots split evenly."""

    SLOTS = 16384

    def __init__(self, root: Path, binary: str = "", *, primaries: int = 3) -> None:
        self.binary = binary or default_binary()
        self.nodes = [
            ServerProcess(
                self.binary,
                root / f"node-{i}",
                *DATA_ARGS,
                *["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"],
                *["--cluster-node-timeout", "2000"],
                cluster_bus=True,  # its own free port: port + 10000 can pass 65535
            )
            for i in range(primaries)
        ]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"{HOST}:{n.port}" for n in self.nodes)

    def start(self) -> Self:
        for node in self.nodes:
            node.start()
        share = self.SLOTS // len(self.nodes)
        for i, node in enumerate(self.nodes):
            last = self.SLOTS - 1 if i == len(self.nodes) - 1 else (i + 1) * share - 1
            node.client().execute_command(  # type: ignore[no-untyped-call]
                "CLUSTER", "ADDSLOTSRANGE", i * share, last
            )
        first = self.nodes[0].client()
        for node in self.nodes[1:]:
            first.execute_command("CLUSTER", "MEET", HOST, node.port, node.bus_port)  # type: ignore[no-untyped-call]
        wait_for("the cluster to form", self.formed, limit_s=30)
        return self

    def formed(self) -> bool:
        """Every primary sees the cluster as ok, with all the primaries in it."""
        for node in self.nodes:
            info = node.client().execute_command("CLUSTER", "INFO")  # type: ignore[no-untyped-call]
            fields = dict(line.split(":", 1) for line in info.decode().split() if ":" in line)
            if fields.get("cluster_state") != "ok":
                return False
            if fields.get("cluster_known_nodes") != str(len(self.nodes)):
                return False
        return True

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


async def start_cluster(root: Path) -> LocalCluster:
    """A three-primary cluster under `root`, formed."""
    return await asyncio.to_thread(LocalCluster(root).start)
