"""A recipient: gets mediation, registers keys and picks up its messages, over HTTP or a
WebSocket. Each request returns the mediator's decrypted reply."""

from __future__ import annotations

import json
from typing import Any

from mediator.client.agent import Agent, message
from mediator.client.sender import mediator_key
from mediator.client.transports import ClientError, HttpTransport, WsTransport
from mediator.didcomm.keys import KeyPair


class Recipient(Agent):
    def __init__(
        self, base_url: str, mediator: str, transport: str = "http", keys: KeyPair | None = None
    ) -> None:
        super().__init__(mediator, keys)
        self.base_url = base_url.rstrip("/")
        self.transport = transport
        self.http = HttpTransport(self.base_url)
        self.ws = WsTransport(self.base_url)

    @classmethod
    async def connect_to(cls, base_url: str, transport: str = "http") -> Recipient:
        recipient = cls(base_url, await mediator_key(base_url), transport)
        if transport == "ws":
            await recipient.ws.connect()
        return recipient

    async def __aenter__(self) -> Recipient:
        if self.transport == "ws" and not self.ws.connected:
            await self.ws.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.ws.close()
        await self.http.close()

    # ------------------------------------------------------------------ sending

    async def send(self, msg: dict[str, Any], *, anon: bool = False) -> dict[str, Any] | None:
        """Send one message; the decrypted reply (HTTP body, or the next WebSocket frame)
        when it asked for a return route, else None."""
        data = self.pack(msg, anon=anon)
        if self.transport == "http":
            reply = await self.http.send(data)
            return None if reply is None else self.open(reply)
        await self.ws.send(data)
        if msg.get("~transport", {}).get("return_route", "none") == "none":
            return None
        return await self.next_message()

    async def next_frame(self, wait: float = 5) -> bytes:
        """The next WebSocket frame: a reply, a live delivery, or a raw forwarded message."""
        return await self.ws.receive(wait)

    async def next_message(self, wait: float = 5) -> dict[str, Any]:
        frame = await self.next_frame(wait)
        if b'"protected"' not in frame:
            raise ClientError(0, frame.decode(errors="replace"))
        return self.open(frame)

    async def request(self, suffix: str, **fields: Any) -> dict[str, Any]:
        reply = await self.send(message(suffix, **fields))
        if reply is None:
            raise ClientError(202, f"no reply to {suffix}")
        return reply

    # ------------------------------------------------------- coordinate mediation

    async def mediate(self) -> str:
        """Ask for mediation, then register one new recipient key; returns it (base58)."""
        grant = await self.request("coordinate-mediation/1.0/mediate-request")
        if not grant["@type"].endswith("/mediate-grant"):
            raise ClientError(403, json.dumps(grant))
        self.grant = grant
        return await self.add_key()

    async def add_key(self) -> str:
        key = self.new_recipient_key()
        reply = await self.keylist_update(add=[self.recipient_keys[key].did_key])
        if reply["updated"][0]["result"] != "success":
            raise ClientError(409, json.dumps(reply))
        return key

    async def keylist_update(
        self, add: list[str] | None = None, remove: list[str] | None = None
    ) -> dict[str, Any]:
        updates = [{"recipient_key": k, "action": "add"} for k in add or []]
        updates += [{"recipient_key": k, "action": "remove"} for k in remove or []]
        return await self.request("coordinate-mediation/1.0/keylist-update", updates=updates)

    async def keylist_query(
        self, offset: int | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        paginate = {k: v for k, v in (("offset", offset), ("limit", limit)) if v is not None}
        fields: dict[str, Any] = {"paginate": paginate} if paginate else {}
        return await self.request("coordinate-mediation/1.0/keylist-query", **fields)

    # ---------------------------------------------------------------- pickup 2.0

    async def status(self, recipient_key: str | None = None) -> dict[str, Any]:
        fields = {} if recipient_key is None else {"recipient_key": recipient_key}
        return await self.request("messagepickup/2.0/status-request", **fields)

    async def deliver(self, limit: int = 10, recipient_key: str | None = None) -> dict[str, Any]:
        """A `delivery`, or a `status` when nothing waits."""
        fields: dict[str, Any] = {"limit": limit}
        if recipient_key is not None:
            fields["recipient_key"] = recipient_key
        return await self.request("messagepickup/2.0/delivery-request", **fields)

    async def ack(self, message_ids: list[str]) -> dict[str, Any]:
        return await self.request(
            "messagepickup/2.0/messages-received", message_id_list=message_ids
        )

    async def live(self, on: bool = True) -> dict[str, Any]:
        return await self.request("messagepickup/2.0/live-delivery-change", live_delivery=on)

    # ------------------------------------------------- pickup 1.0, queue 1.0, misc

    async def batch_pickup(self, size: int = 10) -> dict[str, Any]:
        return await self.request("messagepickup/1.0/batch-pickup", batch_size=size)

    async def queue_status(self) -> dict[str, Any]:
        return await self.request("queue/1.0/status-request")

    async def queue_update(self, **limits: Any) -> dict[str, Any]:
        return await self.request("queue/1.0/status-update-request", update=limits)

    async def queue_fetch(
        self, limit: int | None = None, acknowledge: list[str] | None = None
    ) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if limit is not None:
            fields["message_count_limit"] = limit
        if acknowledge:
            fields["message_id_list"] = acknowledge
        return await self.request("queue/1.0/fetch-request", **fields)

    async def ping(self) -> dict[str, Any]:
        return await self.request("trust_ping/1.0/ping", response_requested=True)
