"""Recipient keys and our per-connection keys are map fields keyed by their 32 raw bytes
(keys.routes_bucket, keys.ours_bucket): 12 bytes less than base58 for every entry."""

from __future__ import annotations

import functools

from mediator.didcomm.keys import KEY_CACHE, b58decode
from mediator.errors import InvalidKey


@functools.lru_cache(maxsize=KEY_CACHE)
def raw_key(verkey: str) -> bytes:
    """The 32 bytes of a base58 verkey."""
    return b58decode(verkey)


def is_verkey(value: str) -> bool:
    """Whether `value` is a base58 verkey (32 bytes), as a map field needs."""
    try:
        return len(raw_key(value)) == 32
    except InvalidKey:
        return False
