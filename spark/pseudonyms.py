"""Recipients' keyed hashes: a capacity history names a mailbox by HMAC-SHA256 of its queue
name under a per-deployment key, never by a recipient key or DID.

The key is derived from the mediator's identity seed (`d:identity`, shared by every node),
so each snapshot of one deployment names a mailbox the same way without any new secret to
manage, and nobody without the seed can test a guessed DID against the history. An
operator may pass a key of their own instead (`--hash-key-file`).
"""

from __future__ import annotations

import hashlib
import hmac

LABEL = b"mediator capacity pseudonyms v1"


def derive(seed: bytes) -> bytes:
    return hmac.new(seed, LABEL, hashlib.sha256).digest()


def key_id(key: bytes) -> str:
    """A short public fingerprint of the key: two snapshots with the same id name mailboxes
    alike."""
    return hashlib.sha256(b"id:" + key).hexdigest()[:12]


def pseudonym(key: bytes, qualified: str) -> str:
    return hmac.new(key, qualified.encode(), hashlib.sha256).hexdigest()[:32]


def sampled(name_hash: str, rate: float) -> bool:
    """Whether a mailbox is in the memory sample: the same mailboxes every snapshot, so the
    sample's trend is not noise from drawing others."""
    if rate >= 1:
        return True
    return rate > 0 and int(name_hash[:8], 16) < rate * 2**32
