"""Reading a request body with a size limit, and splitting it into messages to send."""

from __future__ import annotations

from starlette.requests import Request

from mediator.engine.model import SendMessage
from mediator.errors import RequestError
from mediator.mqs import multipart


class TooLarge(RequestError):
    def __init__(self, message: str) -> None:
        super().__init__(message, status=413)


async def read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise TooLarge(f"request body of {int(declared)} bytes is over the limit of {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def messages_from(
    body: bytes,
    content_type: str | None,
    *,
    content_encoding: str | None,
    trace_id: str | None,
    max_message_bytes: int,
    max_parts: int,
) -> list[SendMessage]:
    """A plain body is one message; a multipart/mixed body is one message per part."""
    ctype = (content_type or "").strip()
    try:
        boundary = multipart.boundary_from_content_type(ctype) if ctype else None
        if boundary is None:
            if len(body) > max_message_bytes:
                raise TooLarge(
                    f"message of {len(body)} bytes is over the limit of {max_message_bytes}"
                )
            return [
                SendMessage(
                    body=body,
                    content_type=_unquote(ctype) or "application/octet-stream",
                    content_encoding=(content_encoding or "").strip(),
                    trace_id=(trace_id or "").strip(),
                )
            ]
        parts = multipart.parse(body, boundary, max_parts=max_parts)
    except multipart.MultipartError as exc:
        raise RequestError(f"malformed multipart body: {exc}") from exc
    out = []
    for i, part in enumerate(parts, 1):
        for name in ("content-type", "content-encoding", "x-trace-id"):
            value = part.headers.get(name, "")
            if not value.isascii() or not value.isprintable():
                raise RequestError(
                    f"part {i}: the {name} header must be printable ASCII, as it is sent back "
                    "in an HTTP header when the message is received"
                )
        if len(part.body) > max_message_bytes:
            raise TooLarge(
                f"part {i} is {len(part.body)} bytes, over the message limit of {max_message_bytes}"
            )
        out.append(
            SendMessage(
                body=part.body,
                content_type=multipart.part_content_type(part),
                content_encoding=part.headers.get("content-encoding", "").strip(),
                trace_id=part.headers.get("x-trace-id", (trace_id or "")).strip(),
            )
        )
    return out


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value
