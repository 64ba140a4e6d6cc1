"""Push Notifications FCM 1.0 (RFC 0734) and APNs 1.0 (RFC 0699), the mediator as
notification-sender: a connection sets, reads and removes the device its phone wakes on.

A device is set on a connection granted mediation: the notifications are about its
mailbox, and a connection never granted one expires, which its device token, a key of its
own, would not.
`set-device-info` with every value null removes it; with one of two null it is refused
(`missing-value`). An optional `app` field (our extension, docs/push.md) names the wallet
app whose credentials reach the device; without it the device belongs to the default app.
The set is acknowledged (RFC 0015 `ack`, adopted by both protocols) when the wallet asks
with `~please_ack` (RFC 0317): Credo's push notifications module, the one client, handles no
`ack` and answers one with a problem report. Errors are always answered. Offered only for
the services this deployment can reach (Discover Features lists what it can do).
"""

from __future__ import annotations

import re
from typing import Any

from mediator.errors import ProblemReport
from mediator.notify.provider import APNS, FCM, Device
from mediator.protocols.context import Context

TOKEN_MAX = 4096  # FCM tokens are about 160 characters
APNS_TOKEN_MAX = 512  # 64 hex digits today; Apple says the length may grow
PLATFORM_MAX = 64
APNS_TOKEN = re.compile(r"[0-9a-fA-F]{32,512}")
PRINTABLE = re.compile(r"[\x21-\x7e]+")


def _service(ctx: Context) -> str:
    service = ctx.message.type.family.removeprefix("push-notifications-")
    if not ctx.services.notifier.apps.serves(service):
        raise ProblemReport(
            "unsupported-message-type",
            f"this mediator sends no {service.upper()} notifications (not configured)",
        )
    return service


def _text(body: dict[str, Any], name: str, most: int, pattern: re.Pattern[str]) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= most or not pattern.fullmatch(value):
        raise ProblemReport(
            "invalid-value", f"{name} must be a string of 1 to {most} printable characters"
        )
    return value


async def set_device_info(ctx: Context) -> None:
    connection = ctx.require_mediation()  # notifications are about its mailbox
    service = _service(ctx)
    body = ctx.message.body
    token = _text(
        body,
        "device_token",
        APNS_TOKEN_MAX if service == APNS else TOKEN_MAX,
        APNS_TOKEN if service == APNS else PRINTABLE,
    )
    platform = "ios" if service == APNS else _text(body, "device_platform", PLATFORM_MAX, PRINTABLE)
    notifier = ctx.services.notifier
    if token is None and (service == APNS or body.get("device_platform") is None):
        await notifier.devices.remove(connection.verkey, service)
    elif token is None or platform is None:
        raise ProblemReport(
            "missing-value", "device_token and device_platform: both set, or both null to remove"
        )
    else:
        named = body.get("app")
        if named is not None and not isinstance(named, str):
            raise ProblemReport("invalid-value", "app must be the name of a wallet app")
        app = notifier.apps.app_for(service, named)
        if app is None:
            which = f"app {named[:64]!r}" if named is not None else "default app"
            raise ProblemReport(
                "unknown-app", f"no {which} with {service.upper()} notifications here"
            )
        await notifier.devices.set(connection.verkey, Device(service, token, platform, app.name))
    if "~please_ack" in body:
        ctx.reply("ack", {"status": "OK"})


async def get_device_info(ctx: Context) -> None:
    connection = ctx.require_connection()
    service = _service(ctx)
    device = await ctx.services.notifier.devices.get(connection.verkey)
    if device is None or device.service != service:
        raise ProblemReport(
            "not-registered-for-push-notifications",
            f"this connection has no device registered for {service.upper()} notifications",
        )
    info: dict[str, Any] = {"device_token": device.token}
    if service == FCM:
        info["device_platform"] = device.platform
    ctx.reply("device-info", info)


HANDLERS = {
    (f"push-notifications-{service}", 1, name): handler
    for service in (FCM, APNS)
    for name, handler in (
        ("set-device-info", set_device_info),
        ("get-device-info", get_device_info),
    )
}
