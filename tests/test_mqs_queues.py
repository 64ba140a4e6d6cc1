"""mqs queue routes end to end: a real node process, real HTTP, real Redis."""

from __future__ import annotations

import httpx
import pytest

from tests.mqs_client import INT32_MAX, create, queue_headers, receive, send

pytestmark = pytest.mark.topology  # run again on Sentinel and Redis Cluster


async def test_create_get_update_delete(http_a: httpx.AsyncClient, qname: str):
    r = await http_a.put(f"/queues/{qname}", headers=queue_headers(60, 5, delay=2))
    assert r.status_code == 201
    expected = {
        "name": qname,
        "deadLetterQueue": None,
        "maxReceives": None,
        "retentionSeconds": 60,
        "visibilityTimeoutSeconds": 5,
        "delaySeconds": 2,
    }
    assert r.json() == expected
    got = (await http_a.get(f"/queues/{qname}")).json()
    assert {k: got[k] for k in expected} == expected
    assert got["status"]["messages"] == 0
    r = await http_a.post(f"/queues/{qname}", headers=queue_headers(120, 0))
    assert r.status_code == 200
    assert r.json()["retentionSeconds"] == 120 and r.json()["delaySeconds"] == 0
    assert (await http_a.delete(f"/queues/{qname}")).status_code == 200
    assert (await http_a.get(f"/queues/{qname}")).status_code == 404
    assert (await http_a.delete(f"/queues/{qname}")).status_code == 404


async def test_create_existing_is_409_even_with_bad_headers(http_a: httpx.AsyncClient, qname: str):
    await create(http_a, qname)
    r = await http_a.put(f"/queues/{qname}", headers=queue_headers())
    assert r.status_code == 409 and "already exists" in r.json()["error"]
    r = await http_a.put(f"/queues/{qname}", headers={"X-MQS-RETENTION-SECONDS": "0"})
    assert r.status_code == 409


async def test_update_unknown_queue_is_404(http_a: httpx.AsyncClient, qname: str):
    assert (await http_a.post(f"/queues/{qname}", headers=queue_headers())).status_code == 404
    assert (await http_a.post(f"/queues/{qname}", headers={})).status_code == 404


@pytest.mark.parametrize(
    ("headers", "fragment"),
    [
        ({"X-MQS-VISIBILITY-TIMEOUT-SECONDS": "1"}, "X-MQS-RETENTION-SECONDS is required"),
        ({"X-MQS-RETENTION-SECONDS": "1"}, "X-MQS-VISIBILITY-TIMEOUT-SECONDS is required"),
        (queue_headers(retention=0), "between 1 and"),
        (queue_headers(retention=INT32_MAX + 1), "between 1 and"),
        (queue_headers(retention="abc"), "must be an integer"),
        (queue_headers(retention="1.5"), "must be an integer"),
        (queue_headers(visibility=-1), "between 0 and"),
        (queue_headers(visibility=INT32_MAX + 1), "between 0 and"),
        (queue_headers(delay=-1), "between 0 and"),
        (queue_headers(delay=INT32_MAX + 1), "between 0 and"),
        (queue_headers(max_receives=0, dlq="x"), "between 1 and"),
        (queue_headers(max_receives=INT32_MAX + 1, dlq="x"), "between 1 and"),
        (queue_headers(max_receives=3), "must be set together"),
        (queue_headers(dlq="some-queue"), "must be set together"),
        (queue_headers(max_receives=3, dlq="no-such-queue-xyz"), "does not exist"),
        (queue_headers(max_receives=3, dlq="bad name!"), "invalid dead letter queue name"),
    ],
)
async def test_create_rejects_invalid_settings(
    http_a: httpx.AsyncClient, qname: str, headers: dict[str, str], fragment: str
):
    r = await http_a.put(f"/queues/{qname}", headers=headers)
    assert r.status_code == 400
    assert r.headers["content-type"] == "application/json"
    assert fragment in r.json()["error"]
    assert (await http_a.get(f"/queues/{qname}")).status_code == 404


async def test_bounds_are_inclusive(http_a: httpx.AsyncClient, qname: str):
    await create(http_a, qname + "-d")
    r = await http_a.put(
        f"/queues/{qname}",
        headers=queue_headers(INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX, qname + "-d"),
    )
    assert r.status_code == 201
    assert r.json()["maxReceives"] == INT32_MAX
    r = await http_a.post(f"/queues/{qname}", headers=queue_headers(1, 0, 0, 1, qname + "-d"))
    assert r.status_code == 200 and r.json()["visibilityTimeoutSeconds"] == 0


async def test_queue_cannot_be_its_own_dead_letter_queue(http_a: httpx.AsyncClient, qname: str):
    await create(http_a, qname)
    r = await http_a.post(f"/queues/{qname}", headers=queue_headers(max_receives=2, dlq=qname))
    assert r.status_code == 400 and "own dead letter queue" in r.json()["error"]


@pytest.mark.parametrize("name", ["a" * 81, "has space", "dot.ted", "ümlaut", "semi;colon"])
async def test_bad_queue_names_are_400(http_a: httpx.AsyncClient, name: str):
    r = await http_a.put(f"/queues/{name}", headers=queue_headers())
    assert r.status_code == 400 and "invalid queue name" in r.json()["error"]
    r = await http_a.get(f"/messages/{name}", headers={"X-MQS-MAX-MESSAGES": "1"})
    assert r.status_code == 400


async def test_longest_name_is_accepted(http_a: httpx.AsyncClient, qname: str):
    name = (qname + "-" + "x" * 80)[:80]
    await create(http_a, name)
    assert (await http_a.get(f"/queues/{name}")).json()["name"] == name


async def test_delete_dead_letter_queue_without_cascade_is_412(
    http_a: httpx.AsyncClient, qname: str
):
    dlq = qname + "-dlq"
    await create(http_a, dlq)
    await create(http_a, qname, max_receives=3, dlq=dlq)
    r = await http_a.delete(f"/queues/{dlq}", headers={"X-MQS-CASCADE": "false"})
    assert r.status_code == 412 and qname in r.json()["error"]
    assert (await http_a.get(f"/queues/{dlq}")).status_code == 200
    assert (await http_a.get(f"/queues/{qname}")).json()["deadLetterQueue"] == dlq


async def test_delete_with_cascade_clears_the_reference(http_a: httpx.AsyncClient, qname: str):
    dlq = qname + "-dlq"
    await create(http_a, dlq)
    await create(http_a, qname, max_receives=3, dlq=dlq)
    await send(http_a, dlq, b"in the dlq")
    r = await http_a.delete(f"/queues/{dlq}")  # cascade defaults to true
    assert r.status_code == 200
    src = (await http_a.get(f"/queues/{qname}")).json()
    assert (src["deadLetterQueue"], src["maxReceives"]) == (None, None)
    await create(http_a, dlq)
    assert await receive(http_a, dlq) == []  # its messages went with it


async def test_delete_with_explicit_cascade_true_and_bad_value(
    http_a: httpx.AsyncClient, qname: str
):
    dlq = qname + "-dlq"
    await create(http_a, dlq)
    await create(http_a, qname, max_receives=3, dlq=dlq)
    r = await http_a.delete(f"/queues/{dlq}", headers={"X-MQS-CASCADE": "maybe"})
    assert r.status_code == 400 and "X-MQS-CASCADE" in r.json()["error"]
    r = await http_a.delete(f"/queues/{dlq}", headers={"X-MQS-CASCADE": "TRUE"})
    assert r.status_code == 200


async def test_unknown_route_and_method_answer_json(http_a: httpx.AsyncClient):
    r = await http_a.get("/nowhere")
    assert r.status_code == 404 and "error" in r.json()
    r = await http_a.patch("/queues/x")
    assert r.status_code == 405 and "error" in r.json()


# The spec checks existence first, also before validating the dead letter queue.


async def test_put_on_existing_queue_with_unknown_dead_letter_queue_is_409(
    http_a: httpx.AsyncClient, qname: str
):
    await create(http_a, qname)
    r = await http_a.put(
        f"/queues/{qname}", headers=queue_headers(max_receives=3, dlq=qname + "-nope")
    )
    assert r.status_code == 409, r.text


async def test_put_on_existing_queue_naming_itself_as_dead_letter_queue_is_409(
    http_a: httpx.AsyncClient, qname: str
):
    await create(http_a, qname)
    r = await http_a.put(f"/queues/{qname}", headers=queue_headers(max_receives=3, dlq=qname))
    assert r.status_code == 409, r.text


async def test_post_on_missing_queue_with_unknown_dead_letter_queue_is_404(
    http_a: httpx.AsyncClient, qname: str
):
    r = await http_a.post(
        f"/queues/{qname}", headers=queue_headers(max_receives=3, dlq=qname + "-nope")
    )
    assert r.status_code == 404, r.text


async def test_delete_missing_queue_with_bad_cascade_header_is_404(
    http_a: httpx.AsyncClient, qname: str
):
    r = await http_a.delete(f"/queues/{qname}", headers={"X-MQS-CASCADE": "maybe"})
    assert r.status_code == 404, r.text
