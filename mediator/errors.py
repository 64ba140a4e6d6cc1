"""One error tree for the whole product, mapped to wire answers at the edge.

    MediatorError
    ├── ConfigError                 bad settings; the process refuses to start
    ├── StorageError                Redis unreachable or answering something unexpected
    │   ├── EmbeddedServerError     the embedded server would not start
    │   └── ReplicationShortfall    stored, but fewer replicas (or fsyncs) confirmed it in
    │                               time than the settings ask for (HTTP 503)
    ├── QueueError                  a queue operation was refused
    │   ├── QueueNotFound               (mqs 404)
    │   ├── QueueExists                 (mqs 409)
    │   ├── QueueInUse                  a dead letter queue of others (mqs 412)
    │   ├── InvalidQueueConfig          (mqs 400)
    │   ├── MessageNotFound             (mqs 404)
    │   └── LimitExceeded               a queue limit refused a send (mqs 413)
    ├── ImportRefused               `mediator import` cannot go on (a wrong wallet key, a
    │                               store that is not a mediator's...): one line, exit 1
    ├── RequestError                a malformed request (mqs 400, or `status` when set)
    ├── RateLimited                 an abuse limit refused a request (429, Retry-After)
    ├── HoldLost                    another socket took this socket's recipient over: its
    │                               delivery stops (never answered: the socket goes on)
    ├── OutboundError               an outbound call (a push, a provider) stopped by its limits
    │   ├── OutboundRefused             its destination is denied: a peer named a loopback,
    │   │                               private, link-local... address (a push is not retried)
    │   └── AnswerTooLarge              its answer passed --outbound-max-response-bytes
    └── DidcommError                a DIDComm message could not be honoured
        ├── EnvelopeError               not a readable envelope for us (HTTP 400, nothing
        │                               can be decrypted, so no problem-report)
        ├── InvalidKey                  not a base58 Ed25519 verkey nor a did:key
        └── ProblemReport               answered with a problem-report (`code`, `description`)

The mqs layer turns each into its status code with a JSON body `{"error": "..."}`;
the DIDComm layer turns them into problem-report messages when it knows whom to answer,
and into HTTP 4xx JSON answers when it does not.
"""

from __future__ import annotations


class MediatorError(Exception):
    """Base of every error this product raises on purpose."""


class ConfigError(MediatorError):
    pass


class StorageError(MediatorError):
    pass


class EmbeddedServerError(StorageError):
    pass


class ReplicationShortfall(StorageError):
    """A send is on the primary but not as durable as `wait_replicas`/`wait_fsync` ask."""


class QueueError(MediatorError):
    pass


class ImportRefused(MediatorError):
    """An import cannot go on; the message is the one line the operator sees."""


class HoldLost(MediatorError):
    """A live socket's receive found its recipient held by another socket."""


class OutboundError(MediatorError):
    pass


class OutboundRefused(OutboundError):
    """A destination a peer named resolves to an address outbound calls may not reach."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"{host}: {reason}")
        self.host = host
        self.reason = reason


class AnswerTooLarge(OutboundError):
    """The answer's body passed the cap: the connection was dropped."""


class QueueNotFound(QueueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"queue {name!r} does not exist")
        self.name = name


class QueueExists(QueueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"queue {name!r} already exists")
        self.name = name


class QueueInUse(QueueError):
    def __init__(self, name: str, users: list[str]) -> None:
        super().__init__(f"queue {name!r} is the dead letter queue of {', '.join(sorted(users))}")
        self.name = name
        self.users = users


class InvalidQueueConfig(QueueError):
    pass


class MessageNotFound(QueueError):
    def __init__(self, message_id: str) -> None:
        super().__init__(f"message {message_id!r} does not exist")
        self.message_id = message_id


class LimitExceeded(QueueError):
    """A send refused by a queue limit; nothing of the batch was stored."""

    def __init__(self, reason: str, kind: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind  # message_size, count, size or will_queue


class RequestError(MediatorError):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class RateLimited(MediatorError):
    """An abuse limit refused a request; `retry_after`: whole seconds until it may succeed;
    `limit`: which (the `limit` label of `mediator_limit_refusals_total`)."""

    def __init__(self, reason: str, retry_after: int, *, limit: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = max(1, retry_after)
        self.limit = limit


class DidcommError(MediatorError):
    pass


class EnvelopeError(DidcommError):
    """The bytes are not an envelope we can open: malformed, or for keys we do not hold."""


class NotAddressedHere(EnvelopeError):
    """A well-formed envelope for keys we do not hold."""


class InvalidKey(DidcommError):
    pass


class DidError(DidcommError):
    """A DID, DID document or signed attachment a peer sent that cannot be used: malformed,
    of a method we do not resolve, or with a signature that does not verify."""


class ProblemReport(DidcommError):
    """Refuse a message with a problem-report; `code` is a short machine-readable reason.

    `status` is set when the refusal means a message was not accepted (a forward): HTTP then
    answers with that status and a JSON body, so a sender learns it even when anonymous.
    """

    def __init__(self, code: str, description: str, *, status: int | None = None) -> None:
        super().__init__(description)
        self.code = code
        self.description = description
        self.status = status
