"""The benchmark's anchor: the least a Python HTTP front to Redis can do per message.

A bare Starlette app on uvicorn (uvloop, httptools, one process, no access log) with one
endpoint, `POST /xadd/{name}`: parse the JSON body `{"body": "..."}` (orjson if installed,
else json), do one XADD on the stream `bench:anchor:{name}` with redis.asyncio (hiredis,
decode_responses False), answer 201 `{"id": "<stream id>"}`. `GET /readyz` answers 200 once
Redis answers.

For the live-delivery floor of the DIDComm benchmark it also serves one WebSocket route,
`/floor/{name}`: it subscribes to the Redis channel `bench:floor:ws:{name}`, sends the text
frame `ready`, then writes every message published on that channel to the socket as a binary
frame, as is: the least a Python node can do between a PUBLISH and a WebSocket frame. It runs
with permessage-deflate off, as the mediator does by default.

    python -m bench.harness.anchor_app --port 8099 --redis-url redis://127.0.0.1:6379/0
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import uvicorn
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

try:
    import orjson

    loads: Callable[[bytes], Any] = orjson.loads
    dumps: Callable[[Any], bytes] = orjson.dumps
    JSON_LIB = "orjson"
except ImportError:  # the stdlib fallback
    loads = json.loads

    def dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    JSON_LIB = "json"

STREAM_PREFIX = "bench:anchor:"
FLOOR_PREFIX = "bench:floor:ws:"  # the channels /floor/{name} relays


def _json(obj: Any, status: int = 200) -> Response:
    return Response(dumps(obj), status_code=status, media_type="application/json")


async def xadd(request: Request) -> Response:
    try:
        doc = loads(await request.body())
    except ValueError:
        return _json({"error": "the body is not JSON"}, 400)
    if not isinstance(doc, dict) or not isinstance(doc.get("body"), str):
        return _json({"error": 'expected {"body": "<text>"}'}, 400)
    redis: Redis = request.app.state.redis
    stream_id = await redis.xadd(STREAM_PREFIX + request.path_params["name"], {"b": doc["body"]})
    return _json({"id": stream_id.decode() if isinstance(stream_id, bytes) else stream_id}, 201)


async def readyz(request: Request) -> Response:
    await request.app.state.redis.ping()
    return _json({"status": "ready", "json": JSON_LIB})


async def floor_socket(websocket: WebSocket) -> None:
    """Relay what is published on the floor channel to this socket until it closes."""
    await websocket.accept()
    pubsub = websocket.app.state.redis.pubsub()
    await pubsub.subscribe(FLOOR_PREFIX + websocket.path_params["name"])

    async def relay() -> None:
        async for message in pubsub.listen():
            if message.get("type") == "message":
                await websocket.send_bytes(message["data"])

    await websocket.send_text("ready")
    relaying = asyncio.create_task(relay())
    try:
        while (await websocket.receive())["type"] != "websocket.disconnect":
            pass
    finally:
        relaying.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await relaying
        await pubsub.aclose()


def create_app(redis_url: str) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.redis = Redis.from_url(
            redis_url, decode_responses=False, socket_timeout=10, socket_connect_timeout=5
        )
        try:
            yield
        finally:
            await app.state.redis.aclose()

    return Starlette(
        routes=[
            Route("/xadd/{name}", xadd, methods=["POST"]),
            Route("/readyz", readyz, methods=["GET"]),
            WebSocketRoute("/floor/{name}", floor_socket),
        ],
        lifespan=lifespan,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback)")
    parser.add_argument("--port", type=int, required=True, help="TCP port to listen on")
    parser.add_argument("--redis-url", required=True, help="redis://host:port/db")
    args = parser.parse_args()
    host = args.host.strip("[]")
    if host != "localhost" and not ipaddress.ip_address(host).is_loopback:
        parser.error("the anchor only listens on a loopback address")
    uvicorn.run(
        create_app(args.redis_url),
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        workers=1,
        access_log=False,
        log_level="warning",
        timeout_keep_alive=75,
        ws_per_message_deflate=False,
    )


if __name__ == "__main__":
    main()
