"""ACA-Py 1.7, unmodified, started with `--mediator-invitation` pointing at our invitation:
it connects (DID Exchange), is granted mediation and registers its keys; then a Credo agent
connects to it through us and sends it basic messages, which we push to ACA-Py's own
endpoint (it speaks no pickup protocol). Also across two nodes sharing one Redis.

ACA-Py's endpoint is on loopback, which pushes reach only through the allowlist
(`MEDIATOR_OUTBOUND_ALLOW`): this module's nodes have it, and a database of their own (15),
so that no node without it (another module's) retries their pushes and refuses them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import base58
import httpx
import pytest
import redis

from mediator.didcomm.invitation import invitation_url
from mediator.didcomm.keys import did_key_to_verkey
from mediator.embedded import free_port
from mediator.engine import keys
from tests.eventually import eventually
from tests.interop.acapy import AcaPyAgent, acapy_install_dir
from tests.interop.credo import CredoAgent, credo_install_dir
from tests.interop.settled import Mailboxes
from tests.servers import Node, RedisUnderTest

pytestmark = pytest.mark.interop

N = 5
# Loopback endpoints allowed; at debug level, the nodes log where each reply went and each
# push's outcome (shown should a test fail).
NODE_ENV = {"MEDIATOR_OUTBOUND_ALLOW": "127.0.0.0/8", "MEDIATOR_LOG_LEVEL": "debug"}


@pytest.fixture(scope="module")
def db_url(redis_server: RedisUnderTest) -> str:
    """The push suites' database (Redis Cluster has only database 0: a cluster of its own)."""
    return redis_server.isolated_url("push")


@pytest.fixture(scope="module")
def installed() -> None:
    credo_install_dir()
    acapy_install_dir()


@pytest.fixture(scope="module")
def mediator(db_url: str, installed: None) -> Iterator[Node]:
    node = Node(db_url, **NODE_ENV)
    node.start()
    yield node
    node.stop()


@pytest.fixture(scope="module")
def two_nodes(db_url: str, installed: None) -> Iterator[tuple[Node, Node]]:
    """Two nodes on one Redis, both configured with B's public endpoint (as behind a load
    balancer); the test hands ACA-Py an invitation naming A, as if the balancer had sent its
    first request there. Its handshake is answered (and the response pushed) by A; its
    mediation, its keys and the senders' forwards go to B."""
    a, b = Node(db_url, **NODE_ENV), Node(db_url, **NODE_ENV)
    for node in (a, b):
        node.env["MEDIATOR_ENDPOINT"] = b.base
    a.start()
    b.start()
    yield a, b
    a.stop()
    b.stop()


async def _invitation_url(node: Node, endpoint: str | None = None) -> str:
    """The node's invitation, its service endpoint replaced by `endpoint` when given."""
    async with httpx.AsyncClient(base_url=node.base) as client:
        answer = (await client.get("/invitation")).json()
    if endpoint is None:
        return str(answer["invitation_url"])
    oob = answer["invitation"]
    oob["services"][0]["serviceEndpoint"] = endpoint
    return invitation_url(endpoint, oob)


@pytest.fixture
async def mailboxes(db_url: str) -> AsyncIterator[Mailboxes]:
    async with Mailboxes(db_url) as reader:
        yield reader


@pytest.fixture
async def cleanup() -> AsyncIterator[list[AcaPyAgent | CredoAgent]]:
    started: list[AcaPyAgent | CredoAgent] = []
    yield started
    await asyncio.gather(*(agent.stop() for agent in started))


async def _messages_reach_acapy(
    url: str,
    grant_endpoint: str,
    cleanup: list[AcaPyAgent | CredoAgent],
    mailboxes: Mailboxes,
    label: str,
    nodes: Sequence[Node],
) -> tuple[AcaPyAgent, list[str]]:
    acapy = AcaPyAgent(label, mediator_invitation_url=url)
    sender = CredoAgent(f"{label}-sender", inbound_port=free_port())
    cleanup += [acapy, sender]
    await asyncio.gather(acapy.start(), sender.start())
    grant = await acapy.wait_mediation_granted()
    assert grant["endpoint"].rstrip("/") == grant_endpoint
    invitation = await acapy.create_invitation()
    connection = await sender.receive_invitation(invitation)
    sent = [f"{label} message {i}" for i in range(N)]
    for text in sent:
        await sender.send(connection, text)
    await acapy.wait_for_messages(N, timeout=60)
    # Nothing left for ACA-Py, queued or being pushed: no duplicate can come any more.
    [record, *_] = await _keylist_recorded(acapy, nodes)
    await mailboxes.settle(await mailboxes.connection_of(record["recipient_key"]))
    return acapy, sent


async def _keylist_recorded(acapy: AcaPyAgent, nodes: Sequence[Node]) -> list[dict[str, Any]]:
    """The keys ACA-Py recorded as registered with its mediator: it records them once the
    keylist-update's answer reached it, which may come after the messages did."""

    async def keylists() -> list[dict[str, Any]]:
        return list((await acapy.get("/mediation/keylists"))["results"])

    records = await eventually(keylists, bool, within=60)
    assert records, f"ACA-Py recorded no keylist in 60 s\n\n{_story(acapy, *nodes)}"
    return records


def _story(acapy: AcaPyAgent, *nodes: Node) -> str:
    """What a failure needs to be understood: ACA-Py's log since it connected to us (about
    90 lines without its noise) and the end of the nodes' (each reply and push logged)."""
    parts = [f"ACA-Py:\n{acapy.log_tail(24_000)}"]
    for node in nodes:
        lines = "\n".join(line[:300] for line in node.output().splitlines())
        parts.append(f"node {node.base}:\n{lines[-12_000:]}")
    return "\n\n".join(parts)


async def test_acapy_is_granted_mediation_and_gets_its_messages_pushed(
    mediator: Node, cleanup: list[AcaPyAgent | CredoAgent], mailboxes: Mailboxes, db_url: str
) -> None:
    url = await _invitation_url(mediator)
    acapy, sent = await _messages_reach_acapy(
        url, mediator.base, cleanup, mailboxes, "acapy", [mediator]
    )
    assert sorted(acapy.basic_messages()) == sorted(sent), _story(acapy, mediator)
    # The keys ACA-Py registered are routed here, to one connection: its own.
    records = await _keylist_recorded(acapy, [mediator])
    routes = redis.Redis.from_url(db_url)
    raw = [base58.b58decode(did_key_to_verkey(r["recipient_key"])) for r in records]
    owners = {routes.hget(keys.routes_bucket(k), k) for k in raw}
    routes.close()
    assert len(owners) == 1 and None not in owners
    async with httpx.AsyncClient() as client:
        metrics = (await client.get(mediator.base + "/metrics")).text
    delivered = [
        line for line in metrics.splitlines() if line.startswith("mediator_didcomm_pushes_total")
    ]
    assert any('outcome="delivered"' in line and float(line.split()[-1]) >= N for line in delivered)


async def test_acapy_across_two_nodes(
    two_nodes: tuple[Node, Node], cleanup: list[AcaPyAgent | CredoAgent], mailboxes: Mailboxes
) -> None:
    a, b = two_nodes
    url = await _invitation_url(a, endpoint=a.base)
    acapy, sent = await _messages_reach_acapy(url, b.base, cleanup, mailboxes, "acapy2n", [a, b])
    assert sorted(acapy.basic_messages()) == sorted(sent), _story(acapy, a, b)
    async with httpx.AsyncClient() as client:
        requests_a = (await client.get(a.base + "/metrics")).text
        requests_b = (await client.get(b.base + "/metrics")).text
    assert 'type="didexchange/1/request"' in requests_a
    assert 'type="routing/1/forward"' in requests_b and 'type="routing/1/forward"' not in requests_a
