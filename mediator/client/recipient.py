"""A recipient: gets mediation, registers keys and picks up its messages over one transport.

Each call sends one message with `return_route: all` and returns the mediator's decrypted
reply. Over HTTP the reply is the response body. On a WebSocket it is the frame whose
`~thread.thid` (for a problem-report, `pthid`) is the request's thread; every other frame
(live deliveries, messages drained by implicit pickup, answers to raw sends) goes to
`inbox`. A JSON error frame (`{"error", "code"}`, no `protected`) fails the oldest request
still waiting, since the mediator answers a socket's frames in order; with none waiting it
goes to `inbox` too.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import httpx
import orjson

from mediator.client.agent import Agent
from mediator.client.transports import (
    ClientError,
    HttpTransport,
    Transport,
    WsConnector,
    WsTransport,
    connect_websocket,
    fetch_invitation,
)
from mediator.didcomm import envelope
from mediator.didcomm.did_doc import QUEUE_ENDPOINT, parse_doc
from mediator.didcomm.did_peer import numalgo2_did, resolve
from mediator.didcomm.keys import KeyPair, did_key_to_verkey, normalize_key
from mediator.didcomm.signatures import verify_attachment
from mediator.errors import DidError, EnvelopeError


def delivered(reply: dict[str, Any]) -> list[tuple[str, bytes]]:
    """(message id, envelope) of each message a pickup reply carries: a Pickup 2.0
    `delivery` (`~attach[].data.base64` or `data.json`), and also a Pickup 1.0 `batch`
    (`messages~attach[]`) or a Queue 1.0 `batch` (`messages[]`)."""
    out: list[tuple[str, bytes]] = []
    for item in reply.get("~attach") or []:
        data = item.get("data") or {}
        if "base64" in data:
            body = envelope.b64url_decode(data["base64"], "data.base64")
        else:
            body = _as_bytes(data.get("json"))
        out.append((item["@id"], body))
    for item in reply.get("messages~attach") or []:
        out.append((item["id"], _as_bytes(item["message"])))
    for item in reply.get("messages") or []:
        out.append((item["id"], _as_bytes(item["msg"])))
    return out


def _as_bytes(value: object) -> bytes:
    return value.encode() if isinstance(value, str) else json.dumps(value).encode()


def _thread_key(msg: dict[str, Any]) -> str | None:
    """The thread a reply to `msg` will name (RFC 0008: the message's own id by default)."""
    thread = msg.get("~thread")
    if isinstance(thread, dict) and isinstance(thread.get("thid"), str):
        return str(thread["thid"])
    mid = msg.get("@id")
    return mid if isinstance(mid, str) else None


def _replies_to(reply: dict[str, Any]) -> str | None:
    thread = reply.get("~thread")
    if not isinstance(thread, dict):
        return None
    for name in ("thid", "pthid"):  # problem-reports name the request's thread as pthid
        if isinstance(thread.get(name), str):
            return str(thread[name])
    return None


class Recipient(Agent):
    """A mediated agent bound to one transport.

    `transport` is an `HttpTransport` or `WsTransport`, or the mediator's base URL with
    `kind` ("http" or "ws") saying which to make, through `client` or `connector` when given
    (the transports' own: real sockets).
    """

    def __init__(
        self,
        transport: Transport | str,
        mediator: str,
        kind: str = "http",
        keys: KeyPair | None = None,
        *,
        timeout: float = 10.0,
        client: httpx.AsyncClient | None = None,
        connector: WsConnector = connect_websocket,
    ) -> None:
        super().__init__(mediator, keys)
        if isinstance(transport, str):
            if kind not in ("http", "ws"):
                raise ValueError(f"kind must be 'http' or 'ws', not {kind!r}")
            transport = (
                HttpTransport(transport, client=client)
                if kind == "http"
                else WsTransport(transport, connector=connector)
            )
        self.channel: Transport = transport
        self.kind: str = transport.kind
        self.timeout = timeout
        self.grant: dict[str, Any] | None = None
        self.mediator_did: str | None = None  # set by `exchange`
        self.invitation_key = self.mediator  # what `mediator` was before the exchange
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._http_inbox: asyncio.Queue[bytes] = asyncio.Queue()
        if isinstance(transport, WsTransport):
            transport.on_frame = self._take_reply
            transport.on_close = self._fail_waiting

    @classmethod
    async def connect_to(
        cls,
        base_url: str,
        transport: str = "http",
        keys: KeyPair | None = None,
        *,
        client: httpx.AsyncClient | None = None,
        connector: WsConnector = connect_websocket,
    ) -> Recipient:
        """A recipient connected (DID Exchange 1.1) to the mediator at `base_url`, whose
        key and invitation are read from `/invitation`."""
        oob = (await fetch_invitation(base_url, client=client))["invitation"]
        mediator = did_key_to_verkey(oob["services"][0]["recipientKeys"][0])
        recipient = cls(base_url, mediator, transport, keys, client=client, connector=connector)
        await recipient._open_channel()
        await recipient.exchange(oob)
        return recipient

    async def exchange(
        self, invitation: dict[str, Any] | None = None, *, label: str = "python client"
    ) -> dict[str, Any]:
        """Connect as a DID Exchange 1.1 requester with a did:peer:2 of our key and no
        endpoint (replies come by return route). Checks that the response's DID is signed
        by the mediator's key, sends `complete`, and returns the response."""
        request_id = self.new_id()
        thread: dict[str, Any] = {"thid": request_id}
        if invitation is not None:
            thread["pthid"] = invitation["@id"]
        request = self.message(
            "didexchange/1.1/request", label=label, did=numalgo2_did(self.keys, [QUEUE_ENDPOINT])
        )
        request.update({"@id": request_id, "~thread": thread})
        self.mediator = self.invitation_key  # a request goes to the invitation's key
        response = await self.request_message(request)
        self.take_response(response)
        complete = self.message("didexchange/1.1/complete", route=None)
        complete["~thread"] = thread
        await self.send(complete)
        return response

    @property
    def inbox(self) -> asyncio.Queue[bytes]:
        """Frames that were not a reply we waited for (always empty over HTTP)."""
        if isinstance(self.channel, WsTransport):
            return self.channel.frames
        return self._http_inbox

    @property
    def transport(self) -> str:
        """Which transport: "http" or "ws" (the object is `channel`)."""
        return self.kind

    @property
    def ws(self) -> WsTransport:
        if not isinstance(self.channel, WsTransport):
            raise ClientError(0, "this recipient talks HTTP, not over a WebSocket")
        return self.channel

    async def connect(self) -> None:
        """Open the WebSocket (nothing to do over HTTP)."""
        await self._open_channel()

    async def _open_channel(self) -> None:
        # Not `connect`: subclasses in the test suites give that name their own meaning.
        if isinstance(self.channel, WsTransport):
            await self.channel.connect()

    async def close(self) -> None:
        await self.channel.close()

    async def __aenter__(self) -> Recipient:
        await self._open_channel()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ sending

    async def send(self, msg: dict[str, Any], *, anon: bool = False) -> dict[str, Any] | None:
        """Send one message; its decrypted reply, or None when the message asked for none
        (or, over HTTP, the mediator answered 202)."""
        data = self.pack(msg, anon=anon)
        if isinstance(self.channel, HttpTransport):
            reply = await self.channel.send(data)
            return None if reply is None else self.open_forwarded(reply)
        transport = msg.get("~transport")
        route = transport.get("return_route") if isinstance(transport, dict) else None
        if route in (None, "none"):
            await self._ws_send(data)
            return None
        thread = _thread_key(msg)
        if thread is None:  # nothing to match a reply by: take the next frame
            await self._ws_send(data)
            return await self.next_message(self.timeout)
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[thread] = waiter
        try:
            await self._ws_send(data)
            return await asyncio.wait_for(waiter, self.timeout)
        finally:
            if self._waiting.get(thread) is waiter:
                del self._waiting[thread]
            if waiter.done() and not waiter.cancelled():
                waiter.exception()  # failed while the send itself failed: seen, not logged

    async def _ws_send(self, data: bytes) -> None:
        ws = self.ws
        if not ws.connected:
            await ws.connect()
        await ws.send(data)

    def _take_reply(self, frame: bytes) -> bool:
        """The WebSocket hook: resolve the request this frame answers, if one waits."""
        if not self._waiting:
            return False
        try:
            outer = orjson.loads(frame)
        except ValueError:
            return False
        if not isinstance(outer, dict):
            return False
        if "protected" not in outer:  # a JSON error frame: the oldest request's answer
            oldest = next(iter(self._waiting.values()))
            if not oldest.done():
                oldest.set_exception(ClientError(0, frame.decode(errors="replace")))
            return True
        try:
            opened = envelope.unpack(outer, {self.verkey: self.keys}.get)
            reply = json.loads(opened.message)
        except (EnvelopeError, ValueError):
            return False  # not for our connection key: a forwarded message
        waiter = self._waiting.get(_replies_to(reply) or "") if isinstance(reply, dict) else None
        if waiter is None or waiter.done():
            return False
        waiter.set_result(reply)
        return True

    def _fail_waiting(self) -> None:
        for waiter in self._waiting.values():
            if not waiter.done():
                waiter.set_exception(ClientError(0, "the WebSocket closed before the reply"))

    @property
    def routing_key(self) -> str:
        """The key senders forward to: the grant's routing key, else the invitation's."""
        if self.grant and self.grant.get("routing_keys"):
            return normalize_key(self.grant["routing_keys"][-1])
        return self.invitation_key

    def take_response(self, response: dict[str, Any]) -> None:
        """Check a DID Exchange response (its DID signed by the invitation's key, our
        `mediator` so far) and talk to the key of the mediator's DID document from now on."""
        if not str(response.get("@type", "")).endswith("/response"):
            raise ClientError(403, json.dumps(response))
        try:
            rotate = response.get("did_rotate~attach") or {}
            payload, signers = verify_attachment(rotate.get("data"))
        except DidError as exc:
            raise ClientError(502, f"the response's did_rotate~attach: {exc}") from exc
        if payload.decode() != response.get("did") or self.mediator not in signers:
            raise ClientError(502, "the response's DID is not signed by the invitation's key")
        self.mediator_did = str(response["did"])
        try:
            self.mediator = parse_doc(resolve(self.mediator_did)).recipient_key
        except DidError as exc:
            raise ClientError(502, f"the mediator's DID: {exc}") from exc

    async def request(self, type_suffix: str, **fields: Any) -> dict[str, Any]:
        """Send `message(type_suffix, **fields)` with return_route all; the reply."""
        return await self.request_message(self.message(type_suffix, **fields))

    async def request_message(self, msg: dict[str, Any]) -> dict[str, Any]:
        reply = await self.send(msg)
        if reply is None:
            raise ClientError(202, f"no reply to {msg.get('@type')}")
        return reply

    async def next_frame(self, wait: float = 5.0) -> bytes:
        """The next frame of `inbox` (WebSocket): a live delivery, a drained message, …"""
        if isinstance(self.channel, WsTransport):
            return await self.channel.receive(wait)
        return await asyncio.wait_for(self._http_inbox.get(), wait)

    async def next_message(self, wait: float = 5.0) -> dict[str, Any]:
        """The next frame of `inbox`, decrypted; ClientError for a JSON error frame."""
        frame = await self.next_frame(wait)
        if b'"protected"' not in frame:
            raise ClientError(0, frame.decode(errors="replace"))
        return self.open_forwarded(frame)

    # ------------------------------------------------------- coordinate mediation

    async def mediate_request(self) -> dict[str, Any]:
        """A `mediate-grant` (kept as `grant`) or a `mediate-deny`."""
        reply = await self.request("coordinate-mediation/1.0/mediate-request")
        if str(reply.get("@type", "")).endswith("/mediate-grant"):
            self.grant = reply
        return reply

    async def keylist_update(
        self, add: Sequence[str] = (), remove: Sequence[str] = ()
    ) -> dict[str, Any]:
        updates = [{"recipient_key": k, "action": "add"} for k in add]
        updates += [{"recipient_key": k, "action": "remove"} for k in remove]
        return await self.request("coordinate-mediation/1.0/keylist-update", updates=updates)

    async def keylist_query(
        self, offset: int | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        paginate = {k: v for k, v in (("offset", offset), ("limit", limit)) if v is not None}
        fields: dict[str, Any] = {"paginate": paginate} if paginate else {}
        return await self.request("coordinate-mediation/1.0/keylist-query", **fields)

    async def register_key(self) -> str:
        """`add_key`, then register it (as a did:key, as Credo does); its base58 verkey."""
        key = self.add_key()
        reply = await self.keylist_update(add=[self.recipient_keys[key].did_key])
        updated = reply.get("updated") or [{}]
        if updated[0].get("result") != "success":
            raise ClientError(409, json.dumps(reply))
        return key

    async def mediate(self) -> str:
        """Get mediation and register one new recipient key; returns the key (base58)."""
        reply = await self.mediate_request()
        if self.grant is not reply:
            raise ClientError(403, json.dumps(reply))
        return await self.register_key()

    # ---------------------------------------------------------------- pickup 2.0

    async def status(self, recipient_key: str | None = None) -> dict[str, Any]:
        fields = {} if recipient_key is None else {"recipient_key": recipient_key}
        return await self.request("messagepickup/2.0/status-request", **fields)

    async def delivery_request(
        self, limit: int = 10, recipient_key: str | None = None
    ) -> dict[str, Any]:
        """A `delivery`, or a `status` when nothing waits."""
        fields: dict[str, Any] = {"limit": limit}
        if recipient_key is not None:
            fields["recipient_key"] = recipient_key
        return await self.request("messagepickup/2.0/delivery-request", **fields)

    async def messages_received(self, ids: Sequence[str]) -> dict[str, Any]:
        return await self.request("messagepickup/2.0/messages-received", message_id_list=list(ids))

    async def live_delivery(self, on: bool = True) -> dict[str, Any]:
        return await self.request("messagepickup/2.0/live-delivery-change", live_delivery=on)

    # ------------------------------------------------- pickup 1.0, queue 1.0, misc

    async def batch_pickup(self, size: int = 10) -> dict[str, Any]:
        return await self.request("messagepickup/1.0/batch-pickup", batch_size=size)

    async def queue_status(self) -> dict[str, Any]:
        return await self.request("queue/1.0/status-request")

    async def queue_update(self, **limits: Any) -> dict[str, Any]:
        return await self.request("queue/1.0/status-update-request", update=limits)

    async def queue_fetch(
        self, limit: int | None = None, acknowledge: Sequence[str] = ()
    ) -> dict[str, Any]:
        """A `batch`; `acknowledge` deletes those ids first (Queue 1.0 has no other ack)."""
        fields: dict[str, Any] = {}
        if limit is not None:
            fields["message_count_limit"] = limit
        if acknowledge:
            fields["message_id_list"] = list(acknowledge)
        return await self.request("queue/1.0/fetch-request", **fields)

    async def ping(self) -> dict[str, Any]:
        return await self.request("trust_ping/1.0/ping", response_requested=True)

    async def noop(self) -> dict[str, Any] | None:
        """A `noop` with return_route all, for implicit pickup: over HTTP the queued message
        the answer carries, decrypted (None for 202); on a WebSocket None, and the drained
        messages arrive in `inbox`."""
        msg = self.message("noop/1.0/noop")
        if isinstance(self.channel, HttpTransport):
            return await self.send(msg)
        await self._ws_send(self.pack(msg))
        return None

    # Names the older test suites and benchmarks use.
    deliver = delivery_request
    ack = messages_received
    live = live_delivery
