"""Problem reports (RFC 0035, in the `notification/1.0` family Pickup 2.0 shows)."""

from __future__ import annotations

from typing import Any

from mediator.didcomm.message import DIDCOMM_ORG, Message, new_id


def problem_report(code: str, description: str, inbound: Message | None) -> dict[str, Any]:
    """A report about `inbound`: `~thread.pthid` names the offending message's thread, as
    Pickup 2.0's live-delivery example does, so it never continues that thread itself."""
    prefix = inbound.type.prefix if inbound is not None else DIDCOMM_ORG
    report: dict[str, Any] = {
        "@type": f"{prefix}notification/1.0/problem-report",
        "@id": new_id(),
        "description": {"en": description, "code": code},
    }
    if inbound is not None:
        report["~thread"] = {"pthid": inbound.thread.thid}
    return report
