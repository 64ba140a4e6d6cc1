"""Reading and validating the mqs request headers and path names.

Queue names: 1 to 80 characters from `A-Z a-z 0-9 - _` (as SQS), so that they are safe in
URLs, Redis keys and log lines. Integer headers are decimal, optionally signed, and checked
against the spec's inclusive bounds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from mediator.engine.model import INT32_MAX, QueueConfig
from mediator.errors import RequestError

QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")
# What an mqs message id looks like (mediator/engine/ids.py): never a queue name, as it has a '.'.
MESSAGE_ID = re.compile(r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{7,112}")
_INT = re.compile(r"[+-]?[0-9]{1,20}")

MAX_RECEIVES = "X-MQS-MAX-RECEIVES"
DEAD_LETTER_QUEUE = "X-MQS-DEAD-LETTER-QUEUE"
RETENTION = "X-MQS-RETENTION-SECONDS"
VISIBILITY = "X-MQS-VISIBILITY-TIMEOUT-SECONDS"
DELAY = "X-MQS-DELAY-SECONDS"
CASCADE = "X-MQS-CASCADE"
MAX_MESSAGES = "X-MQS-MAX-MESSAGES"
WAIT_TIME = "X-MQS-WAIT-TIME"


def check_queue_name(name: str, what: str = "queue name") -> str:
    if not QUEUE_NAME.fullmatch(name):
        raise RequestError(
            f"invalid {what} {name[:100]!r}: use 1 to 80 characters from A-Z, a-z, 0-9, '-' and '_'"
        )
    return name


def integer(
    headers: Mapping[str, str], name: str, low: int, high: int, *, required: bool
) -> int | None:
    raw = headers.get(name)
    if raw is None:
        if required:
            raise RequestError(f"{name} is required")
        return None
    text = raw.strip()
    if not _INT.fullmatch(text):
        raise RequestError(f"{name} must be an integer, got {raw[:40]!r}")
    value = int(text)
    if not low <= value <= high:
        raise RequestError(f"{name} must be between {low} and {high}, got {value}")
    return value


def queue_config(headers: Mapping[str, str]) -> QueueConfig:
    """The queue settings of a create or update request, validated as the spec says."""
    max_receives = integer(headers, MAX_RECEIVES, 1, INT32_MAX, required=False)
    dlq = headers.get(DEAD_LETTER_QUEUE)
    if dlq is not None:
        dlq = check_queue_name(dlq.strip(), "dead letter queue name")
    if (dlq is None) != (max_receives is None):
        raise RequestError(f"{DEAD_LETTER_QUEUE} and {MAX_RECEIVES} must be set together")
    retention = integer(headers, RETENTION, 1, INT32_MAX, required=True)
    visibility = integer(headers, VISIBILITY, 0, INT32_MAX, required=True)
    delay = integer(headers, DELAY, 0, INT32_MAX, required=False)
    assert retention is not None and visibility is not None
    return QueueConfig(
        retention_ms=retention * 1000,  # the API speaks whole seconds, the engine ms
        visibility_timeout_ms=visibility * 1000,
        delay_ms=(delay or 0) * 1000,
        max_receives=max_receives,
        dead_letter_queue=dlq,
    )


def cascade(headers: Mapping[str, str]) -> bool:
    raw = headers.get(CASCADE)
    if raw is None:
        return True
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise RequestError(f"{CASCADE} must be true or false, got {raw[:40]!r}")
    return value == "true"
