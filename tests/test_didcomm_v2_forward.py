"""Routing 2.0 forwards as the mediator reads them (mediator/didcomm/v2/forward.py): `next`,
attachments as JSON or base64url, `expires_time`; and every malformed forward refused with
a 400-status problem-report saying why."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from mediator.didcomm.envelope import b64url_encode
from mediator.didcomm.v2 import forward
from mediator.errors import ProblemReport

INNER = {"protected": "e30", "recipients": [], "iv": "", "ciphertext": "", "tag": ""}


def _forward(**changes: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "id": "f-1",
        "type": forward.TYPE,
        "body": {"next": "did:peer:2.Ez6LSbob"},
        "attachments": [{"id": "a", "data": {"json": INNER}}],
    }
    message.update(changes)
    return message


def test_a_forward_names_its_recipient_and_carries_its_messages() -> None:
    encoded = {"data": {"base64": b64url_encode(orjson.dumps(INNER))}}
    got = forward.read(_forward(attachments=[{"data": {"json": INNER}}, encoded]))
    assert got.next == "did:peer:2.Ez6LSbob"
    assert [orjson.loads(p) for p in got.payloads] == [INNER, INNER]
    assert got.expires_time is None and not got.expired(2e9)


def test_an_expired_forward_says_so() -> None:
    got = forward.read(_forward(expires_time=1_700_000_000))
    assert got.expired(1_700_000_000) and not got.expired(1_699_999_999)


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"body": {}}, "names its recipient"),
        ({"body": {"next": 7}}, "names its recipient"),
        ({"attachments": []}, "as an attachment"),
        ({"attachments": [{"data": {"json": INNER}}] * 33}, "at most 32"),
        ({"attachments": [{"id": "a"}]}, "has data"),
        ({"attachments": [{"data": {"links": ["https://cdn.example/x"]}}]}, "by link"),
        ({"attachments": [{"data": {"base64": "!!"}}]}, "not base64url"),
        ({"attachments": [{"data": {"base64": b64url_encode(b"[1]")}}]}, "JSON object"),
        ({"attachments": [{"data": {}}]}, "json or base64"),
        ({"expires_time": "soon"}, "whole seconds"),
        ({"expires_time": True}, "whole seconds"),
    ],
)
def test_a_malformed_forward_is_refused_with_the_reason(changes: dict[str, Any], said: str) -> None:
    with pytest.raises(ProblemReport, match=said) as refused:
        forward.read(_forward(**changes))
    assert refused.value.status == 400 and refused.value.code == "invalid-request"
