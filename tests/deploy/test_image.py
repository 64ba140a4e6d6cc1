"""The images `make image` built, run for real with podman as Kubernetes would run them
(read-only root, only /tmp writable, user 10001, no capabilities): a node mediates, forwards
and delivers, drains on `podman stop`, and exits 0; its embedded default keeps its data in
/data; the capacity image snapshots a Redis; the archives describe themselves correctly."""

from __future__ import annotations

import asyncio
import re
import time
import tomllib
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest
import websockets

from mediator.client import attachments
from mediator.embedded import EmbeddedServer, free_port
from tests.capacity.scenario import parquet_rows
from tests.deploy.podman import ROOT, UID, Podman
from tests.didcomm_peer import LIVE, Peer, forward, mediator_key
from tests.servers import Node, start_binary_server

pytestmark = [pytest.mark.image, pytest.mark.timeout(600)]

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
VERSION: str = PROJECT["version"]
ENTRYPOINT = ["/opt/mediator/bin/mediator"]
DRAIN_SECONDS = 8
STOP_GRACE = 20  # above the drain time, as terminationGracePeriodSeconds must be
TOKEN = "image-test-token"
SEED = "5e0c5cd3b8a04a8b9b2f54c3a1e8d7f60a9b8c7d6e5f40312233445566778899"


@pytest.fixture(scope="module")
def podman() -> Podman:
    return Podman.configured()


@pytest.fixture(scope="module")
def node_image(podman: Podman) -> str:
    return podman.load(podman.archive("mediator", VERSION))


@pytest.fixture(scope="module")
def spark_image(podman: Podman) -> str:
    return podman.load(podman.archive("mediator-spark", VERSION))


@pytest.fixture(scope="module")
def image_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    """The suite's server binary on a free loopback port, which containers on the host's
    network reach as they would a Redis service."""
    server = start_binary_server(tmp_path_factory.mktemp("image-redis"), port=free_port())
    yield server
    server.stop()


def _node_env(redis_url: str, port: int, **extra: str) -> dict[str, str]:
    return {
        "MEDIATOR_REDIS_URL": redis_url,
        "MEDIATOR_PORT": str(port),
        "MEDIATOR_ENDPOINT": f"http://127.0.0.1:{port}",
        **extra,
    }


async def _gauge(base: str, name: str) -> float:
    async with httpx.AsyncClient(timeout=5) as client:
        text = (await client.get(f"{base}/metrics")).text
    found = re.search(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.MULTILINE)
    return float(found[1]) if found else 0.0


async def _until(check: Callable[[], Awaitable[bool]], what: str, within: float = 15) -> None:
    """Polls an async predicate until it holds."""
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, f"not seen within {within} s: {what}"
        await asyncio.sleep(0.05)


async def _readyz_during(base: str, stop: asyncio.Future[float]) -> list[int]:
    """/readyz status codes from now until the node stops answering or has stopped."""
    seen: list[int] = []
    async with httpx.AsyncClient(timeout=2) as client:
        while not stop.done():
            try:
                answer = await client.get(f"{base}/readyz")
            except httpx.HTTPError:
                break
            seen.append(answer.status_code)
            if answer.status_code == 503:
                assert answer.json()["status"] == "draining"
            await asyncio.sleep(0.05)
    return seen


async def test_node_mediates_forwards_delivers_and_drains_on_podman_stop(
    podman: Podman, node_image: str, image_redis: EmbeddedServer
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = _node_env(
        image_redis.url,
        port,
        MEDIATOR_DRAIN_SECONDS=str(DRAIN_SECONDS),
        MEDIATOR_API_TOKENS=TOKEN,
    )
    with podman.container(node_image, env=env) as node:  # the image's CMD: serve --host 0.0.0.0
        await asyncio.to_thread(node.wait_ready, base)
        med = await mediator_key(base)

        # A wallet over HTTP: mediation, a sender's forward, status, delivery, acknowledgement.
        async with Peer(base, med) as wallet:
            key = await wallet.mediate()
            sent = await forward(base, med, key, {"n": "over http"})
            assert sent.status_code == 202
            assert (await wallet.status())["message_count"] == 1
            delivered = attachments(await wallet.deliver())
            assert [wallet.open(body)["n"] for _, body in delivered] == ["over http"]
            after = await wallet.ack([i for i, _ in delivered])
            assert after is not None and after["message_count"] == 0

        # A wallet on a live WebSocket gets the next forward pushed at once.
        live = Peer(base, med, "ws")
        await live.connect()
        await live.exchange()
        key = await live.mediate()
        status = await live.send(LIVE)
        assert status is not None and status["live_delivery"] is True
        assert (await forward(base, med, key, {"n": "live"})).status_code == 202
        pushed = attachments(await live.next_message())
        assert [live.open(body)["n"] for _, body in pushed] == ["live"]
        await live.ack([i for i, _ in pushed])

        plain = await websockets.connect(f"ws://127.0.0.1:{port}/")
        async with httpx.AsyncClient(
            base_url=base, timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}
        ) as mqs:
            queue = "image-" + uuid.uuid4().hex[:8]
            made = await mqs.put(
                f"/queues/{queue}",
                headers={
                    "X-MQS-RETENTION-SECONDS": "600",
                    "X-MQS-VISIBILITY-TIMEOUT-SECONDS": "30",
                },
            )
            assert made.status_code == 201
            # A long poll in flight: the drain waits for it, so /readyz's 503 can be seen.
            long_poll = asyncio.ensure_future(
                mqs.get(
                    f"/messages/{queue}",
                    headers={"X-MQS-MAX-MESSAGES": "1", "X-MQS-WAIT-TIME": "5"},
                )
            )
            await _until(lambda: _waiting(base), "the long poll and both sockets open on the node")

            stop = asyncio.ensure_future(asyncio.to_thread(node.stop, STOP_GRACE))
            readyz = await _readyz_during(base, stop)
            await asyncio.wait_for(plain.wait_closed(), DRAIN_SECONDS)
            assert plain.close_code == 1012  # service restart: reconnect elsewhere
            await asyncio.wait_for(live.ws._closed.wait(), DRAIN_SECONDS)
            answered = await long_poll  # answered, not cut off
            assert answered.status_code in (200, 204)
            took = await stop
        await live.close()

        assert 503 in readyz, readyz
        state = node.state()
        assert state["ExitCode"] == 0, node.logs()[-3000:]
        assert not state["OOMKilled"]
        assert took < DRAIN_SECONDS + 3, f"podman stop took {took:.1f} s"
        logs = node.logs()
        assert re.search(r"draining: 2 sockets, [1-9]\d* requests", logs), logs[-3000:]
        assert "drained: stopping" in logs


async def _waiting(base: str) -> bool:
    return (
        await _gauge(base, "mediator_long_poll_waiters") >= 1
        and await _gauge(base, "mediator_websockets") >= 2
    )


async def test_the_embedded_default_keeps_its_data_in_the_data_volume(
    podman: Podman, node_image: str
) -> None:
    """Without MEDIATOR_REDIS_URL a node runs its own server: with the root read-only it
    writes only to /data, and what it wrote (the mediator's key) survives a new container."""
    volume = "mediator-test-data-" + uuid.uuid4().hex[:8]
    podman("volume", "create", volume)
    try:
        keys = []
        for _ in range(2):
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            env = {"MEDIATOR_PORT": str(port), "MEDIATOR_ENDPOINT": base}
            with podman.container(node_image, env=env, options=["-v", f"{volume}:/data"]) as node:
                await asyncio.to_thread(node.wait_ready, base)
                keys.append(await mediator_key(base))
                assert (await asyncio.to_thread(node.stop, STOP_GRACE)) < 10
                assert node.state()["ExitCode"] == 0, node.logs()[-3000:]
                assert "embedded server started" in node.logs()
        assert keys[0] == keys[1]
        listing = podman.run(
            node_image, "-c", "ls -n /data /data/appendonlydir",
            options=["--entrypoint", "sh", "-v", f"{volume}:/data"],
        )  # fmt: skip
        assert listing.returncode == 0, listing.stderr
        assert "appendonly" in listing.stdout and f" {UID} {UID} " in listing.stdout
    finally:
        podman("volume", "rm", "--force", volume, check=False)


async def test_a_worker_container_serves_metrics_passes_its_check_and_stops(
    podman: Podman, node_image: str, image_redis: EmbeddedServer
) -> None:
    port = free_port()
    env = {
        "MEDIATOR_REDIS_URL": image_redis.url,
        "MEDIATOR_WORKER_METRICS_LISTEN": f"127.0.0.1:{port}",
    }
    with podman.container(node_image, "worker", env=env) as worker:
        metrics = await asyncio.to_thread(worker.wait_answer, f"http://127.0.0.1:{port}/metrics")
        assert "mediator_worker_leases" in metrics.text

        async def healthy() -> bool:  # the health file in /tmp is touched on a healthy tick
            probe = podman("exec", worker.name, "mediator", "worker", "--check", check=False)
            return probe.returncode == 0

        await _until(healthy, "mediator worker --check exits 0 in the container")
        took = await asyncio.to_thread(worker.stop, STOP_GRACE)
        assert worker.state()["ExitCode"] == 0, worker.logs()[-3000:]
        assert took < 5, f"podman stop took {took:.1f} s"


@pytest.mark.parametrize(
    ("name", "command", "title"),
    [
        ("mediator", ["serve", "--host", "0.0.0.0"], "didcomm-mediator-cluster"),
        ("mediator-spark", ["capacity", "--help"], "didcomm-mediator-cluster capacity jobs"),
    ],
    ids=["node", "spark"],
)
def test_archives_show_user_entrypoint_and_labels(
    podman: Podman, name: str, command: list[str], title: str
) -> None:
    config = podman.config(podman.archive(name, VERSION))["config"]
    assert config["User"] == f"{UID}:{UID}"
    assert config["Entrypoint"] == ENTRYPOINT
    assert config["Cmd"] == command
    assert config["StopSignal"] == "SIGTERM"
    assert config["WorkingDir"] == "/data"
    assert "/data" in config["Volumes"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["HOME"] == "/tmp" and env["MEDIATOR_DATA_DIR"] == "/data"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    labels = config["Labels"]
    oci = "org.opencontainers.image."
    assert labels[oci + "version"] == VERSION
    assert labels[oci + "title"] == title
    assert labels[oci + "licenses"] == PROJECT["license"]["text"]
    assert labels[oci + "description"].startswith(PROJECT["description"])
    assert re.fullmatch(r"[0-9a-f]{40}", labels[oci + "revision"])
    assert datetime.fromisoformat(labels[oci + "created"]).tzinfo is not None
    assert labels[oci + "source"]
    base = (
        "localhost/mediator-spark-base:" if name == "mediator-spark" else "localhost/mediator-base:"
    )
    assert labels[oci + "base.name"].startswith(base)
    if name == "mediator":
        assert set(config["ExposedPorts"]) == {"8080/tcp", "9091/tcp"}
    else:
        assert env["JAVA_HOME"] and env["SPARK_LOCAL_DIRS"].startswith("/tmp/")


def test_the_node_image_has_no_compiler_and_no_pip(podman: Podman, node_image: str) -> None:
    probe = podman.run(
        node_image,
        "-c",
        "for t in gcc cc c++ make ld as pip pip3; do command -v $t || true; done; "
        "ls /opt/mediator/bin; dpkg-query -W -f '${Package}\\n'",
        options=["--entrypoint", "sh"],
    )
    assert probe.returncode == 0, probe.stderr
    lines = probe.stdout.split()
    assert not [line for line in lines if line.startswith("/")], probe.stdout  # no tool found
    assert "mediator" in lines and not [b for b in lines if b.startswith("pip")]
    for package in ("gcc", "gcc-12", "cpp", "binutils", "make", "libc6-dev", "build-essential"):
        assert package not in lines


async def test_the_spark_image_snapshots_a_redis_with_a_read_only_root(
    podman: Podman, spark_image: str, image_redis: EmbeddedServer, tmp_path: Path
) -> None:
    # A recipient with two messages waiting, stored through a node of the host.
    node = Node(image_redis.url, MEDIATOR_KEY_SEED=SEED, MEDIATOR_IN_PROCESS_WORKER="false")
    await asyncio.to_thread(node.start)
    try:
        med = await mediator_key(node.base)
        async with Peer(node.base, med) as wallet:
            key = await wallet.mediate()
            for n in range(2):
                assert (await forward(node.base, med, key, {"n": n})).status_code == 202
    finally:
        node.stop()
    history = tmp_path / "data"
    history.mkdir()
    history.chmod(0o777)  # written by the container's user 10001
    done = podman.run(
        spark_image,
        "capacity", "snapshot", "--out", "/data/history", "--memory-sample-rate", "1",
        options=[
            "-v", f"{history}:/data",
            "--env", f"MEDIATOR_REDIS_URL={image_redis.url}",
            "--env", f"MEDIATOR_KEY_SEED={SEED}",
        ],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"snapshot \S+: \d+ mailboxes", done.stdout), done.stdout
    rows = parquet_rows(history / "history", "mailboxes")
    assert any(r["namespace"] == "didcomm" and r["stored"] == 2 for r in rows), rows


async def test_the_spark_image_answers_help_with_a_read_only_root(
    podman: Podman, spark_image: str
) -> None:
    done = podman.run(spark_image)  # the image's CMD: capacity --help
    assert done.returncode == 0, done.stderr
    assert "snapshot" in done.stdout and "report" in done.stdout


@pytest.fixture(autouse=True)
def _no_container_left(podman: Podman) -> Iterator[None]:
    """Every test removes what it started, whatever happened."""
    yield
    left = podman("ps", "--all", "--filter", "name=mediator-test-", "--format", "{{.Names}}")
    assert not left.stdout.split(), f"containers left running: {left.stdout}"
