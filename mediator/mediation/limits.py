"""A recipient's queue limits (Queue Management 1.0): operator defaults, operator maxima, and
what a recipient may ask for in between. Zero means "no limit", as the draft says."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from mediator.engine.model import INT32_MAX, QueueConfig
from mediator.errors import ProblemReport
from mediator.settings import QueueSettings

UNLIMITED_RETENTION = INT32_MAX  # seconds; the engine needs a number


@dataclass(frozen=True)
class QueueLimits:
    message_count_limit: int
    size_limit: int
    message_size_limit: int
    duration_limit: int
    will_queue: bool = True

    @classmethod
    def defaults(cls, settings: QueueSettings) -> QueueLimits:
        return cls(
            message_count_limit=settings.message_count_limit,
            size_limit=settings.size_limit,
            message_size_limit=settings.message_size_limit,
            duration_limit=settings.duration_limit,
        )

    @classmethod
    def from_config(cls, config: QueueConfig) -> QueueLimits:
        return cls(
            message_count_limit=config.max_messages or 0,
            size_limit=config.max_bytes or 0,
            message_size_limit=config.max_message_bytes or 0,
            duration_limit=0
            if config.retention_seconds >= UNLIMITED_RETENTION
            else config.retention_seconds,
            will_queue=config.will_queue,
        )

    def to_config(self, settings: QueueSettings) -> QueueConfig:
        return QueueConfig(
            retention_ms=(self.duration_limit or UNLIMITED_RETENTION) * 1000,
            visibility_timeout_ms=settings.delivery_timeout_seconds * 1000,
            max_messages=self.message_count_limit or None,
            max_bytes=self.size_limit or None,
            max_message_bytes=self.message_size_limit or None,
            will_queue=self.will_queue,
        )

    def updated(self, update: dict[str, Any], settings: QueueSettings) -> QueueLimits:
        """Apply a status-update-request's `update`, each value held within the maxima."""
        maxima = {
            "message_count_limit": settings.message_count_max,
            "size_limit": settings.size_max,
            "message_size_limit": settings.message_size_max,
            "duration_limit": settings.duration_max,
        }
        changes: dict[str, Any] = {}
        for name, value in update.items():
            if name == "will_queue":
                if not isinstance(value, bool):
                    raise ProblemReport("invalid-update", "will_queue must be true or false")
                changes[name] = value
            elif name in maxima:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ProblemReport("invalid-update", f"{name} must be a whole number >= 0")
                changes[name] = _within(value, maxima[name])
            else:
                raise ProblemReport("invalid-update", f"unknown queue property {name!r}")
        return replace(self, **changes)


def _within(value: int, maximum: int) -> int:
    """Zero asks for no limit; an operator maximum (non-zero) caps it and any larger value."""
    if maximum == 0:
        return value
    return maximum if value == 0 else min(value, maximum)
