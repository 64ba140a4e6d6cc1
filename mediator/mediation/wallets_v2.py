"""DIDComm v2 wallets in the tables v1 connections use: one record, one queue, one routing
table for both.

A v2 wallet has no handshake and no connection key: it is the DID that authcrypts its
messages. Its record and queue are named like a v1 connection's, by a 32-byte id in base58:
the route id of its DID's first key agreement key (mediator/didcomm/v2/recipients.py). An
X25519 key stands for two ids; the wallet is the one that has a record already (a v1
connection on the same key: the dual-stack wallet, one mailbox for both), else the first.

A recipient DID registers one route id per key agreement key, with the DID as the keylist
field's value (the keylist answers what was registered). An X25519 key whose other id is
routed already is that route (its owner's, or refused as taken), never a second route for
the same key.
"""

from __future__ import annotations

from base58 import b58encode

from mediator.didcomm.v2.dids import short_cache
from mediator.didcomm.v2.recipients import ROUTE_CACHE, key_route_ids, route_ids
from mediator.errors import DidError
from mediator.mediation.store import Connection, MediationStore


def _b58(raw: bytes) -> str:
    return b58encode(raw).decode()


@short_cache(ROUTE_CACHE)
def names_of(did: str) -> tuple[str, ...]:
    """The record names a wallet with this DID may have (DidError: none)."""
    return tuple(_b58(i) for i in key_route_ids(did)[0])


@short_cache(ROUTE_CACHE)
def route_keys(name: str) -> tuple[str, ...]:
    """The recipient keys (base58) a forward's `next` may be routed by, in the order a
    lookup tries them (DidError: none)."""
    return tuple(_b58(i) for i in route_ids(name))


async def wallet(store: MediationStore, did: str) -> Connection:
    """The record of the wallet that `did` is (read; it may have none yet)."""
    names = names_of(did)
    first = await store.connection(names[0])
    if first.handshake is not None or first.state is not None or len(names) == 1:
        return first
    for name in names[1:]:
        other = await store.connection(name)
        if other.handshake is not None or other.state is not None:
            return other
    return first


async def register(store: MediationStore, connection: str, name: str) -> str:
    """keylist-update `add` of `name` (a DID or DID URL) for `connection`: success,
    no_change, or client_error (unreadable, or a key another wallet holds)."""
    try:
        keys = key_route_ids(name)
    except DidError:
        return "client_error"
    results = []
    for ids in keys:
        candidates = [_b58(i) for i in ids]
        owners = await store.owners(candidates)
        held = next(((c, o) for c, o in zip(candidates, owners, strict=True) if o), None)
        if held is not None and held[1] != connection:
            return "client_error"
        key = held[0] if held is not None else candidates[0]
        results.append(await store.add_key(connection, key, name))
    if "client_error" in results:
        return "client_error"
    return "success" if "success" in results else "no_change"


async def unregister(store: MediationStore, connection: str, name: str) -> str:
    """keylist-update `remove`: success, no_change (not this wallet's), client_error."""
    try:
        keys = key_route_ids(name)
    except DidError:
        return "client_error"
    results = []
    for ids in keys:
        candidates = [_b58(i) for i in ids]
        owners = await store.owners(candidates)
        for candidate, owner in zip(candidates, owners, strict=True):
            if owner == connection:
                results.append(await store.remove_key(connection, candidate))
    return "success" if "success" in results else "no_change"


async def owned_key(store: MediationStore, connection: str, name: str) -> str | None:
    """The key (base58) of `name` that `connection` registered, the one its queued
    messages are tagged with; None when it holds none of them."""
    ids = [_b58(i) for group in key_route_ids(name) for i in group]
    for candidate, owner in zip(ids, await store.owners(ids), strict=True):
        if owner == connection:
            return candidate
    return None
