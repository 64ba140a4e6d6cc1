"""One JSON log line and one metrics sample per HTTP request."""

from __future__ import annotations

import logging
import time

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mediator.cluster.drain import Drain
from mediator.ops.metrics import Metrics
from mediator.randomness import random_bytes

log = logging.getLogger("mediator.access")

# What a node that lost Redis refuses at once (cluster/health.py): DIDComm's POST / and mqs.
NEEDS_STORAGE = ("/", "/queues", "/queues/{name}", "/messages/{name}", "/messages/{message_id}")
STORAGE_LOST = orjson.dumps(
    {"error": "storage unavailable (redis does not answer)", "code": "storage-unavailable"}
)


def route_template(method: str, path: str) -> str:
    """The route a path belongs to, so metric labels stay few (no queue names)."""
    parts = path.strip("/").split("/")
    if parts[0] == "queues" and len(parts) == 2:
        return "/queues/{name}"
    if parts[0] == "messages" and len(parts) == 2:
        return "/messages/{message_id}" if method == "DELETE" else "/messages/{name}"
    if path in ("/queues", "/healthz", "/readyz", "/metrics", "/openapi.json", "/"):
        return path
    return "other"


class RequestLog:
    def __init__(self, app: ASGIApp, metrics: Metrics, drain: Drain | None = None) -> None:
        self.app = app
        self.metrics = metrics
        self.drain = drain  # counts the requests being answered, which a drain waits for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500
        request_id = ""
        for name, value in scope["headers"]:
            if name == b"x-request-id":
                request_id = value.decode(errors="replace")[:64]
        request_id = request_id or random_bytes(8).hex()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode())]
            await send(message)

        if self.drain is not None:
            self.drain.request_started()
        try:
            if self.drain is not None and self.drain.unavailable and _needs_storage(scope):
                await _refuse(send_wrapper)
            else:
                await self.app(scope, receive, send_wrapper)
        finally:
            if self.drain is not None:
                self.drain.request_finished()
            elapsed = time.perf_counter() - start
            method = scope["method"]
            route = route_template(method, scope["path"])
            if route not in ("/metrics", "/healthz", "/readyz"):
                self.metrics.observe_request(route, method, status, elapsed)
            if route not in ("/metrics", "/healthz", "/readyz") and log.isEnabledFor(logging.INFO):
                log.info(
                    "request",
                    extra={
                        "request_id": request_id,
                        "method": method,
                        "path": scope["path"][:200],
                        "route": route,
                        "status": status,
                        "duration_ms": round(elapsed * 1000, 3),
                    },
                )


def _needs_storage(scope: Scope) -> bool:
    return route_template(scope["method"], scope["path"]) in NEEDS_STORAGE


async def _refuse(send: Send) -> None:
    """503 at once, rather than a request that waits on Redis until the client gives up."""
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(STORAGE_LOST)).encode()),
        (b"retry-after", b"1"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": STORAGE_LOST})
