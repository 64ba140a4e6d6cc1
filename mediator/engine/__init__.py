"""The queue engine: every queue of the product lives here, in Redis streams and Lua.

An mqs queue and a DIDComm recipient queue are the same thing with different settings:
`Engine` is the one Python API both front ends call.
"""

from mediator.engine.engine import Engine
from mediator.engine.model import (
    QueueConfig,
    QueueRef,
    QueueStats,
    ReceivedMessage,
    ReceiveResult,
    SendMessage,
)

__all__ = [
    "Engine",
    "QueueConfig",
    "QueueRef",
    "QueueStats",
    "ReceiveResult",
    "ReceivedMessage",
    "SendMessage",
]
