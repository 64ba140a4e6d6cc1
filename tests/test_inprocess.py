"""The app in process (tests/inprocess.py) is what the fast tier's DIDComm suites talk to: its
WebSocket must behave as behind a server, or those suites would pass for the wrong reason."""

from __future__ import annotations

import json

from tests.eventually import eventually
from tests.inprocess import AppNode


async def test_the_websocket_in_process_carries_frames_and_close_codes_both_ways(
    redis_url: str,
) -> None:
    node = await AppNode(
        redis_url, "bridge", websocket_handshake_seconds=0.5, websocket_idle_seconds=0
    ).start()
    try:
        ws = await node.open_websocket()
        await ws.send("not an envelope")  # a text frame
        text = await ws.receive()
        assert isinstance(text, str) and json.loads(text)["code"] == "invalid-json"
        await ws.send(b"\xff not an envelope either")  # a binary frame
        binary = await ws.receive()
        assert isinstance(binary, str) and json.loads(binary)["code"] == "invalid-json"
        # Nothing valid within its deadline: the app closes it (1008), as behind uvicorn.
        assert await ws.receive() is None
        assert ws.close_code == 1008
        assert await ws.receive() is None
        # Closed by the client: the app sees the disconnect and lets the socket go.
        other = await node.open_websocket()
        async with node.client() as http:

            async def sockets() -> str:
                return (await http.get("/metrics")).text

            assert "mediator_websockets 1.0" in await sockets()
            await other.close()
            assert other.close_code == 1000 and await other.receive() is None
            gone = await eventually(sockets, lambda t: "mediator_websockets 0.0" in t, within=5)
            assert "mediator_websockets 0.0" in gone
    finally:
        await node.stop()
