"""Switching from a real ACA-Py 1.7 mediator (as the OWF mediator service configures it: open
mediation, a multi-use invitation, HTTP and WebSocket on one endpoint; Askar on SQLite, and
once on PostgreSQL) to ours. Its wallets (an ACA-Py agent; Credo 0.5.19 and 0.6.3 with the
pickup strategy they worked out with ACA-Py) start again from their own storage, unchanged,
after our node took the old endpoint: their contacts, unchanged, go on sending to the old
routing key, each wallet receives every message once, makes a new connection through us and
receives over it; a new wallet given only the old invitation gets mediation; the old store
is byte for byte what it was."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.interop.acapy import AcaPyAgent
from tests.interop.credo import CredoAgent, CredoError
from tests.interop.old_acapy import (
    OldWorld,
    Peer,
    Wallet,
    WalletFactory,
    old_acapy_world,
    plain_peer,
)
from tests.interop.old_credo import credo_peer
from tests.interop.switch import Switched, switch

pytestmark = pytest.mark.interop


def credo_wallet(version: str) -> WalletFactory:
    async def make(invitation_url: str, home: Path) -> Wallet:
        wallet = CredoAgent(
            "wallet",
            version=version,
            mediator_invitation_url=invitation_url,
            pickup="auto",  # as it works it out with ACA-Py (no pickup protocol: implicit)
            storage_dir=home,
        )
        try:
            ready = await wallet.start()
            assert ready["mediation"] == "granted", ready
        except BaseException:
            await wallet.stop()
            raise
        return wallet

    return make


def credo_contact(version: str) -> Callable[[Path], Awaitable[Peer]]:
    """A Credo wallet's contact: a Credo agent of its version with an endpoint of its own
    (ACA-Py 1.7 cannot complete DID Exchange with Credo 0.5's invitations)."""

    async def make(home: Path) -> Peer:
        return await credo_peer(home, version)

    return make


# wallet kind -> (its factory, its contacts' factory); None: the harness's ACA-Py agents
WALLETS: dict[str, tuple[WalletFactory | None, Callable[[Path], Awaitable[Peer]] | None]] = {
    "acapy": (None, None),
    "credo-0.5.19": (credo_wallet("0.5.19"), credo_contact("0.5.19")),
    "credo-0.6.3": (credo_wallet("0.6.3"), credo_contact("0.6.3")),
}


async def _connections(wallet: Wallet) -> int:
    if isinstance(wallet, CredoAgent):
        return len(await wallet.connections())
    assert isinstance(wallet, AcaPyAgent)
    return len(await wallet.connections())


async def _carry_on(
    world: OldWorld,
    switched: Switched,
    tmp_path: Path,
    contact: Callable[[Path], Awaitable[Peer]] | None = None,
) -> None:
    """What every wallet must see after the switch."""
    assert switched.imported("grants") >= 1
    await world.restart_wallet()
    known = await _connections(world.wallet)
    expected = list(world.sent)
    for text in ("after the move", "last"):  # one at a time: a sender does not order them
        await world.peer.send(world.peer_connection, text)
        expected.append(text)
        assert await world.wallet.wait_for_messages(len(expected)) == expected  # once each
    assert await _connections(world.wallet) == known  # no new connection with the mediator

    new = await (contact or plain_peer)(tmp_path / "contact")  # a new contact, through us
    try:
        to_wallet = await new.receive_invitation(await world.wallet.create_invitation())
        await new.send(to_wallet, "from a new contact")
        expected.append("from a new contact")
        assert await world.wallet.wait_for_messages(len(expected)) == expected
    finally:
        await new.stop()
    assert await world.current_store_digest() == world.store_digest


@pytest.mark.timeout(900)
@pytest.mark.parametrize("kind", list(WALLETS))
async def test_an_acapy_mediators_wallets_carry_on_with_us(tmp_path: Path, kind: str) -> None:
    wallet, contact = WALLETS[kind]
    world = await old_acapy_world(tmp_path, wallet=wallet, peer=contact)
    newcomer: CredoAgent | None = None
    switched = None
    try:
        switched = await switch(
            "acapy",
            world.store_uri,
            world.wallet_key,
            world.public_port,
            world.endpoints,
            tmp_path / "ours",
        )
        await _carry_on(world, switched, tmp_path, contact)
        if isinstance(world.wallet, CredoAgent):
            with pytest.raises(CredoError, match="already"):  # it keeps the connection it has
                await world.wallet.accept_invitation(world.invitation_url)
            assert len(await world.wallet.mediations()) == 1
        newcomer = CredoAgent(
            "newcomer", version="0.6.3", mediator_invitation_url=world.invitation_url,
            pickup="auto",
        )  # fmt: skip
        assert (await newcomer.start())["mediation"] == "granted"
    finally:
        if newcomer is not None:
            await newcomer.stop()
        await world.close()
        if switched is not None:
            switched.node.stop()


@pytest.mark.timeout(900)
async def test_an_acapy_mediator_on_postgres_is_switched_too(tmp_path: Path) -> None:
    world = await old_acapy_world(tmp_path, postgres=True)
    switched = None
    try:
        switched = await switch(
            "acapy",
            world.store_uri,
            world.wallet_key,
            world.public_port,
            world.endpoints,
            tmp_path / "ours",
        )
        await _carry_on(world, switched, tmp_path)
    finally:
        await world.close()
        if switched is not None:
            switched.node.stop()
