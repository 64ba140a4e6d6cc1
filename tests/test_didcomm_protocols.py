"""Pickup 1.0, implicit pickup, Queue Management 1.0, limits, threading, bad input, and the
invitation, end to end against the app in process (conftest's dc_app); what needs a real
server (the CLI reaching it, uvicorn's WebSocket compression) against dc_node."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import httpx
import pytest

from mediator.didcomm import envelope
from tests.didcomm_peer import ENVELOPE, Peer, forward, mediator_key, message
from tests.eventually import eventually
from tests.inprocess import AppNode
from tests.servers import Node


async def test_pickup_v1_batch_removes_what_it_carried(
    peer: Peer, dc_app: AppNode, med: str
) -> None:
    key = await peer.mediate()
    for i in range(3):
        await forward(dc_app, med, key, {"n": i})
    status = await peer.send(message("messagepickup/1.0/status-request"))
    assert status is not None and status["message_count"] == 3
    batch = await peer.send(message("messagepickup/1.0/batch-pickup", batch_size=2))
    assert batch is not None and batch["@type"].endswith("messagepickup/1.0/batch")
    got = [peer.open(json.dumps(m["message"]).encode()) for m in batch["messages~attach"]]
    assert got == [{"n": 0}, {"n": 1}]
    assert all("id" in m for m in batch["messages~attach"])

    async def count() -> int:
        s = await peer.send(message("messagepickup/1.0/status_request"))
        assert s is not None
        return int(s["message_count"])

    assert await eventually(count, lambda n: n == 1, within=5) == 1


async def test_implicit_pickup_over_websocket_drains_and_follows(dc_app: AppNode, med: str) -> None:
    async with Peer(dc_app, med, "ws") as peer:
        key = await peer.mediate()
        await forward(dc_app, med, key, {"queued": 1})
        ping = message("trust_ping/1.0/ping", response_requested=False)
        await peer.send_raw(ping)
        assert peer.open(await peer.next_frame()) == {"queued": 1}
        await forward(dc_app, med, key, {"queued": 2})
        assert peer.open(await peer.next_frame()) == {"queued": 2}
    async with Peer(dc_app, med) as check:
        check.keys = peer.keys
        assert (await check.status())["message_count"] == 0


async def test_implicit_pickup_over_http_returns_one_message_per_response(
    dc_app: AppNode, med: str
) -> None:
    async with Peer(dc_app, med) as peer:
        key = await peer.mediate()
        for i in range(2):
            await forward(dc_app, med, key, {"n": i})
        seen = []
        for _ in range(2):
            response = await peer.post(peer.pack(message("noop/1.0/noop")))
            assert response.status_code == 200
            seen.append(peer.open(response.content))
        assert seen == [{"n": 0}, {"n": 1}]
        assert (await peer.post(peer.pack(message("noop/1.0/noop")))).status_code == 202


async def test_a_pickup_2_connection_is_never_drained_implicitly(dc_app: AppNode, med: str) -> None:
    async with Peer(dc_app, med, "ws") as peer:
        key = await peer.mediate()
        await peer.status()
        await forward(dc_app, med, key, {"kept": True})
        await peer.send_raw(message("trust_ping/1.0/ping", response_requested=False))
        assert await peer.no_frame(0.8)
        assert (await peer.status())["message_count"] == 1


async def test_queue_management_status_update_and_fetch(
    peer: Peer, dc_app: AppNode, med: str
) -> None:
    key = await peer.mediate()
    status = await peer.send(message("queue/1.0/status-request"))
    assert status is not None
    body = status["status"]
    for name in (
        "message_count", "will_queue", "duration_limit", "duration_waited", "last_added_time",
        "last_delivered_time", "last_removed_time", "message_count_limit",
        "message_size_limit", "size", "size_limit",
    ):  # fmt: skip
        assert name in body
    update = message(
        "queue/1.0/status-update-request",
        update={"message_count_limit": 2, "size_limit": 0, "duration_limit": 10**9},
    )
    updated = await peer.send(update)
    assert updated is not None
    assert updated["status"]["message_count_limit"] == 2
    assert updated["status"]["size_limit"] == 1024 * 1024 * 1024  # held to the operator maximum
    assert updated["status"]["duration_limit"] == 90 * 86400
    for i in range(2):
        assert (await forward(dc_app, med, key, {"n": i})).status_code == 202
    refused = await forward(dc_app, med, key, {"n": 2})
    assert refused.status_code == 507 and refused.json()["code"] == "queue-count"
    batch = await peer.send(message("queue/1.0/fetch-request", message_count_limit=5))
    assert batch is not None and batch["message_count"] == 2
    assert [peer.open(json.dumps(m["msg"]).encode()) for m in batch["messages"]] == [
        {"n": 0},
        {"n": 1},
    ]
    ids = [m["id"] for m in batch["messages"]]
    acked = await peer.send(message("queue/1.0/fetch-request", message_id_list=ids))
    assert acked is not None and acked["message_count"] == 0
    final = await peer.send(message("queue/1.0/status-request"))
    assert final is not None and final["status"]["message_count"] == 0


async def test_will_queue_false_and_message_size_limit_refuse_forwards(
    dc_app: AppNode, med: str
) -> None:
    async with Peer(dc_app, med) as peer:
        key = await peer.mediate()
        await peer.send(
            message("queue/1.0/status-update-request", update={"message_size_limit": 300})
        )
        big = await forward(dc_app, med, key, {"pad": "x" * 400})
        assert big.status_code == 413
        await peer.send(message("queue/1.0/status-update-request", update={"will_queue": False}))
        closed = await forward(dc_app, med, key, {"small": 1})
        assert closed.status_code == 403
        assert (await peer.status())["message_count"] == 0


async def test_duration_limit_expires_messages(dc_app: AppNode, med: str) -> None:
    async with Peer(dc_app, med) as peer:
        key = await peer.mediate()
        await peer.send(message("queue/1.0/status-update-request", update={"duration_limit": 1}))
        await forward(dc_app, med, key, {"old": True})

        async def count() -> int:
            s = await peer.send(message("queue/1.0/status-request"))
            assert s is not None
            return int(s["status"]["message_count"])

        assert await eventually(count, lambda n: n == 0, within=10) == 0


async def test_replies_follow_rfc_0008_threading(peer: Peer) -> None:
    await peer.mediate()
    first = message("messagepickup/2.0/status-request")
    first["~thread"] = {"thid": "thread-0001", "sender_order": 4}
    reply = await peer.send(first)
    assert reply is not None
    assert reply["~thread"]["thid"] == "thread-0001"
    assert reply["~thread"]["sender_order"] == 0
    assert reply["~thread"]["received_orders"] == {peer.verkey: 4}
    second = message("messagepickup/2.0/status-request")
    second["~thread"] = {"thid": "thread-0001", "pthid": "parent-0001", "sender_order": 5}
    again = await peer.send(second)
    assert again is not None
    assert again["~thread"]["sender_order"] == 1 and again["~thread"]["pthid"] == "parent-0001"
    late = message("messagepickup/2.0/status-request")
    late["~thread"] = {"thid": "thread-0001", "sender_order": 3}  # arrived out of order
    third = await peer.send(late)
    assert third is not None and third["~thread"]["received_orders"] == {peer.verkey: 5}
    empty = message("messagepickup/2.0/status-request")
    empty["~thread"] = {}
    fresh = await peer.send(empty)
    assert fresh is not None and fresh["~thread"]["thid"] == empty["@id"]


async def test_did_sov_prefix_is_answered_in_kind(peer: Peer) -> None:
    await peer.mediate()
    status = await peer.send(
        message("did:sov:BzCbsNYhMrjHiqZDTUASHg;spec/queue/1.0/status-request", route="thread")
        | {"~transport": {"return_route": "thread", "return_route_thread": "sov-thread-01"}}
        | {"~thread": {"thid": "sov-thread-01"}}
    )
    assert status is not None
    assert status["@type"] == "did:sov:BzCbsNYhMrjHiqZDTUASHg;spec/queue/1.0/status"
    # The draft's own example: return_route "thread" naming no thread means this one.
    own = await peer.send(
        message("did:sov:BzCbsNYhMrjHiqZDTUASHg;spec/queue/1.0/status-request", route="thread")
    )
    assert own is not None and own["status"]["message_count"] == 0


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        ({"@type": "https://didcomm.org/messagepickup/2.0/status-request", "@id": "short",
          "~transport": {"return_route": "all"}},
         "invalid-message-id"),
        ({"@type": "https://didcomm.org/nope/1.0/what", "@id": "abcdefgh-1",
          "~transport": {"return_route": "all"}},
         "unsupported-message-type"),
        ({"@type": "https://didcomm.org/messagepickup/2.0/delivery-request", "@id": "abcdefgh-2",
          "~transport": {"return_route": "all"}}, "invalid-request"),
        ({"@type": "https://didcomm.org/messagepickup/2.0/status-request", "@id": "abcdefgh-3",
          "~thread": "not an object", "~transport": {"return_route": "all"}}, "invalid-thread"),
    ],
)  # fmt: skip
async def test_bad_messages_get_problem_reports(
    peer: Peer, bad: dict[str, object], code: str
) -> None:
    await peer.mediate()
    report = await (peer.send(bad) if peer.transport == "http" else _ws_send(peer, bad))
    assert report is not None and report["@type"].endswith("/problem-report")
    assert report["description"]["code"] == code
    assert (await peer.status())["@type"].endswith("/status")  # the socket loop survived


async def _ws_send(peer: Peer, msg: dict[str, object]) -> dict[str, object]:
    await peer.send_raw(msg)
    return await peer.next_message()


async def test_unreadable_input_gets_a_json_error_and_loses_nothing(
    dc_app: AppNode, med: str
) -> None:
    async with dc_app.client() as client:
        for body in (b"garbage", b'{"protected": "!!"}', b"[]"):
            answer = await client.post("/", content=body, headers=ENVELOPE)
            assert answer.status_code == 400 and "error" in answer.json()
        wrong_type = await client.post("/", content=b"{}", headers={"content-type": "text/plain"})
        assert wrong_type.status_code == 415 and wrong_type.json()["code"]
        wrong_method = await client.get("/")
        assert wrong_method.status_code == 405 and "error" in wrong_method.json()
    async with Peer(dc_app, med, "ws") as peer:
        await peer.ws.send(b"garbage")
        error = json.loads(await peer.next_frame())
        assert error["code"] == "invalid-json"
        key = await peer.mediate()
        await forward(dc_app, med, key, {"kept": True})
        assert (await peer.status())["message_count"] == 1
        # Pickup needs authcrypt: anoncrypted, it is refused without touching the queue.
        await peer.send_raw(message("messagepickup/2.0/status-request"), anon=True)
        assert json.loads(await peer.next_frame())["code"] == "authcrypt-required"


async def test_plaintext_forward_when_allowed(dc_app: AppNode, med: str) -> None:
    async with Peer(dc_app, med) as peer:
        key = await peer.mediate()
        inner = envelope.pack(b'{"plain": true}', [key], peer.keys)
        fwd = {"@type": "https://didcomm.org/routing/1.0/forward", "@id": "plain-fwd-01",
               "to": peer.recipient_keys[key].did_key, "msg": json.loads(inner)}  # fmt: skip
        answer = await peer.web.post(
            "/", content=json.dumps(fwd), headers={"content-type": "application/json"}
        )
        assert answer.status_code == 202
        assert (await peer.status())["message_count"] == 1


async def test_invitation_endpoint(dc_app: AppNode) -> None:
    async with dc_app.client() as client:
        data = (await client.get("/invitation")).json()
    oob = data["invitation"]
    assert oob["@type"] == "https://didcomm.org/out-of-band/1.1/invitation"
    assert len(oob["services"]) == 1
    assert oob["services"][0]["serviceEndpoint"] == dc_app.base
    assert data["invitation_url"].startswith(dc_app.base + "?oob=")


async def test_invitation_cli_prints_the_nodes_invitation_url(dc_node: Node) -> None:
    """`mediator invitation` asks the node at --endpoint over the network: a real server."""
    async with httpx.AsyncClient(base_url=dc_node.base) as client:
        data = (await client.get("/invitation")).json()
    assert data["invitation"]["services"][0]["serviceEndpoint"] == dc_node.base
    printed = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "mediator", "invitation", "--endpoint", dc_node.base],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.strip() == data["invitation_url"]


async def test_oversized_envelopes_are_refused_and_the_socket_lives(
    dc_app: AppNode, med: str
) -> None:
    too_big = b"{" + b" " * (2 * 1024 * 1024 + 10) + b"}"
    async with dc_app.client() as client:
        answer = await client.post("/", content=too_big, headers=ENVELOPE)
        assert answer.status_code == 413 and answer.json()["code"] == "too-large"
    async with Peer(dc_app, med, "ws") as peer:
        await peer.ws.send(too_big)
        assert json.loads(await peer.next_frame())["code"] == "too-large"
        await peer.mediate()
        assert (await peer.status())["message_count"] == 0


async def test_metrics_count_didcomm_messages(dc_app: AppNode, med: str) -> None:
    async with Peer(dc_app, med, "ws") as peer:
        key = await peer.mediate()
        await forward(dc_app, med, key, {"m": 1})
        text = (await peer.web.get("/metrics")).text
    assert (
        'mediator_didcomm_messages_total{didcomm="v1",outcome="ok",type="routing/1/forward"}'
        in text
    )
    assert "mediator_websockets 1.0" in text


async def test_restricted_mediation_denies_unlisted_connections(redis_url: str) -> None:
    from mediator.didcomm.keys import KeyPair

    listed = KeyPair.generate()
    node = await AppNode(
        redis_url, "restricted", mediation_open=False, mediation_allowlist=listed.did_key
    ).start()
    try:
        med = await mediator_key(node)
        async with Peer(node, med) as stranger, Peer(node, med) as member:
            member.keys = listed
            await member.exchange()
            deny = await stranger.send(message("coordinate-mediation/1.0/mediate-request"))
            assert deny is not None and deny["@type"].endswith("/mediate-deny")
            refused = await stranger.send(
                message(
                    "coordinate-mediation/1.0/keylist-update",
                    updates=[{"recipient_key": KeyPair.generate().did_key, "action": "add"}],
                )
            )
            assert refused is not None
            assert refused["description"]["code"] == "mediation-not-granted"
            await member.mediate()
    finally:
        await node.stop()


async def test_deeply_nested_json_is_refused_not_crashed(dc_app: AppNode, med: str) -> None:
    async with dc_app.client() as client:
        nested = b"[" * 100_000 + b"]" * 100_000
        answer = await client.post("/", content=nested, headers=ENVELOPE)
        assert answer.status_code == 400 and answer.json()["code"] == "invalid-json"
    async with Peer(dc_app, med) as peer:
        await peer.mediate()
        deep: dict[str, object] = {}
        node = deep
        for _ in range(40):
            node["x"] = {}
            node = node["x"]  # type: ignore[assignment]
        report = await peer.send(message("messagepickup/2.0/status-request", extra=deep))
        assert report is not None and report["description"]["code"] == "invalid-message"


async def test_discover_features_lists_the_protocols_we_speak(peer: Peer) -> None:
    everything = await peer.send(message("discover-features/1.0/query", query="*"))
    assert everything is not None and everything["@type"].endswith("discover-features/1.0/disclose")
    pids = {p["pid"] for p in everything["protocols"]}
    assert "https://didcomm.org/messagepickup/2.0" in pids
    assert "https://didcomm.org/coordinate-mediation/1.0" in pids
    pickup = await peer.send(
        message("discover-features/1.0/query", query="https://didcomm.org/messagepickup/*")
    )
    assert pickup is not None
    assert {p["pid"] for p in pickup["protocols"]} == {
        "https://didcomm.org/messagepickup/2.0",
        "https://didcomm.org/messagepickup/1.0",
    }
    assert all(p["roles"] == ["mediator"] for p in pickup["protocols"])
    none = await peer.send(message("discover-features/1.0/query", query="https://didcomm.org/x/*"))
    assert none is not None and none["protocols"] == []
    sov = await peer.send(
        message("discover-features/1.0/query", query="did:sov:BzCbsNYhMrjHiqZDTUASHg;spec/queue/*")
    )
    assert sov is not None
    assert [p["pid"] for p in sov["protocols"]] == ["did:sov:BzCbsNYhMrjHiqZDTUASHg;spec/queue/1.0"]


def test_disclosed_protocols_are_exactly_the_implemented_ones() -> None:
    from mediator.protocols import HANDLERS
    from mediator.protocols.discover_features import PROTOCOLS, PUSH_PROTOCOLS

    offered = [*PROTOCOLS, *PUSH_PROTOCOLS.values()]
    disclosed = {(pid.split("/")[0], int(pid.split("/")[1].split(".")[0])) for pid, _ in offered}
    implemented = {(family, major) for family, major, _ in HANDLERS}
    assert disclosed == implemented


async def test_websockets_decline_compression_by_default(dc_node: Node) -> None:
    """Compression is negotiated by uvicorn (`mediator serve`): a real server."""
    import websockets

    async with websockets.connect("ws" + dc_node.base[4:] + "/") as ws:
        assert ws.protocol.extensions == []  # offered by the client, declined by the node
