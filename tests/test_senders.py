"""The senders' queued bytes (mediator/mediation/senders.py) at the engine: what a worker's
settle copies, how long a sender stays refused, and what survives a worker that dies
between taking a shard's changes and finishing. Against the real server, on storage of
their own (no node's worker settles or rechecks behind the tests' backs)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from mediator.engine import Engine, QueueConfig, QueueRef, SendMessage, keys
from mediator.errors import RateLimited
from mediator.mediation.senders import (
    OVER_MS,
    REFRESH_SECONDS,
    RETRY_MS,
    Refusals,
    SenderBooks,
    SenderTags,
)
from mediator.settings import Settings
from mediator.storage.clients import Backend, RedisClient
from tests.eventually import eventually, until_redis_ms
from tests.servers import RedisUnderTest, start_binary_server

pytestmark = pytest.mark.engine

LIMIT = 1000
SETTINGS = Settings.of(limit_sender_queued_bytes=LIMIT)
CONFIG = QueueConfig(retention_ms=3_600_000, visibility_timeout_ms=30_000)


@pytest.fixture(scope="module")
def senders_url(redis_server: RedisUnderTest) -> str:
    return redis_server.isolated_url()


@pytest.fixture
async def redis_client(senders_url: str) -> AsyncIterator[RedisClient]:
    """The module's storage, emptied before and after each test."""
    backend = Backend(senders_url)
    await backend.start()
    await backend.client.flushdb()
    yield backend.client
    await backend.client.flushdb()
    await backend.aclose()


@pytest.fixture
def engine(redis_client: RedisClient) -> Engine:
    return Engine(redis_client)


def _queue() -> QueueRef:
    return QueueRef(keys.DIDCOMM_NAMESPACE, "s-" + uuid.uuid4().hex[:10])


def _sender() -> str:
    return "t" + uuid.uuid4().hex[:11]


async def _now(redis: RedisClient) -> int:
    seconds, micros = await redis.time()
    return int(seconds) * 1000 + int(micros) // 1000


async def _send(engine: Engine, ref: QueueRef, sender: str, sizes: list[int]) -> list[str]:
    messages = [SendMessage(b"x" * n, sender=sender) for n in sizes]
    return (await engine.send(ref, messages, create_with=CONFIG)).message_ids


async def _settle(books: SenderBooks, ref: QueueRef, now: int) -> None:
    await books.settle(keys.queue_keys(ref.qualified).shard, now)


async def _count(redis: RedisClient, sender: str) -> int:
    return int(await redis.hget(keys.sender_queued(sender), "@") or 0)


async def _listed(redis: RedisClient, sender: str) -> float | None:
    return await redis.zscore(keys.senders_over(), sender)


async def test_a_sender_stays_refused_while_over_and_is_let_go_once_under(
    engine: Engine, redis_client: RedisClient
) -> None:
    books = SenderBooks(redis_client, engine.scripts, SETTINGS.limits, SETTINGS.queue)
    refusals = Refusals(redis_client, SETTINGS.limits)
    ref, other, sender = _queue(), _queue(), _sender()
    await _send(engine, ref, sender, [400, 400])
    await _send(engine, other, sender, [400])
    now = await _now(redis_client)
    await _settle(books, ref, now)
    await _settle(books, other, now)
    assert await _count(redis_client, sender) == 1200
    assert await _listed(redis_client, sender) == now + OVER_MS
    with pytest.raises(RateLimited) as refused:
        await refusals.check(sender)
    assert "more than 1,000 bytes queued" in refused.value.reason
    assert 1 <= refused.value.retry_after <= OVER_MS // 1000
    # Nobody picks up and nothing changes: long after the first verdict would have run
    # out, the recheck keeps the sender listed.
    later = now + 2 * OVER_MS
    assert await books.recheck(later) >= 1
    assert await _listed(redis_client, sender) == later + OVER_MS
    # The recipient of `ref` takes its two messages: 400 bytes left, under the limit.
    got = await engine.receive(ref, 10)
    await engine.acknowledge(ref, [m.message_id for m in got.messages])
    await _settle(books, ref, later)
    assert await _count(redis_client, sender) == 400
    assert await _listed(redis_client, sender) is None

    async def refused() -> bool:
        try:
            await refusals.check(sender)
        except RateLimited:
            return True
        return False

    # Once the node reads the list again (every REFRESH_SECONDS): nothing raised.
    assert not await eventually(refused, lambda r: not r, within=REFRESH_SECONDS + 5)
    assert sender not in refusals.until


async def test_a_settle_cut_off_after_taking_is_finished_by_the_next(
    engine: Engine, redis_client: RedisClient
) -> None:
    books = SenderBooks(redis_client, engine.scripts, SETTINGS.limits, SETTINGS.queue)
    ref, sender = _queue(), _sender()
    shard = keys.queue_keys(ref.qualified).shard
    books_keys = [keys.shard_senders(shard), keys.shard_senders_changed(shard)]
    books_keys.append(keys.shard_due(shard))
    await _send(engine, ref, sender, [100, 200])
    now = await _now(redis_client)
    # A worker takes the shard's changes and dies before copying them.
    taken = await engine.scripts.call(
        "senders_take", books_keys, [keys.SENDERS_MEMBER, now + RETRY_MS, 1000]
    )
    assert [bytes(v).decode() for v in taken[:2]] == [sender, "300"]
    assert await redis_client.zscore(keys.shard_due(shard), keys.SENDERS_MEMBER) == now + RETRY_MS
    assert await _count(redis_client, sender) == 0
    # The next settle (the retry the take scheduled) copies them; a copy made twice
    # changes nothing.
    await books.settle(shard, now + RETRY_MS)
    assert await _count(redis_client, sender) == 300
    again = await engine.scripts.call(
        "sender_count", [keys.sender_queued(sender)], [shard, 300, 60_000]
    )
    assert [int(v) for v in again] == [300, 300]
    assert await _count(redis_client, sender) == 300
    assert not await redis_client.sismember(keys.shard_senders_changed(shard), sender)


async def test_a_deleted_queue_and_an_expired_message_give_their_bytes_back(
    engine: Engine, redis_client: RedisClient
) -> None:
    books = SenderBooks(redis_client, engine.scripts, SETTINGS.limits, SETTINGS.queue)
    ref, short, sender = _queue(), _queue(), _sender()
    await _send(engine, ref, sender, [300, 300])
    await engine.create_queue(short, QueueConfig(retention_ms=50, visibility_timeout_ms=30_000))
    await engine.send(short, [SendMessage(b"y" * 250, sender=sender)])
    now = await _now(redis_client)
    await _settle(books, ref, now)
    await _settle(books, short, now)
    assert await _count(redis_client, sender) == 850
    await engine.delete_queue(ref, cascade=False)
    await _settle(books, ref, now)
    assert await _count(redis_client, sender) == 250
    # Past its retention, the receive that finds it purges it.
    await until_redis_ms(redis_client, now + 50)
    assert (await engine.receive(short, 1)).messages == []
    await _settle(books, short, await _now(redis_client))
    assert await _count(redis_client, sender) == 0
    assert not await redis_client.exists(keys.sender_queued(sender))


class _RacedPipeline(Pipeline):
    def __init__(self, client: ListingRaced, transaction: bool, shard_hint: str | None) -> None:
        super().__init__(client.connection_pool, client.response_callbacks, transaction, shard_hint)
        self.client = client

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        await self.client.before([args for args, _ in self.command_stack])
        return await super().execute(raise_on_error)


class ListingRaced(Redis):
    """A real client on the module's storage that runs `race` once, just before the first
    command that writes a sender into keys.senders_over (ZADD): another worker's steps,
    landing between the books' reading of a count and their listing of the sender."""

    def __init__(self, redis: RedisClient, race: Callable[[], Awaitable[None]]) -> None:
        assert isinstance(redis, Redis)
        super().__init__(connection_pool=redis.connection_pool)
        self.race = race
        self.raced = False

    async def before(self, commands: list[tuple[Any, ...]]) -> None:
        listing = any(str(c[0]).upper() == "ZADD" and c[1] == keys.senders_over() for c in commands)
        if listing and not self.raced:
            self.raced = True
            await self.race()

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        await self.before([args])
        return await super().execute_command(*args, **options)

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        return _RacedPipeline(self, transaction, shard_hint)


@pytest.fixture
async def race_storage(redis_client: RedisClient, tmp_path: Path) -> AsyncIterator[RedisClient]:
    """Where a race is staged: the module's storage, or on a Redis Cluster (whose client
    stages nothing: its commands go to each slot's primary) a server of the test's own; the
    books' steps are the same on either."""
    if isinstance(redis_client, Redis):
        yield redis_client
        return
    server = start_binary_server(tmp_path / "redis")
    backend = Backend(server.url)
    await backend.start()
    try:
        yield backend.client
    finally:
        await backend.aclose()
        server.stop()


async def _not_refused(redis: RedisClient, sender: str) -> bool:
    """What a node that reads the list now answers the sender's forwards."""
    try:
        await Refusals(redis, SETTINGS.limits).check(sender)
    except RateLimited:
        return False
    return True


async def test_a_recheck_does_not_list_again_a_sender_a_settle_let_go_meanwhile(
    race_storage: RedisClient,
) -> None:
    """The recheck reads the count (over), the settle of the recipient's pickup unlists
    the sender (under), then the recheck writes: the sender stays let go."""
    redis_client, engine = race_storage, Engine(race_storage)
    books = SenderBooks(redis_client, engine.scripts, SETTINGS.limits, SETTINGS.queue)
    ref, sender = _queue(), _sender()
    await _send(engine, ref, sender, [600, 600])
    now = await _now(redis_client)
    await _settle(books, ref, now)
    assert await _listed(redis_client, sender) == now + OVER_MS
    got = await engine.receive(ref, 1)
    await engine.acknowledge(ref, [m.message_id for m in got.messages])

    async def pickup_settled() -> None:
        await _settle(books, ref, now + 1)
        assert await _count(redis_client, sender) == 600
        assert await _listed(redis_client, sender) is None

    racing = ListingRaced(redis_client, pickup_settled)
    await SenderBooks(racing, engine.scripts, SETTINGS.limits, SETTINGS.queue).recheck(now + 2)
    assert racing.raced
    assert await _listed(redis_client, sender) is None
    assert await _not_refused(redis_client, sender)


async def test_a_settle_does_not_list_a_sender_another_shard_s_settle_let_go_meanwhile(
    race_storage: RedisClient,
) -> None:
    """Two workers settle a sender's two shards at once: one copies a total that leaves
    the sender over, the other one that takes it under and unlists it, then the first
    lists it: the sender ends up let go."""
    redis_client, engine = race_storage, Engine(race_storage)
    books = SenderBooks(redis_client, engine.scripts, SETTINGS.limits, SETTINGS.queue)
    ref, other, sender = _queue(), _queue(), _sender()
    while keys.queue_keys(other.qualified).shard == keys.queue_keys(ref.qualified).shard:
        other = _queue()
    await _send(engine, ref, sender, [100, 500])
    await _send(engine, other, sender, [600])
    now = await _now(redis_client)
    await _settle(books, ref, now)
    await _settle(books, other, now)
    assert await _count(redis_client, sender) == 1200
    for queue in (ref, other):  # the 100 of `ref` and the 600 of `other`
        got = await engine.receive(queue, 1)
        await engine.acknowledge(queue, [m.message_id for m in got.messages])

    async def other_settled() -> None:
        await _settle(books, other, now + 1)
        assert await _count(redis_client, sender) == 500
        assert await _listed(redis_client, sender) is None

    racing = ListingRaced(redis_client, other_settled)
    await _settle(SenderBooks(racing, engine.scripts, SETTINGS.limits, SETTINGS.queue), ref, now)
    assert racing.raced
    assert await _count(redis_client, sender) == 500
    assert await _listed(redis_client, sender) is None
    assert await _not_refused(redis_client, sender)


def test_a_tag_is_the_same_on_every_node_and_hides_the_address() -> None:
    seed = bytes(range(32))
    one, two = SenderTags(seed), SenderTags(seed)
    tag = one.tag("203.0.113.7")
    assert tag == two.tag("203.0.113.7") and len(tag) == 12
    assert "203" not in tag and tag != one.tag("203.0.113.8")
    assert SenderTags(bytes(32)).tag("203.0.113.7") != tag
