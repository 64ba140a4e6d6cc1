"""Loads the Lua scripts once and calls them by SHA (reloading on NOSCRIPT).

Every script is `_lib.lua` followed by the script's own file; the header of each file lists
its KEYS, ARGV and return codes. `engine.py` is the one place that turns those return codes
into domain results and errors.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

NAMES = (
    "send",
    "receive",
    "delete_message",
    "dead_letter_accept",
    "dead_letter_settle",
    "queue_create",
    "queue_update",
    "queue_delete",
    "queue_detach",
    "queue_stats",
    "upkeep",
    "lease",
)


@cache
def source(name: str) -> str:
    folder = resources.files("mediator.engine") / "lua"
    lib = (folder / "_lib.lua").read_text()
    return lib + "\n" + (folder / f"{name}.lua").read_text()


class Scripts:
    """The registered scripts of one Redis client."""

    def __init__(self, redis: Redis) -> None:
        self._scripts: dict[str, AsyncScript] = {
            name: redis.register_script(source(name)) for name in NAMES
        }

    async def call(self, name: str, keys: list[str], args: list[Any]) -> Any:
        return await self._scripts[name](keys=keys, args=args)
