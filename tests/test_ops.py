"""What operators see: health, readiness, metrics, auth, JSON logs, OpenAPI, --help, bad input.

Every node here is a real `mediator serve` process. Nodes use their own Redis databases (5 and
6) or their own server, so counts are exact and their workers never touch other tests' shards.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import redis
from openapi_spec_validator import validate
from prometheus_client.parser import text_string_to_metric_families

from mediator.app import create_app
from mediator.embedded import free_port
from mediator.settings import Settings, env_name, settings_fields
from tests.mqs_client import create, queue_headers, send
from tests.scrape import value as _value
from tests.servers import Node, RedisUnderTest, database_url, start_binary_server

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)

KNOWN_ROUTES = {
    "/",
    "/queues",
    "/queues/{name}",
    "/messages/{name}",
    "/messages/{message_id}",
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
    "other",
}


def _db_url(server: RedisUnderTest, name: str) -> str:
    return database_url(server.url, name)


def _log_lines(node: Node) -> list[dict]:
    """The node's output, each line parsed as the JSON object it must be."""
    lines = []
    for line in node.output().splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)  # raises on any line that is not JSON
        assert isinstance(obj, dict), line
        lines.append(obj)
    return lines


def _wait_for(predicate, timeout: float = 5.0, interval: float = 0.1):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            return value
        time.sleep(interval)


@pytest.fixture(scope="module")
def nodes_db_url(redis_server: RedisUnderTest) -> str:
    url = _db_url(redis_server, "ops-nodes")
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture(scope="module")
def plain_node(nodes_db_url: str) -> Iterator[Node]:
    """Loopback, no tokens, info logs, small body limits, no worker."""
    node = Node(
        nodes_db_url,
        MEDIATOR_IN_PROCESS_WORKER="false",
        MEDIATOR_LOG_LEVEL="info",
        MEDIATOR_NODE_ID="ops-plain",
        MEDIATOR_MAX_MESSAGE_BYTES="1024",
        MEDIATOR_MAX_REQUEST_BYTES="65536",
    )
    node.start()
    yield node
    node.stop()


@pytest.fixture
async def http(plain_node: Node) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=plain_node.base, timeout=30) as client:
        yield client


# ---------------------------------------------------------------------------- health


def test_healthz_does_not_need_redis_and_readyz_follows_it(tmp_path: Path):
    server = start_binary_server(tmp_path / "redis")
    port = server.port
    node = Node(server.url, MEDIATOR_IN_PROCESS_WORKER="false")
    try:
        node.start()
        assert httpx.get(f"{node.base}/readyz", timeout=5).json() == {"status": "ready"}
        server.stop()

        health = httpx.get(f"{node.base}/healthz", timeout=5)
        assert health.status_code == 200
        assert health.json() == {"status": "ok"}
        ready = httpx.get(f"{node.base}/readyz", timeout=10)
        assert ready.status_code == 503
        assert ready.headers["content-type"].startswith("application/json")
        assert ready.json()["status"] == "unavailable"
        assert ready.json()["error"]

        server = start_binary_server(tmp_path / "redis", port=port)

        def ready_again() -> bool:
            try:
                return httpx.get(f"{node.base}/readyz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        assert _wait_for(ready_again, timeout=10), "readyz never recovered after Redis came back"
        assert httpx.get(f"{node.base}/healthz", timeout=5).status_code == 200
    finally:
        node.stop()
        server.stop()


# ---------------------------------------------------------------------------- metrics


def _families(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


@pytest.fixture(scope="module")
def metrics_node(redis_server: RedisUnderTest, tmp_path_factory: pytest.TempPathFactory):
    url = _db_url(redis_server, "ops-metrics")
    redis.Redis.from_url(url).flushdb()
    health = tmp_path_factory.mktemp("metrics-node") / "worker.health"
    node = Node(
        url,
        MEDIATOR_WORKER_TICK_SECONDS="0.2",
        MEDIATOR_STATS_SECONDS="1",
        MEDIATOR_WORKER_HEALTH_FILE=str(health),
    )
    node.start()
    yield node
    node.stop()


async def _scrape_until(http: httpx.AsyncClient, check, within: float = 6) -> str:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within
    while True:
        body = (await http.get("/metrics")).text
        if check(body) or time.monotonic() > deadline:
            return body
        await asyncio.sleep(0.1)


async def test_metrics_use_route_templates_and_never_queue_names(metrics_node: Node):
    qname = "metrics-" + uuid.uuid4().hex[:8]
    async with httpx.AsyncClient(base_url=metrics_node.base, timeout=30) as http:
        first = await http.get("/metrics")
        assert first.status_code == 200
        assert first.headers["content-type"].startswith("text/plain")
        families = _families(first.text)
        for name in (
            "mediator_queues",
            "mediator_queue_messages",
            "mediator_queue_oldest_message_age_seconds",
            "mediator_http_requests",
        ):
            assert name in families, name
        for ns in ("mqs", "didcomm"):
            for state in ("visible", "in_flight", "delayed"):
                value = _value(
                    first.text, "mediator_queue_messages", queue_namespace=ns, state=state
                )
                assert value is not None, (ns, state)
        queues_before = _value(first.text, "mediator_queues", queue_namespace="mqs") or 0

        await create(http, qname, visibility=60)
        ids = [await send(http, qname, b"m%d" % i) for i in range(3)]
        assert (await http.get(f"/queues/{qname}")).status_code == 200
        assert (await http.get("/nothing-here/" + qname)).status_code == 404
        got = await http.get(f"/messages/{qname}", headers={"X-MQS-MAX-MESSAGES": "1"})
        assert got.status_code == 200 and got.headers["X-MQS-MESSAGE-ID"] in ids
        assert (await http.delete(f"/messages/{ids[1]}")).status_code == 204

        # The totals follow within MEDIATOR_STATS_SECONDS (1 s here).
        def acked(t: str) -> float | None:
            return _value(
                t,
                "mediator_queue_message_events_total",
                queue_namespace="mqs",
                event="acknowledged",
            )

        text = await _scrape_until(
            http,
            lambda t: (
                _value(t, "mediator_queues", queue_namespace="mqs") == queues_before + 1
                and acked(t) == 1
            ),
        )
        # Leave the database empty: the next test counts exactly.
        assert (await http.delete(f"/queues/{qname}")).status_code == 200

    assert _value(text, "mediator_queues", queue_namespace="mqs") == queues_before + 1
    events = {
        e: _value(text, "mediator_queue_message_events_total", queue_namespace="mqs", event=e)
        for e in ("added", "delivered", "acknowledged")
    }
    assert events == {"added": 3, "delivered": 1, "acknowledged": 1}, events
    requests = [s for s in _families(text)["mediator_http_requests"] if s.name.endswith("_total")]
    routes = {(s.labels["route"], s.labels["method"], s.labels["status"]) for s in requests}
    for expected in [
        ("/queues/{name}", "PUT", "201"),
        ("/queues/{name}", "GET", "200"),
        ("/messages/{name}", "POST", "201"),
        ("/messages/{name}", "GET", "200"),
        ("/messages/{message_id}", "DELETE", "204"),
        ("other", "GET", "404"),
    ]:
        assert expected in routes, (expected, routes)
    posts = _value(
        text, "mediator_http_requests_total", route="/messages/{name}", method="POST", status="201"
    )
    assert posts is not None and posts >= 3
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            for value in s.labels.values():
                assert qname not in value, s
                assert not any(mid in value for mid in ids), s
            if "route" in s.labels:
                assert s.labels["route"] in KNOWN_ROUTES, s


async def test_message_gauges_follow_the_workers_summaries(metrics_node: Node):
    """The node's worker runs with MEDIATOR_STATS_SECONDS=1: the totals follow in seconds.

    Its database holds no other queue (the test above deletes its own), so counts are exact."""
    qname = "gauges-" + uuid.uuid4().hex[:8]
    async with httpx.AsyncClient(base_url=metrics_node.base, timeout=30) as http:
        await create(http, qname, visibility=60)
        ids = [await send(http, qname, b"m%d" % i) for i in range(3)]

        def visible(t: str) -> float | None:
            return _value(t, "mediator_queue_messages", queue_namespace="mqs", state="visible")

        text = await _scrape_until(http, lambda t: visible(t) == 3)
        stats_age = _value(text, "mediator_queue_stats_age_seconds")
        assert visible(text) == 3, f"visible gauge not refreshed; stats age {stats_age} s"
        assert (
            _value(text, "mediator_queue_messages", queue_namespace="mqs", state="in_flight") == 0
        )
        assert _value(text, "mediator_queue_messages", queue_namespace="mqs", state="delayed") == 0
        assert _value(text, "mediator_queues", queue_namespace="mqs") == 1
        oldest = _value(text, "mediator_queue_oldest_message_age_seconds", queue_namespace="mqs")
        assert oldest is not None and 0 < oldest < 60

        got = await http.get(f"/messages/{qname}", headers={"X-MQS-MAX-MESSAGES": "1"})
        assert got.status_code == 200 and got.headers["X-MQS-MESSAGE-ID"] in ids

        def in_flight(t: str) -> float | None:
            return _value(t, "mediator_queue_messages", queue_namespace="mqs", state="in_flight")

        text = await _scrape_until(http, lambda t: in_flight(t) == 1)
        assert in_flight(text) == 1
        assert visible(text) == 2


# ---------------------------------------------------------------------------- auth


@pytest.fixture(scope="module")
def token_node(nodes_db_url: str) -> Iterator[Node]:
    node = Node(nodes_db_url, MEDIATOR_IN_PROCESS_WORKER="false", MEDIATOR_API_TOKENS="t1,t2")
    node.start()
    yield node
    node.stop()


def test_tokens_are_required_for_mqs_but_not_for_ops_endpoints(token_node: Node):
    qname = "auth-" + uuid.uuid4().hex[:8]
    with httpx.Client(base_url=token_node.base, timeout=10) as c:
        for headers in (
            {},
            {"Authorization": "Bearer nope"},
            {"Authorization": "Bearer t1,t2"},
            {"Authorization": "Basic dDE6dDI="},
            {"Authorization": "Bearer"},
            {"Authorization": "t2"},
        ):
            r = c.get("/queues", headers=headers)
            assert r.status_code == 401, headers
            assert r.headers["WWW-Authenticate"] == "Bearer", headers
            assert r.headers["content-type"].startswith("application/json")
            assert r.json()["error"], headers

        # Refused before anything else: the queue is not created, even with valid headers.
        r = c.put(f"/queues/{qname}", headers=queue_headers())
        assert r.status_code == 401
        ok = {"Authorization": "Bearer t2"}
        assert c.get(f"/queues/{qname}", headers=ok).status_code == 404

        assert c.put(f"/queues/{qname}", headers={**queue_headers(), **ok}).status_code == 201
        assert c.get(f"/queues/{qname}", headers={"Authorization": "Bearer t1"}).status_code == 200
        assert c.get(f"/queues/{qname}", headers={"Authorization": "bearer t2"}).status_code == 200
        r = c.post(f"/messages/{qname}", content=b"x", headers={"Authorization": "Bearer t3"})
        assert r.status_code == 401
        assert c.delete(f"/queues/{qname}", headers=ok).status_code == 200

        for path in ("/healthz", "/readyz", "/metrics", "/openapi.json"):
            assert c.get(path).status_code == 200, path


@pytest.fixture(scope="module")
def public_node(nodes_db_url: str) -> Iterator[Node]:
    node = Node(nodes_db_url, MEDIATOR_IN_PROCESS_WORKER="false", MEDIATOR_HOST="0.0.0.0")
    node.start()
    yield node
    node.stop()


def test_public_address_without_tokens_refuses_mqs_and_says_so(public_node: Node):
    with httpx.Client(base_url=public_node.base, timeout=10) as c:
        for method, path in [
            ("GET", "/queues"),
            ("PUT", "/queues/public-q"),
            ("GET", "/messages/public-q"),
        ]:
            r = c.request(method, path, headers={**queue_headers(), "Authorization": "Bearer x"})
            assert r.status_code == 403, (method, path)
            assert r.headers["content-type"].startswith("application/json")
            error = r.json()["error"]
            assert "disabled" in error and "MEDIATOR_API_TOKENS" in error, error
        for path in ("/healthz", "/readyz", "/metrics"):
            assert c.get(path).status_code == 200, path
    warnings = [
        line
        for line in _log_lines(public_node)
        if line["level"] == "warning" and "mqs API disabled" in line["msg"]
    ]
    assert len(warnings) == 1, public_node.output()
    assert "MEDIATOR_API_TOKENS" in warnings[0]["msg"]
    assert "0.0.0.0" in warnings[0]["msg"]


def test_public_address_with_a_token_serves_mqs(nodes_db_url: str):
    node = Node(
        nodes_db_url,
        MEDIATOR_IN_PROCESS_WORKER="false",
        MEDIATOR_HOST="0.0.0.0",
        MEDIATOR_API_TOKENS="s3cret",
    )
    node.start()
    try:
        with httpx.Client(base_url=node.base, timeout=10) as c:
            r = c.get("/queues", headers={"Authorization": "Bearer s3cret"})
            assert r.status_code == 200
            assert "queues" in r.json()
            assert c.get("/queues").status_code == 401
        assert "mqs API disabled" not in node.output()
    finally:
        node.stop()


# ---------------------------------------------------------------------------- logs


async def test_every_output_line_is_json_and_requests_are_logged_once(
    http: httpx.AsyncClient, plain_node: Node
):
    qname = "logs-" + uuid.uuid4().hex[:8]
    rid = "req-" + uuid.uuid4().hex[:12]
    r = await http.put(f"/queues/{qname}", headers={**queue_headers(), "X-Request-ID": rid})
    assert r.status_code == 201
    assert r.headers["X-Request-ID"] == rid

    generated = await http.get(f"/queues/{qname}")
    generated_id = generated.headers["X-Request-ID"]
    assert generated_id and generated_id != rid

    def matching(request_id: str) -> list[dict]:
        return [line for line in _log_lines(plain_node) if line.get("request_id") == request_id]

    lines = _wait_for(lambda: matching(rid), timeout=3)
    assert len(lines) == 1, lines
    line = lines[0]
    assert line["method"] == "PUT"
    assert line["path"] == f"/queues/{qname}"
    assert line["status"] == 201
    assert isinstance(line["duration_ms"], int | float) and line["duration_ms"] >= 0
    assert line["node"] == "ops-plain"
    assert line["level"] == "info"
    assert line["ts"].endswith("Z")

    other = _wait_for(lambda: matching(generated_id), timeout=3)
    assert len(other) == 1 and other[0]["method"] == "GET" and other[0]["status"] == 200

    all_lines = _log_lines(plain_node)  # every line parses as a JSON object
    assert all(line["node"] == "ops-plain" for line in all_lines)
    assert any(line.get("msg") == "node ready" for line in all_lines)


# ---------------------------------------------------------------------------- openapi


async def test_openapi_document_is_valid_and_documents_every_mqs_route(http: httpx.AsyncClient):
    r = await http.get("/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    validate(doc)

    app = create_app(Settings(), "redis://127.0.0.1:1/0")  # routes only; nothing connects
    served: set[tuple[str, str]] = set()
    for route in app.routes:
        path = getattr(route, "path", "")
        if not path.startswith(("/queues", "/messages")):
            continue
        for method in getattr(route, "methods", None) or ():
            if method != "HEAD":
                served.add((path, method.lower()))
    assert served >= {
        ("/queues", "get"),
        ("/queues/{name}", "put"),
        ("/queues/{name}", "post"),
        ("/queues/{name}", "delete"),
        ("/queues/{name}", "get"),
        ("/messages/{name}", "post"),
        ("/messages/{name}", "get"),
        ("/messages/{message_id}", "delete"),
    }
    for path, method in sorted(served):
        assert path in doc["paths"], path
        assert method in doc["paths"][path], (path, method)
        for param in re.findall(r"{(\w+)}", path):
            declared = [
                p["name"]
                for p in doc["paths"][path].get("parameters", [])
                + doc["paths"][path][method].get("parameters", [])
                if p["in"] == "path"
            ]
            assert param in declared, (path, method, param)


# ---------------------------------------------------------------------------- --help


def _default_text(value: object) -> str:
    return '""' if value == "" else str(value)


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_help_shows_every_flag_with_its_env_var_and_default(command: str):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEDIATOR_")}
    env["COLUMNS"] = "200"
    out = subprocess.run(
        [sys.executable, "-m", "mediator", command, "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    # Undo the help formatter's line wrapping (it also breaks after hyphens).
    text = re.sub(r"-\n\s+", "-", out.stdout)
    text = " ".join(text.split())
    text = text[text.index("Options:") :]
    fields = settings_fields(command)
    flags = ["--" + f.name.replace("_", "-") for f in fields]
    positions = [text.index(flag + " ") for flag in flags]
    assert positions == sorted(positions), "flags are listed in settings order"
    ends = [*positions[1:], text.index("-h, --help")]
    for f, flag, start, end in zip(fields, flags, positions, ends, strict=True):
        block = text[start:end]
        assert f"env var: {env_name(f.name)}" in block, (flag, block)
        default = f.value(Settings())
        if f.secret:  # never shown; a file may hold it instead
            assert "default:" not in block and f"{flag}-file" in block, (flag, block)
            assert f"env var: {env_name(f.name)}_FILE" in block, (flag, block)
        elif isinstance(default, bool):
            assert f"default: {flag[2:] if default else 'no-' + flag[2:]}" in block, block
        else:
            assert f"default: {_default_text(default)}" in block, (flag, block)
    if command == "worker":
        assert "--check" in text


# ---------------------------------------------------------------------------- bad input


def _fake_id(qualified: bytes) -> str:
    return "A" * 22 + "." + base64.urlsafe_b64encode(qualified).rstrip(b"=").decode()


def _bad_requests(qname: str) -> list[tuple[str, str, dict, bytes | None]]:
    mp = "multipart/mixed; boundary=b"
    return [
        ("GET", "/queues", {"X-Big": "x" * 60_000}, None),
        ("GET", "/queues", {"X-Request-ID": b"\xff\xfe" * 100}, None),
        ("GET", "/queues", {"Range": b"queues=\xff-"}, None),
        ("GET", "/queues", {"Range": "queues=0-999999999999999999"}, None),
        ("GET", "/queues", {"Range": "queues=99999999999999999999999-"}, None),
        ("GET", "/queues", {"Range": "queues=-999999999999999999"}, None),
        ("GET", "/queues", {"Range": "x" * 10_000}, None),
        ("GET", "/queues/%00", {}, None),
        ("GET", "/queues/a%00b", {}, None),
        ("PUT", "/queues/%00", queue_headers(), None),
        ("PUT", "/queues/%ff%fe", queue_headers(), None),
        ("PUT", "/queues/" + "a" * 5000, queue_headers(), None),
        ("PUT", "/queues/..%2F..%2Fetc", queue_headers(), None),
        ("PUT", "/queues/ok-" + qname[:8], {"X-MQS-RETENTION-SECONDS": "9" * 30}, None),
        ("PUT", "/queues/ok-" + qname[:8], {**queue_headers(), "X-MQS-DELAY-SECONDS": "1e3"}, None),
        (
            "PUT",
            "/queues/ok-" + qname[:8],
            {**queue_headers(), "X-MQS-DEAD-LETTER-QUEUE": b"\xff", "X-MQS-MAX-RECEIVES": "1"},
            None,
        ),
        (
            "POST",
            f"/queues/{qname}",
            {**queue_headers(), "X-MQS-DEAD-LETTER-QUEUE": qname, "X-MQS-MAX-RECEIVES": "1"},
            None,
        ),
        (
            "POST",
            f"/queues/{qname}",
            {**queue_headers(), "X-MQS-DEAD-LETTER-QUEUE": "nope-nope", "X-MQS-MAX-RECEIVES": "1"},
            None,
        ),
        ("DELETE", "/queues/never-made", {"X-MQS-CASCADE": "maybe"}, None),
        ("DELETE", f"/queues/{qname}", {"X-MQS-CASCADE": b"\xff"}, None),
        ("PATCH", f"/queues/{qname}", {}, b"{}"),
        ("OPTIONS", f"/messages/{qname}", {}, None),
        ("PUT", f"/messages/{qname}", {}, b"x"),
        ("GET", "/messages/%00", {"X-MQS-MAX-MESSAGES": "1"}, None),
        ("GET", f"/messages/{qname}", {}, None),
        ("GET", f"/messages/{qname}", {"X-MQS-MAX-MESSAGES": ""}, None),
        ("GET", f"/messages/{qname}", {"X-MQS-MAX-MESSAGES": "9" * 40}, None),
        ("GET", f"/messages/{qname}", {"X-MQS-MAX-MESSAGES": b"\xff"}, None),
        ("GET", f"/messages/{qname}", {"X-MQS-MAX-MESSAGES": "1", "X-MQS-WAIT-TIME": "nan"}, None),
        ("GET", f"/messages/{qname}", {"X-MQS-MAX-MESSAGES": "1", "X-MQS-WAIT-TIME": "61"}, None),
        ("POST", f"/messages/{qname}", {"Content-Type": mp}, b"\xff\x00\x80garbage\r\n--b"),
        ("POST", f"/messages/{qname}", {"Content-Type": mp}, b""),
        ("POST", f"/messages/{qname}", {"Content-Type": mp}, b"--b--\r\n"),
        ("POST", f"/messages/{qname}", {"Content-Type": mp}, b"--b\r\n\r\nno close"),
        (
            "POST",
            f"/messages/{qname}",
            {"Content-Type": mp},
            b"--b\r\nX: \xff\xfe\r\n\r\nx\r\n--b--",
        ),
        (
            "POST",
            f"/messages/{qname}",
            {"Content-Type": mp},
            b"--b\r\nno colon\r\n\r\nx\r\n--b--",
        ),
        (
            "POST",
            f"/messages/{qname}",
            {"Content-Type": mp},
            b"--b\r\n\r\n" + b"y" * 2000 + b"\r\n--b--",
        ),
        (
            "POST",
            f"/messages/{qname}",
            {"Content-Type": "multipart/mixed"},
            b"--b\r\n\r\nx\r\n--b--",
        ),
        ("POST", f"/messages/{qname}", {"Content-Type": 'multipart/mixed; boundary=""'}, b"x"),
        (
            "POST",
            f"/messages/{qname}",
            {"Content-Type": "multipart/mixed; boundary=" + "b" * 71},
            b"x",
        ),
        (
            "POST",
            f"/messages/{qname}",
            {"Content-Type": "multipart/mixed; boundary=a; boundary=b"},
            b"x",
        ),
        ("POST", f"/messages/{qname}", {"Content-Type": b"multipart/mixed; boundary=\xff"}, b"x"),
        ("POST", f"/messages/{qname}", {"Content-Type": 'multipart/mixed; boundary="b'}, b"x"),
        ("POST", f"/messages/{qname}", {"Content-Type": "multipart/mixed; =b"}, b"x"),
        ("POST", f"/messages/{qname}", {"Content-Type": "text/plain"}, b"z" * 2000),
        ("POST", f"/messages/{qname}", {"Content-Type": "text/plain"}, b"z" * 70_000),
        ("POST", "/messages/no-such-queue", {"Content-Type": "text/plain"}, b"\xff\xfe"),
        ("POST", "/messages/%00", {"Content-Type": "text/plain"}, b"x"),
        ("DELETE", "/messages/%00", {}, None),
        ("DELETE", "/messages/garbage", {}, None),
        ("DELETE", "/messages/" + "a" * 5000, {}, None),
        ("DELETE", "/messages/" + _fake_id(b"mqs:\x00"), {}, None),
        ("DELETE", "/messages/" + _fake_id(b"mqs:"), {}, None),
        ("DELETE", "/messages/" + _fake_id(b"mqs:{}x"), {}, None),
        ("DELETE", "/messages/" + _fake_id(b"\xff\xfe"), {}, None),
        ("DELETE", "/messages/" + _fake_id(b"other:x"), {}, None),
        ("DELETE", "/messages/" + _fake_id(f"mqs:{qname}".encode()), {}, None),
        ("GET", "/%00", {}, None),
        ("GET", "//queues", {}, None),
        ("GET", "/queues/a/b/c", {}, None),
        ("POST", "/healthz", {}, b"x"),
    ]


async def test_bad_input_is_never_a_server_error(http: httpx.AsyncClient):
    qname = "fuzz-" + uuid.uuid4().hex[:8]
    await create(http, qname)
    failures = []
    for method, path, headers, body in _bad_requests(qname):
        r = await http.request(method, path, headers=headers, content=body)
        problem = None
        if r.status_code >= 500:
            problem = "server error"
        elif r.status_code >= 400:
            try:
                if not isinstance(r.json().get("error"), str):
                    problem = "no error text"
            except ValueError:
                problem = "not JSON"
        if problem:
            failures.append((problem, method, path[:60], r.status_code, r.text[:100]))
    assert failures == []

    # Odd but valid: any bytes in the body, Latin-1 bytes in header values.
    odd = {
        "Content-Type": b"text/plain; charset=\xff",
        "Content-Encoding": b"\xfe",
        "X-Trace-Id": b"tr\xe9",
    }
    for body in (b"\xff\xfe\x00\r\n--b--\r\n", b""):
        r = await http.post(f"/messages/{qname}", headers=odd, content=body)
        assert r.status_code == 201, r.text
    got = await http.get(f"/messages/{qname}", headers={"X-MQS-MAX-MESSAGES": "1"})
    assert got.status_code == 200, got.text
    assert got.content == b"\xff\xfe\x00\r\n--b--\r\n"
    assert got.headers["content-type"] == "text/plain; charset=\xff"
    assert got.headers["x-trace-id"] == "tr\xe9"
    batch = await http.get(f"/messages/{qname}", headers={"X-MQS-MAX-MESSAGES": "10"})
    assert batch.status_code == 200 and batch.headers["X-MQS-MESSAGE-COUNT"] == "1"
    assert (await http.get("/healthz")).status_code == 200


async def test_non_ascii_part_headers_are_refused_and_nothing_is_stored(
    http: httpx.AsyncClient,
):
    """Part headers come back as HTTP headers on receive, so they must be printable ASCII:
    a part with UTF-8 in its Content-Type or X-Trace-Id is refused with 400, and no part of
    the batch is stored (a message that could never be received would be lost)."""
    qname = "utf8-" + uuid.uuid4().hex[:8]
    await create(http, qname)
    body = (
        b"--b\r\nContent-Type: text/plain\r\n\r\nfine\r\n"
        b"--b\r\nContent-Type: text/plain; note=\xe2\x82\xac\r\nX-Trace-Id: tr-\xe2\x82\xac\r\n"
        b"\r\nhello\r\n--b--\r\n"
    )
    sent = await http.post(
        f"/messages/{qname}", content=body, headers={"Content-Type": "multipart/mixed; boundary=b"}
    )
    assert sent.status_code == 400, sent.text
    assert "part 2" in sent.json()["error"] and "ASCII" in sent.json()["error"]
    r = await http.get(f"/messages/{qname}", headers={"X-MQS-MAX-MESSAGES": "10"})
    assert r.status_code == 200 and r.json() == []


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_malformed_redis_url_is_refused_at_start_with_what_was_expected(command: str):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEDIATOR_")}
    env["MEDIATOR_REDIS_URL"] = "redis+sentinel://127.0.0.1:26379"  # no service name
    args = [sys.executable, "-m", "mediator", command]
    if command == "serve":
        args += ["--port", str(free_port())]
    out = subprocess.run(
        args,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2, out.stderr
    assert "a Sentinel URL names the service after the hosts" in out.stderr
