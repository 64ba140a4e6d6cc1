"""`mediator serve`, `mediator worker`: every flag has a MEDIATOR_<NAME> environment twin."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from mediator.errors import ConfigError, MediatorError
from mediator.settings import (
    FILE_SUFFIX,
    Settings,
    env_name,
    read_secret_files,
    secret_fields,
    settings_fields,
)

WS_FRAME_MARGIN = 64 * 1024  # a frame may carry an envelope of the largest size, as text


def _settings_options(scope: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """One click option per settings field of this scope, default and help from the field."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for f in reversed(settings_fields(scope)):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            flag = "--" + f.name.replace("_", "-")
            kwargs: dict[str, Any] = {
                "envvar": env_name(f.name),
                "default": default,
                "show_default": not f.metadata["secret"],
                "show_envvar": True,
                "help": f.metadata["help"],
            }
            if f.metadata["secret"]:
                func = click.option(
                    flag + "-file",
                    f.name + FILE_SUFFIX,
                    envvar=env_name(f.name + FILE_SUFFIX),
                    type=click.Path(dir_okay=False),
                    show_envvar=True,
                    help=f"A file holding --{f.name.replace('_', '-')} (a mounted secret).",
                )(func)
            if f.type in (bool, "bool"):
                name = f.name.replace("_", "-")
                func = click.option(f"--{name}/--no-{name}", f.name, **kwargs)(func)
            else:
                kind = {"int": int, "float": float, "str": str}[str(f.type)]
                func = click.option(flag, f.name, type=kind, **kwargs)(func)
        return func

    return decorate


def _build(options: dict[str, Any]) -> Settings:
    names = {f.name for f in dataclasses.fields(Settings)}
    values = {k: v for k, v in options.items() if k in names}
    files = {
        f.name: options[f.name + FILE_SUFFIX]
        for f in secret_fields()
        if options.get(f.name + FILE_SUFFIX)
    }
    try:
        return Settings(**read_secret_files(values, files))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def main() -> None:
    """A Redis-backed, horizontally scaled DIDComm mediator and its mqs queue API."""


@main.command()
@_settings_options("serve")
def serve(**options: Any) -> None:
    """Run a node: the mqs HTTP API, health and metrics on one port.

    Without --redis-url it starts a private embedded server whose data lives in --data-dir.
    """
    import uvicorn

    from mediator.app import create_app
    from mediator.embedded import EmbeddedServer
    from mediator.ops import allocator, logs
    from mediator.storage.target import parse as parse_redis_url
    from mediator.transport.socket_protocol import LeanWebSocketProtocol

    settings = _build(options)
    logs.configure(settings.log_level, settings.resolved_node_id)
    allocator.tune()
    embedded = None
    url = settings.redis_url
    try:
        if not url:
            embedded = EmbeddedServer(
                settings.data_dir,
                binary=settings.redis_server_binary,
                stream_node_max_bytes=settings.stream_node_max_bytes,
                appendfsync=settings.appendfsync,
            )
            embedded.start()
            url = embedded.url
        parse_redis_url(url)  # a malformed URL is refused here, with what was expected
        app = create_app(settings, url)
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                host=settings.host,
                port=settings.port,
                loop="uvloop",
                http="httptools",
                ws=LeanWebSocketProtocol,
                log_config=None,
                access_log=False,
                timeout_graceful_shutdown=10,
                timeout_keep_alive=75,
                ws_per_message_deflate=settings.websocket_compression,
                ws_ping_interval=settings.websocket_ping_seconds,
                ws_ping_timeout=settings.websocket_ping_seconds,
                # A larger frame closes the socket (1009) before it is read into memory.
                ws_max_size=settings.max_envelope_bytes + WS_FRAME_MARGIN,
                # Client addresses come from X-Forwarded-For only through --trusted-proxies.
                proxy_headers=False,
            )
        )
        app.state.server = server  # SIGTERM drains first, then stops it (mediator.cluster.drain)
        server.run()
        if not server.started:
            sys.exit(3)  # as uvicorn.run: the application failed to start
    except MediatorError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    finally:
        if embedded is not None:
            embedded.stop()


@main.command()
@click.option("--check", is_flag=True, help="Exit 0 if the local worker is healthy, else 1.")
@_settings_options("worker")
def worker(check: bool, **options: Any) -> None:
    """Run an upkeep worker: what is due (retention purge, delayed promotion, dead-letter
    hand-overs, push retries), the totals behind /metrics, and the paced index audit.

    Start as many as you like; they split the partitions between them by leases.
    Needs --redis-url (the embedded server belongs to one node).
    """
    settings = _build(options)
    if check:
        from workers.check import check as run_check

        if not settings.redis_url:
            click.echo("unhealthy: --check needs --redis-url / MEDIATOR_REDIS_URL", err=True)
            sys.exit(1)
        ok, text = run_check(settings, settings.redis_url)
        click.echo(text)
        sys.exit(0 if ok else 1)
    if not settings.redis_url:
        click.echo("error: mediator worker needs --redis-url / MEDIATOR_REDIS_URL", err=True)
        sys.exit(2)
    from mediator.ops import allocator, logs
    from mediator.storage.target import parse as parse_redis_url

    try:
        parse_redis_url(settings.redis_url)
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    logs.configure(settings.log_level, settings.resolved_node_id)
    allocator.tune()
    try:
        asyncio.run(_run_worker(settings))
    except MediatorError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


@main.command()
@click.option("--dry-run", is_flag=True, help="Only count what would be converted.")
@click.option(
    "--force", is_flag=True, help="Run even though an old worker's heartbeat looks fresh."
)
@_settings_options("migrate")
def migrate(dry_run: bool, force: bool, **options: Any) -> None:
    """Convert a database of key layout 1 (versions before 0.2) to layout 2, in place.

    Stop every node and worker of the old version first; start the new version once this
    has finished. Safe to run again after an interruption; on a converted database it
    changes nothing. DIDComm queues whose limits equal the --queue-* defaults given here
    (as MEDIATOR_* variables too) keep no copy of them, as new queues do. docs/upgrading.md
    has the whole procedure.
    """
    settings = _build(options)
    if not settings.redis_url:
        click.echo("error: mediator migrate needs --redis-url / MEDIATOR_REDIS_URL", err=True)
        sys.exit(2)
    try:
        report = asyncio.run(_migrate(settings, dry_run=dry_run, force=force))
    except MediatorError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    if report is None:
        click.echo("nothing to do: the database already has key layout 2")
        return
    verb = "would convert" if dry_run else "converted"
    click.echo(f"{verb} in {report.seconds:.1f} s: {report.line()}")


async def _migrate(settings: Settings, *, dry_run: bool, force: bool) -> Any:
    from mediator.engine.keys import DIDCOMM_NAMESPACE
    from mediator.mediation.mailbox import defaults as mailbox_defaults
    from mediator.migrate import Migration
    from mediator.storage.clients import Backend
    from mediator.storage.target import parse as parse_redis_url

    parse_redis_url(settings.redis_url)
    backend = Backend(settings.redis_url)
    try:
        await backend.start()
        migration = Migration(
            backend,
            {DIDCOMM_NAMESPACE: mailbox_defaults(settings)},
            progress=lambda text: click.echo(text, err=True),
            force=force,
        )
        if not await migration.needed():
            return None
        return await migration.run(dry_run=dry_run)
    finally:
        await backend.aclose()


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the whole invitation as JSON.")
@_settings_options("invitation")
def invitation(as_json: bool, **options: Any) -> None:
    """Print the mediator's Out-of-Band invitation URL, for wallets to connect with.

    With --redis-url it is computed here (a single-use invitation is stored there when
    --no-invitation-multi-use); with only --key-seed, the multi-use one is computed here;
    otherwise it is asked of the node running at --endpoint (default http://127.0.0.1:8080).
    --json prints the invitation itself and its legacy connections 1.0 (?c_i=) URL too.
    """
    settings = _build(options)
    try:
        data = asyncio.run(_invitation(settings))
    except (MediatorError, OSError, ValueError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo(json.dumps(data, indent=2) if as_json else data["invitation_url"])


@main.command()
@click.argument("keys", nargs=-1, required=True)
@_settings_options("invitation")
def pseudonym(keys: tuple[str, ...], **options: Any) -> None:
    """Print how the logs name each of KEYS (recipient verkeys or DIDs, as a wallet's user
    gives them): logs show keys only as `key#` and a keyed hash, the same on every node of
    a deployment. Needs the mediator's identity: --key-seed, or --redis-url where the nodes
    keep it."""
    settings = _build(options)
    try:
        seed = asyncio.run(_identity_seed(settings))
    except (MediatorError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    from mediator.ops import redact

    under = redact.derive(seed)
    for key in keys:
        click.echo(f"{key}\t{redact.pseudonym(key, under=under)}")


async def _identity_seed(settings: Settings) -> bytes:
    from mediator.didcomm.identity import from_seed_setting, load_identity
    from mediator.storage.clients import Backend

    if settings.key_seed:
        return from_seed_setting(settings.key_seed).sigkey[:32]
    if not settings.redis_url:
        raise ConfigError("give --key-seed or --redis-url (where the nodes keep the identity)")
    backend = Backend(settings.redis_url)
    try:
        await backend.start()
        return (await load_identity(backend.client, "")).sigkey[:32]
    finally:
        await backend.aclose()


async def _invitation(settings: Settings) -> dict[str, Any]:
    from mediator.didcomm.identity import from_seed_setting, load_identity
    from mediator.didcomm.invitation import invitation_urls, multi_use_id

    if not settings.redis_url and not settings.key_seed:
        import httpx

        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.get(settings.public_endpoint.rstrip("/") + "/invitation")
            response.raise_for_status()
            answer: dict[str, Any] = response.json()
            return answer
    if not settings.redis_url:
        if not settings.invitation_multi_use:
            raise ConfigError("a single-use invitation is stored in Redis: give --redis-url")
        identity = from_seed_setting(settings.key_seed)
        return invitation_urls(
            identity,
            settings.public_endpoint,
            settings.label,
            multi_use_id(identity),
            multi_use=True,
        )
    from mediator.mediation.handshakes import HandshakeBook
    from mediator.storage.clients import Backend

    backend = Backend(settings.redis_url)
    try:
        await backend.start()
        identity = await load_identity(backend.client, settings.key_seed)
        return await HandshakeBook(backend.client).invitation(identity, settings)
    finally:
        await backend.aclose()


async def _run_worker(settings: Settings) -> None:
    from mediator.didcomm.identity import load_identity
    from mediator.engine import Engine, keys, layout
    from mediator.mediation.mailbox import defaults as mailbox_defaults
    from mediator.ops import redact
    from mediator.ops.metrics import Metrics
    from mediator.storage.clients import Backend
    from mediator.storage.durability import Durability
    from workers.runner import Worker

    backend = Backend(settings.redis_url)
    await backend.start()
    redis = backend.client
    durability = Durability.from_settings(backend, settings)
    await durability.check()
    await layout.ensure(redis)
    identity = await load_identity(redis, settings.key_seed)
    redact.use_seed(identity.sigkey[:32])  # its log lines name connections as nodes do
    engine = Engine(
        redis,
        confirmed=durability,
        defaults={keys.DIDCOMM_NAMESPACE: mailbox_defaults(settings)},
    )
    metrics = Metrics(worker=True)
    endpoint = (
        metrics.serve(settings.worker_metrics_listen) if settings.worker_metrics_listen else None
    )
    worker = Worker(settings, redis, engine, metrics=metrics)
    task = asyncio.create_task(worker.run(), name="worker")

    def stop() -> None:
        worker.stopping = True  # ends the loop should the cancellation be swallowed
        task.cancel()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    if endpoint is not None:
        endpoint.shutdown()
    await backend.aclose()


def _add_capacity() -> None:
    from spark.cli import capacity

    main.add_command(capacity)


_add_capacity()
