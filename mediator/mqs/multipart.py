"""Strict, binary-exact multipart/mixed (RFC 2046) for batches of queue messages: bodies are any
bytes (CRLF and boundary-like text included), which the stdlib email parser does not keep exact.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

_DEFAULT_CONTENT_TYPE = "application/octet-stream"

# RFC 2046 section 5.1.1: bchars, 1 to 70 of them, the last not a space.
_BOUNDARY = re.compile(r"[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]")
# RFC 9110 token, used for header names and Content-Type parameter names.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN_BYTES = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# What may follow "--boundary" on a delimiter line: "--" for the close delimiter, transport
# padding, then CRLF (or the end of the body, accepted after a close delimiter only).
_DELIMITER_TAIL = re.compile(rb"(--)?[ \t]*+(\r\n|\Z)")
# Control characters other than HT are not allowed in header lines (this also catches bare CR
# and LF, which would let a header value inject lines when the part is encoded again).
_HEADER_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_HEADER_CONTROL_STR = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


@dataclass(frozen=True)
class Part:
    """One body part: header names lower-cased, values stripped of surrounding whitespace."""

    headers: dict[str, str]
    body: bytes


class MultipartError(ValueError):
    """A malformed multipart body or Content-Type; the message says what is wrong."""


def boundary_from_content_type(content_type: str) -> str | None:
    """The boundary of a multipart/mixed Content-Type, or None for any other media type."""
    media_type, _, rest = content_type.partition(";")
    if media_type.strip().lower() != "multipart/mixed":
        return None
    boundary: str | None = None
    for name, value in _parameters(rest):
        if name == "boundary":
            if boundary is not None:
                raise MultipartError("the Content-Type has more than one boundary parameter")
            boundary = value
    if boundary is None:
        raise MultipartError("the multipart/mixed Content-Type has no boundary parameter")
    _check_boundary(boundary)
    return boundary


def _parameters(text: str) -> list[tuple[str, str]]:
    """The `name=value` parameters after the media type (names lower-cased, values unquoted)."""
    params: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t;":
            i += 1
        if i >= n:
            return params
        eq = text.find("=", i)
        if eq < 0:
            raise MultipartError(f"Content-Type parameter without '=': {text[i:][:100]!r}")
        name = text[i:eq].strip().lower()
        if not _TOKEN.fullmatch(name):
            raise MultipartError(f"invalid Content-Type parameter name {name[:100]!r}")
        i = eq + 1
        while i < n and text[i] in " \t":
            i += 1
        if i < n and text[i] == '"':
            chars: list[str] = []
            i += 1
            while True:
                if i >= n:
                    raise MultipartError(f"unterminated quoted value of parameter {name!r}")
                c = text[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n:
                    i += 1
                    c = text[i]
                chars.append(c)
                i += 1
            value = "".join(chars)
        else:
            end = i
            while end < n and text[end] not in " \t;":
                end += 1
            value = text[i:end]
            i = end
        while i < n and text[i] in " \t":
            i += 1
        if i < n and text[i] != ";":
            raise MultipartError(f"unexpected text after parameter {name!r}: {text[i:][:100]!r}")
        params.append((name, value))


def _check_boundary(boundary: str) -> None:
    if not _BOUNDARY.fullmatch(boundary):
        raise MultipartError(
            f"invalid boundary {boundary[:100]!r}: RFC 2046 allows 1 to 70 characters from "
            "A-Z a-z 0-9 '()+_,-./:=? and space, not ending with a space"
        )


def _delimiter_at(body: bytes, pos: int) -> tuple[int, bool] | None:
    """At `pos`, just after "--boundary": (end of the delimiter line, is close), or None."""
    m = _DELIMITER_TAIL.match(body, pos)
    if m is None:
        return None
    is_close = m.group(1) is not None
    if not m.group(2) and not is_close:
        return None  # "--boundary" at the very end of the body is not a delimiter line
    return m.end(), is_close


def _next_delimiter(body: bytes, line: bytes, start: int) -> tuple[int, int, bool] | None:
    """The next delimiter (CRLF + dash-boundary) at or after `start`.

    Returns (position of its leading CRLF, end of its line, is close) or None.
    """
    while True:
        found = body.find(line, start)
        if found < 0:
            return None
        hit = _delimiter_at(body, found + len(line))
        if hit is not None:
            return found, hit[0], hit[1]
        start = found + 1


def parse(body: bytes, boundary: str, *, max_parts: int) -> list[Part]:
    """Split a multipart/mixed body into its parts; raise MultipartError when it is malformed."""
    _check_boundary(boundary)
    dash = b"--" + boundary.encode("ascii")
    line = b"\r\n" + dash

    # The opening delimiter is at the very start, or after a preamble and its CRLF.
    opening = _delimiter_at(body, len(dash)) if body.startswith(dash) else None
    if opening is not None:
        pos, is_close = opening
    else:
        hit = _next_delimiter(body, line, 0)
        if hit is None:
            raise MultipartError(f"no opening delimiter line {dash.decode('ascii')!r}")
        _, pos, is_close = hit
    if is_close:
        raise MultipartError(
            f"the body has no parts: its first delimiter line is the close delimiter "
            f"{dash.decode('ascii') + '--'!r}"
        )

    parts: list[Part] = []
    while True:
        hit = _next_delimiter(body, line, pos)
        if hit is None:
            raise MultipartError(f"missing close delimiter {dash.decode('ascii') + '--'!r}")
        end, after, is_close = hit
        if len(parts) >= max_parts:
            raise MultipartError(f"too many parts: the limit is {max_parts}")
        parts.append(_part(body[pos:end], len(parts) + 1))
        if is_close:
            return parts  # anything after the close delimiter line is the epilogue
        pos = after


def _part(raw: bytes, number: int) -> Part:
    """One part's bytes between delimiter lines: header lines, an empty line, the body."""
    if raw.startswith(b"\r\n"):
        return Part(headers={}, body=raw[2:])
    split = raw.find(b"\r\n\r\n")
    if split >= 0:
        head, content = raw[:split], raw[split + 4 :]
    else:
        # Header lines only (or nothing at all): the body is empty.
        head, content = raw.removesuffix(b"\r\n"), b""
    return Part(headers=_headers(head, number), body=content)


def _headers(head: bytes, number: int) -> dict[str, str]:
    headers: dict[str, str] = {}
    last: str | None = None
    if not head:
        return headers
    for raw_line in head.split(b"\r\n"):
        if _HEADER_CONTROL.search(raw_line):
            raise MultipartError(
                f"part {number}: control character in header line {raw_line[:100]!r}"
            )
        if raw_line[:1] in (b" ", b"\t"):
            if last is None:
                raise MultipartError(
                    f"part {number}: folded header line without a header before it"
                )
            more = _decode(raw_line.strip(b" \t"), number)
            headers[last] = f"{headers[last]} {more}" if more else headers[last]
            continue
        colon = raw_line.find(b":")
        if colon < 0:
            raise MultipartError(f"part {number}: header line without a colon: {raw_line[:100]!r}")
        raw_name = raw_line[:colon]
        if not _TOKEN_BYTES.fullmatch(raw_name):
            raise MultipartError(f"part {number}: invalid header name {raw_name[:100]!r}")
        name = raw_name.decode("ascii").lower()
        if name in headers:
            raise MultipartError(f"part {number}: more than one {name!r} header")
        headers[name] = _decode(raw_line[colon + 1 :].strip(b" \t"), number)
        last = name
    return headers


def _decode(value: bytes, number: int) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise MultipartError(f"part {number}: header value is not UTF-8: {value[:100]!r}") from None


def part_content_type(part: Part) -> str:
    """The part's Content-Type without surrounding double quotes, or application/octet-stream."""
    value = part.headers.get("content-type", "").strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1].strip()
    return value or _DEFAULT_CONTENT_TYPE


def encode(parts: list[tuple[dict[str, str], bytes]]) -> tuple[str, bytes]:
    """Encode (headers, body) pairs as multipart/mixed: (Content-Type value, body)."""
    heads: list[bytes] = []
    for headers, _ in parts:
        lines: list[bytes] = []
        seen: set[str] = set()
        for name, value in headers.items():
            if not _TOKEN.fullmatch(name):
                raise MultipartError(f"invalid header name {name[:100]!r}")
            if name.lower() in seen:
                raise MultipartError(f"more than one {name.lower()!r} header")
            seen.add(name.lower())
            if _HEADER_CONTROL_STR.search(value):
                raise MultipartError(f"control character in the value of header {name!r}")
            lines.append(f"{name}: {value.strip()}\r\n".encode())
        heads.append(b"".join(lines))
    while True:
        boundary = secrets.token_hex(16)
        needle = boundary.encode("ascii")
        if not any(needle in body for _, body in parts) and not any(needle in h for h in heads):
            break
    dash = b"--" + needle
    out: list[bytes] = []
    for head, (_, body) in zip(heads, parts, strict=True):
        out += [dash, b"\r\n", head, b"\r\n", body, b"\r\n"]
    out += [dash, b"--\r\n"]
    return f"multipart/mixed; boundary={boundary}", b"".join(out)
