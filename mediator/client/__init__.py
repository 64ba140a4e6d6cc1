"""A small DIDComm v1 client for this mediator: a recipient that gets mediation and picks up
its messages over HTTP or a WebSocket, and a sender that forwards through the mediator.

    recipient = await Recipient.connect_to("http://127.0.0.1:8080", transport="ws")
    key = await recipient.mediate()                    # a new recipient key, registered
    await Sender(recipient.mediator).send_to(key, {"@type": ..., ...}, "http://127.0.0.1:8080")
    delivery = await recipient.deliver(limit=10)
    for message_id, inner in attachments(delivery): recipient.open(inner)
"""

from mediator.client.agent import Agent, attachments, message
from mediator.client.recipient import Recipient
from mediator.client.sender import Sender, forward_envelope, mediator_key
from mediator.client.transports import ENVELOPE_TYPE, ClientError

__all__ = [
    "ENVELOPE_TYPE",
    "Agent",
    "ClientError",
    "Recipient",
    "Sender",
    "attachments",
    "forward_envelope",
    "mediator_key",
    "message",
]
