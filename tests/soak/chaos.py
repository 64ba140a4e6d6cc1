"""Chaos soak: several nodes, many live recipients, thousands of forwards, and a random node
killed (SIGKILL) and restarted every few seconds. Every forward, delivery and
acknowledgement goes into a history (tests/soak/history.py) whose checker says what was
lost, duplicated, reordered; exits 1 when anything was lost, duplicated or stray (reordering
is reported: a hand-out lost with its node is offered again behind later ones).

    python -m tests.soak.chaos --help
    python -m tests.soak.chaos --recipients 300 --messages 5000 --kill-every 4

Recipients behave as Credo in live mode does (half of them as DIDComm v2 wallets in Pickup
3.0's live mode, tests/soak/chaos_v2.py): a WebSocket in live mode on a random node,
every delivery acknowledged; when the socket drops, a reconnect to a live node, a pickup
round (`delivery-request` until empty) and live mode again. A forward counts as sent once a
node answered it 202 ("accepted"); one whose node died before answering is recorded as
unanswered and sent again elsewhere (it may then arrive twice, under another id: the checker
allows one copy per attempt).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sys
import time
from dataclasses import dataclass, field

import httpx
from websockets.exceptions import ConnectionClosed

from mediator.client import ClientError, Recipient, attachments
from tests.didcomm_peer import LIVE, Peer, mediator_key
from tests.servers import TOPOLOGIES, Node, RedisUnderTest
from tests.soak.chaos_v2 import ENCRYPTED, WalletV2, forward_of, mediator_did
from tests.soak.history import History

SENDER = "chaos"  # the one sequential sender of the history


@dataclass
class Tally:
    history: History = field(default_factory=History)
    sent: set[int] = field(default_factory=set)  # sequence numbers answered 202
    seen: set[int] = field(default_factory=set)  # sequence numbers delivered
    reconnects: int = 0
    kills: int = 0
    late: int = 0  # first seen in the last pickup round: a live wallet waits for its next one


class Cluster:
    def __init__(self, redis_url: str, size: int) -> None:
        self.redis_url = redis_url
        self.nodes = [self._node() for _ in range(size)]

    def _node(self) -> Node:
        return Node(
            self.redis_url,
            MEDIATOR_PRESENCE_SECONDS="3",
            MEDIATOR_DELIVERY_TIMEOUT_SECONDS="5",
            MEDIATOR_WORKER_TICK_SECONDS="0.5",
        )

    def start(self) -> None:
        for node in self.nodes:
            node.start()

    def live(self) -> list[Node]:
        return [n for n in self.nodes if n.alive()]

    def any_base(self) -> str:
        return random.choice(self.live() or self.nodes).base

    async def kill_and_restart(self) -> None:
        victim = random.randrange(len(self.nodes))
        self.nodes[victim].kill()
        await asyncio.sleep(0.5)
        fresh = self._node()
        await asyncio.to_thread(fresh.start)
        self.nodes[victim] = fresh

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


class Wallet:
    """One live recipient that survives its node's death."""

    def __init__(self, cluster: Cluster, med: str, tally: Tally) -> None:
        self.cluster, self.med, self.tally = cluster, med, tally
        self.peer: Peer | None = None
        self.key = ""
        self.stopping = False

    async def setup(self) -> None:
        peer = Peer(self.cluster.any_base(), self.med, "ws")
        await peer.connect()
        await peer.exchange()
        self.key = await peer.mediate()
        await peer.send(dict(LIVE, **{"@id": Recipient.new_id()}))
        self.peer = peer

    def _take(self, peer: Peer, delivery: dict, *, last: bool = False) -> list[str]:  # type: ignore[type-arg]
        ids = []
        for mid, body in attachments(delivery):
            ids.append(mid)
            content = peer.open(body)
            seq = int(content["seq"])
            if last and seq not in self.tally.seen:
                self.tally.late += 1
            self.tally.seen.add(seq)
            self.tally.history.delivered(self.key, mid, str(content["sender"]), seq)
        return ids

    async def _ack(self, peer: Peer, ids: list[str]) -> None:
        await peer.ack(ids)  # answered: the mediator has deleted them
        for mid in ids:
            self.tally.history.acknowledged(self.key, mid)

    async def run(self) -> None:
        while not self.stopping:
            peer = self.peer
            assert peer is not None
            try:
                delivery = await peer.next_message(wait=1.0)
                ids = self._take(peer, delivery)
                if ids:
                    await self._ack(peer, ids)
            except TimeoutError:
                continue
            except (ClientError, OSError, ConnectionError, ConnectionClosed):
                await self._reconnect()

    async def _reconnect(self) -> None:
        old = self.peer
        assert old is not None
        self.tally.reconnects += 1
        with contextlib.suppress(Exception):
            await old.close()
        while not self.stopping:
            peer = Peer(self.cluster.any_base(), self.med, "ws")
            peer.keys, peer.mediator = old.keys, old.mediator
            peer.recipient_keys = old.recipient_keys
            try:
                await peer.connect()
                await self._pickup_round(peer)
                await peer.send(dict(LIVE, **{"@id": Recipient.new_id()}))
                self.peer = peer
                return
            except (ClientError, OSError, ConnectionError, ConnectionClosed, TimeoutError):
                with contextlib.suppress(Exception):
                    await peer.close()
                await asyncio.sleep(0.3)

    async def _pickup_round(self, peer: Peer, *, last: bool = False) -> None:
        while True:
            ids = self._take(peer, await peer.deliver(), last=last)
            if not ids:
                return
            await self._ack(peer, ids)

    async def finish(self) -> None:
        """A last pickup round over HTTP through a live node, as a wallet's next poll would
        (the socket may be on a node that is gone)."""
        self.stopping = True
        old = self.peer
        if old is None:
            return
        with contextlib.suppress(Exception):
            await old.close()
        for _ in range(20):
            peer = Peer(self.cluster.any_base(), self.med)
            peer.keys, peer.mediator = old.keys, old.mediator
            peer.recipient_keys = old.recipient_keys
            try:
                await self._pickup_round(peer, last=True)
                return
            except (ClientError, OSError, ConnectionError, ConnectionClosed, httpx.HTTPError):
                await asyncio.sleep(0.3)
            finally:
                await peer.close()


async def send_all(
    cluster: Cluster,
    med: str,
    wallets: list[Wallet | WalletV2],
    count: int,
    rate: float,
    tally: Tally,
    mdid: str,
) -> None:
    from mediator.client import Sender

    sender = Sender(med)
    v1_headers = {"content-type": "application/didcomm-envelope-enc"}
    async with httpx.AsyncClient(timeout=5) as client:
        for n in range(count):
            wallet = random.choice(wallets)
            content = {"sender": SENDER, "seq": n}
            if isinstance(wallet, WalletV2):
                data, headers = forward_of(mdid, wallet.did, content), ENCRYPTED
            else:
                data, headers = sender.wrap(wallet.key, content), v1_headers
            for _ in range(50):
                try:
                    answer = await client.post(
                        cluster.any_base() + "/", content=data, headers=headers
                    )
                except httpx.HTTPError:  # its node died: perhaps after accepting it
                    tally.history.unanswered(SENDER, n, wallet.key)
                    await asyncio.sleep(0.1)
                    continue
                if answer.status_code == 202:
                    tally.sent.add(n)
                    tally.history.accepted(SENDER, n, wallet.key)
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(1 / rate)


async def chaos(cluster: Cluster, every: float, tally: Tally, until: asyncio.Event) -> None:
    while not until.is_set():
        try:
            await asyncio.wait_for(until.wait(), every)
        except TimeoutError:
            await cluster.kill_and_restart()
            tally.kills += 1


async def soak(args: argparse.Namespace) -> int:
    redis = RedisUnderTest(args.topology)
    redis.start()
    print(f"Redis: {redis.kind}", flush=True)
    cluster = Cluster(redis.url, args.nodes)
    tally = Tally()
    started = time.monotonic()
    try:
        await asyncio.to_thread(cluster.start)
        med = await mediator_key(cluster.nodes[0].base)
        mdid = await mediator_did(cluster.nodes[0].base)
        v2_count = round(args.recipients * args.v2_share)
        wallets: list[Wallet | WalletV2] = [
            Wallet(cluster, med, tally) for _ in range(args.recipients - v2_count)
        ]
        wallets += [
            WalletV2(cluster.any_base, mdid, tally.history, tally.seen, SENDER)
            for _ in range(v2_count)
        ]
        for i in range(0, len(wallets), 20):
            await asyncio.gather(*(w.setup() for w in wallets[i : i + 20]))
        print(
            f"[{time.monotonic() - started:6.1f}s] {len(wallets)} recipients live "
            f"({v2_count} of them DIDComm v2)",
            flush=True,
        )
        readers = [asyncio.create_task(w.run()) for w in wallets]
        done = asyncio.Event()
        chaos_task = asyncio.create_task(chaos(cluster, args.kill_every, tally, done))
        await send_all(cluster, med, wallets, args.messages, args.rate, tally, mdid)
        done.set()
        await chaos_task
        print(
            f"[{time.monotonic() - started:6.1f}s] sent {len(tally.sent)}, "
            f"{tally.kills} nodes killed; waiting for the last deliveries",
            flush=True,
        )
        deadline = time.monotonic() + args.settle
        while time.monotonic() < deadline and not tally.sent <= tally.seen:  # noqa: ASYNC110
            await asyncio.sleep(0.5)
        for w in wallets:
            w.stopping = True
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        for i in range(0, len(wallets), 20):
            await asyncio.gather(*(w.finish() for w in wallets[i : i + 20]))
    finally:
        await asyncio.to_thread(cluster.stop)
        redis.stop()
    verdict = tally.history.check()
    tally.reconnects += sum(w.reconnects for w in wallets if isinstance(w, WalletV2))
    print(
        f"chaos: nodes killed {tally.kills}, reconnects {tally.reconnects}, only in the last "
        f"pickup round {tally.late}, {time.monotonic() - started:.0f} s"
    )
    print(verdict.summary())
    return 1 if verdict.lost or verdict.duplicated or verdict.stray else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.soak.chaos", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--nodes", type=int, default=3, help="mediator nodes (default 3)")
    parser.add_argument("--recipients", type=int, default=300, help="live recipients (300)")
    parser.add_argument("--messages", type=int, default=5000, help="forwards to send (5000)")
    parser.add_argument("--rate", type=float, default=200.0, help="forwards per second (200)")
    parser.add_argument(
        "--v2-share",
        type=float,
        default=0.5,
        help="the share of the recipients that are DIDComm v2 wallets (0.5)",
    )
    parser.add_argument(
        "--kill-every", type=float, default=4.0, help="seconds between node kills (4)"
    )
    parser.add_argument(
        "--settle", type=float, default=30.0, help="seconds to wait for the last deliveries"
    )
    parser.add_argument(
        "--topology",
        choices=TOPOLOGIES,
        default="",
        help="the Redis deployment: standalone, a Sentinel set or a three-primary Redis "
        "Cluster (default: MEDIATOR_TEST_TOPOLOGY, else standalone)",
    )
    return asyncio.run(soak(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
