"""The mqs routes: thin handlers that parse, call the engine and build the answer."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from redis.exceptions import OutOfMemoryError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from mediator.engine import Engine, QueueRef
from mediator.engine.longpoll import receive_waiting
from mediator.engine.wakeups import WakeHub
from mediator.errors import (
    InvalidQueueConfig,
    LimitExceeded,
    MediatorError,
    MessageNotFound,
    QueueExists,
    QueueInUse,
    QueueNotFound,
    RequestError,
    StorageError,
)
from mediator.mqs import auth, body, headers, ranges, responses
from mediator.settings import MqsSettings
from mediator.storage.clients import STORAGE_ERRORS, STORAGE_FULL

log = logging.getLogger(__name__)

NAMESPACE = "mqs"

Handler = Callable[[Request], Awaitable[Response]]

_STATUS: list[tuple[type[MediatorError], int]] = [
    (QueueNotFound, 404),
    (MessageNotFound, 404),
    (QueueExists, 409),
    (QueueInUse, 412),
    (InvalidQueueConfig, 400),
    (LimitExceeded, 413),
    (StorageError, 503),
]


@dataclass(frozen=True)
class Mqs:
    engine: Engine
    hub: WakeHub
    settings: MqsSettings
    served: bool  # with tokens, or on loopback (mqs/auth.py)


def _mqs(request: Request) -> Mqs:
    ctx: Mqs = request.app.state.mqs
    return ctx


def endpoint(handler: Handler) -> Handler:
    """Authorises the request and maps every refusal to its status with a JSON body."""

    @functools.wraps(handler)
    async def wrapped(request: Request) -> Response:
        try:
            ctx = _mqs(request)
            auth.check(request, ctx.settings, served=ctx.served)
            return await handler(request)
        except MethodNotAllowed as exc:
            return responses.error(exc.status, str(exc), {"Allow": ", ".join(exc.allow)})
        except RequestError as exc:
            extra = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
            return responses.error(exc.status, str(exc), extra)
        except MediatorError as exc:
            for kind, status in _STATUS:
                if isinstance(exc, kind):
                    return responses.error(status, str(exc))
            raise
        except OutOfMemoryError:
            log.warning("storage full: a write was refused (maxmemory)")
            return responses.error(507, STORAGE_FULL)
        except STORAGE_ERRORS as exc:
            log.error("storage unavailable: %s", exc)
            return responses.error(503, "storage is unavailable, try again")

    return wrapped


class MethodNotAllowed(RequestError):
    """405: the method is not one the target supports (`allow`)."""

    def __init__(self, method: str, allow: tuple[str, ...]) -> None:
        super().__init__(f"{method} is not allowed here; use {', '.join(allow)}", status=405)
        self.allow = allow


def _queue(request: Request) -> QueueRef:
    name = request.path_params["name"]
    if request.scope["path"].startswith("/messages/") and headers.MESSAGE_ID.fullmatch(name):
        raise MethodNotAllowed(request.method, _message_allow(name))
    return QueueRef(NAMESPACE, headers.check_queue_name(name))


@endpoint
async def create_queue(request: Request) -> Response:
    ctx, ref = _mqs(request), _queue(request)
    try:
        config = headers.queue_config(request.headers)
    except RequestError:
        if await ctx.engine.queue_exists(ref):  # the spec answers 409 before validating
            raise QueueExists(ref.name) from None
        raise
    info = await ctx.engine.create_queue(ref, config)
    return JSONResponse(responses.queue_document(info), status_code=201)


@endpoint
async def update_queue(request: Request) -> Response:
    ctx, ref = _mqs(request), _queue(request)
    try:
        config = headers.queue_config(request.headers)
    except RequestError:
        if not await ctx.engine.queue_exists(ref):  # the spec answers 404 before validating
            raise QueueNotFound(ref.name) from None
        raise
    info = await ctx.engine.update_queue(ref, config)
    return JSONResponse(responses.queue_document(info))


@endpoint
async def delete_queue(request: Request) -> Response:
    ctx, ref = _mqs(request), _queue(request)
    info = await ctx.engine.get_queue(ref)  # 404 comes before header validation
    cascade = headers.cascade(request.headers)
    await ctx.engine.delete_queue(ref, cascade=cascade)
    return JSONResponse(responses.queue_document(info))


@endpoint
async def get_queue(request: Request) -> Response:
    ctx, ref = _mqs(request), _queue(request)
    info = await ctx.engine.get_queue(ref)
    stats = await ctx.engine.stats(ref)
    return JSONResponse(responses.queue_document(info, stats))


@endpoint
async def list_queues(request: Request) -> Response:
    ctx = _mqs(request)
    total = await ctx.engine.count_queues(NAMESPACE)
    try:
        selected = ranges.select(request.headers.get("range"), total)
    except ranges.RangeNotSatisfiable as exc:
        return responses.error(416, str(exc), {"Content-Range": ranges.content_range(None, total)})
    infos = [] if selected is None else await ctx.engine.list_queues(NAMESPACE, *selected)
    return JSONResponse(
        {"queues": [responses.queue_document(i) for i in infos]},
        headers={
            "Accept-Ranges": ranges.UNIT,
            "Content-Range": ranges.content_range(selected, total),
        },
    )


@endpoint
async def send_messages(request: Request) -> Response:
    ctx, ref = _mqs(request), _queue(request)
    s = ctx.settings
    raw = await body.read_limited(request, s.max_request_bytes)
    messages = body.messages_from(
        raw,
        request.headers.get("content-type"),
        content_encoding=request.headers.get("content-encoding"),
        trace_id=request.headers.get("x-trace-id"),
        max_message_bytes=s.max_message_bytes,
        max_parts=s.max_batch_messages,
    )
    result = await ctx.engine.send(ref, messages)
    return JSONResponse({"messageIds": result.message_ids}, status_code=201)


@endpoint
async def receive_messages(request: Request) -> Response:
    ctx, ref = _mqs(request), _queue(request)
    try:
        n = headers.integer(request.headers, headers.MAX_MESSAGES, 1, 1000, required=True)
        wait = headers.integer(request.headers, headers.WAIT_TIME, 0, 60, required=False) or 0
    except RequestError:
        if not await ctx.engine.queue_exists(ref):  # the spec answers 404 before validating
            raise QueueNotFound(ref.name) from None
        raise
    assert n is not None
    result = await receive_waiting(
        ctx.engine,
        ctx.hub,
        ref,
        n,
        wait * 1000,  # the API's seconds; the engine's ms
        recheck_ms=int(ctx.settings.long_poll_recheck_seconds * 1000),
    )
    return responses.received(result.messages, batch=n > 1)


@endpoint
async def delete_message(request: Request) -> Response:
    ctx = _mqs(request)
    await ctx.engine.delete_message(NAMESPACE, request.path_params["message_id"])
    return Response(status_code=204)


class _Fallback:
    """Answers what the typed routes before it leave: a method the path does not support (405,
    with every method it does), or a name with a '/' or no name at all (through the handler).

    An ASGI app rather than a function, so that Starlette routes every method to it."""

    def __init__(
        self,
        handlers: dict[str, Handler],
        allowed: Callable[[str], tuple[str, ...]] = lambda name: ("GET", "HEAD"),
    ) -> None:
        self.handlers = handlers
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive, send)
        handler = self.handlers.get(request.method)
        response: Response
        if handler is None:
            allow = self.allowed(request.path_params.get("name", ""))
            refusal = MethodNotAllowed(request.method, allow)
            response = responses.error(405, str(refusal), {"Allow": ", ".join(allow)})
        else:
            response = await handler(request)
        await response(scope, receive, send)


@endpoint
async def _no_such_message(request: Request) -> Response:
    raise MessageNotFound(request.path_params["name"])


_QUEUE_METHODS = {
    "GET": get_queue,
    "HEAD": get_queue,
    "PUT": create_queue,
    "POST": update_queue,
    "DELETE": delete_queue,
}
_MESSAGE_METHODS = {
    "GET": receive_messages,
    "HEAD": receive_messages,
    "POST": send_messages,
    "DELETE": _no_such_message,
}

_QUEUE_ALLOW = ("DELETE", "GET", "HEAD", "POST", "PUT")


def _message_allow(name: str) -> tuple[str, ...]:
    """A message id (never a queue name: ids hold a '.') can only be deleted; anything else
    is a queue name to send to or receive from (400 when it is not a valid one)."""
    return ("DELETE",) if headers.MESSAGE_ID.fullmatch(name) else ("GET", "HEAD", "POST")


# The message routes first: they carry nearly all traffic, and routes are tried in order.
# The untyped routes last: a `{name:path}` catches names the typed ones do not take.
routes = [
    Route("/messages/{name}", send_messages, methods=["POST"]),
    Route("/messages/{name}", receive_messages, methods=["GET"]),
    Route("/messages/{message_id}", delete_message, methods=["DELETE"]),
    Route("/queues", list_queues, methods=["GET"]),
    Route("/queues/{name}", create_queue, methods=["PUT"]),
    Route("/queues/{name}", update_queue, methods=["POST"]),
    Route("/queues/{name}", delete_queue, methods=["DELETE"]),
    Route("/queues/{name}", get_queue, methods=["GET"]),
    Route("/queues", _Fallback({})),
    Route("/queues/{name:path}", _Fallback(_QUEUE_METHODS, lambda name: _QUEUE_ALLOW)),
    Route("/messages/{name:path}", _Fallback(_MESSAGE_METHODS, _message_allow)),
]
