"""GET /queues with Range: its own Redis database so the totals are exact."""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator

import httpx
import pytest

from mediator.mqs import openapi
from mediator.storage.clients import Backend
from tests.inprocess import AppNode
from tests.mqs_client import create
from tests.servers import RedisUnderTest

pytestmark = pytest.mark.topology  # run again on Sentinel and Redis Cluster


@pytest.fixture(scope="module")
async def list_node(redis_server: RedisUnderTest) -> AsyncIterator[AppNode]:
    url = redis_server.isolated_url()
    backend = Backend(url)  # standalone, Sentinel or Cluster, as a node reaches it
    await backend.start()
    try:
        await backend.client.flushdb()  # storage of its own: another module may have used it
    finally:
        await backend.aclose()
    node = await AppNode(url, "list", in_process_worker=False).start()
    yield node
    await node.stop()


@pytest.fixture
async def http(list_node: AppNode) -> AsyncIterator[httpx.AsyncClient]:
    async with list_node.client(timeout=30) as client:
        yield client


async def _names(r: httpx.Response) -> list[str]:
    assert r.status_code == 200, r.text
    return [q["name"] for q in r.json()["queues"]]


async def test_ranges(http: httpx.AsyncClient):
    r = await http.get("/queues")
    assert r.json() == {"queues": []}
    assert r.headers["Content-Range"] == "queues */0"
    assert r.headers["Accept-Ranges"] == "queues"
    assert (await http.get("/queues", headers={"Range": "queues=0-1"})).status_code == 416

    names = [f"q{i:02d}" for i in range(12)]
    for name in reversed(names):
        await create(http, name)

    r = await http.get("/queues")
    assert await _names(r) == names  # name order
    assert r.headers["Content-Range"] == "queues 0-11/12"

    cases = {
        "queues=0-0": (names[:1], "queues 0-0/12"),
        "queues=2-4": (names[2:5], "queues 2-4/12"),
        "queues=10-": (names[10:], "queues 10-11/12"),
        "queues=-3": (names[9:], "queues 9-11/12"),
        "queues=-30": (names, "queues 0-11/12"),
        "queues=5-100": (names[5:], "queues 5-11/12"),
        "users=20-40": None,  # the spec's example unit: read as queues; 20 > 11 -> 416
        "users=1-2": (names[1:3], "queues 1-2/12"),
        "queues = 3 - 3": (names[3:4], "queues 3-3/12"),
    }
    for header, expected in cases.items():
        r = await http.get("/queues", headers={"Range": header})
        if expected is None:
            assert r.status_code == 416, header
            continue
        assert await _names(r) == expected[0], header
        assert r.headers["Content-Range"] == expected[1], header

    for bad in ["queues=12-", "queues=5-2", "queues=-0", "queues=a-b", "queues=-", "QUEUES=-",
                "pages=0-1", "queues=0-1,3-4", "queues"]:  # fmt: skip
        r = await http.get("/queues", headers={"Range": bad})
        assert r.status_code == 416, bad
        assert r.headers["Content-Range"] == "queues */12", bad
        assert "error" in r.json()

    r = await http.get("/queues", headers={"Range": ""})  # empty: no range, as the document says
    assert await _names(r) == names
    assert r.headers["Content-Range"] == "queues 0-11/12"


async def test_the_documented_pattern_is_what_the_server_reads(http: httpx.AsyncClient):
    """Every header the OpenAPI document's pattern admits is read (200, or 416 only for a
    range that selects no queue); every other is refused as malformed: schemathesis found
    them disagreeing once."""
    await create(http, "only")
    pattern = re.compile(openapi.RANGE_PATTERN)
    pieces = ["queues", "QUEUES", "users", "pages", "=", "-", "0", "1", "12", " ", ","]
    for n in range(5):
        for parts in itertools.product(pieces, repeat=n):
            if n == 4 and parts[0] not in ("queues", "QUEUES") and parts[1] != "=":
                continue  # keep the walk small: the unit's spellings are covered above
            header = "".join(parts)
            r = await http.get("/queues", headers={"Range": header})
            malformed = r.status_code == 416 and "malformed" in r.json()["error"]
            admitted = pattern.fullmatch(header.strip(" ")) is not None
            assert admitted != malformed, (header, r.status_code, r.text)
