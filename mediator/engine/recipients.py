"""The engine calls only recipient (DIDComm) queues need: filtered receives, per-recipient-key
counts, releasing deliveries a closed socket carried, and limit updates.

Recipient queues never have a delay, max receives or a dead letter queue, which is what lets
a filtered receive "park" entries it skips (see receive_filtered.lua).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mediator.engine import keys
from mediator.engine.model import Hold, QueueRef, ReceivedMessage, ReceiveResult, TagStats
from mediator.engine.scripts import Scripts
from mediator.errors import HoldLost, QueueNotFound

RECEIVE_CHUNK = 100  # messages per receive script call: keeps every script short
MAX_RECEIVE_CALLS = 50  # bounds one receive when scripts keep stopping at their purge budget


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RecipientQueues:
    """Mixed into Engine; uses its scripts and its upkeep schedule."""

    scripts: Scripts
    wake_channel: str

    def packed_defaults(self, namespace: str) -> bytes | str:
        raise NotImplementedError

    async def _hint(self, shard: int, due_ms: int) -> None:
        raise NotImplementedError

    async def tag_stats(self, ref: QueueRef, tag: str, *, scan: int = 100_000) -> TagStats:
        """Counts of the messages carrying trace id `tag`; scans at most `scan` entries."""
        qk = keys.queue_keys(ref.qualified)
        r = await self.scripts.call("tag_stats", qk.all, [tag, scan])
        if int(r[0]) == -1:
            raise QueueNotFound(ref.name)
        return TagStats(
            now_ms=int(r[1]),
            messages=int(r[2]),
            visible=int(r[3]),
            bytes=int(r[4]),
            oldest_ms=optional_ms(r[5]),
            newest_ms=optional_ms(r[6]),
            complete=bool(int(r[7])),
        )

    async def set_limits(
        self,
        ref: QueueRef,
        *,
        max_messages: int | None,
        max_bytes: int | None,
        max_message_bytes: int | None,
        retention_seconds: int,
        will_queue: bool,
        visibility_timeout_seconds: int | None = None,
    ) -> None:
        """Replace a queue's limits and retention; upkeep runs soon to apply a shorter one."""

        def opt(value: int | None) -> str:
            return "" if value is None else str(value)

        qk = keys.queue_keys(ref.qualified)
        r = await self.scripts.call(
            "queue_limits",
            qk.all,
            [
                retention_seconds,
                "1" if will_queue else "0",
                opt(visibility_timeout_seconds),
                opt(max_messages),
                opt(max_bytes),
                opt(max_message_bytes),
                ref.qualified,
            ],
        )
        if int(r[0]) == -1:
            raise QueueNotFound(ref.name)
        await self._hint(qk.shard, int(r[1]))

    # ---------------------------------------------------------------- messages

    async def receive_filtered(
        self,
        ref: QueueRef,
        max_messages: int,
        *,
        visibility_timeout_ms: int | None = None,
        tag: str | None = None,
        min_enqueue_ms: int | None = None,
        wait_marker_ms: int = 0,
        hold: Hold | None = None,
    ) -> ReceiveResult:
        """Like receive, but only messages with trace id `tag` and first enqueued at or after
        `min_enqueue_ms` (for queues without delay, max receives or dead letter queue)."""
        qk = keys.queue_keys(ref.qualified)
        hold_keys, hold_args = hold.script_args() if hold is not None else ([], [])
        args = [
            ref.qualified,
            self.wake_channel,
            0,
            "" if visibility_timeout_ms is None else str(visibility_timeout_ms),
            tag or "",
            "" if min_enqueue_ms is None else str(min_enqueue_ms),
            wait_marker_ms,
            "",  # cursor: where the previous call of this receive stopped
            self.packed_defaults(ref.namespace),
            *hold_args,
        ]
        out: list[ReceivedMessage] = []
        now = 0
        next_due: int | None = None
        drained = False
        for _ in range(MAX_RECEIVE_CALLS):
            want = min(RECEIVE_CHUNK, max_messages - len(out))
            args[2] = want
            r = await self.scripts.call("receive_filtered", [*qk.all, *hold_keys], args)
            if int(r[0]) == -1:
                raise QueueNotFound(ref.name)
            if int(r[0]) == -2:
                raise HoldLost(ref.name)
            now, count, more = int(r[1]), int(r[3]), int(r[4])
            args[7] = text(r[5])
            out += [received_message(r[6 + 9 * i : 15 + 9 * i]) for i in range(count)]
            if len(out) >= max_messages or (not more and count < want):
                drained = not more and count < want
                if not out and int(r[2]) >= 0:
                    next_due = int(r[2])
                break
        return ReceiveResult(out, now, next_due, drained)

    async def release(self, ref: QueueRef, message_ids: Sequence[str]) -> int:
        """Make handed-out messages visible again at once, waking waiters on any node."""
        if not message_ids:
            return 0
        qk = keys.queue_keys(ref.qualified)
        released = await self.scripts.call("release", qk.all, [ref.qualified, *message_ids])
        return int(released)

    async def reclaim_inflight(
        self, ref: QueueRef, visibility_timeout_ms: int, most: int = 100
    ) -> list[ReceivedMessage]:
        """Hand out again, with a new deadline, what is handed out and not acknowledged."""
        qk = keys.queue_keys(ref.qualified)
        r = await self.scripts.call("reclaim_inflight", qk.all, [visibility_timeout_ms, most])
        return [received_message(r[6 + 9 * i : 15 + 9 * i]) for i in range(int(r[3]))]


def optional_ms(value: Any) -> int | None:
    return None if int(value) < 0 else int(value)


def received_message(f: Sequence[Any]) -> ReceivedMessage:
    return ReceivedMessage(
        message_id=text(f[0]),
        body=bytes(f[1]),
        content_type=text(f[2]),
        content_encoding=text(f[3]),
        trace_id=text(f[4]),
        published_ms=int(f[5]),
        receives=int(f[6]),
        visible_at_ms=int(f[7]),
    )
