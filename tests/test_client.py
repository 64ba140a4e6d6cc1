"""The project's client without a server: forward wrapping (RFC 0094) and its own envelopes."""

from __future__ import annotations

import json

from mediator.client import Agent, Sender, attachments, forward_envelope, message
from mediator.didcomm import envelope
from mediator.didcomm.keys import KeyPair


def test_forward_goes_to_the_mediator_and_names_the_recipient() -> None:
    mediator, recipient = KeyPair.generate(), KeyPair.generate()
    sender = Sender(mediator.verkey_b58)
    wrapped = sender.wrap(recipient.did_key, {"@type": "x", "n": 1})
    outer = envelope.unpack(wrapped, {mediator.verkey_b58: mediator}.get)
    assert outer.sender_verkey is None  # anoncrypted: the mediator does not learn who sent it
    fwd = json.loads(outer.message)
    assert fwd["@type"] == "https://didcomm.org/routing/1.0/forward"
    assert fwd["to"] == recipient.verkey_b58
    inner = envelope.unpack(json.dumps(fwd["msg"]).encode(), {recipient.verkey_b58: recipient}.get)
    assert json.loads(inner.message) == {"@type": "x", "n": 1}
    assert inner.sender_verkey == sender.verkey


def test_each_routing_hop_gets_its_own_forward() -> None:
    mediator, hop, recipient = KeyPair.generate(), KeyPair.generate(), KeyPair.generate()
    inner = envelope.pack(b'{"deep": true}', [recipient.verkey_b58])
    outer = envelope.unpack(
        forward_envelope(inner, recipient.verkey_b58, mediator.did_key, [hop.did_key]),
        {mediator.verkey_b58: mediator}.get,
    )
    first = json.loads(outer.message)
    assert first["to"] == hop.verkey_b58
    second = json.loads(
        envelope.unpack(json.dumps(first["msg"]).encode(), {hop.verkey_b58: hop}.get).message
    )
    assert second["to"] == recipient.verkey_b58
    assert json.loads(json.dumps(second["msg"])) == json.loads(inner)


def test_agent_opens_messages_for_its_recipient_keys_and_reads_deliveries() -> None:
    mediator = KeyPair.generate()
    agent = Agent(mediator.verkey_b58)
    key = agent.new_recipient_key()
    sealed = envelope.pack(b'{"for": "key"}', [key], KeyPair.generate())
    delivery = {
        "~attach": [
            {"@id": "m1", "data": {"base64": "eyJhIjoxfQ"}},  # unpadded, as some write
            {"@id": "m2", "data": {"json": json.loads(sealed)}},
        ]
    }
    got = attachments(delivery)
    assert got[0] == ("m1", b'{"a":1}')
    assert agent.open(got[1][1]) == {"for": "key"}
    request = message("messagepickup/2.0/status-request")
    assert request["~transport"] == {"return_route": "all"} and len(request["@id"]) == 36
    opened = envelope.unpack(agent.pack(request), {mediator.verkey_b58: mediator}.get)
    assert opened.sender_verkey == agent.verkey
