"""The engine's value types: what a queue is configured with and what it hands out."""

from __future__ import annotations

from dataclasses import dataclass

INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class QueueRef:
    """A queue in a namespace: `mqs` for the HTTP queue API, others for DIDComm recipients."""

    namespace: str
    name: str

    @property
    def qualified(self) -> str:
        return f"{self.namespace}:{self.name}"

    @classmethod
    def parse(cls, qualified: str) -> QueueRef:
        namespace, _, name = qualified.partition(":")
        return cls(namespace, name)


@dataclass(frozen=True)
class QueueConfig:
    """A queue's settings. Limits (count, bytes, message bytes) are None when unlimited."""

    retention_seconds: int
    visibility_timeout_seconds: int
    delay_seconds: int = 0
    max_receives: int | None = None
    dead_letter_queue: str | None = None  # name in the same namespace
    max_messages: int | None = None
    max_bytes: int | None = None
    max_message_bytes: int | None = None
    will_queue: bool = True

    def to_fields(self, namespace: str) -> tuple[dict[str, str], list[str]]:
        """Config hash fields to set, and optional fields to clear."""
        values: dict[str, str] = {
            "ret": str(self.retention_seconds),
            "vt": str(self.visibility_timeout_seconds),
            "dly": str(self.delay_seconds),
            "wq": "1" if self.will_queue else "0",
        }
        optional: dict[str, str | None] = {
            "mr": None if self.max_receives is None else str(self.max_receives),
            "dlq": None
            if self.dead_letter_queue is None
            else QueueRef(namespace, self.dead_letter_queue).qualified,
            "lim_n": None if self.max_messages is None else str(self.max_messages),
            "lim_b": None if self.max_bytes is None else str(self.max_bytes),
            "lim_mb": None if self.max_message_bytes is None else str(self.max_message_bytes),
        }
        cleared = [k for k, v in optional.items() if v is None]
        values.update({k: v for k, v in optional.items() if v is not None})
        return values, cleared

    def stored_fields(self, namespace: str, defaults: QueueConfig | None) -> dict[str, str]:
        """The config fields to store for a queue whose namespace keeps `defaults` out of
        its hashes (all of them when None): only what differs, and "0" where a limit the
        default has is lifted."""
        values = self.to_fields(namespace)[0]
        if defaults is None:
            return values
        base = defaults.to_fields(namespace)[0]
        out = {k: v for k, v in values.items() if base.get(k) != v}
        for name in LIMIT_FIELDS:
            if name in base and name not in values:
                out[name] = "0"
        return out

    @classmethod
    def from_fields(
        cls, stored: dict[str, str], defaults: QueueConfig | None = None, namespace: str = ""
    ) -> QueueConfig:
        fields = {} if defaults is None else defaults.to_fields(namespace)[0]
        fields.update(stored)

        def opt(key: str) -> int | None:
            value = int(fields[key]) if key in fields else None
            return None if key in LIMIT_FIELDS and value == 0 else value

        dlq = fields.get("dlq")
        return cls(
            retention_seconds=int(fields["ret"]),
            visibility_timeout_seconds=int(fields["vt"]),
            delay_seconds=int(fields.get("dly", "0")),
            max_receives=opt("mr"),
            dead_letter_queue=QueueRef.parse(dlq).name if dlq else None,
            max_messages=opt("lim_n"),
            max_bytes=opt("lim_b"),
            max_message_bytes=opt("lim_mb"),
            will_queue=fields.get("wq", "1") != "0",
        )


LIMIT_FIELDS = ("lim_n", "lim_b", "lim_mb")  # "0" stored: no limit, whatever the default
# Every field a queue keeps in its config hash (what a DIDComm queue's deletion removes from
# the connection record it shares).
QUEUE_FIELDS = (
    "ret", "vt", "dly", "mr", "dlq", *LIMIT_FIELDS, "wq", "bytes", "created", "la", "ld", "lr",
)  # fmt: skip


@dataclass(frozen=True)
class QueueInfo:
    name: str
    config: QueueConfig
    created_ms: int


@dataclass(frozen=True)
class SendMessage:
    body: bytes
    content_type: str = "application/octet-stream"
    content_encoding: str = ""
    trace_id: str = ""
    # Not stored again while a message with the same digest is in the queue (b"": always).
    digest: bytes = b""
    # The sender's tag (mediator/mediation/senders.py): its queued bytes are counted while
    # the message is stored ("": not counted).
    sender: str = ""


@dataclass(frozen=True)
class SendResult:
    message_ids: list[str]  # a duplicate's is the id of the queued copy it was not stored as
    visible: int
    delayed: int
    duplicates: tuple[bool, ...] = ()  # per message: a copy was queued already (not stored)


@dataclass(frozen=True)
class ReceivedMessage:
    message_id: str
    body: bytes
    content_type: str
    content_encoding: str
    trace_id: str
    published_ms: int
    receives: int
    visible_at_ms: int


@dataclass(frozen=True)
class Hold:
    """A live socket's hold on its recipient, renewed by the receives of its delivery loop
    (keys.ConnectionKeys.presence; owner `<node>/<socket>`)."""

    key: str
    owner: str
    ttl_ms: int

    def script_args(self) -> tuple[list[str], list[str | int]]:
        return [self.key], [self.owner, self.ttl_ms]


@dataclass(frozen=True)
class ReceiveResult:
    messages: list[ReceivedMessage]
    now_ms: int
    next_due_ms: int | None = None  # when nothing came back: the earliest deadline that may
    # Nothing else was there: a caller that asked to wait (wait_marker_ms) is marked as
    # waiting on the queue already, and may wait without another receive first.
    drained: bool = False


@dataclass(frozen=True)
class QueueStats:
    now_ms: int
    stored: int
    in_flight: int
    delayed: int
    oldest_ms: int | None
    bytes: int
    sched_ms: int | None = None  # when the queue's upkeep is next due, as the queue records it
    last_added_ms: int | None = None
    last_delivered_ms: int | None = None
    last_removed_ms: int | None = None
    newest_ms: int | None = None  # the newest enqueue time of any stored or delayed message

    @property
    def visible(self) -> int:
        return self.stored - self.in_flight

    @property
    def messages(self) -> int:
        return self.stored + self.delayed

    @property
    def oldest_age_seconds(self) -> float:
        return 0.0 if self.oldest_ms is None else max(0, self.now_ms - self.oldest_ms) / 1000


@dataclass(frozen=True)
class TagStats:
    """The messages of one queue forwarded to one recipient key (Pickup 2.0 recipient_key)."""

    now_ms: int
    messages: int
    visible: int
    bytes: int
    oldest_ms: int | None
    newest_ms: int | None
    complete: bool  # False when the scan stopped at its bound
