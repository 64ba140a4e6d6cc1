"""What a sender's answer waits for: the stronger levels of "accepted".

By default a send is answered once the script that stored it returned: the message is in the
primary's memory, and in its append-only file as its `appendfsync` says. With
`wait_replicas` the answer also waits until that many replicas acknowledged the write
(`WAIT`); with `wait_fsync`, until the primary (and those replicas) fsynced it to their
append-only files (`WAITAOF`). Both commands cover the writes of the connection that runs
them, so the send script and the wait go out together in one pipeline, on one connection
to the primary of the queue's slot.

When fewer confirm within the timeout, the message is stored on the primary but not as
durably as asked: the sender gets a `ReplicationShortfall` (HTTP 503) that names the stored
message ids, and may retry, at the risk of storing the message twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import (
    AskError,
    MovedError,
    NoScriptError,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from mediator.engine.scripts import sha, source
from mediator.errors import ConfigError, ReplicationShortfall
from mediator.settings import DurabilitySettings
from mediator.storage.clients import STORAGE_ERRORS, Backend

log = logging.getLogger(__name__)


class Durability:
    def __init__(
        self,
        backend: Backend,
        *,
        replicas: int = 0,
        fsync: bool = False,
        timeout_seconds: float = 1.0,
        observe: Callable[[str], None] | None = None,
    ) -> None:
        self.backend = backend
        self.replicas = replicas
        self.fsync = fsync
        self.timeout_ms = max(1, int(timeout_seconds * 1000))
        self._observe = observe

    @classmethod
    def from_settings(
        cls,
        backend: Backend,
        settings: DurabilitySettings,
        observe: Callable[[str], None] | None = None,
    ) -> Durability:
        return cls(
            backend,
            replicas=settings.replicas,
            fsync=settings.fsync,
            timeout_seconds=settings.timeout_seconds,
            observe=observe,
        )

    @property
    def enabled(self) -> bool:
        return self.replicas > 0 or self.fsync

    @property
    def describe(self) -> str:
        parts = []
        if self.fsync:
            parts.append("fsynced by the primary")
        if self.replicas:
            what = "fsynced" if self.fsync else "acknowledged"
            parts.append(f"{what} by {self.replicas} replica(s)")
        return " and ".join(parts) or "written to the primary"

    def wait_command(self) -> list[Any]:
        """The command that waits for the confirmation asked for (covering every earlier
        write of its connection)."""
        if self.fsync:
            return ["WAITAOF", 1, self.replicas, self.timeout_ms]
        return ["WAIT", self.replicas, self.timeout_ms]

    async def check(self) -> None:
        """At start-up, on every primary: refuse a level a server cannot give, and warn about
        a replica count it does not have now (sends would wait out the timeout and fail).
        Storage that does not answer yet is only reported: readiness follows it."""
        if not self.enabled:
            return
        try:
            for client in self.backend.primaries():
                await self._check_primary(client)
        except STORAGE_ERRORS as exc:  # a ConfigError is not one: it stops the node
            log.warning("could not check what sends wait for: %s", exc)

    async def _check_primary(self, client: Redis) -> None:
        where = client.connection_pool.connection_kwargs.get("port", "?")
        if self.fsync:
            try:
                await client.execute_command("WAITAOF", 1, 0, 1)  # type: ignore[no-untyped-call]
            except ResponseError as exc:
                raise ConfigError(
                    f"--wait-fsync needs WAITAOF (Redis 7.2+ or Valkey) with appendonly on: "
                    f"the server on port {where} answered {exc}"
                ) from exc
        if self.replicas:
            info = await client.info("replication")
            connected = int(info.get("connected_slaves", 0))
            if connected < self.replicas:
                log.warning(
                    "sends wait for %d replica(s) but the primary on port %s has %d "
                    "connected: they will be refused until enough replicas are back",
                    self.replicas,
                    where,
                    connected,
                )

    async def script(
        self, name: str, keys: list[str], args: list[Any]
    ) -> tuple[Any, ReplicationShortfall | None]:
        """Run script `name`, then wait for the configured confirmation on its connection;
        returns the script's answer and, when confirmation fell short, why (a script that
        wrote nothing has nothing to confirm: its caller decides).

        On a cluster the script goes to the primary of its slot as this node last knew it:
        MOVED (it did not run there) refreshes the slots and tries again, ASK sends it to
        the node importing the slot, TRYAGAIN waits a moment."""
        client = self.backend.pinned(keys[0])
        asking = False
        for _ in range(5):
            pipe = client.pipeline(transaction=False)
            if asking:
                pipe.execute_command("ASKING")
            pipe.evalsha(sha(name), len(keys), *keys, *args)
            pipe.execute_command(*self.wait_command())
            try:
                replies = await pipe.execute(raise_on_error=False)
            except (RedisConnectionError, RedisTimeoutError, OSError):
                with contextlib.suppress(*STORAGE_ERRORS):
                    await self.backend.refresh_slots()  # perhaps its node is gone
                raise  # not run again: it may have stored the message
            result, confirmed = replies[-2:]
            if isinstance(result, NoScriptError):
                await client.script_load(source(name))
            elif isinstance(result, MovedError):  # before AskError: it is one
                await self.backend.refresh_slots()
                client, asking = self.backend.pinned(keys[0]), False
            elif isinstance(result, AskError):
                client, asking = self.backend.pinned_at(result.host, int(result.port)), True
            elif isinstance(result, TryAgainError):
                await asyncio.sleep(0.05)
            elif isinstance(result, Exception):
                raise result
            else:
                return result, self.shortfall(confirmed)
        raise RedisError(f"script {name} could not be run on the primary of its slot")

    def shortfall(self, confirmed: Any) -> ReplicationShortfall | None:
        """Why the wait's reply `confirmed` falls short of what was asked (None: it does
        not), counted."""
        if isinstance(confirmed, Exception):
            self._count("error")
            return ReplicationShortfall(f"the write is not confirmed ({confirmed})")
        if self.fsync:
            local, replicas = int(confirmed[0]), int(confirmed[1])
        else:
            local, replicas = 1, int(confirmed)
        problems = []
        if local < 1:
            problems.append("the primary did not fsync it")
        if replicas < self.replicas:
            problems.append(f"only {replicas} of {self.replicas} replica(s) confirmed it")
        if problems:
            self._count("shortfall")
            return ReplicationShortfall(
                f"stored on the primary, but within {self.timeout_ms} ms "
                f"{' and '.join(problems)}; it may still be delivered, and a retry may store "
                "it twice"
            )
        self._count("confirmed")
        return None

    def _count(self, outcome: str) -> None:
        if self._observe is not None:
            self._observe(outcome)


def is_redirection(reply: Any) -> bool:
    """A cluster's answer that the command did not run on this node (yet)."""
    return isinstance(reply, (MovedError, AskError, TryAgainError))
