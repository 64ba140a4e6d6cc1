"""The composition root: what every command builds from the settings, built once and in one
order, so that a node, a worker, `migrate`, the capacity jobs and the importers cannot
disagree about it.

    connect   the Redis URL and its mode (standalone, Sentinel, Cluster): a started Backend
    start     + what a send waits for (WAIT / WAITAOF, checked against the servers)
              + the key layout (written into an empty database, an older one refused)
              + the mediator's identity (and the key of the logs' pseudonyms)
              + the queue engine, with the DIDComm mailboxes' defaults

A node adds its own services on top (mediator/app.py); a command that only needs a
connection (`migrate`, `invitation`) stops at `connect`. Components outside mediator/ (the
upkeep worker, the capacity jobs) plug in through entry points (mediator/plugins.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from mediator.didcomm.keys import KeyPair
from mediator.engine import Engine, QueueConfig, keys, layout
from mediator.engine.durability import Durability
from mediator.mediation.identity import load_identity
from mediator.mediation.mailbox import defaults as mailbox_defaults
from mediator.ops import redact
from mediator.settings import Settings
from mediator.storage.clients import MAX_CONNECTIONS, Backend, RedisClient
from mediator.storage.target import parse as parse_redis_url


@dataclass
class Runtime:
    """A process's way to the cluster's state: its connection, the engine and the identity."""

    settings: Settings
    backend: Backend
    durability: Durability
    engine: Engine
    identity: KeyPair

    @property
    def redis(self) -> RedisClient:
        return self.backend.client

    async def aclose(self) -> None:
        await self.backend.aclose()


async def connect(redis_url: str, *, max_connections: int | None = None) -> Backend:
    """A started backend for `redis_url`; a malformed URL is refused (ConfigError) first."""
    parse_redis_url(redis_url)
    backend = Backend(redis_url, max_connections=max_connections or MAX_CONNECTIONS)
    await backend.start()
    return backend


@contextlib.asynccontextmanager
async def connected(redis_url: str) -> AsyncIterator[Backend]:
    backend = await connect(redis_url)
    try:
        yield backend
    finally:
        await backend.aclose()


def engine_defaults(settings: Settings) -> dict[str, QueueConfig]:
    """The queue settings new DIDComm mailboxes take from the operator (`--queue-*`)."""
    return {keys.DIDCOMM_NAMESPACE: mailbox_defaults(settings.queue)}


async def start(
    settings: Settings,
    redis_url: str,
    *,
    wake_channel: str = "",
    observe: Callable[[str], None] | None = None,
    observe_calls: Callable[[int], None] | None = None,
) -> Runtime:
    """Everything in the module's order. `wake_channel` is a node's pub/sub channel (its
    engine publishes wake-ups there for its own waiters); `observe` counts the outcome of
    each confirmed send and `observe_calls` how many hot-path calls were in flight as each
    went (a node's metrics)."""
    backend = await connect(redis_url)
    try:
        durability = Durability.from_settings(backend, settings.durability, observe)
        await durability.check()
        await layout.ensure(backend.client)
        identity = await load_identity(backend.client, settings.didcomm.key_seed)
        redact.use_seed(identity.sigkey[:32])  # log pseudonyms alike on every process
        engine = Engine(
            backend.client,
            wake_channel=wake_channel,
            confirmed=durability,
            defaults=engine_defaults(settings),
            observe_calls=observe_calls,
        )
    except BaseException:
        await backend.aclose()
        raise
    return Runtime(settings, backend, durability, engine, identity)


@contextlib.asynccontextmanager
async def running(settings: Settings, redis_url: str) -> AsyncIterator[Runtime]:
    runtime = await start(settings, redis_url)
    try:
        yield runtime
    finally:
        await runtime.aclose()
