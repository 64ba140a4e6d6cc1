"""The processes a benchmark starts (nodes, the anchor app) and where they run: with two
CPUs and `taskset`, the server under test on one CPU, the load generator (this process),
Redis and the helpers on the other."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness.errors import BenchError
from bench.harness.loadgen import HOST, Connection, HttpError, build_request
from bench.harness.machine import proc_cpu_seconds
from mediator.embedded import die_with_parent


@dataclass
class Pinning:
    used: bool
    load_cpu: int | None = None
    server_cpu: int | None = None
    note: str = ""


def decide_pinning(no_pin: bool) -> Pinning:
    """Where the processes run; pins this process (the load generator) to the load CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    if no_pin:
        return Pinning(used=False, note="disabled with --no-pin")
    if len(cpus) < 2:
        return Pinning(used=False, note=f"only {len(cpus)} CPU available")
    if not shutil.which("taskset"):
        return Pinning(used=False, note="taskset not found")
    # The load generator (this process) and the Redis server it starts share a CPU.
    os.sched_setaffinity(0, {cpus[0]})
    return Pinning(
        used=True,
        load_cpu=cpus[0],
        server_cpu=cpus[1],
        note=(
            f"server under test on cpu {cpus[1]}; load generator, Redis and node 2 on cpu {cpus[0]}"
        ),
    )


def pinned(argv: list[str], cpu: int | None) -> list[str]:
    return argv if cpu is None else ["taskset", "-c", str(cpu), *argv]


async def pin_process(pid: int, cpu: int) -> None:
    """Pin a running process and all its threads (a Redis server) to `cpu`."""
    pin = await asyncio.create_subprocess_exec(
        *["taskset", "-a", "-cp", str(cpu), str(pid)], stdout=subprocess.DEVNULL
    )
    if await asyncio.wait_for(pin.wait(), 10) != 0:
        raise BenchError("taskset could not pin the Redis server")


def base_env() -> dict[str, str]:
    """This process's environment without any MEDIATOR_* setting."""
    return {k: v for k, v in os.environ.items() if not k.startswith("MEDIATOR_")}


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
                preexec_fn=die_with_parent,
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
