"""Live recipients and open-loop sends: recipients in live mode whose sockets stamp every
frame as it arrives and match each delivered message to the forward that carried it (by the
AEAD tag of its ciphertext, without decrypting it), acknowledging at once; forwards sent on
a fixed schedule whatever the answers; and the plan's recipients opened live."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass, field

import orjson

from bench.harness.errors import BenchError
from bench.harness.floors import FrameQueue, stamping
from bench.harness.loadgen import Connection, HttpError, expect
from bench.support.bulk_load import Plan
from mediator.client import ClientError, Recipient, attachments, message
from mediator.client.transports import ENVELOPE_TYPE
from mediator.errors import EnvelopeError

ENVELOPE = {"Content-Type": ENVELOPE_TYPE}


def ciphertext_tag(envelope: bytes) -> str:
    """The AEAD tag of an envelope: it names the ciphertext, so a delivered message is matched
    to the forward that carried it by content, without decrypting it."""
    return str(orjson.loads(envelope)["tag"])


@dataclass
class Tally:
    """What the live sockets saw of one phase's forwards."""

    expected: dict[str, int]  # ciphertext tag -> forward number
    arrived: dict[int, float] = field(default_factory=dict)  # forward number -> perf()
    delivered: int = 0  # messages in delivery frames, matched or not
    frames: int = 0
    last_at: float = 0.0  # arrival of the latest delivery frame
    duplicates: int = 0
    unknown: int = 0  # not a forward of this phase


class LiveSockets:
    """Recipients in live mode on one node, one WebSocket each. Every delivery frame is
    stamped as it arrives, its messages are matched to this phase's forwards by ciphertext
    tag, and it is acknowledged (messages-received) at once, so no queue grows."""

    def __init__(self, recipients: list[tuple[Recipient, str]]) -> None:
        self.recipients = recipients  # (recipient, its registered key)
        self.tally = Tally({})
        self.errors: list[str] = []
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        for recipient, _ in self.recipients:
            frames: FrameQueue = asyncio.Queue()
            recipient.ws.on_frame = stamping(frames)
            self._tasks.append(asyncio.create_task(self._consume(recipient, frames)))

    def expect(self, tags: list[str]) -> Tally:
        """Start a phase: the forwards whose tags are given are numbered in that order."""
        self.tally = Tally({tag: k for k, tag in enumerate(tags)})
        return self.tally

    async def settle(self, delivered: int | None, limit_s: float) -> bool:
        """Wait (bounded) until the sockets have delivered `delivered` messages in this
        phase, or (None) every forward it expects: they caught up with the sends."""
        deadline = time.perf_counter() + limit_s
        while not self._caught_up(delivered):
            if time.perf_counter() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    def _caught_up(self, delivered: int | None) -> bool:
        tally = self.tally
        if delivered is None:
            return len(tally.arrived) >= len(tally.expected)
        return tally.delivered >= delivered

    async def _consume(self, recipient: Recipient, frames: FrameQueue) -> None:
        while True:
            at, frame = await frames.get()
            try:
                await self._take(recipient, at, frame)
            except (BenchError, ClientError, EnvelopeError, ValueError, KeyError, OSError) as exc:
                if len(self.errors) < 20:
                    self.errors.append(f"live socket: {type(exc).__name__}: {exc}"[:300])

    async def _take(self, recipient: Recipient, at: float, frame: bytes) -> None:
        delivery = recipient.open(frame)
        if not str(delivery.get("@type", "")).endswith("/delivery"):
            raise BenchError(f"expected a live delivery, got {delivery.get('@type')}")
        tally = self.tally
        tally.frames += 1
        tally.last_at = at
        ids = []
        for message_id, body in attachments(delivery):
            ids.append(message_id)
            tally.delivered += 1
            k = tally.expected.get(ciphertext_tag(body))
            if k is None:
                tally.unknown += 1
            elif k in tally.arrived:
                tally.duplicates += 1
            else:
                tally.arrived[k] = at
        received = message("messagepickup/2.0/messages-received", route=None, message_id_list=ids)
        await recipient.ws.send(recipient.pack(received))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for recipient, _ in self.recipients:
            await recipient.close()


@dataclass
class Schedule:
    """An open-loop run: request k was due at `due[k]`, sent at `sent[k]` and answered at
    `answered[k]` (perf_counter seconds; NaN when it failed)."""

    due: list[float]
    sent: list[float]
    answered: list[float]
    errors: list[str]

    def lag_ms(self) -> list[float]:
        return [(s - d) * 1000 for s, d in zip(self.sent, self.due, strict=True)]


def slowest(run: Schedule, tally: Tally, count: int = 10) -> list[dict[str, float]]:
    """The slowest deliveries (ms from the answer) and when in the schedule their forward was
    due (s from the start): slow ones bunched in time point at a stall, not at a load."""
    start = run.due[0] if run.due else 0.0
    late = sorted(
        (
            ((at - run.answered[k]) * 1000, run.due[k] - start, k)
            for k, at in tally.arrived.items()
            if not math.isnan(run.answered[k])
        ),
        reverse=True,
    )
    return [
        {"ms": round(ms, 3), "due_s": round(due, 3), "forward": k} for ms, due, k in late[:count]
    ]


async def open_loop(conns: list[Connection], requests: list[bytes], rate: float) -> Schedule:
    """Send `requests` on a fixed schedule, request k at start + k / rate, each on whichever
    connection is free, without waiting for the answers of the ones before (a request whose
    time has come waits only when every connection is busy: that shows as lag)."""
    nan = float("nan")
    n = len(requests)
    free: asyncio.Queue[Connection] = asyncio.Queue()
    for conn in conns:
        free.put_nowait(conn)
    perf = time.perf_counter
    start = perf() + 0.02
    run = Schedule([start + k / rate for k in range(n)], [nan] * n, [nan] * n, [])

    async def send(k: int, conn: Connection) -> None:
        try:
            run.sent[k] = perf()
            answer = await conn.request(requests[k])
            run.answered[k] = perf()
            expect(answer, 202)
        except (HttpError, OSError, TimeoutError) as exc:
            run.answered[k] = nan
            run.errors.append(f"{type(exc).__name__}: {exc}"[:300])
        finally:
            free.put_nowait(conn)

    tasks = []
    for k in range(n):
        delay = run.due[k] - perf()
        if delay > 0:
            await asyncio.sleep(delay)
        conn = await free.get()
        tasks.append(asyncio.create_task(send(k, conn)))
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    return run


def loaded_recipient(plan: Plan, i: int, base: str) -> Recipient:
    """Loaded recipient i as the project's client sees it, on a WebSocket to `base`."""
    wallet = plan.wallet(i)
    client = Recipient(base, plan.ours(i).verkey_b58, "ws", wallet)
    key = plan.recipient_key(i)
    client.recipient_keys[key.verkey_b58] = key
    return client


async def live_sockets(plan: Plan, indexes: list[int], base: str) -> LiveSockets:
    """Recipients `indexes` live on the node at `base`, acknowledging every delivery."""
    opened: list[tuple[Recipient, str]] = []
    try:
        for i in indexes:
            client = loaded_recipient(plan, i, base)
            opened.append((client, plan.recipient_key(i).verkey_b58))
            await client.connect()
            status = await client.live(True)
            if status.get("live_delivery") is not True:
                raise RuntimeError(f"live mode was not turned on for {i}: {status!r}")
    except BaseException:
        for client, _ in opened:
            await client.close()
        raise
    sockets = LiveSockets(opened)
    sockets.start()
    return sockets
