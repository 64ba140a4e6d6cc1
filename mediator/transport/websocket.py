"""DIDComm over a WebSocket at `/`: many messages each way, live delivery and implicit pickup.

Every frame in is one envelope, handled in order. Replies, live `delivery` messages and
implicitly drained messages share one send lock. When the socket closes, every message it
carried that was not acknowledged is offered again at once.

A socket delivering live (or draining implicitly) holds its recipient in the presence
registry (mediator/cluster/presence.py): its node's lease covers it, and the receives of
its delivery loop renew the hold's entry, so an idle socket costs one script call per
`MEDIATOR_LIVE_RECHECK_SECONDS`. A newer socket for the same recipient, on any node, takes
over: this one stops delivering to it, and the newer one hands out again at once whatever
was handed out and not acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from collections.abc import Awaitable, Callable

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from mediator import tasks
from mediator.cluster.drain import SERVICE_RESTART, TRY_AGAIN_LATER, Drain
from mediator.cluster.handoffs import Inbox
from mediator.didcomm import envelope
from mediator.didcomm.keys import KeyPair
from mediator.didcomm.message import DIDCOMM_ORG, new_id
from mediator.engine.model import ReceivedMessage, ReceiveResult
from mediator.errors import HoldLost
from mediator.mediation.mailbox import queue_of
from mediator.protocols.context import DeliveryWriter, Session
from mediator.protocols.pickup_common import b64
from mediator.settings import WebSocketSettings
from mediator.storage.clients import STORAGE_ERRORS
from mediator.transport.client_address import client_address
from mediator.transport.inbound import Pipeline, answers_at
from mediator.transport.outcome import Outgoing
from mediator.transport.socket_limits import FrameRate

log = logging.getLogger(__name__)

LIVE_BATCH = 10  # messages per live `delivery`
ORDER_WAIT = 0.2  # seconds a receive's batch waits for hand-offs made before it (Inbox)
RECENT_ACKS = 256  # ids acknowledged on a socket kept per connection (see _send_delivery)
Batch = Callable[[int], Awaitable[ReceiveResult]]  # one receive of a delivery loop
NORMAL_CLOSURE = 1000
POLICY_VIOLATION = 1008  # an abuse limit: too many frames, sockets, or no valid message
INTERNAL_ERROR = 1011


class SocketClosed(Exception):
    pass


class WsSession(Session):
    persistent = True

    def __init__(self, websocket: WebSocket, pipeline: Pipeline, address: str = "") -> None:
        super().__init__(address)
        self.ws = websocket
        self.pipeline = pipeline
        self.services = pipeline.services
        self._send_lock = asyncio.Lock()
        self._live: dict[str, asyncio.Task[None]] = {}
        self._drains: dict[str, asyncio.Task[None]] = {}
        self._unacked: dict[str, set[str]] = {}
        # Ids acknowledged on this socket lately: a delivery the loop fetched before they
        # were deleted leaves them out (its frame would follow the acknowledgement's answer).
        self._acked: dict[str, dict[str, None]] = {}
        self._keys: dict[str, KeyPair] = {}  # our key on an imported connection it delivers to
        self._writers: dict[str, DeliveryWriter] = {}  # a v2 wallet's deliveries
        self._first_pickup: dict[str, int] = {}  # Redis time of the first pickup answer
        self._takeovers: set[asyncio.Task[None]] = set()
        self._inboxes: dict[str, Inbox] = {}  # hand-offs to a live loop (handoffs.py)
        self.closed = False
        self.socket_id = uuid.uuid4().hex[:16]
        self.presence = pipeline.services.presence
        self.presence.register(self.socket_id, self._taken_over)
        self.handoffs = pipeline.services.handoffs
        self.handoffs.register(self.socket_id, self._handed, self._handoffs_lost)

    # -------------------------------------------------------------- Session API

    def is_live(self, connection: str) -> bool:
        return connection in self._live

    async def start_live(
        self,
        connection: str,
        since_ms: int,
        ours: KeyPair | None = None,
        writer: DeliveryWriter | None = None,
    ) -> None:
        if connection in self._live or self.closed:
            return
        if ours is not None:
            self._keys[connection] = ours
        if writer is not None:
            self._writers[connection] = writer
        await self.presence.claim(connection, self.socket_id)
        self._live[connection] = asyncio.create_task(
            self._live_run(connection, since_ms), name=f"live:{connection}"
        )

    async def stop_live(self, connection: str) -> None:
        self._writers.pop(connection, None)
        task = self._live.pop(connection, None)
        if task is not None:
            await tasks.stop(task)
            try:
                await self._give_back(connection)
            except STORAGE_ERRORS as exc:  # offered again at their deadline
                log.warning("giving back hand-offs failed: %s", exc)
            await self.presence.release(connection, self.socket_id)

    def offered(self, connection: str, message_ids: list[str]) -> None:
        self._unacked.setdefault(connection, set()).update(message_ids)

    def acknowledged(self, connection: str, message_ids: list[str]) -> None:
        self._unacked.get(connection, set()).difference_update(message_ids)
        if connection not in self._live and connection not in self._drains:
            return  # no delivery loop here to race with
        recent = self._acked.setdefault(connection, {})
        for mid in message_ids:
            recent[mid] = None
        while len(recent) > RECENT_ACKS:
            del recent[next(iter(recent))]

    def pickup_seen(self, connection: str, now_ms: int) -> None:
        self._first_pickup.setdefault(connection, now_ms)

    def live_since(self, connection: str, now_ms: int) -> int:
        """Live mode delivers what arrived since this socket's first pickup answer for the
        connection: a wallet's pickup round (status, delivery-request until empty) and then
        live-delivery-change leave no gap in which a message waits for a request that will
        not come."""
        return min(now_ms, self._first_pickup.get(connection, now_ms))

    # --------------------------------------------------------------- transport

    async def send(self, payload: bytes) -> None:
        async with self._send_lock:
            if self.closed:
                raise SocketClosed
            try:
                await self.ws.send_text(payload.decode())
            except Exception as exc:  # the peer went away mid-send
                self.closed = True
                raise SocketClosed from exc

    async def send_built(self, build: Callable[[], bytes | None]) -> None:
        """Write what `build` makes under the send lock (nothing when it makes None)."""
        async with self._send_lock:
            if self.closed:
                raise SocketClosed
            payload = build()
            if payload is None:
                return
            try:
                await self.ws.send_text(payload.decode())
            except Exception as exc:  # the peer went away mid-send
                self.closed = True
                raise SocketClosed from exc

    async def carry(self, out: Outgoing) -> None:
        try:
            await self.send(out.payload)
        except SocketClosed:
            if out.if_unsent is not None:
                await out.if_unsent()
            raise
        if out.after_sent is not None:
            try:
                await out.after_sent()
            except STORAGE_ERRORS as exc:
                # The reply went out but what it promised did not happen (live mode not
                # started, a batch not deleted): ask the peer to reconnect and start again.
                log.warning("storage failed after a reply was sent: %s; closing (1013)", exc)
                with contextlib.suppress(Exception):
                    await self.close_with(TRY_AGAIN_LATER)
                self.closed = True
                raise SocketClosed from exc

    def schedule_drain(self, connection: str) -> None:
        """Implicit pickup, after a short grace in which an explicit pickup message wins."""
        if connection in self._drains or connection in self._live or self.closed:
            return
        self._drains[connection] = asyncio.create_task(
            self._implicit(connection), name=f"drain:{connection}"
        )

    async def close_for_drain(self) -> None:
        """Ask the peer to reconnect elsewhere (1012): the receive loop then ends and
        `close` gives everything up."""
        await self.close_with(SERVICE_RESTART)

    async def close_with(self, code: int) -> None:
        async with self._send_lock:
            await self.ws.close(code=code)

    @property
    def delivering(self) -> bool:
        """Live delivery or an implicit drain runs here: silence from the peer is normal."""
        return bool(self._live or self._drains)

    async def close(self) -> None:
        self.closed = True
        self.presence.unregister(self.socket_id)
        self.handoffs.unregister(self.socket_id)
        held = {*self._live, *self._drains}
        await tasks.stop([*self._live.values(), *self._drains.values()])
        self._live.clear()
        self._drains.clear()
        for connection in list(self._inboxes):
            with contextlib.suppress(Exception):
                await self._give_back(connection)
        for connection in held:
            with contextlib.suppress(Exception):
                await self.presence.release(connection, self.socket_id)
        for connection, ids in self._unacked.items():
            if ids:
                with contextlib.suppress(Exception):
                    await self.services.mailbox.release(connection, sorted(ids))
        self._unacked.clear()
        self._acked.clear()

    # ----------------------------------------------------------- presence

    def _spawn_takeover(self, connection: str) -> None:
        """A delivery loop found its hold gone: the takeover runs apart from the loop, which
        it ends (a task cannot wait for itself)."""
        task = asyncio.create_task(self._taken_over(connection), name="takeover")
        self._takeovers.add(task)
        task.add_done_callback(self._takeovers.discard)

    async def _taken_over(self, connection: str) -> None:
        """A newer socket holds `connection` now: stop delivering to it here. What this
        socket carried unacknowledged is the newer socket's to offer again, so it is not
        released (that would offer it twice)."""
        for loops in (self._live, self._drains):
            task = loops.pop(connection, None)
            if task is not None:
                await tasks.stop(task)
        self._unacked.pop(connection, None)
        # Sends stopped handing off to this socket when the newer one claimed the hold;
        # those handed off before, the newer socket reclaims.
        self._inboxes.pop(connection, None)
        log.info("live delivery taken over by another socket", extra={"connection": connection})

    # ----------------------------------------------------------- hand-offs

    def _handed(self, connection: str, number: int, message: ReceivedMessage) -> bool:
        """A send handed `message` to this socket's live loop for `connection`."""
        inbox = self._inboxes.get(connection)
        if inbox is None or self.closed or connection not in self._live:
            return False  # released (cluster/handoffs.py)
        inbox.put(number, message)
        return True

    def _handoffs_lost(self) -> None:
        """The node's subscription was down: each live loop reclaims what it was handed."""
        for inbox in self._inboxes.values():
            inbox.lost = True
            inbox.poke()

    async def _give_back(self, connection: str) -> None:
        """What was handed to a live loop that ended before writing it: visible again."""
        inbox = self._inboxes.pop(connection, None)
        left = [] if inbox is None else inbox.take()
        if left:
            await self.services.mailbox.give_back(connection, left)

    async def _write_handed(self, connection: str, inbox: Inbox, upto: int | None = None) -> None:
        """Write what the inbox holds (up to number `upto`) that this socket has not
        offered yet; put back when the loop is stopped before it is written."""
        offered = self._unacked.get(connection, ())
        handed = [m for m in inbox.take(upto) if m.message_id not in offered]
        if not handed:
            return
        try:
            await self._send_delivery(connection, handed)
        except (asyncio.CancelledError, SocketClosed):
            inbox.put_back(handed)  # given back by stop_live or close
            raise

    async def _reclaim_handed(self, connection: str, inbox: Inbox) -> list[ReceivedMessage]:
        """Hand-offs may have been lost: everything in flight is handed out again (a new
        deadline); what this socket has not offered yet is written, in order. Returns
        what was reclaimed (a storage error leaves the inbox marked as having lost some)."""
        inbox.lost = True
        reclaimed = await self.services.mailbox.reclaim(connection, 1000)
        inbox.lost = False
        inbox.drop({m.message_id for m in reclaimed})
        offered = self._unacked.get(connection, ())
        fresh = [m for m in reclaimed if m.message_id not in offered]
        for i in range(0, len(fresh), LIVE_BATCH):
            await self._send_delivery(connection, fresh[i : i + LIVE_BATCH])
        return reclaimed

    # ----------------------------------------------------------- delivery loops

    async def _live_run(self, connection: str, since_ms: int) -> None:
        """Offer again what was handed out and not acknowledged (by an older socket, which
        may be gone with its node), then deliver what arrives."""
        try:
            reclaimed = await self.services.mailbox.reclaim(connection, 1000)
            for i in range(0, len(reclaimed), LIVE_BATCH):
                await self._send_delivery(connection, reclaimed[i : i + LIVE_BATCH])
        except SocketClosed:
            return
        except STORAGE_ERRORS as exc:
            log.warning("re-offering after a takeover failed: %s", exc)
        inbox = self._inboxes.setdefault(connection, Inbox())
        await self._deliver_loop(
            connection, self._live_batch(connection, since_ms, inbox), inbox=inbox
        )

    async def _send_delivery(self, connection: str, messages: list[ReceivedMessage]) -> None:
        """A `delivery` of what this socket has not had acknowledged meanwhile, built and
        written under the send lock: a status answering an acknowledgement never goes out
        before a delivery of what it acknowledged."""

        def build() -> bytes | None:
            acked = self._acked.get(connection, {})
            fresh = [m for m in messages if m.message_id not in acked]
            if not fresh:
                return None
            self.offered(connection, [m.message_id for m in fresh])
            writer = self._writers.get(connection)
            if writer is not None:
                return writer(fresh)
            delivery = {
                "@type": f"{DIDCOMM_ORG}messagepickup/2.0/delivery",
                "@id": new_id(),
                "~attach": [{"@id": m.message_id, "data": {"base64": b64(m.body)}} for m in fresh],
            }
            ours = self._keys.get(connection) or self.services.keys_for(connection)
            return envelope.pack(orjson.dumps(delivery), [connection], ours)

        await self.send_built(build)  # deleted only on messages-received

    def _live_batch(self, connection: str, since_ms: int, inbox: Inbox) -> Batch:
        hold = self.presence.hold(connection, self.socket_id)
        mailbox = self.services.mailbox

        async def batch(marker_ms: int) -> ReceiveResult:
            got = await mailbox.deliver(
                connection,
                LIVE_BATCH,
                since_ms=since_ms,
                wait_marker_ms=marker_ms,
                hold=hold,
                handoffs=True,
            )
            upto = None if got.handed is None else inbox.counted(got.handed)
            if not got.messages:
                return got
            # Hand-offs made before this receive go first (they are older than what it
            # found: a hand-off takes only a message that is the only visible one).
            written: set[str] = set()
            if upto is not None:
                loop = asyncio.get_running_loop()
                end = loop.time() + ORDER_WAIT
                while inbox.seen < upto and loop.time() < end:
                    await inbox.wait(end - loop.time())
                if inbox.seen < upto:  # lost on its way: reclaimed, with these messages
                    written = {m.message_id for m in await self._reclaim_handed(connection, inbox)}
            if got.handed is not None:
                await self._write_handed(connection, inbox, got.handed)
            await self._send_delivery(
                connection, [m for m in got.messages if m.message_id not in written]
            )
            return got

        return batch

    async def _implicit(self, connection: str) -> None:
        await asyncio.sleep(self.pipeline.websocket.implicit_pickup_delay_seconds)
        if self.explicit_pickup:
            return
        await self.presence.claim(connection, self.socket_id)
        mailbox = self.services.mailbox
        hold = self.presence.hold(connection, self.socket_id)

        async def batch(marker_ms: int) -> ReceiveResult:
            got = await mailbox.deliver(connection, LIVE_BATCH, wait_marker_ms=marker_ms, hold=hold)
            messages = got.messages
            for i, message in enumerate(messages):
                # No acknowledgement exists here: each raw message is deleted once sent.
                try:
                    await self.send(message.body)
                except SocketClosed:
                    await mailbox.release(connection, [m.message_id for m in messages[i:]])
                    raise
                await mailbox.acknowledge(connection, [message.message_id])
            return got

        # An explicit pickup message on this socket ends the drain: from then on the
        # connection fetches its queue itself.
        await self._deliver_loop(connection, batch, until=lambda: self.explicit_pickup)

    async def _deliver_loop(
        self,
        connection: str,
        batch: Batch,
        until: Callable[[], bool] = lambda: False,
        inbox: Inbox | None = None,
    ) -> None:
        """Deliver whatever `batch` finds; when it left nothing behind, wait for a wake-up
        from a send on any node, for the next deadline, or for the periodic re-check (spread
        by a tenth either way, so that sockets opened together do not re-check together),
        writing meanwhile what sends hand to `inbox` (a live loop's). Each batch renews the
        socket's hold; one another socket took ends the loop."""
        hub = self.services.hub
        recheck = self.pipeline.websocket.live_recheck_seconds
        marker_ms = int((recheck * 1.1 + 5) * 1000)  # outlives the longest wait below
        queue = queue_of(connection).qualified
        try:
            while not self.closed and not until():
                with hub.waiting(queue) as woken:
                    try:
                        got = await batch(marker_ms)
                    except STORAGE_ERRORS as exc:  # storage trouble: try again soon
                        log.warning("delivery loop waiting for storage: %s", exc)
                        await asyncio.sleep(1.0)
                        continue
                    if got.messages and not got.drained:
                        continue  # there may be more: no need to wait
                    # Drained: the receive that found nothing more marked this node as
                    # waiting, so a send from now on wakes it.
                    timeout = recheck * random.uniform(0.9, 1.1)
                    # What was handed out is offered again at its deadline unless
                    # acknowledged: no wake-up says so when no receive had marked this node
                    # waiting. Whichever comes first: a deadline or the queue's next due.
                    dues = [m.visible_at_ms for m in got.messages]
                    if got.next_due_ms is not None:
                        dues.append(got.next_due_ms)
                    due = min(dues, default=None)
                    if due is not None:
                        wait = max(0.0, (due - got.now_ms) / 1000)
                        timeout = min(timeout, wait + 0.002)
                    if inbox is None:
                        await _woken_within(woken, timeout)
                    else:
                        await self._serve(connection, inbox, woken, timeout, got.now_ms)
        except HoldLost:
            self._spawn_takeover(connection)
            return
        except SocketClosed:
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            # A bug, not storage trouble: close the socket rather than keep it open with
            # nothing delivering; the client reconnects and its deliveries are offered again.
            log.exception("delivery loop stopped", extra={"connection": connection})
            with contextlib.suppress(Exception):
                await self.close_with(INTERNAL_ERROR)

    async def _serve(
        self,
        connection: str,
        inbox: Inbox,
        woken: asyncio.Future[None],
        seconds: float,
        now_ms: int,
    ) -> None:
        """Until `woken` or `seconds`: write each hand-off as it comes, without a receive
        (and reclaim what was handed out when hand-offs may have been lost). The wait ends
        by the earliest delivery deadline of what was written (`now_ms`: the Redis time of
        the receive before, whose clock the deadlines are on)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        end = started + seconds
        redis_ahead = now_ms / 1000 - started  # the Redis clock against the loop's
        woken.add_done_callback(inbox.poke)
        while not woken.done():
            if inbox.lost:
                try:
                    reclaimed = await self._reclaim_handed(connection, inbox)
                except STORAGE_ERRORS as exc:  # the loop's next receive waits for storage
                    log.warning("reclaiming lost hand-offs failed: %s", exc)
                    return
                dues = [m.visible_at_ms for m in reclaimed]
            elif inbox.items:
                dues = [m.visible_at_ms for _, m in inbox.items]
                await self._write_handed(connection, inbox)
            else:
                left = end - loop.time()
                if left <= 0:
                    return
                await inbox.wait(left)
                continue
            if dues:
                end = min(end, min(dues) / 1000 - redis_ahead + 0.002)


async def _woken_within(woken: asyncio.Future[None], seconds: float) -> None:
    """Wait for a wake-up, or `seconds`: the timer resolves the waiter itself (a
    wait_for around a shield costs two more futures and a task per idle socket)."""
    timer = asyncio.get_running_loop().call_later(seconds, _resolve, woken)
    try:
        await woken
    finally:
        timer.cancel()


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class DidcommSocket:
    """The DIDComm WebSocket at `/`, taken before Starlette's router and exception layers: a
    socket lives for hours, and every layer it passes through keeps a coroutine frame alive
    for as long (about 4.5 KB per socket, of the 30 KB a live socket may cost)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket" or (scope["path"] != "/" and not answers_at(scope)):
            await self.app(scope, receive, send)
            return
        await didcomm_websocket(WebSocket(scope, receive, send))


async def didcomm_websocket(websocket: WebSocket) -> None:
    pipeline: Pipeline = websocket.app.state.didcomm
    drain: Drain = websocket.app.state.drain
    settings = pipeline.websocket
    address = client_address(
        websocket.scope.get("client"),
        websocket.scope["headers"],
        pipeline.services.limiter.trusted_proxies,
    )
    await websocket.accept()
    refused = drain.refuse_code  # going away (1012), or Redis does not answer here (1013)
    if refused is not None:  # reconnect elsewhere
        await websocket.close(code=refused)
        return
    if not pipeline.sockets.open(address):
        _refused_by(pipeline, "websocket_sockets")
        await websocket.close(code=POLICY_VIOLATION, reason="too many sockets from this address")
        return
    session = WsSession(websocket, pipeline, address)
    drain.sockets.add(session)
    gauge = pipeline.metrics.websockets if pipeline.metrics is not None else None
    if gauge is not None:
        gauge.inc()
    clock = _SocketClock(settings)
    frames = FrameRate(settings.messages_per_second)
    try:
        while True:
            try:
                async with asyncio.timeout(clock.wait(session)):
                    frame = await websocket.receive()
            except TimeoutError:
                code = clock.expired(session)
                if code is None:
                    continue
                if code == POLICY_VIOLATION:
                    _refused_by(pipeline, "websocket_first_message")
                await session.close_with(code)
                break
            clock.touch()
            if frame["type"] == "websocket.disconnect":
                break
            verdict = frames.take(asyncio.get_running_loop().time())
            if verdict != FrameRate.TAKE:
                _refused_by(pipeline, "websocket_messages")
            if verdict == FrameRate.CLOSE:
                await session.close_with(POLICY_VIOLATION)
                break
            if verdict == FrameRate.REFUSE:
                await _error_frame(session, "rate-limited", frames.reason, retry_after=1)
            elif verdict == FrameRate.TAKE and await _handle_frame(session, pipeline, frame):
                clock.valid = True
            del frame  # an idle socket keeps nothing of its last frame
    except (WebSocketDisconnect, SocketClosed):
        pass
    finally:
        pipeline.sockets.close(address)
        drain.sockets.discard(session)
        if gauge is not None:
            gauge.dec()
        await session.close()


def _refused_by(pipeline: Pipeline, limit: str) -> None:
    if pipeline.metrics is not None:
        pipeline.metrics.refused_by(limit)


async def _handle_frame(session: WsSession, pipeline: Pipeline, frame: Message) -> bool:
    """One inbound frame: handled, its replies carried; whether it was a message the
    pipeline took (not refused). Its own frame, so that what it made (the envelope, the
    outcome, the packed replies) is freed before the socket waits again."""
    data: bytes = frame.get("bytes") or (frame.get("text") or "").encode()
    limit = pipeline.services.didcomm.max_envelope_bytes
    if len(data) > limit:
        await _error_frame(session, "too-large", f"over {limit} bytes")
        return False
    outcome = await pipeline.handle(data, session, capacity=None)
    if outcome.refusal is not None:
        r = outcome.refusal
        await _error_frame(session, r.code, r.error, retry_after=r.retry_after)
        return False
    for i, out in enumerate(outcome.returned):
        try:
            await session.carry(out)
        except SocketClosed:
            for rest in outcome.returned[i + 1 :]:
                if rest.if_unsent is not None:
                    await rest.if_unsent()
            raise
    if outcome.may_drain and not session.explicit_pickup:
        session.schedule_drain(outcome.connection.verkey)  # type: ignore[union-attr]
    return True


class _SocketClock:
    """The idle and maximum-age limits of one socket (settings; 0 turns a limit off)."""

    def __init__(self, settings: WebSocketSettings) -> None:
        loop = asyncio.get_running_loop()
        self.idle = settings.idle_seconds
        self.max_age = settings.max_age_seconds
        self.deadline = settings.handshake_seconds  # for a first valid message
        self.valid = False  # the socket sent a message the pipeline took
        self.opened = self.last = loop.time()

    def touch(self) -> None:
        self.last = asyncio.get_running_loop().time()

    def wait(self, session: WsSession) -> float | None:
        """How long the next receive may wait before a limit needs checking (None: ever)."""
        now = asyncio.get_running_loop().time()
        waits = []
        if self.max_age > 0:
            waits.append(self.opened + self.max_age - now)
        if self.deadline > 0 and not self.valid:
            waits.append(self.opened + self.deadline - now)
        if self.idle > 0:
            waits.append(self.last + self.idle - now if not session.delivering else self.idle)
        return max(0.01, min(waits)) if waits else None

    def expired(self, session: WsSession) -> int | None:
        """The close code when a limit is reached: 1012 for the age, 1000 for idleness, 1008
        for a socket that sent no valid message in time."""
        now = asyncio.get_running_loop().time()
        if self.deadline > 0 and not self.valid and now - self.opened >= self.deadline:
            return POLICY_VIOLATION
        if self.max_age > 0 and now - self.opened >= self.max_age:
            return SERVICE_RESTART
        if self.idle > 0 and not session.delivering and now - self.last >= self.idle:
            return NORMAL_CLOSURE
        return None


async def _error_frame(
    session: WsSession, code: str, text: str, *, retry_after: int | None = None
) -> None:
    """An error for a sender we cannot encrypt to: a JSON frame, not an envelope."""
    body: dict[str, object] = {"error": text, "code": code}
    if retry_after is not None:
        body["retry_after"] = retry_after
    await session.send(orjson.dumps(body))
