"""DIDComm recipients made the way a wallet makes them (the project's client: DID Exchange,
then mediation), and the forwards a sender would POST to them, packed before timing so
that the figures measure the server."""

from __future__ import annotations

from bench.harness.errors import BenchError
from bench.harness.loadgen import HOST, Operation, build_request, rotating
from bench.harness.output import progress
from bench.support.live import ENVELOPE
from mediator.client import Recipient, Sender, attachments, message

RECIPIENTS_PER_BLOCK = 8  # forwards rotate over them: each queue stays under its count limit
FORWARDED = {"@type": "https://didcomm.org/basicmessage/1.0/message", "content": "x" * 1000}


class Recipients:
    """Recipients of the node on `port`."""

    def __init__(self, port: int) -> None:
        self.base = f"http://{HOST}:{port}"

    async def mediated(self, transport: str = "http") -> tuple[Recipient, str]:
        """A connected recipient with mediation granted, and the key it registered."""
        recipient = await Recipient.connect_to(self.base, transport)
        return recipient, await recipient.mediate()

    async def live(self, count: int) -> list[tuple[Recipient, str]]:
        """`count` recipients in live mode, one WebSocket each."""
        recipients: list[tuple[Recipient, str]] = []
        try:
            for _ in range(count):
                recipient, key = await self.mediated("ws")
                recipients.append((recipient, key))
                status = await recipient.live(True)
                if status.get("live_delivery") is not True:
                    raise BenchError(f"live mode was not turned on: {status!r}")
        except BaseException:
            for recipient, _ in recipients:
                await recipient.close()
            raise
        return recipients

    async def sanity(self) -> None:
        """Mediation, a forward, its delivery and its acknowledgement work as the
        benchmark assumes (fails loudly otherwise)."""
        recipient, key = await self.mediated()
        try:
            sender = Sender(recipient.routing_key)
            await sender.send_to(key, {"@type": "x", "n": 1}, self.base)
            delivery = await recipient.deliver()
            got = [recipient.open(body) for _, body in attachments(delivery)]
            if got != [{"@type": "x", "n": 1}]:
                raise BenchError(f"a forwarded message came back as {got!r}")
            await recipient.ack([i for i, _ in attachments(delivery)])
        finally:
            await recipient.close()
        progress("sanity checks passed (mediation, forward, delivery, acknowledgement)")

    async def forward_op(self, *, device: bool = False) -> Operation:
        """A closed-loop operation: POST / with a forward of a 1 KiB message, answered 202,
        rotating over RECIPIENTS_PER_BLOCK fresh recipients (any node may answer it), which
        registered a phone to notify when `device`."""
        raws = []
        for i in range(RECIPIENTS_PER_BLOCK):
            recipient, key = await self.mediated()
            if device:
                await recipient.send(
                    message(
                        "push-notifications-fcm/1.0/set-device-info",
                        device_token=f"bench-token-{i}",
                        device_platform="android",
                    )
                )
            await recipient.close()
            wrapped = Sender(recipient.routing_key).wrap(key, dict(FORWARDED))
            raws.append(build_request("POST", "/", ENVELOPE, wrapped))
        return rotating(raws, 202)
