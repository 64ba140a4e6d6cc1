"""A history of what senders and recipients saw, and a checker over all of it (after Jepsen).

Soaks and tests append events as they happen; at the end `check()` reads the whole history
and says what went wrong:

    history = History()
    history.accepted("s1", 7, "r1")                  # a forward answered 202
    history.delivered("r1", "mid-1", "s1", 7)        # r1 was handed content s1#7 as mid-1
    history.acknowledged("r1", "mid-1")              # r1's messages-received was answered
    verdict = history.check()
    print(verdict.summary())
    assert verdict.ok, verdict.summary()

A content is one `(sender, seq)` forwarded to one recipient: put both in the plaintext
the recipient opens. The checker reports

- **lost**: accepted (202), never delivered to its recipient by the end of the history;
- **duplicated**: delivered again after its recipient acknowledged that message id, or the
  same content delivered under more message ids than the forwards that may have stored it
  (one accepted, plus each `unanswered` attempt: a sender that got no answer sends again,
  and the first attempt may have been stored);
- **reordered**: for one sender and recipient, a content first delivered after a content
  the sender sent later;
- **stray**: a content delivered that nobody sent to that recipient.

Offering the same message id again before it is acknowledged (a delivery deadline, a socket
that closed, a takeover) is what at-least-once delivery means: counted (`reoffers`), not
reported.

**The order the mediator promises** (docs/didcomm.md, docs/engine.md): a recipient's queue
hands messages out in enqueue order, and a forward answered 202 was enqueued before a
forward sent after that answer. So for one sender that waits for each answer before its
next forward, the recipient is first handed that sender's contents in sending order. A
hand-out can be lost on its way (the socket or the node died before the frame reached the
wallet); that message is offered again after its deadline or once the socket is gone,
behind what was handed out meanwhile. So: no reordering without failures; under failures,
reordering is measured, and a soak with failures reports it rather than failing on it.
Sequence numbers must therefore rise in sending order per sender, and a sender id is one
sequential stream: run concurrent senders under distinct ids.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

SHOWN = 8  # examples of each kind printed by `summary`


@dataclass(frozen=True, order=True)
class Content:
    """One forwarded content: the sender's id and sequence number, and its recipient."""

    sender: str
    seq: int
    recipient: str

    def __str__(self) -> str:
        return f"{self.sender}#{self.seq}->{self.recipient}"


@dataclass(frozen=True)
class Duplicate:
    content: Content
    why: str  # "after acknowledgement" or "under N message ids"
    message_ids: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.content} {self.why} ({', '.join(self.message_ids)})"


@dataclass(frozen=True)
class Reorder:
    """`content` was first delivered after `overtaken_by`, which its sender sent later."""

    content: Content
    overtaken_by: int

    def __str__(self) -> str:
        return f"{self.content} after #{self.overtaken_by}"


@dataclass
class Verdict:
    accepted: int = 0  # contents answered 202
    unanswered: int = 0  # forward attempts that got no answer (may have been stored)
    delivered: int = 0  # accepted contents delivered at least once
    deliveries: int = 0  # delivery events, re-offers included
    reoffers: int = 0  # a message id handed out again before its acknowledgement
    acknowledged: int = 0  # message ids acknowledged
    lost: list[Content] = field(default_factory=list)
    duplicated: list[Duplicate] = field(default_factory=list)
    reordered: list[Reorder] = field(default_factory=list)
    stray: list[Content] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing lost, duplicated, reordered or stray."""
        return not (self.lost or self.duplicated or self.reordered or self.stray)

    def summary(self) -> str:
        """One line of figures (`lost N` etc. always present), then examples of each fault."""
        lines = [
            f"history: accepted {self.accepted}  delivered {self.delivered}  "
            f"lost {len(self.lost)}  duplicated {len(self.duplicated)}  "
            f"reordered {len(self.reordered)}  stray {len(self.stray)}  | "
            f"deliveries {self.deliveries}, re-offers {self.reoffers}, "
            f"acknowledged {self.acknowledged}, unanswered forwards {self.unanswered}"
        ]
        faults: list[tuple[str, Iterable[object]]] = [
            ("lost", self.lost),
            ("duplicated", self.duplicated),
            ("reordered", self.reordered),
            ("stray", self.stray),
        ]
        for name, items in faults:
            shown = [str(i) for i in list(items)[: SHOWN + 1]]
            if shown:
                more = " …" if len(shown) > SHOWN else ""
                lines.append(f"  {name}: {'; '.join(shown[:SHOWN])}{more}")
        return "\n".join(lines)


class History:
    """Events in the order they were recorded; safe to append to from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (kind, sender, seq, recipient, message id): fields a kind has no use for are empty
        self._events: list[tuple[str, str, int, str, str]] = []

    def _add(self, kind: str, sender: str, seq: int, recipient: str, message_id: str) -> None:
        with self._lock:
            self._events.append((kind, sender, seq, recipient, message_id))

    def accepted(self, sender: str, seq: int, recipient: str) -> None:
        """A forward of `sender`'s content `seq` to `recipient` was answered 202."""
        self._add("accepted", sender, seq, recipient, "")

    def unanswered(self, sender: str, seq: int, recipient: str) -> None:
        """A forward got no answer (its node died, a timeout): it may have been stored, and
        the sender sends it again."""
        self._add("unanswered", sender, seq, recipient, "")

    def delivered(self, recipient: str, message_id: str, sender: str, seq: int) -> None:
        """`recipient` was handed `sender`'s content `seq` as message `message_id`."""
        self._add("delivered", sender, seq, recipient, message_id)

    def acknowledged(self, recipient: str, message_id: str) -> None:
        """`recipient`'s acknowledgement of `message_id` was answered (messages-received
        replied, a push answered 2xx): the mediator may not hand it out again."""
        self._add("acknowledged", "", 0, recipient, message_id)

    def __len__(self) -> int:
        return len(self._events)

    def unacknowledged(self, recipients: set[str]) -> set[tuple[str, str]]:
        """(recipient, message id) handed out to one of `recipients` and not acknowledged."""
        with self._lock:
            events = list(self._events)
        handed = {(r, m) for kind, _, _, r, m in events if kind == "delivered" and r in recipients}
        return handed - {(r, m) for kind, _, _, r, m in events if kind == "acknowledged"}

    def undelivered(self, recipient: str) -> set[tuple[str, int]]:
        """(sender, seq) accepted for `recipient` and not handed to it yet."""
        with self._lock:
            events = list(self._events)
        accepted = {(s, q) for kind, s, q, r, _ in events if kind == "accepted" and r == recipient}
        return accepted - {(s, q) for kind, s, q, r, _ in events if kind == "delivered"}

    def check(self) -> Verdict:
        with self._lock:
            events = list(self._events)
        verdict = Verdict()
        accepted: set[Content] = set()
        attempts: Counter[Content] = Counter()  # unanswered attempts per content
        ids: dict[Content, list[str]] = defaultdict(list)  # message ids, first seen first
        first: list[Content] = []  # contents in the order of their first delivery
        seen_ids: set[tuple[str, str]] = set()
        acked: set[tuple[str, str]] = set()
        after_ack: dict[Content, list[str]] = defaultdict(list)
        for kind, sender, seq, recipient, mid in events:
            content = Content(sender, seq, recipient)
            if kind == "accepted":
                accepted.add(content)
            elif kind == "unanswered":
                attempts[content] += 1
            elif kind == "delivered":
                verdict.deliveries += 1
                if (recipient, mid) in acked:
                    after_ack[content].append(mid)
                if (recipient, mid) in seen_ids:
                    verdict.reoffers += (recipient, mid) not in acked
                    continue
                seen_ids.add((recipient, mid))
                if not ids[content]:
                    first.append(content)
                ids[content].append(mid)
            elif kind == "acknowledged":
                acked.add((recipient, mid))
        verdict.accepted = len(accepted)
        verdict.unanswered = sum(attempts.values())
        verdict.acknowledged = len(acked)
        verdict.delivered = sum(1 for c in accepted if ids.get(c))
        verdict.lost = sorted(c for c in accepted if not ids.get(c))
        verdict.stray = [c for c in first if c not in accepted and c not in attempts]
        for content in first:
            stored_at_most = (content in accepted) + attempts[content]
            if len(ids[content]) > max(1, stored_at_most):
                why = f"under {len(ids[content])} message ids"
                verdict.duplicated.append(Duplicate(content, why, tuple(ids[content])))
        for content, mids in after_ack.items():
            verdict.duplicated.append(Duplicate(content, "after acknowledgement", tuple(mids)))
        highest: dict[tuple[str, str], int] = {}
        for content in first:
            pair = (content.sender, content.recipient)
            top = highest.get(pair)
            if top is not None and content.seq < top:
                verdict.reordered.append(Reorder(content, top))
            else:
                highest[pair] = content.seq
        return verdict
