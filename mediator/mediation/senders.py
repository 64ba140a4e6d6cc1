"""What each sender has queued here, held to --limit-sender-queued-bytes.

A sender is its connection when it authcrypts the forward, else its client address (as for
the per-minute byte budget, mediator/transport/abuse.py). The node stores each forwarded
message with the sender's tag (`SenderTags`: a keyed hash, so Redis holds no client
addresses), and every script that adds or removes a tagged message records the change in
its own slot (`_lib.lua`, "senders' queued bytes"): in the queue's tally, and in its shard's
pending changes (keys.shard_senders). The worker holding the shard adds those to the
senders' counts about a second later (`SenderBooks.settle`, member `@sb` of the shard's
schedule), and marks a sender whose count is over the limit in keys.senders_over for
`OVER_MS`, again at each settle while it stays over. Each node reads that set at most once
a second (`Refusals`) and answers the sender's forwards 429 with Retry-After.

So a forward costs no Redis call of its own for this limit, and a queue and its sender's
bookkeeping change together atomically. What is eventually consistent is the count: it lags
the queues by a settle (about a second, up to `--hint-poll-seconds` for bytes given back by
a pickup when nothing else in the shard is due), and a refusal reaches the nodes a second
after that. A sender can so go over the limit by what it forwards in those seconds, which
its per-minute byte budget bounds. A worker that dies between taking a shard's changes and
adding them loses them; a sender's count expires once untouched for longer than a message
may wait (`count_ttl_ms`), which bounds how long such a loss can matter.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import time
from typing import Any

from mediator.engine import keys
from mediator.engine.scripts import Scripts
from mediator.errors import RateLimited
from mediator.settings import Settings
from mediator.storage.clients import RedisClient

LABEL = b"mediator sender tags v1"
TAG_BYTES = 9  # 72 bits: no two of a billion senders share a tag but by a 1-in-10^4 chance
OVER_MS = 30_000  # how long a settle's verdict "over the limit" holds without another
REFRESH_SECONDS = 1.0  # how often a node reads the senders over the limit
MOST_OVER = 100_000  # refusals a node reads at once (each is a sender with > limit queued)
DAY_MS = 86_400_000
TOO_MUCH = "this sender has more than {} queued here: try again once its recipients took some"


class SenderTags:
    """A sender's tag: HMAC-SHA256 under a key derived from the mediator's identity seed
    (the same on every node), cut to 72 bits, in base64url (12 characters)."""

    def __init__(self, seed: bytes) -> None:
        self._key = hmac.new(seed, LABEL, hashlib.sha256).digest()

    def tag(self, sender: str) -> str:
        digest = hmac.new(self._key, sender.encode(), hashlib.sha256).digest()[:TAG_BYTES]
        return base64.urlsafe_b64encode(digest).decode()


def count_ttl_ms(settings: Settings) -> int:
    """A sender's count outlives the longest a message may wait, plus a day."""
    longest = max(settings.queue_duration_limit, settings.queue_duration_max)
    if longest <= 0:  # no limit: a year
        longest = 365 * 86_400
    return longest * 1000 + DAY_MS


class SenderBooks:
    """The workers' side: adds a shard's pending changes to the senders' counts."""

    def __init__(self, redis: RedisClient, scripts: Scripts, settings: Settings) -> None:
        self.redis = redis
        self.scripts = scripts
        self.limit = settings.limit_sender_queued_bytes
        self.ttl_ms = count_ttl_ms(settings)

    async def settle(self, shard: int, now_ms: int) -> int:
        """Add the shard's pending changes to the senders' counts; the senders changed."""
        flat = await self.scripts.call(
            "senders_take",
            [keys.shard_senders(shard), keys.shard_due(shard)],
            [keys.SENDERS_MEMBER],
        )
        changes = [(_text(flat[i]), int(flat[i + 1])) for i in range(0, len(flat), 2)]
        changes = [(tag, delta) for tag, delta in changes if delta != 0]
        if not changes:
            return 0
        pipe = self.redis.pipeline(transaction=False)
        for tag, delta in changes:
            pipe.incrby(keys.sender_queued(tag), delta)
            pipe.pexpire(keys.sender_queued(tag), self.ttl_ms)
        totals = (await pipe.execute())[::2]
        await self._verdicts(changes, totals, now_ms)
        return len(changes)

    async def _verdicts(
        self, changes: list[tuple[str, int]], totals: list[Any], now_ms: int
    ) -> None:
        over: dict[str, int] = {}
        under: list[str] = []
        gone: list[str] = []
        for (tag, delta), raw in zip(changes, totals, strict=True):
            total = int(raw)
            if total <= 0:
                gone.append(keys.sender_queued(tag))
            if self.limit <= 0:
                continue
            if total > self.limit:
                over[tag] = now_ms + OVER_MS
            elif total - delta > self.limit:  # it went under: refused no longer
                under.append(tag)
        if gone:
            pipe = self.redis.pipeline(transaction=False)
            for key in gone:
                pipe.delete(key)
            await pipe.execute()
        if over or under:  # rare: only senders at the limit write to the one shared key
            pipe = self.redis.pipeline(transaction=False)
            if over:
                pipe.zadd(keys.senders_over(), over)
            if under:
                pipe.zrem(keys.senders_over(), *under)
            pipe.zremrangebyscore(keys.senders_over(), "-inf", now_ms)
            await pipe.execute()


class Refusals:
    """The nodes' side: the senders over the limit, read at most once a second."""

    def __init__(self, redis: RedisClient, settings: Settings) -> None:
        self.redis = redis
        self.limit = settings.limit_sender_queued_bytes
        self.reason = TOO_MUCH.format(_size(self.limit))
        self.until: dict[str, float] = {}  # tag -> until when refused (epoch seconds)
        self._read_at = -math.inf
        self._reading = False

    async def check(self, tag: str) -> None:
        """RateLimited when the sender `tag` is over the limit."""
        if self.limit <= 0 or not tag:
            return
        await self._refresh()
        until = self.until.get(tag)
        if until is None:
            return
        left = until - time.time()
        if left > 0:
            raise RateLimited(self.reason, retry_after=max(1, math.ceil(left)))

    async def _refresh(self) -> None:
        now = time.monotonic()
        if self._reading or now - self._read_at < REFRESH_SECONDS:
            return
        self._reading = True
        try:
            rows = await self.redis.zrangebyscore(
                keys.senders_over(), int(time.time() * 1000), "+inf", 0, MOST_OVER, withscores=True
            )
            self.until = {_text(row[0]): float(row[1]) / 1000 for row in rows}
            self._read_at = now
        finally:
            self._reading = False


def _size(n: int) -> str:
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n:,} bytes"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
