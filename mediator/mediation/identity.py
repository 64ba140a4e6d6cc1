"""Where the cluster keeps the mediator's identity when no --key-seed is given: the seed the
first node stored in Redis, so that every node and worker presents the same keys."""

from __future__ import annotations

import secrets

from mediator.didcomm.identity import from_seed_setting
from mediator.didcomm.keys import KeyPair
from mediator.engine import keys
from mediator.errors import ConfigError
from mediator.storage.clients import RedisClient


async def load_identity(redis: RedisClient, seed_setting: str) -> KeyPair:
    """The configured seed, else the seed the first node stored in Redis (made if none)."""
    if seed_setting:
        return from_seed_setting(seed_setting)
    await redis.hsetnx(keys.mediator_identity(), keys.IDENTITY_SEED, secrets.token_hex(32))
    stored = await redis.hget(keys.mediator_identity(), keys.IDENTITY_SEED)
    if stored is None:
        raise ConfigError("the mediator's key seed vanished from Redis")
    text = stored.decode() if isinstance(stored, bytes) else str(stored)
    return KeyPair.from_seed(bytes.fromhex(text))
