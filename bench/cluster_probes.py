"""What the cluster workloads of the DIDComm benchmark measure with: live sockets that
timestamp every frame, a schedule of open-loop sends, CPU shares per process and the
disturbances of the machine (bench/didcomm_bench.py, bench/didcomm_cluster.py)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson
from loadgen import (
    Connection,
    HttpError,
    cpu_shares,
    cpu_times,
    expect,
    proc_cpu_seconds,
)
from mqs_bench import (
    BenchError,
    fmt_rate,
)

from mediator.client import (
    ClientError,
    Recipient,
    attachments,
    message,
)
from mediator.client.transports import ENVELOPE_TYPE
from mediator.errors import EnvelopeError

ENVELOPE = {"Content-Type": ENVELOPE_TYPE}
FrameQueue = asyncio.Queue[tuple[float, bytes]]


def stamping(frames: FrameQueue) -> Callable[[bytes], bool]:
    """A WsTransport frame hook that takes every frame, stamped with its arrival time (it
    runs in the socket's reader task, as soon as the frame is read)."""
    perf = time.perf_counter

    def hook(data: bytes) -> bool:
        frames.put_nowait((perf(), data))
        return True

    return hook


def ciphertext_tag(envelope: bytes) -> str:
    """The AEAD tag of an envelope: it names the ciphertext, so a delivered message is matched
    to the forward that carried it by content, without decrypting it."""
    return str(orjson.loads(envelope)["tag"])


class CpuMeter:
    """CPU use of some processes, of this one ("bench": the load generator and the live
    sockets) and of all others ("others": the machine's busy time not theirs), from its
    creation to `shares()`, as a share of one CPU."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.start = self._read()
        self.machine0 = cpu_times()

    def _read(self) -> tuple[float, dict[str, float]]:
        seconds = {name: proc_cpu_seconds(pid) for name, pid in self.pids.items()}
        return time.perf_counter(), seconds | {"bench": time.process_time()}

    def shares(self) -> dict[str, float]:
        (t0, before), (t1, after) = self.start, self._read()
        ours = {name: (after[name] - before[name]) / (t1 - t0) for name in after}
        busy = sum(cpu["busy"] for cpu in self.machine().values())
        return {name: round(v, 3) for name, v in ours.items()} | {
            "others": round(max(0.0, busy - sum(ours.values())), 3)
        }

    def machine(self) -> dict[str, dict[str, float]]:
        """Per CPU: busy, iowait and steal shares since the start."""
        return cpu_shares(self.machine0, cpu_times())


def fmt_cpu(shares: dict[str, float]) -> str:
    return ", ".join(f"{name} {share:.0%}" for name, share in shares.items())


def redis_events(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Forks (AOF rewrites) and fsyncs Redis ran late, between two `redis_counters()`."""
    names = ("total_forks", "aof_rewrites", "aof_delayed_fsync")
    return {name: after.get(name, 0) - before.get(name, 0) for name in names}


def disturbances(
    cpu: dict[str, float], machine: dict[str, dict[str, float]], events: dict[str, int]
) -> str:
    """What may have disturbed a phase, in brackets (empty when nothing did): other
    processes on the machine, time the host stole from a CPU, time spent waiting on the
    disk, Redis forking or fsyncing late."""
    notes = [f"OTHER PROCESSES {cpu['others']:.0%} cpu"] if cpu.get("others", 0) >= 0.1 else []
    for name, shares in machine.items():
        notes += [f"{name} {k} {shares[k]:.0%}" for k in ("steal", "iowait") if shares[k] >= 0.02]
    if events.get("total_forks"):
        notes.append(f"redis forked {events['total_forks']}x")
    if events.get("aof_delayed_fsync"):
        notes.append(f"aof delayed fsync {events['aof_delayed_fsync']}x")
    return f" [{', '.join(notes)}]" if notes else ""


@dataclass
class NodesBlock:
    """One closed-loop block of forwards spread over `nodes` nodes."""

    nodes: int
    seconds: float
    forwards: int
    rate: float
    cpu: dict[str, float]  # share of one CPU: each node, Redis, this process
    machine: dict[str, dict[str, float]]
    redis_events: dict[str, int]
    redis_cmds_per_forward: float | None
    errors: int
    first_error: str

    @property
    def node_cpu(self) -> float:
        return sum(v for k, v in self.cpu.items() if k.startswith("node"))

    @property
    def cpu_norm(self) -> float:
        """Forwards per second of node CPU (all nodes together)."""
        return self.rate / self.node_cpu if self.node_cpu > 0 else float("nan")

    def describe(self) -> str:
        nodes = "+".join(f"{v:.0%}" for k, v in self.cpu.items() if k.startswith("node"))
        text = (
            f"{self.nodes} node{'s' if self.nodes > 1 else ''} {fmt_rate(self.rate)}/s "
            f"(nodes cpu {nodes}, redis {self.cpu.get('redis', 0):.0%}, "
            f"loadgen {self.cpu['bench']:.0%}"
        )
        if self.redis_cmds_per_forward is not None:
            text += f", redis cmds/fwd {self.redis_cmds_per_forward:.1f}"
        text += ")" + disturbances(self.cpu, self.machine, self.redis_events)
        if self.errors:
            text += f" ERRORS {self.errors}: {self.first_error}"
        return text


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
