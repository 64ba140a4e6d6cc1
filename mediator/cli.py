"""`mediator serve | invitation | migrate | pseudonym`, and the commands plugged in
(`worker`, `capacity`): every flag has a MEDIATOR_<NAME> environment twin."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any

import click

from mediator.errors import ConfigError, MediatorError
from mediator.options import build_settings, fail, settings_options
from mediator.settings import Settings

WS_FRAME_MARGIN = 64 * 1024  # a frame may carry an envelope of the largest size, as text


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def main() -> None:
    """A Redis-backed, horizontally scaled DIDComm mediator and its mqs queue API."""


@main.command()
@settings_options("serve")
def serve(**options: Any) -> None:
    """Run a node: the mqs HTTP API, health and metrics on one port.

    Without --redis-url it starts a private embedded server whose data lives in --data-dir.
    """
    from mediator.ops import allocator, logs

    settings = build_settings(options)
    logs.configure(settings.node.log_level, settings.node.resolved_id)
    allocator.tune()
    try:
        with redis_url_of(settings) as url:
            _serve(settings, url)
    except MediatorError as exc:
        fail(exc)


@contextlib.contextmanager
def redis_url_of(settings: Settings) -> Iterator[str]:
    """--redis-url, else the embedded server's, started in --data-dir (and stopped after)."""
    from mediator.embedded import EmbeddedServer
    from mediator.storage.target import parse as parse_redis_url

    if settings.redis.url:
        parse_redis_url(settings.redis.url)  # a malformed URL is refused here, with why
        yield settings.redis.url
        return
    embedded = EmbeddedServer(
        settings.embedded.data_dir,
        binary=settings.embedded.server_binary,
        stream_node_max_bytes=settings.embedded.stream_node_max_bytes,
        appendfsync=settings.embedded.appendfsync,
    )
    embedded.start()
    try:
        yield embedded.url
    finally:
        embedded.stop()


def _serve(settings: Settings, url: str) -> None:
    import uvicorn

    from mediator.app import create_app
    from mediator.transport.socket_protocol import LeanWebSocketProtocol

    app = create_app(settings, url)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=settings.node.host,
            port=settings.node.port,
            loop="uvloop",
            http="httptools",
            ws=LeanWebSocketProtocol,
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=10,
            timeout_keep_alive=75,
            ws_per_message_deflate=settings.websocket.compression,
            ws_ping_interval=settings.websocket.ping_seconds,
            ws_ping_timeout=settings.websocket.ping_seconds,
            # A larger frame closes the socket (1009) before it is read into memory.
            ws_max_size=settings.didcomm.max_envelope_bytes + WS_FRAME_MARGIN,
            # Client addresses come from X-Forwarded-For only through --trusted-proxies.
            proxy_headers=False,
        )
    )
    app.state.server = server  # SIGTERM drains first, then stops it (mediator.cluster.drain)
    server.run()
    if not server.started:
        sys.exit(3)  # as uvicorn.run: the application failed to start


@main.command()
@click.option("--dry-run", is_flag=True, help="Only count what would be converted.")
@click.option(
    "--force", is_flag=True, help="Run even though an old worker's heartbeat looks fresh."
)
@settings_options("migrate")
def migrate(dry_run: bool, force: bool, **options: Any) -> None:
    """Convert a database of key layout 1 (versions before 0.2) to layout 2, in place.

    Stop every node and worker of the old version first; start the new version once this
    has finished. Safe to run again after an interruption; on a converted database it
    changes nothing. DIDComm queues whose limits equal the --queue-* defaults given here
    (as MEDIATOR_* variables too) keep no copy of them, as new queues do. docs/upgrading.md
    has the whole procedure.
    """
    settings = build_settings(options)
    if not settings.redis.url:
        fail("mediator migrate needs --redis-url / MEDIATOR_REDIS_URL")
    try:
        report = asyncio.run(_migrate(settings, dry_run=dry_run, force=force))
    except MediatorError as exc:
        fail(exc)
    if report is None:
        click.echo("nothing to do: the database already has key layout 2")
        return
    verb = "would convert" if dry_run else "converted"
    click.echo(f"{verb} in {report.seconds:.1f} s: {report.line()}")


async def _migrate(settings: Settings, *, dry_run: bool, force: bool) -> Any:
    from mediator import runtime
    from mediator.migrate import Migration

    async with runtime.connected(settings.redis.url) as backend:
        migration = Migration(
            backend,
            runtime.engine_defaults(settings),
            progress=lambda text: click.echo(text, err=True),
            force=force,
        )
        if not await migration.needed():
            return None
        return await migration.run(dry_run=dry_run)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the whole invitation as JSON.")
@click.option(
    "--v2",
    is_flag=True,
    help="The DIDComm v2 invitation instead (Out-of-Band 2.0 from the mediator's did:peer:2, "
    "for v2 wallets such as Identus and Veramo).",
)
@click.option(
    "--v2-did",
    type=click.Choice(["peer2", "peer4"]),
    default="peer2",
    show_default=True,
    help="With --v2: the invitation from the did:peer:2, or from the long-form did:peer:4 of "
    "the same keys and services.",
)
@settings_options("invitation")
def invitation(as_json: bool, v2: bool, v2_did: str, **options: Any) -> None:
    """Print the mediator's Out-of-Band invitation URL, for wallets to connect with.

    With --redis-url it is computed here: the invitation imported from the mediator this one
    replaced (`mediator import`), else ours (a single-use invitation is stored there when
    --no-invitation-multi-use); with only --key-seed, our multi-use one is computed here;
    otherwise it is asked of the node running at --endpoint (default http://127.0.0.1:8080).
    --json prints the invitation itself and its legacy connections 1.0 (?c_i=) URL too.
    --v2 prints the DIDComm v2 invitation (`_oob=`), from the same identity (--v2-did peer4:
    from its did:peer:4).
    """
    settings = build_settings(options)
    try:
        data = asyncio.run(_v2_invitation(settings, v2_did) if v2 else _invitation(settings))
    except (MediatorError, OSError, ValueError) as exc:
        fail(exc)
    click.echo(json.dumps(data, indent=2) if as_json else data["invitation_url"])


@main.command()
@click.argument("keys", nargs=-1, required=True)
@settings_options("invitation")
def pseudonym(keys: tuple[str, ...], **options: Any) -> None:
    """Print how the logs name each of KEYS (recipient verkeys or DIDs, as a wallet's user
    gives them): logs show keys only as `key#` and a keyed hash, the same on every node of
    a deployment. Needs the mediator's identity: --key-seed, or --redis-url where the nodes
    keep it."""
    settings = build_settings(options)
    try:
        seed = asyncio.run(_identity_seed(settings))
    except (MediatorError, OSError) as exc:
        fail(exc)
    from mediator.ops import redact

    under = redact.derive(seed)
    for key in keys:
        click.echo(f"{key}\t{redact.pseudonym(key, under=under)}")


async def _identity_seed(settings: Settings) -> bytes:
    from mediator import runtime
    from mediator.didcomm.identity import from_seed_setting
    from mediator.mediation.identity import load_identity

    if settings.didcomm.key_seed:
        return from_seed_setting(settings.didcomm.key_seed).sigkey[:32]
    if not settings.redis.url:
        raise ConfigError("give --key-seed or --redis-url (where the nodes keep the identity)")
    async with runtime.connected(settings.redis.url) as backend:
        return (await load_identity(backend.client, "")).sigkey[:32]


async def _v2_invitation(settings: Settings, form: str) -> dict[str, Any]:
    from mediator.didcomm.identity import from_seed_setting
    from mediator.transport.routes import v2_invitation

    didcomm = settings.didcomm
    endpoints = (settings.public_endpoint, settings.public_ws_endpoint)
    if didcomm.key_seed:
        return v2_invitation(from_seed_setting(didcomm.key_seed), endpoints, didcomm, form)
    if not settings.redis.url:
        import httpx

        async with httpx.AsyncClient(timeout=10) as client:
            url = settings.public_endpoint.rstrip("/") + "/v2/invitation"
            response = await client.get(url, params={"did": form})
            response.raise_for_status()
            answer: dict[str, Any] = response.json()
            return answer
    from mediator import runtime
    from mediator.mediation.identity import load_identity

    async with runtime.connected(settings.redis.url) as backend:
        identity = await load_identity(backend.client, didcomm.key_seed)
    return v2_invitation(identity, endpoints, didcomm, form)


async def _invitation(settings: Settings) -> dict[str, Any]:
    from mediator.didcomm.identity import from_seed_setting
    from mediator.didcomm.invitation import invitation_urls, multi_use_id

    didcomm = settings.didcomm
    if not settings.redis.url and not didcomm.key_seed:
        import httpx

        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.get(settings.public_endpoint.rstrip("/") + "/invitation")
            response.raise_for_status()
            answer: dict[str, Any] = response.json()
            return answer
    if not settings.redis.url:
        if not didcomm.invitation_multi_use:
            raise ConfigError("a single-use invitation is stored in Redis: give --redis-url")
        identity = from_seed_setting(didcomm.key_seed)
        return invitation_urls(
            identity,
            settings.public_endpoint,
            didcomm.label,
            multi_use_id(identity),
            multi_use=True,
        )
    from mediator import runtime
    from mediator.mediation.handshakes import HandshakeBook
    from mediator.mediation.identity import load_identity
    from mediator.mediation.imported import Sealer, load_imported

    async with runtime.connected(settings.redis.url) as backend:
        identity = await load_identity(backend.client, didcomm.key_seed)
        imported = await load_imported(backend.client, Sealer(identity))
        book = HandshakeBook(backend.client)
        return await book.invitation(identity, didcomm, settings.public_endpoint, imported)


@main.command("import")
@click.argument("kind", type=click.Choice(["acapy", "credo"]))
@click.option(
    "--wallet-uri",
    envvar="MEDIATOR_IMPORT_WALLET_URI",
    show_envvar=True,
    help="The old mediator's Askar store: sqlite:///abs/path/sqlite.db (read from a copy "
    "made in $TMPDIR: it needs the store's size free there) or "
    "postgres://user:password@host:port/database.",
)
@click.option(
    "--wallet-uri-file",
    type=click.Path(dir_okay=False),
    envvar="MEDIATOR_IMPORT_WALLET_URI_FILE",
    show_envvar=True,
    help="A file holding --wallet-uri (when it holds a password).",
)
@click.option(
    "--wallet-key",
    envvar="MEDIATOR_IMPORT_WALLET_KEY",
    show_envvar=True,
    help="The store's key, as the old mediator was given it. Secret: better given as a file.",
)
@click.option(
    "--wallet-key-file",
    type=click.Path(dir_okay=False),
    envvar="MEDIATOR_IMPORT_WALLET_KEY_FILE",
    show_envvar=True,
    help="A file holding --wallet-key (a mounted secret).",
)
@click.option(
    "--wallet-key-method",
    envvar="MEDIATOR_IMPORT_WALLET_KEY_METHOD",
    show_envvar=True,
    help="kdf:argon2i:mod, kdf:argon2i:int or raw (also ACA-Py's ARGON2I_MOD, ARGON2I_INT, "
    "RAW). Default: the method the store records.",
)
@click.option(
    "--wallet-profile",
    envvar="MEDIATOR_IMPORT_WALLET_PROFILE",
    show_envvar=True,
    help="The store's profile holding the mediator. Default: the store's default profile.",
)
@click.option(
    "--queue-url",
    envvar="MEDIATOR_IMPORT_QUEUE_URL",
    show_envvar=True,
    help="credo: the Postgres database of its queue when it was not kept in the store "
    "(postgres://user:password@host:port/messagepickuprepository).",
)
@click.option(
    "--queue-url-file",
    type=click.Path(dir_okay=False),
    envvar="MEDIATOR_IMPORT_QUEUE_URL_FILE",
    show_envvar=True,
    help="A file holding --queue-url.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=0),
    envvar="MEDIATOR_IMPORT_WORKERS",
    show_envvar=True,
    help="Processes reading the store's indexes side by side (each a connection to the "
    "store; 0: none, this process reads them). Default: one a core from 20,000 connections.",
)
@click.option("--dry-run", is_flag=True, help="Read everything, say what would be written.")
@settings_options("import")
def import_(
    kind: str,
    wallet_uri: str | None,
    wallet_uri_file: str | None,
    wallet_key: str | None,
    wallet_key_file: str | None,
    wallet_key_method: str | None,
    wallet_profile: str | None,
    queue_url: str | None,
    queue_url_file: str | None,
    workers: int | None,
    dry_run: bool,
    **options: Any,
) -> None:
    """Carry an ACA-Py or Credo mediator over: its routing and connection keys, invitations,
    wallets' mediation and keylists, and (Credo) the messages it held for them.

    Stop the old mediator first; the store is read and never written. The target is
    --redis-url, else the embedded server in --data-dir. Then start the nodes on the old
    mediator's public endpoint: every wallet and its contacts carry on. Running it again
    imports nothing new; a run stopped halfway can be run again. docs/migrating.md has the
    whole cutover.
    """
    from mediator.imports.run import ImportOptions, report_lines, run_import

    settings = build_settings(options)
    key = _secret(wallet_key, wallet_key_file, "--wallet-key")
    uri = _secret(wallet_uri, wallet_uri_file, "--wallet-uri")
    if queue_url or queue_url_file:
        queue_url = _secret(queue_url, queue_url_file, "--queue-url")
    if queue_url and kind != "credo":
        fail("--queue-url is a Credo mediator's queue: ACA-Py keeps none")
    chosen = ImportOptions(
        kind, uri, key, wallet_key_method, wallet_profile, dry_run, queue_url, workers
    )
    try:
        with redis_url_of(settings) as url:
            outcome = asyncio.run(
                run_import(settings, url, chosen, lambda line: click.echo(line, err=True))
            )
    except MediatorError as exc:
        fail(exc, 1)
    for line in report_lines(outcome, dry_run=dry_run):
        click.echo(line)
    refused = sum(outcome.report.refused.values())
    if refused:
        fail(f"{refused:,} records were refused (listed above); the rest was imported", 1)


def _secret(value: str | None, path: str | None, flag: str) -> str:
    if path:
        try:
            with open(path, encoding="utf-8") as file:
                return file.read().strip()
        except OSError as exc:
            fail(f"{flag}-file {path}: {exc.strerror or exc}")
    if value is None:
        fail(f"give {flag} or {flag}-file")
    return value


def _add_plugged_commands() -> None:
    """`worker` and `capacity` come from the packages above this one (mediator/plugins.py)."""
    from mediator.plugins import commands

    for command in commands():
        main.add_command(command)


_add_plugged_commands()
