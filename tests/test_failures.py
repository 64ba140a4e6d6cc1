"""Failures, measured (short forms of tests/soak/failures.py): Redis full, a node cut off
from Redis, a slow Redis, a Redis that restarts. Each records every forward, delivery and
acknowledgement in a history that the checker reads: nothing accepted may be lost or
duplicated, and each failure must look to wallets and senders as the docs say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from tests.didcomm_peer import Peer, attachments, forward, mediator_key
from tests.netns import require_netns
from tests.servers import Node, start_binary_server
from tests.soak.failures import Outcome, run

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)


def scenario(capsys: pytest.CaptureFixture[str], *argv: str) -> Outcome:
    outcome = run(list(argv))
    print(capsys.readouterr().out)
    v = outcome.verdict
    assert not v.lost and not v.duplicated and not v.stray, outcome.summary()
    assert v.accepted > 0 and v.delivered == v.accepted, outcome.summary()
    refusal = 507 if argv[0] == "maxmemory" else 503  # storage full, or unavailable
    assert not any(s >= 500 and s != refusal for s in outcome.sent.statuses), outcome.summary()
    return outcome


def test_redis_at_maxmemory_refuses_forwards_clearly_and_recovers_after_pickups(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """noeviction at maxmemory: forwards get 507 with a JSON body (never 500), a refused
    forward is never delivered (no partial write), /readyz stays 200, and once the wallets
    pick up (deliveries and messages-received at a full Redis), forwards are accepted
    again without a restart."""
    outcome = scenario(capsys, "maxmemory", "--fill-mb", "4", "--refusals", "30")
    assert outcome.sent.statuses[507] >= 30, outcome.summary()
    body = json.loads(outcome.sent.bodies[507])
    assert body["code"] == "storage-full" and body["error"], body
    assert outcome.facts["/readyz when full"] == 200
    assert outcome.facts["seconds until accepted again"] is not None
    assert outcome.facts["accepted before refusals"] < outcome.verdict.accepted  # took more
    assert not outcome.broken, outcome.summary()


def test_a_node_cut_off_from_redis_sheds_its_wallets_and_loses_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One node in a network namespace, iptables dropping its traffic with Redis for 8 s:
    it turns unready, refuses forwards with 503, closes its sockets with 1013; its wallets
    move to the other node; nothing is lost, no socket gets deliveries after its wallet's
    next socket went live, and after the heal the node is ready and accepts again."""
    require_netns()
    outcome = scenario(capsys, "partition", "--wallets", "4", "--cut", "8", "--warm", "2")
    facts = outcome.facts
    assert facts["seconds until unready"] is not None
    assert facts["cut-off node's forwards answered during the cut"] == {503}
    assert facts["its sockets closed with"] == {1013}
    assert facts["its wallets that moved"] == facts["its wallets"] == 4
    assert facts["deliveries to a socket already replaced"] == 0
    assert facts["seconds until ready after the heal"] is not None
    assert facts["its forwards after the heal"] == {202}
    assert not outcome.broken, outcome.summary()


def test_a_slow_redis_loses_nothing_and_answers_no_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every Redis round trip 100 ms longer (a delaying proxy): live and polling wallets get
    everything, in order, and no forward is answered 5xx."""
    outcome = scenario(capsys, "slow", "--delay", "0.05", "--seconds", "10")
    assert set(outcome.sent.statuses) == {202}, outcome.summary()
    assert not outcome.verdict.reordered, outcome.summary()
    assert outcome.facts["nodes' /readyz at the end"] == [200, 200]
    assert not outcome.broken, outcome.summary()


def test_nodes_and_wallets_recover_from_a_redis_restart(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Redis SIGKILLed, then SIGTERMed, each time started again on its append-only file
    three seconds later (longer than the nodes' 2 s MEDIATOR_STORAGE_LOST_SECONDS, so their
    sockets are closed with 1013): nodes turn ready by themselves, live wallets reconnect and
    get every message accepted live (none waits for a later pickup round)."""
    outcome = scenario(capsys, "restart", "--restarts", "2", "--down", "3", "--every", "3")
    assert all(r is not None for r in outcome.facts["seconds until every node was ready again"])
    assert outcome.sent.statuses[503] > 0  # Redis was down while forwards came
    assert outcome.facts["reconnects"] > 0
    assert outcome.facts["delivered only by the last pickup round"] == {}
    assert not outcome.broken, outcome.summary()


async def test_a_wallets_first_pickup_works_at_a_full_redis(tmp_path: Path) -> None:
    """Its first pickup would write the connection's explicit-pickup flag; at a full Redis
    that write is refused, and the pickup (which is what frees room) goes on without it."""
    server = start_binary_server(tmp_path)
    node = Node(server.url).start()
    try:
        med = await mediator_key(node.base)
        async with Peer(node.base, med) as peer:
            key = await peer.mediate()
            for i in range(3):
                assert (await forward(node.base, med, key, {"n": i})).status_code == 202
            r = redis.Redis.from_url(server.url)
            r.config_set("maxmemory-policy", "noeviction")
            r.config_set("maxmemory", r.info("memory")["used_memory"] - 100_000)
            assert (await forward(node.base, med, key, {"n": 3})).status_code == 507
            delivery = await peer.deliver()
            got = attachments(delivery)
            assert sorted(peer.open(body)["n"] for _, body in got) == [0, 1, 2]
            after = await peer.ack([mid for mid, _ in got])
            assert after is not None and after["message_count"] == 0
    finally:
        node.stop()
        server.stop()
