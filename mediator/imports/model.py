"""What an import carries over, whichever mediator it came from: the readers (acapy.py,
credo.py) turn a store into these, the writer (writer.py) puts them into Redis.

Keys are base58 Ed25519 verkeys throughout; a private key is its 32-byte seed.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mediator.didcomm.did_doc import Service
from mediator.didcomm.keys import KeyPair, normalize_key
from mediator.errors import InvalidKey

EXAMPLES = 20  # record names kept per reason of a skip or a refusal
GRANTED = "granted"
REQUESTED = "requested"
DENIED = "denied"


@dataclass(frozen=True)
class Invitation:
    """A multi-use invitation of the old mediator, as wallets hold it."""

    keys: KeyPair
    id: str
    label: str
    message: dict[str, Any]
    created: str  # ISO 8601, as the source wrote it


@dataclass(frozen=True)
class Connection:
    """A wallet's connection with the old mediator, and its mediation."""

    source_id: str  # the record's name in the source, for reports
    their_verkey: str  # the key the wallet authcrypts with: the connection's name here
    ours: KeyPair  # the old mediator's key on it
    protocol: str  # e.g. didexchange/1.1, connections/1.0
    created_ms: int
    mediation: str | None  # granted, requested, denied, or None (never asked)
    mediation_ms: int  # when it was granted or denied
    recipient_keys: tuple[str, ...] = ()
    services: tuple[Service, ...] = ()  # where messages can be pushed to it, if anywhere
    keylist_base58: bool = False  # its keylist answers named keys in base58
    label: str = ""


@dataclass(frozen=True)
class QueuedMessage:
    """A message the old mediator held for a wallet that had not picked it up."""

    source_id: str
    connection: str  # the wallet's verkey: its connection's name here
    payload: bytes  # the envelope, as JSON
    recipient_key: str  # the key it was forwarded to ("" when unknown)
    created: str


@dataclass
class Report:
    """What an import found, did, skipped and refused, counted, with the reasons."""

    imported: Counter[str] = field(default_factory=Counter)
    existing: Counter[str] = field(default_factory=Counter)  # there already (a run before)
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> how many
    refused: Counter[str] = field(default_factory=Counter)  # reason -> how many
    examples: dict[str, list[str]] = field(default_factory=dict)  # reason -> records' names

    def skip(self, reason: str, name: str = "") -> None:
        self.skipped[reason] += 1
        self._example(reason, name)

    def refuse(self, reason: str, name: str = "") -> None:
        self.refused[reason] += 1
        self._example(reason, name)

    def _example(self, reason: str, name: str) -> None:
        names = self.examples.setdefault(reason, [])
        if name and len(names) < EXAMPLES:
            names.append(name)

    def merge(self, other: Report) -> None:
        """Add what `other` counted (a pass read in another process) to this report."""
        for mine, theirs in (
            (self.imported, other.imported),
            (self.existing, other.existing),
            (self.skipped, other.skipped),
            (self.refused, other.refused),
        ):
            mine.update(theirs)
        for reason, names in other.examples.items():
            for name in names:
                self._example(reason, name)

    def names(self) -> set[str]:
        """The records named as examples of a skip or a refusal."""
        return {name for names in self.examples.values() for name in names}


@dataclass
class Source:
    """What names and reaches the old mediator, read from its store first; its connections
    and queued messages are read after, as streams (a store may hold a million)."""

    kind: str  # acapy or credo
    version: str  # as the store says (e.g. v1.7.0, 0.5)
    profile: str
    routing_keys: list[KeyPair] = field(default_factory=list)
    invitations: list[Invitation] = field(default_factory=list)  # newest first
    endpoints: list[str] = field(default_factory=list)
    report: Report = field(default_factory=Report)

    @property
    def fingerprint(self) -> dict[str, Any]:
        """What names the old mediator: its routing keys (every wallet's contacts hold
        them), and its invitations' keys. A target holding another one's is refused."""
        return {
            "kind": self.kind,
            "routing_keys": [k.verkey_b58 for k in self.routing_keys],
            "invitation_keys": sorted(i.keys.verkey_b58 for i in self.invitations),
        }

    def same_mediator(self, earlier: dict[str, Any]) -> bool:
        """Whether `earlier` (a fingerprint) names this mediator: the same routing keys, or
        when it has none, the same invitation keys."""
        mine = self.fingerprint
        if mine["routing_keys"] or earlier.get("routing_keys"):
            return bool(earlier.get("routing_keys") == mine["routing_keys"])
        return bool(earlier.get("invitation_keys") == mine["invitation_keys"])


def record_json(value: bytes) -> dict[str, Any] | None:
    """A record's value as a JSON object; None when it is not one (reported by the caller)."""
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def iso_ms(text: Any) -> int:
    """Milliseconds since the epoch of an ISO 8601 time as ACA-Py and Credo write them
    (`2026-11-28T07:31:02.123456Z`); 0 when absent or unreadable."""
    if not isinstance(text, str) or not text:
        return 0
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return 0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def verkey_of(value: Any) -> str | None:
    """The base58 verkey of a key written either way (base58, or did:key with or without a
    fragment); None when it is neither."""
    try:
        return normalize_key(value)
    except InvalidKey:
        return None


CONCURRENT = 256  # connections resolved at once (their lookups overlap in Askar's threads)


async def resolved(
    candidates: AsyncIterator[Awaitable[Connection | None]],
) -> AsyncIterator[Connection]:
    """The connections `candidates` resolve to, in their order, up to CONCURRENT in flight:
    each waits on Askar's threads for its keys, not on the one before it, and the scan of
    the next candidates goes on while they wait."""
    pending: deque[asyncio.Future[Connection | None]] = deque()
    try:
        async for candidate in candidates:
            pending.append(asyncio.ensure_future(candidate))
            if len(pending) >= CONCURRENT:
                connection = await pending.popleft()
                if connection is not None:
                    yield connection
        while pending:
            connection = await pending.popleft()
            if connection is not None:
                yield connection
    finally:
        for future in pending:
            future.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
