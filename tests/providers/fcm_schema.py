"""Validation of an FCM HTTP v1 `messages:send` request body as FCM does it: the proto3 JSON
mapping of `SendMessageRequest` (field names in snake_case or lowerCamelCase, unknown names
refused, `data` maps of string to string only, a `target` oneof of token/topic/condition), then
FCM's own checks (a recipient set, a well-formed registration token, no reserved data keys, at
most 4096 bytes of data). Errors carry the message and `details` FCM answers with."""

from __future__ import annotations

import json
import re
from typing import Any

FCM_ERROR_TYPE = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"

REQUEST_FIELDS = {"validate_only", "message"}
MESSAGE_FIELDS = {
    "name",
    "data",
    "notification",
    "android",
    "webpush",
    "apns",
    "fcm_options",
    "token",
    "topic",
    "condition",
}
NOTIFICATION_FIELDS = {"title", "body", "image"}
ANDROID_FIELDS = {
    "collapse_key",
    "priority",
    "ttl",
    "restricted_package_name",
    "data",
    "notification",
    "fcm_options",
    "direct_boot_ok",
    "bandwidth_constrained_ok",
    "restricted_satellite_ok",
}
APNS_FIELDS = {"headers", "payload", "fcm_options", "live_activity_token"}
WEBPUSH_FIELDS = {"headers", "data", "notification", "fcm_options"}
TARGETS = ("token", "topic", "condition")
RESERVED_DATA_KEYS = {"from", "notification", "message_type"}
RESERVED_DATA_PREFIXES = ("google.", "gcm.")
TOKEN_RE = re.compile(r"^[A-Za-z0-9_:\-.]+$")
TOPIC_RE = re.compile(r"^(/topics/)?[a-zA-Z0-9\-_.~%]+$")
DURATION_RE = re.compile(r"^\d+(\.\d{1,9})?s$")
MAX_DATA_BYTES = 4096


class InvalidArgument(Exception):
    """A 400 INVALID_ARGUMENT answer: `message` and the `details` list of FCM's error body."""

    def __init__(self, message: str, details: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


def _parse_error(field: str | None, description: str) -> InvalidArgument:
    """An error of the JSON-to-proto mapping: a google.rpc.BadRequest detail only."""
    violation = {"description": description}
    if field is not None:
        violation = {"field": field, **violation}
    return InvalidArgument(
        description, [{"@type": BAD_REQUEST_TYPE, "fieldViolations": [violation]}]
    )


def _fcm_error(message: str, field: str | None = None) -> InvalidArgument:
    """One of FCM's own checks: an FcmError INVALID_ARGUMENT detail (and the field, if any)."""
    details: list[dict[str, Any]] = [{"@type": FCM_ERROR_TYPE, "errorCode": "INVALID_ARGUMENT"}]
    if field is not None:
        details.append(
            {
                "@type": BAD_REQUEST_TYPE,
                "fieldViolations": [{"field": field, "description": message}],
            }
        )
    return InvalidArgument(message, details)


def _snake(name: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), name)


def _repr(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _fields(obj: Any, path: str, allowed: set[str], type_name: str) -> dict[str, Any]:
    """The object's fields by snake_case name, refusing non-objects and unknown names."""
    if not isinstance(obj, dict):
        text = f"Invalid value at '{path}' ({type_name}), {_repr(obj)}"
        raise _parse_error(path, text)
    out: dict[str, Any] = {}
    for name, value in obj.items():
        snake = _snake(name)
        if snake not in allowed:
            where = f" at '{path}'" if path else ""
            text = (
                f'Invalid JSON payload received. Unknown name "{name}"{where}: Cannot find field.'
            )
            raise _parse_error(path or None, text)
        if snake in out:
            raise _parse_error(path or None, f"Invalid JSON payload received. Duplicate {name}")
        out[snake] = value
    return out


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _parse_error(path, f"Invalid value at '{path}' (TYPE_STRING), {_repr(value)}")
    return value


def _bool(value: Any, path: str) -> None:
    if not isinstance(value, bool):
        raise _parse_error(path, f"Invalid value at '{path}' (TYPE_BOOL), {_repr(value)}")


def _string_map(value: Any, path: str, entry_type: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _parse_error(path, f"Invalid value at '{path}' ({entry_type}), {_repr(value)}")
    for index, item in enumerate(value.values()):
        _string(item, f"{path}[{index}].value")
    return value


def _object(value: Any, path: str) -> None:
    if not isinstance(value, dict):
        text = f"Invalid value at '{path}' (type.googleapis.com/google.protobuf.Struct), "
        raise _parse_error(path, text + _repr(value))


def _android(value: Any) -> None:
    path = "message.android"
    android = _fields(
        value, path, ANDROID_FIELDS, "type.googleapis.com/google.firebase.fcm.v1.AndroidConfig"
    )
    for name in ("collapse_key", "restricted_package_name"):
        if name in android:
            _string(android[name], f"{path}.{name}")
    if "priority" in android:
        priority = android["priority"]
        if not isinstance(priority, str) or priority.upper() not in {"NORMAL", "HIGH"}:
            text = f"Invalid value at '{path}.priority' "
            raise _parse_error(
                f"{path}.priority",
                text + f"(type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), "
                f"{_repr(priority)}",
            )
    if "ttl" in android and (
        not isinstance(android["ttl"], str) or not DURATION_RE.match(android["ttl"])
    ):
        text = f"Invalid value at '{path}.ttl' (type.googleapis.com/google.protobuf.Duration), "
        raise _parse_error(f"{path}.ttl", text + _repr(android["ttl"]))
    if "data" in android:
        _string_map(
            android["data"],
            f"{path}.data",
            "type.googleapis.com/google.firebase.fcm.v1.AndroidConfig.DataEntry",
        )
    for name in ("notification", "fcm_options"):
        if name in android:
            _object(android[name], f"{path}.{name}")
    for name in ("direct_boot_ok", "bandwidth_constrained_ok", "restricted_satellite_ok"):
        if name in android:
            _bool(android[name], f"{path}.{name}")


def _apns(value: Any) -> None:
    path = "message.apns"
    apns = _fields(
        value, path, APNS_FIELDS, "type.googleapis.com/google.firebase.fcm.v1.ApnsConfig"
    )
    if "headers" in apns:
        _string_map(
            apns["headers"],
            f"{path}.headers",
            "type.googleapis.com/google.firebase.fcm.v1.ApnsConfig.HeadersEntry",
        )
    for name in ("payload", "fcm_options"):
        if name in apns:
            _object(apns[name], f"{path}.{name}")
    if "live_activity_token" in apns:
        _string(apns["live_activity_token"], f"{path}.live_activity_token")


def _webpush(value: Any) -> None:
    path = "message.webpush"
    webpush = _fields(
        value, path, WEBPUSH_FIELDS, "type.googleapis.com/google.firebase.fcm.v1.WebpushConfig"
    )
    for name in ("headers", "data"):
        if name in webpush:
            _string_map(webpush[name], f"{path}.{name}", "map<string, string>")
    for name in ("notification", "fcm_options"):
        if name in webpush:
            _object(webpush[name], f"{path}.{name}")


def validate(body: Any) -> tuple[dict[str, Any], bool]:
    """The message (fields by snake_case name) and validate_only, or InvalidArgument."""
    request = _fields(
        body, "", REQUEST_FIELDS, "type.googleapis.com/google.firebase.fcm.v1.SendMessageRequest"
    )
    validate_only = request.get("validate_only", False)
    _bool(validate_only, "validate_only")
    if "message" not in request:
        raise _fcm_error("Request contains an invalid argument.", "message")
    message = _fields(
        request["message"],
        "message",
        MESSAGE_FIELDS,
        "type.googleapis.com/google.firebase.fcm.v1.Message",
    )
    for name in ("name", *TARGETS):
        if name in message:
            _string(message[name], f"message.{name}")
    targets = [t for t in TARGETS if t in message]
    if len(targets) > 1:
        text = (
            "Invalid JSON payload received. Oneof field 'target' is already set. "
            f"Cannot set '{targets[1]}'"
        )
        raise _parse_error("message", text)
    if "notification" in message:
        notification = _fields(
            message["notification"],
            "message.notification",
            NOTIFICATION_FIELDS,
            "type.googleapis.com/google.firebase.fcm.v1.Notification",
        )
        for name, value in notification.items():
            _string(value, f"message.notification.{name}")
    data: dict[str, str] = {}
    if "data" in message:
        data = _string_map(
            message["data"],
            "message.data",
            "type.googleapis.com/google.firebase.fcm.v1.Message.DataEntry",
        )
    if "android" in message:
        _android(message["android"])
    if "apns" in message:
        _apns(message["apns"])
    if "webpush" in message:
        _webpush(message["webpush"])
    if "fcm_options" in message:
        _object(message["fcm_options"], "message.fcm_options")
    if not targets:
        raise _fcm_error("Recipient of the message is not set.", "message")
    if "token" in message and not TOKEN_RE.match(message["token"]):
        raise _fcm_error("The registration token is not a valid FCM registration token")
    if "topic" in message and not TOPIC_RE.match(message["topic"]):
        raise _fcm_error("Invalid topic name", "message.topic")
    for key in data:
        if key in RESERVED_DATA_KEYS or key.startswith(RESERVED_DATA_PREFIXES):
            raise _fcm_error(f"Invalid data payload key: {key}", "message.data")
    if sum(len(k.encode()) + len(v.encode()) for k, v in data.items()) > MAX_DATA_BYTES:
        raise _fcm_error("Android message is too big", "message.data")
    return message, validate_only
