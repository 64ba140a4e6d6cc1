"""Group commit: the hot paths' scripts (sends, receives, deletes) share one pipelined
connection per Redis server, and one confirmation covers the writes of a loop turn.

Each call used to take a pooled connection, write, wait for its own reply and give the
connection back: a round trip, a wake-up and the pool's bookkeeping per call. Now every call
is written at once to the process's one line to its server (no waiting for company: a lone
call on an idle node goes as soon as it is made) and one reader hands the replies back in
the order they come, which is the order the calls were written. When several calls are in
flight together (32 keep-alive senders, many phones), their replies arrive together and are
read together: the process wakes once for a burst of them, and Redis serves one client
instead of one per call.

With `MEDIATOR_WAIT_REPLICAS`/`MEDIATOR_WAIT_FSYNC`, a confirmed write is answered only once a
`WAIT`/`WAITAOF` written after it on the same line came back: the writes of one turn of the
event loop share one (it covers every earlier write of its connection), and each is counted
confirmed or short.

Each call is still its own script: its own atomic unit, limits, duplicate check, books and
reply; a script's error fails only its own call, a lost connection the calls in flight on it
(a call whose fate is unknown is not run again). A script the server lacks is loaded and the
call made again (it did not run); on a Redis Cluster the lines go to each slot's primary and a
call that meets MOVED or ASK goes again alone, through the cluster's client.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError

from mediator.engine.durability import Durability, is_redirection
from mediator.engine.scripts import Scripts, sha, source
from mediator.errors import ReplicationShortfall
from mediator.storage.clients import STORAGE_ERRORS, RedisClient

DRAIN_AT = 1 << 20  # bytes waiting in a line's socket buffer before a writer waits for it


class _Call:
    """A call in flight on a line; a `WAIT` carries the confirmed calls it covers."""

    __slots__ = ("confirmed", "covers", "future", "reply")

    def __init__(self, confirmed: bool = False, covers: list[_Call] | None = None) -> None:
        self.future: asyncio.Future[tuple[Any, Exception | None]] = (
            asyncio.get_running_loop().create_future()
        )
        self.confirmed = confirmed  # answered only when the WAIT after it comes back
        self.covers = covers  # a WAIT's calls (None: a script call)
        self.reply: Any = None

    def answer(self, reply: Any, shortfall: Exception | None = None) -> None:
        if not self.future.done():  # its caller may have given up (cancelled)
            self.future.set_result((reply, shortfall))

    def fail(self, error: BaseException) -> None:
        if self.future.done():
            return
        if isinstance(error, asyncio.CancelledError):
            self.future.cancel()
        else:
            self.future.set_exception(error)


class _Line:
    """The process's connection to one Redis server for the hot paths."""

    def __init__(
        self,
        client: Redis,
        durability: Durability | None,
        observe: Callable[[int], None] | None = None,
    ) -> None:
        self.client = client
        self.observe = observe
        self.durability = durability
        self.conn: AbstractConnection | None = None
        self.lock = asyncio.Lock()  # one connect at a time
        self.pending: deque[_Call] = deque()  # in the order written: replies come so
        self.unwaited: list[_Call] = []  # confirmed calls written since the last WAIT
        self.waiting = False  # a WAIT is in flight (or about to be written)
        self.buffer: list[bytes] = []  # written at the end of this turn
        self.reader: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        return len(self.pending)

    async def call(self, args: list[Any], confirm: bool) -> tuple[Any, Exception | None]:
        [call] = await self._start([args], confirm)
        return await call.future

    async def side_by_side(self, commands: list[list[Any]]) -> list[Any]:
        """Several calls written together, run in order: each reply, or the error of a
        call that failed alone (a script's). A lost connection raises."""
        calls = await self._start(commands, False)
        answers = await asyncio.gather(*(c.future for c in calls), return_exceptions=True)
        out: list[Any] = []
        for answer in answers:
            if isinstance(answer, ResponseError):
                out.append(answer)
            elif isinstance(answer, BaseException):
                raise answer
            else:
                out.append(answer[0])
        return out

    async def _start(self, commands: list[list[Any]], confirm: bool) -> list[_Call]:
        """The calls written (or buffered for the end of the turn), in order."""
        conn = self.conn
        if conn is not None and not self.pending and not _alive(conn):
            self._broken(conn, RedisConnectionError("closed while idle"))  # nothing in flight
            conn = None
        if conn is None:
            conn = await self._connect()
        loop = asyncio.get_running_loop()
        calls = []
        for args in commands:
            call = _Call(confirm)
            self._write(conn, call, args)
            calls.append(call)
            if self.observe is not None:
                self.observe(len(self.pending))
            if confirm:
                self.unwaited.append(call)
                if len(self.unwaited) == 1 and not self.waiting:
                    loop.call_soon(self._wait, conn)  # one WAIT after this turn's writes
        if self.reader is None or self.reader.done():
            self.reader = loop.create_task(self._read(conn))
        if _buffered(conn) > DRAIN_AT:
            await _writer(conn).drain()
        return calls

    async def _connect(self) -> AbstractConnection:
        async with self.lock:
            if self.conn is None:
                conn = await self.client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
                if not conn.is_connected:
                    await conn.connect()
                self.conn = conn
            return self.conn

    def _write(self, conn: AbstractConnection, call: _Call, args: list[Any]) -> None:
        """On the wire at once when nothing is in flight (an idle node waits for nothing);
        else at the end of this turn, with the others of the turn (one write for them)."""
        packed = conn.pack_command(*args)
        if self.pending:
            if not self.buffer:
                asyncio.get_running_loop().call_soon(self._flush, conn)
            self.buffer += packed
        else:
            self._send(conn, packed)
        self.pending.append(call)

    def _flush(self, conn: AbstractConnection) -> None:
        if conn is not self.conn or not self.buffer:
            return  # the line broke meanwhile (they failed with it), or nothing is left
        packed, self.buffer = self.buffer, []
        with contextlib.suppress(RedisConnectionError):  # then they failed with the line
            self._send(conn, packed)

    def _send(self, conn: AbstractConnection, packed: list[bytes]) -> None:
        try:
            _writer(conn).writelines(packed)
        except Exception as exc:  # the socket is gone: what is in flight on it fails
            error = RedisConnectionError(f"the connection to Redis is lost: {exc}")
            self._broken(conn, error)
            raise error from exc

    def _wait(self, conn: AbstractConnection) -> None:
        """One WAIT for the confirmed writes not covered yet: those of a turn, or all that
        came while the previous WAIT was out (one at a time: Redis runs a connection's
        commands in order, so a second would only wait behind the first)."""
        if conn is not self.conn or not self.unwaited:
            return  # the line broke meanwhile (they failed with it), or nothing is left
        covered, self.unwaited = self.unwaited, []
        assert self.durability is not None
        self.waiting = True
        with contextlib.suppress(RedisConnectionError):  # then they failed with the line
            self._write(conn, _Call(covers=covered), self.durability.wait_command())

    async def _read(self, conn: AbstractConnection) -> None:
        """Replies in order, each to its call, while calls are in flight on `conn`."""
        while self.pending and self.conn is conn:
            try:
                reply: Any = await conn.read_response()
            except ResponseError as exc:  # a script's error: its call's alone
                reply = exc
            except asyncio.CancelledError:
                self._broken(conn, asyncio.CancelledError())
                raise
            except Exception as exc:  # the connection is gone: every call on it fails
                self._broken(conn, exc)
                return
            if self.conn is not conn:
                return  # given up meanwhile: its calls failed with it
            self._deliver(self.pending.popleft(), reply)

    def _deliver(self, call: _Call, reply: Any) -> None:
        if call.covers is not None:  # a WAIT: the confirmed calls it covers are answered
            assert self.durability is not None
            self.waiting = False
            if self.unwaited and self.conn is not None:
                self._wait(self.conn)  # those that came meanwhile: the next WAIT
            for c in call.covers:
                if c.future.done():
                    continue  # failed on its own (not stored), or its caller gave up
                if isinstance(reply, Exception):
                    c.answer(c.reply, ReplicationShortfall(f"not confirmed ({reply})"))
                else:
                    c.answer(c.reply, self.durability.shortfall(reply))
        elif isinstance(reply, Exception):
            call.fail(reply)  # not stored: its WAIT has nothing to confirm
        elif call.confirmed:
            call.reply = reply  # answered when its WAIT comes back (written after it)
        else:
            call.answer(reply)

    def _broken(self, conn: AbstractConnection, error: BaseException) -> None:
        """Every call in flight on `conn` fails with `error`; the next call connects again.
        Nothing more when `conn` was given up already (its calls failed then)."""
        if self.conn is not conn:
            return
        self.conn = None
        reader, self.reader = self.reader, None
        if reader is not None and reader is not asyncio.current_task():
            reader.cancel()  # it reads `conn`, which goes back to the pool
        task = asyncio.get_running_loop().create_task(self._release(conn, reader))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        calls = [*self.pending, *self.unwaited]
        self.pending.clear()
        self.unwaited, self.buffer, self.waiting = [], [], False
        for call in calls:
            if call.covers is None:
                call.fail(error)
            else:  # a WAIT: nobody awaits it, its calls hear the error
                for c in call.covers:
                    c.fail(error)

    async def _release(self, conn: AbstractConnection, reader: asyncio.Task[None] | None) -> None:
        """Back to the pool once its reader is done with it (a reader still waiting on it
        would close it under its next user)."""
        if reader is not None:
            await asyncio.wait([reader])
        with contextlib.suppress(Exception):
            await conn.disconnect()
        with contextlib.suppress(Exception):
            await self.client.connection_pool.release(conn)


def _writer(conn: AbstractConnection) -> asyncio.StreamWriter:
    """The connection's socket (redis-py's; its API writes only by awaiting, and a call
    must be on the wire, in order, before its caller lets another run)."""
    writer: asyncio.StreamWriter | None = conn._writer
    if writer is None:
        raise RedisConnectionError("the connection to Redis is closed")
    return writer


def _alive(conn: AbstractConnection) -> bool:
    """Whether an idle connection still stands (the server may have closed it meanwhile:
    a restart, its idle timeout, an operator's CLIENT KILL)."""
    writer: asyncio.StreamWriter | None = conn._writer
    reader: asyncio.StreamReader | None = conn._reader
    if writer is None or writer.transport.is_closing():
        return False
    return reader is None or not reader.at_eof()


def _buffered(conn: AbstractConnection) -> int:
    writer: asyncio.StreamWriter | None = conn._writer
    return 0 if writer is None else int(writer.transport.get_write_buffer_size())


class GroupCommit:
    """The hot paths' script calls of one process, on one line per Redis server.

    `durability` confirms writes asked to be confirmed when it is enabled, and finds the
    primary of a key on a cluster (None: nothing is confirmed, and a cluster's calls go
    through its own client); `observe` hears, per call, how many were in flight on its
    line with it (a node's metrics)."""

    def __init__(
        self,
        redis: RedisClient,
        durability: Durability | None = None,
        observe: Callable[[int], None] | None = None,
    ) -> None:
        self.redis = redis
        # Known once: redis-py's client classes are Protocols, whose isinstance costs 5 µs.
        self.cluster = isinstance(redis, RedisCluster)
        self.scripts = Scripts(redis)
        self.durability = durability
        self._observe = observe
        self._lines: dict[tuple[int, bool], _Line] = {}

    def in_flight(self) -> int:
        """Calls written and not answered yet, on every line."""
        return sum(line.in_flight for line in self._lines.values())

    def _line(self, client: Redis, confirmed: bool) -> _Line:
        # Confirmed writes have a line of their own: a WAIT holds up what follows it on its
        # connection, which must not be a live delivery's receive.
        line = self._lines.get((id(client), confirmed))
        if line is None:
            line = self._lines[(id(client), confirmed)] = _Line(
                client, self.durability, self._observe
            )
        return line

    async def side_by_side(self, calls: list[tuple[str, list[str], list[Any]]]) -> list[Any]:
        """Several script calls written together on the server's line, run in order; each
        reply, or the error of a call that failed alone (NoScriptError: it did not run, its
        caller runs it again). On a cluster, whose keys may live on several servers, one
        after the other through its client."""
        commands = [["EVALSHA", sha(name), len(keys), *keys, *args] for name, keys, args in calls]
        if not self.cluster:
            return await self._line(cast(Redis, self.redis), False).side_by_side(commands)
        out: list[Any] = []
        for command in commands:
            try:
                out.append(await self.redis.execute_command(*command))
            except ResponseError as exc:
                out.append(exc)
        return out

    async def call(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """Run script `name` on its server's line, unconfirmed: its reply."""
        reply, _ = await self.write(name, keys, args)
        return reply

    async def write(
        self, name: str, keys: list[str], args: list[Any], *, confirm: bool = False
    ) -> tuple[Any, Exception | None]:
        """Run script `name` on its server's line: its reply, and why its confirmation fell
        short (None when it did not, or when none was asked for)."""
        durability = self.durability
        confirmed = confirm and durability is not None and durability.enabled
        if self.cluster:
            if durability is None:
                return await self.scripts.call(name, keys, args), None
            client: Redis = durability.backend.pinned(keys[0])  # its slot's primary
        else:
            client = cast(Redis, self.redis)
        line = self._line(client, confirmed)
        command = ["EVALSHA", sha(name), len(keys), *keys, *args]
        try:
            return await line.call(command, confirmed)
        except NoScriptError:  # a restarted or new server: it did not run
            await client.script_load(source(name))
            return await line.call(command, confirmed)
        except ResponseError as exc:
            if not is_redirection(exc):
                raise
        except STORAGE_ERRORS:
            if durability is not None:
                with contextlib.suppress(*STORAGE_ERRORS):
                    await durability.backend.refresh_slots()  # perhaps its node is gone
            raise
        # Not run on that node (a cluster's slot moved): alone, the way calls always went.
        if confirmed:
            assert durability is not None
            return await durability.script(name, keys, args)
        return await self.scripts.call(name, keys, args), None
