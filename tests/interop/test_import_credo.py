"""Switching from a real Credo mediator (0.5.19, 0.6.3: its mediator module, its queue in its
Askar store or, for 0.6.3, in Postgres, as didcomm-mediator-credo keeps it) to ours: a Credo
wallet that was offline while messages waited for it at the old mediator starts again from
its own storage, unchanged, and picks them all up from us, in order, once each; its contact,
unchanged, goes on sending; it makes a new connection through us; a new wallet given only
the old invitation gets mediation; the old store is byte for byte what it was."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mediator.embedded import free_port
from tests.interop.credo import CredoAgent, CredoError
from tests.interop.old_credo import POSTGRES_PORT, credo_peer, old_credo_world, stored_queue
from tests.interop.postgres import Postgres
from tests.interop.switch import import_store, switch

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


@pytest.mark.timeout(600)
async def test_a_credo_mediators_postgres_queue_comes_over(tmp_path: Path) -> None:
    """didcomm-mediator-credo with MESSAGE_PICKUP__STORAGE__TYPE=postgres: the messages
    waiting in its `queued_message` table reach the wallet from us (--queue-url), in order,
    once each; neither the store nor the queue's database changes."""
    postgres = Postgres(account="credo", port=POSTGRES_PORT)
    await postgres.start()
    switched = None
    try:
        world = await old_credo_world(tmp_path, "0.6.3", queue=postgres)
        try:
            assert world.queue_url is not None
            assert await stored_queue(world.store) == []  # the messages wait in Postgres only
            closed = f"postgres://credo:{postgres.password}@127.0.0.1:{free_port()}/queue"
            for url, said in ((postgres.uri("postgres"), "no queued_message table"), (closed, "")):
                refused = await asyncio.to_thread(
                    import_store,
                    "credo",
                    world.store_uri,
                    world.key,
                    tmp_path / "no",
                    "--queue-url",
                    url,
                )
                lines = [line for line in refused.stderr.splitlines() if line.strip()]
                assert refused.returncode == 1 and len(lines) == 1, refused
                assert lines[0].startswith("error: --queue-url postgres://credo:***@"), lines
                assert said in lines[0] and postgres.password not in lines[0]
            switched = await switch(
                "credo",
                world.store_uri,
                world.key,
                world.port,
                world.endpoints,
                tmp_path / "ours",
                "--queue-url",
                world.queue_url,
            )
            assert switched.imported("queued messages") == len(world.queued)
            ready = await world.wallet.start()
            assert ready["mediationId"] == world.mediation["mediationId"]
            expected = world.delivered + world.queued
            assert await world.wallet.wait_for_messages(len(expected)) == expected
            await world.peer.send(world.peer_connection, "after the move")
            expected.append("after the move")
            assert await world.wallet.wait_for_messages(len(expected)) == expected  # once each

            assert world.current_store_digest() == world.store_digest
            assert await world.current_queue_digest() == world.queue_digest
        finally:
            await world.close()
    finally:
        if switched is not None:
            switched.node.stop()
        await postgres.stop()
