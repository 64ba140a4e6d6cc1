"""Which key layout a database holds (keys.LAYOUT_VERSION). A node or worker writes the
current one into an empty database, starts on a database that has it, and refuses a
database of layout 1 (written before the shards) until `mediator migrate` has run."""

from __future__ import annotations

from mediator.engine import keys, legacy_keys
from mediator.errors import ConfigError
from mediator.storage.clients import RedisClient

# The fields of the layout hash (keys.layout()).
VERSION_FIELD = "version"
SHARDS_FIELD = "shards"
BUCKETS_FIELD = "buckets"


def current() -> dict[str, str]:
    return {
        VERSION_FIELD: str(keys.LAYOUT_VERSION),
        SHARDS_FIELD: str(keys.SHARDS),
        BUCKETS_FIELD: str(keys.BUCKETS),
    }


async def holds_layout_1(redis: RedisClient) -> bool:
    for name in legacy_keys.MARKS:  # one at a time: on a cluster they live in several slots
        if await redis.exists(name):
            return True
    return False


async def ensure(redis: RedisClient) -> None:
    raw = await redis.hgetall(keys.layout())
    found = {_text(k): _text(v) for k, v in raw.items()}
    if found:
        if found != current():
            raise ConfigError(
                f"this database holds key layout {found}, and this version uses {current()}"
            )
        return
    if await holds_layout_1(redis):
        raise ConfigError(
            "this database holds data of key layout 1 (before version 0.2): stop every node "
            "and worker of the old version, run `mediator migrate --redis-url URL`, then start "
            "this version (docs/upgrading.md)"
        )
    # One transaction on one key: a process starting beside this one never reads it half
    # written (it sees all the fields or none).
    pipe = redis.pipeline(transaction=True)
    for name, value in current().items():
        pipe.hsetnx(keys.layout(), name, value)
    await pipe.execute()


async def write(redis: RedisClient) -> None:
    await redis.hset(keys.layout(), mapping=dict(current()))  # type: ignore[arg-type]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
