"""Recipient keys appear in logs only as keyed hashes.

A wallet's keys (base58 Ed25519 verkeys, did:key and did:peer DIDs) identify its user to
anyone who reads the logs, and the logs travel further than Redis does (log shippers,
support tickets). Every log line is written through `redact`, which replaces each key or
DID in it by `key#` and 12 hex digits of HMAC-SHA256 under a key derived from the
mediator's identity seed: the same on every node of a deployment, so one wallet's lines can
be followed across nodes, and unguessable without the seed, so a known DID cannot be
searched for by anyone who has only the logs. `mediator pseudonym KEY` prints the hash an
operator needs to find one wallet's lines (docs/security.md).

Until the node has read its identity (the first lines of a start), a random key of the
process is used.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

LABEL = b"mediator log pseudonyms v1"
PREFIX = "key#"
_B58 = "1-9A-HJ-NP-Za-km-z"
# A verkey (32 bytes: 43 or 44 base58 characters), a did:key, or a did:peer (any numalgo,
# long forms included); a verkey standing alone, not inside a longer run (base64 data).
KEYS = re.compile(
    rf"did:key:z[{_B58}]{{40,100}}"
    rf"|did:peer:[0-4][A-Za-z0-9._:%=-]{{20,}}"
    rf"|(?<![A-Za-z0-9/+=_-])[{_B58}]{{43,44}}(?![A-Za-z0-9/+=_-])"
)

_key = secrets.token_bytes(32)


def derive(seed: bytes) -> bytes:
    return hmac.new(seed, LABEL, hashlib.sha256).digest()


def use_seed(seed: bytes) -> None:
    """Hash with the deployment's key from now on (called once the identity is known)."""
    global _key
    _key = derive(seed)


def pseudonym(key: str, under: bytes | None = None) -> str:
    """What logs say instead of `key` (a verkey or DID, as the log would have written it)."""
    digest = hmac.new(_key if under is None else under, key.encode(), hashlib.sha256)
    return PREFIX + digest.hexdigest()[:12]


def redact(text: str) -> str:
    if len(text) < 20:
        return text
    return KEYS.sub(lambda m: pseudonym(m.group(0)), text)
