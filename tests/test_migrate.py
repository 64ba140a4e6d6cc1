"""Upgrading from key layout 1: data written by the previous version (its code, taken from
git, run as a real node) is converted by `mediator migrate`, and this version then serves
it: wallets pick up what was queued for them, in-flight and delayed messages and the
dead-letter queue survive, deletes by id follow moved messages, the books equal a recount."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from mediator.client import Recipient, Sender, attachments, mediator_key
from mediator.engine import keys
from mediator.engine.books import read_shards, recount
from mediator.engine.scripts import Scripts
from mediator.storage.clients import Backend
from tests.eventually import redis_ms, until_redis_ms
from tests.mqs_client import create, header_ms, parts, receive, send
from tests.servers import Node, RedisUnderTest, missing

pytestmark = [
    pytest.mark.topology,
    pytest.mark.full,
]  # converted on Sentinel and Redis Cluster too (DUMP/RESTORE)

PREVIOUS = "7900cff"  # the last commit of key layout 1
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def previous_version(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous version's packages, from git."""
    folder = tmp_path_factory.mktemp("layout-1")
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", PREVIOUS, "mediator", "workers"],
        capture_output=True,
    )
    if archive.returncode != 0:
        missing(f"git cannot give commit {PREVIOUS}: {archive.stderr.decode()[:200]}")
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


class OldNode(Node):
    """A node of the previous version: its packages come first on the path (the working
    directory of `python -m`), ahead of this checkout's installed ones."""

    def __init__(self, redis_url: str, code: Path, **env: str) -> None:
        super().__init__(redis_url, **env)
        self.code = code

    def spawn(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mediator", self.command],
            env=self.env,
            cwd=self.code,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )


@pytest.fixture
async def storage(redis_server: RedisUnderTest) -> AsyncIterator[str]:
    """Storage of its own (a new cluster, or a database), empty before and after."""
    url = redis_server.isolated_url()
    await _flush(url)
    yield url
    await _flush(url)


async def _flush(url: str) -> None:
    backend = Backend(url)
    await backend.start()
    try:
        for primary in backend.primaries():
            await primary.flushdb()
    finally:
        await backend.aclose()


def _migrate(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mediator", "migrate", "--redis-url", url],
        capture_output=True,
        text=True,
        timeout=120,
    )


FAST = {"MEDIATOR_WORKER_TICK_SECONDS": "0.2", "MEDIATOR_STATS_SECONDS": "1"}


async def _server_ms(storage: str) -> int:
    backend = Backend(storage)
    await backend.start()
    try:
        return await redis_ms(backend.client)
    finally:
        await backend.aclose()


async def _until_server_ms(storage: str, at_ms: int) -> None:
    backend = Backend(storage)
    await backend.start()
    try:
        await until_redis_ms(backend.client, at_ms)
    finally:
        await backend.aclose()


async def test_data_of_the_previous_version_is_served_after_migrate(
    storage: str, previous_version: Path
) -> None:
    old = OldNode(
        storage,
        previous_version,
        MEDIATOR_IN_PROCESS_WORKER="false",
        MEDIATOR_DELIVERY_TIMEOUT_SECONDS="2",
    )
    await asyncio.to_thread(old.start)
    try:
        med = await mediator_key(old.base)
        async with httpx.AsyncClient(base_url=old.base, timeout=30) as http:
            # mqs: visible, handed out (visible again after 2 s), delayed, dead-lettered.
            await create(http, "plain", visibility=2)
            plain = [await send(http, "plain", b"p%d" % i) for i in range(3)]
            [taken] = await receive(http, "plain")
            await create(http, "later", delay=600)
            later = await send(http, "later", b"later")
            await create(http, "dlq")
            await create(http, "src", max_receives=1, dlq="dlq")
            moved = await send(http, "src", b"doomed")
            assert len(await receive(http, "src")) == 1  # moved to the dead letter queue
        # DIDComm: a wallet with queued messages, one of them delivered and unacknowledged;
        # a wallet not granted mediation.
        wallet = Recipient(old.base, med, "http")
        await wallet.__aenter__()
        await wallet.exchange()
        key = await wallet.mediate()
        sender = Sender(med)
        for n in range(3):
            answer = await http_post(old.base, sender.wrap(key, {"n": n}))
            assert answer.status_code == 202
        handed = attachments(await wallet.delivery_request(limit=1))
        assert len(handed) == 1
        # Its 2 s delivery deadline was set before this reading of the server's clock.
        handed_by = await _server_ms(storage) + 2000
        stranger = Recipient(old.base, med, "http")
        await stranger.__aenter__()
        await stranger.exchange()
    finally:
        old.stop()

    # This version refuses the old layout until it is migrated...
    refused = Node(storage)
    with pytest.raises(RuntimeError, match="mediator migrate"):
        await asyncio.to_thread(refused.start)
    # ...which converts it, once.
    done = await asyncio.to_thread(_migrate, storage)
    assert done.returncode == 0, done.stdout + done.stderr
    # 4 mqs queues and the wallet's; both wallets' connections and our keys on them.
    assert "5 queues, 2 connections, 1 routes, 2 connection keys" in done.stdout, done.stdout
    again = await asyncio.to_thread(_migrate, storage)
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout

    node = Node(storage, **FAST)
    await asyncio.to_thread(node.start)
    try:
        assert await mediator_key(node.base) == med  # the same identity: wallets carry on
        async with httpx.AsyncClient(base_url=node.base, timeout=30) as http:
            listing = (await http.get("/queues")).json()["queues"]
            assert [q["name"] for q in listing] == ["dlq", "later", "plain", "src"], listing
            src = next(q for q in listing if q["name"] == "src")
            assert (src["maxReceives"], src["deadLetterQueue"]) == (1, "dlq")
            # The handed-out one's 2 s deadline (its config in whole seconds, as the previous
            # version wrote it) has passed, and so has the wallet's delivered message's.
            deadline = header_ms(taken, "X-MQS-MESSAGE-VISIBLE-AT")
            await _until_server_ms(storage, max(deadline, handed_by))
            got = {p.headers["x-mqs-message-id"] for p in await receive(http, "plain", 10)}
            handed_out = await _server_ms(storage)  # in flight for 2 s from (before) this
            assert got == set(plain) and taken.headers["x-mqs-message-id"] in got
            status = (await http.get("/queues/later")).json()["status"]
            assert (status["delayedMessages"], status["visibleMessages"]) == (1, 0)
            assert (await http.delete(f"/messages/{later}")).status_code == 204
            # Deleting the dead-lettered message by its id follows it into the DLQ.
            assert (await http.delete(f"/messages/{moved}")).status_code == 204
            empty = await http.get("/messages/dlq", headers={"X-MQS-MAX-MESSAGES": "10"})
            assert parts(empty) == []

        # The wallet, now talking to this node: its three messages wait, the one delivered
        # and not acknowledged too (its 2 s delivery deadline has passed).
        wallet = await _same_wallet(node.base, med, wallet)
        assert (await wallet.status())["message_count"] == 3
        seen: dict[str, object] = {}
        for _ in range(5):
            batch = attachments(await wallet.delivery_request(limit=10))
            if not batch:
                break
            for mid, body in batch:
                seen.setdefault(mid, wallet.open(body))
            await wallet.ack([mid for mid, _ in batch])
            if len(seen) >= 3:
                break
        assert sorted(m["n"] for m in seen.values()) == [0, 1, 2]  # type: ignore[index]
        # New forwards route to the migrated key; its keylist is there.
        assert (await http_post(node.base, sender.wrap(key, {"n": "new"}))).status_code == 202
        [(mid, body)] = attachments(await wallet.delivery_request(limit=10))
        assert wallet.open(body) == {"n": "new"}
        await wallet.ack([mid])
        listed = await wallet.keylist_query()
        assert [k["recipient_key"] for k in listed["keys"]] == [wallet.recipient_keys[key].did_key]
        await wallet.close()
        await stranger.close()
    finally:
        node.stop()

    # The books the migration wrote equal a recount; the unmediated connection still
    # expires. (Once the second of the last deadline is over: the books count a message in
    # flight until the end of its deadline's second, a recount only until the deadline.)
    await _until_server_ms(storage, (handed_out + 2000) // 1000 * 1000 + 1000 + 25)
    backend = Backend(storage)
    await backend.start()
    try:
        ttl = await backend.client.ttl(keys.connection_keys(stranger.verkey).record)
        assert 0 < ttl <= 86400
        shards = range(keys.SHARDS)
        _, books = await read_shards(Scripts(backend.client), shards)
        counted = await recount(backend.client, shards)
        for ns in keys.NAMESPACES:
            for name in ("q", "n", "d", "b", "fl"):
                assert books[ns].values[name] == counted[ns].values[name], (ns, name)
            assert books[ns].oldest_ms == counted[ns].oldest_ms, ns
    finally:
        await backend.aclose()


async def http_post(base: str, envelope: bytes) -> httpx.Response:
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        return await http.post(
            "/", content=envelope, headers={"content-type": "application/didcomm-envelope-enc"}
        )


async def _same_wallet(base: str, med: str, like: Recipient) -> Recipient:
    """The same wallet (keys, connection, registered keys) on another node's address."""
    await like.close()
    wallet = Recipient(base, med, "http")
    await wallet.__aenter__()
    wallet.keys, wallet.mediator = like.keys, like.mediator
    wallet.recipient_keys = like.recipient_keys
    return wallet
