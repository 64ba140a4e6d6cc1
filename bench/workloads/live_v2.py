"""The DIDComm benchmark's `live-v2` workload (bench/workloads/didcomm.py): a v2 wallet in
Pickup 3.0 live mode on a WebSocket to node 1, routing 2.0 forwards POSTed one at a time;
from each forward's answer to the `delivery` frame, as the `live` workload measures it for
v1 (every delivery acknowledged with messages-received, no status asked back)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
from websockets.asyncio.client import connect

from bench.harness.errors import BenchError
from bench.harness.loadgen import HOST, Connection, build_request, expect
from bench.support.wallets_v2 import ENCRYPTED, WalletsV2, _message
from mediator.didcomm.v2.unpack import pack, unpack

WARM = 20


async def live_rounds(wallets: WalletsV2, port: int, rounds: int, gap: float) -> list[float]:
    """ms from each forward's answer (node on `port`) to its delivery frame on node 1."""
    wallet = await wallets.mediated()
    mediator = await wallets.mediator()
    sender = (f"{wallet.did}#key-1", wallet.agreement)
    ours = {f"{wallet.did}#key-1": wallet.agreement}.get

    def packed(name: str, body: dict[str, Any], **headers: object) -> str:
        plain = _message(name, body, **headers) | {"from": wallet.did, "to": [mediator]}
        return orjson.dumps(pack(plain, mediator, sender=sender)).decode()

    warm = min(WARM, rounds)
    forwards = [
        build_request("POST", "/", ENCRYPTED, await wallets.forward(wallet))
        for _ in range(warm + rounds)
    ]
    socket = await connect(wallets.base.replace("http", "ws", 1) + "/", max_size=None)
    conn = await Connection(HOST, port).open()
    after_answer: list[float] = []
    perf = time.perf_counter
    try:
        live = {"live_delivery": True}
        await socket.send(
            packed("messagepickup/3.0/live-delivery-change", live, return_route="all")
        )
        status = unpack(orjson.loads(await socket.recv()), ours).message
        if status["body"].get("live_delivery") is not True:
            raise BenchError(f"v2 live mode was not turned on: {status!r}")
        for n, raw in enumerate(forwards):
            await asyncio.sleep(gap)
            answer = await conn.request(raw)
            t1 = perf()
            frame = await asyncio.wait_for(socket.recv(), 10)
            t2 = perf()
            expect(answer, 202)
            delivery = unpack(orjson.loads(frame), ours).message
            if not delivery["type"].endswith("/delivery"):
                raise BenchError(f"expected a live delivery, got {delivery['type']}")
            ids = [a["id"] for a in delivery["attachments"]]
            ack = {"message_id_list": ids}
            await socket.send(packed("messagepickup/3.0/messages-received", ack))
            if n >= warm:
                after_answer.append((t2 - t1) * 1000)
    finally:
        await conn.close()
        await socket.close()
    return after_answer
