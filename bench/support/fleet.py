"""Fleets of idle live WebSockets held by helper processes (this sandbox allows 20,000
open files per process), each socket a loaded recipient i that authcrypts to our key on its
connection (`Plan.ours`) with its wallet key and turns live mode on.

    python -m bench.support.fleet sockets --url ws://127.0.0.1:8080/ --start 0 --stop 9000
      holds recipients 0..8999 live: prints `open <n>` while opening, `ready <n> <failed>`,
      `alive <n>` every few seconds, and closes them all on a `close` line on stdin.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from websockets.asyncio.client import ClientConnection, connect
from websockets.protocol import State

from bench.support.bulk_load import Plan
from mediator.client import Agent, message

# Sockets opening at once over all holders: a node answers "storage unavailable" when more
# than its 64 pooled Redis connections would be needed at once (reported when it happens).
OPENING = 48
OPEN_ATTEMPTS = 5  # a refused open is tried again after 1, 2, 4 and 8 s

LIVE = "messagepickup/2.0/live-delivery-change"


async def open_live(url: str, plan: Plan, i: int) -> ClientConnection:
    """Recipient i's WebSocket, live mode on (answered by a status saying so). No pings
    from this side: the node pings every socket itself."""
    ws = await connect(url, max_size=None, compression=None, ping_interval=None, open_timeout=60)
    try:
        agent = Agent(plan.ours(i).verkey_b58, plan.wallet(i))
        await ws.send(agent.pack(message(LIVE, live_delivery=True)).decode())
        reply = await asyncio.wait_for(ws.recv(), 60)
        data = reply.encode() if isinstance(reply, str) else reply
        if b"protected" not in data:
            raise RuntimeError(f"recipient {i}: the node answered {data[:300]!r}")
        status, _ = agent.unpack(data)
        if status.get("live_delivery") is not True:
            raise RuntimeError(f"recipient {i}: {str(status)[:200]}")
    except BaseException:
        await ws.close()
        raise
    return ws


async def _hold(args: argparse.Namespace) -> None:
    plan = Plan.from_args(args)
    sockets: list[ClientConnection] = []
    failed: list[str] = []
    retried: list[str] = []
    pending = iter(range(args.start, args.stop))

    async def opener() -> None:
        for i in pending:
            for attempt in range(OPEN_ATTEMPTS):
                try:
                    sockets.append(await open_live(args.url, plan, i))
                    break
                except Exception as exc:
                    if attempt + 1 < OPEN_ATTEMPTS:
                        retried.append(f"{i}: {type(exc).__name__}: {exc}"[:300])
                        await asyncio.sleep(2**attempt)  # as a wallet: later, then later still
                    else:
                        failed.append(f"{i}: {type(exc).__name__}: {exc}"[:300])

    async def tell() -> None:
        while True:
            await asyncio.sleep(0.5)
            print(f"open {len(sockets)} {len(failed)} {len(retried)}", flush=True)

    teller = asyncio.create_task(tell())
    await asyncio.gather(*(opener() for _ in range(args.concurrency)))
    teller.cancel()
    for text in failed[:5]:
        print(f"error {text}", flush=True)
    for text in retried[:3]:
        print(f"retried {text}", flush=True)
    print(f"ready {len(sockets)} {len(failed)} {len(retried)}", flush=True)
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)

    async def report_alive() -> None:
        while True:
            await asyncio.sleep(5)
            alive = sum(1 for ws in sockets if ws.state is State.OPEN)
            print(f"alive {alive}", flush=True)

    reporter = asyncio.create_task(report_alive())
    while (line := await stdin.readline()) and line.strip() != b"close":
        pass
    reporter.cancel()
    alive = sum(1 for ws in sockets if ws.state is State.OPEN)
    closing = iter(sockets)

    async def closer() -> None:
        for ws in closing:
            with contextlib.suppress(Exception):
                await ws.close()

    await asyncio.gather(*(closer() for _ in range(64)))
    print(f"closed {alive}", flush=True)


@dataclass
class Holder:
    """One socket-holding process and what it last said."""

    proc: asyncio.subprocess.Process
    wanted: int
    opened: int = 0
    failed: int = 0
    retried: int = 0  # opens refused (the node answered an error) and tried again
    alive: int = 0
    ready: bool = False
    errors: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)  # a few of the retried ones
    reader: asyncio.Task[None] | None = None

    async def follow(self) -> None:
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            word, _, rest = raw.decode().strip().partition(" ")
            if word == "open":
                self.opened, self.failed, self.retried = (int(x) for x in rest.split())
            elif word == "ready":
                self.opened, self.failed, self.retried = (int(x) for x in rest.split())
                self.alive, self.ready = self.opened, True
            elif word in ("alive", "closed"):
                self.alive = int(rest)
            elif word == "error":
                self.errors.append(rest)
            elif word == "retried":
                self.refusals.append(rest)


class SocketFleet:
    """`count` idle live sockets to one node, held by `processes` helper processes."""

    def __init__(
        self,
        url: str,
        plan: Plan,
        indexes: range,
        processes: int,
        cpu: int | None,
        in_flight: int = OPENING,
    ) -> None:
        self.in_flight = in_flight
        self.url = url
        self.plan = plan
        self.indexes = indexes
        self.processes = processes
        self.cpu = cpu
        self.holders: list[Holder] = []

    @property
    def opened(self) -> int:
        return sum(h.opened for h in self.holders)

    @property
    def failed(self) -> int:
        return sum(h.failed for h in self.holders)

    @property
    def alive(self) -> int:
        return sum(h.alive for h in self.holders)

    @property
    def retried(self) -> int:
        return sum(h.retried for h in self.holders)

    def refusals(self) -> list[str]:
        return [r for h in self.holders for r in h.refusals]

    @property
    def pids(self) -> list[int]:
        return [h.proc.pid for h in self.holders]

    async def open(
        self, report: Callable[[str], None], every: float = 5.0, limit: float = 900
    ) -> None:
        n, start = len(self.indexes), self.indexes.start
        bounds = [start + n * k // self.processes for k in range(self.processes + 1)]
        pin = [] if self.cpu is None else ["taskset", "-c", str(self.cpu)]
        for k in range(self.processes):
            proc = await asyncio.create_subprocess_exec(
                *pin,
                sys.executable,
                "-m",
                "bench.support.fleet",
                "sockets",
                *["--url", self.url, "--start", str(bounds[k]), "--stop", str(bounds[k + 1])],
                *["--concurrency", str(max(1, self.in_flight // self.processes))],
                *self.plan.argv(),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            holder = Holder(proc, bounds[k + 1] - bounds[k])
            holder.reader = asyncio.create_task(holder.follow())
            self.holders.append(holder)
        started = last = time.monotonic()
        while not all(h.ready for h in self.holders):
            if any(h.proc.returncode is not None for h in self.holders):
                raise RuntimeError("a socket-holding process died while opening")
            if time.monotonic() - started > limit:
                raise RuntimeError(f"{self.opened:,} of {n:,} sockets open after {limit:.0f} s")
            await asyncio.sleep(0.2)
            if time.monotonic() - last >= every:
                last = time.monotonic()
                rate = self.opened / (last - started)
                report(
                    f"sockets: {self.opened:,}/{n:,} open ({rate:,.0f}/s, ETA "
                    f"{(n - self.opened) / max(rate, 1e-9):,.0f} s), {self.retried} refused "
                    f"and retried, {self.failed} failed"
                )

    async def close(self, limit: float = 120) -> None:
        for h in self.holders:
            if h.proc.stdin is not None and h.proc.returncode is None:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    h.proc.stdin.write(b"close\n")
                    await h.proc.stdin.drain()
        for h in self.holders:
            try:
                await asyncio.wait_for(h.proc.wait(), limit)
            except TimeoutError:
                h.proc.kill()
                await h.proc.wait()
            if h.reader is not None:
                with contextlib.suppress(Exception):
                    await h.reader

    def errors(self) -> list[str]:
        return [e for h in self.holders for e in h.errors]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=["sockets"])
    parser.add_argument("--url", required=True, help="the node's WebSocket URL (ws://host:port/)")
    parser.add_argument("--start", type=int, required=True, help="first recipient index")
    parser.add_argument("--stop", type=int, required=True, help="past the last recipient index")
    parser.add_argument("--concurrency", type=int, default=16, help="sockets opening at once")
    Plan.add_arguments(parser)
    args = parser.parse_args(argv)
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.run(_hold(args))
        return 0
    asyncio.run(_hold(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
