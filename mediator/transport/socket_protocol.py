"""uvicorn's WebSocket protocol, minus the handshake it would keep for the socket's life.

After the upgrade, uvicorn's sans-I/O protocol still holds the parsed request and the
response it answered with (their header structures: about 4 KB per socket). A node holds
20,000 idle sockets or more, so this subclass lets both go once the handshake is complete;
nothing reads them after that.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol


class LeanWebSocketProtocol(WebSocketsSansIOProtocol):
    async def send(self, message: Any) -> None:
        await super().send(message)
        if message["type"] == "websocket.accept" and self.handshake_complete:
            self.request = None  # type: ignore[assignment]
            self.response = None  # type: ignore[assignment]
