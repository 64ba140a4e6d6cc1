"""`mediator import` as an operator runs it: the command, into a Redis of its own (the
embedded server in a fresh --data-dir, a fresh Sentinel set, a fresh Redis Cluster), its
report, its one-line refusals, a second run, a run killed halfway; then a node on that Redis
serving an imported wallet. The stores are made in the real records' format
(bench/support/askar_stores.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio

from bench.support.askar_stores import (
    AcapyPlan,
    AcapyTruth,
    CredoPlan,
    make_acapy_store,
    make_credo_store,
)
from mediator.client import Sender
from mediator.didcomm.keys import KeyPair
from mediator.engine import keys
from tests.didcomm_peer import ENVELOPE, attachments, connected_peer, message
from tests.inprocess import AppNode
from tests.servers import database_url
from tests.test_imports import _mobile
from tests.topologies import LocalCluster, SentinelSet

pytestmark = pytest.mark.full


def _run(
    *args: str, data: Path, redis_url: str = "", timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MEDIATOR_DATA_DIR=str(data), MEDIATOR_REDIS_URL=redis_url)
    return subprocess.run(
        [sys.executable, "-m", "mediator", "import", *args],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def _args(truth: AcapyTruth, kind: str = "acapy", key: str | None = None) -> list[str]:
    return [kind, "--wallet-uri", truth.uri, "--wallet-key", key or truth.pass_key]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> AcapyTruth:
    plan = AcapyPlan(connections=40, recipient_keys=1, seed="test-import-command")
    return asyncio.run(make_acapy_store(tmp_path_factory.mktemp("acapy") / "sqlite.db", plan))


def _error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1, result
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_an_import_reports_what_it_carried_and_a_second_run_nothing_new(
    store: AcapyTruth, tmp_path: Path
) -> None:
    first = _run(*_args(store), data=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "imported from the acapy mediator's store" in first.stdout
    assert _counts(first.stdout, "connections") == (len(store.connections), 0)
    # Read again by worker processes, as a store of 20,000 wallets or more is: the same.
    second = _run(*_args(store), "--workers", "2", data=tmp_path)
    assert second.returncode == 0, second.stderr
    assert _counts(second.stdout, "connections") == (0, len(store.connections))
    assert _counts(second.stdout, "recipient keys") == _counts(first.stdout, "recipient keys")[::-1]


def test_a_dry_run_says_what_it_would_import_and_writes_nothing(
    store: AcapyTruth, tmp_path: Path
) -> None:
    dry = _run(*_args(store), "--dry-run", data=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("would import")
    real = _run(*_args(store), data=tmp_path)  # still everything to do
    assert "there already" not in real.stdout


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"key": "not-the-key"}, "wrong key"),
        ({"method": "kdf:argon2i:int"}, "was not made with key method"),
        ({"uri": "sqlite:///nonexistent/sqlite.db"}, "no such file"),
        ({"kind": "credo"}, "use `mediator import acapy`"),
    ],
)
def test_a_wrong_store_or_key_is_one_error_line(
    store: AcapyTruth, tmp_path: Path, change: dict[str, str], said: str
) -> None:
    args = _args(store, change.get("kind", "acapy"), change.get("key"))
    if "uri" in change:
        args[2] = change["uri"]
    if "method" in change:
        args += ["--wallet-key-method", change["method"]]
    assert said in _error_line(_run(*args, data=tmp_path))


def test_a_truncated_store_is_one_error_line(store: AcapyTruth, tmp_path: Path) -> None:
    broken = tmp_path / "truncated.db"
    broken.write_bytes(store.path.read_bytes()[: store.path.stat().st_size // 3])
    args = _args(store)
    args[2] = f"sqlite://{broken}"
    assert "error: " in _error_line(_run(*args, data=tmp_path / "data"))


def test_a_redis_of_another_mediator_is_refused(store: AcapyTruth, tmp_path: Path) -> None:
    other = asyncio.run(
        make_credo_store(tmp_path / "credo.db", CredoPlan(connections=3, seed="another"))
    )
    assert _run(*_args(store), data=tmp_path / "data").returncode == 0
    line = _error_line(
        _run("credo", "--wallet-uri", other.uri, "--wallet-key", other.pass_key,
             data=tmp_path / "data")
    )  # fmt: skip
    assert "another mediator's state" in line


@pytest.mark.timeout(600)  # a store of 3,000 wallets and two imports, on a loaded machine
def test_a_run_killed_halfway_and_run_again_imports_everything_once(
    tmp_path: Path, redis_url: str
) -> None:
    wallets = 3000
    plan = AcapyPlan(
        connections=wallets, clients=("sov",), requests=False, seed="test-import-killed",
        key_method="raw", truth_every=0,
    )  # fmt: skip
    truth = asyncio.run(make_acapy_store(tmp_path / "big.db", plan))
    target = _empty_database(redis_url)
    env = dict(os.environ, MEDIATOR_REDIS_URL=target)
    process = subprocess.Popen(
        [sys.executable, "-m", "mediator", "import", *_args(truth)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    written = asyncio.run(_first_wallets(target, process))
    process.kill()  # halfway: after its first wallets were written, long before its last
    process.wait()
    assert written, "the import ended before a wallet was written"
    again = _run(*_args(truth), data=tmp_path / "data", redis_url=target)
    assert again.returncode == 0, again.stderr
    fresh, existing = _counts(again.stdout, "connections")
    assert fresh + existing == wallets and existing > 0 and fresh > 0
    assert asyncio.run(_granted_queues(target)) == wallets  # each once


def _empty_database(redis_url: str) -> str:
    """A database of the session's server no other test uses (the import refuses one that
    holds wallets), emptied."""
    url = database_url(redis_url, "import-command")
    client = redis.Redis.from_url(url)
    client.flushdb()
    client.close()
    return url


async def _granted_queues(url: str) -> int:
    client = redis.asyncio.Redis.from_url(url)
    try:
        pipe = client.pipeline(transaction=False)
        for shard in range(keys.SHARDS):
            pipe.hget(keys.shard_totals(shard, keys.DIDCOMM_NAMESPACE), "q")
        return sum(int(v) for v in await pipe.execute() if v is not None)
    finally:
        await client.aclose()


async def _first_wallets(url: str, process: subprocess.Popen[str]) -> bool:
    """Until the import has written some wallets (True), or ended (False)."""
    while process.poll() is None:
        if await _granted_queues(url) > 0:
            return True
        await asyncio.sleep(0.02)
    return False


def _counts(report: str, name: str) -> tuple[int, int]:
    for line in report.splitlines():
        if line.strip().startswith(name + " "):
            words = line.replace(",", "").replace("(", " ").split()
            fresh = int(words[len(name.split())])
            existing = int(words[len(name.split()) + 1]) if "already" in line else 0
            return fresh, existing
    raise AssertionError(f"no {name} in {report}")


@pytest.fixture(params=["sentinel", "cluster"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    kind = SentinelSet if request.param == "sentinel" else LocalCluster
    started = kind(tmp_path / request.param).start()
    try:
        yield started.url
    finally:
        started.stop()


async def test_an_import_into_sentinel_and_cluster_is_served(
    store: AcapyTruth, deployment: str, tmp_path: Path
) -> None:
    result = await asyncio.to_thread(_run, *_args(store), data=tmp_path, redis_url=deployment)
    assert result.returncode == 0, result.stderr
    printed = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "mediator", "invitation", "--json", "--redis-url", deployment],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert json.loads(printed.stdout)["invitation"] == store.invitations[0].invitation
    node = await AppNode(deployment, "imported").start()
    try:
        c = _mobile(store)[0]
        routing = store.routing_keys[0].verkey
        data = Sender(routing).wrap(c.recipient_keys[0], {"moved": "here"})
        async with node.client() as client:
            assert (await client.post("/", content=data, headers=ENVELOPE)).status_code == 202
        wallet = connected_peer(
            node, c.our_verkey, KeyPair.from_seed(c.their_seed), "http", c.recipient_seeds
        )
        async with wallet:
            [(_, body)] = attachments(await wallet.delivery_request())
            assert wallet.open(body) == {"moved": "here"}
            ping = await wallet.post(wallet.pack(message("trust_ping/1.0/ping")))
            assert wallet.unpack(ping.content)[1] == c.our_verkey
    finally:
        await node.stop()
