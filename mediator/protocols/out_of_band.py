"""Out-of-Band 1.1 (RFC 0434), the inviter's side of connection reuse: a wallet that scans
an invitation of ours again, and already has a connection with us, sends `handshake-reuse`
over that connection instead of making a new one, and is told `handshake-reuse-accepted`.

The connection the message arrives on is the proof (it is authcrypted by its key), so reuse
is accepted whichever of our invitations `~thread.pthid` names: the multi-use one, one
imported from the mediator we replaced, or a single-use one already used up.
"""

from __future__ import annotations

from mediator.errors import ProblemReport
from mediator.protocols.context import Context

FAMILY = "out-of-band"


async def handshake_reuse(ctx: Context) -> None:
    ctx.require_connection()
    thread = ctx.message.thread
    if thread.pthid is None:
        raise ProblemReport(
            "invalid-reuse", "handshake-reuse names the invitation it reuses in ~thread.pthid"
        )
    ctx.reply("handshake-reuse-accepted", {"~thread": {"thid": thread.thid, "pthid": thread.pthid}})


HANDLERS = {(FAMILY, 1, "handshake-reuse"): handshake_reuse}
