"""Message ids: opaque to clients.

An mqs message id names the queue it was sent to, `<22 random url-safe chars>.<base64url
(qualified queue name)>`, so that `DELETE /messages/<id>` needs no global index and the id
stays the same when the message moves to a dead letter queue. A DIDComm recipient's messages
are only ever acknowledged on the recipient's own queue, so theirs are the 22 random
characters alone: the id is stored twice per message, and a recipient holds many.
"""

from __future__ import annotations

import base64
import binascii

from mediator.randomness import random_bytes

MAX_ID_LENGTH = 512
NAMED_QUEUE_NAMESPACES = ("mqs",)  # namespaces whose ids name their queue


def new_message_id(qualified_queue: str) -> str:
    head = base64.urlsafe_b64encode(random_bytes(16)).rstrip(b"=").decode()
    if qualified_queue.partition(":")[0] not in NAMED_QUEUE_NAMESPACES:
        return head
    tail = base64.urlsafe_b64encode(qualified_queue.encode()).rstrip(b"=").decode()
    return f"{head}.{tail}"


def origin_queue(message_id: str) -> str | None:
    """The qualified name of the queue a message was sent to, or None for a foreign id."""
    if len(message_id) > MAX_ID_LENGTH or message_id.count(".") != 1:
        return None
    head, tail = message_id.split(".")
    if len(head) != 22:
        return None
    try:
        raw = base64.urlsafe_b64decode(tail + "=" * (-len(tail) % 4))
        return raw.decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
