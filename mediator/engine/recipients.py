"""The engine calls only recipient (DIDComm) queues need: filtered receives, per-recipient-key
counts, releasing deliveries a closed socket carried, and limit updates.

Recipient queues never have a delay, max receives or a dead letter queue, which is what lets
a filtered receive "park" entries it skips (see receive_filtered.lua).
"""

from __future__ import annotations

from collections.abc import Sequence

from mediator.engine import keys, replies
from mediator.engine.group_commit import GroupCommit
from mediator.engine.model import Hold, QueueRef, ReceivedMessage, ReceiveResult, TagStats
from mediator.engine.replies import Handout, ReceiveCode
from mediator.engine.scripts import Scripts
from mediator.errors import HoldLost, QueueNotFound

RECEIVE_CHUNK = 100  # messages per receive script call: keeps every script short
MAX_RECEIVE_CALLS = 50  # bounds one receive when scripts keep stopping at their purge budget


class RecipientQueues:
    """Mixed into Engine; uses its scripts, its line (group_commit.py: a live socket's
    receives and releases share it with the node's sends) and its upkeep schedule."""

    scripts: Scripts
    group: GroupCommit
    wake_channel: str

    def packed_defaults(self, namespace: str) -> bytes | str:
        raise NotImplementedError

    async def _hint(self, shard: int, due_ms: int) -> None:
        raise NotImplementedError

    async def tag_stats(self, ref: QueueRef, tag: str, *, scan: int = 100_000) -> TagStats:
        """Counts of the messages carrying trace id `tag`; scans at most `scan` entries."""
        qk = keys.queue_keys(ref.qualified)
        stats = replies.tag_stats(await self.scripts.call("tag_stats", qk.all, [tag, scan]))
        if stats is None:
            raise QueueNotFound(ref.name)
        return stats

    async def set_limits(
        self,
        ref: QueueRef,
        *,
        max_messages: int | None,
        max_bytes: int | None,
        max_message_bytes: int | None,
        retention_ms: int,
        will_queue: bool,
        visibility_timeout_ms: int | None = None,
    ) -> None:
        """Replace a queue's limits and retention; upkeep runs soon to apply a shorter one."""

        def opt(value: int | None) -> str:
            return "" if value is None else str(value)

        qk = keys.queue_keys(ref.qualified)
        hint = replies.queue_limits_hint(
            await self.scripts.call(
                "queue_limits",
                qk.all,
                [
                    retention_ms,
                    "1" if will_queue else "0",
                    opt(visibility_timeout_ms),
                    opt(max_messages),
                    opt(max_bytes),
                    opt(max_message_bytes),
                    ref.qualified,
                ],
            )
        )
        if hint is None:
            raise QueueNotFound(ref.name)
        await self._hint(qk.shard, hint)

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
        handoffs: bool = False,
    ) -> ReceiveResult:
        """Like receive, but only messages with trace id `tag` and first enqueued at or after
        `min_enqueue_ms`, or handed out before and due again (for queues without delay, max
        receives or dead letter queue). `handoffs` (with a hold and a wait marker): the
        holding socket's delivery loop takes the messages sends hand it (hand_off in
        _lib.lua) for as long as the marker; the result's `handed` numbers them."""
        qk = keys.queue_keys(ref.qualified)
        hold_keys, hold_args = hold.script_args() if hold is not None else ([], [])
        if handoffs and hold is not None:
            hold_args = [*hold_args, "1"]
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
        handed: int | None = None
        for _ in range(MAX_RECEIVE_CALLS):
            want = min(RECEIVE_CHUNK, max_messages - len(out))
            args[2] = want
            r = Handout.decode_filtered(
                await self.group.call("receive_filtered", [*qk.all, *hold_keys], args)
            )
            if r.code is ReceiveCode.NO_QUEUE:
                raise QueueNotFound(ref.name)
            if r.code is ReceiveCode.HOLD_LOST:
                raise HoldLost(ref.name)
            now, args[7], handed = r.now_ms, r.cursor, r.handed
            out += r.messages
            ended = not r.more and len(r.messages) < want
            if len(out) >= max_messages or ended:
                drained = ended
                if not out:
                    next_due = r.next_due_ms
                break
        return ReceiveResult(out, now, next_due, drained, handed)

    async def release(self, ref: QueueRef, message_ids: Sequence[str]) -> int:
        """Make handed-out messages visible again at once, waking waiters on any node."""
        if not message_ids:
            return 0
        qk = keys.queue_keys(ref.qualified)
        released = await self.group.call("release", qk.all, [ref.qualified, *message_ids])
        return int(released)

    async def give_back(self, ref: QueueRef, message: ReceivedMessage) -> bool:
        """A hand-off its socket did not write, visible again at once if it is still that
        hand-off (give_back.lua): whether it was."""
        qk = keys.queue_keys(ref.qualified)
        args = [ref.qualified, message.message_id, message.visible_at_ms]
        return bool(int(await self.group.call("give_back", qk.all, args)))

    async def reclaim_inflight(
        self, ref: QueueRef, visibility_timeout_ms: int, most: int = 100
    ) -> list[ReceivedMessage]:
        """Hand out again, with a new deadline, what is handed out and not acknowledged."""
        qk = keys.queue_keys(ref.qualified)
        r = await self.scripts.call("reclaim_inflight", qk.all, [visibility_timeout_ms, most])
        return list(Handout.decode(r).messages)
