"""Abuse limits that hold across the cluster: each is a fixed window's budget kept in Redis
(`rate.lua`, one script call), so a client that spreads its requests over every node gets
no more than from one. Over a budget, a request is refused with `RateLimited`, which says
how long until the window ends (HTTP: 429 and Retry-After).

    handshakes   handshake requests per client address per minute
    connections  new connections per client address per minute
    sender-bytes forwarded bytes per sender (its connection, else its address) per minute

What a sender has queued at once is held by mediator/mediation/senders.py: the forward
checks its verdict here (`forwarded`), and the message is stored with the sender's tag.

Forwards per recipient per second are counted by the send script itself (`_lib.lua`
`send_messages`, with `take_budget` as `rate.lua` uses it), on the forward's own call. The
WebSocket's own limits (messages per second, sockets per address, the deadline for a first
valid message) are kept by each socket (mediator/transport/socket_limits.py).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from mediator.engine import keys
from mediator.engine.replies import BudgetReply
from mediator.engine.scripts import Scripts
from mediator.errors import RateLimited
from mediator.mediation.senders import Refusals, SenderTags
from mediator.networks import proxy_networks, within
from mediator.settings import LimitSettings
from mediator.storage.clients import RedisClient

MINUTE_MS = 60_000
SHARE_OF_BUDGET = 16  # a node counts this share of a sender's budget before asking Redis
LOCAL_SENDERS = 100_000  # senders a node tallies at once (more: every forward asks Redis)


@dataclass(frozen=True)
class Budget:
    kind: str
    amount: int  # per window
    window_ms: int


class Limiter:
    def __init__(
        self, scripts: Scripts, limits: LimitSettings, redis: RedisClient, seed: bytes
    ) -> None:
        self.scripts = scripts
        self.tags = SenderTags(seed)
        self.refusals = Refusals(redis, limits)
        self.handshakes = Budget("hs", limits.handshakes_per_minute, MINUTE_MS)
        self.connections = Budget("cn", limits.connections_per_minute, MINUTE_MS)
        self.sender_bytes = Budget("sb", limits.sender_bytes_per_minute, MINUTE_MS)
        self._bytes = _LocalTally(self.sender_bytes.amount // SHARE_OF_BUDGET)
        self.exempt_networks = limits.exempt_networks
        # Whom a request counts against (mediator/transport/client_address.py).
        self.trusted_proxies = limits.trusted_proxies
        for setting in (limits.trusted_proxies, limits.exempt_networks):
            proxy_networks(setting)  # a malformed list stops the node at its start

    def exempt(self, subject: str) -> bool:
        """Whether `subject` is a client address no per-address limit applies to."""
        return within(subject, self.exempt_networks)

    async def forwarded(self, sender: str, size: int) -> str:
        """A sender's forward of `size` bytes: RateLimited when the sender has more than
        --limit-sender-queued-bytes queued, or is over its budget of bytes a minute; else
        the sender's tag to store with the message ("": not counted). Not a Redis call per
        forward: a node tallies a sender's bytes itself and adds them to the cluster's count
        once they reach 1/16 of the budget, so the cluster may let through up to that much
        more per node than the budget."""
        if self.exempt(sender):
            return ""
        tag = self.tags.tag(sender) if self.refusals.limit > 0 else ""
        await self.refusals.check(tag)
        await self._minute_budget(sender, size)
        return tag

    async def _minute_budget(self, sender: str, size: int) -> None:
        if self.sender_bytes.amount <= 0:
            return
        now = time.monotonic()
        blocked = self._bytes.blocked_for(sender, now)
        if blocked > 0:
            raise _refusal("sb", math.ceil(blocked))
        pending = self._bytes.add(sender, size, now)
        if pending is None:
            return
        try:
            await self.take(self.sender_bytes, sender, pending)
        except RateLimited as exc:
            self._bytes.block(sender, now + exc.retry_after)
            raise

    async def take(self, budget: Budget, subject: str, amount: int = 1) -> None:
        """Use `amount` of `subject`'s budget, or raise RateLimited (nothing used)."""
        if budget.amount <= 0 or self.exempt(subject):
            return
        reply = BudgetReply.decode(
            await self.scripts.call(
                "rate",
                [keys.rate_window(budget.kind, subject)],
                [amount, budget.amount, budget.window_ms],
            )
        )
        if not reply.taken:
            raise _refusal(budget.kind, math.ceil(reply.wait_ms / 1000))

    async def check(self, budget: Budget, subject: str) -> None:
        """Refuse when `subject` has used up its budget, without using any of it."""
        if budget.amount <= 0:
            return
        await self.take(budget, subject, 0)


# Each budget's refusal: what the client is told, and the limit's name in the metrics.
_what = {
    "hs": ("too many handshakes from this address: try again later", "handshakes"),
    "cn": ("too many new connections from this address: try again later", "connections"),
    "sb": (
        "this sender forwarded too many bytes this minute: try again later",
        "sender_bytes_per_minute",
    ),
}


def _refusal(kind: str, retry_after: int) -> RateLimited:
    reason, limit = _what[kind]
    return RateLimited(reason, retry_after=retry_after, limit=limit)


class _LocalTally:
    """Bytes each sender forwarded through this node that the cluster's count has not seen
    yet, for the current minute, and senders refused until a time."""

    def __init__(self, chunk: int) -> None:
        self.chunk = max(1, chunk)
        self.minute = -1
        self.pending: dict[str, int] = {}
        self.blocked: dict[str, float] = {}

    def add(self, sender: str, size: int, now: float) -> int | None:
        """Tally `size`; the bytes to add to the cluster's count now, or None (not yet)."""
        minute = int(now // 60)
        if minute != self.minute:
            self.minute = minute
            self.pending.clear()
        total = self.pending.pop(sender, 0) + size
        if total >= self.chunk or len(self.pending) >= LOCAL_SENDERS:
            return total
        self.pending[sender] = total
        return None

    def blocked_for(self, sender: str, now: float) -> float:
        until = self.blocked.get(sender)
        if until is None:
            return 0.0
        if until <= now:
            del self.blocked[sender]
            return 0.0
        return until - now

    def block(self, sender: str, until: float) -> None:
        if len(self.blocked) >= LOCAL_SENDERS:
            self.blocked.clear()
        self.blocked[sender] = until
