"""The floors the latency figures are set against, measured in the same run: a bare redis-py
PUBLISH -> subscriber wake-up in this process, and a PUBLISH relayed to a WebSocket by the
anchor app's `/floor/{name}` route (on the server CPU), read by the live sockets' code."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Callable

from redis.asyncio import Redis

from bench.harness.anchor_app import FLOOR_PREFIX
from bench.harness.errors import BenchError
from bench.harness.loadgen import HOST
from bench.harness.output import percentile, progress
from mediator.client import WsTransport

FrameQueue = asyncio.Queue[tuple[float, bytes]]


def stamping(frames: FrameQueue) -> Callable[[bytes], bool]:
    """A WsTransport frame hook that takes every frame, stamped with its arrival time (it
    runs in the socket's reader task, as soon as the frame is read)."""
    perf = time.perf_counter

    def hook(data: bytes) -> bool:
        frames.put_nowait((perf(), data))
        return True

    return hook


async def publish_floor(redis_url: str, run_id: str, rounds: int, park: float) -> list[float]:
    """Bare redis-py: PUBLISH on one connection -> the subscriber task on another wakes."""
    sub = Redis.from_url(redis_url, decode_responses=False, client_name="bench-sub")
    pub = Redis.from_url(redis_url, decode_responses=False, client_name="bench-pub")
    channel = f"bench:floor:{run_id}"
    pubsub = sub.pubsub()
    await pubsub.subscribe(channel)
    loop = asyncio.get_running_loop()
    waiting: list[asyncio.Future[float]] = []
    perf = time.perf_counter

    async def listen() -> None:
        async for message in pubsub.listen():
            if message.get("type") == "message" and waiting:
                fut = waiting.pop()
                if not fut.done():
                    fut.set_result(perf())

    listener = asyncio.create_task(listen())
    out: list[float] = []
    try:
        await asyncio.sleep(0.1)
        for i in range(-min(20, rounds), rounds):
            await asyncio.sleep(park)
            fut: asyncio.Future[float] = loop.create_future()
            waiting.append(fut)
            t0 = perf()
            await pub.publish(channel, b"x")
            t1 = await asyncio.wait_for(fut, 5)
            if i >= 0:
                out.append((t1 - t0) * 1000)
    finally:
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await listener
        with contextlib.suppress(Exception):
            await pubsub.aclose()  # type: ignore[no-untyped-call]
        await sub.aclose()
        await pub.aclose()
    progress(
        f"floor: PUBLISH->subscriber p50 {percentile(out, 50):.3f} ms "
        f"p99 {percentile(out, 99):.3f} ms ({len(out)} rounds)"
    )
    return out


async def websocket_floor(
    anchor_port: int, redis_url: str, run_id: str, rounds: int, gap: float
) -> list[float]:
    """ms from a PUBLISH issued here to its frame on a WebSocket of the anchor app, whose
    subscriber relays the channel (pinned like node1; read by the live sockets' code)."""
    name = f"{run_id}-{secrets.token_hex(3)}"
    socket = WsTransport(f"http://{HOST}:{anchor_port}/floor/{name}")
    frames: FrameQueue = asyncio.Queue()
    socket.on_frame = stamping(frames)
    pub = Redis.from_url(redis_url, decode_responses=False, client_name="bench-wspub")
    out: list[float] = []
    perf = time.perf_counter
    await socket.connect()
    try:
        _, ready = await asyncio.wait_for(frames.get(), 10)
        if ready != b"ready":
            raise BenchError(f"the floor socket opened with {ready[:80]!r}")
        for i in range(-min(20, rounds), rounds):
            await asyncio.sleep(gap)
            payload = str(i).encode()
            t0 = perf()
            await pub.publish(FLOOR_PREFIX + name, payload)
            t1, frame = await asyncio.wait_for(frames.get(), 5)
            if frame != payload:
                raise BenchError(f"the floor socket relayed {frame[:80]!r}, not {payload!r}")
            if i >= 0:
                out.append((t1 - t0) * 1000)
    finally:
        await socket.close()
        await pub.aclose()
    progress(
        f"floor: PUBLISH->subscriber->WebSocket p50 {percentile(out, 50):.3f} ms "
        f"p99 {percentile(out, 99):.3f} ms ({len(out)} rounds)"
    )
    return out
