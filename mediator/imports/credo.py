"""A Credo mediator's store (Credo 0.5, 0.6 and 0.7 record formats), read into the import's
model.

What Credo keeps and where is in docs/import-sources.md §2. In short: the routing keys are in
the `MediatorRoutingRecord` named MEDIATOR_ROUTING_RECORD (base58 strings in 0.5, objects with
a `kmsKeyId` in 0.6+); a wallet is a `ConnectionRecord` (completed, or response-sent) with a
`MediationRecord` of role MEDIATOR holding its keylist (stores converted from ACA-Py may hold
several per connection: merged); our key on it is the key of our `DidRecord` (role created),
named by its `kmsKeyId` in 0.6+ or else by its base58 verkey; the wallet's key comes from its
`DidRecord` (role received) or from its DID when that carries its document. The reusable
`OutOfBandRecord` is the invitation. Messages queued for offline wallets are `MessageRecord`s
(didcomm-mediator-credo's queue in the store), read in the order they arrived.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator, Awaitable
from typing import Any

from mediator.didcomm.did_doc import PeerDoc
from mediator.didcomm.keys import KeyPair, did_key_to_verkey
from mediator.errors import DidError, ImportRefused, InvalidKey
from mediator.imports import dids
from mediator.imports.model import (
    DENIED,
    GRANTED,
    REQUESTED,
    Connection,
    Invitation,
    QueuedMessage,
    Report,
    Source,
    iso_ms,
    record_json,
    resolved,
    verkey_of,
)
from mediator.imports.passes import Passes
from mediator.imports.pg_queue import PostgresQueue
from mediator.imports.source import SourceStore, describe

log = logging.getLogger(__name__)

KIND = "credo"
USABLE = ("completed", "response-sent")
MEDIATION_STATES = {"granted": GRANTED, "requested": REQUESTED, "denied": DENIED}
USE_DID_KEYS = "_internal/useDidKeysForProtocol"
COORDINATE_MEDIATION = "https://didcomm.org/coordinate-mediation/1.0"
PROTOCOL_PREFIX = "https://didcomm.org/"
ALTERNATIVE = "alternativeDids:"  # a tag per other name of a DID (the short did:peer:4)


class CredoReader:
    kind = KIND

    def __init__(
        self, store: SourceStore, queue: PostgresQueue | None = None, passes: Passes | None = None
    ) -> None:
        """`queue`: where the mediator kept its queue, when not in its store."""
        self.store = store
        self.queue = queue
        self.passes = passes or Passes(store)
        self._in_postgres: set[str] = set()  # connection ids with messages there
        self._mediation: dict[str, tuple[str, int, list[str]]] = {}  # connection id ->
        self._queued: dict[str, list[tuple[str, str]]] = {}  # connection id -> (time, name)
        self._peers: dict[str, str] = {}  # connection id -> wallet verkey, those with queues
        self._created: dict[bytes, tuple[str, str | None]] = {}  # our DID's digest -> key
        self._received: dict[bytes, dids.Wallet] = {}  # their DID's digest -> its document
        self._reading: asyncio.Future[DidIndex] | None = None  # the DidRecords' pass

    async def mediator(self) -> Source:
        version = await self._version()
        source = Source(KIND, version, self.store.profile)
        routing = await self.store.item("MediatorRoutingRecord", "MEDIATOR_ROUTING_RECORD")
        if routing is not None:
            await self._routing_keys(routing.value, source)
        self._mediation = await self.passes.start(mediation_index, source.report)
        if not source.routing_keys and not self._mediation:
            raise ImportRefused(
                f"{describe(self.store.uri)}: not a mediator's store (no routing key, no "
                "mediation record)"
            )
        self._reading = self.passes.start(dids_index, source.report)  # goes on meanwhile
        await self._invitations(source)
        await self._index_queue(source)
        return source

    async def _version(self) -> str:
        record = await self.store.item("StorageVersionRecord", "STORAGE_VERSION_RECORD_ID")
        data = record_json(record.value) if record is not None else None
        if data is not None:
            return str(data.get("storageVersion", "unknown"))
        if await self.store.count("routing_did") or await self.store.count("forward_route"):
            raise ImportRefused(
                f"{describe(self.store.uri)}: this is an ACA-Py mediator's store: use "
                "`mediator import acapy`"
            )
        if await self.store.count("ConnectionRecord") == 0:
            raise ImportRefused(f"{describe(self.store.uri)}: not a Credo store")
        return "unknown"

    async def _key(self, verkey: str, kms_id: Any = None) -> KeyPair | None:
        """The private key of `verkey`: by its KMS id (0.6+), else by its base58 name."""
        for name in (kms_id, verkey):
            if not isinstance(name, str) or not name:
                continue
            keys = await self.passes.keys.key_pair(name)
            if keys is not None and keys.verkey_b58 == verkey:
                return keys
        return None

    async def _routing_keys(self, value: bytes, source: Source) -> None:
        data = record_json(value)
        entries = (data or {}).get("routingKeys")
        if not isinstance(entries, list):
            source.report.refuse("the routing key record is unreadable", "MEDIATOR_ROUTING_RECORD")
            return
        for entry in entries:
            kms_id = None
            if isinstance(entry, dict):  # 0.6+: {routingKeyFingerprint, kmsKeyId}
                kms_id = entry.get("kmsKeyId")
                entry = _fingerprint_verkey(entry.get("routingKeyFingerprint"))
            verkey = verkey_of(entry)
            keys = None if verkey is None else await self._key(verkey, kms_id)
            if keys is None:
                source.report.refuse("a routing key whose private key is not in the store")
            elif keys not in source.routing_keys:
                source.routing_keys.append(keys)

    async def _invitations(self, source: Source) -> None:
        seen: set[str] = set()
        tags = {"role": "sender", "state": "await-response"}
        async for item in self.store.items("OutOfBandRecord", tags):
            data = record_json(item.value)
            message = (data or {}).get("outOfBandInvitation")
            if not data or not data.get("reusable") or not isinstance(message, dict):
                continue
            listed = message.get("services")
            services = (
                [s for s in listed if isinstance(s, dict)] if isinstance(listed, list) else []
            )
            try:
                verkey = did_key_to_verkey(services[0]["recipientKeys"][0])
            except (IndexError, KeyError, TypeError, InvalidKey):
                source.report.skip("an invitation that cannot be read", item.name)
                continue
            if verkey in seen:
                continue
            keys = await self._key(verkey, _kms_id(data.get("invitationInlineServiceKeys")))
            if keys is None:
                source.report.skip("an invitation whose key is not in the store", item.name)
                continue
            seen.add(verkey)
            source.invitations.append(
                Invitation(
                    keys=keys,
                    id=str(message.get("@id", "")),
                    label=str(message.get("label", "")),
                    message=message,
                    created=str(data.get("createdAt", "")),
                )
            )
            for service in services:
                endpoint = service.get("serviceEndpoint")
                if (
                    isinstance(endpoint, str)
                    and endpoint.startswith(dids.PUSHABLE)
                    and endpoint not in source.endpoints
                ):
                    source.endpoints.append(endpoint)
        source.invitations.sort(key=lambda i: i.created, reverse=True)

    async def _index_queue(self, source: Source) -> None:
        """Which connections have queued messages, in what order (read later, one by one)."""
        async for item in self.store.items("MessageRecord", with_tags=True):
            data = record_json(item.value)
            connection = (data or {}).get("connectionId") or item.tags.get("connectionId")
            if data is None or not isinstance(connection, str):
                source.report.refuse("a queued message that cannot be read", item.name)
                continue
            self._queued.setdefault(connection, []).append(
                (str(data.get("createdAt", "")), item.name)
            )
        for entries in self._queued.values():
            entries.sort(key=lambda entry: entry[0])  # by createdAt; ties keep the store's order
        if self.queue is not None:
            self._in_postgres = set(await self.queue.connections())
            for row_id in await self.queue.unrouted():
                source.report.refuse("a queued message that names no connection", row_id)

    async def connections(self, source: Source) -> AsyncIterator[Connection]:
        if self._reading is None:
            self._reading = self.passes.start(dids_index, source.report)
        self._created, self._received = await self._reading
        async for connection in resolved(self._candidates(source)):
            yield self._noted(connection)
        for connection_id in self._mediation:
            source.report.skip("a mediation record of a connection not in the store", connection_id)

    async def _candidates(self, source: Source) -> AsyncIterator[Awaitable[Connection | None]]:
        report = source.report
        async for item in self.store.items("ConnectionRecord"):
            data = record_json(item.value)
            if data is None:
                report.skip("a connection record that cannot be read", item.name)
                continue
            mediation = self._mediation.pop(item.name, None)
            if mediation is None:
                report.skip("a connection without mediation (not a wallet)", item.name)
                continue
            if data.get("state") not in USABLE:
                report.skip(f"a wallet's connection in state {data.get('state')}", item.name)
                continue
            yield self._connection(item.name, data, mediation, source)

    def _noted(self, connection: Connection) -> Connection:
        """Which wallet a connection with queued messages is (they are read after)."""
        name = connection.source_id
        if name in self._queued or name in self._in_postgres:
            self._peers[name] = connection.their_verkey
        return connection

    async def _connection(
        self,
        name: str,
        data: dict[str, Any],
        mediation: tuple[str, int, list[str]],
        source: Source,
    ) -> Connection | None:
        report = source.report
        ours = await self._our_key(data.get("did"))
        if ours is None:
            report.skip("a wallet whose connection key is not in the store", name)
            return None
        try:
            theirs = await self._their_wallet(data.get("theirDid"))
        except DidError as exc:
            log.debug("connection %s: %s", name, exc)
            report.skip("a wallet whose DID document is missing or unreadable", name)
            return None
        state, when, keys = mediation
        metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
        did_keys = (metadata or {}).get(USE_DID_KEYS) or {}
        return Connection(
            source_id=name,
            their_verkey=theirs.verkey,
            ours=ours,
            protocol=_protocol(data.get("protocol")),
            created_ms=iso_ms(data.get("createdAt")),
            mediation=state,
            mediation_ms=when,
            recipient_keys=tuple(keys),
            services=theirs.services,
            keylist_base58=not (isinstance(did_keys, dict) and did_keys.get(COORDINATE_MEDIATION)),
            label=str(data.get("theirLabel") or ""),
        )

    async def _their_wallet(self, did: Any) -> dids.Wallet:
        if not isinstance(did, str) or not did:
            raise DidError("the connection names no DID")
        found = self._received.get(dids.digest(did))
        if found is not None:
            return found
        if dids.carries_document(did):  # a did:peer:2 or long did:peer:4 with no record
            return dids.Wallet.of(dids.peer_doc(did))
        raise DidError(f"no readable document for {did[:60]!r}")

    async def _our_key(self, did: Any) -> KeyPair | None:
        found = self._created.get(dids.digest(did)) if isinstance(did, str) else None
        if found is None:
            return None
        verkey, kms_id = found
        return await self._key(verkey, kms_id)

    async def messages(self, source: Source) -> AsyncIterator[QueuedMessage]:
        """The queued messages of imported wallets, per wallet in the order they arrived."""
        for connection, entries in self._queued.items():
            verkey = self._peers.get(connection)
            if verkey is None:
                for _, name in entries:
                    source.report.refuse(
                        "a queued message for a wallet that was not imported", name
                    )
                continue
            for created, name in entries:
                item = await self.store.item("MessageRecord", name)
                data = record_json(item.value) if item is not None else None
                message = (data or {}).get("message")
                if not isinstance(message, dict):
                    source.report.refuse("a queued message that cannot be read", name)
                    continue
                payload = json.dumps(message, separators=(",", ":")).encode()
                yield QueuedMessage(name, verkey, payload, _recipient(message), created)
        if self.queue is not None:
            for connection in sorted(self._in_postgres):
                verkey = self._peers.get(connection)
                async for row_id, payload, recipient, created in self.queue.messages(connection):
                    if verkey is None:
                        source.report.refuse(
                            "a queued message for a wallet that was not imported", row_id
                        )
                    elif not payload:
                        source.report.refuse("a queued message that cannot be read", row_id)
                    else:
                        yield QueuedMessage(row_id, verkey, payload, recipient, created)


# The index passes (passes.py), in worker processes of their own on a large store.

DidIndex = tuple[dict[bytes, tuple[str, str | None]], dict[bytes, dids.Wallet]]


async def mediation_index(
    store: SourceStore, report: Report
) -> dict[str, tuple[str, int, list[str]]]:
    """Connection id -> the state of its mediation (ours as the mediator), when, and its
    keylist."""
    found: dict[str, tuple[str, int, list[str]]] = {}
    async for item in store.items("MediationRecord", {"role": "MEDIATOR"}):
        data = record_json(item.value)
        state = MEDIATION_STATES.get(str((data or {}).get("state")))
        connection = (data or {}).get("connectionId")
        if data is None or state is None or not isinstance(connection, str):
            report.skip("a mediation record that cannot be read", item.name)
            continue
        listed = data.get("recipientKeys")
        if listed is not None and not isinstance(listed, list):
            report.skip("a mediation record that cannot be read", item.name)
            continue
        keys = [k for k in map(verkey_of, listed or []) if k]
        when = iso_ms(data.get("updatedAt") or data.get("createdAt"))
        known = found.get(connection)
        if known is not None:  # one record per key, as converted stores have
            state = GRANTED if GRANTED in (state, known[0]) else state
            keys = known[2] + [k for k in keys if k not in known[2]]
            when = max(when, known[1])
        found[connection] = (state, when, keys)
    return found


async def dids_index(store: SourceStore, report: Report) -> DidIndex:
    """Every DidRecord, read in one pass (a lookup by tag scans the table each time):
    ours (role created) by DID, with the verkey and KMS key id of its first key; theirs
    (received) by DID, with what their document says. A did:peer:4 is also found by its
    short form (`alternativeDids`)."""
    created: dict[bytes, tuple[str, str | None]] = {}
    received: dict[bytes, dids.Wallet] = {}
    async for item in store.items("DidRecord", with_tags=True):
        data = record_json(item.value)
        did = (data or {}).get("did")
        if data is None or not isinstance(did, str):
            continue
        names = [did] + [t.split(":", 1)[1] for t in item.tags if t.startswith(ALTERNATIVE)]
        try:
            doc = _document(did, data.get("didDocument"))
        except DidError as exc:
            log.debug("DidRecord %s: %s", item.name, exc)
            continue
        if data.get("role") == "created":
            entry = (doc.recipient_key, _kms_id(data.get("keys")))
            for name in names:
                created[dids.digest(name)] = entry
        else:
            wallet = dids.Wallet.of(doc)
            for name in names:
                received[dids.digest(name)] = wallet
    return created, received


def _document(did: str, document: Any) -> PeerDoc:
    """A DidRecord's document: the one it keeps (did:peer:1), else the DID's own."""
    if document is None and dids.carries_document(did):
        return dids.peer_doc(did)
    return dids.peer_doc(did, document)


def _fingerprint_verkey(fingerprint: Any) -> str | None:
    if not isinstance(fingerprint, str):
        return None
    try:
        return did_key_to_verkey("did:key:" + fingerprint)
    except InvalidKey:
        return None


def _kms_id(entries: Any) -> str | None:
    """The KMS key id of a 0.6+ record's first key reference."""
    if isinstance(entries, list) and entries and isinstance(entries[0], dict):
        kms_id = entries[0].get("kmsKeyId")
        return kms_id if isinstance(kms_id, str) else None
    return None


def _protocol(value: Any) -> str:
    text = str(value or "").removeprefix(PROTOCOL_PREFIX)
    if not text:
        return "didexchange/1.1"
    return text.replace("didexchange/1.x", "didexchange/1.1").replace("/1.x", "/1.0")


def _recipient(message: dict[str, Any]) -> str:
    """The key a queued envelope was forwarded to: its first recipient's `kid`
    (RFC 0019's protected header), which Pickup 2.0's recipient_key filter matches."""
    try:
        protected = message["protected"]
        header = json.loads(base64.urlsafe_b64decode(protected + "=" * (-len(protected) % 4)))
        kid = header["recipients"][0]["header"]["kid"]
    except (KeyError, IndexError, TypeError, ValueError):
        return ""
    return verkey_of(kid) or ""
