"""The ASGI node: routes, start-up and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from mediator import plugins, runtime, tasks
from mediator.cluster.drain import Drain
from mediator.cluster.handoffs import Handoffs
from mediator.cluster.health import StorageWatch
from mediator.cluster.presence import Presence
from mediator.engine import Engine, keys
from mediator.engine.wakeups import WakeHub
from mediator.mediation.abuse import Limiter
from mediator.mediation.handshakes import HandshakeBook
from mediator.mediation.imported import Sealer, load_imported
from mediator.mediation.mailbox import Mailbox
from mediator.mediation.push import Pusher
from mediator.mediation.store import MediationStore, RouteCache
from mediator.mediation.threads import ThreadBook
from mediator.mqs import auth as mqs_auth
from mediator.mqs import openapi
from mediator.mqs import routes as mqs_routes
from mediator.mqs.direct import MessageRoutes
from mediator.notify.notifier import Notifier
from mediator.ops import cluster_state
from mediator.ops.metrics import Metrics
from mediator.ops.middleware import RequestLog
from mediator.protocols.context import Services
from mediator.settings import Settings
from mediator.storage.clients import STORAGE_ERRORS
from mediator.storage.target import Mode
from mediator.transport import routes as didcomm_routes
from mediator.transport.http import DidcommHttp
from mediator.transport.inbound import Pipeline
from mediator.transport.websocket import DidcommSocket

log = logging.getLogger(__name__)


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    drain: Drain = request.app.state.drain
    if drain.draining:
        return JSONResponse({"status": "draining"}, status_code=503)
    if drain.unavailable:  # pings unanswered for --storage-lost-seconds (cluster/health.py)
        error = request.app.state.watch.error
        return JSONResponse({"status": "unavailable", "error": error}, status_code=503)
    try:
        await asyncio.wait_for(request.app.state.engine.redis.ping(), 2)
    except STORAGE_ERRORS as exc:  # TimeoutError is an OSError
        return JSONResponse({"status": "unavailable", "error": str(exc)}, status_code=503)
    return JSONResponse({"status": "ready"})


async def metrics(request: Request) -> Response:
    m: Metrics = request.app.state.metrics
    engine: Engine = request.app.state.engine
    partitions = request.app.state.settings.worker.partitions
    m.waiters.set(request.app.state.mqs.hub.waiter_count())
    answered = False
    with contextlib.suppress(*STORAGE_ERRORS):  # TimeoutError is an OSError
        await m.refresh_queue_totals(engine.redis, partitions)
        m.set_cluster_state(
            await cluster_state.read(request.app.state.backend, partitions), partitions
        )
        answered = True
    drain: Drain = request.app.state.drain
    m.ready.set(1 if answered and not (drain.draining or drain.unavailable) else 0)
    return PlainTextResponse(m.render(), media_type="text/plain; version=0.0.4")


async def openapi_json(request: Request) -> Response:
    return JSONResponse(openapi.document())


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)


async def unexpected_error(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error", exc_info=exc)
    return JSONResponse({"error": "internal error"}, status_code=500)


def create_app(settings: Settings, redis_url: str) -> Starlette:
    metrics_ = Metrics()
    node = settings.node
    drain = Drain(node.drain_seconds)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        rt = await runtime.start(
            settings,
            redis_url,
            wake_channel=keys.node_channel(node.resolved_id),
            observe=lambda outcome: metrics_.confirmations.labels(outcome).inc(),
            observe_calls=metrics_.calls_in_flight.observe,
        )
        backend, redis, engine, identity = rt.backend, rt.redis, rt.engine, rt.identity
        hub = WakeHub(backend.subscriber, engine.wake_channel)
        routes = RouteCache(node.route_cache_seconds)
        hub.listen(keys.ROUTES_CHANNEL, routes.forget, routes.clear)
        sealer = Sealer(identity)
        store = MediationStore(redis, routes, sealer)
        imported = await load_imported(redis, sealer)
        if imported.source is not None:
            log.info(
                "serving what was imported from %s: %d routing key(s), %d invitation(s)",
                imported.source.get("kind", "another mediator"),
                len(imported.routing_keys),
                len(imported.invitations),
            )
        presence = Presence(
            redis,
            node.resolved_id,
            node.presence_seconds,
            3 * settings.websocket.live_recheck_seconds,
        )
        hub.on("takeover", presence.on_takeover, presence.reset)
        await hub.start()
        await presence.start()
        watch = StorageWatch(redis.ping, node.storage_lost_seconds, drain.storage_changed)
        watch.start()
        app.state.watch = watch
        app.state.engine = engine
        app.state.backend = backend
        served = mqs_auth.served(settings.mqs, node.host)
        app.state.mqs = mqs_routes.Mqs(engine=engine, hub=hub, settings=settings.mqs, served=served)
        mailbox = Mailbox(
            engine,
            settings.queue,
            metrics_,
            forwards_per_second=settings.limits.forwards_per_second,
            routed=backend.mode is not Mode.CLUSTER,
        )
        # A send hands a message straight to a live socket here (cluster/handoffs.py).
        handoffs = Handoffs(mailbox.give_back, metrics_.delivered.inc)
        hub.on_bytes("take", handoffs.on_take, handoffs.reset)
        pusher = Pusher(redis, store, mailbox, settings.push, settings.outbound, metrics_)
        notifier = Notifier(
            redis, mailbox, presence, settings.notify, settings.push, settings.outbound, metrics_
        )
        services = Services(
            didcomm=settings.didcomm,
            queue=settings.queue,
            engine=engine,
            hub=hub,
            identity=identity,
            store=store,
            mailbox=mailbox,
            threads=ThreadBook(redis, settings.didcomm.thread_state_seconds),
            handshakes=HandshakeBook(redis),
            endpoints=(settings.public_endpoint, settings.public_ws_endpoint),
            pusher=pusher,
            presence=presence,
            handoffs=handoffs,
            notifier=notifier,
            limiter=Limiter(engine.scripts, settings.limits, redis, identity.sigkey[:32]),
            imported=imported,
        )
        app.state.didcomm = Pipeline(services, settings.websocket, metrics_)
        background = plugins.node_services(plugins.NodeParts(rt, pusher, notifier, metrics_))
        if settings.worker.in_process and not background:
            log.warning("--in-process-worker: no worker is installed (the workers package)")
        running = [asyncio.create_task(s.run(), name=s.name) for s in background]
        if not served:
            log.warning(
                "mqs API disabled: no MEDIATOR_API_TOKENS and listening on %s, which is not "
                "a loopback address",
                node.host,
            )
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, drain.begin, lambda: _stop_server(app))
        log.info(
            "node ready",
            extra={
                "host": node.host,
                "port": node.port,
                "redis": backend.target.redacted,
                "redis_mode": backend.mode.value,
                "accepted_when": rt.durability.describe,
            },
        )
        try:
            yield
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGTERM)
            for service, task in zip(background, running, strict=True):
                service.stop()  # ends its loop even if a cancellation is swallowed
                await tasks.stop(task)
                if not task.cancelled() and task.exception() is not None:
                    log.error("the %s had stopped", service.name, exc_info=task.exception())
            await pusher.aclose()
            await notifier.aclose()
            await watch.stop()
            await presence.stop()
            await handoffs.stop()
            await hub.stop()
            await backend.aclose()

    app = Starlette(
        routes=[
            *didcomm_routes.routes,
            *mqs_routes.routes,
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/metrics", metrics),
            Route("/openapi.json", openapi_json),
        ],
        middleware=[
            Middleware(DidcommSocket),
            Middleware(RequestLog, metrics=metrics_, drain=drain),
            Middleware(DidcommHttp),
            Middleware(MessageRoutes),
        ],
        exception_handlers={HTTPException: http_error, Exception: unexpected_error},
        lifespan=lifespan,
    )
    app.state.metrics = metrics_
    app.state.settings = settings
    app.state.drain = drain
    return app


def _stop_server(app: Starlette) -> None:
    """End the server after a drain: the uvicorn server `mediator serve` runs, else SIGINT."""
    server = getattr(app.state, "server", None)
    if server is not None:
        server.should_exit = True
    else:
        os.kill(os.getpid(), signal.SIGINT)
