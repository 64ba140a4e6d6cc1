"""A real wallet registers its phone: Credo 0.5.19 with its push notifications module
(@credo-ts/push-notifications, the FCM and APNs protocols) sets its device on the mediator
connection, and picks up nothing (a phone in a pocket). A second Credo agent's DID Exchange
request to it, forwarded through us, wakes it: exactly one notification reaches the local
FCM or APNs server (tests/providers), and the wallet reads its device info back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import redis

from mediator.embedded import free_port
from tests.interop.credo import CredoAgent, CredoError, credo_install_dir
from tests.interop.settled import Mailboxes, invitation_key
from tests.providers.fcm import FcmServer
from tests.providers.fixtures import ApnsServers
from tests.servers import Node, RedisUnderTest, database_url

pytestmark = pytest.mark.interop

FCM_TOKEN = "credo-wallet-token:APA91b" + "q" * 100
APNS_TOKEN = "0f1e2d3c" * 8


@pytest.fixture
def node_env(redis_server: RedisUnderTest) -> Iterator[dict[str, str]]:
    """Storage of its own, and a node's quick notification settings."""
    credo_install_dir()
    url = database_url(redis_server.url, "credo-push")
    redis.Redis.from_url(url).flushdb()
    yield {
        "redis_url": url,
        "MEDIATOR_NOTIFY_DELAY_SECONDS": "0.5",
        "MEDIATOR_WORKER_TICK_SECONDS": "0.1",
    }


@pytest.fixture
async def agents() -> AsyncIterator[list[CredoAgent]]:
    started: list[CredoAgent] = []
    yield started
    await asyncio.gather(*(a.stop() for a in started))


async def _phone_woken_by_a_request(
    node: Node, agents: list[CredoAgent], service: str, **device: Any
) -> tuple[CredoAgent, str]:
    """A wallet with no pickup sets its device; a second agent's request is queued for it.
    The wallet, and a recipient key it registered with the node."""
    async with httpx.AsyncClient(base_url=node.base) as client:
        url = (await client.get("/invitation")).json()["invitation_url"]
    wallet = CredoAgent(f"phone-{service}", mediator_invitation_url=url, pickup="None")
    sender = CredoAgent(f"friend-{service}", inbound_port=free_port())
    agents += [wallet, sender]
    ready, _ = await asyncio.gather(wallet.start(), sender.start())
    assert ready["mediation"] == "granted", wallet.log_tail()
    await wallet.command("set-device-info", service=service, **device)
    invitation = await wallet.create_invitation()
    # The friend's DID Exchange request waits in the phone's queue: the handshake cannot
    # finish while the phone sleeps, but the request is what wakes it.
    with contextlib.suppress(CredoError):
        await sender.command("receive-invitation", url=invitation, timeoutMs=3000, timeout=10)
    return wallet, invitation_key(invitation)


async def notifications_settled(node: Node, recipient_key: str) -> None:
    """No notification of the wallet's connection runs or is scheduled: another one could
    only come with a new message."""
    async with Mailboxes(node.env["MEDIATOR_REDIS_URL"]) as mailboxes:
        await mailboxes.settle(await mailboxes.connection_of(recipient_key), queue=False)


async def test_credo_registers_an_android_phone_that_fcm_then_wakes(
    node_env: dict[str, str], fcm_server: FcmServer, agents: list[CredoAgent]
) -> None:
    env = dict(node_env)
    node = Node(
        env.pop("redis_url"),
        **env,
        MEDIATOR_FCM_CREDENTIALS_FILE=str(fcm_server.credentials_file),
        MEDIATOR_FCM_API_URL=fcm_server.api_url,
    ).start()
    try:
        wallet, key = await _phone_woken_by_a_request(
            node, agents, "fcm", deviceToken=FCM_TOKEN, devicePlatform="android"
        )
        [sent] = await fcm_server.wait_for(1, timeout=15)
        await notifications_settled(node, key)
        assert len(fcm_server.sends) == 1, wallet.log_tail()
        assert sent.token == FCM_TOKEN and sent.message["data"]["message_count"] == "1"
        info = (await wallet.command("get-device-info", service="fcm"))["message"]
        assert info["device_token"] == FCM_TOKEN and info["device_platform"] == "android"
    finally:
        node.stop()


async def test_credo_registers_an_iphone_that_apns_then_wakes(
    node_env: dict[str, str], apns_servers: ApnsServers, agents: list[CredoAgent]
) -> None:
    env = dict(node_env)
    node = Node(
        env.pop("redis_url"),
        **env,
        MEDIATOR_APNS_KEY_FILE=str(apns_servers.key.path),
        MEDIATOR_APNS_KEY_ID=apns_servers.key.key_id,
        MEDIATOR_APNS_TEAM_ID=apns_servers.key.team_id,
        MEDIATOR_APNS_TOPIC=apns_servers.topic,
        MEDIATOR_APNS_API_URL=apns_servers.production.url,
        MEDIATOR_OUTBOUND_CA_FILE=str(apns_servers.tls.ca_path),
    ).start()
    try:
        wallet, key = await _phone_woken_by_a_request(node, agents, "apns", deviceToken=APNS_TOKEN)
        [sent] = await apns_servers.production.wait_for(1, timeout=15)
        await notifications_settled(node, key)
        assert len(apns_servers.production.notifications) == 1, wallet.log_tail()
        assert sent.device_token == APNS_TOKEN and sent.payload["message_count"] == 1
        assert sent.payload["aps"]["content-available"] == 1
        info = (await wallet.command("get-device-info", service="apns"))["message"]
        assert info["device_token"] == APNS_TOKEN
    finally:
        node.stop()
