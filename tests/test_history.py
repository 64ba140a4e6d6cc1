"""The soaks' history checker (tests/soak/history.py): histories with a known fault must be
reported as such, and a clean one not at all."""

from __future__ import annotations

from tests.soak.history import Content, History


def clean(senders: int = 2, recipients: int = 2, each: int = 5) -> History:
    """Every forward accepted, delivered once in order, acknowledged."""
    h = History()
    n = 0
    for seq in range(each):
        for s in range(senders):
            for r in range(recipients):
                h.accepted(f"s{s}", seq, f"r{r}")
                n += 1
                h.delivered(f"r{r}", f"m{n}", f"s{s}", seq)
                h.acknowledged(f"r{r}", f"m{n}")
    return h


def test_a_clean_history_is_ok() -> None:
    verdict = clean().check()
    assert verdict.ok
    assert (verdict.accepted, verdict.delivered, verdict.deliveries) == (20, 20, 20)
    first = verdict.summary().splitlines()[0]
    assert "lost 0 " in first and "duplicated 0 " in first and "reordered 0 " in first
    assert len(verdict.summary().splitlines()) == 1  # no fault lines


def test_reoffers_before_acknowledgement_are_not_duplicates() -> None:
    h = History()
    h.accepted("s", 1, "r")
    h.delivered("r", "m1", "s", 1)  # handed out, the socket died before the ack
    h.delivered("r", "m1", "s", 1)  # offered again: at-least-once
    h.acknowledged("r", "m1")
    verdict = h.check()
    assert verdict.ok and verdict.reoffers == 1


def test_an_accepted_content_never_delivered_is_lost() -> None:
    h = clean()
    h.accepted("s0", 99, "r1")
    h.accepted("s1", 98, "r0")
    h.delivered("r0", "late", "s1", 98)  # this one did arrive
    verdict = h.check()
    assert verdict.lost == [Content("s0", 99, "r1")]
    assert not verdict.ok
    assert "lost 1 " in verdict.summary() and "s0#99->r1" in verdict.summary()


def test_a_content_delivered_to_another_recipient_is_lost_and_stray() -> None:
    h = History()
    h.accepted("s", 1, "alice")
    h.delivered("bob", "m1", "s", 1)
    verdict = h.check()
    assert verdict.lost == [Content("s", 1, "alice")]
    assert verdict.stray == [Content("s", 1, "bob")]


def test_a_message_delivered_after_its_acknowledgement_is_a_duplicate() -> None:
    h = clean()
    h.delivered("r0", "m1", "s0", 0)  # m1 was acknowledged in clean()
    verdict = h.check()
    assert [(d.content, d.why) for d in verdict.duplicated] == [
        (Content("s0", 0, "r0"), "after acknowledgement")
    ]
    assert verdict.reoffers == 0
    assert "duplicated 1 " in verdict.summary()


def test_one_content_under_two_message_ids_is_a_duplicate() -> None:
    h = History()
    h.accepted("s", 1, "r")
    h.delivered("r", "m1", "s", 1)
    h.delivered("r", "m2", "s", 1)
    verdict = h.check()
    assert len(verdict.duplicated) == 1
    assert verdict.duplicated[0].message_ids == ("m1", "m2")
    assert verdict.duplicated[0].why == "under 2 message ids"


def test_a_forward_sent_again_after_no_answer_may_arrive_twice() -> None:
    h = History()
    h.unanswered("s", 1, "r")  # perhaps stored before the node died
    h.accepted("s", 1, "r")
    h.delivered("r", "m1", "s", 1)
    h.delivered("r", "m2", "s", 1)
    assert h.check().ok
    h.delivered("r", "m3", "s", 1)  # three copies from two attempts
    assert len(h.check().duplicated) == 1


def test_an_unanswered_forward_never_delivered_is_not_lost() -> None:
    h = History()
    h.unanswered("s", 1, "r")
    verdict = h.check()
    assert verdict.ok and verdict.unanswered == 1 and verdict.accepted == 0


def test_a_content_first_delivered_after_a_later_one_is_reordered() -> None:
    h = History()
    for seq in (1, 2, 3, 4):
        h.accepted("s", seq, "r")
    h.accepted("t", 1, "r")
    h.delivered("r", "m1", "s", 1)
    h.delivered("r", "m3", "s", 3)
    h.delivered("r", "t1", "t", 1)  # another sender's: its own order
    h.delivered("r", "m2", "s", 2)  # overtaken by 3
    h.delivered("r", "m4", "s", 4)
    h.delivered("r", "m2", "s", 2)  # a re-offer changes nothing
    verdict = h.check()
    assert [(r.content, r.overtaken_by) for r in verdict.reordered] == [(Content("s", 2, "r"), 3)]
    assert not verdict.lost and not verdict.duplicated
    assert "reordered 1 " in verdict.summary() and "s#2->r after #3" in verdict.summary()


def test_order_is_per_sender_and_recipient() -> None:
    h = History()
    h.accepted("s", 1, "a")
    h.accepted("s", 2, "b")
    h.delivered("b", "x", "s", 2)  # to another recipient: no order between them
    h.delivered("a", "y", "s", 1)
    assert h.check().ok


def test_a_content_nobody_sent_is_stray() -> None:
    h = clean()
    h.delivered("r0", "ghost", "nobody", 1)
    verdict = h.check()
    assert verdict.stray == [Content("nobody", 1, "r0")] and not verdict.ok
