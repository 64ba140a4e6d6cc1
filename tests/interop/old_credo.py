"""An old Credo mediator (0.5.19, 0.6.3 or 0.7.0) with real Credo wallets connected through
it, and messages it still holds for a wallet that is offline: what `mediator import credo`
takes over.

`CredoMediator` runs Credo's own mediator module set up as didcomm-mediator-credo sets it up
(interop/credo/mediator.js for 0.5, interop/credo-next/mediator.mjs for 0.6+): an Askar
SQLite store `<home>/wallet/<id>/sqlite.db` (profile `<id>`, key derivation
`kdf:argon2i:mod` unless told), HTTP and WebSocket on one port, mediation granted to all, one
reusable invitation kept across restarts, and forwards queued as `MessageRecord`s in the
store (docs/import-sources.md §2.2-2.4), or for 0.6.3 in didcomm-mediator-credo's Postgres
queue (`queue=Postgres(...)`: its published package and its table `queued_message`).
`old_credo_world` starts one, gets a wallet with a
persistent store mediated by it and a peer connected to that wallet, checks that a message
gets through, stops the wallet, lets the peer write to it while it is away (the mediator
queues those), and stops the mediator: its store is then what an operator has when the
import starts.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mediator.embedded import free_port
from tests.interop.credo import (
    VERSIONS,
    AskarStore,
    CredoAgent,
    CredoError,
    NodeDriver,
)
from tests.interop.installs import ROOT
from tests.interop.postgres import Postgres

MEDIATOR = ROOT / "interop" / "credo" / "mediator.js"
NEXT_MEDIATOR = ROOT / "interop" / "credo-next" / "mediator.mjs"
KEY_METHODS = ("kdf:argon2i:mod", "kdf:argon2i:int", "raw")
DEFAULT_KEY_METHOD = "kdf:argon2i:mod"  # Credo's and Askar's default
STORE_ID = "mediator"  # = profile name; didcomm-mediator-credo's default is "mediator-dev"
STRATEGIES = ("QueueOnly", "QueueAndLiveModeDelivery", "DirectDelivery")
FIRST_MESSAGE = "before the move"
QUEUE_DATABASE = "messagepickuprepository"  # the Postgres queue's default database
POSTGRES_PORT = 5432  # the Postgres queue package fixes it


def mediator_script(version: str) -> Path:
    return MEDIATOR if version.startswith("0.5.") else NEXT_MEDIATOR


def raw_key() -> str:
    """A raw Askar store key (base58 of 32 random bytes), as `Store.generate_raw_key` makes."""
    from aries_askar import Store

    return str(Store.generate_raw_key())


class CredoMediator(NodeDriver):
    """A Credo mediator whose store lives in `home` (absolute). `start()` again after `stop()`
    reopens the same store on the same port and reuses the same invitation."""

    def __init__(
        self,
        home: Path,
        *,
        version: str = "0.5.19",
        port: int | None = None,
        store_id: str = STORE_ID,
        key: str | None = None,
        key_method: str = DEFAULT_KEY_METHOD,
        forwarding_strategy: str = "QueueAndLiveModeDelivery",
        label: str = "Credo Mediator",
        lease_ms: int = 30_000,
        log_level: str = "info",
        queue: Postgres | None = None,
    ) -> None:
        if version not in VERSIONS:
            raise ValueError(f"Credo {version}: one of {', '.join(VERSIONS)}")
        if queue is not None and (version != "0.6.3" or queue.port != POSTGRES_PORT):
            raise ValueError("the Postgres queue: Credo 0.6.3, a server on port 5432")
        if key_method not in KEY_METHODS:
            raise ValueError(f"key method {key_method}: one of {', '.join(KEY_METHODS)}")
        if forwarding_strategy not in STRATEGIES:
            raise ValueError(f"forwarding strategy {forwarding_strategy}: {', '.join(STRATEGIES)}")
        self.home = Path(home).absolute()
        self.port = port or free_port()
        if key is None:
            key = raw_key() if key_method == "raw" else secrets.token_urlsafe(24)
        file = self.home / "wallet" / store_id / "sqlite.db"
        self.store = AskarStore(f"sqlite://{file}", file, key, key_method, store_id)
        self.endpoints = (f"http://127.0.0.1:{self.port}", f"ws://127.0.0.1:{self.port}")
        self.events: list[dict[str, Any]] = []
        options = {
            "port": self.port,
            "label": label,
            "storage": {
                "path": str(self.home),
                "id": store_id,
                "key": key,
                "keyDerivationMethod": key_method,
            },
            "endpoints": list(self.endpoints),
            "forwardingStrategy": forwarding_strategy,
            "leaseMs": lease_ms,
            "logLevel": log_level,
        }
        self.postgres = queue
        if queue is not None:
            options["queue"] = {
                "postgres": {
                    "host": queue.host,
                    "user": queue.account,
                    "password": queue.password,
                    "database": QUEUE_DATABASE,
                }
            }
        super().__init__(f"mediator-{version}", mediator_script(version), options, version)

    def on_event(self, item: dict[str, Any]) -> None:
        self.events.append(item)  # "queued" {id, connectionId}, "removed" {ids}

    @property
    def invitation_url(self) -> str:
        if self.ready is None or "invitationUrl" not in self.ready:
            raise CredoError(f"{self.name} has not started")
        return str(self.ready["invitationUrl"])

    @property
    def queue_url(self) -> str | None:
        """The Postgres queue's database, as `mediator import credo --queue-url` takes it."""
        return None if self.postgres is None else self.postgres.uri(QUEUE_DATABASE)

    async def queue_digest(self) -> str | None:
        """SHA-256 of a dump of the Postgres queue's database (None: the queue is the store)."""
        if self.postgres is None:
            return None
        return hashlib.sha256(await self.postgres.dump(QUEUE_DATABASE)).hexdigest()

    async def queue(self) -> list[dict[str, Any]]:
        """The queued messages (MessageRecords in the store, or rows of the Postgres queue),
        oldest first: id, connectionId, createdAt, message (the JWE)."""
        return list((await self.command("queue"))["messages"])

    async def connections(self) -> list[dict[str, Any]]:
        return list((await self.command("connections"))["connections"])

    async def mediations(self) -> list[dict[str, Any]]:
        """Its MediationRecords (role MEDIATOR): id, connectionId, state, recipientKeys."""
        return list((await self.command("mediations"))["mediations"])

    async def wait_queue(
        self,
        count: int,
        connection_id: str | None = None,
        timeout: float = 30.0,  # noqa: ASYNC109
    ) -> list[dict[str, Any]]:
        """The queue (of one connection, if given) once it holds exactly `count` messages."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            queued = [
                m
                for m in await self.queue()
                if connection_id is None or m["connectionId"] == connection_id
            ]
            if len(queued) == count:
                return queued
            if loop.time() > deadline:
                raise CredoError(
                    f"{self.name}: {len(queued)} queued, not {count}\n{self.log_tail()}"
                )
            await asyncio.sleep(0.2)

    def store_digest(self) -> dict[str, str]:
        """SHA-256 of each file of its store folder (sqlite.db, and -wal/-shm if left)."""
        return {
            path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(self.store.path.parent.iterdir())
            if path.is_file()
        }


# Reading a stopped store, as the importer will.


@dataclass(frozen=True)
class StoredItem:
    category: str
    name: str
    value: Any  # the JSON value
    tags: dict[str, str]


async def read_store(store: AskarStore) -> list[StoredItem]:
    """Every item of the store's default profile, read from a copy of its files (Askar has no
    read-only mode), opened with `key_method=None` (the method recorded in the store)."""
    from aries_askar import Store

    with tempfile.TemporaryDirectory(prefix="credo-store-") as folder:
        for file in store.files:
            shutil.copy2(file, Path(folder) / file.name)
        opened = await Store.open(f"sqlite://{folder}/{store.path.name}", None, store.key)
        try:
            async with opened.session() as session:
                entries = await session.fetch_all()
                items = [
                    StoredItem(e.category, e.name, e.value_json, dict(e.tags)) for e in entries
                ]
        finally:
            await opened.close()
    return items


async def store_categories(store: AskarStore) -> dict[str, int]:
    """How many items of each category the store holds."""
    counts: dict[str, int] = {}
    for item in await read_store(store):
        counts[item.category] = counts.get(item.category, 0) + 1
    return dict(sorted(counts.items()))


async def stored_queue(store: AskarStore) -> list[StoredItem]:
    """The store's MessageRecords, oldest first (by createdAt, as the importer orders them)."""
    records = [i for i in await read_store(store) if i.category == "MessageRecord"]
    return sorted(records, key=lambda i: (i.value["createdAt"], i.name))


# The world before the move.


@dataclass
class OldCredoWorld:
    """What `old_credo_world` leaves: the old mediator and the wallet stopped, messages for
    the wallet queued in the stopped store, the peer running (connected to the wallet
    through the old mediator's routing key and endpoint).

    To carry on after the import: start our node on `port` (both endpoints), then `await
    wallet.start()` (same store, same mediator invitation URL: Credo finds its mediator
    connection and mediation record and requests nothing new) and expect `queued` to arrive,
    in that order; `await peer.send(peer_connection, ...)` for more."""

    version: str  # the mediator's Credo version
    wallet_version: str
    store: AskarStore  # the mediator's store: uri, path, key, key_method, profile
    port: int
    endpoints: tuple[str, ...]  # http://127.0.0.1:<port>, ws://127.0.0.1:<port>
    invitation_url: str  # the mediator's (reusable) invitation, as the wallet used it
    invitation_id: str
    store_digest: dict[str, str]  # as stopped; compare with `current_store_digest()`
    queue_url: str | None  # the Postgres queue (None: the queue is in the store)
    queue_digest: str | None  # its dump's digest as stopped; `current_queue_digest()`
    mediator: CredoMediator  # stopped; `start()` again reopens the same store
    wallet: CredoAgent  # stopped; `start()` again reopens its store (`wallet.store`)
    peer: CredoAgent  # running
    peer_connection: str  # the peer's connection to the wallet
    wallet_connection: str  # the wallet's connection to the peer
    wallet_mediator_connection: str  # the wallet's connection to the mediator
    mediator_wallet_connection: str  # the mediator's connection to the wallet
    mediation: dict[str, Any]  # the wallet's mediation record (as `wallet.mediation()`)
    delivered: list[str]  # sent by the peer and received by the wallet before it stopped
    queued: list[str]  # sent by the peer while the wallet was offline, in order
    queued_ids: list[str]  # their MessageRecord ids (names), same order
    seconds: float = 0.0  # how long the scenario took
    _closed: bool = field(default=False, repr=False)

    @property
    def store_uri(self) -> str:
        return self.store.uri

    @property
    def key(self) -> str:
        return self.store.key

    @property
    def key_method(self) -> str:
        return self.store.key_method

    @property
    def profile(self) -> str:
        return self.store.profile

    def current_store_digest(self) -> dict[str, str]:
        return self.mediator.store_digest()

    async def current_queue_digest(self) -> str | None:
        return await self.mediator.queue_digest()

    async def close(self) -> None:
        """Stop everything still running (wallet, peer, mediator)."""
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(
            self.wallet.stop(), self.peer.stop(), self.mediator.stop(), return_exceptions=True
        )

    async def __aenter__(self) -> OldCredoWorld:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def wait_connected(
    agent: CredoAgent,
    exclude: set[str],
    timeout: float = 30.0,  # noqa: ASYNC109
) -> dict[str, Any]:
    """The agent's one completed connection not in `exclude`, once there is one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        done = [
            c
            for c in await agent.connections()
            if c["id"] not in exclude and c["state"] == "completed"
        ]
        if len(done) == 1:
            return done[0]
        if len(done) > 1 or loop.time() > deadline:
            raise CredoError(f"{agent.name}: completed connections {done}\n{agent.log_tail()}")
        await asyncio.sleep(0.2)


async def old_credo_world(
    tmp: Path,
    version: str = "0.5.19",
    *,
    wallet_version: str | None = None,
    peer_version: str | None = None,
    pickup: str = "PickUpV2LiveMode",
    queued: int = 3,
    key_method: str = DEFAULT_KEY_METHOD,
    forwarding_strategy: str | None = None,
    peer: Callable[[Path], Awaitable[CredoAgent]] | None = None,
    queue: Postgres | None = None,
) -> OldCredoWorld:
    """Start the old Credo mediator `version` (store in `tmp/mediator`), a Credo wallet
    (`wallet_version`, default the same; persistent store in `tmp/wallet`; pickup strategy
    `pickup`) mediated by it, and a peer (a Credo agent with its own HTTP endpoint, store in
    `tmp/peer`); connect the peer to the wallet through an invitation the wallet makes;
    check that a message from the peer reaches the wallet and that the mediator holds nothing
    more for it; stop the wallet; have the peer send `queued` messages, each queued in the
    store before the next is sent (so their createdAt order is the sending order); stop the
    mediator and digest its store.

    `forwarding_strategy` defaults to QueueAndLiveModeDelivery, and to DirectDelivery for
    `pickup="Implicit"`: an implicit wallet opens no live pickup session, so a Credo mediator
    only reaches it by sending on its open socket (DirectDelivery, which still queues for an
    offline Credo wallet, whose DID document names `didcomm:transport/queue`).

    `queue`: a started PostgreSQL (port 5432) for the mediator's Postgres queue (0.6.3)
    instead of its store; the caller stops it."""
    if forwarding_strategy is None:
        forwarding_strategy = (
            "DirectDelivery" if pickup == "Implicit" else "QueueAndLiveModeDelivery"
        )
    loop = asyncio.get_running_loop()
    started = loop.time()
    wallet_version = wallet_version or version
    mediator = CredoMediator(
        tmp / "mediator",
        version=version,
        key_method=key_method,
        forwarding_strategy=forwarding_strategy,
        queue=queue,
    )
    running: list[NodeDriver] = [mediator]
    try:
        await mediator.start()
        wallet = CredoAgent(
            "wallet",
            version=wallet_version,
            mediator_invitation_url=mediator.invitation_url,
            pickup=pickup,
            storage_dir=tmp / "wallet",
        )
        running.append(wallet)
        make_peer = peer or (lambda home: credo_peer(home, peer_version or wallet_version))
        ready, the_peer = await asyncio.gather(
            wallet.start(), make_peer(tmp / "peer"), return_exceptions=True
        )
        if isinstance(the_peer, CredoAgent):
            running.append(the_peer)
        for outcome in (ready, the_peer):
            if isinstance(outcome, BaseException):
                raise outcome
        assert isinstance(ready, dict) and isinstance(the_peer, CredoAgent)
        if ready.get("mediation") != "granted":
            raise CredoError(f"the wallet's mediation: {ready}\n{wallet.log_tail()}")
        mediation = await wallet.mediation()
        wallet_mediator_connection = str(mediation["connectionId"])
        mediations = await mediator.mediations()
        if len(mediations) != 1:
            raise CredoError(f"the mediator has {len(mediations)} mediation records")
        mediator_wallet_connection = str(mediations[0]["connectionId"])

        invitation = await wallet.create_invitation()
        peer_connection = await the_peer.receive_invitation(invitation)
        wallet_connection = str((await wait_connected(wallet, {wallet_mediator_connection}))["id"])
        await the_peer.send(peer_connection, FIRST_MESSAGE)
        got = await wallet.wait_for_messages(1)
        if got != [FIRST_MESSAGE]:
            raise CredoError(f"the wallet received {got}, not [{FIRST_MESSAGE!r}]")
        # Everything the mediator held for the wallet was acknowledged: nothing it already
        # has would be delivered twice after the move.
        await mediator.wait_queue(0, mediator_wallet_connection)
        await wallet.stop()

        texts = [f"while away {i}" for i in range(queued)]
        records: list[dict[str, Any]] = []
        for i, text in enumerate(texts):
            await the_peer.send(peer_connection, text)
            records = await mediator.wait_queue(i + 1, mediator_wallet_connection)
        await mediator.stop()
        digest = mediator.store_digest()
        queue_digest = await mediator.queue_digest()
    except BaseException:
        await asyncio.gather(*(agent.stop() for agent in running), return_exceptions=True)
        raise
    assert mediator.ready is not None
    return OldCredoWorld(
        version=version,
        wallet_version=wallet_version,
        store=mediator.store,
        port=mediator.port,
        endpoints=mediator.endpoints,
        invitation_url=mediator.invitation_url,
        invitation_id=str(mediator.ready["invitationId"]),
        store_digest=digest,
        queue_url=mediator.queue_url,
        queue_digest=queue_digest,
        mediator=mediator,
        wallet=wallet,
        peer=the_peer,
        peer_connection=peer_connection,
        wallet_connection=wallet_connection,
        wallet_mediator_connection=wallet_mediator_connection,
        mediator_wallet_connection=mediator_wallet_connection,
        mediation=mediation,
        delivered=[FIRST_MESSAGE],
        queued=texts,
        queued_ids=[str(r["id"]) for r in records],
        seconds=loop.time() - started,
    )


async def credo_peer(home: Path, version: str = "0.5.19") -> CredoAgent:
    """A Credo agent with its own public HTTP endpoint, no mediator, and a persistent store
    in `home` (so it can be restarted too; it keeps its port)."""
    agent = CredoAgent("peer", version=version, inbound_port=free_port(), storage_dir=home)
    try:
        await agent.start()
    except BaseException:
        await agent.stop()
        raise
    return agent
