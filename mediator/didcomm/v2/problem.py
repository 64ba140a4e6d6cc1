"""DIDComm v2 problem reports (report-problem 2.0, DIDComm Messaging 2.1 §Problem Reports).

A code is `sorter.scope.descriptor…` (e.g. `e.p.msg.invalid-request`); the `comment` is
the same text every time for a code (the spec requires it: localisation, caching), with
what differs in `args`, interpolated as `{1}`, `{2}`. `pthid` is the thread of the message
that caused it, `ack` that message's id.

Our refusals carry short codes shared with v1 (ProblemReport.code): `V1_CODES` maps each
to a v2 code. Protocols may send their own problem-report type (Pickup 4.0 defines
`message-pickup/4.0/problem-report`), which `problem_report(..., type_=…)` writes.
"""

from __future__ import annotations

import uuid
from typing import Any

TYPE = "https://didcomm.org/report-problem/2.0/problem-report"
LIVE_MODE_NOT_SUPPORTED = "e.m.live-mode-not-supported"

COMMENTS = {
    "e.p.msg": "Bad message: {1}",
    "e.m.msg": "Bad message: {1}",
    "e.p.trust": "Failed to achieve required trust: {1}",
    "e.p.trust.crypto": "Cryptographic operation failed: {1}",
    "e.p.did": "DID is unusable: {1}",
    "e.p.req": "Circumstances don't satisfy requirements: {1}",
    "e.m.req": "Circumstances don't satisfy requirements: {1}",
    "e.p.req.time": "Failed to satisfy timing constraints: {1}",
    "e.p.me": "Internal error: {1}",
    "e.p.me.res": "A required resource is inadequate or unavailable: {1}",
    "e.m.me.res.storage": "A required resource is inadequate or unavailable: {1}",
    LIVE_MODE_NOT_SUPPORTED: "Connection does not support Live Delivery",
}
# v1 refusal codes (mediator/protocols) whose v2 code is not `e.p.msg.<code>`.
V1_CODES = {
    "refused": "e.p.req.refused",
    "live-delivery-not-supported": LIVE_MODE_NOT_SUPPORTED,
}


def code_for(v1_code: str) -> str:
    """The v2 code of one of our refusal codes (unknown ones: a bad message)."""
    return V1_CODES.get(v1_code, f"e.p.msg.{v1_code}" if v1_code else "e.p.msg")


def comment_for(code: str) -> str:
    """The static comment of `code`: its own, or its nearest prefix's."""
    parts = code.split(".")
    while parts:
        found = COMMENTS.get(".".join(parts))
        if found is not None:
            return found
        parts.pop()
    return "Problem: {1}"


def problem_report(
    code: str,
    cause: dict[str, Any] | None,
    args: list[str] | tuple[str, ...] = (),
    *,
    type_: str = TYPE,
) -> dict[str, Any]:
    """A problem report about `cause` (the message that caused it, if any)."""
    message: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "type": type_,
        "body": {"code": code, "comment": comment_for(code), "args": list(args)},
    }
    if cause is not None and isinstance(cause.get("id"), str):
        message["pthid"] = cause.get("thid") or cause["id"]
        message["ack"] = [cause["id"]]
    return message


def interpolate(comment: str, args: list[Any]) -> str:
    """The comment as a reader shows it: `{n}` replaced by args (missing ones by `?`),
    extra args appended, comma-separated (the spec's rule)."""
    text = comment
    used = 0
    for n in range(1, comment.count("{") + 1):
        marker = "{" + str(n) + "}"
        if marker in text:
            value = args[n - 1] if n - 1 < len(args) and args[n - 1] is not None else "?"
            text = text.replace(marker, str(value))
            used = max(used, n)
    extra = [str(a) for a in args[used:]]
    return text + (", " + ", ".join(extra) if extra else "")
