"""Real DIDComm v2 wallets, unmodified, use our mediator as they would any v2 mediator:
Veramo 7 agents get mediation (coordinate-mediation 3.0 and 2.0), register their DIDs,
send each other basic messages through us (Veramo wraps the routing 2.0 forward itself)
and pick them up with Pickup 3.0; once on one node, once through a balancer that sends
each connection to the next of two nodes."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.interop.v2peers import V2Agent
from tests.kube.service import Service
from tests.servers import Node

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def mediator(redis_url: str) -> Iterator[Node]:
    node = Node(redis_url)
    node.start()
    yield node
    node.stop()


@pytest.fixture(scope="module")
def balanced(redis_url: str) -> Iterator[str]:
    """Two nodes behind one round-robin address (tests/kube/service.py); its base URL."""
    with Service() as service:
        nodes = [Node(redis_url, MEDIATOR_ENDPOINT=service.base) for _ in range(2)]
        for node in nodes:
            node.start()
            service.add("127.0.0.1", node.port)
        yield service.base
        for node in nodes:
            node.stop()


async def v2_did(base: str) -> str:
    async with httpx.AsyncClient(base_url=base) as client:
        return str((await client.get("/v2/invitation")).json()["did"])


async def _exchange(base: str, mediation: str) -> None:
    did = await v2_did(base)
    async with V2Agent("veramo", "a") as a, V2Agent("veramo", "b") as b:
        a_did = (await a.request("start", mediator_did=did, mediation=mediation))["did"]
        b_did = (await b.request("start", mediator_did=did, mediation=mediation))["did"]
        for n in range(3):
            sent = await b.request("send", to=a_did, content=f"to a {n}")
            assert sent["delivered_to_mediator"], sent
        got = await a.request("pickup", normalise=False)
        assert got["veramo_native"], got  # Veramo's own handler read our deliveries
        assert sorted(got["contents"]) == ["to a 0", "to a 1", "to a 2"]
        await a.request("send", to=b_did, content="to b")
        back = await b.request("pickup", normalise=False)
        assert back["contents"] == ["to b"]
        after = await a.request("pickup", normalise=False)
        assert after["contents"] == []
        assert after["status"]["body"]["message_count"] == 0  # acknowledged, not just hidden


@pytest.mark.parametrize("mediation", ["3.0", "2.0"])
async def test_veramo_wallets_message_each_other_through_the_mediator(
    mediator: Node, mediation: str
) -> None:
    await _exchange(mediator.base, mediation)


async def test_veramo_wallets_through_a_balancer_over_two_nodes(balanced: str) -> None:
    await _exchange(balanced, "3.0")
