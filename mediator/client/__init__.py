"""A small DIDComm v1 client for this mediator: a recipient that gets mediation and picks up
its messages over HTTP or a WebSocket, and a sender that forwards through the mediator.

    async with Recipient(WsTransport(url), await mediator_key(url)) as alice:
        await alice.mediate_request()
        key = alice.add_key()
        await alice.keylist_update(add=[key])
        await Sender(alice.mediator).send_to(key, {"@type": ..., "@id": ...}, url)
        for message_id, inner in delivered(await alice.delivery_request(10)):
            print(alice.open_forwarded(inner))
        await alice.messages_received([message_id])
"""

from mediator.client.agent import DIDCOMM_ORG, Agent, message, new_id
from mediator.client.recipient import Recipient, delivered
from mediator.client.sender import Sender, forward_envelope
from mediator.client.transports import (
    ENVELOPE_TYPE,
    ClientError,
    HttpTransport,
    Transport,
    WsConnection,
    WsConnector,
    WsTransport,
    connect_websocket,
    fetch_invitation,
    mediator_key,
    ws_url,
)
from mediator.didcomm.forwarding import FORWARD, forward_message

attachments = delivered  # the name the older test suites use

__all__ = [
    "DIDCOMM_ORG",
    "ENVELOPE_TYPE",
    "FORWARD",
    "Agent",
    "ClientError",
    "HttpTransport",
    "Recipient",
    "Sender",
    "Transport",
    "WsConnection",
    "WsConnector",
    "WsTransport",
    "attachments",
    "connect_websocket",
    "delivered",
    "fetch_invitation",
    "forward_envelope",
    "forward_message",
    "mediator_key",
    "message",
    "new_id",
    "ws_url",
]
