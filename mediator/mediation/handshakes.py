"""Connections made by handshakes (connections 1.0, DID Exchange) and single-use invitations,
kept in Redis so any node can continue what another began.

A connection is still named by the peer's verkey (the key its messages are authcrypted
with); the handshake adds who the peer is (DID, label, protocol, thread) and where it can be
reached (the push services of its DID document). A key belongs to at most one connection:
a second request naming the same key is refused and changes nothing.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from base58 import b58encode

from mediator.didcomm.did_doc import Service
from mediator.didcomm.invitation import (
    invitation_url,
    invitation_urls,
    legacy_invitation,
    legacy_invitation_url,
    multi_use_id,
)
from mediator.didcomm.keys import KeyPair
from mediator.engine import keys
from mediator.engine.replies import connection_created
from mediator.engine.scripts import Scripts
from mediator.mediation import record as rec
from mediator.mediation.imported import Imported, ImportedInvitation
from mediator.mediation.keymaps import is_verkey, raw_key
from mediator.mediation.record import COMPLETED, RESPONDED
from mediator.settings import DidcommSettings
from mediator.storage.clients import RedisClient

__all__ = ["COMPLETED", "RESPONDED", "Handshake", "HandshakeBook"]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass(frozen=True)
class Handshake:
    verkey: str  # the peer's key: the connection's name
    did: str
    label: str
    protocol: str  # e.g. "didexchange/1.1", "connections/1.0"
    thid: str  # the handshake's thread (the request's id)
    invitation: str  # the invitation's id (pthid), or the invitation key's did:key
    services: tuple[Service, ...]  # where pushes go, most preferred first


def services_json(services: tuple[Service, ...], verkey: str) -> str:
    """The record's `s` value for a connection with `verkey`: what an entry would say by
    default is left out (recipient keys that are just `verkey`, no routing keys), so that one
    endpoint of usual length stays under a listpack's value limit (64 B: docs/engine.md,
    Memory); a longer value would make the record a hash table, 2.5 times its size."""
    entries: list[dict[str, Any]] = []
    for s in services:
        entry: dict[str, Any] = {"e": s.endpoint}
        if s.recipient_keys != (verkey,):
            entry["k"] = list(s.recipient_keys)
        if s.routing_keys:
            entry["r"] = list(s.routing_keys)
        entries.append(entry)
    return json.dumps(entries, separators=(",", ":"))


def services_from_json(text: str | bytes | None, verkey: str) -> tuple[Service, ...]:
    """The services of `services_json` (and of records written in full before it)."""
    if not text:
        return ()
    return tuple(
        Service(
            endpoint=e["e"],
            recipient_keys=tuple(e.get("k", (verkey,))),
            routing_keys=tuple(e.get("r", ())),
        )
        for e in json.loads(text)
    )


@dataclass(frozen=True)
class Invitation:
    keys: KeyPair
    id: str


class HandshakeBook:
    def __init__(self, redis: RedisClient) -> None:
        self.redis = redis
        self.scripts = Scripts(redis)

    async def record(self, handshake: Handshake, ours: str, now_ms: int, ttl: int) -> bool:
        """Store a connection in the `responded` state, with `ours`, our key on it, for `ttl`
        seconds unless mediation is granted (`keep`); False when its key is taken. The key
        map is written first: alone, it is harmless.

        The record keeps what later messages need (state, protocol, the handshake's thread
        until `complete`, push endpoints when there are any), not the peer's DID document or
        label: a granted recipient's record is a small hash (`docs/engine.md`, Memory)."""
        await self.redis.set(keys.our_key_pending(ours), handshake.verkey, ex=ttl)
        fields = {
            rec.HANDSHAKE: rec.CODES[RESPONDED],
            rec.PROTOCOL: handshake.protocol,
            rec.THREAD: handshake.thid,
        }
        if handshake.services:
            fields[rec.SERVICES] = services_json(handshake.services, handshake.verkey)
        flat = [item for pair in fields.items() for item in pair]
        return connection_created(
            await self.scripts.call(
                "connection_create",
                [keys.connection_keys(handshake.verkey).record],
                [now_ms, ttl, rec.HANDSHAKE, rec.HANDSHAKE_MS, rec.MEDIATION, *flat],
            )
        )

    async def keep(self, verkey: str, ours: str) -> None:
        """Keep a connection for good (it was granted mediation): its record loses its
        expiry, and our key on it moves into the key map's buckets."""
        raw = raw_key(ours)
        await self.redis.persist(keys.connection_keys(verkey).record)
        await self.redis.hset(keys.ours_bucket(raw), raw, raw_key(verkey))
        await self.redis.delete(keys.our_key_pending(ours))

    async def peers_of(self, ours: list[str]) -> dict[str, str]:
        """Which connections (peer verkeys) our keys `ours` belong to, where known. Envelope
        `kid`s arrive as written: one that is no base58 verkey is nobody's key."""
        ours = [k for k in ours if is_verkey(k)]
        if not ours:
            return {}
        pipe = self.redis.pipeline(transaction=False)  # the keys span cluster slots
        for verkey in ours:
            raw = raw_key(verkey)
            pipe.hget(keys.ours_bucket(raw), raw)
            pipe.get(keys.our_key_pending(verkey))
        answers = await pipe.execute()
        found = {}
        for i, verkey in enumerate(ours):
            kept, pending = answers[2 * i], answers[2 * i + 1]
            if kept is not None:  # the buckets hold the peer's raw key
                found[verkey] = b58encode(kept).decode()
            elif pending is not None:
                found[verkey] = _text(pending)
        return found

    async def complete(self, verkey: str) -> None:
        """The handshake is over: its thread is no longer needed."""
        # Not a transaction: on a cluster redis-py runs those in a thread per command.
        pipe = self.redis.pipeline(transaction=False)
        record = keys.connection_keys(verkey).record
        pipe.hset(record, rec.HANDSHAKE, rec.CODES[COMPLETED])
        pipe.hdel(record, rec.THREAD)
        await pipe.execute()

    async def thread_of(self, verkey: str) -> str | None:
        value = await self.redis.hget(keys.connection_keys(verkey).record, rec.THREAD)
        return None if value is None else _text(value)

    async def invitation(
        self,
        identity: KeyPair,
        settings: DidcommSettings,
        endpoint: str,
        imported: Imported | None = None,
    ) -> dict[str, Any]:
        """What `GET /invitation` answers: the invitation imported from the mediator we
        replaced (wallet apps ship it), else the multi-use invitation, or a new single-use
        one; `endpoint`: ours, public."""
        if imported is not None and imported.invitations:
            return imported_urls(imported.invitations[0], endpoint)
        if settings.invitation_multi_use:
            keys_, oob_id = identity, multi_use_id(identity)
        else:
            made = await self.new_invitation(settings.invitation_ttl_seconds)
            keys_, oob_id = made.keys, made.id
        return invitation_urls(
            keys_,
            endpoint,
            settings.label,
            oob_id,
            multi_use=settings.invitation_multi_use,
        )

    async def new_invitation(self, ttl_seconds: int) -> Invitation:
        """A fresh key pair that one request may use, for `ttl_seconds`."""
        seed = secrets.token_bytes(32)
        invitation = Invitation(KeyPair.from_seed(seed), secrets.token_hex(16))
        name = keys.invitation(invitation.keys.verkey_b58)
        await self.redis.hset(name, mapping={"seed": seed.hex(), "id": invitation.id})
        await self.redis.expire(name, ttl_seconds)
        return invitation

    async def invitations(self, verkeys: list[str]) -> dict[str, Invitation]:
        """The open single-use invitations among `verkeys` (an envelope's recipients)."""
        if not verkeys:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        for verkey in verkeys:
            pipe.hmget(keys.invitation(verkey), ["seed", "id"])
        found = {}
        for verkey, (seed, oob_id) in zip(verkeys, await pipe.execute(), strict=True):
            if seed is not None and oob_id is not None:
                keypair = KeyPair.from_seed(bytes.fromhex(_text(seed)))
                if keypair.verkey_b58 == verkey:
                    found[verkey] = Invitation(keypair, _text(oob_id))
        return found

    async def consume(self, verkey: str) -> bool:
        """Use up a single-use invitation: True for the one request that gets it."""
        return bool(await self.redis.delete(keys.invitation(verkey)))


def imported_urls(invitation: ImportedInvitation, endpoint: str) -> dict[str, Any]:
    """An imported invitation as `GET /invitation` answers it: the same message (same
    `@id`, key and label) the old mediator handed out, in its own form (Out-of-Band, or
    connections 1.0 `?c_i=`), and the other form of the same key and id."""
    legacy = legacy_invitation(invitation.keys, endpoint, invitation.label, invitation.id)
    if invitation.legacy:
        legacy = invitation.message
    url = legacy_invitation_url(endpoint, legacy)
    own = url if invitation.legacy else invitation_url(endpoint, invitation.message)
    return {
        "invitation_url": own,
        "legacy_invitation_url": url,
        "invitation": invitation.message,
        "multi_use": True,
        "imported": True,
    }
