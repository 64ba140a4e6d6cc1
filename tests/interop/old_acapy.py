"""An old ACA-Py 1.7 mediator with real wallets connected through it: what `mediator import
acapy` takes over.

`AcapyMediator` runs ACA-Py as the OWF aries-mediator-service configures it (open mediation,
a multi-use invitation printed at every start, the undelivered queue, auto-accept, label
"Mediator", Askar on SQLite or on PostgreSQL) with its HTTP and WebSocket inbound transports
behind one public port, as Caddy puts them there (`FrontDoor`). `old_acapy_world` starts it,
connects a wallet (an ACA-Py mediation client with a persistent wallet) and a peer (an ACA-Py
agent with its own endpoint) through it, checks that a message gets through, and stops the
wallet and the mediator: their stores are then what an operator has when the import starts.

The wallet and the peer only need the methods of `Wallet` and `Peer`, which `CredoAgent`
(tests/interop/credo.py) has as well."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import secrets
import socket
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from aries_askar import Store

from mediator.embedded import free_port
from tests.interop.acapy import AcaPyAgent, AcaPyError
from tests.interop.postgres import Postgres

KEY_METHODS = ("kdf:argon2i:mod", "kdf:argon2i:int", "raw")
DEFAULT_KEY_METHOD = "kdf:argon2i:mod"  # ACA-Py's and Askar's default
MEDIATOR_WALLET = "mediator"  # the OWF set-up's MEDIATOR_WALLET_NAME default
FIRST_MESSAGE = "before the move"


# The proxy in front of ACA-Py's two inbound transports.


def wants_websocket(head: bytes) -> bool:
    """Whether an HTTP request head asks `Upgrade: websocket` (Caddy's rule in the OWF set-up)."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"upgrade" and b"websocket" in value.lower():
            return True
    return False


async def _copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Bytes from `source` to `sink` until `source` ends; then half-close `sink`. A broken
    connection closes `sink`, which ends the other direction too."""
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()
    except (ConnectionError, OSError):
        sink.close()


class FrontDoor:
    """One loopback port in front of ACA-Py's HTTP and WebSocket inbound transports: a
    connection whose first request asks `Upgrade: websocket` is spliced to the WS port, any
    other to the HTTP port. Later requests on a kept-alive connection go where the first went
    (Caddy routes each request; wallets open a connection of its own for a WebSocket)."""

    def __init__(self, port: int, http_port: int, ws_port: int) -> None:
        self.port = port
        self.http_port = http_port
        self.ws_port = ws_port
        self.server: asyncio.Server | None = None
        # Each connection's task, with its client side and (once open) its upstream side.
        self._connections: dict[asyncio.Task[Any], list[asyncio.StreamWriter]] = {}

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        sides = self._connections[task] = [writer]
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            port = self.ws_port if wants_websocket(head) else self.http_port
            upstream_reader, upstream = await asyncio.open_connection("127.0.0.1", port)
            sides.append(upstream)
            upstream.write(head)
            await asyncio.gather(_copy(reader, upstream), _copy(upstream_reader, writer))
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, OSError):
            pass
        finally:
            for side in sides:
                side.close()
            del self._connections[task]

    async def stop(self) -> None:
        """Stop listening and cut every open connection, the client sides with a reset (no
        TIME_WAIT on the port from them). The port is then free for a server that binds with
        SO_REUSEADDR, as asyncio, uvloop and uvicorn do; connections that ended earlier with
        ACA-Py closing first (a WebSocket's close) may leave TIME_WAIT entries on it for a
        minute, which make a plain bind fail."""
        if self.server is None:
            return
        self.server.close()
        for client, *upstream in list(self._connections.values()):
            with contextlib.suppress(OSError):
                client.get_extra_info("socket").setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
            for side in (client, *upstream):
                side.transport.abort()
        # Each connection's task sees its sides closed and ends.
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self.server.wait_closed()
        self.server = None


# The old mediator.


class AcapyMediator(AcaPyAgent):
    """ACA-Py 1.7 as the OWF aries-mediator-service runs it (acapy/start.sh and
    configs/mediator-auto-accept.yml, with 1.x's `--invite` for 0.x's `--connections-invite`),
    on loopback: HTTP and WS inbound transports on two private ports behind `FrontDoor` on
    the public port, advertising `http://127.0.0.1:<port>` and `ws://127.0.0.1:<port>`.

    Its wallet is named `wallet_name` (the Postgres database name, or
    `<home>/.acapy_agent/wallet/<wallet_name>/sqlite.db`), opened with `wallet_key` by
    `key_method` (one of KEY_METHODS; "raw" generates a raw key unless one is given). Every
    start prints a new multi-use invitation: `invitation_urls` has them all, in order;
    `invitation_url` is the first, the one wallets were built with."""

    def __init__(
        self,
        home: Path,
        *,
        wallet_name: str = MEDIATOR_WALLET,
        wallet_key: str | None = None,
        key_method: str = DEFAULT_KEY_METHOD,
        postgres: Postgres | None = None,
        public_port: int | None = None,
    ) -> None:
        if key_method not in KEY_METHODS:
            raise ValueError(f"key method {key_method!r}: one of {', '.join(KEY_METHODS)}")
        if wallet_key is None:
            wallet_key = raw_key() if key_method == "raw" else secrets.token_urlsafe(16)
        super().__init__("Mediator", home=home, wallet_name=wallet_name, wallet_key=wallet_key)
        self.key_method = key_method
        self.postgres = postgres
        self.public_port = public_port or free_port()
        self.ws_port = free_port()
        self.endpoints = (
            f"http://127.0.0.1:{self.public_port}",
            f"ws://127.0.0.1:{self.public_port}",
        )
        self.endpoint = self.endpoints[0]
        self.front_door = FrontDoor(self.public_port, self.port, self.ws_port)
        self.invitation_urls: list[str] = []

    @property
    def invitation_url(self) -> str:
        return self.invitation_urls[0]

    @property
    def store_uri(self) -> str:
        if self.postgres is not None:
            return self.postgres.uri(self.wallet_name)
        return super().store_uri

    def transport_args(self) -> list[str]:
        return [
            "--inbound-transport", "http", "127.0.0.1", str(self.port),
            "--inbound-transport", "ws", "127.0.0.1", str(self.ws_port),
            "--outbound-transport", "ws",
            "--outbound-transport", "http",
            "--emit-new-didcomm-prefix",
            "--endpoint", *self.endpoints,
        ]  # fmt: skip

    def wallet_args(self) -> list[str]:
        args = [*super().wallet_args(), "--wallet-key-derivation-method", self.key_method]
        if self.postgres is not None:
            pg = self.postgres
            config = {"url": f"{pg.host}:{pg.port}", "wallet_scheme": "DatabasePerWallet"}
            creds = {
                "account": pg.account,
                "password": pg.password,
                "admin_account": pg.admin_account,
                "admin_password": pg.admin_password,
            }
            args += [
                "--wallet-storage-type", "postgres_storage",
                "--wallet-storage-config", json.dumps(config),
                "--wallet-storage-creds", json.dumps(creds),
            ]  # fmt: skip
        return args

    def role_args(self) -> list[str]:
        return [
            "--open-mediation",
            "--enable-undelivered-queue",
            "--debug-connections",
            "--auto-accept-invites",
            "--auto-accept-requests",
            "--auto-ping-connection",
            "--invite",
            "--invite-label", "Mediator",
            "--invite-multi-use",
        ]  # fmt: skip

    def _printed_invitations(self) -> list[str]:
        """The invitation URLs in its log: ACA-Py logs "Invitation URL:" (INFO, logger
        acapy_agent.core.conductor) and the URL on the next line, then a QR code."""
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return []
        return [
            lines[i + 1].strip()
            for i, line in enumerate(lines[:-1])
            if line.endswith("Invitation URL:") and "://" in lines[i + 1]
        ]

    async def start(self, timeout: float = 120.0) -> None:  # noqa: ASYNC109
        before = len(self._printed_invitations())
        await self.front_door.start()
        try:
            await super().start(timeout)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while len(printed := self._printed_invitations()) <= before:
                if loop.time() > deadline:
                    raise AcaPyError(f"no invitation printed\n{self.log_tail()}")
                await asyncio.sleep(0.1)
        except BaseException:
            await self.stop()
            raise
        self.invitation_urls.append(printed[before])

    async def stop(self) -> None:
        """Close the public port first (its open connections reset, rather than closed by
        ACA-Py first and left in TIME_WAIT on the port), then stop ACA-Py."""
        await self.front_door.stop()
        await super().stop()

    async def store_digest(self) -> dict[str, str]:
        """SHA-256 of each file of its stopped SQLite store (`sqlite.db`, and its `-wal` and
        `-shm` if ACA-Py left them), or of the `pg_dump` of its Postgres database."""
        if self.postgres is not None:
            dump = await self.postgres.dump(self.wallet_name)
            return {f"pg_dump {self.wallet_name}": hashlib.sha256(dump).hexdigest()}
        return {
            path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(self.store_path.parent.iterdir())
        }


def raw_key() -> str:
    """A raw Askar store key (base58 of 32 random bytes)."""
    return str(Store.generate_raw_key())


# The world before the move.


class Wallet(Protocol):
    """A mediated wallet the scenario can drive: AcaPyAgent, or CredoAgent."""

    @property
    def messages(self) -> list[dict[str, Any]]: ...

    async def start(self) -> object: ...

    async def stop(self) -> None: ...

    async def create_invitation(self) -> str: ...

    async def wait_for_messages(self, count: int, timeout: float = ...) -> list[str]: ...  # noqa: ASYNC109


class Peer(Protocol):
    """Someone who connects to a wallet through its invitation and writes to it."""

    async def receive_invitation(self, url: str) -> str: ...

    async def send(self, connection_id: str, content: str) -> None: ...

    async def stop(self) -> None: ...


# Given the mediator's invitation URL and a folder of its own, a started wallet that was
# granted mediation.
WalletFactory = Callable[[str, Path], Awaitable[Wallet]]


async def acapy_wallet(invitation_url: str, home: Path) -> AcaPyAgent:
    """An ACA-Py mediation client with its wallet and port kept in `home` across restarts,
    started and granted mediation. Started again (`OldWorld.restart_wallet`) it carries on
    with the same DIDs, connections and mediator."""
    wallet = AcaPyAgent("wallet", mediator_invitation_url=invitation_url, home=home)
    try:
        await wallet.start()
        await wallet.wait_mediation_granted()
    except BaseException:
        await wallet.stop()
        raise
    return wallet


@dataclass
class OldWorld:
    """What `old_acapy_world` leaves: the old mediator and the wallet stopped, the peer
    running (connected to the wallet through the old mediator's routing key and endpoint).

    To carry on after the import: start our node on `public_port` (with loopback pushes
    allowed: the ACA-Py wallet's endpoint is on 127.0.0.1), `await restart_wallet()` (same
    wallet, same port), then `await peer.send(peer_connection, ...)` and
    `await wallet.wait_for_messages(len(sent) + 1)`."""

    store_uri: str
    wallet_key: str
    key_method: str
    public_port: int
    endpoints: tuple[str, ...]
    invitation_url: str
    store_digest: dict[str, str]  # as stopped; compare with `await current_store_digest()`
    mediator: AcapyMediator  # stopped; `start()` would run it again (a new invitation)
    wallet: Wallet  # stopped
    peer: Peer  # running
    peer_connection: str  # the peer's connection to the wallet
    wallet_connection: str | None  # the wallet's to the peer (ACA-Py wallets)
    grant: dict[str, Any] | None  # the wallet's mediation record (ACA-Py wallets)
    sent: list[str]  # what the peer sent so far, all received
    postgres: Postgres | None = None
    seconds: float = 0.0  # how long the scenario took
    _closed: bool = field(default=False, repr=False)

    async def current_store_digest(self) -> dict[str, str]:
        return await self.mediator.store_digest()

    async def restart_wallet(self, *, reconnect: bool = False) -> None:
        """Start the wallet again from its storage. An ACA-Py wallet is started without
        `--mediator-invitation` unless `reconnect`: ACA-Py 1.7 compares the stored invitation
        record with the given URL (a tuple with a string: never equal), so with the flag it
        takes the invitation as new at every start, clears its default mediator and connects
        to the invitation again (a new connection and mediation request; the old ones stay)."""
        if isinstance(self.wallet, AcaPyAgent):
            self.wallet.mediator_invitation_url = self.invitation_url if reconnect else None
        await self.wallet.start()

    async def close(self) -> None:
        """Stop everything still running (wallet, peer, mediator, Postgres)."""
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(
            self.wallet.stop(), self.peer.stop(), self.mediator.stop(), return_exceptions=True
        )
        if self.postgres is not None:
            await self.postgres.stop()

    async def __aenter__(self) -> OldWorld:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def old_acapy_world(
    tmp: Path,
    *,
    postgres: bool = False,
    key_method: str = DEFAULT_KEY_METHOD,
    wallet: WalletFactory | None = None,
    peer: Callable[[Path], Awaitable[Peer]] | None = None,
) -> OldWorld:
    """Start the old mediator (SQLite in `tmp/mediator`, or a Postgres cluster of its own),
    a wallet mediated by it (`tmp/wallet`) and a peer (`tmp/peer`); connect the peer to the
    wallet through an invitation the wallet makes (so the peer holds a DID doc naming the
    mediator's routing key and endpoint); check that a message from the peer reaches the
    wallet; then stop the wallet and the mediator and digest the stopped store."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    database = Postgres() if postgres else None
    mediator = AcapyMediator(tmp / "mediator", key_method=key_method, postgres=database)
    running: list[Wallet | Peer] = []
    try:
        if database is not None:
            await database.start()
        await mediator.start()
        made = await asyncio.gather(
            (wallet or acapy_wallet)(mediator.invitation_url, tmp / "wallet"),
            (peer or plain_peer)(tmp / "peer"),
            return_exceptions=True,
        )
        running += [agent for agent in made if not isinstance(agent, BaseException)]
        the_wallet, the_peer = made
        if isinstance(the_wallet, BaseException):
            raise the_wallet
        if isinstance(the_peer, BaseException):
            raise the_peer
        grant = (
            await the_wallet.wait_mediation_granted()
            if isinstance(the_wallet, AcaPyAgent)
            else None
        )
        invitation = await the_wallet.create_invitation()
        peer_connection = await the_peer.receive_invitation(invitation)
        wallet_connection = None
        if isinstance(the_wallet, AcaPyAgent):
            wallet_connection = (await the_wallet.wait_connection())["connection_id"]
        await the_peer.send(peer_connection, FIRST_MESSAGE)
        got = await the_wallet.wait_for_messages(1)
        if got != [FIRST_MESSAGE]:
            raise AcaPyError(f"the wallet received {got}, not [{FIRST_MESSAGE!r}]")
        await the_wallet.stop()
        await mediator.stop()
        digest = await mediator.store_digest()
    except BaseException:
        await asyncio.gather(*(agent.stop() for agent in running), return_exceptions=True)
        await mediator.stop()
        if database is not None:
            await database.stop()
        raise
    return OldWorld(
        store_uri=mediator.store_uri,
        wallet_key=mediator.wallet_key,
        key_method=key_method,
        public_port=mediator.public_port,
        endpoints=mediator.endpoints,
        invitation_url=mediator.invitation_url,
        store_digest=digest,
        mediator=mediator,
        wallet=the_wallet,
        peer=the_peer,
        peer_connection=peer_connection,
        wallet_connection=wallet_connection,
        grant=grant,
        sent=[FIRST_MESSAGE],
        postgres=database,
        seconds=loop.time() - started,
    )


async def plain_peer(home: Path) -> AcaPyAgent:
    """An ACA-Py agent with its own public HTTP endpoint and no mediator."""
    agent = AcaPyAgent("peer", home=home)
    try:
        await agent.start()
    except BaseException:
        await agent.stop()
        raise
    return agent
