"""Loads the Lua scripts once and calls them by SHA (reloading on NOSCRIPT).

Every script is `_lib.lua` followed by the script's own file (after the file's flags, when it
starts with a `#!lua` line: snapshot_page.lua is read only); the header of each file lists
its KEYS, ARGV and return codes. `replies` decodes each script's reply and names its codes;
the script's caller turns them into domain results and errors.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from functools import cache
from importlib import resources
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError

from mediator.storage.clients import RedisClient

CLUSTER_CONCURRENCY = 32  # script calls in flight at once where they cannot be pipelined
NAMES = (
    "send",
    "forward",
    "receive",
    "delete_message",
    "dead_letter_accept",
    "dead_letter_settle",
    "forget_moved",
    "queue_create",
    "queue_update",
    "queue_delete",
    "queue_detach",
    "queue_stats",
    "upkeep",
    "leases",
    "shard_stats",
    "audit",
    "receive_filtered",
    "tag_stats",
    "release",
    "give_back",
    "queue_limits",
    "thread_order",
    "peek",
    "connection_create",
    "connection_import",
    "reclaim_inflight",
    "hold",
    "route",
    "adopt",
    "senders_take",
    "senders_done",
    "sender_count",
    "acknowledge",
    "notify",
    "rate",
    "push_lease",
    "snapshot_page",
)


@cache
def source(name: str) -> str:
    folder = resources.files("mediator.engine") / "lua"
    lib = (folder / "_lib.lua").read_text()
    own = (folder / f"{name}.lua").read_text()
    flags = ""
    if own.startswith("#!"):  # flags must open the script
        flags, own = own.split("\n", 1)
        flags += "\n"
    return flags + _constants() + lib + "\n" + _prelude(name) + own


def _constants() -> str:
    """Names from keys.py that `_lib.lua` itself uses (before any of its functions)."""
    from mediator.engine import keys as layout

    return f"local SENDERS_MEMBER = {json.dumps(layout.SENDERS_MEMBER)}\n"


def _prelude(name: str) -> str:
    """Constants a script takes from keys.py instead of from every call's arguments."""
    from mediator.engine import keys as layout

    if name != "forward":
        return ""
    templates = layout.queue_key_templates(layout.DIDCOMM_NAMESPACE)
    return (
        f"local NAMESPACE = {json.dumps(layout.DIDCOMM_NAMESPACE)}\n"
        f"local SHARDS = {layout.SHARDS}\n"
        f"local NOTE_MEMBER = {json.dumps(layout.NOTE_MEMBER)}\n"
        f"local TEMPLATES = {{{', '.join(json.dumps(t) for t in templates)}}}\n"
    )


@cache
def sha(name: str) -> str:
    return hashlib.sha1(source(name).encode()).hexdigest()


class Scripts:
    """The scripts of one Redis client, called by SHA and loaded when the server lacks them."""

    def __init__(self, redis: RedisClient) -> None:
        self._redis = redis

    async def call(self, name: str, keys: list[str], args: list[Any]) -> Any:
        try:
            return await self._redis.evalsha(sha(name), len(keys), *keys, *args)
        except NoScriptError:
            await self._redis.script_load(source(name))  # a restarted or new server
            return await self._redis.evalsha(sha(name), len(keys), *keys, *args)

    async def pipeline(self, calls: list[tuple[str, list[str], list[Any]]]) -> list[Any]:
        """Several script calls in one round trip; on a cluster (whose client pipelines no
        scripts) concurrently instead. Only for scripts that may run twice: when a server
        lacks one, the scripts are loaded and the whole pipeline runs again."""
        if isinstance(self._redis, RedisCluster):
            out: list[Any] = []
            for start in range(0, len(calls), CLUSTER_CONCURRENCY):
                chunk = calls[start : start + CLUSTER_CONCURRENCY]
                out += await asyncio.gather(*(self.call(n, k, a) for n, k, a in chunk))
            return out
        for attempt in (1, 2):
            pipe = self._redis.pipeline(transaction=False)
            for name, keys, args in calls:
                pipe.evalsha(sha(name), len(keys), *keys, *args)
            try:
                return list(await pipe.execute())
            except NoScriptError:
                if attempt == 2:
                    raise
                for name in {c[0] for c in calls}:
                    await self._redis.script_load(source(name))
        raise AssertionError("unreachable")
