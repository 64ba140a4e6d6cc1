"""Connections, mediation grants, keylists and routes, kept in Redis so any node can answer.

A connection is named by the peer's verkey (its authcrypt sender key), recorded by a
handshake (`handshakes.py`). Its record is its mailbox queue's config hash (one hash per
recipient: handshake and mediation state, the keylist as `k:<key>` fields, the queue's own
fields). A recipient key routes to exactly one connection: the first to register it keeps
it (a field of a routes bucket), so nobody can take over another recipient's key.
Registering writes the route first and the keylist second, and removing goes the other way
round, so a crash in between leaves at worst a key that still routes to its owner and can be
removed again.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

from base58 import b58encode

from mediator.didcomm.did_doc import Service
from mediator.didcomm.keys import KeyPair
from mediator.engine import keys
from mediator.engine.replies import RouteAddCode, held, route_added
from mediator.engine.scripts import Scripts
from mediator.mediation import record as rec
from mediator.mediation.handshakes import services_from_json
from mediator.mediation.imported import Sealer
from mediator.mediation.keymaps import raw_key
from mediator.mediation.record import DENIED, GRANTED
from mediator.storage.clients import RedisClient

__all__ = ["DENIED", "GRANTED", "Connection", "MediationStore", "RouteCache"]


def _s(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass(frozen=True)
class Connection:
    verkey: str
    state: str | None  # granted, denied, or None before any mediate-request
    explicit_pickup: bool  # it has spoken a pickup or queue protocol: no implicit drains
    handshake: str | None = None  # responded or completed; None: no handshake made it
    push: tuple[Service, ...] = ()  # endpoints its messages are pushed to
    ours: KeyPair | None = None  # our key on it, when imported (else derived from the seed)
    keylist_base58: bool = False  # imported: its keylist answers name keys in base58

    @property
    def granted(self) -> bool:
        return self.state == GRANTED

    @property
    def has_queue(self) -> bool:
        """Messages for it may be queued: it was granted mediation or can be pushed to."""
        return self.granted or bool(self.push)


class RouteCache:
    """Recent recipient key -> connection answers, for at most `ttl` seconds each. Only
    found routes are kept, so a newly registered key is routable at once."""

    def __init__(self, ttl: float, size: int = 100_000) -> None:
        self.ttl = ttl
        self.size = size
        self._entries: OrderedDict[str, tuple[str, float]] = OrderedDict()

    def get(self, key: str) -> str | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[1] < time.monotonic():
            del self._entries[key]
            return None
        return entry[0]

    def put(self, key: str, owner: str) -> None:
        if self.ttl <= 0:
            return
        self._entries[key] = (owner, time.monotonic() + self.ttl)
        self._entries.move_to_end(key)
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def forget(self, key: bytes | str) -> None:
        self._entries.pop(_s(key), None)

    def clear(self) -> None:
        self._entries.clear()


class MediationStore:
    def __init__(
        self, redis: RedisClient, routes: RouteCache | None = None, sealer: Sealer | None = None
    ) -> None:
        """`sealer`: opens the keys of imported connections (none: they are not served)."""
        self.redis = redis
        self.scripts = Scripts(redis)
        self.routes = routes or RouteCache(0)
        self.sealer = sealer

    async def connection(self, verkey: str) -> Connection:
        fields = await self.redis.hmget(
            keys.connection_keys(verkey).record,
            [rec.MEDIATION, rec.EXPLICIT, rec.HANDSHAKE, rec.SERVICES, rec.IMPORTED_KEY,
             rec.KEY_FORMAT],
        )  # fmt: skip
        state, xp, hs, svc, sealed, key_format = fields
        return Connection(
            verkey=verkey,
            state=rec.state_of(rec.MEDIATION, state),
            explicit_pickup=bool(xp),
            handshake=rec.state_of(rec.HANDSHAKE, hs),
            push=services_from_json(svc, verkey),
            ours=self._open(verkey, sealed),
            keylist_base58=_s(key_format or b"") == rec.BASE58,
        )

    async def imported_key(self, verkey: str) -> KeyPair | None:
        """Our key on the imported connection with `verkey` (None: not an imported one)."""
        sealed = await self.redis.hget(keys.connection_keys(verkey).record, rec.IMPORTED_KEY)
        return self._open(verkey, sealed)

    def _open(self, verkey: str, sealed: bytes | str | None) -> KeyPair | None:
        if sealed is None or self.sealer is None:
            return None
        return self.sealer.open_on(sealed if isinstance(sealed, bytes) else sealed.encode(), verkey)

    async def has_handshake(self, verkey: str) -> bool:
        return bool(await self.redis.hexists(keys.connection_keys(verkey).record, rec.HANDSHAKE))

    async def set_state(self, verkey: str, state: str, now_ms: int) -> None:
        """Granted or denied; a grant's time is its queue's creation, a denial's is kept."""
        record = keys.connection_keys(verkey).record
        pipe = self.redis.pipeline(transaction=False)
        pipe.hset(record, rec.MEDIATION, rec.CODES[state])
        if state == DENIED:
            pipe.hset(record, rec.DENIED_MS, now_ms)
        else:
            pipe.hdel(record, rec.DENIED_MS)
        await pipe.execute()

    async def mark_explicit_pickup(self, verkey: str) -> None:
        await self.redis.hset(keys.connection_keys(verkey).record, rec.EXPLICIT, "1")

    async def add_key(self, connection: str, key: str, name: str = "") -> str:
        """Register `key` for `connection`: success, no_change, or client_error (taken).
        `name`: what a DIDComm v2 wallet registered it as (its DID), kept for its keylist."""
        raw = raw_key(key)
        routed = route_added(
            await self.scripts.call("route", [keys.routes_bucket(raw)], ["add", raw, connection])
        )
        if routed is RouteAddCode.TAKEN:
            return "client_error"
        added = await self.redis.hset(keys.connection_keys(connection).record, rec.KEY + raw, name)
        return "success" if routed is RouteAddCode.ADDED or added else "no_change"

    async def open_v2(self, connection: str) -> None:
        """The record of a DIDComm v2 wallet, named by its route id (mediator/mediation/
        wallets_v2.py), at its grant: no handshake made it, so it is written completed,
        and kept for good like any granted connection."""
        record = keys.connection_keys(connection).record
        pipe = self.redis.pipeline(transaction=False)
        pipe.hsetnx(record, rec.HANDSHAKE, rec.CODES[rec.COMPLETED])
        pipe.hsetnx(record, rec.PROTOCOL, rec.DIDCOMM_V2)
        pipe.persist(record)
        await pipe.execute()

    async def made_by_handshake(self, connection: str) -> bool:
        """Whether the record is a v1 connection's (DID Exchange, connections 1.0), not one
        a DIDComm v2 grant wrote."""
        protocol = await self.redis.hget(keys.connection_keys(connection).record, rec.PROTOCOL)
        return protocol is not None and _s(protocol) != rec.DIDCOMM_V2

    async def names(self, connection: str) -> list[tuple[str, str]]:
        """A connection's registered keys, base58, each with the name a v2 wallet gave it
        ("" for a v1 registration), in key order."""
        record = await self.redis.hgetall(keys.connection_keys(connection).record)
        found = []
        for field_, value in record.items():
            f = field_ if isinstance(field_, bytes) else field_.encode()
            if f.startswith(rec.KEY):
                found.append((b58encode(f[len(rec.KEY) :]).decode(), _s(value)))
        return sorted(found)

    async def remove_key(self, connection: str, key: str) -> str:
        """Unregister `key`: success, or no_change when this connection does not hold it."""
        raw = raw_key(key)
        removed = await self.redis.hdel(keys.connection_keys(connection).record, rec.KEY + raw)
        released = held(
            await self.scripts.call(
                "route", [keys.routes_bucket(raw)], ["release", raw, connection]
            )
        )
        self.routes.forget(key)
        if released:
            await self.redis.publish(keys.ROUTES_CHANNEL, key)  # every node forgets it too
        return "success" if removed or released else "no_change"

    async def keylist(self, connection: str, offset: int, limit: int) -> tuple[list[str], int]:
        """One page of a connection's keys in name order, and how many it has in all."""
        record = await self.redis.hgetall(keys.connection_keys(connection).record)
        fields = (f if isinstance(f, bytes) else f.encode() for f in record)
        registered = sorted(
            b58encode(f[len(rec.KEY) :]).decode() for f in fields if f.startswith(rec.KEY)
        )
        if limit <= 0:
            return [], len(registered)
        return registered[offset : offset + limit], len(registered)

    async def owner(self, key: str) -> str | None:
        cached = self.routes.get(key)
        if cached is not None:
            return cached
        raw = raw_key(key)
        value = await self.redis.hget(keys.routes_bucket(raw), raw)
        if value is None:
            return None
        self.routes.put(key, _s(value))
        return _s(value)

    async def owners(self, recipient_keys: list[str]) -> list[str | None]:
        if not recipient_keys:
            return []
        if len(recipient_keys) == 1:  # the usual forward: one key, no pipeline's overhead
            return [await self.owner(recipient_keys[0])]
        pipe = self.redis.pipeline(transaction=False)  # the buckets span cluster slots
        for key in recipient_keys:
            raw = raw_key(key)
            pipe.hget(keys.routes_bucket(raw), raw)
        values = await pipe.execute()
        owners = [None if v is None else _s(v) for v in values]
        for key, owner in zip(recipient_keys, owners, strict=True):
            if owner is not None:
                self.routes.put(key, owner)
        return owners
