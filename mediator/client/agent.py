"""An agent's keys and the message helpers every client role shares."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from mediator.didcomm import envelope
from mediator.didcomm.keys import KeyPair

DIDCOMM_ORG = "https://didcomm.org/"


def message(suffix: str, route: str | None = "all", **fields: Any) -> dict[str, Any]:
    """A message of type `https://didcomm.org/<suffix>` (or a full type URI), with a fresh
    `@id` and, unless `route` is None, `~transport.return_route`."""
    prefix = "" if suffix.startswith(("https://", "did:sov:")) else DIDCOMM_ORG
    out: dict[str, Any] = {"@type": prefix + suffix, "@id": str(uuid.uuid4()), **fields}
    if route is not None:
        out["~transport"] = {"return_route": route}
    return out


def attachments(delivery: dict[str, Any]) -> list[tuple[str, bytes]]:
    """(message id, envelope) of each message in a Pickup 2.0 `delivery`."""
    out = []
    for item in delivery.get("~attach", []):
        data = item["data"]
        if "base64" in data:
            text = data["base64"]
            body = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        else:
            body = json.dumps(data["json"]).encode()
        out.append((item["@id"], body))
    return out


class Agent:
    """Holds a connection key (what the mediator knows us by) and any recipient keys."""

    def __init__(self, mediator: str, keys: KeyPair | None = None) -> None:
        self.mediator = mediator
        self.keys = keys or KeyPair.generate()
        self.recipient_keys: dict[str, KeyPair] = {}

    @property
    def verkey(self) -> str:
        return self.keys.verkey_b58

    def new_recipient_key(self) -> str:
        pair = KeyPair.generate()
        self.recipient_keys[pair.verkey_b58] = pair
        return pair.verkey_b58

    def pack(
        self, msg: dict[str, Any], to: list[str] | None = None, *, anon: bool = False
    ) -> bytes:
        """Authcrypt from our connection key (anoncrypt with `anon`), to the mediator."""
        body = json.dumps(msg).encode()
        return envelope.pack(body, to or [self.mediator], None if anon else self.keys)

    def open(self, data: bytes) -> dict[str, Any]:
        """Decrypt an envelope sent to our connection key or one of our recipient keys."""
        keys = {self.verkey: self.keys, **self.recipient_keys}
        opened = envelope.unpack(data, keys.get)
        result: dict[str, Any] = json.loads(opened.message)
        return result
