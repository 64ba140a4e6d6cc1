"""`mediator serve` without MEDIATOR_REDIS_URL: the private embedded server in MEDIATOR_DATA_DIR."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
import redis

from mediator.embedded import free_port
from tests.mqs_client import queue_headers
from tests.servers import Node

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)


def _node(data_dir: Path, tmp_path: Path) -> Node:
    return Node(
        "",
        MEDIATOR_DATA_DIR=str(data_dir),
        MEDIATOR_LOG_LEVEL="info",
        MEDIATOR_WORKER_HEALTH_FILE=str(tmp_path / "worker.health"),
    )


def _embedded(node: Node) -> dict:
    """The node's "embedded server started" log line: url, pid, data_dir."""
    for line in node.output().splitlines():
        if line.startswith("{"):
            obj = json.loads(line)
            if obj.get("msg") == "embedded server started":
                return obj
    raise AssertionError(f"no 'embedded server started' line in:\n{node.output()[-2000:]}")


def _dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # exited but not reaped yet (its parent is gone): a zombie is dead too
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _wait(predicate, timeout: float, interval: float = 0.1):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def test_embedded_server_keeps_queues_and_messages_across_restarts(tmp_path: Path):
    data = tmp_path / "data"
    node = _node(data, tmp_path)
    node.start()
    try:
        server = _embedded(node)
        assert Path(server["data_dir"]) == data
        pid, port = int(server["pid"]), urlparse(server["url"]).port
        assert port is not None and _listening(port)
        with httpx.Client(base_url=node.base, timeout=10) as c:
            assert c.get("/readyz").status_code == 200
            r = c.put("/queues/kept", headers=queue_headers(retention=3600, visibility=30))
            assert r.status_code == 201, r.text
            r = c.post(
                "/messages/kept", content=b"still here", headers={"Content-Type": "text/plain"}
            )
            assert r.status_code == 201, r.text
            sent_id = r.json()["messageIds"][0]
        aof = data / "appendonlydir"
        assert aof.is_dir(), sorted(p.name for p in data.iterdir())
        assert any(p.name.endswith(".aof") for p in aof.iterdir()), sorted(aof.iterdir())
    finally:
        node.stop()

    assert _wait(lambda: _dead(pid), timeout=5), f"embedded server {pid} outlived its node"
    assert not _listening(port)

    again = _node(data, tmp_path)
    again.start()
    try:
        assert _embedded(again)["pid"] != pid
        with httpx.Client(base_url=again.base, timeout=10) as c:
            q = c.get("/queues/kept")
            assert q.status_code == 200
            assert q.json()["retentionSeconds"] == 3600
            assert q.json()["status"]["messages"] == 1
            r = c.get("/messages/kept", headers={"X-MQS-MAX-MESSAGES": "1"})
            assert r.status_code == 200
            assert r.content == b"still here"
            assert r.headers["X-MQS-MESSAGE-ID"] == sent_id
            assert r.headers["content-type"] == "text/plain"
    finally:
        again.stop()


def test_second_node_on_the_same_data_dir_refuses_to_start(tmp_path: Path):
    data = tmp_path / "data"
    first = _node(data, tmp_path)
    first.start()
    try:
        pid = int(_embedded(first)["pid"])
        env = {**first.env, "MEDIATOR_PORT": str(free_port())}
        second = subprocess.run(
            [sys.executable, "-m", "mediator", "serve"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert second.returncode != 0
        assert "MEDIATOR_DATA_DIR" in second.stderr, second.stderr
        assert "Traceback" not in second.stderr
        # The first node and its server are untouched.
        assert not _dead(pid)
        with httpx.Client(base_url=first.base, timeout=10) as c:
            assert c.get("/readyz").status_code == 200
            assert c.put("/queues/still-fine", headers=queue_headers()).status_code == 201
    finally:
        first.stop()


def test_embedded_server_dies_with_a_killed_node(tmp_path: Path):
    node = _node(tmp_path / "data", tmp_path)
    node.start()
    pid = 0
    try:
        server = _embedded(node)
        pid, port = int(server["pid"]), urlparse(server["url"]).port
        assert port is not None and _listening(port)
        assert node.proc is not None
        node.proc.kill()
        node.proc.wait()
        assert _wait(lambda: _dead(pid), timeout=5), f"embedded server {pid} outlived its node"
        assert _wait(lambda: not _listening(port), timeout=3)
    finally:
        node.stop()
        if pid and not _dead(pid):  # do not leave an orphan behind when the test fails
            os.kill(pid, signal.SIGKILL)


def test_embedded_server_is_durable_and_never_evicts(tmp_path: Path):
    node = _node(tmp_path / "data", tmp_path)
    node.start()
    try:
        url = _embedded(node)["url"]
        client = redis.Redis.from_url(url, decode_responses=True)
        config = {}
        for name in ("appendonly", "appendfsync", "maxmemory-policy", "bind"):
            config.update(client.config_get(name))
        assert config["appendonly"] == "yes"
        assert config["appendfsync"] == "everysec"
        assert config["maxmemory-policy"] == "noeviction"
        assert config["bind"].split() == ["127.0.0.1"]
        assert urlparse(url).hostname == "127.0.0.1"
        client.close()
    finally:
        node.stop()


def test_the_embedded_server_port_is_one_no_outgoing_connection_takes():
    """A port from bind(0) may be taken by an outgoing connection before the server binds it;
    the embedded server's is picked below the kernel's range for those, and is free."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    assert all(1024 <= p < low for p in ports), (low, sorted(ports))
    assert len(ports) > 1  # picked at random, not one fixed port
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_test_server_whose_port_was_taken_starts_on_another(tmp_path: Path):
    """The topologies' servers (bench/support/topology.py): a server that cannot bind its
    picked port is started again on another instead of being waited for until a timeout."""
    from bench.support.topology import ServerProcess
    from mediator.embedded import default_binary

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        server = ServerProcess(default_binary(), tmp_path / "server")
        server.port = squatter.getsockname()[1]  # taken between the pick and the start
        server.start()
        try:
            assert server.port != squatter.getsockname()[1]
            assert server.client().ping()
        finally:
            server.stop()
