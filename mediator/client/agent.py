"""An agent's keys, and the message helpers every client role shares."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from mediator.didcomm import envelope
from mediator.didcomm.keys import KeyPair, normalize_key
from mediator.errors import EnvelopeError

DIDCOMM_ORG = "https://didcomm.org/"
_FULL_TYPE_PREFIXES = ("https://", "http://", "did:")


def new_id() -> str:
    return str(uuid.uuid4())


def message(type_suffix: str, *, route: str | None = "all", **fields: Any) -> dict[str, Any]:
    """A message of type `https://didcomm.org/<type_suffix>` (a full type URI is kept as is)
    with a fresh `@id` and `~transport.return_route: route` (none when `route` is None)."""
    prefix = "" if type_suffix.startswith(_FULL_TYPE_PREFIXES) else DIDCOMM_ORG
    out: dict[str, Any] = {"@type": prefix + type_suffix, "@id": new_id(), **fields}
    if route is not None:
        out["~transport"] = {"return_route": route}
    return out


class Agent:
    """A connection key (what the mediator knows us by), the mediator's verkey, and any
    recipient keys the agent made with `add_key`."""

    new_id = staticmethod(new_id)
    message = staticmethod(message)

    def __init__(self, mediator: str, keys: KeyPair | None = None) -> None:
        self.mediator = normalize_key(mediator)
        self.keys = keys if keys is not None else KeyPair.generate()
        self.recipient_keys: dict[str, KeyPair] = {}

    @property
    def verkey(self) -> str:
        return self.keys.verkey_b58

    @property
    def did_key(self) -> str:
        return self.keys.did_key

    def add_key(self) -> str:
        """A new recipient key held by this agent (not yet registered): its base58 verkey."""
        pair = KeyPair.generate()
        self.recipient_keys[pair.verkey_b58] = pair
        return pair.verkey_b58

    def key_for(self, kid: str) -> KeyPair | None:
        """Our key pair for an envelope `kid`: the connection key or a recipient key."""
        if kid == self.keys.verkey_b58:
            return self.keys
        return self.recipient_keys.get(kid)

    def pack(
        self, msg: dict[str, Any], to: Sequence[str] | None = None, *, anon: bool = False
    ) -> bytes:
        """Authcrypt from our connection key (anoncrypt with `anon`), to the mediator unless
        `to` names other keys. JSON is written ASCII-only: aries-staticagent reads nothing else."""
        body = json.dumps(msg).encode("ascii")
        recipients = [self.mediator] if to is None else list(to)
        return envelope.pack(body, recipients, None if anon else self.keys)

    def unpack(self, data: bytes) -> tuple[dict[str, Any], str | None]:
        """The message of an envelope for any of our keys, and its sender's verkey (None
        when anoncrypted). EnvelopeError when it is not for us or not a JSON object."""
        opened = envelope.unpack(data, self.key_for)
        try:
            msg = json.loads(opened.message)
        except ValueError as exc:
            raise EnvelopeError("the decrypted message is not JSON") from exc
        if not isinstance(msg, dict):
            raise EnvelopeError("the decrypted message is not a JSON object")
        return msg, opened.sender_verkey

    def open_forwarded(self, data: bytes) -> dict[str, Any]:
        """Decrypt a message sent to one of our keys (a forwarded message, or a reply)."""
        return self.unpack(data)[0]

    # Names the older test suites and benchmarks use.
    open = open_forwarded
    new_recipient_key = add_key
