"""A connection's phone: the device info a wallet set with push-notifications-fcm or -apns,
one device per connection (setting it again through either protocol replaces it).

The service, platform and app are short fields of the connection's record; the token (FCM's
are about 160 characters) is a string key beside it (`ConnectionKeys.device`), and the
record's `dt` field only says there is one: a value over 64 bytes would turn the record from
a listpack into a hash table, 160 B into 876 B (measured), for every phone.
"""

from __future__ import annotations

from mediator.engine import keys
from mediator.engine.model import QueueRef
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
    """notify.lua's KEYS (the record, the shard's schedule, the device token; one slot) and
    the connection's member in the schedule."""
    queue = keys.queue_keys(QueueRef(keys.DIDCOMM_NAMESPACE, connection).qualified)
    device = keys.connection_keys(connection).device
    return [queue.cfg, queue.due, device], NOTE_MEMBER + connection


class DeviceBook:
    def __init__(self, redis: RedisClient) -> None:
        self.redis = redis
        self.scripts = Scripts(redis)

    async def set(self, connection: str, device: Device) -> None:
        # A notification pending for the old token goes to the new one.
        names = keys.connection_keys(connection)
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(names.device, device.token)
        pipe.hset(
            names.record,
            mapping={
                rec.DEVICE_SERVICE: device.service,
                rec.DEVICE_TOKEN: "1",
                rec.DEVICE_PLATFORM: device.platform,
                rec.DEVICE_APP: device.app,
            },
        )
        await pipe.execute()

    async def get(self, connection: str) -> Device | None:
        names = keys.connection_keys(connection)
        pipe = self.redis.pipeline(transaction=False)
        pipe.hmget(names.record, [rec.DEVICE_SERVICE, rec.DEVICE_PLATFORM, rec.DEVICE_APP])
        pipe.get(names.device)
        (service, platform, app), token = await pipe.execute()
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
