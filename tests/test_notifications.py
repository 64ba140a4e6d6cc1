"""Phone notifications end to end: real nodes and workers, real wallets' messages
(push-notifications-fcm and -apns), and local servers that speak each provider's published
API (tests/providers: Google's OAuth token endpoint checking the signed assertion, FCM HTTP
v1, APNs on HTTP/2 over TLS checking the ES256 provider token, a webhook checking the HMAC).

A phone-like recipient has a device token and no socket: a burst of forwards gives it
exactly one notification with the queue count and no content; a live socket on another node
means none; provider answers remove gone tokens and retry 429s after their Retry-After."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from redis.asyncio import Redis

from mediator.client.agent import message
from mediator.client.recipient import Recipient
from mediator.engine import keys
from mediator.engine.scripts import Scripts
from mediator.notify.devices import schedule_keys
from tests.didcomm_peer import forward, mediator_key
from tests.eventually import eventually
from tests.providers.fcm import FcmServer
from tests.providers.fixtures import ApnsServers
from tests.providers.webhook import WebhookServer, verify_signature
from tests.scrape import value
from tests.servers import MetricsWorker, Node, RedisUnderTest, database_url

FAST = {
    "MEDIATOR_NOTIFY_DELAY_SECONDS": "0.5",
    "MEDIATOR_NOTIFY_INTERVAL_SECONDS": "3",
    "MEDIATOR_WORKER_TICK_SECONDS": "0.1",
    "MEDIATOR_PUSH_RETRY_MIN_SECONDS": "0.2",
    "MEDIATOR_PUSH_RETRY_MAX_SECONDS": "0.5",
    "MEDIATOR_PUSH_TIMEOUT_SECONDS": "3",
    "MEDIATOR_IMPLICIT_PICKUP_DELAY_SECONDS": "0.2",
    "MEDIATOR_LEASE_SECONDS": "2",
}
# For the tests that count a burst: every forward of it lands within the delay, even on a
# loaded machine, so the one notification counts them all.
WHOLE_BURST = {"MEDIATOR_NOTIFY_DELAY_SECONDS": "3"}
FCM_TOKEN = "fcm-token_0123456789:APA91b" + "x" * 120
APNS_TOKEN = "a1b2c3d4" * 8


@pytest.fixture
def db_url(redis_server: RedisUnderTest) -> Iterator[str]:
    """Storage of its own: no other module's node or worker runs these notifications."""
    url = database_url(redis_server.url, "notifications")
    redis.Redis.from_url(url).flushdb()
    yield url


def provider_env(fcm: FcmServer | None = None, apns: ApnsServers | None = None) -> dict[str, str]:
    env: dict[str, str] = {}
    if fcm is not None:
        env |= {
            "MEDIATOR_FCM_CREDENTIALS_FILE": str(fcm.credentials_file),
            "MEDIATOR_FCM_API_URL": fcm.api_url,
        }
    if apns is not None:
        env |= {
            "MEDIATOR_APNS_KEY_FILE": str(apns.key.path),
            "MEDIATOR_APNS_KEY_ID": apns.key.key_id,
            "MEDIATOR_APNS_TEAM_ID": apns.key.team_id,
            "MEDIATOR_APNS_TOPIC": apns.topic,
            "MEDIATOR_APNS_ENVIRONMENT": "sandbox",
            "MEDIATOR_APNS_API_URL": apns.sandbox.url,
            "MEDIATOR_OUTBOUND_CA_FILE": str(apns.tls.ca_path),
        }
    return env


class Nodes:
    """Nodes started by a test, stopped after it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.started: list[Node | MetricsWorker] = []

    def node(self, **env: str) -> Node:
        node = Node(self.url, **{**FAST, **env}).start()
        self.started.append(node)
        return node

    def stop(self) -> None:
        for process in self.started:
            process.stop()


@pytest.fixture
def nodes(db_url: str) -> Iterator[Nodes]:
    started = Nodes(db_url)
    yield started
    started.stop()


@pytest.fixture
async def phones() -> AsyncIterator[list[Recipient]]:
    made: list[Recipient] = []
    yield made
    for phone in made:
        await phone.close()


async def phone(
    node: Node, made: list[Recipient], transport: str = "http"
) -> tuple[Recipient, str, str]:
    """A wallet connected and granted mediation, with one recipient key: (it, its key, the
    mediator's key for senders)."""
    wallet = await Recipient.connect_to(node.base, transport)
    made.append(wallet)
    key = await wallet.mediate()
    return wallet, key, await mediator_key(node.base)


async def android(
    nodes: Nodes, fcm: FcmServer, made: list[Recipient]
) -> tuple[Node, Recipient, str, str]:
    """A node notifying through `fcm`, and an Android wallet of it with its device set."""
    node = nodes.node(**provider_env(fcm=fcm))
    wallet, key, med = await phone(node, made)
    await set_device(wallet, "fcm", device_token=FCM_TOKEN, device_platform="android")
    return node, wallet, key, med


PLEASE_ACK = {"~please_ack": {"on": ["RECEIPT"]}}


async def set_device(wallet: Recipient, service: str, **fields: Any) -> dict[str, Any]:
    """set-device-info asking for an ack (RFC 0317): the ack, or a problem report."""
    kind = f"push-notifications-{service}/1.0/set-device-info"
    return await wallet.request(kind, **fields, **PLEASE_ACK)


async def burst(node: Node, med: str, key: str, n: int) -> None:
    for i in range(n):
        answer = await forward(node.base, med, key, {"secret": f"content {i}"})
        assert answer.status_code == 202, answer.text


async def nothing_pending(url: str, connection: str) -> bool:
    """The connection's notification is settled and none is scheduled: no other one comes
    until a new message does (the worker's claim, the provider's answer, all done)."""
    (record, schedule, _), member = schedule_keys(connection)
    client = Redis.from_url(url)
    try:
        claimed = await client.hexists(record, "nc")
        return not claimed and await client.zscore(schedule, member) is None
    finally:
        await client.aclose()


async def settled(url: str, connection: str) -> None:
    assert await eventually(lambda: nothing_pending(url, connection), bool, within=10)


async def metric(url: str, provider: str, outcome: str) -> float:
    """A notification counter of the node (its base URL) or worker (its metrics URL)."""
    if not url.endswith("/metrics"):
        url += "/metrics"
    async with httpx.AsyncClient() as client:
        text = (await client.get(url)).text
    return value(text, "mediator_notifications_total", provider=provider, outcome=outcome) or 0.0


@pytest.mark.full
async def test_a_burst_wakes_an_android_phone_once_with_the_count_and_no_content(
    nodes: Nodes, fcm_server: FcmServer, phones: list[Recipient]
) -> None:
    node = nodes.node(**provider_env(fcm=fcm_server), **WHOLE_BURST)
    wallet, key, med = await phone(node, phones)
    ack = await set_device(wallet, "fcm", device_token=FCM_TOKEN, device_platform="android")
    assert ack["@type"].endswith("push-notifications-fcm/1.0/ack") and ack["status"] == "OK"

    await burst(node, med, key, 5)
    [sent] = await fcm_server.wait_for(1, timeout=10)
    await settled(nodes.url, wallet.verkey)  # a second one, were it coming, is scheduled
    assert len(fcm_server.sends) == 1
    assert sent.token == FCM_TOKEN
    assert sent.message["data"] == {
        "@type": "https://didcomm.org/push-notifications-fcm",
        "message_count": "5",
        "notification_id": sent.message["data"]["notification_id"],
    }
    assert sent.message["android"] == {"priority": "high", "collapse_key": "didcomm"}
    assert "apns" not in sent.message and "content" not in json.dumps(sent.body)
    # Authorized by a token from the service account's signed assertion (checked there).
    [grant] = fcm_server.grants
    assert sent.access_token == grant.access_token
    assert grant.claims["iss"] == fcm_server.service_account.client_email
    assert (
        await metric(node.base, "fcm", "sent") == 1
        and await metric(node.base, "none", "scheduled") >= 1
    )

    # The wallet reads its device info back.
    info = await wallet.request("push-notifications-fcm/1.0/get-device-info")
    assert info["device_token"] == FCM_TOKEN and info["device_platform"] == "android"
    # The token (about 160 characters) is kept beside the connection's record, which stays
    # a listpack: a value over 64 bytes in it would make it a hash table, 5x the memory.
    record = keys.connection_keys(wallet.verkey).record
    storage = Redis.from_url(nodes.url)
    try:
        assert await storage.object("encoding", record) == b"listpack"
    finally:
        await storage.aclose()


@pytest.mark.full
async def test_no_notification_while_a_live_socket_is_open_on_another_node(
    nodes: Nodes, fcm_server: FcmServer, phones: list[Recipient]
) -> None:
    env = provider_env(fcm=fcm_server)
    a, b = nodes.node(**env), nodes.node(**env)
    wallet, key, med = await phone(a, phones, "ws")
    await set_device(wallet, "fcm", device_token=FCM_TOKEN, device_platform="android")
    status = await wallet.live_delivery(True)  # live on A
    assert status["live_delivery"] is True

    await burst(b, med, key, 3)  # the sender's forwards land on B
    delivered = [await wallet.next_message(10) for _ in range(1)]
    assert delivered

    async def skipped_as_live() -> float:
        return await metric(a.base, "none", "live") + await metric(b.base, "none", "live")

    assert await eventually(skipped_as_live, lambda n: n >= 1, within=10) >= 1
    await settled(nodes.url, wallet.verkey)
    assert fcm_server.sends == []

    # The app goes to the background: the socket closes, the next message wakes the phone.
    await wallet.ws.close()
    storage = Redis.from_url(nodes.url)
    try:
        held = keys.connection_keys(wallet.verkey).presence
        assert not await eventually(lambda: storage.exists(held), lambda n: not n, within=10)
    finally:
        await storage.aclose()
    await burst(b, med, key, 1)
    [sent] = await fcm_server.wait_for(1, timeout=10)
    assert int(sent.message["data"]["message_count"]) >= 1


@pytest.mark.full
async def test_an_iphone_gets_an_apns_alert_with_content_available_and_a_collapse_id(
    nodes: Nodes, apns_servers: ApnsServers, phones: list[Recipient]
) -> None:
    node = nodes.node(**provider_env(apns=apns_servers), **WHOLE_BURST)
    wallet, key, med = await phone(node, phones)
    await set_device(wallet, "apns", device_token=APNS_TOKEN)
    await burst(node, med, key, 2)
    [sent] = await apns_servers.sandbox.wait_for(1, timeout=10)
    await settled(nodes.url, wallet.verkey)
    assert len(apns_servers.sandbox.notifications) == 1
    assert apns_servers.production.notifications == []
    assert sent.device_token == APNS_TOKEN
    assert sent.topic == apns_servers.topic and sent.push_type == "alert"
    assert sent.collapse_id == "didcomm" and sent.priority == 10
    assert sent.payload["aps"]["content-available"] == 1
    assert sent.payload["aps"]["alert"] == {
        "title": "New message",
        "body": "You have new messages.",
    }
    assert sent.payload["message_count"] == 2
    assert sent.payload["@type"] == "https://didcomm.org/push-notifications-apns"
    info = await wallet.request("push-notifications-apns/1.0/get-device-info")
    assert info["device_token"] == APNS_TOKEN and "device_platform" not in info


@pytest.mark.full
async def test_an_iphone_registered_through_fcm_gets_fcms_apns_block(
    nodes: Nodes, fcm_server: FcmServer, phones: list[Recipient]
) -> None:
    node = nodes.node(**provider_env(fcm=fcm_server))
    wallet, key, med = await phone(node, phones)
    await set_device(wallet, "fcm", device_token=FCM_TOKEN, device_platform="ios")
    await burst(node, med, key, 1)
    [sent] = await fcm_server.wait_for(1, timeout=10)
    apns = sent.message["apns"]
    assert apns["headers"]["apns-push-type"] == "alert"
    assert apns["headers"]["apns-collapse-id"] == "didcomm"
    assert apns["payload"]["aps"]["content-available"] == 1
    assert sent.message["data"]["message_count"] == "1"


@pytest.mark.full
async def test_an_unregistered_token_is_forgotten(
    nodes: Nodes, fcm_server: FcmServer, phones: list[Recipient]
) -> None:
    node, wallet, key, med = await android(nodes, fcm_server, phones)
    fcm_server.fail(FCM_TOKEN, "UNREGISTERED")
    await burst(node, med, key, 1)
    await fcm_server.wait_until(lambda: fcm_server.rejected.get("UNREGISTERED", 0) >= 1, 10)
    gone = await eventually(lambda: metric(node.base, "fcm", "gone"), bool, within=5)
    assert gone == 1
    problem = await wallet.request("push-notifications-fcm/1.0/get-device-info")
    assert problem["@type"].endswith("problem-report")
    assert problem["description"]["code"] == "not-registered-for-push-notifications"
    # Nothing more is tried for it: nothing is even scheduled.
    await burst(node, med, key, 1)
    await settled(nodes.url, wallet.verkey)
    assert fcm_server.sends == [] and fcm_server.rejected["UNREGISTERED"] == 1


@pytest.mark.full
async def test_429_is_retried_after_its_retry_after(
    nodes: Nodes, fcm_server: FcmServer, phones: list[Recipient]
) -> None:
    node, _wallet, key, med = await android(nodes, fcm_server, phones)
    fcm_server.fail_next(1, "QUOTA_EXCEEDED", retry_after=2)
    await burst(node, med, key, 1)
    await fcm_server.wait_until(lambda: fcm_server.rejected.get("QUOTA_EXCEEDED", 0) >= 1, 10)
    refused_at = time.monotonic()
    [sent] = await fcm_server.wait_for(1, timeout=10)
    assert time.monotonic() - refused_at >= 1.8  # not before the provider's Retry-After
    assert sent.token == FCM_TOKEN
    assert (
        await metric(node.base, "fcm", "retried") == 1
        and await metric(node.base, "fcm", "sent") == 1
    )


@pytest.mark.full
async def test_within_the_interval_later_messages_are_announced_once_it_is_over(
    nodes: Nodes, fcm_server: FcmServer, phones: list[Recipient]
) -> None:
    node, _wallet, key, med = await android(nodes, fcm_server, phones)
    await burst(node, med, key, 1)
    [first] = await fcm_server.wait_for(1, timeout=10)
    await burst(node, med, key, 2)  # inside the 3 s interval
    [_, second] = await fcm_server.wait_for(2, timeout=10)
    assert second.time - first.time >= 2.9
    assert second.message["data"]["message_count"] == "3"
    assert await metric(node.base, "none", "interval") >= 1


@pytest.mark.full
async def test_a_node_that_dies_leaves_its_pending_notification_to_a_worker(
    nodes: Nodes, fcm_server: FcmServer, phones: list[Recipient], db_url: str, tmp_path: Path
) -> None:
    env = provider_env(fcm=fcm_server) | {"MEDIATOR_NOTIFY_DELAY_SECONDS": "2"}
    node = nodes.node(**env)
    wallet, key, med = await phone(node, phones)
    await set_device(wallet, "fcm", device_token=FCM_TOKEN, device_platform="android")
    await burst(node, med, key, 1)
    node.kill()  # before the notification was due: it waits in Redis
    worker = MetricsWorker(db_url, tmp_path / "worker.health", **(FAST | env)).start()
    nodes.started.append(worker)
    [sent] = await fcm_server.wait_for(1, timeout=15)
    await settled(db_url, wallet.verkey)
    assert len(fcm_server.sends) == 1 and sent.token == FCM_TOKEN
    assert await metric(worker.metrics_url, "fcm", "sent") == 1


@pytest.mark.full
async def test_a_webhook_app_gets_a_signed_notification(
    nodes: Nodes,
    webhook_server: WebhookServer,
    webhook_secret: str,
    phones: list[Recipient],
    tmp_path: Path,
) -> None:
    apps = tmp_path / "apps.json"
    secret_file = tmp_path / "hook.secret"
    secret_file.write_text(webhook_secret + "\n")
    apps.write_text(
        json.dumps(
            {
                "apps": [
                    {
                        "name": "selfhosted",
                        "webhook": {
                            "url": webhook_server.url + "/hook",
                            "secret_file": str(secret_file),
                        },
                    }
                ]
            }
        )
    )
    node = nodes.node(MEDIATOR_PUSH_APPS_FILE=str(apps), **WHOLE_BURST)
    wallet, key, med = await phone(node, phones)
    await set_device(
        wallet, "fcm", device_token=FCM_TOKEN, device_platform="android", app="selfhosted"
    )
    await burst(node, med, key, 4)
    [hook] = await webhook_server.wait_for(1, timeout=10)
    assert hook.path == "/hook"
    assert hook.signature is not None
    assert verify_signature(webhook_secret, hook.body, hook.signature)
    body = json.loads(hook.body)
    assert body["type"] == "didcomm.messages-waiting" and body["message_count"] == 4
    assert body["app"] == "selfhosted" and body["device_token"] == FCM_TOKEN
    assert body["device_platform"] == "android" and "content" not in hook.body.decode()
    assert hook.headers["x-mediator-notification"] == body["id"]


@pytest.mark.full
async def test_device_info_is_validated_and_removed_with_nulls(
    nodes: Nodes, fcm_server: FcmServer, phones: list[Recipient]
) -> None:
    node = nodes.node(**provider_env(fcm=fcm_server))
    wallet, _, _ = await phone(node, phones)

    async def code(service: str, **fields: Any) -> str:
        answer = await set_device(wallet, service, **fields)
        assert answer["@type"].endswith("problem-report"), answer
        return str(answer["description"]["code"])

    assert await code("fcm", device_token=FCM_TOKEN, device_platform=None) == "missing-value"
    assert await code("fcm", device_token=None, device_platform="android") == "missing-value"
    assert await code("fcm", device_token=7, device_platform="android") == "invalid-value"
    assert await code("fcm", device_token="a" * 5000, device_platform="android") == "invalid-value"
    assert (
        await code("fcm", device_token=FCM_TOKEN, device_platform="android", app="nope")
        == "unknown-app"
    )
    # A connection without mediation has no mailbox to be notified about.
    stranger = await Recipient.connect_to(node.base, "http")
    phones.append(stranger)
    refused = await set_device(stranger, "fcm", device_token=FCM_TOKEN, device_platform="ios")
    assert refused["description"]["code"] == "mediation-not-granted"
    # No APNs credentials here: that protocol is not offered.
    assert await code("apns", device_token=APNS_TOKEN) == "unsupported-message-type"
    disclosed = await wallet.request("discover-features/1.0/query", query="*push-notifications*")
    assert [p["pid"] for p in disclosed["protocols"]] == [
        "https://didcomm.org/push-notifications-fcm/1.0"
    ]

    # Unasked, a successful set is not acknowledged (Credo's module would answer an ack
    # with a problem report); asked, it is.
    unasked = message(
        "push-notifications-fcm/1.0/set-device-info",
        device_token=FCM_TOKEN,
        device_platform="android",
    )
    assert await wallet.send(unasked) is None
    info = await wallet.request("push-notifications-fcm/1.0/get-device-info")
    assert info["device_token"] == FCM_TOKEN
    removed = await set_device(wallet, "fcm", device_token=None, device_platform=None)
    assert removed["status"] == "OK"
    gone = await wallet.request("push-notifications-fcm/1.0/get-device-info")
    assert gone["description"]["code"] == "not-registered-for-push-notifications"


@pytest.mark.full
async def test_a_bad_provider_configuration_stops_the_node_with_a_clear_error(
    db_url: str, tmp_path: Path
) -> None:
    bad = tmp_path / "not-a-service-account.json"
    bad.write_text('{"type": "authorized_user"}')
    node = Node(db_url, MEDIATOR_FCM_CREDENTIALS_FILE=str(bad))
    with pytest.raises(RuntimeError, match="not a service-account key file"):
        node.start()
    node.stop()


# ------------------------------------------------------------------ provider answers, more


@pytest.mark.full
async def test_a_revoked_access_token_is_replaced_and_the_notification_still_sent(
    nodes: Nodes, fcm_server: FcmServer, phones: list[Recipient]
) -> None:
    node, wallet, key, med = await android(nodes, fcm_server, phones)
    await burst(node, med, key, 1)
    await fcm_server.wait_for(1, timeout=10)
    fcm_server.expire_tokens()  # FCM answers 401 to the token the node holds
    await settled(nodes.url, wallet.verkey)
    await burst(node, med, key, 1)  # announced once the interval is over
    await fcm_server.wait_for(2, timeout=15)
    assert len(fcm_server.grants) == 2  # logged in again after the 401
    assert await metric(node.base, "fcm", "retried") == 1
    assert await metric(node.base, "fcm", "failed") == 0


@pytest.mark.full
async def test_a_wrong_apns_environment_fails_without_erasing_the_device(
    nodes: Nodes, apns_servers: ApnsServers, phones: list[Recipient]
) -> None:
    """A development build's token sent to production answers BadDeviceToken for every
    phone: a settings mistake, so the device stays registered for when it is fixed."""
    apns_servers.sandbox.accept_only(["f" * 64])  # this phone's token belongs elsewhere
    node = nodes.node(**provider_env(apns=apns_servers))
    wallet, key, med = await phone(node, phones)
    await set_device(wallet, "apns", device_token=APNS_TOKEN)
    await burst(node, med, key, 1)
    failed = await eventually(lambda: metric(node.base, "apns", "failed"), bool, within=10)
    assert failed == 1 and apns_servers.sandbox.notifications == []
    info = await wallet.request("push-notifications-apns/1.0/get-device-info")
    assert info["device_token"] == APNS_TOKEN


@pytest.mark.full
async def test_a_webhook_retry_carries_the_same_notification_id(
    nodes: Nodes, webhook_server: WebhookServer, webhook_secret: str, phones: list[Recipient]
) -> None:
    node = nodes.node(
        MEDIATOR_NOTIFY_WEBHOOK_URL=webhook_server.url + "/hook",
        MEDIATOR_NOTIFY_WEBHOOK_SECRET=webhook_secret,
    )
    wallet, key, med = await phone(node, phones)
    await set_device(wallet, "fcm", device_token=FCM_TOKEN, device_platform="android")
    webhook_server.fail_next(1, 503)
    await burst(node, med, key, 1)
    [delivered] = await webhook_server.wait_for(1, timeout=10)
    ids = [a.headers["x-mediator-notification"] for a in webhook_server.attempts]
    assert len(ids) == 2 and ids[0] == ids[1] == json.loads(delivered.body)["id"]


# ------------------------------------------------------------------ the schedule's steps


@pytest.fixture
async def notify_script(db_url: str) -> AsyncIterator[tuple[Redis, Scripts]]:
    client = Redis.from_url(db_url)
    yield client, Scripts(client)
    await client.aclose()


async def _pending(client: Redis, scripts: Scripts, token: str) -> tuple[list[str], str]:
    """A connection with a phone and a notification scheduled for now."""
    keys_, member = schedule_keys(f"Conn{uuid.uuid4().hex}")
    fields = {"created": "1", "dv": "fcm", "dt": "1", "dp": "android", "da": "default"}
    await client.hset(keys_[0], mapping=fields)
    await client.set(keys_[2], token)
    assert int(await scripts.call("notify", keys_, ["queued", member, 0])) > 0
    return keys_, member


async def test_a_claim_whose_worker_died_is_run_again_as_new(
    notify_script: tuple[Redis, Scripts],
) -> None:
    client, scripts = notify_script
    keys_, member = await _pending(client, scripts, "token-a")
    first = await scripts.call("notify", keys_, ["claim", member, 50])  # a 50 ms guard
    assert first[2] == b"token-a"  # the token, from its own key
    assert first[7] == b"1"  # new: a message came
    # Its worker dies without settling; the guard runs out; the next claim must send.
    await asyncio.sleep(0.1)
    again = await scripts.call("notify", keys_, ["claim", member, 50])
    assert again[7] == b"1"
    await scripts.call("notify", keys_, ["done", member, 0, ""])
    await asyncio.sleep(0.1)
    assert await scripts.call("notify", keys_, ["claim", member, 50]) == []  # settled: gone


async def test_a_gone_token_never_takes_the_one_registered_meanwhile(
    notify_script: tuple[Redis, Scripts],
) -> None:
    client, scripts = notify_script
    keys_, member = await _pending(client, scripts, "token-old")
    await scripts.call("notify", keys_, ["claim", member, 5000])
    await client.set(keys_[2], "token-new")  # the wallet registered again meanwhile
    await scripts.call("notify", keys_, ["forget", member, 0, "token-old"])
    assert await client.get(keys_[2]) == b"token-new"
    assert await client.hget(keys_[0], "dt") == b"1"
    await scripts.call("notify", keys_, ["forget", member, 0, "token-new"])
    assert await client.get(keys_[2]) is None and await client.hget(keys_[0], "dt") is None
    assert await client.zscore(keys_[1], member) is None


async def test_steps_for_a_connection_that_is_gone_leave_nothing_behind(
    notify_script: tuple[Redis, Scripts],
) -> None:
    client, scripts = notify_script
    keys_, member = await _pending(client, scripts, "token")
    await scripts.call("notify", keys_, ["claim", member, 5000])
    await client.delete(keys_[0])  # the connection was removed mid-notification
    assert await scripts.call("notify", keys_, ["retry", member, 100, "id"]) == 0
    assert await client.exists(keys_[0], keys_[2]) == 0  # its token goes with it
    assert await client.zscore(keys_[1], member) is None


@pytest.mark.full
async def test_a_token_endpoint_outage_is_retried_until_it_answers(
    nodes: Nodes, fcm_server: FcmServer, phones: list[Recipient]
) -> None:
    fcm_server.fail_grants_next(2, status=503)  # Google's token endpoint down twice
    node, _wallet, key, med = await android(nodes, fcm_server, phones)
    await burst(node, med, key, 1)
    [sent] = await fcm_server.wait_for(1, timeout=20)
    assert sent.token == FCM_TOKEN and len(fcm_server.grants) == 1
    assert await metric(node.base, "fcm", "retried") >= 1
    assert await metric(node.base, "fcm", "failed") == 0


@pytest.mark.full
async def test_the_second_recipient_of_one_envelope_is_woken_too(
    nodes: Nodes, fcm_server: FcmServer, phones: list[Recipient]
) -> None:
    """One envelope for two of our recipients is queued for the second by a separate send,
    which schedules its notification with a call of its own (as every forward does on Redis
    Cluster): that phone is woken as well."""
    node = nodes.node(**provider_env(fcm=fcm_server))
    first, first_key, med = await phone(node, phones)
    second, second_key, _ = await phone(node, phones)
    other_token = FCM_TOKEN.replace("fcm-token", "fcm-other")
    await set_device(second, "fcm", device_token=other_token, device_platform="android")
    answer = await forward(node.base, med, first_key, {"to": "both"}, extra_kids=(second_key,))
    assert answer.status_code == 202
    [sent] = await fcm_server.wait_for(1, timeout=10)
    for wallet in (first, second):
        await settled(nodes.url, wallet.verkey)
    assert len(fcm_server.sends) == 1 and sent.token == other_token  # the first has no phone


async def test_a_put_off_notification_leaves_the_head_of_the_schedule(
    notify_script: tuple[Redis, Scripts],
) -> None:
    """A worker that cannot run a due notification (busy, or without provider settings)
    moves it ahead: left due, it would be read again every tick and, 200 of them in a shard,
    hold up that shard's upkeep. A claim in progress is not touched."""
    client, scripts = notify_script
    keys_, member = await _pending(client, scripts, "token")
    await asyncio.sleep(0.01)
    await scripts.call("notify", keys_, ["defer", member, 60_000])
    [(_, score)] = await client.zrange(keys_[1], 0, 0, withscores=True)
    assert score > time.time() * 1000 + 50_000
    assert await scripts.call("notify", keys_, ["claim", member, 50]) == []  # not due now
    # Due again and claimed: a defer of the claimed entry changes nothing, nc stays.
    await client.zadd(keys_[1], {member: 0})
    assert await scripts.call("notify", keys_, ["claim", member, 60_000])
    claimed_until = await client.zscore(keys_[1], member)
    await scripts.call("notify", keys_, ["defer", member, 1])
    assert await client.zscore(keys_[1], member) == claimed_until
    assert await client.hget(keys_[0], "nc") == b"1"
