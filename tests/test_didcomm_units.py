"""Message parsing (RFC 0008, RFC 0092 fields) and queue-limit arithmetic, without a server."""

from __future__ import annotations

from typing import Any

import pytest

from mediator.didcomm.message import DID_SOV, Message, MessageType
from mediator.errors import ProblemReport
from mediator.mediation.limits import QueueLimits
from mediator.settings import Settings


def parse(**fields: Any) -> Message:
    raw = {"@type": "https://didcomm.org/messagepickup/2.0/status-request", "@id": "abcdefgh"}
    raw.update(fields)
    return Message.parse(raw)


def test_thread_defaults_to_the_message_id() -> None:
    m = parse()
    assert m.thread.thid == "abcdefgh" and m.thread.sender_order == 0
    assert not m.thread.explicit
    assert parse(**{"~thread": {}}).thread.thid == "abcdefgh"


def test_implicit_reply_is_a_thread_with_another_thid_and_no_order() -> None:
    m = parse(**{"~thread": {"thid": "other-thread-1"}})
    assert m.thread.implicit_reply and m.thread.thid == "other-thread-1"
    assert not parse(
        **{"~thread": {"thid": "other-thread-1", "sender_order": 2}}
    ).thread.implicit_reply


@pytest.mark.parametrize("bad_id", ["short", "x" * 65, "has space!", "", 12345678, None])
def test_message_ids_follow_rfc_0008(bad_id: object) -> None:
    with pytest.raises(ProblemReport) as caught:
        parse(**{"@id": bad_id})
    assert caught.value.code == "invalid-message-id"


def test_message_id_edges_are_accepted() -> None:
    assert parse(**{"@id": "a" * 64}).id == "a" * 64
    assert parse(**{"@id": "A-b_c.d/e"}).id == "A-b_c.d/e"


@pytest.mark.parametrize(
    "thread",
    [
        "text",
        {"thid": "bad id"},
        {"sender_order": -1},
        {"sender_order": True},
        {"received_orders": {"did:x": "1"}},
        {"received_orders": {"did:x": -2}},
    ],
)
def test_malformed_threads_are_refused(thread: object) -> None:
    with pytest.raises(ProblemReport) as caught:
        parse(**{"~thread": thread})
    assert caught.value.code == "invalid-thread"


def test_both_type_prefixes_and_minor_versions() -> None:
    sov = MessageType.parse(DID_SOV + "queue/1.0/status-request")
    assert (sov.family, sov.major, sov.minor, sov.name) == ("queue", 1, 0, "status-request")
    assert sov.reply("status") == DID_SOV + "queue/1.0/status"
    newer = MessageType.parse("https://didcomm.org/messagepickup/2.3/status-request")
    assert newer.major == 2 and newer.minor == 3
    for bad in ("https://example.org/x/1.0/y", "https://didcomm.org/x/y", 7):
        with pytest.raises(ProblemReport):
            MessageType.parse(bad)


def test_return_route_values() -> None:
    assert parse().return_route == "none"
    routed = parse(**{"~transport": {"return_route": "thread", "return_route_thread": "t-1234567"}})
    assert routed.wants_return("t-1234567") and not routed.wants_return("abcdefgh")
    own = parse(**{"~transport": {"return_route": "thread"}})
    assert own.wants_return("abcdefgh")
    with pytest.raises(ProblemReport):
        parse(**{"~transport": {"return_route": "sometimes"}})


def test_deep_json_is_refused() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(40):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(ProblemReport):
        parse(extra=deep)


def test_limit_updates_are_held_within_operator_maxima() -> None:
    settings = Settings.of(queue_message_count_max=100, queue_size_max=0).queue
    limits = QueueLimits.defaults(settings)
    updated = limits.updated(
        {"message_count_limit": 0, "size_limit": 0, "duration_limit": 5, "will_queue": False},
        settings,
    )
    assert updated.message_count_limit == 100  # "no limit" held to the maximum
    assert updated.size_limit == 0  # no operator maximum: no limit granted
    assert updated.duration_limit == 5 and updated.will_queue is False
    assert QueueLimits.from_config(updated.to_config(settings)) == updated
    for bad in ({"size_limit": -1}, {"will_queue": "yes"}, {"colour": 1}):
        with pytest.raises(ProblemReport):
            limits.updated(bad, settings)
