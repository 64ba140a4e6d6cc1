"""The mqs routes: thin handlers that parse, call the engine and build the answer."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

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
from mediator.settings import Settings
from mediator.storage.clients import STORAGE_ERRORS

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
    settings: Settings


def _mqs(request: Request) -> Mqs:
    ctx: Mqs = request.app.state.mqs
    return ctx


def endpoint(handler: Handler) -> Handler:
    """Authorises the request and maps every refusal to its status with a JSON body."""

    @functools.wraps(handler)
    async def wrapped(request: Request) -> Response:
        try:
            auth.check(request, _mqs(request).settings)
            return await handler(request)
        except RequestError as exc:
            extra = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
            return responses.error(exc.status, str(exc), extra)
        except MediatorError as exc:
            for kind, status in _STATUS:
                if isinstance(exc, kind):
                    return responses.error(status, str(exc))
            raise
        except STORAGE_ERRORS as exc:
            log.error("storage unavailable: %s", exc)
            return responses.error(503, "storage is unavailable, try again")

    return wrapped


def _queue(request: Request) -> QueueRef:
    name = headers.check_queue_name(request.path_params["name"])
    return QueueRef(NAMESPACE, name)


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
        wait,
        recheck_seconds=ctx.settings.long_poll_recheck_seconds,
    )
    return responses.received(result.messages, batch=n > 1)


@endpoint
async def delete_message(request: Request) -> Response:
    ctx = _mqs(request)
    await ctx.engine.delete_message(NAMESPACE, request.path_params["message_id"])
    return Response(status_code=204)


# The message routes first: they carry nearly all traffic, and routes are tried in order.
routes = [
    Route("/messages/{name}", send_messages, methods=["POST"]),
    Route("/messages/{name}", receive_messages, methods=["GET"]),
    Route("/messages/{message_id}", delete_message, methods=["DELETE"]),
    Route("/queues", list_queues, methods=["GET"]),
    Route("/queues/{name}", create_queue, methods=["PUT"]),
    Route("/queues/{name}", update_queue, methods=["POST"]),
    Route("/queues/{name}", delete_queue, methods=["DELETE"]),
    Route("/queues/{name}", get_queue, methods=["GET"]),
]
