from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from mediator.engine import Engine, keys
from mediator.storage.clients import Backend, RedisClient
from tests.didcomm_peer import Peer, mediator_key
from tests.inprocess import QUICK_WORKER, AppNode
from tests.servers import DIDCOMM_SUITES, DIDCOMM_SUITES_ENV, Node, RedisUnderTest

# The local push providers (FCM, APNs, a webhook) as fixtures for every test module; the
# tiers (tests/tiers.py).
pytest_plugins = ["tests.providers.fixtures", "tests.tiers"]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisUnderTest]:
    server = RedisUnderTest()
    server.start()
    server.flushall()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server: RedisUnderTest) -> str:
    return redis_server.url


@pytest.fixture
async def backend(redis_url: str) -> AsyncIterator[Backend]:
    """The session's Redis as a node reaches it, whatever the deployment mode."""
    backend = Backend(redis_url)
    await backend.start()
    yield backend
    await backend.aclose()


@pytest.fixture
async def redis_client(backend: Backend) -> RedisClient:
    return backend.client


@pytest.fixture(scope="module")
async def module_redis(redis_url: str) -> AsyncIterator[RedisClient]:
    """The session's Redis, as a client for a module's fixtures and tests."""
    backend = Backend(redis_url)
    await backend.start()
    yield backend.client
    await backend.aclose()


@pytest.fixture
async def engine(redis_client: RedisClient) -> Engine:
    """An engine with a node channel of its own, as a node's (a WakeHub listens there)."""
    return Engine(redis_client, wake_channel=keys.node_channel(uuid.uuid4().hex[:8]))


@pytest.fixture
def qname() -> str:
    """A queue name no other test uses."""
    return "t-" + uuid.uuid4().hex[:12]


@pytest.fixture(scope="session")
def node_a(redis_url: str) -> Iterator[Node]:
    """A node that also runs the upkeep worker."""
    node = Node(redis_url, MEDIATOR_WORKER_TICK_SECONDS="0.2", MEDIATOR_STATS_SECONDS="1")
    node.start()
    yield node
    node.stop()


@pytest.fixture(scope="session")
def node_b(redis_url: str) -> Iterator[Node]:
    """A second node on the same Redis, without a worker."""
    node = Node(redis_url, MEDIATOR_IN_PROCESS_WORKER="false")
    node.start()
    yield node
    node.stop()


@pytest.fixture(scope="session")
def dc_node(redis_url: str) -> Iterator[Node]:
    """dc_app as a `mediator serve` process, for what needs a real server (uvicorn's own
    behaviour, the CLI reaching it over the network): the full tier."""
    node = Node(redis_url, **DIDCOMM_SUITES_ENV)
    node.start()
    yield node
    node.stop()


@pytest.fixture(scope="session")
async def dc_app(redis_url: str) -> AsyncIterator[AppNode]:
    """The node of the DIDComm suites, in this process (tests/inprocess.py): short delivery
    deadline and implicit-pickup grace, so re-offers and drains happen within a test;
    plaintext allowed for the plaintext tests."""
    node = await AppNode(redis_url, "dc", **DIDCOMM_SUITES).start()
    yield node
    await node.stop()


@pytest.fixture(scope="session")
async def med(dc_app: AppNode) -> str:
    """The verkey of the DIDComm suites' mediator."""
    return await mediator_key(dc_app)


@pytest.fixture(params=["http", "ws"])
async def peer(request: pytest.FixtureRequest, dc_app: AppNode, med: str) -> AsyncIterator[Peer]:
    """A recipient of dc_app, once over HTTP and once over a WebSocket."""
    async with Peer(dc_app, med, request.param) as p:
        yield p


@pytest.fixture(scope="session")
async def app_a(redis_url: str) -> AsyncIterator[AppNode]:
    """node_a's twin in this process (tests/inprocess.py): the app with its upkeep worker."""
    node = await AppNode(redis_url, "app-a", **QUICK_WORKER).start()
    yield node
    await node.stop()


@pytest.fixture(scope="session")
async def app_b(redis_url: str) -> AsyncIterator[AppNode]:
    """node_b's twin: a second node in this process on the same Redis, without a worker."""
    node = await AppNode(redis_url, "app-b", in_process_worker=False).start()
    yield node
    await node.stop()


@pytest.fixture
async def http_a(app_a: AppNode) -> AsyncIterator[httpx.AsyncClient]:
    async with app_a.client() as client:
        yield client


@pytest.fixture
async def http_b(app_b: AppNode) -> AsyncIterator[httpx.AsyncClient]:
    async with app_b.client() as client:
        yield client
