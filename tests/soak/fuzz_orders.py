"""Valid messages in hostile orders, from connections of their own: acknowledgements before
any delivery, live mode toggled mid-batch, a key removed while forwards to it arrive,
mediation requested twice, a handshake completed before its request, a replayed request.
What they forward is numbered and goes into a history of its own: nothing accepted may be
lost or delivered twice, whatever the order."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from typing import TYPE_CHECKING, Any

import httpx
from websockets.exceptions import WebSocketException

from mediator.client import ClientError, Recipient, Sender, delivered
from mediator.didcomm.message import DIDCOMM_ORG
from tests.didcomm_peer import ENVELOPE
from tests.servers import Node
from tests.soak.fuzz_honest import BASIC, Honest
from tests.soak.history import History

if TYPE_CHECKING:
    from tests.soak.fuzz import Budget, Tally

LAYER = "order"
# The nodes' delivery deadline (fuzz.py: 10 s) and a margin: a message handed out on a socket
# that closed without acknowledging it is offered again by then at the latest.
REOFFERED_WITHIN = 15.0


class Orders:
    def __init__(
        self,
        nodes: list[Node],
        mediator: str,
        tally: Tally,
        history: History,
        honest: Honest,
        rng: random.Random,
    ) -> None:
        self.nodes = nodes
        self.mediator = mediator
        self.tally = tally
        self.history = history
        self.honest = honest
        self.rng = rng
        self.seq = 0
        self.sender = Sender(mediator)

    def base(self) -> str:
        return self.rng.choice(self.nodes).base

    def count(self, n: int = 1) -> None:
        self.tally.inputs[LAYER] += n

    async def agent(self) -> tuple[Recipient, str]:
        agent = await Recipient.connect_to(self.base(), "ws")
        await agent.mediate_request()
        return agent, await agent.register_key()

    async def forward(self, http: httpx.AsyncClient, who: str, key: str) -> None:
        """One numbered forward; accepted in the history only when answered 202."""
        self.seq += 1
        seq = self.seq  # forwards run concurrently: this one's number
        content = json.dumps({"sender": "orders", "seq": seq})
        msg = {"@type": BASIC, "@id": self.sender.new_id(), "content": content}
        answer = await http.post("/", content=self.sender.wrap(key, msg), headers=ENVELOPE)
        self.count()
        self.tally.http[answer.status_code] += 1
        if answer.status_code == 202:
            self.history.accepted("orders", seq, who)

    def take(self, who: str, agent: Recipient, reply: dict[str, Any]) -> list[str]:
        ids = []
        for mid, body in delivered(reply):
            content = json.loads(agent.open_forwarded(body)["content"])
            self.history.delivered(who, mid, content["sender"], content["seq"])
            ids.append(mid)
        return ids

    async def drain(self, who: str, agent: Recipient) -> None:
        """Live frames that came meanwhile, then delivery-requests until the queue is empty;
        every message acknowledged."""
        while True:
            ids: list[str] = []
            while not agent.inbox.empty():
                frame = agent.inbox.get_nowait()
                ids += self.take(who, agent, agent.open_forwarded(frame))
            reply = await agent.delivery_request(50)
            self.count()
            ids += self.take(who, agent, reply)
            if ids:
                await agent.messages_received(ids)
                self.count()
                for mid in ids:
                    self.history.acknowledged(who, mid)
            if reply["@type"].endswith("/status") and agent.inbox.empty():
                return

    # ---------------------------------------------------------------- scenarios

    async def ack_before_delivery(self, http: httpx.AsyncClient, n: int) -> None:
        agent, key = await self.agent()
        who = f"ack-first-{n}"
        try:
            await agent.messages_received([Recipient.new_id() for _ in range(5)])
            await agent.messages_received(self.honest.seen_ids[-20:] or ["x" * 36])
            self.count(2)
            for _ in range(4):
                await self.forward(http, who, key)
            await agent.messages_received([Recipient.new_id()])
            self.count()
            await self.drain(who, agent)
        finally:
            await agent.close()

    async def live_toggle(self, http: httpx.AsyncClient, n: int) -> None:
        agent, key = await self.agent()
        who = f"live-toggle-{n}"
        try:
            for _ in range(5):
                await self.forward(http, who, key)
            await agent.live_delivery(True)
            for i in range(10):
                await self.forward(http, who, key)
                if i == 4:
                    await agent.live_delivery(False)
                    await agent.delivery_request(3)  # handed out, acknowledged in drain
                    await agent.live_delivery(True)
                    self.count(3)
            await agent.live_delivery(False)
            self.count(2)
            await asyncio.sleep(0.2)
            await self.drain(who, agent)
        finally:
            await agent.close()
        # What the socket carried unacknowledged is released once its node has seen it
        # close (or at its deadline): a new socket of the same connection picks it up. It
        # may ask before that release, so it asks again until everything accepted came.
        again = Recipient(self.base(), agent.mediator, "ws", agent.keys)
        again.recipient_keys = agent.recipient_keys  # what is forwarded to it opens there too
        try:
            await again.connect()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + REOFFERED_WITHIN
            await self.drain(who, again)
            while self.history.undelivered(who) and loop.time() < deadline:
                await asyncio.sleep(0.1)
                await self.drain(who, again)
        finally:
            await again.close()

    async def remove_while_forwarding(self, http: httpx.AsyncClient, n: int) -> None:
        agent, key = await self.agent()
        who = f"remove-{n}"
        try:
            forwards = asyncio.gather(*(self.forward(http, who, key) for _ in range(8)))
            await asyncio.sleep(0.005)
            await agent.keylist_update(remove=[key])
            await agent.keylist_update(remove=[key])  # twice: no_change
            self.count(2)
            await forwards
            await self.forward(http, who, key)  # refused now (404)
            await self.drain(who, agent)
        finally:
            await agent.close()

    async def mediate_twice(self, http: httpx.AsyncClient, n: int) -> None:
        agent, key = await self.agent()
        who = f"twice-{n}"
        try:
            for _ in range(3):
                await self.forward(http, who, key)
            await agent.mediate_request()
            await agent.mediate_request()
            self.count(2)
            reply = await agent.keylist_update(add=[self.honest.live_key])  # someone else's
            self.count()
            if reply["updated"][0]["result"] != "client_error":
                self.tally.find("took another connection's key", LAYER, json.dumps(reply).encode())
            await self.drain(who, agent)
        finally:
            await agent.close()

    async def complete_first(self, http: httpx.AsyncClient, n: int) -> None:
        agent = Recipient(self.base(), self.mediator, "ws")
        try:
            await agent.connect()
            complete = agent.message("didexchange/1.1/complete")
            complete["~thread"] = {"thid": agent.new_id()}
            reply = await agent.send(complete)
            self.count()
            if reply is None or "problem-report" not in reply["@type"]:
                self.tally.find("complete before request", LAYER, json.dumps(reply).encode())
            response = await agent.exchange()
            self.count(2)
            with contextlib.suppress(ClientError):
                request = agent.message(
                    "didexchange/1.1/request", label="again", did=response["did"]
                )
                await agent.send(request)  # our DID as theirs: refused
            await agent.send(agent.message(f"{DIDCOMM_ORG}didexchange/1.1/complete", route=None))
            self.count(2)
            await agent.mediate_request()
            self.count()
        finally:
            await agent.close()

    SCENARIOS = (
        "ack_before_delivery",
        "live_toggle",
        "remove_while_forwarding",
        "mediate_twice",
        "complete_first",
    )


async def run(
    nodes: list[Node],
    mediator: str,
    budget: Budget,
    tally: Tally,
    history: History,
    honest: Honest,
    seed: int,
) -> None:
    """Scenarios one after another until the fuzzers' budget is spent."""
    orders = Orders(nodes, mediator, tally, history, honest, random.Random(seed))
    n = 0
    async with httpx.AsyncClient(base_url=nodes[0].base, timeout=30) as http:
        while budget.left > 0:
            name = Orders.SCENARIOS[n % len(Orders.SCENARIOS)]
            n += 1
            try:
                await getattr(orders, name)(http, n)
            except (ClientError, TimeoutError, httpx.HTTPError, WebSocketException) as exc:
                tally.find(f"order scenario {name} failed: {exc!r}", LAYER, b"")
