"""The honest traffic that runs while the fuzzer throws: a live WebSocket recipient, a
polling HTTP recipient, and senders forwarding numbered messages to both. Every event goes
into the history checker (tests/soak/history.py), which says at the end whether anything
was lost or duplicated."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from mediator.client import ClientError, Recipient, Sender, delivered
from tests.didcomm_peer import ENVELOPE
from tests.soak.history import History

BASIC = "https://didcomm.org/basicmessage/1.0/message"


@dataclass
class Honest:
    """Two recipients on different nodes and transports, and what they have been handed."""

    history: History
    live: Recipient
    polling: Recipient
    live_key: str
    polling_key: str
    seen_ids: list[str] = field(default_factory=list)  # message ids, for the fuzzer to abuse
    errors: list[str] = field(default_factory=list)
    stopping: bool = False

    @classmethod
    async def start(cls, live_base: str, polling_base: str, history: History) -> Honest:
        live = await Recipient.connect_to(live_base, "ws")
        await live.mediate_request()
        live_key = await live.register_key()
        polling = await Recipient.connect_to(polling_base, "http")
        await polling.mediate_request()
        polling_key = await polling.register_key()
        status = await live.live_delivery(True)
        if status.get("live_delivery") is not True:
            raise RuntimeError(f"live mode refused: {status}")
        return cls(history, live, polling, live_key, polling_key)

    def _record(self, who: str, agent: Recipient, reply: dict[str, Any]) -> list[str]:
        ids = []
        for mid, body in delivered(reply):
            content = json.loads(agent.open_forwarded(body)["content"])
            self.history.delivered(who, mid, content["sender"], content["seq"])
            ids.append(mid)
        self.seen_ids.extend(ids)
        del self.seen_ids[:-200]
        return ids

    async def _ack(self, who: str, agent: Recipient, ids: list[str]) -> None:
        if ids:
            await agent.messages_received(ids)
            for mid in ids:
                self.history.acknowledged(who, mid)

    async def run_live(self) -> None:
        """Deliveries arrive by themselves; each is acknowledged at once."""
        agent = self.live
        while not self.stopping:
            try:
                frame = await agent.ws.receive(0.5)
            except TimeoutError:
                continue
            except ClientError as exc:
                self.errors.append(f"live socket: {exc}")
                return
            reply = agent.open_forwarded(frame)
            try:
                await self._ack("live", agent, self._record("live", agent, reply))
            except (ClientError, TimeoutError) as exc:
                self.errors.append(f"live acknowledgement: {exc}")
                return

    async def run_polling(self, every: float = 0.2) -> None:
        while not self.stopping:
            if not await self.poll_once():
                await asyncio.sleep(every)

    async def poll_once(self) -> bool:
        """One delivery-request and its acknowledgement; whether anything came."""
        try:
            reply = await self.polling.delivery_request(20)
            ids = self._record("polling", self.polling, reply)
            await self._ack("polling", self.polling, ids)
        except (ClientError, httpx.HTTPError) as exc:
            self.errors.append(f"polling: {exc}")
            return False
        return bool(ids)

    async def finish(self, settle: float) -> None:
        """Wait until every accepted content arrived (or `settle` seconds), then stop."""
        deadline = asyncio.get_running_loop().time() + settle
        while asyncio.get_running_loop().time() < deadline and self.history.check().lost:  # noqa: ASYNC110
            await asyncio.sleep(0.5)
        self.stopping = True
        await asyncio.sleep(0.6)
        while await self.poll_once():
            pass
        for agent in (self.live, self.polling):
            with contextlib.suppress(Exception):
                await agent.close()


async def send_numbered(
    honest: Honest, name: str, base: str, until: asyncio.Event, every: float = 0.02
) -> int:
    """One sequential sender: forwards to both recipients in turn, each answered before the
    next, `seq` rising. Counts a forward accepted only on 202."""
    sender = Sender(honest.live.mediator)
    recipients = (("live", honest.live_key), ("polling", honest.polling_key))
    seq = 0
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        while not until.is_set():
            seq += 1
            who, key = recipients[seq % 2]
            content = json.dumps({"sender": name, "seq": seq})
            data = sender.wrap(key, {"@type": BASIC, "@id": sender.new_id(), "content": content})
            try:
                answer = await http.post("/", content=data, headers=ENVELOPE)
            except httpx.HTTPError:
                honest.history.unanswered(name, seq, who)
                continue
            if answer.status_code == 202:
                honest.history.accepted(name, seq, who)
            else:
                honest.errors.append(f"{name}: forward {seq} answered {answer.status_code}")
            await asyncio.sleep(every)
    return seq
