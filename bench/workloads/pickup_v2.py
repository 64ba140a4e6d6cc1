"""The DIDComm benchmark's `pickup-v2` workload (bench/workloads/didcomm.py): Pickup 3.0 over
a WebSocket (delivery-request limit 1 -> delivery -> messages-received -> status, the v2
wallet's messages authcrypted to the mediator's DID) in blocks alternating with the same
round trip of Pickup 2.0 by v1 recipients, each kind with its own backlog on node 1."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect

from bench.harness.errors import BenchError
from bench.harness.loadgen import build_request, send_all
from bench.harness.output import fmt_rate, progress
from bench.support.live import ENVELOPE
from bench.support.recipients import Recipients
from bench.support.wallets_v2 import ENCRYPTED, WalletsV2, WalletV2, _message
from mediator.client import Recipient, Sender, message
from mediator.didcomm.v2.unpack import pack, unpack

Loop = Callable[[float], Awaitable[int]]  # runs until the deadline; round trips made


async def _v1_loops(
    recipients: Recipients, port: int, users: int, backlog: int
) -> tuple[list[Loop], list[Recipient]]:
    loops: list[Loop] = []
    made = []
    for _ in range(users):
        recipient, key = await recipients.mediated("ws")
        made.append(recipient)
        sender = Sender(recipient.routing_key)
        forwards = [
            build_request("POST", "/", ENVELOPE, sender.wrap(key, {"n": n})) for n in range(backlog)
        ]
        await send_all(port, forwards, [202])
        loops.append(_v1_loop(recipient))
    return loops, made


def _v1_loop(recipient: Recipient) -> Loop:
    request = recipient.pack(message("messagepickup/2.0/delivery-request", limit=1))

    async def run(deadline: float) -> int:
        done = 0
        while time.perf_counter() < deadline:
            await recipient.ws.send(request)
            delivery = recipient.open(await recipient.ws.receive(10))
            ids = [a["@id"] for a in delivery.get("~attach", [])]
            if not ids:
                raise BenchError(f"pickup-v2: the v1 backlog ran dry: {delivery.get('@type')}")
            ack = message("messagepickup/2.0/messages-received", message_id_list=ids)
            await recipient.ws.send(recipient.pack(ack))
            recipient.open(await recipient.ws.receive(10))  # the status
            done += 1
        return done

    return run


async def _v2_loops(
    wallets: WalletsV2, port: int, users: int, backlog: int
) -> tuple[list[Loop], list[ClientConnection]]:
    loops: list[Loop] = []
    sockets = []
    mediator = await wallets.mediator()
    for _ in range(users):
        wallet = await wallets.mediated()
        forwards = [
            build_request("POST", "/", ENCRYPTED, await wallets.forward(wallet))
            for _ in range(backlog)
        ]
        await send_all(port, forwards, [202])
        socket = await connect(f"ws://127.0.0.1:{port}/", max_size=None)
        sockets.append(socket)
        loops.append(_v2_loop(wallet, mediator, socket))
    return loops, sockets


def _v2_loop(wallet: WalletV2, mediator: str, socket: ClientConnection) -> Loop:
    sender = (f"{wallet.did}#key-1", wallet.agreement)
    ours = {f"{wallet.did}#key-1": wallet.agreement}.get

    def packed(name: str, body: dict[str, Any]) -> str:
        plain = _message(name, body, return_route="all") | {"from": wallet.did, "to": [mediator]}
        return orjson.dumps(pack(plain, mediator, sender=sender)).decode()

    request = packed("messagepickup/3.0/delivery-request", {"limit": 1})

    async def run(deadline: float) -> int:
        done = 0
        while time.perf_counter() < deadline:
            await socket.send(request)
            delivery = unpack(orjson.loads(await socket.recv()), ours).message
            ids = [a["id"] for a in delivery.get("attachments") or []]
            if not ids:
                raise BenchError(f"pickup-v2: the v2 backlog ran dry: {delivery.get('type')}")
            await socket.send(
                packed("messagepickup/3.0/messages-received", {"message_id_list": ids})
            )
            unpack(orjson.loads(await socket.recv()), ours)  # the status
            done += 1
        return done

    return run


async def _block(loops: list[Loop], seconds: float) -> float:
    start = time.perf_counter()
    counts = await asyncio.gather(*(loop(start + seconds) for loop in loops))
    return sum(counts) / (time.perf_counter() - start)


async def run(
    recipients: Recipients, wallets: WalletsV2, port: int, *, users: int, seconds: float, pairs: int
) -> dict[str, Any]:
    """Alternating v1 and v2 blocks; the median ratio of v2's round trips to v1's."""
    backlog = int(seconds * 1500 / users) * (pairs + 1) + 100  # more than both kinds take
    v1, made = await _v1_loops(recipients, port, users, backlog)
    v2, sockets = await _v2_loops(wallets, port, users, backlog)
    progress(f"pickup-v2: {users} recipients of each kind, {backlog} queued messages each")
    try:
        await _block(v1, 1.0)
        await _block(v2, 1.0)  # warm-up
        ratios, v1_rates, v2_rates = [], [], []
        for i in range(pairs):
            a = await _block(v1, seconds)
            b = await _block(v2, seconds)
            v1_rates.append(a)
            v2_rates.append(b)
            ratios.append(b / a)
            progress(
                f"pickup-v2 pair {i + 1}/{pairs}: Pickup 2.0 {fmt_rate(a)}/s | "
                f"Pickup 3.0 {fmt_rate(b)}/s  ratio {b / a:.2f}"
            )
    finally:
        for socket in sockets:
            await socket.close()
        for recipient in made:
            await recipient.close()
    return {
        "ratio_median": statistics.median(ratios),
        "ratios": ratios,
        "v1_round_trips_per_second": v1_rates,
        "v2_round_trips_per_second": v2_rates,
    }
