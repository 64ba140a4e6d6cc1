"""What `mediator import` carried over from another mediator, as the nodes use it: its
routing and invitation keys, its invitations, the paths of its endpoints, and our key on
each of its connections.

Our own keys are derived from the key seed (mediator/didcomm/identity.py); an imported key
cannot be, so its private part (an Ed25519 seed) is stored in Redis, sealed with
AES-256-GCM-SIV under a key derived from the mediator's key seed (HKDF-SHA256). The name the
sealed seed is stored under (a public key) is the associated data, and its hash the nonce:
a seed moved to another name does not open, and sealing the same seed under the same name
again gives the same bytes (an import run twice writes nothing new). GCM-SIV is made for a
nonce that repeats: two different seeds sealed under one name reveal only that they differ.
Nothing sealed is ever logged, and the capacity snapshot reads no field of it.

    d:imported (keys.imported), a small hash:
        source        JSON: the store it came from (kind, routing keys): two mediators'
                      identities are never merged
        rk:<verkey>   a routing key's sealed seed (forwards to it are ours to open)
        iv:<verkey>   an invitation key's sealed seed (handshakes to it are answered)
        ij:<verkey>   that invitation: JSON {id, label, message, created}
        paths         JSON list of the old endpoints' paths, answered like `/`
        endpoints     JSON list of the old endpoints, as its DID documents name them

    a connection's record (mediator/mediation/record.py), field `ik`: our key on it, sealed
    under the peer's verkey
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mediator.didcomm.keys import KEY_CACHE, KeyPair, b58decode
from mediator.engine import keys
from mediator.errors import InvalidKey
from mediator.storage.clients import RedisClient

log = logging.getLogger(__name__)

SEALED_BYTES = 48  # a 32-byte seed and the 16-byte tag
SOURCE = "source"
ROUTING = "rk:"
INVITATION_KEY = "iv:"
INVITATION = "ij:"
PATHS = "paths"
ENDPOINTS = "endpoints"
_INFO = b"mediator imported keys v1"


class Sealer:
    """Seals and opens imported private keys under a key derived from the mediator's seed."""

    def __init__(self, identity: KeyPair) -> None:
        derived = HKDF(hashes.SHA256(), 32, salt=None, info=_INFO).derive(identity.sigkey[:32])
        self._aead = AESGCMSIV(derived)

    def seal(self, seed: bytes, name: bytes) -> bytes:
        """`seed` sealed under `name` (the raw public key it is stored by)."""
        return self._aead.encrypt(_nonce(name), seed, name)

    def open(self, sealed: bytes, name: bytes) -> KeyPair | None:
        """The key pair sealed under `name`; None when it does not open (another seed's
        seal, or a value that is not one)."""
        if len(sealed) != SEALED_BYTES:
            return None
        try:
            return KeyPair.from_seed(self._aead.decrypt(_nonce(name), sealed, name))
        except InvalidTag:
            return None

    @functools.lru_cache(maxsize=KEY_CACHE)  # noqa: B019 - one sealer per process
    def open_on(self, sealed: bytes, peer: str) -> KeyPair | None:
        """Our key on the imported connection with `peer`, from its record's `ik`."""
        try:
            return self.open(sealed, b58decode(peer))
        except InvalidKey:
            return None


def _nonce(name: bytes) -> bytes:
    return hashlib.sha256(b"nonce:" + name).digest()[:12]


@dataclass(frozen=True)
class ImportedInvitation:
    keys: KeyPair
    id: str
    label: str
    message: dict[str, Any]  # the invitation as the old mediator handed it out
    created: str  # ISO 8601, as the source wrote it

    @property
    def legacy(self) -> bool:
        """An RFC 0160 invitation (`?c_i=`), not an Out-of-Band one."""
        return "connections/1.0/invitation" in str(self.message.get("@type", ""))


@dataclass(frozen=True)
class Imported:
    """What a node loads at start: the imported mediator's keys, invitations and paths."""

    source: dict[str, Any] | None = None
    keys: dict[str, KeyPair] = field(default_factory=dict)  # routing and invitation keys
    routing_keys: tuple[KeyPair, ...] = ()
    invitations: tuple[ImportedInvitation, ...] = ()  # newest first
    paths: frozenset[str] = frozenset()
    endpoints: tuple[str, ...] = ()

    def invitation(self, verkey: str) -> ImportedInvitation | None:
        return next((i for i in self.invitations if i.keys.verkey_b58 == verkey), None)


async def load_imported(redis: RedisClient, sealer: Sealer) -> Imported:
    """The imported state in Redis (empty when nothing was imported). A sealed key that does
    not open under this seed is left out: the seed is not the one it was imported with."""
    fields = {_text(k): v for k, v in (await redis.hgetall(keys.imported())).items()}
    if not fields:
        return Imported()
    found: dict[str, KeyPair] = {}
    unopened = 0
    for name, value in fields.items():
        for prefix in (ROUTING, INVITATION_KEY):
            if name.startswith(prefix):
                verkey = name[len(prefix) :]
                keypair = sealer.open(_bytes(value), b58decode(verkey))
                if keypair is not None and keypair.verkey_b58 == verkey:
                    found[verkey] = keypair
                else:
                    unopened += 1
    if unopened:
        log.warning(
            "%d imported keys do not open under this key seed: it is not the one they were "
            "imported with, and what was imported is not served",
            unopened,
        )
    source = json.loads(fields[SOURCE]) if fields.get(SOURCE) else None
    order = source.get("routing_keys", []) if isinstance(source, dict) else []
    routing = tuple(found[v] for v in order if f"{ROUTING}{v}" in fields and v in found)
    invitations = []
    for name, value in fields.items():
        if _opened(name, INVITATION, found):
            data = json.loads(value)
            invitations.append(
                ImportedInvitation(
                    found[name[len(INVITATION) :]],
                    str(data["id"]),
                    str(data.get("label", "")),
                    data["message"],
                    str(data.get("created", "")),
                )
            )
    invitations.sort(key=lambda i: i.created, reverse=True)
    return Imported(
        source=source,
        keys=found,
        routing_keys=routing,
        invitations=tuple(invitations),
        paths=frozenset(_json_list(fields.get(PATHS))),
        endpoints=tuple(_json_list(fields.get(ENDPOINTS))),
    )


def _opened(name: str, prefix: str, found: dict[str, KeyPair]) -> bool:
    return name.startswith(prefix) and name[len(prefix) :] in found


def _json_list(value: Any) -> Iterable[str]:
    return [str(v) for v in json.loads(value)] if value else []


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("latin-1")
