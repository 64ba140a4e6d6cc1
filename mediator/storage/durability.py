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

import logging
from collections.abc import Callable
from typing import Any

from redis.exceptions import NoScriptError, RedisError, ResponseError

from mediator.engine.scripts import sha, source
from mediator.errors import ConfigError, ReplicationShortfall
from mediator.storage.clients import Backend

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

    def _command(self) -> list[Any]:
        if self.fsync:
            return ["WAITAOF", 1, self.replicas, self.timeout_ms]
        return ["WAIT", self.replicas, self.timeout_ms]

    async def check(self, probe_key: str) -> None:
        """At start-up: refuse a level the server cannot give, warn about a replica count it
        does not have now (every send would then wait out the timeout and fail)."""
        if not self.enabled:
            return
        client = self.backend.pinned(probe_key)
        if self.fsync:
            try:
                await client.execute_command("WAITAOF", 1, 0, 1)  # type: ignore[no-untyped-call]
            except ResponseError as exc:
                raise ConfigError(
                    f"--wait-fsync needs WAITAOF (Redis 7.2+ or Valkey) with appendonly on: "
                    f"the server answered {exc}"
                ) from exc
        if self.replicas:
            info = await client.info("replication")
            connected = int(info.get("connected_slaves", 0))
            if connected < self.replicas:
                log.warning(
                    "sends wait for %d replica(s) but the primary has %d connected: they will "
                    "be refused until enough replicas are back",
                    self.replicas,
                    connected,
                )

    async def script(
        self, name: str, keys: list[str], args: list[Any]
    ) -> tuple[Any, ReplicationShortfall | None]:
        """Run script `name`, then wait for the configured confirmation on its connection;
        returns the script's answer and, when confirmation fell short, why (a script that
        wrote nothing has nothing to confirm: its caller decides)."""
        for _ in range(3):
            client = self.backend.pinned(keys[0])
            pipe = client.pipeline(transaction=False)
            pipe.evalsha(sha(name), len(keys), *keys, *args)
            pipe.execute_command(*self._command())
            result, confirmed = await pipe.execute(raise_on_error=False)
            if isinstance(result, NoScriptError):
                await client.script_load(source(name))
                continue
            if isinstance(result, ResponseError) and str(result).startswith("MOVED"):
                await self.backend.refresh_slots()  # not run there: ask the new primary
                continue
            if isinstance(result, Exception):
                raise result
            return result, self._confirm(confirmed)
        raise RedisError(f"script {name} could not be run on the primary of its slot")

    def _confirm(self, confirmed: Any) -> ReplicationShortfall | None:
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
