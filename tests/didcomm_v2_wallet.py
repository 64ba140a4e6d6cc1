"""A DIDComm v2 wallet and a v2 sender as the fast tier drives them against the app in
process: the wallet is a did:peer:2 (X25519 `#key-1`, Ed25519 `#key-2`) made from a
`KeyPair` (so a v1 connection's key can be a v2 wallet's too: the dual-stack wallet), it
finds the mediator's DID in `GET /v2/invitation`, authcrypts to it, and opens what comes
back. The real v2 peers (Identus, Veramo) are tests/interop's; this is the protocol's
shape, written from the specs."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import httpx
import orjson

from mediator.client.identity_v2 import IdentityV2
from mediator.didcomm.keys import X25519_MULTICODEC, KeyPair, b58encode
from mediator.didcomm.v2.unpack import pack, unpack
from tests.didcomm_peer import Reach

ENCRYPTED = {"content-type": "application/didcomm-encrypted+json"}
ORG = "https://didcomm.org/"
_ids = itertools.count()


async def mediator_did(node: Reach) -> str:
    async with node.client() as client:
        answer = (await client.get("/v2/invitation")).json()
    return str(answer["did"])


def x25519_did_key(keys: KeyPair) -> str:
    """The did:key of a key's X25519 twin: how a v2 wallet names the key v1 knows."""
    return "did:key:z" + b58encode(X25519_MULTICODEC + keys.x25519_public)


def v2(name: str, body: dict[str, Any] | None = None, **headers: Any) -> dict[str, Any]:
    """A plaintext message of type `name` (e.g. "messagepickup/3.0/status-request")."""
    return {"id": f"v2-{next(_ids)}-{uuid.uuid4().hex[:8]}", "type": ORG + name,
            "body": body or {}, **headers}  # fmt: skip


class WalletV2:
    """`curve`: its key agreement key's (a NIST one is a fresh key, not the KeyPair's)."""

    def __init__(
        self, node: Reach, mediator: str, keys: KeyPair | None = None, curve: str = "X25519"
    ) -> None:
        self.node = node
        self.mediator = mediator
        identity = IdentityV2.make(keys, curve)
        self.keys, self.agreement, self.did = identity.keys, identity.agreement, identity.did

    def pack(self, message: dict[str, Any]) -> bytes:
        message = {"from": self.did, "to": [self.mediator], **message}
        sender = (f"{self.did}#key-1", self.agreement)
        return orjson.dumps(pack(message, self.mediator, sender=sender))

    def open(self, data: bytes | str) -> dict[str, Any]:
        return unpack(orjson.loads(data), {f"{self.did}#key-1": self.agreement}.get).message

    async def post(self, data: bytes) -> httpx.Response:
        async with self.node.client() as client:
            return await client.post("/", content=data, headers=ENCRYPTED)

    async def send(
        self, name: str, body: dict[str, Any] | None = None, *, route: bool = True
    ) -> dict[str, Any] | None:
        """Send `name` with `body`; the answer over the same response, opened (None: 202)."""
        message = v2(name, body, **({"return_route": "all"} if route else {}))
        response = await self.post(self.pack(message))
        assert response.status_code in (200, 202), response.text
        if response.status_code == 202:
            return None
        assert response.headers["content-type"] == ENCRYPTED["content-type"]
        return self.open(response.content)

    async def mediate(self) -> dict[str, Any]:
        """Mediation granted and the wallet's DID registered."""
        grant = await self.send("coordinate-mediation/2.0/mediate-request")
        assert grant is not None and grant["type"].endswith("/mediate-grant"), grant
        update = await self.send(
            "coordinate-mediation/2.0/keylist-update",
            {"updates": [{"recipient_did": self.did, "action": "add"}]},
        )
        assert update is not None and update["body"]["updated"][0]["result"] == "success"
        return grant


def sealed_for(did: str, content: dict[str, Any]) -> dict[str, Any]:
    """A message for `did`, anoncrypted to it (what a v2 sender puts in a forward)."""
    message = v2("basicmessage/2.0/message", {"content": content})
    return pack(message, did)


def forward_of(mediator: str, to: str, inner: dict[str, Any], **headers: Any) -> bytes:
    """A routing 2.0 forward of `inner` to `to`, anoncrypted to the mediator."""
    message = v2("routing/2.0/forward", {"next": to}, to=[mediator], **headers)
    message["attachments"] = [{"id": "a", "data": {"json": inner}}]
    return orjson.dumps(pack(message, mediator))


async def forward_v2(node: Reach, mediator: str, to: str, inner: dict[str, Any]) -> httpx.Response:
    async with node.client() as client:
        return await client.post("/", content=forward_of(mediator, to, inner), headers=ENCRYPTED)
