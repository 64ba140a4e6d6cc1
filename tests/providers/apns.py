"""A local Apple Push Notification service: the provider API over HTTP/2 and TLS, served with the
`h2` library on an asyncio TLS server, following Apple's "Sending notification requests to
APNs" and "Establishing a token-based connection to APNs".

- TLS with ALPN `h2` only. Apple speaks nothing but HTTP/2: a client that did not negotiate h2
  (an HTTP/1.1 client) gets HTTP/2 frames it cannot parse, SETTINGS then GOAWAY, and the
  connection closes.
- `POST /3/device/<device token>` (other paths 404 BadPath, other methods 405
  MethodNotAllowed); the token 64 hex characters (400 BadDeviceToken; empty: MissingDeviceToken).
- `authorization: bearer <provider token>`: a JWT signed ES256 (raw r||s signature) with header
  {alg: ES256, kid: key id} and claims {iss: team id, iat}. Missing: 403 MissingProviderToken;
  wrong key, kid, team, algorithm or signature, or iat in the future: 403 InvalidProviderToken;
  iat older than an hour: 403 ExpiredProviderToken; more than `max_token_updates` new tokens
  from the key within 20 minutes: 429 TooManyProviderTokenUpdates (Apple asks providers to
  refresh tokens no more than once every 20 minutes).
- `apns-topic` one of `topics` (missing: 400 MissingTopic; other: 400 TopicDisallowed);
  `apns-push-type` one of Apple's types (else 400 InvalidPushType); `apns-priority` 10, 5 or 1
  (else 400 BadPriority); `apns-expiration` a UNIX time (else 400 BadExpirationDate);
  `apns-collapse-id` at most 64 bytes (else 400 BadCollapseId); `apns-id` a canonical UUID
  (else 400 BadMessageId); a header given twice: 400 DuplicateHeaders.
- the body a JSON object with an `aps` dictionary, at most 4096 bytes (5120 for voip): empty 400
  PayloadEmpty, larger 413 PayloadTooLarge. Per Apple's rules for push types, `alert` needs
  aps.alert and `background` needs aps.content-available = 1 and apns-priority 5 (else 400
  BadPriority). A body that is not such JSON, or breaks the push type's rule, gets 400
  BadPayload: this stand-in's own reason, Apple's table has none for it (a client should treat
  any 400 reason it does not know as a permanent failure of that notification).

Answers: 200 with an `apns-id` header (the request's, or a new UUID; the sandbox instance also
sends `apns-unique-id` as Apple's development server does), or the status with `apns-id` and
the JSON body `{"reason": "..."}` (410 adds `"timestamp"`: milliseconds since the epoch).
Scripted failures replace acceptances (see `fail`, `fail_next`).

Two instances play the sandbox (api.sandbox.push.apple.com) and production
(api.push.apple.com); `accept_only(tokens)` makes an instance refuse other device tokens with
400 BadDeviceToken, as Apple does for a token of the other environment."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions

from tests.providers import jws
from tests.providers.base import Outcome, ProviderServer
from tests.providers.credentials import ApnsKey, TlsCert

REASON_STATUS: dict[str, int] = {
    **dict.fromkeys(
        [
            "BadCollapseId",
            "BadDeviceToken",
            "BadExpirationDate",
            "BadMessageId",
            "BadPriority",
            "BadTopic",
            "DeviceTokenNotForTopic",
            "DuplicateHeaders",
            "IdleTimeout",
            "InvalidPushType",
            "MissingDeviceToken",
            "MissingTopic",
            "PayloadEmpty",
            "TopicDisallowed",
            "BadPayload",
        ],
        400,
    ),
    **dict.fromkeys(
        [
            "BadCertificate",
            "BadCertificateEnvironment",
            "ExpiredProviderToken",
            "Forbidden",
            "InvalidProviderToken",
            "MissingProviderToken",
        ],
        403,
    ),
    "BadPath": 404,
    "MethodNotAllowed": 405,
    "ExpiredToken": 410,
    "Unregistered": 410,
    "PayloadTooLarge": 413,
    "TooManyProviderTokenUpdates": 429,
    "TooManyRequests": 429,
    "InternalServerError": 500,
    "ServiceUnavailable": 503,
    "Shutdown": 503,
}
PUSH_TYPES = {
    "alert",
    "background",
    "location",
    "voip",
    "complication",
    "fileprovider",
    "mdm",
    "liveactivity",
    "pushtotalk",
    "widgets",
}
DEVICE_PATH = "/3/device/"
DEVICE_TOKEN_RE = re.compile(r"^[0-9a-fA-F]{64}$")
UUID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)
TOKEN_MAX_AGE_SECONDS = 3600
TOKEN_UPDATE_WINDOW_SECONDS = 20 * 60
CLOCK_SKEW_SECONDS = 60


class Refused(Exception):
    """An answer other than 200: Apple's reason, its status, an optional retry-after."""

    def __init__(
        self, reason: str, status: int | None = None, retry_after: int | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status or REASON_STATUS[reason]
        self.retry_after = retry_after


@dataclass(frozen=True)
class ApnsNotification:
    """An accepted notification: device token, request headers (no pseudo-headers), the JSON
    payload and raw body, the apns-id answered, the instance's environment, the provider token."""

    device_token: str
    headers: dict[str, str]
    payload: dict[str, Any]
    body: bytes = field(repr=False)
    apns_id: str
    environment: str
    provider_token: str = field(repr=False)
    time: float

    @property
    def topic(self) -> str:
        return self.headers["apns-topic"]

    @property
    def push_type(self) -> str:
        return self.headers["apns-push-type"]

    @property
    def priority(self) -> int:
        return int(self.headers.get("apns-priority", "10"))

    @property
    def collapse_id(self) -> str | None:
        return self.headers.get("apns-collapse-id")


@dataclass
class _Stream:
    headers: list[tuple[str, str]]
    body: bytearray = field(default_factory=bytearray)


class ApnsServer(ProviderServer):
    """One APNs environment (see the module docstring). `url` is its base URL (https)."""

    def __init__(
        self,
        key: ApnsKey,
        tls: TlsCert,
        topics: Iterable[str] = ("org.example.mediator",),
        environment: str = "sandbox",
        max_token_updates: int | None = 3,
    ) -> None:
        super().__init__()
        self.name = f"apns-{environment}"
        self.key = key
        self.tls = tls
        self.topics = set(topics)
        self.environment = environment
        self.max_token_updates = max_token_updates
        self.url = f"https://127.0.0.1:{self.port}"
        self.notifications: list[ApnsNotification] = []
        self.connections = 0
        self._devices: set[str] | None = None
        self._token_first_seen: dict[str, float] = {}
        self._records = threading.Lock()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    # scripting ------------------------------------------------------------------------------

    def fail(
        self,
        device_token: str,
        reason: str = "Unregistered",
        *,
        status: int | None = None,
        times: int | None = None,
        retry_after: int | None = None,
    ) -> None:
        """Notifications to `device_token` fail with Apple's `reason` (Unregistered,
        BadDeviceToken, TooManyRequests, InternalServerError, ServiceUnavailable...) and its
        status unless `status` is given, `times` times (None: until cleared), with a
        `retry-after` header if `retry_after` is given."""
        status = status or REASON_STATUS.get(reason, 400)
        self.script.for_key(device_token, Outcome(status, reason, retry_after, times))

    def fail_next(
        self,
        count: int,
        reason: str = "ServiceUnavailable",
        *,
        status: int | None = None,
        retry_after: int | None = None,
    ) -> None:
        """The next `count` notifications, whatever their device token, fail as `fail` says."""
        status = status or REASON_STATUS.get(reason, 400)
        self.script.next(count, Outcome(status, reason, retry_after, 1))

    def accept_only(self, device_tokens: Iterable[str] | None) -> None:
        """Refuse device tokens not in `device_tokens` with 400 BadDeviceToken (None: any)."""
        self._devices = None if device_tokens is None else {t.lower() for t in device_tokens}

    # waiting --------------------------------------------------------------------------------

    async def wait_for(
        self,
        count: int = 1,
        timeout: float = 5.0,  # noqa: ASYNC109
    ) -> list[ApnsNotification]:
        """Wait until at least `count` notifications were accepted; all of them so far."""
        what = f"{count} notifications"
        await self.wait_until(lambda: len(self.notifications) >= count, timeout, what)
        return list(self.notifications)

    def wait_for_sync(self, count: int = 1, timeout: float = 5.0) -> list[ApnsNotification]:
        what = f"{count} notifications"
        self.wait_until_sync(lambda: len(self.notifications) >= count, timeout, what)
        return list(self.notifications)

    # serving --------------------------------------------------------------------------------

    async def _serve(self) -> None:
        context = self.tls.server_context(alpn=["h2"])
        self._server = await asyncio.start_server(self._connection, sock=self.sock, ssl=context)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        if self._tasks:  # aborted, their reads end at once; cancelling them would be logged
            await asyncio.wait(list(self._tasks), timeout=2)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        conn = h2.connection.H2Connection(config=config)
        conn.initiate_connection()
        try:
            ssl_object = writer.get_extra_info("ssl_object")
            if ssl_object is None or ssl_object.selected_alpn_protocol() != "h2":
                self._reject("HTTP/1.1")
                conn.close_connection(error_code=h2.errors.ErrorCodes.PROTOCOL_ERROR)
                writer.write(conn.data_to_send())
                await writer.drain()
                # Read what the client sent before closing: closing on unread data would reset
                # the connection and the client might never see the frames.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(reader.read(65536), 1)
                return
            writer.write(conn.data_to_send())
            await self._frames(reader, writer, conn)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)

    async def _frames(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        conn: h2.connection.H2Connection,
    ) -> None:
        streams: dict[int, _Stream] = {}
        while True:
            data = await reader.read(65536)
            if not data:
                return
            try:
                events = conn.receive_data(data)
            except h2.exceptions.ProtocolError:
                writer.write(conn.data_to_send())
                await writer.drain()
                return
            for event in events:
                if isinstance(event, h2.events.RequestReceived) and event.stream_id is not None:
                    headers = [(str(k), str(v)) for k, v in event.headers or []]
                    streams[event.stream_id] = _Stream(headers)
                elif isinstance(event, h2.events.DataReceived) and event.stream_id is not None:
                    if event.stream_id in streams and event.data:
                        streams[event.stream_id].body += event.data
                    conn.acknowledge_received_data(
                        event.flow_controlled_length or 0, event.stream_id
                    )
                elif isinstance(event, h2.events.StreamEnded) and event.stream_id is not None:
                    stream = streams.pop(event.stream_id, None)
                    if stream is not None:
                        self._respond(conn, event.stream_id, stream)
                elif isinstance(event, h2.events.StreamReset) and event.stream_id is not None:
                    streams.pop(event.stream_id, None)
                elif isinstance(event, h2.events.ConnectionTerminated):
                    writer.write(conn.data_to_send())
                    await writer.drain()
                    return
            writer.write(conn.data_to_send())
            await writer.drain()

    def _respond(self, conn: h2.connection.H2Connection, stream_id: int, stream: _Stream) -> None:
        self.requests += 1
        request_id = dict(stream.headers).get("apns-id", "")
        apns_id = request_id if UUID_RE.match(request_id) else str(uuid.uuid4())
        headers = [("apns-id", apns_id)]
        if self.environment == "sandbox":
            headers.append(("apns-unique-id", str(uuid.uuid4())))
        try:
            self._accept(stream, apns_id)
        except Refused as refusal:
            self._reject(refusal.reason)
            error: dict[str, Any] = {"reason": refusal.reason}
            if refusal.status == 410:
                error["timestamp"] = int(self.clock() * 1000)
            body = json.dumps(error).encode()
            if refusal.retry_after is not None:
                headers.append(("retry-after", str(refusal.retry_after)))
            conn.send_headers(
                stream_id,
                [
                    (":status", str(refusal.status)),
                    ("content-type", "application/json"),
                    ("content-length", str(len(body))),
                    *headers,
                ],
            )
            conn.send_data(stream_id, body, end_stream=True)
            return
        conn.send_headers(stream_id, [(":status", "200"), *headers], end_stream=True)

    # Apple's rules --------------------------------------------------------------------------

    def _check_provider_token(self, authorization: str | None) -> str:
        if not authorization:
            raise Refused("MissingProviderToken")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Refused("InvalidProviderToken")
        try:
            parsed = jws.parse(token)
        except jws.MalformedToken:
            raise Refused("InvalidProviderToken") from None
        header, claims = parsed.header, parsed.claims
        if (
            header.get("alg") != "ES256"
            or header.get("kid") != self.key.key_id
            or claims.get("iss") != self.key.team_id
            or not isinstance(claims.get("iat"), int)
            or not jws.verify_es256(parsed, self.key.public_key)
        ):
            raise Refused("InvalidProviderToken")
        now = self.clock()
        if claims["iat"] > now + CLOCK_SKEW_SECONDS:
            raise Refused("InvalidProviderToken")
        if now - claims["iat"] > TOKEN_MAX_AGE_SECONDS:
            raise Refused("ExpiredProviderToken")
        with self._records:
            if token not in self._token_first_seen:
                recent = [
                    t
                    for t, seen in self._token_first_seen.items()
                    if now - seen < TOKEN_UPDATE_WINDOW_SECONDS
                ]
                if self.max_token_updates is not None and len(recent) >= self.max_token_updates:
                    raise Refused("TooManyProviderTokenUpdates")
                self._token_first_seen[token] = now
        return token

    def _check_headers(self, h: dict[str, str]) -> tuple[str, int]:
        if "apns-id" in h and not UUID_RE.match(h["apns-id"]):
            raise Refused("BadMessageId")
        if not h.get("apns-topic"):
            raise Refused("MissingTopic")
        if h["apns-topic"] not in self.topics:
            raise Refused("TopicDisallowed")
        push_type = h.get("apns-push-type", "")
        if push_type not in PUSH_TYPES:
            raise Refused("InvalidPushType")
        priority = h.get("apns-priority", "10")
        if priority not in {"10", "5", "1"}:
            raise Refused("BadPriority")
        if "apns-expiration" in h and not h["apns-expiration"].isdigit():
            raise Refused("BadExpirationDate")
        if len(h.get("apns-collapse-id", "").encode()) > 64:
            raise Refused("BadCollapseId")
        return push_type, int(priority)

    @staticmethod
    def _check_payload(body: bytes, push_type: str, priority: int) -> dict[str, Any]:
        if not body:
            raise Refused("PayloadEmpty")
        if len(body) > (5120 if push_type == "voip" else 4096):
            raise Refused("PayloadTooLarge")
        try:
            payload = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise Refused("BadPayload") from None
        if not isinstance(payload, dict) or not isinstance(payload.get("aps"), dict):
            raise Refused("BadPayload")
        aps = payload["aps"]
        if push_type == "alert" and not aps.get("alert"):
            raise Refused("BadPayload")
        if push_type == "background":
            if aps.get("content-available") != 1:
                raise Refused("BadPayload")
            if priority != 5:
                raise Refused("BadPriority")
        return payload

    def _accept(self, stream: _Stream, apns_id: str) -> None:
        pseudo = {k: v for k, v in stream.headers if k.startswith(":")}
        names = [k for k, _ in stream.headers if not k.startswith(":")]
        h = {k: v for k, v in stream.headers if not k.startswith(":")}
        path = pseudo.get(":path", "")
        if not path.startswith(DEVICE_PATH):
            raise Refused("BadPath")
        if pseudo.get(":method") != "POST":
            raise Refused("MethodNotAllowed")
        if len(names) != len(set(names)):
            raise Refused("DuplicateHeaders")
        device = path[len(DEVICE_PATH) :]
        if not device:
            raise Refused("MissingDeviceToken")
        provider_token = self._check_provider_token(h.get("authorization"))
        push_type, priority = self._check_headers(h)
        payload = self._check_payload(bytes(stream.body), push_type, priority)
        if not DEVICE_TOKEN_RE.match(device):
            raise Refused("BadDeviceToken")
        if self._devices is not None and device.lower() not in self._devices:
            raise Refused("BadDeviceToken")
        outcome = self.script.take(device)
        if outcome is not None:
            raise Refused(outcome.error, outcome.status, outcome.retry_after)
        del h["authorization"]
        with self._records:
            self.notifications.append(
                ApnsNotification(
                    device,
                    h,
                    payload,
                    bytes(stream.body),
                    apns_id,
                    self.environment,
                    provider_token,
                    time.time(),
                )
            )
