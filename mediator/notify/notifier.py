"""Phone notifications: when a forward is queued for a connection that registered a device
and has no live session on any node, its app's provider is asked to wake the phone.

Off the sender's path and cluster-wide, through the shard schedules the workers already
run (the member `@note:<connection>`, notify.lua):

1. The script that queues a forward also marks the connection and schedules its
   notification `--notify-delay-seconds` ahead when it has a device, unless one is
   scheduled already: a burst collapses into one, and a forward costs no extra call (on
   Redis Cluster, where the route is read first, one more script call: `queued`).
2. The worker holding the shard claims it when due, moving it a guard time ahead first: a
   worker that dies mid-call leaves the notification to whichever worker takes the shard.
3. It sends nothing when a live-mode or implicit-pickup socket holds the connection on any
   node (the presence registry), when nothing waits, or when nothing came since the last
   notification; within `--notify-interval-seconds` of the last one it waits for the
   interval's end. Otherwise one notification carries the number of messages waiting.
4. The provider's answer: sent; gone (the device info is removed); retry (backoff, the
   provider's Retry-After honoured, `--notify-attempts` at most); refused (given up).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from mediator import outbound, tasks
from mediator.cluster.presence import Presence
from mediator.engine import keys
from mediator.engine.model import QueueRef
from mediator.engine.replies import NoteClaim, NoteReply
from mediator.engine.scripts import Scripts
from mediator.mediation.mailbox import Mailbox
from mediator.notify.apps import Apps
from mediator.notify.devices import DeviceBook, schedule_keys
from mediator.notify.provider import Device, Notice, Outcome, Provider
from mediator.ops.metrics import Metrics
from mediator.settings import NotifySettings, OutboundSettings, PushSettings
from mediator.storage.clients import STORAGE_ERRORS, RedisClient

log = logging.getLogger(__name__)

CONCURRENCY = 64  # notifications in flight at once per process
BUSY_DEFER_MS = 1000  # how far a notification this process cannot start yet is put off
RETRY_AFTER_MAX = 3600.0


class Notifier:
    def __init__(
        self,
        redis: RedisClient,
        mailbox: Mailbox,
        presence: Presence,
        settings: NotifySettings,
        retries: PushSettings,
        calls: OutboundSettings,
        metrics: Metrics | None = None,
    ) -> None:
        """`retries`: the pushes' backoff, which notifications share; `calls`: how every
        outbound call is made and timed."""
        self.redis = redis
        self.mailbox = mailbox
        self.presence = presence
        self.settings = settings
        self.retries = retries
        self.calls = calls
        self.metrics = metrics
        self.scripts = Scripts(redis)
        self.devices = DeviceBook(redis)
        self.http = outbound.client(calls)
        self.http2 = outbound.client(calls, http2=True)
        self.apps = Apps.load(settings, self.http, self.http2)
        self._running: dict[str, asyncio.Task[None]] = {}  # connection -> its notification

    # ------------------------------------------------------------ a node: a forward queued

    @property
    def delay_ms(self) -> int:
        """How far ahead a forward schedules a phone's notification (0: none configured)."""
        if not self.apps.configured:
            return 0
        return max(1, int(self.settings.delay_seconds * 1000))

    async def queued(self, connection: str) -> None:
        """A sender's message was queued for `connection` by a call that did not schedule
        its notification itself (forward.lua does): schedule it when it has a device.
        Storage trouble is logged, never the forward's failure."""
        if not self.apps.configured:
            return
        keys_, member = schedule_keys(connection)
        try:
            note = NoteReply.decode(
                await self.scripts.call("notify", keys_, ["queued", member, self.delay_ms])
            )
            if note.due_ms is not None:
                await self._hint(connection, note.due_ms)
                self.count("scheduled")
        except STORAGE_ERRORS as exc:
            log.warning("scheduling a notification failed: %s", exc)

    # ------------------------------------------------------------ a worker: due

    async def due(self, connection: str) -> None:
        """The notification's time has come (the worker holding its shard found it due).
        Claimed here, sent in a task of its own so a slow provider holds up no upkeep; left
        for a second while this process is at it already or has no free slot, so the
        claim's guard time starts only when the work does."""
        keys_, member = schedule_keys(connection)
        if connection in self._running or len(self._running) >= CONCURRENCY:
            await self.defer(connection, BUSY_DEFER_MS)
            return
        claimed = NoteClaim.decode(
            await self.scripts.call("notify", keys_, ["claim", member, self.guard_ms])
        )
        if claimed is None:
            return
        task = asyncio.create_task(self._run(connection, claimed), name="notify")
        self._running[connection] = task
        task.add_done_callback(lambda _: self._running.pop(connection, None))

    async def defer(self, connection: str, in_ms: int) -> None:
        """Leave a due notification for later: moved `in_ms` ahead, not left at the head of
        its shard's schedule (where every tick would read it again, and upkeep behind it
        would wait)."""
        keys_, member = schedule_keys(connection)
        await self.scripts.call("notify", keys_, ["defer", member, in_ms])

    @property
    def guard_ms(self) -> int:
        """How long a claim holds: a provider call's whole budget (a login and a send, each
        `--push-timeout-seconds`) and the Redis steps around it, with a margin."""
        return int((3 * self.calls.timeout_seconds + 5) * 1000)

    async def _run(self, connection: str, claim: NoteClaim) -> None:
        device = Device(claim.service, claim.token, claim.platform, claim.app)
        try:
            await self._notify(
                connection,
                claim.now_ms,
                device if claim.token else None,
                last=claim.last_ms,
                attempts=claim.attempts,
                new=claim.new,
                notice_id=claim.notice_id or str(uuid.uuid4()),
            )
        except STORAGE_ERRORS as exc:
            log.warning("notification for %s stopped: %s (a worker retries it)", connection, exc)
        except Exception:
            log.exception("notification for %s failed unexpectedly", connection)

    async def _notify(
        self,
        connection: str,
        now: int,
        device: Device | None,
        *,
        last: int,
        attempts: int,
        new: bool,
        notice_id: str,
    ) -> None:
        if device is None:
            return await self._op(connection, "done", skipped="no_device")
        if not new and attempts == 0:
            return await self._op(connection, "done", skipped="nothing_new")
        if await self.presence.holder(connection) is not None:
            return await self._op(connection, "done", skipped="live")
        waiting = (await self.mailbox.status(connection)).waiting
        if waiting == 0:
            return await self._op(connection, "done", skipped="empty")
        interval_ms = int(self.settings.interval_seconds * 1000)
        if last and now < last + interval_ms:
            return await self._op(connection, "later", last + interval_ms - now, skipped="interval")
        provider = self.apps.provider(device)
        if provider is None:  # its app is no longer configured
            return await self._op(connection, "done", skipped="no_provider")
        notice = Notice(
            device=device,
            connection=connection,
            count=waiting,
            title=self.settings.alert_title,
            body=self.settings.alert_body,
            notice_id=notice_id,  # the same on retries: receivers deduplicate on it
        )
        outcome = await self._send(provider, notice)
        await self._settle(notice, provider.name, outcome, attempts)

    async def _send(self, provider: Provider, notice: Notice) -> Outcome:
        """The provider's answer within the call's budget; anything unexpected (a provider
        answering nonsense, a bug) is retried like an outage, never dropped."""
        try:
            async with asyncio.timeout(2 * self.calls.timeout_seconds):
                return await provider.send(notice)
        except TimeoutError:
            return Outcome("retry", "no answer within the call's budget")
        except Exception as exc:
            log.exception("notification through %s failed unexpectedly", provider.name)
            return Outcome("retry", f"unexpected: {type(exc).__name__}")

    async def _settle(self, notice: Notice, provider: str, outcome: Outcome, attempts: int) -> None:
        connection = notice.connection
        if outcome.kind == "sent":
            self.count("sent", provider)
            await self._op(connection, "sent")
        elif outcome.kind == "gone":
            self.count("gone", provider)
            log.info("device of %s is gone (%s): its info removed", connection, outcome.detail)
            await self._op(connection, "forget", 0, value=notice.device.token)
        elif outcome.kind == "retry" and attempts + 1 < self.settings.attempts:
            self.count("retried", provider)
            delay = min(
                self.retries.retry_max_seconds,
                self.retries.retry_min_seconds * 2 ** min(attempts, 30),
            )
            if outcome.retry_after is not None:
                delay = max(delay, min(outcome.retry_after, RETRY_AFTER_MAX))
            log.info("notification for %s: %s; retry in %.1f s", connection, outcome.detail, delay)
            await self._op(connection, "retry", int(delay * 1000), value=notice.notice_id)
        else:
            self.count("failed", provider)
            log.warning("notification for %s given up: %s", connection, outcome.detail)
            await self._op(connection, "giveup")

    async def _op(
        self,
        connection: str,
        op: str,
        in_ms: int | None = None,
        *,
        skipped: str = "",
        value: str = "",
    ) -> None:
        """One of notify.lua's steps; `done`-like steps come back `--notify-delay-seconds`
        ahead when a message came meanwhile."""
        if skipped:
            self.count(skipped)
        keys_, member = schedule_keys(connection)
        if in_ms is None:
            in_ms = int(self.settings.delay_seconds * 1000)
        note = NoteReply.decode(
            await self.scripts.call("notify", keys_, [op, member, in_ms, value])
        )
        if note.due_ms is not None:
            await self._hint(connection, note.due_ms)

    async def _hint(self, connection: str, at_ms: int) -> None:
        """The workers' hint: the shard has something due at `at_ms` (ZADD LT)."""
        shard = keys.queue_keys(QueueRef(keys.DIDCOMM_NAMESPACE, connection).qualified).shard
        await self.redis.zadd(keys.next_due(), {str(shard): at_ms}, lt=True)

    def count(self, outcome: str, provider: str = "") -> None:
        if self.metrics is not None:
            self.metrics.notifications.labels(provider or "none", outcome).inc()

    async def aclose(self) -> None:
        await tasks.stop(list(self._running.values()))
        await self.http.aclose()
        await self.http2.aclose()
