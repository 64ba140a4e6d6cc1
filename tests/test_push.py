"""Push delivery to recipients that have an endpoint (as ACA-Py does): a real HTTP endpoint
served by uvicorn in the test, the app in process (a real node process where one dies),
real Redis.

The endpoints are on loopback, which pushes reach only through the allowlist
(`MEDIATOR_OUTBOUND_ALLOW`), so this module's nodes have it, and a database of their own
(15): a node without it (another module's) would refuse their retries."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mediator.client import Recipient, Sender
from mediator.didcomm.did_doc import Service
from mediator.didcomm.did_peer import numalgo2_did
from mediator.embedded import free_port
from mediator.engine import keys
from mediator.engine.engine import Engine
from mediator.mediation.handshakes import services_from_json, services_json
from mediator.mediation.mailbox import Mailbox
from mediator.mediation.push import Pusher
from mediator.mediation.store import MediationStore, RouteCache
from mediator.settings import Settings
from mediator.storage.clients import Backend, RedisClient
from tests.didcomm_peer import Peer, Reach
from tests.inprocess import AppNode
from tests.local_server import LocalServer
from tests.servers import DIDCOMM_SUITES, DIDCOMM_SUITES_ENV, Node, RedisUnderTest

ALLOW_LOOPBACK = {"MEDIATOR_OUTBOUND_ALLOW": "127.0.0.0/8"}
ALLOW_LOOPBACK_SETTINGS = {"outbound_allow": "127.0.0.0/8"}


def database_15(server: RedisUnderTest) -> str:
    return server.isolated_url("push")  # Redis Cluster: a cluster of its own


@pytest.fixture(scope="module")
def push_url(redis_server: RedisUnderTest) -> str:
    """This module's storage: database 15 (on a Redis Cluster, a cluster of its own)."""
    return database_15(redis_server)


@pytest.fixture(scope="module")
def dc_node(push_url: str) -> Iterator[Node]:
    """conftest's dc_node, with loopback endpoints allowed, on database 15."""
    node = Node(push_url, **DIDCOMM_SUITES_ENV, **ALLOW_LOOPBACK)
    node.start()
    yield node
    node.stop()


@pytest.fixture(scope="module")
async def dc_app(push_url: str) -> AsyncIterator[AppNode]:
    """conftest's dc_app, with loopback endpoints allowed, on database 15."""
    node = AppNode(push_url, "push", **DIDCOMM_SUITES, **ALLOW_LOOPBACK_SETTINGS)
    yield await node.start()
    await node.stop()


@pytest.fixture
async def push_redis(push_url: str) -> AsyncIterator[RedisClient]:
    """Database 15 as this module's nodes reach it: where their push leases and schedules are."""
    backend = Backend(push_url)
    await backend.start()
    yield backend.client
    await backend.aclose()


@pytest.fixture(scope="module")
async def med(dc_app: AppNode) -> str:
    """This module's mediator's verkey (conftest's is for its dc_app), which dc_node on the
    same database has too."""
    from tests.didcomm_peer import mediator_key

    return await mediator_key(dc_app)


class Endpoint(LocalServer):
    """An agent's inbound HTTP endpoint: records what it is posted, answers `status`."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.refused = 0
        self.status = 200
        self.delay = 0.0  # seconds each post takes to answer (a slow agent)
        self.hold: asyncio.Event | None = None  # while set here, posts wait for it
        self.content_types: set[str] = set()
        super().__init__(Starlette(routes=[Route("/", self._post, methods=["POST"])]))
        self.url += "/"

    async def _post(self, request: Request) -> Response:
        body = await request.body()
        self.content_types.add(request.headers.get("content-type", ""))
        if self.status >= 300:
            self.refused += 1
            return Response(status_code=self.status)
        self.received.append(body)
        if self.hold is not None:
            await self.hold.wait()
        await asyncio.sleep(self.delay)
        return Response(status_code=self.status)


@pytest.fixture
async def endpoint() -> AsyncIterator[Endpoint]:
    ep = Endpoint()
    await ep.start()
    yield ep
    await ep.stop()


async def until(condition: Any, timeout: float = 5.0) -> None:  # noqa: ASYNC109
    """Wait until `condition()` (sync or async) holds; fail the test if it never does."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        assert loop.time() < deadline, "the condition never held"
        await asyncio.sleep(0.05)


async def push_idle(redis: RedisClient, connection: str) -> bool:
    """No push of the connection runs (its push lease is free) and none is scheduled: what
    is pushed later can only come from a new forward."""
    due = keys.queue_keys(f"{keys.DIDCOMM_NAMESPACE}:{connection}").due
    held = await redis.exists(keys.connection_keys(connection).push)
    return not held and await redis.zscore(due, keys.PUSH_MEMBER + connection) is None


def opened(wallet: Recipient, data: bytes) -> dict[str, Any]:
    return wallet.open_forwarded(data)


async def _wallet_with_endpoint(node: str | Reach, med: str, endpoint: Endpoint) -> Peer:
    """A wallet connected like ACA-Py: DID Exchange with an HTTP endpoint in its did:peer:2
    and no return route, so every answer comes to the endpoint."""
    wallet = Peer(node, med)
    request = wallet.message(
        "didexchange/1.1/request",
        route=None,
        label="aca-py-like",
        did=numalgo2_did(wallet.keys, [endpoint.url]),
    )
    assert await wallet.send(request) is None  # 202: answered through the endpoint
    await until(lambda: len(endpoint.received) == 1)
    response = opened(wallet, endpoint.received.pop())
    assert response["@type"] == "https://didcomm.org/didexchange/1.1/response"
    assert response["~thread"]["thid"] == request["@id"]
    wallet.take_response(response)
    return wallet


async def test_handshake_mediation_and_forwards_are_pushed_to_the_endpoint(
    dc_app: AppNode, med: str, endpoint: Endpoint, push_redis: RedisClient
) -> None:
    wallet = await _wallet_with_endpoint(dc_app, med, endpoint)
    # The endpoint is kept in the record without what goes without saying (its own key as
    # the recipient key, no routing keys), so that the record stays a listpack (a value
    # over 64 bytes would make it a hash table, 2.5 times the memory).
    record = keys.connection_keys(wallet.verkey).record
    assert await push_redis.hget(record, "s") == f'[{{"e":"{endpoint.url}"}}]'.encode()
    assert await push_redis.object("encoding", record) == b"listpack"
    grant_request = wallet.message("coordinate-mediation/1.0/mediate-request", route=None)
    assert await wallet.send(grant_request) is None
    await until(lambda: len(endpoint.received) == 1)
    grant = opened(wallet, endpoint.received.pop())
    assert grant["@type"].endswith("/mediate-grant")
    key = wallet.add_key()
    update = wallet.message(
        "coordinate-mediation/1.0/keylist-update",
        route=None,
        updates=[{"recipient_key": wallet.recipient_keys[key].did_key, "action": "add"}],
    )
    assert await wallet.send(update) is None
    await until(lambda: len(endpoint.received) == 1)
    assert opened(wallet, endpoint.received.pop())["updated"][0]["result"] == "success"

    sender = Sender(med)
    for n in range(5):
        await sender.send_to(key, {"n": n}, dc_app.base, client=wallet.web)
    await until(lambda: len(endpoint.received) == 5)
    assert [opened(wallet, b)["n"] for b in endpoint.received] == [0, 1, 2, 3, 4]
    assert endpoint.content_types == {"application/didcomm-envelope-enc"}
    # Delivered means removed: nothing waits in the queue.
    status = await wallet.status()
    assert status["message_count"] == 0
    await wallet.close()


def test_push_endpoints_written_in_full_before_still_read() -> None:
    """Records written before the compact form name every key; both forms read alike."""
    ours, other = "8HH5gYEeNc3z7PYXmd54d4x6qAfCNrqQqEB3nS7Zfu7K", "z6Mk-routing"
    full = json.dumps([{"e": "https://a.example", "k": [ours], "r": [other]}])
    wanted = (Service("https://a.example", recipient_keys=(ours,), routing_keys=(other,)),)
    assert services_from_json(full, ours) == wanted
    assert services_from_json(services_json(wanted, ours), ours) == wanted
    assert services_json(wanted, ours) == '[{"e":"https://a.example","r":["z6Mk-routing"]}]'
    # Another key than the connection's own is kept.
    theirs = (Service("https://a.example", recipient_keys=(other,), routing_keys=()),)
    assert services_from_json(services_json(theirs, ours), ours) == theirs


async def test_failed_pushes_stay_queued_are_retried_and_can_be_picked_up(
    dc_app: AppNode, med: str, endpoint: Endpoint, push_redis: RedisClient
) -> None:
    wallet = await _wallet_with_endpoint(dc_app, med, endpoint)
    endpoint.status = 503  # the agent is down for a while
    await wallet.mediate_request()  # over the return route: answers come back directly
    key = await wallet.register_key()
    await Sender(med).send_to(key, {"n": "first"}, dc_app.base, client=wallet.web)
    await until(lambda: endpoint.refused >= 2, timeout=10)  # retried with backoff
    # Meanwhile it is still available for pickup, once.
    status = await wallet.status()
    assert status["message_count"] == 1
    endpoint.status = 200
    await until(lambda: len(endpoint.received) == 1, timeout=10)
    assert opened(wallet, endpoint.received[0])["n"] == "first"
    await until(lambda: push_idle(push_redis, wallet.verkey))  # no second copy comes
    assert len(endpoint.received) == 1
    assert (await wallet.status())["message_count"] == 0
    await wallet.close()


async def test_a_message_picked_up_while_the_endpoint_is_down_is_not_pushed_later(
    dc_app: AppNode, med: str, endpoint: Endpoint, push_redis: RedisClient
) -> None:
    wallet = await _wallet_with_endpoint(dc_app, med, endpoint)
    endpoint.status = 500
    await wallet.mediate_request()
    key = await wallet.register_key()
    await Sender(med).send_to(key, {"n": 1}, dc_app.base, client=wallet.web)
    await until(lambda: endpoint.refused >= 1, timeout=10)
    # Picked up between two retries (while a retry posts it, it is handed out to that push).
    ids: list[str] = []

    async def picked_up() -> bool:
        delivery = await wallet.delivery_request(10)
        ids.extend(a["@id"] for a in delivery.get("~attach", []))
        return bool(ids)

    await until(picked_up, timeout=10)
    assert len(ids) == 1
    await wallet.messages_received(ids)
    endpoint.status = 200
    await until(lambda: push_idle(push_redis, wallet.verkey))  # retries find nothing left
    assert endpoint.received == []
    await wallet.close()


async def test_unreachable_endpoint_does_not_hold_up_the_sender(dc_app: AppNode, med: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}/"  # nothing listens here
    wallet = Peer(dc_app, med)
    request = wallet.message(
        "didexchange/1.1/request", label="gone", did=numalgo2_did(wallet.keys, [dead])
    )
    response = await wallet.request_message(request)  # return route still answers at once
    assert response["@type"].endswith("/response")
    await wallet.mediate_request()
    key = await wallet.register_key()
    async with dc_app.client() as client:
        started = asyncio.get_running_loop().time()
        data = Sender(med).wrap(key, {"n": 1})
        answer = await client.post(
            "/",
            content=data,
            headers={"content-type": "application/didcomm-envelope-enc"},
        )
        assert answer.status_code == 202
        assert asyncio.get_running_loop().time() - started < 2
    # Hidden only while a push is being tried; released at once when it fails. Retries go
    # on meanwhile (each hides it for a moment), so a pickup may find it hidden once.
    picked: list[Any] = []

    async def picked_up() -> bool:
        delivery = await wallet.delivery_request(10)
        picked.extend(opened(wallet, b)["n"] for b in _bodies(delivery))
        return bool(picked)

    await until(picked_up, timeout=5)
    assert picked == [1]
    await wallet.close()


def _bodies(delivery: dict[str, Any]) -> list[bytes]:
    from mediator.client import delivered

    return [body for _, body in delivered(delivery)]


def _node_without_worker(dc_node: Node) -> Node:
    """A node that leaves upkeep to others (dc_node's worker), with a push guard of 4 s
    (delivery deadline plus push timeout): how long a push of its may go unheard of before
    a worker takes it over."""
    return Node(
        dc_node.env["MEDIATOR_REDIS_URL"],
        **ALLOW_LOOPBACK,
        MEDIATOR_IN_PROCESS_WORKER="false",
        MEDIATOR_PUSH_RETRY_MIN_SECONDS="0.5",
        MEDIATOR_PUSH_RETRY_MAX_SECONDS="1",
        MEDIATOR_DELIVERY_TIMEOUT_SECONDS="2",
        MEDIATOR_PUSH_TIMEOUT_SECONDS="2",
    )


async def test_a_push_another_node_began_is_retried_by_a_worker_after_it_dies(
    dc_node: Node, med: str, endpoint: Endpoint
) -> None:
    """Node X fails to push and dies; the worker of another node retries. X dies once the
    endpoint refused its post: usually after X scheduled its retry, on a loaded machine
    sometimes before (the message still handed out, the next test's case)."""
    x = _node_without_worker(dc_node)
    await asyncio.to_thread(x.start)
    try:
        wallet = await _wallet_with_endpoint(x.base, med, endpoint)
        endpoint.status = 503
        await wallet.mediate_request()
        key = await wallet.register_key()
        await Sender(med).send_to(key, {"n": "survivor"}, x.base)
        await until(lambda: endpoint.refused >= 1, timeout=10)
        x.kill()  # SIGKILL: its retry, or its push's guard, is all that is left of it
        endpoint.status = 200
        await until(lambda: len(endpoint.received) == 1, timeout=15)
        assert opened(wallet, endpoint.received[0])["n"] == "survivor"
        await wallet.close()
    finally:
        x.stop()


async def test_a_node_that_dies_mid_post_leaves_its_push_to_a_worker(
    dc_node: Node, med: str, endpoint: Endpoint
) -> None:
    """Node X dies while the endpoint is still answering its post: nothing was scheduled
    but the push's guard, and the message is handed out. After the guard, the worker of
    another node pushes it again (at least once: the first post was never answered), and
    the queue is left empty."""
    x = _node_without_worker(dc_node)
    await asyncio.to_thread(x.start)
    try:
        wallet = await _wallet_with_endpoint(x.base, med, endpoint)
        await wallet.mediate_request()
        key = await wallet.register_key()
        held = endpoint.hold = asyncio.Event()  # the post arrives; its answer does not
        await Sender(med).send_to(key, {"n": "in flight"}, x.base)
        await until(lambda: len(endpoint.received) == 1, timeout=10)
        x.kill()
        endpoint.hold = None
        held.set()
        await until(lambda: len(endpoint.received) == 2, timeout=15)
        assert [opened(wallet, b)["n"] for b in endpoint.received] == ["in flight"] * 2
        # The wallet, asking the node that is left: nothing is queued any more.
        here = Peer(dc_node.base, med)
        here.keys, here.mediator = wallet.keys, wallet.mediator

        async def emptied() -> bool:  # once the endpoint's answer reached the worker
            return (await here.status())["message_count"] == 0

        await until(emptied)
        await here.close()
        await wallet.close()
    finally:
        x.stop()


async def test_forwards_through_two_nodes_are_pushed_in_queue_order(
    dc_app: AppNode, med: str, endpoint: Endpoint, push_redis: RedisClient
) -> None:
    """Forwards for one pushed connection arrive alternately at two nodes while a slow
    endpoint takes each post: one pusher at a time, so the endpoint gets them in order."""
    other = await AppNode(dc_app.redis_url, "push-other", **ALLOW_LOOPBACK_SETTINGS).start()
    other_http = other.client()
    try:
        wallet = await _wallet_with_endpoint(dc_app, med, endpoint)
        await wallet.mediate_request()
        key = await wallet.register_key()
        endpoint.delay = 0.03
        sender = Sender(med)
        count = 40
        for n in range(count):  # each 202 comes before the next send: the queue's order
            node, http = ((dc_app, wallet.web), (other, other_http))[n % 2]
            await sender.send_to(key, {"n": n}, node.base, client=http)
        await until(lambda: len(endpoint.received) >= count, timeout=20)
        await until(lambda: push_idle(push_redis, wallet.verkey))  # nothing more comes
        assert [opened(wallet, b)["n"] for b in endpoint.received] == list(range(count))
        assert (await wallet.status())["message_count"] == 0
        await wallet.close()
    finally:
        await other_http.aclose()
        await other.stop()


async def test_a_forward_seen_just_as_a_push_ends_is_pushed(
    engine: Engine, redis_client: RedisClient, endpoint: Endpoint
) -> None:
    """A forward queued at the very moment a push of its connection ends (the push has
    found the queue empty and let its lease go) is pushed all the same: it is not left
    queued until some later forward. ACA-Py in CI once waited a minute for its fifth
    message this way."""
    settings = Settings.of(outbound_allow="127.0.0.0/8")
    limits = settings.limits
    mailbox = Mailbox(
        engine, settings.queue, forwards_per_second=limits.forwards_per_second, routed=False
    )
    store = MediationStore(redis_client, RouteCache(1.0))
    pusher = Pusher(redis_client, store, mailbox, settings.push, settings.outbound)
    connection = uuid.uuid4().hex
    services = (Service(endpoint.url, recipient_keys=("k",), routing_keys=()),)
    try:
        await mailbox.open(connection)
        await mailbox.enqueue(connection, b"first", "k")
        pusher.start(connection, services)
        push = pusher._running[connection]
        while not push.done():  # noqa: ASYNC110 (the turn it ends in is the point)
            await asyncio.sleep(0)
        # The push task has just returned; its done callbacks have not run yet. A forward's
        # node asks for a push now, and its message is in the queue a moment later.
        pusher.start(connection, services, delay=0.2)
        await mailbox.enqueue(connection, b"second", "k")
        await until(lambda: len(endpoint.received) == 2)
        assert endpoint.received == [b"first", b"second"]
        assert (await mailbox.status(connection)).waiting == 0
    finally:
        await pusher.aclose()
