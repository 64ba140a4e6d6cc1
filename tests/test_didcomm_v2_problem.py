"""DIDComm v2 problem reports (mediator/didcomm/v2/problem.py): the spec's shape (pthid,
ack, code, a comment fixed per code with the details in args) and its interpolation rule."""

from __future__ import annotations

from mediator.didcomm.v2.problem import (
    LIVE_MODE_NOT_SUPPORTED,
    TYPE,
    code_for,
    interpolate,
    problem_report,
)


def test_a_report_names_the_thread_and_message_that_caused_it() -> None:
    cause = {"id": "m-2", "thid": "t-1", "type": "https://didcomm.org/routing/2.0/forward"}
    report = problem_report(code_for("invalid-forward"), cause, ["next is missing"])
    assert report["type"] == TYPE and report["pthid"] == "t-1" and report["ack"] == ["m-2"]
    assert report["body"]["code"] == "e.p.msg.invalid-forward"
    assert interpolate(report["body"]["comment"], report["body"]["args"]) == (
        "Bad message: next is missing"
    )
    without_thread = problem_report("e.p.msg", {"id": "m-3"})
    assert without_thread["pthid"] == "m-3"  # a message's thid defaults to its id


def test_a_comment_is_the_same_for_a_code_whatever_the_details() -> None:
    one = problem_report("e.p.msg.invalid-request", None, ["a"])
    two = problem_report("e.p.msg.invalid-request", None, ["b"])
    assert one["body"]["comment"] == two["body"]["comment"] and "pthid" not in one


def test_the_live_mode_code_is_the_pickup_specs() -> None:
    assert code_for("live-delivery-not-supported") == LIVE_MODE_NOT_SUPPORTED
    report = problem_report(LIVE_MODE_NOT_SUPPORTED, None)
    assert report["body"]["comment"] == "Connection does not support Live Delivery"


def test_interpolation_fills_missing_args_with_a_question_mark_and_appends_extras() -> None:
    assert interpolate("Unable to use {1} for {2}.", ["u"]) == "Unable to use u for ?."
    assert interpolate("Bad: {1}", ["x", "y", "z"]) == "Bad: x, y, z"
