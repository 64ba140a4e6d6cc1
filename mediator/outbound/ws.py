"""A WebSocket to an endpoint a peer named, under the same rules as HTTP calls: a socket
connected to a checked address (TLS still verifies the URL's host), a slot of the
destination, the total deadline, no redirect (websockets follows none on a socket it was
handed), no compression and the incoming message size capped."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator

from websockets.asyncio.client import ClientConnection, connect
from websockets.uri import parse_uri

from mediator.outbound.guard import Guard


@contextlib.asynccontextmanager
async def websocket(
    guard: Guard, url: str, *, total: float, cap: int, tls: ssl.SSLContext
) -> AsyncIterator[ClientConnection]:
    uri = parse_uri(url)
    async with asyncio.timeout(total), guard.slot(uri.host, uri.port):
        sock = await guard.connect(uri.host, uri.port)
        options = {"ssl": tls} if uri.secure else {}
        try:
            opening = connect(
                url,
                sock=sock,
                proxy=None,
                compression=None,
                max_size=cap,
                open_timeout=None,
                close_timeout=total,
                **options,  # type: ignore[arg-type]
            )
            ws = await opening
        except BaseException:
            sock.close()  # the handshake failed: websockets may not have taken it over
            raise
        async with ws:
            yield ws
