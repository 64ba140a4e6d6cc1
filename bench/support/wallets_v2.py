"""DIDComm v2 wallets of a node made the way a v2 wallet makes them (coordinate-mediation
2.0 over HTTP: mediate-request, keylist-update of its did:peer:2), and the routing 2.0
forwards a v2 sender would POST to them (anoncrypt X25519 or P-256, A256CBC-HS512, outer
and inner), packed before timing so that the figures measure the server."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import orjson

from bench.harness.errors import BenchError
from bench.harness.loadgen import HOST, Operation, build_request, rotating
from mediator.client.identity_v2 import IdentityV2
from mediator.didcomm.v2 import jwe
from mediator.didcomm.v2.dids import resolve
from mediator.didcomm.v2.unpack import pack

ENCRYPTED = {"content-type": "application/didcomm-encrypted+json"}
ORG = "https://didcomm.org/"
RECIPIENTS_PER_BLOCK = 8
CONTENT = "x" * 1000  # the forwarded message's content, as the v1 forward's (about 1 KiB)


class WalletV2:
    """A wallet whose key agreement key is on `curve` (X25519: its Ed25519 key's twin)."""

    def __init__(self, curve: str = "X25519") -> None:
        identity = IdentityV2.make(curve=curve)
        self.keys, self.agreement, self.did = identity.keys, identity.agreement, identity.did


def _message(name: str, body: dict[str, Any], **headers: Any) -> dict[str, Any]:
    return {"id": uuid.uuid4().hex, "type": ORG + name, "body": body, **headers}


class WalletsV2:
    """v2 wallets of the node on `port`."""

    def __init__(self, port: int) -> None:
        self.base = f"http://{HOST}:{port}"
        self._mediator: str | None = None

    async def mediator(self) -> str:
        if self._mediator is None:
            async with httpx.AsyncClient(base_url=self.base, timeout=30) as client:
                self._mediator = str((await client.get("/v2/invitation")).json()["did"])
        return self._mediator

    async def mediated(self, curve: str = "X25519") -> WalletV2:
        """A wallet granted mediation, its DID registered (on a NIST curve, the nodes list
        their NIST keys: MEDIATOR_V2_NIST_KEYS)."""
        mediator = await self.mediator()
        wallet = WalletV2(curve)
        sender = (f"{wallet.did}#key-1", wallet.agreement)
        update = {"updates": [{"recipient_did": wallet.did, "action": "add"}]}
        async with httpx.AsyncClient(base_url=self.base, timeout=30) as client:
            for name, body in (("mediate-request", {}), ("keylist-update", update)):
                message = _message(f"coordinate-mediation/2.0/{name}", body, return_route="all")
                message |= {"from": wallet.did, "to": [mediator]}
                sealed = orjson.dumps(pack(message, mediator, sender=sender))
                answer = await client.post("/", content=sealed, headers=ENCRYPTED)
                if answer.status_code != 200:
                    raise BenchError(f"v2 {name}: {answer.status_code} {answer.text[:300]}")
        return wallet

    async def forward(self, wallet: WalletV2) -> bytes:
        """A forward of a 1 KiB basic message to `wallet`, as a v2 sender packs it: both
        layers anoncrypted on the wallet's curve (to our key on it, and to the wallet)."""
        mediator = await self.mediator()
        inner = pack(_message("basicmessage/2.0/message", {"content": CONTENT}), wallet.did)
        outer = _message("routing/2.0/forward", {"next": wallet.did}, to=[mediator])
        outer["attachments"] = [{"id": "1", "data": {"json": inner}}]
        doc = resolve(mediator)
        ours = [(doc.kid(k), k.agreement) for k in doc.agreement
                if k.agreement is not None and k.agreement.crv == wallet.agreement.crv]  # fmt: skip
        if not ours:
            raise BenchError(f"the mediator's DID lists no {wallet.agreement.crv} key")
        return orjson.dumps(jwe.encrypt(orjson.dumps(outer), ours))

    async def forward_op(self, curve: str = "X25519") -> Operation:
        """A closed-loop operation: POST / with a v2 forward, answered 202, rotating over
        RECIPIENTS_PER_BLOCK fresh wallets on `curve`."""
        raws = []
        for _ in range(RECIPIENTS_PER_BLOCK):
            wallet = await self.mediated(curve)
            envelope = await self.forward(wallet)
            raws.append(build_request("POST", "/", ENCRYPTED, envelope))
        return rotating(raws, 202)
