"""The multipart/mixed codec: binary-exact round trips, the RFC 2046 rules and every error."""

from __future__ import annotations

import secrets

import pytest

from mediator.mqs import multipart
from mediator.mqs.multipart import MultipartError, Part

SPEC_EXAMPLE = (
    b"--simple boundary\r\n"
    b'Content-Type: "application/json; charset=utf-8"\r\n'
    b"\r\n"
    b"{\r\n"
    b'    "message": "data"\r\n'
    b"}\r\n"
    b"--simple boundary\r\n"
    b"Content-type: text/plain; charset=us-ascii\r\n"
    b"\r\n"
    b"Another simple message.\r\n"
    b"--simple boundary--\r\n"
)


def build(boundary: str, *raw_parts: bytes, preamble: bytes = b"", epilogue: bytes = b"") -> bytes:
    """A body from raw part texts (header lines, empty line, content), written by hand."""
    dash = b"--" + boundary.encode()
    out = preamble + (b"\r\n" if preamble else b"")
    for raw in raw_parts:
        out += dash + b"\r\n" + raw + b"\r\n"
    return out + dash + b"--\r\n" + epilogue


def round_trip(parts: list[tuple[dict[str, str], bytes]]) -> list[Part]:
    content_type, body = multipart.encode(parts)
    boundary = multipart.boundary_from_content_type(content_type)
    assert boundary is not None
    return multipart.parse(body, boundary, max_parts=len(parts))


# --- boundary_from_content_type ---


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ('multipart/mixed; boundary="simple boundary"', "simple boundary"),
        ("multipart/mixed; boundary=abc123", "abc123"),
        ("Multipart/MIXED;BOUNDARY=abc", "abc"),
        ('multipart/mixed; charset="x;y"; Boundary = "a=b c"', "a=b c"),
        ("multipart/mixed ; boundary=abc ;", "abc"),
        ("multipart/mixed; boundary='()+_,-./:=?", "'()+_,-./:=?"),
        ('multipart/mixed; boundary="a\\:b"', "a:b"),
        ("multipart/mixed; boundary=" + "x" * 70, "x" * 70),
    ],
)
def test_boundary_is_read_from_multipart_mixed(content_type: str, expected: str) -> None:
    assert multipart.boundary_from_content_type(content_type) == expected


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "text/plain; boundary=abc", "multipart/form-data; boundary=abc", ""],
)
def test_other_media_types_have_no_boundary(content_type: str) -> None:
    assert multipart.boundary_from_content_type(content_type) is None


@pytest.mark.parametrize(
    ("content_type", "message"),
    [
        ("multipart/mixed", "no boundary"),
        ("multipart/mixed; charset=utf-8", "no boundary"),
        ("multipart/mixed; boundary=", "invalid boundary"),
        ('multipart/mixed; boundary=""', "invalid boundary"),
        ('multipart/mixed; boundary="trailing space "', "invalid boundary"),
        ("multipart/mixed; boundary=" + "x" * 71, "invalid boundary"),
        ("multipart/mixed; boundary=a*b", "invalid boundary"),
        ('multipart/mixed; boundary="a;b"', "invalid boundary"),
        ('multipart/mixed; boundary="unterminated', "unterminated"),
        ("multipart/mixed; boundary=a; boundary=b", "more than one boundary"),
        ("multipart/mixed; novalue", "without '='"),
    ],
)
def test_bad_multipart_content_types_are_errors(content_type: str, message: str) -> None:
    with pytest.raises(MultipartError, match=message):
        multipart.boundary_from_content_type(content_type)


# --- parse ---


def test_spec_example_with_quoted_boundary_containing_a_space() -> None:
    boundary = multipart.boundary_from_content_type('multipart/mixed; boundary="simple boundary"')
    assert boundary == "simple boundary"
    parts = multipart.parse(SPEC_EXAMPLE, boundary, max_parts=10)
    assert parts == [
        Part(
            headers={"content-type": '"application/json; charset=utf-8"'},
            body=b'{\r\n    "message": "data"\r\n}',
        ),
        Part(
            headers={"content-type": "text/plain; charset=us-ascii"},
            body=b"Another simple message.",
        ),
    ]
    assert multipart.part_content_type(parts[0]) == "application/json; charset=utf-8"
    assert multipart.part_content_type(parts[1]) == "text/plain; charset=us-ascii"


def test_part_content_type_defaults_to_octet_stream() -> None:
    assert multipart.part_content_type(Part(headers={}, body=b"x")) == "application/octet-stream"
    assert (
        multipart.part_content_type(Part(headers={"content-type": ""}, body=b""))
        == "application/octet-stream"
    )


def test_preamble_and_epilogue_are_ignored() -> None:
    body = build(
        "b",
        b"X-A: 1\r\n\r\none",
        preamble=b"This is the preamble.\r\n--b is not here\r\n--bX neither",
        epilogue=b"This is the epilogue.\r\n--b\r\nX-A: 2\r\n\r\nnot a part\r\n--b--\r\n",
    )
    assert multipart.parse(body, "b", max_parts=10) == [Part(headers={"x-a": "1"}, body=b"one")]


def test_close_delimiter_without_final_crlf_and_with_padding() -> None:
    body = b"--b \t\r\n\r\nfirst\r\n--b\t\r\n\r\nsecond\r\n--b-- "
    assert [p.body for p in multipart.parse(body, "b", max_parts=10)] == [b"first", b"second"]


def test_header_names_are_lower_cased_and_values_stripped() -> None:
    body = build(
        "b",
        b"CONTENT-TYPE:   text/plain  \r\nX-Trace-Id:abc\r\ncontent-ENCODING: gzip\r\n\r\nbody",
    )
    [part] = multipart.parse(body, "b", max_parts=1)
    assert part.headers == {
        "content-type": "text/plain",
        "x-trace-id": "abc",
        "content-encoding": "gzip",
    }
    assert part.body == b"body"
    assert multipart.part_content_type(part) == "text/plain"


def test_folded_header_lines_are_joined() -> None:
    body = build("b", b"X-Long: first\r\n  second\r\n\tthird\r\nX-Next: n\r\n\r\nbody")
    [part] = multipart.parse(body, "b", max_parts=1)
    assert part.headers == {"x-long": "first second third", "x-next": "n"}


def test_part_without_headers() -> None:
    body = build("b", b"\r\nno headers\r\n\r\nhere", b"\r\nX-Not: a header")
    parts = multipart.parse(body, "b", max_parts=10)
    assert parts == [
        Part(headers={}, body=b"no headers\r\n\r\nhere"),
        Part(headers={}, body=b"X-Not: a header"),
    ]


def test_empty_part_bodies() -> None:
    body = b"--b\r\nX-A: 1\r\n\r\n\r\n--b\r\n\r\n\r\n--b\r\n\r\n--b\r\nX-B: 2\r\n\r\n--b--\r\n"
    parts = multipart.parse(body, "b", max_parts=10)
    assert parts == [
        Part(headers={"x-a": "1"}, body=b""),
        Part(headers={}, body=b""),
        Part(headers={}, body=b""),
        Part(headers={"x-b": "2"}, body=b""),
    ]


def test_boundary_like_text_inside_a_body_is_content() -> None:
    content = (
        b"--b at the start\r\n"
        b"mid line --b\r\n"
        b"--bX\r\n"
        b"--b-\r\n"
        b"--b--X\r\n"
        b"--b x\r\n"
        b"bare LF\n--b\n"
        b"bare CR\r--b\r"
        b"\r\n\r\n--b is only a delimiter with nothing but padding after it"
    )
    body = build("b", b"\r\n" + content, b"X-A: 1\r\n\r\n" + content)
    parts = multipart.parse(body, "b", max_parts=10)
    assert parts == [Part(headers={}, body=content), Part(headers={"x-a": "1"}, body=content)]


def test_body_ending_in_crlf_keeps_it() -> None:
    body = b"--b\r\n\r\nline\r\n\r\n--b--"
    assert multipart.parse(body, "b", max_parts=1) == [Part(headers={}, body=b"line\r\n")]


def test_max_parts_is_enforced() -> None:
    body = build("b", b"\r\n1", b"\r\n2", b"\r\n3")
    assert [p.body for p in multipart.parse(body, "b", max_parts=3)] == [b"1", b"2", b"3"]
    with pytest.raises(MultipartError, match="the limit is 2"):
        multipart.parse(body, "b", max_parts=2)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "no opening delimiter"),
        (b"no delimiter at all", "no opening delimiter"),
        (b"text --b\r\n\r\nbody\r\n--b-", "no opening delimiter"),
        (b"--bX\r\n\r\nbody\r\n--bX--", "no opening delimiter"),
        (b"text --b\r\n\r\nbody\r\n--b--", "no parts"),
        (b"--bX\r\n\r\nbody\r\n--b--", "no parts"),
        (b"--b", "no opening delimiter"),
        (b"--b\r\n\r\nbody", "missing close delimiter"),
        (b"--b\r\n\r\nbody\r\n--b\r\n\r\nmore\r\n", "missing close delimiter"),
        (b"--b\r\n\r\nbody\r\n--b-", "missing close delimiter"),
        (b"--b\r\n\r\nbody\r\n--b--X", "missing close delimiter"),
        (b"--b\r\n\r\nbody--b--", "missing close delimiter"),
        (b"--b--\r\n", "no parts"),
        (b"preamble\r\n--b--", "no parts"),
        (b"--b\r\nnot a header\r\n\r\nbody\r\n--b--", "header line without a colon"),
        (b"--b\r\nX-A: 1\r\nnot a header\r\n\r\nbody\r\n--b--", "without a colon"),
        (b'--b\r\n{"a": 1}\r\n--b--', "invalid header name"),
        (b"--b\r\nX A: 1\r\n\r\nbody\r\n--b--", "invalid header name"),
        (b"--b\r\n: 1\r\n\r\nbody\r\n--b--", "invalid header name"),
        (b"--b\r\n folded: 1\r\n\r\nbody\r\n--b--", "folded header line"),
        (b"--b\r\nX-A: 1\nX-B: 2\r\n\r\nbody\r\n--b--", "control character"),
        (b"--b\r\nX-A: 1\rX-B: 2\r\n\r\nbody\r\n--b--", "control character"),
        (b"--b\r\nX-A: \xff\r\n\r\nbody\r\n--b--", "not UTF-8"),
        (b"--b\r\nX-A: 1\r\nx-a: 2\r\n\r\nbody\r\n--b--", "more than one 'x-a' header"),
    ],
)
def test_malformed_bodies_are_errors(body: bytes, message: str) -> None:
    with pytest.raises(MultipartError, match=message):
        multipart.parse(body, "b", max_parts=10)


def test_errors_name_the_part() -> None:
    body = build("b", b"\r\nfine", b"bad line\r\n\r\nbody")
    with pytest.raises(MultipartError, match=r"^part 2: header line without a colon"):
        multipart.parse(body, "b", max_parts=10)


def test_parse_rejects_an_invalid_boundary() -> None:
    with pytest.raises(MultipartError, match="invalid boundary"):
        multipart.parse(b"--\r\n\r\nx\r\n----", "", max_parts=10)


def test_large_body_with_many_near_delimiters() -> None:
    content = b"\r\n--bX" * 500_000 + b"\r\n--b  x" * 500_000  # over 10 MiB
    body = build("b", b"\r\n" + content, b"\r\n" + content)
    assert multipart.parse(body, "b", max_parts=2) == [
        Part(headers={}, body=content),
        Part(headers={}, body=content),
    ]


# --- encode ---


def test_encode_layout() -> None:
    content_type, body = multipart.encode([({"Content-Type": "text/plain"}, b"hi"), ({}, b"")])
    boundary = multipart.boundary_from_content_type(content_type)
    assert boundary is not None
    assert content_type == f"multipart/mixed; boundary={boundary}"
    assert len(boundary) == 32
    dash = f"--{boundary}".encode()
    assert body == (
        dash
        + b"\r\nContent-Type: text/plain\r\n\r\nhi\r\n"
        + dash
        + b"\r\n\r\n\r\n"
        + dash
        + b"--\r\n"
    )


def test_round_trip_of_binary_bodies() -> None:
    all_bytes = bytes(range(256))
    bodies = [
        all_bytes,
        all_bytes[::-1] * 3,
        b"line 1\r\nline 2\r\n\r\n",
        b"\r\n--" + b"0123456789abcdef" * 2 + b"\r\n",
        b"\r\n--simple boundary--\r\n--b--\r\n",
        b"",
        b"\r\n",
        b"--",
    ]
    parts = round_trip([({}, b) for b in bodies])
    assert [p.body for p in parts] == bodies
    assert all(p.headers == {} for p in parts)


def test_round_trip_preserves_per_part_headers() -> None:
    sent = [
        ({"Content-Type": "application/json", "X-MQS-MESSAGE-ID": "m-1"}, b'{"a": 1}'),
        ({"Content-Type": "application/octet-stream", "Content-Encoding": "gzip"}, b"\x1f\x8b"),
        ({"X-TRACE-ID": "trace \u00e9"}, b"\r\n"),
    ]
    parts = round_trip(sent)
    assert parts == [
        Part(headers={k.lower(): v for k, v in headers.items()}, body=body)
        for headers, body in sent
    ]
    assert [multipart.part_content_type(p) for p in parts] == [
        "application/json",
        "application/octet-stream",
        "application/octet-stream",
    ]


def test_encode_avoids_a_boundary_found_in_a_body(monkeypatch: pytest.MonkeyPatch) -> None:
    candidates = iter(["aaaa", "bbbb", "cccc"])
    monkeypatch.setattr(secrets, "token_hex", lambda _n: next(candidates))
    content_type, body = multipart.encode([({}, b"xx\r\n--aaaa--\r\n"), ({"X-B": "bbbb"}, b"")])
    assert content_type == "multipart/mixed; boundary=cccc"
    parts = multipart.parse(body, "cccc", max_parts=2)
    assert parts == [
        Part(headers={}, body=b"xx\r\n--aaaa--\r\n"),
        Part(headers={"x-b": "bbbb"}, body=b""),
    ]


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"Bad Name": "x"}, "invalid header name"),
        ({"": "x"}, "invalid header name"),
        ({"X-A": "line\r\nX-Injected: 1"}, "control character"),
        ({"X-A": "bare\nLF"}, "control character"),
        ({"X-A": "1", "x-a": "2"}, "more than one"),
    ],
)
def test_encode_rejects_bad_headers(headers: dict[str, str], message: str) -> None:
    with pytest.raises(MultipartError, match=message):
        multipart.encode([(headers, b"body")])
