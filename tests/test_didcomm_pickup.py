"""Mediation, forward and Pickup 2.0 end to end against the app in process (conftest's dc_app,
and app_b as a second node on the same Redis), over HTTP and WebSocket."""

from __future__ import annotations

import asyncio

import pytest

from mediator.engine import Engine
from mediator.mediation.mailbox import queue_of
from mediator.mediation.store import RouteCache
from tests.didcomm_peer import Peer, attachments, forward, message
from tests.eventually import eventually, until_redis_ms
from tests.inprocess import AppNode

pytestmark = pytest.mark.topology  # run again on Sentinel and Redis Cluster


async def test_grant_carries_endpoint_and_routing_key(
    peer: Peer, dc_app: AppNode, med: str
) -> None:
    grant = await peer.send(message("coordinate-mediation/1.0/mediate-request"))
    assert grant is not None
    assert grant["@type"] == "https://didcomm.org/coordinate-mediation/1.0/mediate-grant"
    assert grant["endpoint"] == dc_app.base
    assert grant["routing_keys"][0].startswith("did:key:z6Mk")


async def test_keylist_update_and_query_with_paging(peer: Peer) -> None:
    first = await peer.mediate()
    keys = [first, *[await peer.register_key() for _ in range(4)]]
    again = await peer.send(
        message(
            "coordinate-mediation/1.0/keylist-update",
            updates=[
                {"recipient_key": keys[0], "action": "add"},  # raw base58 form, already there
                {"recipient_key": "not-a-key", "action": "add"},
                {"recipient_key": keys[1], "action": "remove"},
            ],
        )
    )
    assert again is not None
    assert [u["result"] for u in again["updated"]] == ["no_change", "client_error", "success"]
    page = await peer.send(
        message("coordinate-mediation/1.0/keylist-query", paginate={"limit": 2, "offset": 1})
    )
    assert page is not None
    assert page["pagination"] == {"count": 2, "offset": 1, "remaining": 1}
    everything = await peer.send(message("coordinate-mediation/1.0/keylist-query"))
    assert everything is not None
    listed = {k["recipient_key"] for k in everything["keys"]}
    expected = {peer.recipient_keys[k].did_key for k in keys if k != keys[1]}
    assert listed == expected


async def test_forward_status_delivery_and_acknowledge(
    peer: Peer, dc_app: AppNode, med: str
) -> None:
    key = await peer.mediate()
    for i in range(3):
        answer = await forward(dc_app, med, key, {"n": i})
        assert answer.status_code == 202
    status = await peer.status()
    assert status["@type"].endswith("messagepickup/2.0/status")
    assert status["message_count"] == 3
    assert status["total_bytes"] > 0 and status["live_delivery"] is False
    assert "oldest_received_time" in status and "newest_received_time" in status
    delivery = await peer.deliver(limit=2)
    assert delivery["@type"].endswith("/delivery")
    assert delivery["~thread"]["thid"] != delivery["@id"]
    # RFC 0092's count of what still waits, and RFC 0008's orders (counted in the
    # receive's own round trip).
    assert delivery["~transport"]["queued_message_count"] == 1
    assert delivery["~thread"]["sender_order"] == 0
    assert delivery["~thread"]["received_orders"] == {peer.verkey: 0}
    got = attachments(delivery)
    assert [peer.open(body)["n"] for _, body in got] == [0, 1]
    # Not acknowledged: not handed out again while the deadline runs.
    rest = await peer.deliver(limit=10)
    assert [peer.open(body)["n"] for _, body in attachments(rest)] == [2]
    assert rest["~transport"]["queued_message_count"] == 0
    after = await peer.ack([i for i, _ in got] + [i for i, _ in attachments(rest)])
    assert after is not None and after["message_count"] == 0 and after["total_bytes"] == 0
    empty = await peer.deliver()
    assert empty["@type"].endswith("/status") and empty["message_count"] == 0
    assert empty["~transport"]["queued_message_count"] == 0
    assert empty["~thread"]["thid"] != empty["@id"]


async def test_unknown_recipient_is_refused_clearly(dc_app: AppNode, med: str) -> None:
    from mediator.didcomm.keys import KeyPair

    started = asyncio.get_running_loop().time()
    answer = await forward(dc_app, med, KeyPair.generate().verkey_b58, {"x": 1})
    assert answer.status_code == 404
    assert answer.json()["code"] == "unknown-recipient"
    # Refused only once the wait for a late keylist update is over (1 s by default).
    assert asyncio.get_running_loop().time() - started >= 0.9


async def test_a_forward_arriving_just_before_its_keylist_update_is_kept(
    peer: Peer, dc_app: AppNode, med: str
) -> None:
    """Agents hand out invitations before their keylist update reaches us (ACA-Py): a
    sender's forward that comes first waits for the key instead of being refused."""
    await peer.mediate()
    key = peer.add_key()  # the invitation's key, not registered yet
    early = asyncio.create_task(forward(dc_app, med, key, {"early": True}))
    # A refusal would come at once (a few ms in process): still open after 0.1 s, it waits.
    done, _ = await asyncio.wait({early}, timeout=0.1)
    assert not done
    await peer.keylist_update(add=[peer.recipient_keys[key].did_key])
    assert (await early).status_code == 202
    delivery = await peer.deliver()
    assert [peer.open(body) for _, body in attachments(delivery)] == [{"early": True}]


def engine_of(node: AppNode) -> Engine:
    """The node's own engine (it knows the DIDComm namespace's defaults)."""
    engine: Engine = node.app.state.engine
    return engine


async def offered_again(node: AppNode, peer: Peer) -> list[tuple[str, bytes]]:
    """Once the delivery deadline of what `peer` holds has passed (read from its queue, on
    the server's clock): what its next delivery-request hands out."""
    engine = engine_of(node)
    held = await engine.peek(queue_of(peer.verkey), 100)
    assert held, "nothing is handed out"
    await until_redis_ms(engine.redis, max(m.visible_at_ms for m in held))
    again = await eventually(peer.deliver, lambda r: bool(attachments(r)), within=5)
    return attachments(again)


async def test_unacknowledged_delivery_is_offered_again_after_deadline(
    dc_app: AppNode, med: str
) -> None:
    async with Peer(dc_app, med) as peer:
        key = await peer.mediate()
        await forward(dc_app, med, key, {"once": True})
        first = attachments(await peer.deliver())
        assert (await peer.deliver())["@type"].endswith("/status")
        second = await offered_again(dc_app, peer)  # the node's delivery deadline is 2 s
        assert [i for i, _ in second] == [i for i, _ in first]


async def test_closing_the_socket_offers_deliveries_again_at_once(
    dc_app: AppNode, med: str
) -> None:
    async with Peer(dc_app, med, "ws") as peer:
        key = await peer.mediate()
        await forward(dc_app, med, key, {"m": 1})
        delivered = attachments(await peer.deliver())
        engine, queue = engine_of(dc_app), queue_of(peer.verkey)
        [held] = await engine.peek(queue, 1)
        await peer.disconnect()
        # Released by the node when the socket closed: visible again before its deadline.
        released = await eventually(
            lambda: engine.peek(queue, 1),
            lambda ms: ms[0].visible_at_ms < held.visible_at_ms,
            within=1,  # well before the 2 s deadline, after which upkeep may move it too
            interval=0.02,
        )
        assert released[0].visible_at_ms < held.visible_at_ms
        await peer.connect()
        again = attachments(await peer.deliver())
        assert [i for i, _ in again] == [i for i, _ in delivered]


async def test_nobody_reads_or_deletes_another_recipients_messages(
    dc_app: AppNode, med: str
) -> None:
    async with Peer(dc_app, med) as alice, Peer(dc_app, med) as mallory:
        key = await alice.mediate()
        await mallory.mediate()
        await forward(dc_app, med, key, {"secret": 1})
        ids = [i for i, _ in attachments(await alice.deliver())]
        # Mallory can neither see, nor delete, nor claim Alice's key or messages.
        assert (await mallory.status())["message_count"] == 0
        await mallory.ack(ids)
        report = await mallory.status(recipient_key=key)
        assert report["@type"].endswith("/problem-report")
        taken = await mallory.send(
            message(
                "coordinate-mediation/1.0/keylist-update",
                updates=[{"recipient_key": key, "action": "add"}],
            )
        )
        assert taken is not None and taken["updated"][0]["result"] == "client_error"
        again = await offered_again(dc_app, alice)
        assert [i for i, _ in again] == ids


async def test_recipient_key_filters_status_and_delivery(
    peer: Peer, dc_app: AppNode, med: str
) -> None:
    one = await peer.mediate()
    two = await peer.register_key()
    await forward(dc_app, med, one, {"to": "one"})
    await forward(dc_app, med, two, {"to": "two"})
    await forward(dc_app, med, one, {"to": "one"})
    status = await peer.status(recipient_key=two)
    assert status["message_count"] == 1 and status["recipient_key"] == two
    delivery = await peer.deliver(recipient_key=two)
    assert delivery["recipient_key"] == two
    assert [peer.open(b)["to"] for _, b in attachments(delivery)] == ["two"]
    rest = await peer.deliver()
    assert [peer.open(b)["to"] for _, b in attachments(rest)] == ["one", "one"]


async def test_message_for_two_recipients_is_queued_for_each(dc_app: AppNode, med: str) -> None:
    async with Peer(dc_app, med) as a, Peer(dc_app, med) as b:
        key_a, key_b = await a.mediate(), await b.mediate()
        answer = await forward(dc_app, med, key_a, {"both": True}, extra_kids=(key_b,))
        assert answer.status_code == 202
        got_a = attachments(await a.deliver())
        await a.ack([i for i, _ in got_a])
        got_b = attachments(await b.deliver())
        assert len(got_a) == 1 and len(got_b) == 1
        assert b.open(got_b[0][1]) == {"both": True}


async def test_live_mode_delivers_new_messages_only_and_waits_for_ack(
    dc_app: AppNode, med: str
) -> None:
    async with Peer(dc_app, med, "ws") as peer:
        key = await peer.mediate()
        await forward(dc_app, med, key, {"backlog": True})
        await asyncio.sleep(0.005)  # stored in the same millisecond, it would count as new
        status = await peer.send(
            message("messagepickup/2.0/live-delivery-change", live_delivery=True)
        )
        assert status is not None and status["live_delivery"] is True
        assert status["message_count"] == 1
        await forward(dc_app, med, key, {"live": 1})
        live = await peer.next_message()
        assert live["@type"] == "https://didcomm.org/messagepickup/2.0/delivery"
        assert [peer.open(b) for _, b in attachments(live)] == [{"live": 1}]
        assert await peer.no_frame(0.5)  # the backlog is not pushed
        backlog = attachments(await peer.deliver())
        assert [peer.open(b) for _, b in backlog] == [{"backlog": True}]
        await peer.ack([i for i, _ in attachments(live)] + [i for i, _ in backlog])
        final = await peer.status()
        assert final["message_count"] == 0 and final["live_delivery"] is True


async def test_live_mode_over_http_gets_the_specs_problem_report(dc_app: AppNode, med: str) -> None:
    async with Peer(dc_app, med) as peer:
        await peer.mediate()
        change = message("messagepickup/2.0/live-delivery-change", live_delivery=True)
        report = await peer.send(change)
        assert report is not None
        assert report["@type"] == "https://didcomm.org/notification/1.0/problem-report"
        assert report["~thread"] == {"pthid": change["@id"]}
        assert report["description"]["en"] == "Connection does not support Live Delivery"


async def test_live_delivery_is_offered_again_when_not_acknowledged(
    dc_app: AppNode, med: str
) -> None:
    async with Peer(dc_app, med, "ws") as peer:
        key = await peer.mediate()
        await peer.send(message("messagepickup/2.0/live-delivery-change", live_delivery=True))
        await forward(dc_app, med, key, {"needs": "ack"})
        first = attachments(await peer.next_message())
        again = attachments(await peer.next_message(wait=5))  # the deadline is 2 s
        assert [i for i, _ in again] == [i for i, _ in first]
        await peer.ack([i for i, _ in again])
        assert await peer.no_frame(2.5)


async def test_live_delivery_wakes_across_nodes(dc_app: AppNode, app_b: AppNode, med: str) -> None:
    async with Peer(dc_app, med, "ws") as peer:
        key = await peer.mediate()
        await peer.send(message("messagepickup/2.0/live-delivery-change", live_delivery=True))
        answer = await forward(app_b, med, key, {"via": "b"})
        assert answer.status_code == 202
        live = await peer.next_message()
        assert [peer.open(b) for _, b in attachments(live)] == [{"via": "b"}]


async def test_replies_without_a_return_route_are_queued_for_the_connection(
    dc_app: AppNode, med: str
) -> None:
    async with Peer(dc_app, med) as peer:
        await peer.mediate()
        query = message("coordinate-mediation/1.0/keylist-query", route=None)
        assert await peer.send(query) is None  # HTTP 202: nothing comes back
        status = await peer.status()
        assert status["message_count"] == 1
        queued = attachments(await peer.deliver())
        reply = peer.open(queued[0][1])
        assert reply["@type"].endswith("/keylist") and reply["~thread"]["thid"] == query["@id"]


async def test_a_removed_key_stops_routing_on_every_node_at_once(
    dc_app: AppNode, app_b: AppNode, med: str
) -> None:
    async with Peer(dc_app, med) as peer:
        key = await peer.mediate()
        for node in (dc_app, app_b):  # both nodes now know the route
            assert (await forward(node, med, key, {"before": True})).status_code == 202
        removed = await peer.keylist_update(remove=[key])
        assert removed["updated"][0]["result"] == "success"
        # The removal's pub/sub message reaches node b: it forgets the route it cached.
        routes_b: RouteCache = app_b.app.state.didcomm.services.store.routes

        async def cached() -> str | None:
            return routes_b.get(key)

        assert await eventually(cached, lambda owner: owner is None, within=5) is None
        for node in (dc_app, app_b):
            answer = await forward(node, med, key, {"after": True})
            assert answer.status_code == 404, node.base
        assert (await peer.status())["message_count"] == 2


async def test_a_message_arriving_between_the_pickup_round_and_live_mode_is_delivered_live(
    dc_app: AppNode, med: str
) -> None:
    """Credo's order: status (count 0), then live-delivery-change. What arrives in between
    would otherwise wait for a delivery-request that a live wallet never sends."""
    async with Peer(dc_app, med, "ws") as peer:
        key = await peer.mediate()
        assert (await peer.status())["message_count"] == 0  # the pickup round ends here
        await forward(dc_app, med, key, {"between": True})
        status = await peer.send(
            message("messagepickup/2.0/live-delivery-change", live_delivery=True)
        )
        assert status is not None and status["live_delivery"] is True
        live = await peer.next_message()
        assert [peer.open(b) for _, b in attachments(live)] == [{"between": True}]
        await peer.ack([i for i, _ in attachments(live)])


async def test_one_envelope_forwarded_once_per_recipient_key_is_stored_once_per_connection(
    dc_app: AppNode, med: str
) -> None:
    """A sender whose service lists two of our recipients' keys forwards one envelope per
    key: each connection gets the ciphertext once, and the answers say so."""
    from mediator.client import Sender
    from mediator.client.sender import forward_envelope

    async with Peer(dc_app, med) as alice, Peer(dc_app, med) as bob:
        a, b = await alice.mediate(), await bob.mediate()
        sender = Sender(med)
        inner = sender.pack({"@id": "one", "hello": "both"}, [a, b])
        answers = []
        for to in (a, b):
            answers.append(await alice.post(forward_envelope(inner, to, med)))
        assert [r.status_code for r in answers] == [202, 202]
        seen = [
            (r.headers["x-mediator-queued"], r.headers["x-mediator-duplicates"]) for r in answers
        ]
        assert seen == [("2", "0"), ("0", "2")]
        for peer in (alice, bob):
            status = await peer.status()
            assert status["message_count"] == 1
        got_a = attachments(await alice.deliver())
        assert [alice.open(body)["hello"] for _, body in got_a] == ["both"]
        # Handed out, not acknowledged: still a duplicate.
        again = await alice.post(forward_envelope(inner, a, med))
        assert again.headers["x-mediator-duplicates"] == "2"
        await alice.ack([mid for mid, _ in got_a])
        # Acknowledged by alice: the same bytes are a new message for her, not for bob.
        after = await alice.post(forward_envelope(inner, a, med))
        assert (after.headers["x-mediator-queued"], after.headers["x-mediator-duplicates"]) == (
            "1",
            "1",
        )
        assert (await alice.status())["message_count"] == 1
        got_b = attachments(await bob.deliver())
        assert len(got_b) == 1 and bob.open(got_b[0][1])["hello"] == "both"


async def test_a_delivery_due_again_after_the_pickup_round_is_offered_live(
    dc_app: AppNode, med: str
) -> None:
    """A wallet was handed a message and went away without acknowledging it (its phone
    dropped the HTTP answer, or its node died with Redis down, so nothing released it). On
    its next socket the pickup round misses it (still handed out) and live mode begins
    after its deadline has passed: it is offered again live, not left for a
    delivery-request that a live wallet does not send."""
    async with Peer(dc_app, med) as before:
        key = await before.mediate()
        await forward(dc_app, med, key, {"unacknowledged": True})
        [(mid, _)] = attachments(await before.deliver())  # handed out until its deadline
    engine = engine_of(dc_app)
    [held] = await engine.peek(queue_of(before.verkey), 1)
    async with Peer(dc_app, med, "ws") as peer:
        peer.keys, peer.mediator = before.keys, before.mediator
        peer.recipient_keys = before.recipient_keys
        round_end = await peer.deliver()
        assert round_end["@type"].endswith("/status") and round_end["message_count"] == 0
        await until_redis_ms(engine.redis, held.visible_at_ms)
        status = await peer.send(
            message("messagepickup/2.0/live-delivery-change", live_delivery=True)
        )
        assert status is not None and status["live_delivery"] is True
        live = await peer.next_message(wait=5)
        assert [i for i, _ in attachments(live)] == [mid]
        assert [peer.open(b) for _, b in attachments(live)] == [{"unacknowledged": True}]
        await peer.ack([mid])
        assert (await peer.status())["message_count"] == 0
