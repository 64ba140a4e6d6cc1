"""Group commit: the hot paths' scripts (sends, receives, deletes), sent together while
Redis is busy.

A node answering many senders at once (32 keep-alive connections from one issuer, or many
phones) has several sends, receives and deletes ready at once. Each used to make its own
round trip to Redis. Now a call goes at once, alone, while no group is in flight to its
Redis connection target; beyond that, calls wait together, and when the group in flight
comes back, all that waited go in one pipeline (one connection, one write and one read for
the group, and one `WAIT`/`WAITAOF` after it when the settings ask for a confirmation: it
covers every write of the connection before it). The busier the node, the bigger the
groups; a lone call on an idle node waits for no company, and goes as it always went.

Each write is still its own script call: its own atomic unit, limits, duplicate check,
books and reply; a script's error fails only its own write, a lost connection the writes
it carried.

On a Redis Cluster the groups are per primary (the slot of each write's first key), on a
connection of their own to it: a write that meets MOVED or ASK goes again alone, through
the cluster's client.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from mediator.engine.durability import Durability, is_redirection
from mediator.engine.scripts import Scripts, sha, source
from mediator.storage.clients import STORAGE_ERRORS, RedisClient

MAX_GROUP = 128  # writes per pipeline: a full group goes at once
# Groups in flight per connection target before writes wait for the next: 1 measured best
# (32 connections, 1 KiB forwards: 0.50x the anchor against 0.40x at 2 and 0.38x at 4,
# whose groups stay small; bench/README.md).
DEPTH = 1


class _Write:
    __slots__ = ("args", "future", "keys", "name")

    def __init__(self, name: str, keys: list[str], args: list[Any]) -> None:
        self.name = name
        self.keys = keys
        self.args = args
        self.future: asyncio.Future[tuple[Any, Exception | None]] = (
            asyncio.get_running_loop().create_future()
        )

    def settle(self, reply: Any, shortfall: Exception | None = None) -> None:
        if not self.future.done():  # its caller may have given up (cancelled)
            self.future.set_result((reply, shortfall))

    def fail(self, error: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(error)


class _Slot:
    """The writes of one connection target: the groups in flight and the one filling."""

    __slots__ = ("filling", "in_flight")

    def __init__(self) -> None:
        self.in_flight = 0
        self.filling: list[_Write] = []


class GroupCommit:
    """Writes of one process, grouped per Redis connection they must go through.

    `durability` confirms writes asked to be confirmed when it is enabled, and finds the
    primary of a key on a cluster (None: nothing is confirmed, and a cluster's writes go
    alone); `observe` hears each group's size (a node's metrics); `depth`: groups in flight at
    once per target before writes wait to go in the next group."""

    def __init__(
        self,
        redis: RedisClient,
        durability: Durability | None = None,
        observe: Callable[[int], None] | None = None,
        *,
        depth: int = DEPTH,
    ) -> None:
        self.redis = redis
        self.scripts = Scripts(redis)
        self.durability = durability
        self.depth = depth
        self._observe = observe
        self._slots: dict[tuple[int, bool], _Slot] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # groups in flight (kept referenced)

    async def write(
        self, name: str, keys: list[str], args: list[Any], *, confirm: bool = False
    ) -> tuple[Any, Exception | None]:
        """Run script `name`, grouped with the writes waiting beside it: its reply, and why
        its confirmation fell short (None when it did not, or when none was asked for)."""
        durability = self.durability
        confirmed = confirm and durability is not None and durability.enabled
        if isinstance(self.redis, RedisCluster) or confirmed:
            if durability is None:
                return await self.scripts.call(name, keys, args), None
            client: Redis = durability.backend.pinned(keys[0])  # its slot's primary
        else:
            client = self.redis
        key = (id(client), confirmed)
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _Slot()
        write = _Write(name, keys, args)
        if slot.in_flight < self.depth:  # room: it goes now, alone, in its caller's task
            slot.in_flight += 1
            try:
                await self._run(client, [write], confirmed)
            except Exception as exc:
                write.fail(exc)
            finally:
                self._done(key, slot, client, confirmed)
        else:  # it goes with the others that arrive before a group in flight comes back
            slot.filling.append(write)
            if len(slot.filling) >= MAX_GROUP:
                self._start(key, slot, client, confirmed)
        return await write.future

    def _done(self, key: tuple[int, bool], slot: _Slot, client: Redis, confirmed: bool) -> None:
        """A group came back: the one filling goes (in a task of its own, one turn on, so
        that what its turn brings joins it)."""
        slot.in_flight -= 1
        if slot.filling:
            self._start(key, slot, client, confirmed)
        elif slot.in_flight == 0 and self._slots.get(key) is slot:
            del self._slots[key]  # pinned clients come and go with a cluster's primaries

    def _start(self, key: tuple[int, bool], slot: _Slot, client: Redis, confirmed: bool) -> None:
        writes, slot.filling = slot.filling, []
        slot.in_flight += 1
        task = asyncio.get_running_loop().create_task(
            self._flush(key, slot, client, writes, confirmed)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _flush(
        self,
        key: tuple[int, bool],
        slot: _Slot,
        client: Redis,
        writes: list[_Write],
        confirmed: bool,
    ) -> None:
        try:
            await self._run(client, writes, confirmed)
        except asyncio.CancelledError:  # the process is stopping
            for write in writes:
                write.future.cancel()
            raise
        except Exception as exc:  # the connection failed: every write of it does
            for write in writes:
                write.fail(exc)
        finally:
            self._done(key, slot, client, confirmed)

    async def _run(self, client: Redis, writes: list[_Write], confirmed: bool) -> None:
        if self._observe is not None:
            self._observe(len(writes))
        if len(writes) == 1:  # as a lone write always went: no pipeline to build
            w = writes[0]
            if confirmed:
                assert self.durability is not None
                w.settle(*await self.durability.script(w.name, w.keys, w.args))
            else:
                w.settle(await self.scripts.call(w.name, w.keys, w.args))
            return
        if confirmed:
            await self._confirmed(client, writes)
        else:
            await self._plain(client, writes)

    async def _plain(self, client: Redis, writes: list[_Write]) -> None:
        for attempt in (1, 2):
            pipe = client.pipeline(transaction=False)
            for w in writes:
                pipe.evalsha(sha(w.name), len(w.keys), *w.keys, *w.args)
            replies = await self._execute(pipe)
            missing, alone = [], []
            for w, reply in zip(writes, replies, strict=True):
                if isinstance(reply, NoScriptError) and attempt == 1:
                    missing.append(w)  # it did not run: again once the script is loaded
                elif is_redirection(reply):
                    alone.append(w)  # not run on this node: the cluster's client finds it
                elif isinstance(reply, Exception):
                    w.fail(reply)
                else:
                    w.settle(reply)
            for w in alone:
                try:
                    w.settle(await self.scripts.call(w.name, w.keys, w.args))
                except Exception as exc:
                    w.fail(exc)
            if not missing:
                return
            for name in {w.name for w in missing}:
                await client.script_load(source(name))
            writes = missing

    async def _execute(self, pipe: Any) -> list[Any]:
        """A group's pipeline: each command's reply or error. A lost connection fails the
        whole group; not run again (its writes may have stored their messages)."""
        try:
            return list(await pipe.execute(raise_on_error=False))
        except (RedisConnectionError, RedisTimeoutError, OSError):
            if self.durability is not None:
                with contextlib.suppress(*STORAGE_ERRORS):
                    await self.durability.backend.refresh_slots()  # perhaps its node is gone
            raise

    async def _confirmed(self, client: Redis, writes: list[_Write]) -> None:
        durability = self.durability
        assert durability is not None
        pipe = client.pipeline(transaction=False)
        for w in writes:
            pipe.evalsha(sha(w.name), len(w.keys), *w.keys, *w.args)
        pipe.execute_command(*durability.wait_command())
        *results, confirmation = await self._execute(pipe)
        alone = []
        for w, reply in zip(writes, results, strict=True):
            if isinstance(reply, NoScriptError) or is_redirection(reply):
                alone.append(w)  # it did not run here: alone, the way a lone write goes
            elif isinstance(reply, Exception):
                w.fail(reply)
            else:
                w.settle(reply, durability.shortfall(confirmation))
        for w in alone:
            try:
                w.settle(*await durability.script(w.name, w.keys, w.args))
            except Exception as exc:
                w.fail(exc)
