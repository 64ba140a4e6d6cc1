"""The mediator's side of a real wallet, settled: nothing queued for it or handed out to it,
no push or phone notification running or scheduled. From then on nothing more can reach the
wallet until a new message comes, so "none came twice" can be asserted at once instead of
after a pause in which a duplicate would have shown."""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs, urlsplit

import base58

from mediator.didcomm.keys import did_key_to_verkey
from mediator.engine import Engine, keys
from mediator.errors import QueueNotFound
from mediator.mediation.mailbox import queue_of
from mediator.notify.devices import schedule_keys
from mediator.storage.clients import Backend
from tests.eventually import eventually


def invitation_key(url: str) -> str:
    """The first recipient key (base58) of an Out-of-Band invitation URL's inline service."""
    encoded = parse_qs(urlsplit(url).query)["oob"][0]
    oob = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    service = oob["services"][0]
    assert isinstance(service, dict), f"no inline service in the invitation: {oob}"
    return did_key_to_verkey(service["recipientKeys"][0])


class Mailboxes:
    """The mediator's Redis as the tests read a wallet's state in it (any deployment mode)."""

    def __init__(self, redis_url: str) -> None:
        self.backend = Backend(redis_url)
        self.redis = self.backend.client

    async def __aenter__(self) -> Mailboxes:
        await self.backend.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.backend.aclose()

    async def connection_of(self, recipient_key: str) -> str:
        """The connection that registered `recipient_key` (a base58 verkey or a did:key)."""
        if recipient_key.startswith("did:key:"):
            recipient_key = did_key_to_verkey(recipient_key)
        raw = base58.b58decode(recipient_key)
        owner = await self.redis.hget(keys.routes_bucket(raw), raw)
        assert owner is not None, f"no connection registered {recipient_key}"
        return owner.decode() if isinstance(owner, bytes) else str(owner)

    async def idle(self, connection: str, *, queue: bool = True) -> bool:
        """No push or phone notification of the connection runs or is scheduled, and (with
        `queue`) nothing is stored for it, handed out or not."""
        (record, schedule, _), note = schedule_keys(connection)
        pipe = self.redis.pipeline(transaction=False)  # one slot: the queue's keys
        pipe.exists(keys.connection_keys(connection).push)
        pipe.zscore(schedule, keys.PUSH_MEMBER + connection)
        pipe.zscore(schedule, note)
        pipe.hexists(record, "nc")
        pushing, push_due, note_due, notifying = await pipe.execute()
        if pushing or push_due is not None or note_due is not None or notifying:
            return False
        if not queue:
            return True
        try:
            stats = await Engine(self.redis).stats(queue_of(connection))
        except QueueNotFound:
            return True
        return stats.messages == 0

    async def settle(self, connection: str, *, queue: bool = True, within: float = 30) -> None:
        """Wait until `idle`; fails the test when it does not come `within` seconds."""
        done = await eventually(lambda: self.idle(connection, queue=queue), bool, within=within)
        assert done, f"the mediator's side of {connection} did not settle in {within} s"
