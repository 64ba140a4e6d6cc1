"""What each sender has queued here, held to --limit-sender-queued-bytes.

A sender is its connection when it authcrypts the forward, else its client address (as for
the per-minute byte budget, mediator/mediation/abuse.py). The node stores each forwarded
message with the sender's tag (`SenderTags`: a keyed hash, so Redis holds no client
addresses), and every script that adds or removes a tagged message records the change in
its own slot (`_lib.lua`, "senders' queued bytes"): in the queue's tally, and in its shard's
total for the sender (keys.shard_senders), which it marks changed. The worker holding the
shard copies the changed totals into the senders' counts about a second later
(`SenderBooks.settle`, member `@sb` of the shard's schedule) and lists a sender whose count
is over the limit in keys.senders_over for `OVER_MS`; the worker holding partition 0 reads
the list again every `RECHECK_SECONDS` (`SenderBooks.recheck`), keeping those still over
and dropping the others. A count and the list sit in different slots, so no script reads
one and writes the other: a settle reads the counts of the senders it listed again, and
a recheck renews only senders still listed, so that a sender another worker's settle took
under meanwhile is not left listed (refused). The other way round, a sender just gone over
may miss its listing by such a race; its next forward's settle lists it. Each node reads
the list at most once a second (`Refusals`) and answers the sender's forwards 429 with
Retry-After.

So a forward costs no Redis call of its own for this limit, and a queue and its sender's
bookkeeping change together atomically. The count lags the queues by a settle (about a
second), and a refusal reaches the nodes a second after that: a sender can go over the
limit by what it forwards in those seconds, which its per-minute byte budget bounds. The
worker copies totals, it does not add changes, and unmarks a sender only once its copy is
current: a worker that dies midway, or a copy made twice, leaves no error behind.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import math
import time
from typing import Any

from mediator.engine import keys
from mediator.engine.replies import SenderCount, SenderTotal
from mediator.engine.scripts import Scripts
from mediator.errors import RateLimited
from mediator.settings import LimitSettings, QueueSettings
from mediator.storage.clients import STORAGE_ERRORS, RedisClient

log = logging.getLogger(__name__)

LABEL = b"mediator sender tags v1"
TAG_BYTES = 9  # 72 bits: no two of a billion senders share a tag but by a 1-in-10^4 chance
OVER_MS = 30_000  # how long a verdict "over the limit" holds unless renewed
RECHECK_SECONDS = 5.0  # how often the listed senders are looked at again (partition 0's worker)
SETTLE_MS = 1000  # as _lib.lua's: a settle left with senders marked comes back this soon
RETRY_MS = 10_000  # a taken settle comes back after this unless it is done
MOST_TAKEN = 1000  # senders one settle takes (more: another settle right after)
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


def count_ttl_ms(queue: QueueSettings) -> int:
    """A sender's count outlives the longest a message may wait, plus a day."""
    longest = max(queue.duration_limit, queue.duration_max)
    if longest <= 0:  # no limit: a year
        longest = 365 * 86_400
    return longest * 1000 + DAY_MS


class SenderBooks:
    """The workers' side: copies a shard's changed totals into the senders' counts."""

    def __init__(
        self, redis: RedisClient, scripts: Scripts, limits: LimitSettings, queue: QueueSettings
    ) -> None:
        self.redis = redis
        self.scripts = scripts
        self.limit = limits.sender_queued_bytes
        self.ttl_ms = count_ttl_ms(queue)

    async def settle(self, shard: int, now_ms: int) -> int:
        """Copy the changed senders' totals in the shard; how many senders."""
        books = [keys.shard_senders(shard), keys.shard_senders_changed(shard)]
        books.append(keys.shard_due(shard))
        totals = SenderTotal.decode_all(
            await self.scripts.call(
                "senders_take", books, [keys.SENDERS_MEMBER, now_ms + RETRY_MS, MOST_TAKEN]
            )
        )
        if not totals:
            return 0
        counts = await self.scripts.pipeline(
            [
                ("sender_count", [keys.sender_queued(t.tag)], [shard, t.total, self.ttl_ms])
                for t in totals
            ]
        )
        await self._verdicts(
            [
                (t.tag, c.now, c.before)
                for t, c in zip(totals, map(SenderCount.decode, counts), strict=True)
            ],
            now_ms,
        )
        done = [v for t in totals for v in (t.tag, t.total)]
        await self.scripts.call(
            "senders_done", books, [keys.SENDERS_MEMBER, now_ms + SETTLE_MS, *done]
        )
        return len(totals)

    async def _verdicts(self, counts: list[tuple[str, int, int]], now_ms: int) -> None:
        """List the senders over the limit, unlist those that went under it (rare: only
        senders at the limit write to the one shared key)."""
        if self.limit <= 0:
            return
        over = {tag: now_ms + OVER_MS for tag, now, _ in counts if now > self.limit}
        under = [tag for tag, now, before in counts if now <= self.limit < before]
        if over or under:
            pipe = self.redis.pipeline(transaction=False)
            if over:
                pipe.zadd(keys.senders_over(), over)
            if under:
                pipe.zrem(keys.senders_over(), *under)
            await pipe.execute()
        if over:
            await self._unlist_under(list(over))

    async def _unlist_under(self, listed: list[str]) -> None:
        """Unlist those of the senders just listed whose count is now under the limit: a
        settle of another of their shards (another worker) took them under, and unlisted
        them, between this settle's copy and its listing."""
        under = [
            t for t, c in zip(listed, await self._counts(listed), strict=True) if c <= self.limit
        ]
        if under:
            await self.redis.zrem(keys.senders_over(), *under)

    async def _counts(self, tags: list[str]) -> list[int]:
        pipe = self.redis.pipeline(transaction=False)
        for tag in tags:
            pipe.hget(keys.sender_queued(tag), keys.SENDER_QUEUED_SUM)
        return [int(c or 0) for c in await pipe.execute()]

    async def recheck(self, now_ms: int) -> int:
        """The listed senders again, from their counts: those still over stay listed for
        another `OVER_MS`, the others go (also a listing whose settle died before it read
        the count again). Only senders still listed are renewed (ZADD XX): one a settle
        unlisted after the counts were read stays unlisted. How many stay listed."""
        if self.limit <= 0:
            return 0
        listed = [_text(t) for t in await self.redis.zrange(keys.senders_over(), 0, MOST_OVER)]
        if not listed:
            return 0
        counts = await self._counts(listed)
        over = {t: now_ms + OVER_MS for t, c in zip(listed, counts, strict=True) if c > self.limit}
        pipe = self.redis.pipeline(transaction=False)
        if over:
            pipe.zadd(keys.senders_over(), over, xx=True)
        if len(over) < len(listed):
            pipe.zrem(keys.senders_over(), *(t for t in listed if t not in over))
        await pipe.execute()
        return len(over)


class Refusals:
    """The nodes' side: the senders over the limit, read at most once a second."""

    def __init__(self, redis: RedisClient, limits: LimitSettings) -> None:
        self.redis = redis
        self.limit = limits.sender_queued_bytes
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
            raise RateLimited(
                self.reason, retry_after=max(1, math.ceil(left)), limit="sender_queued_bytes"
            )

    async def _refresh(self) -> None:
        """Read the list again when it is a second old. When Redis does not answer, the list
        read last stands (the forward's own call will fail or not on its own)."""
        now = time.monotonic()
        if self._reading or now - self._read_at < REFRESH_SECONDS:
            return
        self._reading = True
        try:
            rows = await self.redis.zrangebyscore(
                keys.senders_over(), int(time.time() * 1000), "+inf", 0, MOST_OVER, withscores=True
            )
            self.until = {_text(row[0]): float(row[1]) / 1000 for row in rows}
        except STORAGE_ERRORS as exc:
            log.warning("could not read the senders over their queued bytes: %s", exc)
        finally:
            self._read_at = now
            self._reading = False


def _size(n: int) -> str:
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n:,} bytes"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
