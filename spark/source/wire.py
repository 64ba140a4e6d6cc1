"""Batched round trips over one redis-py connection: a list of commands is packed and sent
at once, and its replies read in order (a pipeline without redis-py's per-command reply
processing, which would cost more than Redis spends on the reads)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
from redis.exceptions import ResponseError

from spark.source.pacing import Pacer

Command = tuple[Any, ...]


class Wire:
    def __init__(self, client: redis.Redis, pacer: Pacer, *, readonly: bool = False) -> None:
        self.client = client
        self.pacer = pacer
        self.conn = client.connection_pool.get_connection()
        if readonly:  # a cluster replica serves reads only after READONLY
            self.run([("READONLY",)])

    def run(self, commands: Sequence[Command], *, weight: int | None = None) -> list[Any]:
        """Each command's reply, in order; an error reply is returned as its ResponseError.
        `weight`: the Redis commands they cost, when a script runs several."""
        self.send(commands, weight=weight)
        return self.receive(len(commands))

    def send(self, commands: Sequence[Command], *, weight: int | None = None) -> None:
        """Send without waiting for the replies (paced by what they cost)."""
        if not commands:
            return
        self.pacer.take(len(commands) if weight is None else weight)
        self.conn.send_packed_command(self.conn.pack_commands(commands))  # type: ignore[no-untyped-call]

    def receive(self, n: int) -> list[Any]:
        """The next `n` replies."""
        out: list[Any] = []
        for _ in range(n):
            try:
                out.append(self.conn.read_response())
            except ResponseError as e:
                out.append(e)
        return out

    def close(self) -> None:
        self.client.connection_pool.release(self.conn)
        self.client.close()


def checked(reply: Any) -> Any:
    """A reply that must not be an error (a missing key is not one)."""
    if isinstance(reply, ResponseError):
        raise reply
    return reply
