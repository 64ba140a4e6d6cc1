"""An ACA-Py mediator's store (0.12 LTS to 1.7), read into the import's model.

What ACA-Py keeps and where is in docs/import-sources.md §1. In short: the routing key is
the `routing_did` record's verkey; a wallet is a `connection` (active, or response while
the handshake finishes) with a `mediation_requests` record of role server and its keylist as
`forward_route` records; our key on a connection is the verkey of the `did` record named by
the connection's `my_did`, an Askar key named by that verkey; the wallet's key comes from
its DID (did:peer:2 and long did:peer:4 carry their document; a short did:peer:4 has its
long form in `long_peer_did_4_doc`; did:peer:1 and unqualified DIDs have a `did_doc`).
Multi-use invitations are `connection` templates (state invitation, mode multi) with their
`connection_invitation`, and in 1.x `oob_record`s. ACA-Py keeps no queue in its store.

The categories with a record for each wallet are read in one pass each into indexes
before the connections (a lookup per connection costs more than its share of a scan), in
worker processes on a large store (passes.py); only the keys are looked up, by name.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable
from typing import Any

from mediator.didcomm import did_peer
from mediator.didcomm.keys import KeyPair
from mediator.errors import DidError, ImportRefused
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
from mediator.imports.source import SourceStore, describe

log = logging.getLogger(__name__)

KIND = "acapy"
USABLE = ("active", "response", "completed")  # RFC 0160 and RFC 0023 spellings
MEDIATION_STATES = {"granted": GRANTED, "request": REQUESTED, "denied": DENIED}
ENDPOINT_SAMPLE = 64  # connections whose own DID documents are read for endpoints


class AcapyReader:
    kind = KIND

    def __init__(self, store: SourceStore, passes: Passes | None = None) -> None:
        self.store = store
        self.passes = passes or Passes(store)
        self._mediation: dict[str, tuple[str, int]] = {}  # connection id -> state, when
        self._routes: dict[str, list[str]] = {}  # connection id -> recipient keys
        self._documents: dict[bytes, dids.Wallet] = {}  # their DID's digest -> its document
        self._ours: dict[bytes, str] = {}  # our DID's digest -> its verkey
        self._reading: list[asyncio.Future[Any]] = []  # the passes connections() needs
        self._sampled = 0

    async def mediator(self) -> Source:
        """The mediator itself: version, routing key, invitations, endpoints. ImportRefused
        when the store is not an ACA-Py mediator's."""
        version = await self._version()
        source = Source(KIND, version, self.store.profile)
        routing = await self.store.item("routing_did", "routing_did")
        if routing is not None:
            key = await self._routing_key(routing.value, source)
            if key is not None:
                source.routing_keys.append(key)
        self._mediation, self._routes = await asyncio.gather(
            self.passes.start(mediation_index, source.report),
            self.passes.start(routes_index, source.report),
        )
        if not source.routing_keys and not self._mediation:
            raise ImportRefused(
                f"{describe(self.store.uri)}: not a mediator's store (no routing key, no "
                "mediation record)"
            )
        # The passes the wallets need go on while the invitations are read, and while the
        # target is checked and the mediator written.
        self._reading = [
            self.passes.start(pass_, source.report)
            for pass_ in (ours_index, documents_index, long_forms_index)
        ]
        await self._invitations(source)
        for invitation in source.invitations:
            for endpoint in _invitation_endpoints(invitation.message):
                if endpoint not in source.endpoints:
                    source.endpoints.append(endpoint)
        return source

    async def _version(self) -> str:
        async for item in self.store.items("acapy_version"):
            return item.value.decode(errors="replace").strip('"')
        if await self.store.item("MediatorRoutingRecord", "MEDIATOR_ROUTING_RECORD"):
            raise ImportRefused(
                f"{describe(self.store.uri)}: this is a Credo mediator's store: use "
                "`mediator import credo`"
            )
        if await self.store.count("connection") == 0:
            raise ImportRefused(f"{describe(self.store.uri)}: not an ACA-Py store")
        return "unknown"

    async def _routing_key(self, value: bytes, source: Source) -> KeyPair | None:
        data = record_json(value)
        verkey = verkey_of(data.get("verkey")) if data else None
        if verkey is None:
            source.report.refuse("the routing key record is unreadable", "routing_did")
            return None
        keys = await self._key(verkey)
        if keys is None:
            source.report.refuse("the routing key's private key is not in the store", verkey)
        return keys

    async def _key(self, verkey: str) -> KeyPair | None:
        keys = await self.passes.keys.key_pair(verkey)
        return keys if keys is not None and keys.verkey_b58 == verkey else None

    async def _invitations(self, source: Source) -> None:
        seen: set[str] = set()
        async for item in self.store.items("connection", {"state": "invitation"}):
            data = record_json(item.value)
            if data is None or data.get("invitation_mode") != "multi":
                continue
            found = await self.store.find("connection_invitation", {"connection_id": item.name})
            message = record_json(found[0].value) if found else None
            if message is None:
                oob = await self.store.find("oob_record", {"connection_id": item.name})
                record = record_json(oob[0].value) if oob else None
                message = (record or {}).get("invitation")
            await self._invitation(source, item.name, data, message, seen)
        async for item in self.store.items("oob_record"):
            data = record_json(item.value)
            if data and data.get("multi_use") and data.get("state") == "await-response":
                await self._invitation(source, item.name, data, data.get("invitation"), seen)
        source.invitations.sort(key=lambda i: i.created, reverse=True)

    async def _invitation(
        self, source: Source, name: str, data: dict[str, Any], message: Any, seen: set[str]
    ) -> None:
        verkey = verkey_of(data.get("invitation_key") or data.get("our_recipient_key"))
        if verkey is None or not isinstance(message, dict):
            source.report.skip("a multi-use invitation that cannot be read", name)
            return
        if verkey in seen:
            return
        keys = await self._key(verkey)
        if keys is None:
            source.report.skip("an invitation whose key is not in the store", name)
            return
        seen.add(verkey)
        source.invitations.append(
            Invitation(
                keys=keys,
                id=str(message.get("@id", "")),
                label=str(message.get("label", "")),
                message=message,
                created=str(data.get("created_at", "")),
            )
        )

    async def connections(self, source: Source) -> AsyncIterator[Connection]:
        """Every wallet of the mediator: connections with mediation or a keylist."""
        self._ours, self._documents, long_forms = await asyncio.gather(*self._reading)
        self._documents.update(long_forms)
        async for connection in resolved(self._candidates(source)):
            yield connection
        for connection_id in self._mediation:
            source.report.skip("a mediation record of a connection not in the store", connection_id)
        for connection_id in self._routes:
            source.report.skip("keylist entries of a connection not in the store", connection_id)

    async def _candidates(self, source: Source) -> AsyncIterator[Awaitable[Connection | None]]:
        report = source.report
        async for item in self.store.items("connection"):
            data = record_json(item.value)
            if data is None:
                report.skip("a connection record that cannot be read", item.name)
                continue
            state = data.get("state")
            if state == "invitation":
                continue  # a template: its invitation was read with the mediator
            mediation = self._mediation.pop(item.name, None)
            routes = self._routes.pop(item.name, [])
            if mediation is None and not routes:
                report.skip("a connection without mediation (not a wallet)", item.name)
                continue
            if state not in USABLE:
                report.skip(f"a wallet's connection in state {state}", item.name)
                continue
            yield self._connection(item.name, data, mediation, routes, source)

    async def _connection(
        self,
        name: str,
        data: dict[str, Any],
        mediation: tuple[str, int] | None,
        routes: list[str],
        source: Source,
    ) -> Connection | None:
        report = source.report
        ours = await self._our_key(data.get("my_did"))
        if ours is None:
            report.skip("a wallet whose connection key is not in the store", name)
            return None
        try:
            theirs = await self._their_wallet(data.get("their_did"))
        except DidError as exc:
            log.debug("connection %s: %s", name, exc)
            report.skip("a wallet whose DID document is missing or unreadable", name)
            return None
        if self._sampled < ENDPOINT_SAMPLE:
            await self._sample_endpoints(data.get("my_did"), source)
        state, when = mediation or (GRANTED, iso_ms(data.get("updated_at")))
        return Connection(
            source_id=name,
            their_verkey=theirs.verkey,
            ours=ours,
            protocol=_protocol(data),
            created_ms=iso_ms(data.get("created_at")),
            mediation=state,
            mediation_ms=when,
            recipient_keys=tuple(routes),
            services=theirs.services,
            keylist_base58=True,  # ACA-Py answers keylist queries with its stored base58
            label=str(data.get("their_label") or ""),
        )

    async def _our_key(self, did: Any) -> KeyPair | None:
        verkey = self._ours.get(dids.digest(did)) if isinstance(did, str) else None
        return None if verkey is None else await self._key(verkey)

    async def _their_wallet(self, did: Any) -> dids.Wallet:
        if not isinstance(did, str) or not did:
            raise DidError("the connection names no DID of the wallet")
        if did_peer.numalgo(did) == 4 and did.count(":") == 2:  # short: its long form is kept
            found = self._documents.get(dids.digest(did))
            if found is None:
                raise DidError("a short did:peer:4 without a readable long form")
            return found
        if dids.carries_document(did):
            return dids.Wallet.of(dids.peer_doc(did))
        found = self._documents.get(dids.digest(did.removeprefix("did:sov:")))
        if found is None:
            raise DidError(f"no readable document stored for {did[:60]!r}")
        return found

    async def _sample_endpoints(self, did: Any, source: Source) -> None:
        """The endpoints in the old mediator's own DID documents (ACA-Py lists every
        --endpoint there, where its invitation names only the first)."""
        self._sampled += 1
        try:
            if not isinstance(did, str) or not dids.carries_document(did):
                return
            doc = dids.peer_doc(did)
        except DidError:
            return
        for endpoint in dids.endpoints_of(doc):
            if endpoint not in source.endpoints:
                source.endpoints.append(endpoint)

    async def messages(self, source: Source) -> AsyncIterator[QueuedMessage]:
        """ACA-Py keeps undelivered messages in memory only: nothing to read here."""
        return
        yield


# The index passes (passes.py): each reads one category in one pass (a lookup per connection
# costs more than its share of a scan), in a worker process of its own on a large store.


async def mediation_index(store: SourceStore, report: Report) -> dict[str, tuple[str, int]]:
    """Connection id -> the state of its mediation (ours as the server) and when."""
    found: dict[str, tuple[str, int]] = {}
    async for item in store.items("mediation_requests", {"role": "server"}):
        data = record_json(item.value)
        state = MEDIATION_STATES.get(str((data or {}).get("state")))
        connection = (data or {}).get("connection_id")
        if data is None or state is None or not isinstance(connection, str):
            report.skip("a mediation record that cannot be read", item.name)
            continue
        known = found.get(connection)
        if known is None or known[0] != GRANTED:  # a grant wins over older requests
            found[connection] = (state, iso_ms(data.get("updated_at")))
    return found


async def routes_index(store: SourceStore, report: Report) -> dict[str, list[str]]:
    """Connection id -> its registered recipient keys (`forward_route`)."""
    found: dict[str, list[str]] = {}
    async for item in store.items("forward_route"):  # before 0.7: no role
        data = record_json(item.value)
        if data is not None and data.get("role") == "client":
            continue  # a route of ACA-Py's own mediator (it was a client too)
        key = verkey_of((data or {}).get("recipient_key"))
        connection = (data or {}).get("connection_id")
        if data is None or key is None:
            report.skip("a keylist entry that cannot be read", item.name)
        elif not isinstance(connection, str) or not connection:
            report.skip("a route to a sub-wallet of the old agent (wallet_id)", item.name)
        elif key not in found.setdefault(connection, []):
            found[connection].append(key)
    return found


async def ours_index(store: SourceStore, report: Report) -> dict[bytes, str]:
    """Our DIDs' digests -> their verkeys (`did` records)."""
    found: dict[bytes, str] = {}
    async for item in store.items("did"):
        data = record_json(item.value)
        verkey = verkey_of((data or {}).get("verkey"))
        if verkey is not None:
            found[dids.digest(item.name)] = verkey
    return found


async def documents_index(store: SourceStore, report: Report) -> dict[bytes, dids.Wallet]:
    """Their DIDs' digests -> their documents kept in `did_doc` (unqualified DIDs,
    did:peer:1): looking one up by its tag costs a scan of the table each time."""
    found: dict[bytes, dids.Wallet] = {}
    async for item in store.items("did_doc", with_tags=True):
        did = item.tags.get("did")
        if not did:
            continue
        try:
            found[dids.digest(did)] = dids.Wallet.of(dids.peer_doc(did, item.value))
        except DidError as exc:
            log.debug("did_doc %s: %s", item.name, exc)
    return found


async def long_forms_index(store: SourceStore, report: Report) -> dict[bytes, dids.Wallet]:
    """Short did:peer:4s' digests -> the documents of their long forms
    (`long_peer_did_4_doc`, named by the short form)."""
    found: dict[bytes, dids.Wallet] = {}
    async for item in store.items("long_peer_did_4_doc"):
        long = item.value.decode(errors="replace").strip('"')
        try:
            found[dids.digest(item.name)] = dids.Wallet.of(dids.peer_doc(long))
        except DidError as exc:
            log.debug("long_peer_did_4_doc %s: %s", item.name, exc)
    return found


def _protocol(data: dict[str, Any]) -> str:
    protocol = data.get("connection_protocol")
    if isinstance(protocol, str) and protocol:
        return protocol
    return "connections/1.0"  # 1.3+ loads the plugin's records with no protocol


def _invitation_endpoints(message: dict[str, Any]) -> list[str]:
    found = []
    endpoint = message.get("serviceEndpoint")
    if isinstance(endpoint, str):
        found.append(endpoint)
    services = message.get("services")
    for service in services if isinstance(services, list) else []:
        if isinstance(service, dict) and isinstance(service.get("serviceEndpoint"), str):
            found.append(service["serviceEndpoint"])
    return [e for e in found if e.startswith(dids.PUSHABLE)]
