"""Network failures for real processes: a node in a network namespace of its own (a veth pair
to the host, where Redis listens on the veth's address) that iptables cuts off from Redis,
a TCP proxy that slows Redis down, and a Redis server that can be stopped, killed, started
again on its append-only file, and filled up (`maxmemory`).

Needs root, `ip` (iproute2) and `iptables` (.ci/run installs them); `require_netns()` says
why it cannot run (skipped on a laptop, a failure with CI=true).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis

from mediator.embedded import EmbeddedServer, free_port
from tests.servers import Node, missing

_names = itertools.count()


def run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=20)


def netns_problem() -> str:
    """Why network namespaces cannot be used here ('' when they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (apt-get install iproute2 iptables)"
    return ""


def require_netns() -> None:
    problem = netns_problem()
    if problem:
        missing(problem)


class Netns:
    """A namespace with a veth pair to the host: `host_ip` on the host's end, `ns_ip` inside.
    `cut(port)` drops every packet between the namespace and that host port (both ways),
    as a partition would; `heal()` lets them through again."""

    def __init__(self) -> None:
        n = next(_names)
        tag = f"{os.getpid() % 10000}x{n}"
        self.name = f"medns{tag}"
        self.host_if, self.ns_if = f"mh{tag}", f"mn{tag}"
        subnet = random.randrange(1, 250)
        self.host_ip, self.ns_ip = f"10.231.{subnet}.1", f"10.231.{subnet}.2"
        self.cut_ports: list[int] = []

    def create(self) -> Netns:
        run("ip", "netns", "add", self.name)
        run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        run("ip", "link", "set", self.ns_if, "netns", self.name)
        run("ip", "addr", "add", f"{self.host_ip}/24", "dev", self.host_if)
        run("ip", "link", "set", self.host_if, "up")
        self.exec("ip", "addr", "add", f"{self.ns_ip}/24", "dev", self.ns_if)
        self.exec("ip", "link", "set", self.ns_if, "up")
        self.exec("ip", "link", "set", "lo", "up")
        return self

    def exec(self, *cmd: str) -> None:
        run("ip", "netns", "exec", self.name, *cmd)

    def prefix(self) -> list[str]:
        """What runs a command inside the namespace."""
        return ["ip", "netns", "exec", self.name]

    def _rules(self, action: str, port: int) -> None:
        self.exec("iptables", action, "OUTPUT", "-p", "tcp", "--dport", str(port), "-j", "DROP")
        self.exec("iptables", action, "INPUT", "-p", "tcp", "--sport", str(port), "-j", "DROP")

    def cut(self, port: int) -> None:
        self._rules("-A", port)
        self.cut_ports.append(port)

    def heal(self) -> None:
        for port in self.cut_ports:
            self._rules("-D", port)
        self.cut_ports.clear()

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError):
            run("ip", "link", "del", self.host_if)  # deletes its peer too
        with contextlib.suppress(subprocess.SubprocessError):
            run("ip", "netns", "del", self.name)


class NetnsNode(Node):
    """`mediator serve` inside a namespace, listening on its address there."""

    def __init__(self, ns: Netns, redis_url: str, **env: str) -> None:
        super().__init__(redis_url, MEDIATOR_HOST=ns.ns_ip, **env)
        self.ns = ns
        self.base = f"http://{ns.ns_ip}:{self.port}"

    def spawn(self) -> None:
        self.proc = subprocess.Popen(
            [*self.ns.prefix(), sys.executable, "-m", "mediator", self.command],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )


class RedisServer(EmbeddedServer):
    """The pip-shipped server with its append-only file on (fsync every second), also
    listening on `also_bind` (a veth's address); it may be stopped, killed and started again
    on the same port and files."""

    def __init__(self, data_dir: Path, also_bind: str = "") -> None:
        super().__init__(data_dir, lock=False)
        self.also_bind = also_bind

    def command(self) -> list[str]:
        cmd = super().command()
        if self.also_bind:
            cmd[cmd.index("--bind") + 1] = f"127.0.0.1 {self.also_bind}"
            cmd[cmd.index("--protected-mode") + 1] = "no"
        return cmd

    def url_for(self, host: str = "127.0.0.1") -> str:
        return f"redis://{host}:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=10)

    def kill(self) -> None:
        """SIGKILL: no chance to flush anything beyond what the kernel already has."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def used_memory(self) -> int:
        with self.client() as c:
            return int(c.info("memory")["used_memory"])

    def set_maxmemory(self, limit: int) -> None:
        with self.client() as c:
            c.config_set("maxmemory", limit)


class DelayProxy:
    """A TCP proxy that holds every chunk for `delay` seconds each way (order kept): a slow
    Redis, or a slow network to it. Runs its own event loop in a thread."""

    def __init__(self, target_port: int, delay: float) -> None:
        self.target_port = target_port
        self.delay = delay
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self.connections = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> DelayProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        return self

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_w), self._pipe(up_r, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        chunks: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await chunks.get()
                if not data:
                    break
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                writer.write(data)
                await writer.drain()

        sender = asyncio.create_task(deliver())
        try:
            while data := await reader.read(65536):
                chunks.put_nowait((time.monotonic() + self.delay, data))
        except OSError:
            pass
        chunks.put_nowait((0.0, b""))
        with contextlib.suppress(OSError):
            await sender
        with contextlib.suppress(OSError):
            writer.close()

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


def port_open(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
        return True
    return False
