"""Credo 0.5.19, 0.6.3 and 0.7.0, unmodified, use our mediator as they would any other: a
recipient with no inbound endpoint connects from our invitation (DID Exchange), gets
mediation and picks up with each of Credo's pickup strategies, while a second Credo agent of
the same version connects to it through us and sends it basic messages. Also across two
nodes: the recipient's socket on one, the sender's forwards landing on the other; and, for
0.6+, whatever did:peer method the recipient's request uses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from mediator.embedded import free_port
from tests.interop.credo import VERSIONS, CredoAgent, credo_install_dir
from tests.interop.settled import Mailboxes, invitation_key
from tests.kube.service import Service
from tests.servers import Node

pytestmark = pytest.mark.interop

N = 5
STRATEGIES = ["PickUpV1", "PickUpV2", "PickUpV2LiveMode", "Implicit"]
NEXT = [v for v in VERSIONS if not v.startswith("0.5.")]  # 0.6+: a choice of did:peer method


@pytest.fixture(scope="module")
def credo() -> None:
    for version in VERSIONS:
        credo_install_dir(version)  # once, before any agent starts (cached between runs)


@pytest.fixture(scope="module")
def mediator(redis_url: str, credo: None) -> Iterator[Node]:
    """A node with production defaults (30 s delivery deadline)."""
    node = Node(redis_url)
    node.start()
    yield node
    node.stop()


async def invitation_url(node: Node) -> str:
    async with httpx.AsyncClient(base_url=node.base) as client:
        answer = (await client.get("/invitation")).json()
    return str(answer["invitation_url"])


@pytest.fixture
async def agents() -> AsyncIterator[list[CredoAgent]]:
    started: list[CredoAgent] = []
    yield started
    await asyncio.gather(*(a.stop() for a in started))


@pytest.fixture
async def mailboxes(redis_url: str) -> AsyncIterator[Mailboxes]:
    async with Mailboxes(redis_url) as reader:
        yield reader


async def _exchange_messages(
    mailboxes: Mailboxes,
    url: str,
    strategy: str,
    agents: list[CredoAgent],
    label: str,
    version: str,
    peer_num_algo: int | None = None,
) -> tuple[CredoAgent, list[str]]:
    recipient = CredoAgent(
        f"{label}-recipient",
        version=version,
        mediator_invitation_url=url,
        pickup=strategy,
        peer_num_algo=peer_num_algo,
    )
    sender = CredoAgent(f"{label}-sender", version=version, inbound_port=free_port())
    agents += [recipient, sender]
    ready, _ = await asyncio.gather(recipient.start(), sender.start())
    assert ready["mediation"] == "granted", recipient.log_tail()
    invitation = await recipient.create_invitation()
    connection = await sender.receive_invitation(invitation)
    sent = [f"{label} message {i}" for i in range(N)]
    for text in sent:
        await sender.send(connection, text)
    await recipient.wait_for_messages(N, timeout=60)
    # Nothing left for the recipient, handed out or not: no duplicate can come any more.
    await mailboxes.settle(await mailboxes.connection_of(invitation_key(invitation)))
    return recipient, sent


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_credo_recipient_gets_every_message(
    mediator: Node, agents: list[CredoAgent], mailboxes: Mailboxes, strategy: str, version: str
) -> None:
    url = await invitation_url(mediator)
    recipient, sent = await _exchange_messages(mailboxes, url, strategy, agents, strategy, version)
    got = [m["content"] for m in recipient.messages]
    assert sorted(got) == sorted(sent), recipient.log_tail()
    assert len(got) == N  # none twice
    grant = await recipient.mediation()
    assert grant["state"] == "granted" and grant["endpoint"] == mediator.base


@pytest.mark.parametrize("version", VERSIONS)
async def test_credo_without_a_strategy_discovers_pickup_2_0(
    mediator: Node, agents: list[CredoAgent], mailboxes: Mailboxes, version: str
) -> None:
    url = await invitation_url(mediator)
    recipient, sent = await _exchange_messages(mailboxes, url, "auto", agents, "auto", version)
    assert sorted(m["content"] for m in recipient.messages) == sorted(sent)
    # It asked Discover Features and chose Pickup 2.0 from our answer.
    assert (await recipient.mediation())["pickup"] == "PickUpV2"


@pytest.mark.parametrize("version", VERSIONS)
async def test_credo_connects_with_the_legacy_connections_invitation(
    mediator: Node, agents: list[CredoAgent], mailboxes: Mailboxes, version: str
) -> None:
    async with httpx.AsyncClient(base_url=mediator.base) as client:
        legacy = (await client.get("/invitation")).json()["legacy_invitation_url"]
    recipient, sent = await _exchange_messages(
        mailboxes, legacy, "Implicit", agents, "legacy", version
    )
    assert sorted(m["content"] for m in recipient.messages) == sorted(sent)
    assert len(recipient.messages) == N


@pytest.mark.parametrize("version", NEXT)
@pytest.mark.parametrize("num_algo", [1, 2])
async def test_credo_implicit_pickup_whatever_did_peer_method_it_requests_with(
    mediator: Node, agents: list[CredoAgent], mailboxes: Mailboxes, version: str, num_algo: int
) -> None:
    """Implicit pickup needs Credo to find our WebSocket in our DID Exchange answer, which it
    does only in a whole document: we answer a did:peer:1 or 2 request (4 is its default,
    covered above) with a did:peer:1 or a long did:peer:4, never a did:peer:2."""
    url = await invitation_url(mediator)
    recipient, sent = await _exchange_messages(
        mailboxes, url, "Implicit", agents, f"algo{num_algo}", version, peer_num_algo=num_algo
    )
    assert sorted(m["content"] for m in recipient.messages) == sorted(sent)
    assert len(recipient.messages) == N


@pytest.fixture(scope="module")
def two_nodes(redis_url: str, credo: None) -> Iterator[tuple[Node, Node]]:
    """Two nodes on one Redis, configured alike as behind a load balancer that sends
    WebSockets to one and HTTP to the other: both name B's HTTP endpoint and A's WebSocket
    endpoint, so a live recipient's socket is on A while senders' forwards land on B."""
    a, b = Node(redis_url), Node(redis_url)
    for node in (a, b):
        node.env["MEDIATOR_ENDPOINT"] = b.base
        node.env["MEDIATOR_WS_ENDPOINT"] = "ws" + a.base[4:]
    a.start()
    b.start()
    yield a, b
    a.stop()
    b.stop()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("strategy", ["PickUpV2LiveMode", "Implicit"])
async def test_two_nodes_socket_on_one_forwards_on_the_other(
    two_nodes: tuple[Node, Node],
    agents: list[CredoAgent],
    mailboxes: Mailboxes,
    strategy: str,
    version: str,
) -> None:
    a, b = two_nodes
    url = await invitation_url(a)
    recipient, sent = await _exchange_messages(
        mailboxes, url, strategy, agents, f"2n-{strategy}", version
    )
    assert sorted(m["content"] for m in recipient.messages) == sorted(sent)
    # The forwards were answered by B and the live socket was A's.
    async with httpx.AsyncClient() as client:
        metrics_a = (await client.get(a.base + "/metrics")).text
        metrics_b = (await client.get(b.base + "/metrics")).text
    assert _count(metrics_b, 'type="routing/1/forward"') >= N
    assert _count(metrics_a, 'type="routing/1/forward"') == 0
    assert _count(metrics_a, "mediator_websockets ") >= 1


def _count(metrics: str, needle: str) -> float:
    total = 0.0
    for line in metrics.splitlines():
        if needle in line and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.fixture(scope="module")
def balanced(redis_url: str, credo: None) -> Iterator[tuple[Node, Node]]:
    """Two nodes behind one address that sends each new TCP connection to the next node
    (tests/kube/service.py, as a Kubernetes Service does): the wallet's requests, its socket
    and the sender's forwards land on either node, whatever the pickup strategy."""
    with Service() as service:
        nodes = (Node(redis_url, MEDIATOR_ENDPOINT=service.base), Node(redis_url))
        nodes[1].env["MEDIATOR_ENDPOINT"] = service.base
        for node in nodes:
            node.start()
            service.add("127.0.0.1", node.port)
        yield nodes
        for node in nodes:
            node.stop()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("strategy", [*STRATEGIES, "auto"])
async def test_every_strategy_through_a_balancer_over_two_nodes(
    balanced: tuple[Node, Node],
    agents: list[CredoAgent],
    mailboxes: Mailboxes,
    strategy: str,
    version: str,
) -> None:
    url = await invitation_url(balanced[0])  # names the balancer's address
    recipient, sent = await _exchange_messages(
        mailboxes, url, strategy, agents, f"lb-{strategy}", version
    )
    assert sorted(m["content"] for m in recipient.messages) == sorted(sent)
    assert len(recipient.messages) == N
    async with httpx.AsyncClient() as client:
        scrapes = [(await client.get(node.base + "/metrics")).text for node in balanced]
    answered = [_count(text, "mediator_didcomm_messages_total") for text in scrapes]
    assert all(answered), f"DIDComm messages answered per node: {answered}"
