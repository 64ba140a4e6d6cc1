"""How mqs answers: JSON errors, queue documents and received messages."""

from __future__ import annotations

import time
from typing import Any

from starlette.responses import JSONResponse, Response

from mediator.engine.model import QueueInfo, QueueStats, ReceivedMessage
from mediator.mqs import multipart


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def queue_document(info: QueueInfo, stats: QueueStats | None = None) -> dict[str, Any]:
    c = info.config
    doc: dict[str, Any] = {
        "name": info.name,
        "deadLetterQueue": c.dead_letter_queue,
        "maxReceives": c.max_receives,
        "retentionSeconds": c.retention_seconds,
        "visibilityTimeoutSeconds": c.visibility_timeout_seconds,
        "delaySeconds": c.delay_seconds,
    }
    if stats is not None:
        doc["status"] = {
            "messages": stats.messages,
            "visibleMessages": stats.visible,
            "inFlightMessages": stats.in_flight,
            "delayedMessages": stats.delayed,
            "oldestMessageAgeSeconds": stats.oldest_age_seconds,
        }
    return doc


def rfc3339(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def message_headers(m: ReceivedMessage) -> dict[str, str]:
    headers = {
        "Content-Type": m.content_type or "application/octet-stream",
        "X-MQS-MESSAGE-ID": m.message_id,
        "X-MQS-MESSAGE-RECEIVES": str(m.receives),
        "X-MQS-MESSAGE-PUBLISHED-AT": rfc3339(m.published_ms),
        "X-MQS-MESSAGE-VISIBLE-AT": rfc3339(m.visible_at_ms),
    }
    if m.content_encoding:
        headers["Content-Encoding"] = m.content_encoding
    if m.trace_id:
        headers["X-TRACE-ID"] = m.trace_id
    return headers


def received(messages: list[ReceivedMessage], *, batch: bool) -> Response:
    """One message as its own body; a batch request always as multipart/mixed; none as []."""
    count = {"X-MQS-MESSAGE-COUNT": str(len(messages))}
    if not messages:
        return JSONResponse([], headers=count)
    if not batch:
        m = messages[0]
        # The stored content type goes out exactly as sent (no charset added).
        return Response(m.body, headers={**message_headers(m), **count})
    content_type, body = multipart.encode([(message_headers(m), m.body) for m in messages])
    return Response(body, media_type=content_type, headers=count)
