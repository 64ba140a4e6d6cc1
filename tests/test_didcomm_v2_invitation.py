"""The mediator's Out-of-Band 2.0 invitation (mediator/didcomm/v2/invitation.py): from its v2
DID, the same on every node, and its URL form decodes back to it."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import orjson

from mediator.didcomm.envelope import b64url_decode
from mediator.didcomm.keys import KeyPair
from mediator.didcomm.v2.identity import MediatorV2
from mediator.didcomm.v2.invitation import TYPE, invitation, invitation_url

MEDIATOR = MediatorV2(KeyPair.from_seed(bytes(32)), ("https://m.example/", "wss://m.example/"))


def test_the_invitation_is_from_the_mediators_did_and_the_same_everywhere() -> None:
    one, two = invitation(MEDIATOR.did, "Mediator"), invitation(MEDIATOR.did, "Mediator")
    assert one == two and one["type"] == TYPE and one["from"] == MEDIATOR.did
    assert one["body"]["goal_code"] == "request-mediate"
    assert one["body"]["accept"] == ["didcomm/v2"] and one["body"]["label"] == "Mediator"
    other = MediatorV2(KeyPair.from_seed(bytes(range(32))), MEDIATOR.endpoints)
    assert invitation(other.did)["id"] != one["id"]


def test_the_url_carries_the_invitation_in_oob() -> None:
    message = invitation(MEDIATOR.did)
    url = invitation_url("https://m.example/", message)
    encoded = parse_qs(urlsplit(url).query)["_oob"][0]
    assert orjson.loads(b64url_decode(encoded)) == message
    assert invitation_url("https://m.example/?x=1", message).startswith(
        "https://m.example/?x=1&_oob="
    )
