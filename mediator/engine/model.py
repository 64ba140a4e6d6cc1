"""The engine's value types: what a queue is configured with and what it hands out."""

from __future__ import annotations

from collections.abc import Mapping
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
    """A queue's settings, timers in ms. Limits (count, bytes, message bytes) are None when
    unlimited."""

    retention_ms: int
    visibility_timeout_ms: int
    delay_ms: int = 0
    max_receives: int | None = None
    dead_letter_queue: str | None = None  # name in the same namespace
    max_messages: int | None = None
    max_bytes: int | None = None
    max_message_bytes: int | None = None
    will_queue: bool = True

    # The mqs API and the DIDComm settings speak whole seconds (a part of one rounds up).
    @property
    def retention_seconds(self) -> int:
        return -(-self.retention_ms // 1000)

    @property
    def visibility_timeout_seconds(self) -> int:
        return -(-self.visibility_timeout_ms // 1000)

    @property
    def delay_seconds(self) -> int:
        return -(-self.delay_ms // 1000)

    def to_fields(self, namespace: str) -> tuple[dict[str, str], list[str]]:
        """Config hash fields to set, and optional fields to clear."""
        values: dict[str, str] = {"wq": "1" if self.will_queue else "0"}
        cleared: list[str] = []
        for name, ms in zip(
            TIMER_FIELDS,
            (self.retention_ms, self.visibility_timeout_ms, self.delay_ms),
            strict=True,
        ):
            field, value = timer_field(name, ms)
            values[field] = value
            cleared.append(name + MS_SUFFIX if field == name else name)
        optional: dict[str, str | None] = {
            "mr": None if self.max_receives is None else str(self.max_receives),
            "dlq": None
            if self.dead_letter_queue is None
            else QueueRef(namespace, self.dead_letter_queue).qualified,
            "lim_n": None if self.max_messages is None else str(self.max_messages),
            "lim_b": None if self.max_bytes is None else str(self.max_bytes),
            "lim_mb": None if self.max_message_bytes is None else str(self.max_message_bytes),
        }
        cleared += [k for k, v in optional.items() if v is None]
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
        cls,
        stored: Mapping[str, str],
        defaults: QueueConfig | Mapping[str, str] | None = None,
        namespace: str = "",
    ) -> QueueConfig:
        """A queue's config from the fields its hash stores over its namespace's defaults
        (a config, or the defaults hash's own fields): a timer the queue stores, in ms or
        in seconds, beats the default's."""
        if defaults is None:
            base: Mapping[str, str] = {}
        elif isinstance(defaults, QueueConfig):
            base = defaults.to_fields(namespace)[0]
        else:
            base = defaults
        fields = {**base, **stored}

        def opt(key: str) -> int | None:
            value = int(fields[key]) if key in fields else None
            return None if key in LIMIT_FIELDS and value == 0 else value

        def timer(name: str) -> int | None:  # the hash's own, over the default
            own = timer_ms(stored, name)
            return own if own is not None else timer_ms(base, name)

        retention, visibility, delay = (timer(name) for name in TIMER_FIELDS)
        if retention is None or visibility is None:
            raise KeyError("a queue config needs a retention and a visibility timeout")
        dlq = fields.get("dlq")
        return cls(
            retention_ms=retention,
            visibility_timeout_ms=visibility,
            delay_ms=delay or 0,
            max_receives=opt("mr"),
            dead_letter_queue=QueueRef.parse(dlq).name if dlq else None,
            max_messages=opt("lim_n"),
            max_bytes=opt("lim_b"),
            max_message_bytes=opt("lim_mb"),
            will_queue=fields.get("wq", "1") != "0",
        )


# Timers (retention, visibility timeout, delay) are stored as whole seconds under their own
# field, the format every version before reads, or in ms under `<field>_ms` when not a whole
# second; a reader takes the ms field of a hash over its seconds field (_lib.lua too).
TIMER_FIELDS = ("ret", "vt", "dly")
MS_SUFFIX = "_ms"
TIMER_KEYS = (*TIMER_FIELDS, *(name + MS_SUFFIX for name in TIMER_FIELDS))


def timer_field(name: str, ms: int) -> tuple[str, str]:
    """The field and value a timer of `ms` is stored as."""
    if ms % 1000 == 0:
        return name, str(ms // 1000)
    return name + MS_SUFFIX, str(ms)


def timer_ms(fields: Mapping[str, str], name: str) -> int | None:
    """A stored timer in ms, from its ms field or else its seconds field (None: neither)."""
    if (ms := fields.get(name + MS_SUFFIX)) is not None:
        return int(ms)
    if (seconds := fields.get(name)) is not None:
        return int(seconds) * 1000
    return None


LIMIT_FIELDS = ("lim_n", "lim_b", "lim_mb")  # "0" stored: no limit, whatever the default
CREATED_FIELD = "created"  # the creation time (ms): a queue exists while its config has it
# Every field a queue keeps in its config hash (what a DIDComm queue's deletion removes from
# the connection record it shares).
QUEUE_FIELDS = (
    *TIMER_KEYS, "mr", "dlq", *LIMIT_FIELDS, "wq", "bytes", CREATED_FIELD, "la", "ld", "lr",
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
    (keys.ConnectionKeys.presence; owner `<node>/<socket>`: `owner_of`)."""

    key: str
    owner: str
    ttl_ms: int

    def script_args(self) -> tuple[list[str], list[str | int]]:
        return [self.key], [self.owner, self.ttl_ms]

    @staticmethod
    def owner_of(node: str, socket: str) -> str:
        """The owner a hold stores for a socket of a node."""
        return f"{node}/{socket}"

    @staticmethod
    def parse_owner(owner: str) -> tuple[str, str] | None:
        """(node, socket) of a stored owner; None when it names no socket."""
        node, slash, socket = owner.partition("/")
        return (node, socket) if slash else None

    @staticmethod
    def node_of(owner: str) -> str:
        """The node of a stored owner."""
        return owner.partition("/")[0]


@dataclass(frozen=True)
class ReceiveResult:
    messages: list[ReceivedMessage]
    now_ms: int
    next_due_ms: int | None = None  # when nothing came back: the earliest deadline that may
    # Nothing else was there: a caller that asked to wait (wait_marker_ms) is marked as
    # waiting on the queue already, and may wait without another receive first.
    drained: bool = False
    # A live socket's receive that takes hand-offs: the queue's hand-offs so far (see
    # receive_filtered.lua), None otherwise.
    handed: int | None = None


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
