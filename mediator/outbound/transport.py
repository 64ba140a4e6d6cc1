"""The httpx transport of outbound calls: connections go to the addresses the guard checked
(the URL's host still names the TLS server and the Host header), each call holds one of its
destination's slots, ends by the total deadline, and reads at most the capped answer."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Iterable

import httpcore
import httpx

from mediator.errors import AnswerTooLarge, OutboundError
from mediator.outbound.guard import Guard

MAX_CONNECTIONS = 100  # per client, whatever the destinations
MAX_KEEPALIVE = 20
KEEPALIVE_SECONDS = 5.0
DEFAULT_PORTS = {"http": 80, "https": 443}


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting only to the addresses the guard checked."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout or self.guard.connect_timeout)
        try:
            async with asyncio.timeout_at(deadline):
                addresses = await self.guard.addresses(host)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"{host}: no address in time") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from None
        failure: Exception = httpcore.ConnectError(f"{host}: no address")
        for address in addresses:
            try:
                return await self.inner.connect_tcp(
                    str(address),
                    port,
                    timeout=max(0.0, deadline - loop.time()),
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except httpcore.ConnectError as exc:
                failure = exc
        raise failure

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class GuardedTransport(httpx.AsyncBaseTransport):
    def __init__(
        self, guard: Guard, *, total: float, cap: int, tls: ssl.SSLContext, http2: bool
    ) -> None:
        self.guard = guard
        self.total = total
        self.cap = cap
        self.inner = httpx.AsyncHTTPTransport(verify=tls, http2=http2, trust_env=False)
        # httpx takes no network backend: its pool is replaced by one with ours (same settings).
        self.inner._pool = httpcore.AsyncConnectionPool(
            ssl_context=tls,
            max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_KEEPALIVE,
            keepalive_expiry=KEEPALIVE_SECONDS,
            http1=True,
            http2=http2,
            network_backend=CheckedBackend(guard),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        port = url.port or DEFAULT_PORTS.get(url.scheme, 0)
        deadline = asyncio.get_running_loop().time() + self.total
        held = contextlib.AsyncExitStack()
        try:
            async with asyncio.timeout_at(deadline):
                await held.enter_async_context(self.guard.slot(url.host, port))
                response = await self.inner.handle_async_request(request)
        except TimeoutError:
            await held.aclose()
            raise httpx.TimeoutException(
                f"{url.host}:{port} gave no answer within {self.total} s", request=request
            ) from None
        except BaseException:
            await held.aclose()
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)  # an async transport's
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        body = CappedBody(response.stream, self.cap, deadline, f"{url.host}:{port}", held)
        if encoding != "identity":
            await body.aclose()
            raise OutboundError(f"{url.host}:{port} answered {encoding}; identity was asked")
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=body,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class CappedBody(httpx.AsyncByteStream):
    """An answer's body read at most to `cap` bytes and by `deadline`; closing it (which a
    failed read does too) drops a connection not read to its end and frees the slot."""

    def __init__(
        self,
        inner: httpx.AsyncByteStream,
        cap: int,
        deadline: float,
        destination: str,
        held: contextlib.AsyncExitStack,
    ) -> None:
        self.inner = inner
        self.cap = cap
        self.deadline = deadline
        self.destination = destination
        self.held = held

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self.inner.__aiter__()
        read = 0
        while True:
            try:
                async with asyncio.timeout_at(self.deadline):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise httpx.ReadTimeout(f"{self.destination}: answer not read in time") from None
            read += len(chunk)
            if read > self.cap:
                raise AnswerTooLarge(f"{self.destination}: answer over {self.cap} bytes")
            yield chunk

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            await self.held.aclose()
