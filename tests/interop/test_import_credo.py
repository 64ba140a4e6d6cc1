"""Switching from a real Credo mediator (0.5.19, 0.6.3: its mediator module, its queue in its
Askar store, as didcomm-mediator-credo keeps it) to ours: a Credo wallet that was offline
while messages waited for it at the old mediator starts again from its own storage, unchanged,
and picks them all up from us, in order, once each; its contact, unchanged, goes on sending;
it makes a new connection through us; a new wallet given only the old invitation gets
mediation; the old store is byte for byte what it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop.credo import CredoAgent, CredoError
from tests.interop.old_credo import credo_peer, old_credo_world
from tests.interop.switch import switch

pytestmark = pytest.mark.interop


@pytest.mark.timeout(600)
@pytest.mark.parametrize("version", ["0.5.19", "0.6.3"])
async def test_a_credo_mediators_wallets_carry_on_with_us(tmp_path: Path, version: str) -> None:
    world = await old_credo_world(tmp_path, version)
    newcomers: list[CredoAgent] = []
    switched = None
    try:
        switched = await switch(
            "credo", world.store_uri, world.key, world.port, world.endpoints, tmp_path / "ours"
        )
        assert switched.imported("queued messages") == len(world.queued)
        assert switched.imported("grants") == 1
        ready = await world.wallet.start()  # from its storage: no new connection, no mediation
        assert ready["mediationId"] == world.mediation["mediationId"]
        assert ready["mediatorConnectionId"] == world.wallet_mediator_connection
        assert (ready["connections"], ready["mediations"]) == (2, 1)

        expected = world.delivered + world.queued
        assert await world.wallet.wait_for_messages(len(expected)) == expected
        for text in ("after the move", "last"):  # one at a time: a sender does not order them
            await world.peer.send(world.peer_connection, text)
            expected.append(text)
            assert await world.wallet.wait_for_messages(len(expected)) == expected  # once each

        # A new contact: the wallet registers a new key with us (keylist update) and its
        # contact's messages reach it through us.
        contact = await credo_peer(tmp_path / "contact", version)
        newcomers.append(contact)
        to_wallet = await contact.receive_invitation(await world.wallet.create_invitation())
        await contact.send(to_wallet, "from a new contact")
        expected.append("from a new contact")
        assert await world.wallet.wait_for_messages(len(expected)) == expected

        # The old invitation again: the wallet keeps the connection it has.
        with pytest.raises(CredoError, match="already"):
            await world.wallet.accept_invitation(world.invitation_url)
        assert len(await world.wallet.mediations()) == 1

        # A wallet app that ships the old invitation URL: a new wallet gets mediation.
        newcomer = CredoAgent(
            "newcomer", version=version, mediator_invitation_url=world.invitation_url
        )
        newcomers.append(newcomer)
        assert (await newcomer.start())["mediation"] == "granted"

        assert world.current_store_digest() == world.store_digest
    finally:
        for agent in newcomers:
            await agent.stop()
        await world.close()
        if switched is not None:
            switched.node.stop()
