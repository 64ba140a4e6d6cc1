"""mqs message routes end to end: send, receive, delete, batches, bounds, dead letters."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from mediator.engine import Engine, QueueConfig, QueueRef
from mediator.mqs import multipart
from tests.eventually import eventually, redis_ms, until_redis_ms
from tests.mqs_client import create, header_ms, parts, receive, send, send_batch

pytestmark = pytest.mark.topology  # run again on Sentinel and Redis Cluster


async def create_ms(
    engine: Engine,
    name: str,
    *,
    retention_ms: int = 3_600_000,
    visibility_ms: int = 30_000,
    delay_ms: int = 0,
    max_receives: int | None = None,
    dlq: str | None = None,
) -> None:
    """A queue with timers of a part of a second, made through the engine (the API speaks
    whole seconds), for the tests of what happens when they run out."""
    config = QueueConfig(
        retention_ms=retention_ms,
        visibility_timeout_ms=visibility_ms,
        delay_ms=delay_ms,
        max_receives=max_receives,
        dead_letter_queue=dlq,
    )
    await engine.create_queue(QueueRef("mqs", name), config)


async def test_single_message_round_trip_headers(http_a: httpx.AsyncClient, qname: str):
    await create(http_a, qname, visibility=7)
    r = await http_a.post(
        f"/messages/{qname}",
        content=b"plain text",
        headers={"Content-Type": "text/plain", "Content-Encoding": "identity", "X-TRACE-ID": "t-9"},
    )
    assert r.status_code == 201
    (mid,) = r.json()["messageIds"]
    r = await http_a.get(f"/messages/{qname}", headers={"X-MQS-MAX-MESSAGES": "1"})
    assert r.status_code == 200
    assert r.content == b"plain text"
    assert r.headers["content-type"] == "text/plain"  # exactly as sent: no charset added
    assert r.headers["content-encoding"] == "identity"
    assert r.headers["x-trace-id"] == "t-9"
    assert r.headers["x-mqs-message-id"] == mid
    assert r.headers["x-mqs-message-receives"] == "1"
    assert r.headers["x-mqs-message-published-at"].endswith("Z")
    assert r.headers["x-mqs-message-visible-at"] > r.headers["x-mqs-message-published-at"]
    assert (await http_a.delete(f"/messages/{mid}")).status_code == 204
    assert (await http_a.delete(f"/messages/{mid}")).status_code == 404
    assert await receive(http_a, qname) == []


async def test_empty_receive_is_200_with_empty_list(http_a: httpx.AsyncClient, qname: str):
    await create(http_a, qname)
    for n in ("1", "10"):
        r = await http_a.get(f"/messages/{qname}", headers={"X-MQS-MAX-MESSAGES": n})
        assert r.status_code == 200 and r.json() == []
        assert r.headers["X-MQS-MESSAGE-COUNT"] == "0"


async def test_multipart_round_trip_of_binary_bodies(http_a: httpx.AsyncClient, qname: str):
    await create(http_a, qname)
    bodies = [
        bytes(range(256)),
        b"line one\r\nline two\r\n\r\n--not-a-boundary\r\n",
        b"",
        b'{"message": "data"}',
    ]
    types = ["application/octet-stream", "text/plain; charset=us-ascii", "application/x-empty",
             "application/json; charset=utf-8"]  # fmt: skip
    ctype, body = multipart.encode(
        [({"Content-Type": t}, b) for t, b in zip(types, bodies, strict=True)]
    )
    r = await http_a.post(f"/messages/{qname}", content=body, headers={"Content-Type": ctype})
    assert r.status_code == 201
    ids = r.json()["messageIds"]
    assert len(ids) == 4
    got = await receive(http_a, qname, n=10)
    assert [
        (p.headers["x-mqs-message-id"], p.headers["content-type"], p.body) for p in got
    ] == list(zip(ids, types, bodies, strict=True))
    assert all(p.headers["x-mqs-message-receives"] == "1" for p in got)


async def test_spec_example_batch_with_quoted_boundary(http_a: httpx.AsyncClient, qname: str):
    await create(http_a, qname)
    body = (
        b"--simple boundary\r\n"
        b'Content-Type: "application/json; charset=utf-8"\r\n\r\n'
        b'{\r\n    "message": "data"\r\n}\r\n'
        b"--simple boundary\r\n"
        b"Content-type: text/plain; charset=us-ascii\r\n\r\n"
        b"Another simple message.\r\n"
        b"--simple boundary--\r\n"
    )
    r = await http_a.post(
        f"/messages/{qname}",
        content=body,
        headers={"Content-Type": 'multipart/mixed; boundary="simple boundary"'},
    )
    assert r.status_code == 201 and len(r.json()["messageIds"]) == 2
    got = await receive(http_a, qname, n=2)
    assert [p.body for p in got] == [b'{\r\n    "message": "data"\r\n}', b"Another simple message."]
    assert [p.headers["content-type"] for p in got] == [
        "application/json; charset=utf-8",
        "text/plain; charset=us-ascii",
    ]


async def test_batch_request_with_one_message_is_still_multipart(
    http_a: httpx.AsyncClient, qname: str
):
    await create(http_a, qname)
    mid = await send(http_a, qname, b"only")
    r = await http_a.get(f"/messages/{qname}", headers={"X-MQS-MAX-MESSAGES": "5"})
    assert r.headers["content-type"].startswith("multipart/mixed; boundary=")
    assert [(p.headers["x-mqs-message-id"], p.body) for p in parts(r)] == [(mid, b"only")]


@pytest.mark.parametrize(
    ("value", "status"),
    [("0", 400), ("1", 200), ("1000", 200), ("1001", 400), ("-1", 400), ("x", 400),
     ("2147483647", 400), ("99999999999999999999999", 400)],
)  # fmt: skip
async def test_max_messages_bounds(http_a: httpx.AsyncClient, qname: str, value: str, status: int):
    await create(http_a, qname)
    r = await http_a.get(f"/messages/{qname}", headers={"X-MQS-MAX-MESSAGES": value})
    assert r.status_code == status
    if status == 400:
        assert "X-MQS-MAX-MESSAGES" in r.json()["error"]


async def test_max_messages_is_required(http_a: httpx.AsyncClient, qname: str):
    await create(http_a, qname)
    r = await http_a.get(f"/messages/{qname}")
    assert r.status_code == 400 and "X-MQS-MAX-MESSAGES is required" in r.json()["error"]


@pytest.mark.parametrize(
    ("value", "status"), [("-1", 400), ("0", 200), ("60", 200), ("61", 400), ("soon", 400)]
)
async def test_wait_time_bounds(http_a: httpx.AsyncClient, qname: str, value: str, status: int):
    await create(http_a, qname)
    if value == "60":
        await send(
            http_a, qname, b"ready"
        )  # a valid 60 s wait returns at once when a message waits
    r = await http_a.get(
        f"/messages/{qname}", headers={"X-MQS-MAX-MESSAGES": "1", "X-MQS-WAIT-TIME": value}
    )
    assert r.status_code == status
    if status == 400:
        assert "X-MQS-WAIT-TIME" in r.json()["error"]


async def test_receiving_1000_messages_at_once(http_a: httpx.AsyncClient, qname: str):
    await create(http_a, qname)
    sent = []
    for i in range(0, 1000, 250):
        sent += await send_batch(http_a, qname, [b"m%d" % j for j in range(i, i + 250)])
    got = await receive(http_a, qname, n=1000)
    assert sorted(p.headers["x-mqs-message-id"] for p in got) == sorted(sent)


async def test_unknown_queue_is_404_for_every_message_route(http_a: httpx.AsyncClient, qname: str):
    r = await http_a.post(f"/messages/{qname}", content=b"x")
    assert r.status_code == 404 and qname in r.json()["error"]
    r = await http_a.get(f"/messages/{qname}", headers={"X-MQS-MAX-MESSAGES": "0"})
    assert r.status_code == 404  # 404 comes before header validation, as the spec orders
    assert (await http_a.delete("/messages/not-an-id")).status_code == 404


async def test_malformed_multipart_is_400_and_stores_nothing(http_a: httpx.AsyncClient, qname: str):
    await create(http_a, qname)
    for ctype, body in [
        ("multipart/mixed; boundary=b", b"--b\r\nContent-Type: text/plain\r\n\r\nno end"),
        ("multipart/mixed; boundary=b", b"no delimiter at all"),
        ("multipart/mixed", b"--b\r\n\r\nx\r\n--b--\r\n"),
        ("multipart/mixed; boundary=b", b"--b\r\nbroken header line\r\n\r\nx\r\n--b--\r\n"),
    ]:
        r = await http_a.post(f"/messages/{qname}", content=body, headers={"Content-Type": ctype})
        assert r.status_code == 400, (ctype, body)
        assert "multipart" in r.json()["error"]
    assert await receive(http_a, qname, n=10) == []


async def test_oversized_bodies_are_413_and_store_nothing(http_a: httpx.AsyncClient, qname: str):
    await create(http_a, qname)
    big = b"x" * (1024 * 1024 + 1)
    r = await http_a.post(f"/messages/{qname}", content=big)
    assert r.status_code == 413 and "limit" in r.json()["error"]
    ctype, body = multipart.encode([({}, b"small"), ({}, big)])
    r = await http_a.post(f"/messages/{qname}", content=body, headers={"Content-Type": ctype})
    assert r.status_code == 413 and "part 2" in r.json()["error"]
    ctype, body = multipart.encode([({}, b"y" * 1024 * 1024) for _ in range(11)])
    r = await http_a.post(f"/messages/{qname}", content=body, headers={"Content-Type": ctype})
    assert r.status_code == 413
    assert await receive(http_a, qname, n=10) == []
    # Exactly at the limit is fine.
    mid = await send(http_a, qname, b"z" * 1024 * 1024, "application/octet-stream")
    (p,) = await receive(http_a, qname)
    assert p.headers["x-mqs-message-id"] == mid and len(p.body) == 1024 * 1024


async def test_concurrent_http_receivers_never_share_a_message(
    http_a: httpx.AsyncClient, http_b: httpx.AsyncClient, qname: str
):
    await create(http_a, qname)
    sent = []
    for i in range(0, 200, 100):
        sent += await send_batch(http_a, qname, [b"%d" % j for j in range(i, i + 100)])

    async def drain(http: httpx.AsyncClient) -> list[str]:
        got: list[str] = []
        while True:
            batch = await receive(http, qname, n=3)
            if not batch:
                return got
            got += [p.headers["x-mqs-message-id"] for p in batch]

    results = await asyncio.gather(*(drain(h) for h in [http_a, http_b] * 4))
    union = [mid for r in results for mid in r]
    assert len(union) == len(set(union))
    assert sorted(union) == sorted(sent)


async def test_message_returns_after_visibility_timeout_with_receive_count(
    http_a: httpx.AsyncClient, engine: Engine, qname: str
):
    await create_ms(engine, qname, visibility_ms=1000)  # it looks before the deadline too
    mid = await send(http_a, qname, b"again")
    (first,) = await receive(http_a, qname)
    assert first.headers["x-mqs-message-receives"] == "1"
    assert await receive(http_a, qname) == []
    await until_redis_ms(engine.redis, header_ms(first, "x-mqs-message-visible-at"))
    (second,) = await receive(http_a, qname)
    assert second.headers["x-mqs-message-id"] == mid
    assert second.headers["x-mqs-message-receives"] == "2"


async def test_lowering_visibility_timeout_does_not_reveal_hidden_messages(
    http_a: httpx.AsyncClient, qname: str
):
    await create(http_a, qname, visibility=30)
    await send(http_a, qname, b"hidden")
    assert len(await receive(http_a, qname)) == 1
    r = await http_a.post(
        f"/queues/{qname}",
        headers={"X-MQS-RETENTION-SECONDS": "3600", "X-MQS-VISIBILITY-TIMEOUT-SECONDS": "0"},
    )
    assert r.status_code == 200
    await asyncio.sleep(0.05)  # a receive after the new timeout of 0 has run out
    assert await receive(http_a, qname) == []
    status = (await http_a.get(f"/queues/{qname}")).json()["status"]
    assert (status["inFlightMessages"], status["visibleMessages"]) == (1, 0)


async def test_dead_letter_after_exactly_max_receives(
    http_a: httpx.AsyncClient, engine: Engine, qname: str
):
    dlq = qname + "-dlq"
    await create_ms(engine, dlq, visibility_ms=250)
    await create_ms(engine, qname, visibility_ms=250, max_receives=2, dlq=dlq)
    mid = await send(http_a, qname, b"poison")
    receives = []
    for _ in range(2):
        (p,) = await receive(http_a, qname, wait=3)
        assert p.headers["x-mqs-message-id"] == mid
        receives.append(p.headers["x-mqs-message-receives"])
    assert receives == ["1", "2"]
    # Never delivered a third time from the source, even after its timeout.
    await until_redis_ms(engine.redis, header_ms(p, "x-mqs-message-visible-at"))
    assert await receive(http_a, qname) == []
    (moved,) = await receive(http_a, dlq, wait=2)
    assert moved.headers["x-mqs-message-id"] == mid
    assert moved.body == b"poison"
    assert moved.headers["x-mqs-message-receives"] == "1"
    assert await receive(http_a, qname) == []
    assert (await http_a.delete(f"/messages/{mid}")).status_code == 204
    await until_redis_ms(engine.redis, header_ms(moved, "x-mqs-message-visible-at"))
    assert await receive(http_a, dlq) == []


async def test_dead_lettered_message_is_deletable_while_in_flight(
    http_a: httpx.AsyncClient, engine: Engine, qname: str
):
    dlq = qname + "-dlq"
    await create(http_a, dlq)
    await create_ms(engine, qname, visibility_ms=250, max_receives=1, dlq=dlq)
    mid = await send(http_a, qname, b"x")
    (p,) = await receive(http_a, qname)  # last receive: moved at once
    assert (await http_a.delete(f"/messages/{p.headers['x-mqs-message-id']}")).status_code == 204
    await until_redis_ms(engine.redis, header_ms(p, "x-mqs-message-visible-at"))
    assert await receive(http_a, dlq) == []
    assert await receive(http_a, qname) == []
    assert (await http_a.delete(f"/messages/{mid}")).status_code == 404


async def test_retention_counts_from_first_enqueue_in_the_dead_letter_queue(
    http_a: httpx.AsyncClient, engine: Engine, qname: str
):
    # Timers of seconds: the test looks before the deadline too (docs/testing.md).
    dlq = qname + "-dlq"
    await create_ms(engine, dlq, retention_ms=3000, visibility_ms=0)
    await create(http_a, qname, visibility=0, max_receives=1, dlq=dlq)
    await send(http_a, qname, b"aging")
    await until_redis_ms(engine.redis, await redis_ms(engine.redis) + 1000)
    (moved,) = await receive(http_a, qname)  # moved now, 1 s after the send
    assert len(await receive(http_a, dlq)) == 1  # still within 3 s of the first enqueue
    await until_redis_ms(engine.redis, header_ms(moved, "x-mqs-message-published-at") + 3000)
    assert await receive(http_a, dlq) == []  # 3 s after the first enqueue (not the move): gone
    status = (await http_a.get(f"/queues/{dlq}")).json()["status"]
    assert status["messages"] == 0


async def test_expired_messages_are_never_delivered_and_leave_the_counts(
    http_a: httpx.AsyncClient, engine: Engine, qname: str
):
    await create_ms(engine, qname, retention_ms=200)
    await send_batch(http_a, qname, [b"a", b"b", b"c"])
    assert (await http_a.get(f"/queues/{qname}")).json()["status"]["messages"] == 3

    # Once past their retention, the node's worker purges them without any receive.
    async def stored() -> int:
        count: int = (await http_a.get(f"/queues/{qname}")).json()["status"]["messages"]
        return count

    assert await eventually(stored, lambda n: n == 0, within=5) == 0
    assert await receive(http_a, qname, n=10) == []


async def test_delayed_message_is_hidden_until_due(
    http_a: httpx.AsyncClient, engine: Engine, qname: str
):
    await create_ms(engine, qname, delay_ms=1000)
    mid = await send(http_a, qname, b"later")
    due_by = await redis_ms(engine.redis) + 1000
    assert await receive(http_a, qname) == []
    assert (await http_a.get(f"/queues/{qname}")).json()["status"]["delayedMessages"] == 1
    await until_redis_ms(engine.redis, due_by)
    (p,) = await receive(http_a, qname)
    assert p.headers["x-mqs-message-id"] == mid


async def test_the_apis_whole_seconds_are_the_engines_timers(
    http_a: httpx.AsyncClient, engine: Engine, qname: str
):
    await create(http_a, qname, retention=3, visibility=7, delay=2)
    config = (await engine.get_queue(QueueRef("mqs", qname))).config
    assert (config.retention_ms, config.visibility_timeout_ms, config.delay_ms) == (
        3000,
        7000,
        2000,
    )
    doc = (await http_a.get(f"/queues/{qname}")).json()
    assert (doc["retentionSeconds"], doc["visibilityTimeoutSeconds"], doc["delaySeconds"]) == (
        3,
        7,
        2,
    )
    await create(http_a, qname + "-now", visibility=7)
    await send(http_a, qname + "-now", b"x")
    before = await redis_ms(engine.redis)
    (p,) = await receive(http_a, qname + "-now")
    hidden_for = header_ms(p, "x-mqs-message-visible-at") - before
    assert 7000 <= hidden_for <= 7000 + (await redis_ms(engine.redis) - before)
    # A queue whose timers are a part of a second (made through the engine) shows them
    # rounded up to the API's whole seconds.
    await create_ms(engine, qname + "-ms", retention_ms=1500, visibility_ms=250, delay_ms=50)
    doc = (await http_a.get(f"/queues/{qname}-ms")).json()
    assert (doc["retentionSeconds"], doc["visibilityTimeoutSeconds"], doc["delaySeconds"]) == (
        2,
        1,
        1,
    )
