"""A connection's phone: the device info a wallet set with push-notifications-fcm or -apns,
kept in the connection's record (so it goes with the connection), one device per
connection: setting it again through either protocol replaces it."""

from __future__ import annotations

from mediator.engine import keys
from mediator.engine.scripts import Scripts
from mediator.mediation import record as rec
from mediator.notify.provider import Device
from mediator.storage.clients import RedisClient

NOTE_MEMBER = keys.NOTE_MEMBER


def _s(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value


def schedule_keys(connection: str) -> tuple[list[str], str]:
    """notify.lua's KEYS (the record, the shard's schedule) and the connection's member."""
    queue = keys.queue_keys(f"{keys.DIDCOMM_NAMESPACE}:{connection}")
    return [queue.cfg, queue.due], NOTE_MEMBER + connection


class DeviceBook:
    def __init__(self, redis: RedisClient) -> None:
        self.redis = redis
        self.scripts = Scripts(redis)

    async def set(self, connection: str, device: Device) -> None:
        record = keys.connection_keys(connection).record
        # A notification pending for the old token goes to the new one.
        await self.redis.hset(
            record,
            mapping={
                rec.DEVICE_SERVICE: device.service,
                rec.DEVICE_TOKEN: device.token,
                rec.DEVICE_PLATFORM: device.platform,
                rec.DEVICE_APP: device.app,
            },
        )

    async def get(self, connection: str) -> Device | None:
        service, token, platform, app = await self.redis.hmget(
            keys.connection_keys(connection).record,
            [rec.DEVICE_SERVICE, rec.DEVICE_TOKEN, rec.DEVICE_PLATFORM, rec.DEVICE_APP],
        )
        if not token:
            return None
        return Device(_s(service), _s(token), _s(platform), _s(app))

    async def remove(self, connection: str, service: str) -> None:
        """Forget the device if it registered through `service` (fcm or apns), and any
        notification pending for it."""
        device = await self.get(connection)
        if device is None or device.service != service:
            return
        keys_, member = schedule_keys(connection)
        await self.scripts.call("notify", keys_, ["forget", member, 0, device.token])
