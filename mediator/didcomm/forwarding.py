"""Wrapping an envelope in `routing/1.0/forward` messages, one per routing key (RFC 0094,
in the order RFC 0067 gives: the key nearest the recipient first, each hop anoncrypted)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from mediator.didcomm import envelope
from mediator.didcomm.keys import normalize_key

FORWARD = "https://didcomm.org/routing/1.0/forward"


def forward_message(inner: bytes, to: str) -> dict[str, Any]:
    """A forward of the envelope `inner` to the key `to` (written as base58: a Credo
    mediator drops forwards whose `to` is a did:key)."""
    return {
        "@type": FORWARD,
        "@id": str(uuid.uuid4()),
        "to": normalize_key(to),
        "msg": json.loads(inner),
    }


def wrap(inner: bytes, to_key: str, hops: Sequence[str]) -> bytes:
    """`inner`, an envelope for `to_key`, wrapped once per hop; the last hop outermost."""
    current, target = inner, to_key
    for hop in hops:
        current = envelope.pack(json.dumps(forward_message(current, target)).encode(), [hop])
        target = hop
    return current
