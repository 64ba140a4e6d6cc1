"""Small helpers for talking mqs over real HTTP in tests."""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import time
from collections.abc import Callable

import httpx

from mediator.mqs import multipart

INT32_MAX = 2**31 - 1


def queue_headers(
    retention: int | str = 3600,
    visibility: int | str = 30,
    delay: int | str | None = None,
    max_receives: int | str | None = None,
    dlq: str | None = None,
) -> dict[str, str]:
    h = {
        "X-MQS-RETENTION-SECONDS": str(retention),
        "X-MQS-VISIBILITY-TIMEOUT-SECONDS": str(visibility),
    }
    if delay is not None:
        h["X-MQS-DELAY-SECONDS"] = str(delay)
    if max_receives is not None:
        h["X-MQS-MAX-RECEIVES"] = str(max_receives)
    if dlq is not None:
        h["X-MQS-DEAD-LETTER-QUEUE"] = dlq
    return h


async def create(http: httpx.AsyncClient, name: str, **kw: int | str | None) -> httpx.Response:
    r = await http.put(f"/queues/{name}", headers=queue_headers(**kw))  # type: ignore[arg-type]
    assert r.status_code == 201, r.text
    return r


async def send(http: httpx.AsyncClient, name: str, body: bytes, ctype: str = "text/plain") -> str:
    r = await http.post(f"/messages/{name}", content=body, headers={"Content-Type": ctype})
    assert r.status_code == 201, r.text
    ids: list[str] = r.json()["messageIds"]
    return ids[0]


async def send_batch(http: httpx.AsyncClient, name: str, bodies: list[bytes]) -> list[str]:
    ctype, body = multipart.encode(
        [({"Content-Type": "application/octet-stream"}, b) for b in bodies]
    )
    r = await http.post(f"/messages/{name}", content=body, headers={"Content-Type": ctype})
    assert r.status_code == 201, r.text
    ids: list[str] = r.json()["messageIds"]
    return ids


def parts(r: httpx.Response) -> list[multipart.Part]:
    """The messages of a receive answer, whatever its form."""
    assert r.status_code == 200, r.text
    if r.headers.get("X-MQS-MESSAGE-COUNT") == "0":
        assert r.json() == []
        return []
    boundary = multipart.boundary_from_content_type(r.headers["content-type"])
    if boundary is None:
        headers = {k.lower(): v for k, v in r.headers.items()}
        return [multipart.Part(headers=headers, body=r.content)]
    return multipart.parse(r.content, boundary, max_parts=1000)


def header_ms(part: multipart.Part, name: str) -> int:
    """A time header of a received message (RFC 3339, ms: X-MQS-MESSAGE-VISIBLE-AT...) as
    ms since the epoch."""
    text = part.headers[name.lower()]
    seconds = calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S"))
    return seconds * 1000 + int(text[20:23])


async def receive(
    http: httpx.AsyncClient, name: str, n: int = 1, wait: int | None = None
) -> list[multipart.Part]:
    h = {"X-MQS-MAX-MESSAGES": str(n)}
    if wait is not None:
        h["X-MQS-WAIT-TIME"] = str(wait)
    return parts(await http.get(f"/messages/{name}", headers=h))


async def send_until(
    http: httpx.AsyncClient,
    name: str,
    stop: asyncio.Event,
    on_accepted: Callable[[list[str]], None],
    tag: str = "",
) -> None:
    """Send numbered messages until `stop`, through whatever storage trouble: the ids of
    each one answered 201 go to `on_accepted`; any other answer must be a clear 503."""
    n = 0
    while not stop.is_set():
        n += 1
        with contextlib.suppress(httpx.HTTPError):
            r = await http.post(f"/messages/{name}", content=f"{tag}-{n}".encode())
            if r.status_code == 201:
                on_accepted(r.json()["messageIds"])
                continue
            assert r.status_code == 503, r.text  # refused, and it says so
            assert "error" in r.json()
        await asyncio.sleep(0.01)


async def receive_all_ids(http: httpx.AsyncClient, name: str) -> set[str]:
    """Receive until the queue answers empty; the ids of everything handed out."""
    received: set[str] = set()
    while True:
        r = await http.get(f"/messages/{name}", headers={"X-MQS-MAX-MESSAGES": "1000"})
        if r.headers.get("X-MQS-MESSAGE-COUNT") == "0":
            return received
        received.update(p.headers["x-mqs-message-id"] for p in parts(r))
