"""The mediator's own Ed25519 keys: the cluster's key (invitations, routing), whichever node
answers, and one key per connection derived from it, so that every node derives the same.
Where the cluster keeps a seed it made itself: mediator/mediation/identity.py."""

from __future__ import annotations

import functools
import hashlib
import hmac

from mediator.didcomm.keys import KEY_CACHE, KeyPair
from mediator.errors import ConfigError


def from_seed_setting(seed_setting: str) -> KeyPair:
    try:
        seed = bytes.fromhex(seed_setting)
    except ValueError as exc:
        raise ConfigError("key_seed must be 64 hexadecimal characters") from exc
    if len(seed) != 32:
        raise ConfigError("key_seed must be 32 bytes (64 hexadecimal characters)")
    return KeyPair.from_seed(seed)


@functools.lru_cache(maxsize=KEY_CACHE)
def connection_key(identity: KeyPair, their_verkey: str) -> KeyPair:
    """Our key on the connection with `their_verkey`: HMAC-SHA256 of their key under our
    seed. A wallet that connects twice then sees a different key each time (Credo drops
    messages from a key two of its connections share)."""
    seed = hmac.new(identity.sigkey[:32], b"connection:" + their_verkey.encode(), hashlib.sha256)
    return KeyPair.from_seed(seed.digest())
