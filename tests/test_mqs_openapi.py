"""The mqs OpenAPI document describes the server exactly: schemathesis against a real node.

Every built-in check, positive and negative data, multipart batches, and the stateful phase
that chains the document's links (create queue -> send -> receive -> delete message -> delete
queue). Any check failure or 5xx fails the test, with one line per distinct finding. The
configuration is tests/soak/fuzz_mqs.py's, which the soaks run with far more inputs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
import redis

from tests.servers import Node, RedisUnderTest, database_url
from tests.soak import fuzz_mqs

TOKEN = "openapi-test-token"
SEED = 20_240_601

pytestmark = [pytest.mark.timeout(240), pytest.mark.full]


@pytest.fixture(scope="module")
def storage(redis_server: RedisUnderTest) -> str:
    if redis_server.topology == "cluster":
        return redis_server.isolated_url()  # Redis Cluster has only database 0
    return database_url(redis_server.url, "mqs-openapi")


def _flush(url: str) -> None:
    """Empty storage, so that a seeded run meets the same state (and so runs the same)."""
    if "cluster" not in url:
        redis.Redis.from_url(url).flushdb()


@pytest.fixture(scope="module")
def node(storage: str) -> Iterator[Node]:
    _flush(storage)
    node = Node(storage, MEDIATOR_API_TOKENS=TOKEN)
    node.start()
    yield node
    node.stop()
    _flush(storage)


def _findings(
    node: Node, storage: str, phases: tuple[str, ...], max_examples: int, seed: int = SEED
) -> tuple[dict[str, int], set[str]]:
    _flush(storage)
    schema = fuzz_mqs.load(node.base, TOKEN, seed=seed, max_examples=max_examples, phases=phases)
    seen: set[str] = set()
    totals = fuzz_mqs.execute(schema, seen=seen)
    return totals, seen


def test_document_states_the_token_links_and_every_answer(node: Node):
    doc = httpx.get(f"{node.base}/openapi.json").json()
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    operations = {
        op["operationId"]: op
        for item in doc["paths"].values()
        for method, op in item.items()
        if method in ("get", "put", "post", "delete")
    }
    assert set(operations) == {
        "listQueues", "createQueue", "updateQueue", "deleteQueue", "getQueue",
        "sendMessages", "receiveMessages", "deleteMessage",
    }  # fmt: skip
    for op in operations.values():
        assert {"401", "403", "500", "503"} <= set(op["responses"])
    unauthorized = doc["components"]["responses"]["E401"]
    assert unauthorized["headers"]["WWW-Authenticate"]["required"] is True
    created = operations["createQueue"]["responses"]["201"]["links"]
    assert {link["operationId"] for link in created.values()} >= {
        "getQueue", "sendMessages", "receiveMessages", "deleteQueue",
    }  # fmt: skip
    sent = operations["sendMessages"]["responses"]["201"]["links"]
    assert sent["DeleteMessage"]["parameters"] == {"message_id": "$response.body#/messageIds/0"}
    received = operations["receiveMessages"]["responses"]["200"]["links"]
    assert received["DeleteMessage"]["parameters"] == {
        "message_id": "$response.header.X-MQS-MESSAGE-ID"
    }


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}],
    ids=["none", "wrong", "not-bearer"],
)
def test_a_request_without_a_valid_token_gets_the_documented_401(
    node: Node, headers: dict[str, str]
):
    r = httpx.put(
        f"{node.base}/queues/never-made",
        headers={
            **headers,
            "X-MQS-RETENTION-SECONDS": "60",
            "X-MQS-VISIBILITY-TIMEOUT-SECONDS": "5",
        },
    )
    assert r.status_code == 401
    assert r.headers["WWW-Authenticate"] == "Bearer"
    assert set(r.json()) == {"error"}
    ok = httpx.get(f"{node.base}/queues/never-made", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 404  # the refused create made nothing


def test_unsupported_methods_are_405_with_allow(node: Node):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    cases = {
        ("PATCH", "/queues/q1"): "DELETE, GET, HEAD, POST, PUT",
        ("POST", "/queues"): "GET, HEAD",
        ("PUT", "/messages/q1"): "GET, HEAD, POST",
        ("POST", "/messages/AAAAAAAAAAAAAAAAAAAAAA.bXFzOnEx"): "DELETE",
    }
    for (method, path), allow in cases.items():
        r = httpx.request(method, f"{node.base}{path}", headers=auth)
        assert r.status_code == 405, (method, path, r.text)
        assert r.headers["Allow"] == allow
        assert set(r.json()) == {"error"}


def test_a_name_with_a_slash_is_400_not_404(node: Node):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for method, path in [
        ("GET", "/queues/a/b"),
        ("PUT", "/queues/a%2Fb"),
        ("GET", "/messages/a/b"),
    ]:
        r = httpx.request(method, f"{node.base}{path}", headers=auth)
        assert r.status_code == 400, (method, path, r.text)
        assert "invalid queue name" in r.json()["error"]
    r = httpx.delete(f"{node.base}/messages/a/b", headers=auth)
    assert r.status_code == 404


def test_stateless_fuzzing_finds_no_mismatch(node: Node, storage: str):
    """Examples, coverage (negative values of every constraint, missing headers, other methods,
    other content types) and fuzzing with positive and negative data, multipart included."""
    started = time.monotonic()
    totals, findings = _findings(
        node, storage, ("examples", "coverage", "fuzzing"), max_examples=25
    )
    assert findings == set()
    assert totals["failures"] == 0 and totals["5xx"] == 0 and totals["errors"] == 0, totals
    assert totals["inputs"] >= 500, totals
    assert totals["multipart"] >= 5, totals
    print(f"stateless: {totals} in {time.monotonic() - started:.1f}s")


def test_stateful_sequences_find_no_mismatch(node: Node, storage: str):
    """The state machine walks the document's links: create, send, receive, delete message,
    delete queue, and checks use-after-free and resource availability on the way."""
    started = time.monotonic()
    reached: dict[str, int] = {}
    # A walk rarely chains a valid send, a receive and a delete of that message (half of the
    # generated requests are invalid on purpose): walks with other seeds until one has.
    for walk in range(6):
        totals, findings = _findings(node, storage, ("stateful",), 40, seed=SEED + walk)
        assert findings == set()
        assert totals["failures"] == 0 and totals["5xx"] == 0 and totals["errors"] == 0, totals
        assert totals["stateful"] >= 100, totals
        for key in ("GET 200", "DELETE 204", "DELETE 200"):
            reached[key] = reached.get(key, 0) + totals.get(key, 0)
        if all(reached.values()):
            break
    # The links were followed to the end: messages received and deleted, queues deleted.
    assert all(reached.values()), reached
    print(f"stateful: {totals} in {time.monotonic() - started:.1f}s")


def test_the_soak_entry_point_counts_without_raising(node: Node):
    totals = fuzz_mqs.run(node.base, TOKEN, inputs=150, seed=SEED)
    assert totals["inputs"] >= 150
    assert totals["5xx"] == 0 and totals["failures"] == 0, totals
