"""The mediator's own Ed25519 key: one key for the whole cluster, whichever node answers."""

from __future__ import annotations

import secrets

from redis.asyncio import Redis

from mediator.didcomm.keys import KeyPair
from mediator.engine import keys
from mediator.errors import ConfigError


async def load_identity(redis: Redis, seed_setting: str) -> KeyPair:
    """The configured seed, else the seed the first node stored in Redis (made if none)."""
    if seed_setting:
        return from_seed_setting(seed_setting)
    await redis.hsetnx(keys.mediator_identity(), "seed", secrets.token_hex(32))
    stored = await redis.hget(keys.mediator_identity(), "seed")
    if stored is None:
        raise ConfigError("the mediator's key seed vanished from Redis")
    text = stored.decode() if isinstance(stored, bytes) else str(stored)
    return KeyPair.from_seed(bytes.fromhex(text))


def from_seed_setting(seed_setting: str) -> KeyPair:
    try:
        seed = bytes.fromhex(seed_setting)
    except ValueError as exc:
        raise ConfigError("key_seed must be 64 hexadecimal characters") from exc
    if len(seed) != 32:
        raise ConfigError("key_seed must be 32 bytes (64 hexadecimal characters)")
    return KeyPair.from_seed(seed)
