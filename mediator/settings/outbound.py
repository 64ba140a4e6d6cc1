"""What goes out: every outbound call, push retries and phone notifications."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mediator.settings.fields import setting


@dataclass(frozen=True)
class OutboundSettings:
    """Every call the mediator makes out (mediator/outbound): its timeouts, trusted CAs, DNS
    server, and the destinations peers may name."""

    PREFIX: ClassVar[str] = "outbound_"

    timeout_seconds: float = setting(
        10.0,
        "How long a push to a recipient's own endpoint may take before it counts as failed "
        "(recipients whose DID document names an HTTP or WebSocket endpoint).",
        name="push_timeout_seconds",
    )
    ca_file: str = setting(
        "",
        "A PEM bundle of extra certificate authorities trusted by outbound TLS calls "
        "(pushes to agents, notification providers, the webhook), besides the system's.",
    )
    allow: str = setting(
        "",
        "Comma-separated networks (CIDRs or addresses) and host names (`agent.internal`, "
        "`*.svc.cluster.local`) that pushes may reach although they are loopback, private, "
        "link-local, CGNAT or otherwise not public: pushes go to endpoints peers name, and "
        "only there by default. Cloud metadata addresses open only when named exactly. "
        "Operator-configured URLs (providers, the webhook) need no entry (docs/didcomm.md).",
    )
    dns_server: str = setting(
        "",
        "The DNS server (`address` or `address:port`, `[v6]:port`) that outbound calls "
        "resolve names with, over UDP. Empty: the system resolver.",
    )
    connect_timeout_seconds: float = setting(
        5.0,
        "How long an outbound call may take to resolve its host and connect (the whole "
        "call: --push-timeout-seconds).",
    )
    max_response_bytes: int = setting(
        64 * 1024,
        "Most bytes of an answer's body an outbound call reads (a push's endpoint, a "
        "provider); past that the connection is dropped and the call has failed.",
    )
    per_destination: int = setting(
        64,
        "Most outbound calls in flight at once to one host and port from one process; "
        "more wait their turn within their timeout.",
    )


@dataclass(frozen=True)
class PushSettings:
    """Retries of pushes to agents' endpoints (and of phone notifications)."""

    PREFIX: ClassVar[str] = "push_"

    retry_min_seconds: float = setting(
        1.0, "Wait before the first retry of a failed push; doubled each time."
    )
    retry_max_seconds: float = setting(
        300.0, "Longest wait between push retries (messages stay queued meanwhile)."
    )


@dataclass(frozen=True)
class NotifySettings:
    """Phone notifications (mediator/notify): when, how often, what they say, and the
    providers that carry them."""

    PREFIX: ClassVar[str] = "notify_"

    delay_seconds: float = setting(
        1.0,
        "How long after a forward a phone's notification waits: a burst collapses into "
        "one, and a wallet that opens a socket meanwhile gets none (docs/push.md).",
    )
    interval_seconds: float = setting(
        30.0,
        "At most one notification per connection in this many seconds; messages queued "
        "meanwhile are announced together once it has passed.",
    )
    attempts: int = setting(
        8,
        "How many times a notification is tried when the provider answers 429 or 5xx or "
        "cannot be reached (backoff as for pushes, Retry-After honoured) before it is "
        "given up; the messages stay queued.",
    )
    alert_title: str = setting(
        "New message", "The title of an iOS alert (no message content is ever sent)."
    )
    alert_body: str = setting("You have new messages.", "The body of an iOS alert.")
    fcm_credentials_file: str = setting(
        "",
        "A Firebase service-account JSON file: Android (and FCM-registered iOS) devices "
        "get FCM HTTP v1 data messages, authorized by OAuth 2 at the file's token_uri.",
        name="fcm_credentials_file",
    )
    fcm_api_url: str = setting(
        "https://fcm.googleapis.com",
        "The FCM HTTP v1 API's base URL.",
        name="fcm_api_url",
    )
    apns_key_file: str = setting(
        "",
        "An APNs auth key (.p8, ES256) for token-based authentication: iOS devices get "
        "APNs alerts (with --apns-key-id, --apns-team-id, --apns-topic).",
        name="apns_key_file",
    )
    apns_key_id: str = setting("", "The APNs auth key's 10-character id.", name="apns_key_id")
    apns_team_id: str = setting("", "The Apple developer team id.", name="apns_team_id")
    apns_topic: str = setting(
        "",
        "The app's bundle id, the apns-topic of its notifications.",
        name="apns_topic",
    )
    apns_environment: str = setting(
        "production",
        "production (api.push.apple.com) or sandbox (development builds).",
        name="apns_environment",
    )
    apns_api_url: str = setting(
        "",
        "Overrides the APNs base URL that --apns-environment picks.",
        name="apns_api_url",
    )
    webhook_url: str = setting(
        "",
        "Notifications POSTed here as JSON (device token, platform, message count), signed "
        "with --notify-webhook-secret, for devices no FCM or APNs credentials serve.",
    )
    webhook_secret: str = setting(
        "",
        "The HMAC-SHA256 key of the webhook's X-Mediator-Signature header.",
        secret=True,
    )
    apps_file: str = setting(
        "",
        "A JSON file naming several wallet apps, each with its own FCM, APNs or webhook "
        "settings (docs/push.md); the settings above make the app named `default`.",
        name="push_apps_file",
    )
