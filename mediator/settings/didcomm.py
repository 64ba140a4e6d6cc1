"""The DIDComm side: what the protocols answer, the abuse limits, the mailboxes' limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mediator.errors import ConfigError
from mediator.settings.fields import setting


@dataclass(frozen=True)
class DidcommSettings:
    """What the DIDComm protocols answer: the mediator's identity and invitations, who is
    granted mediation, and the sizes and delays of what they take and give."""

    endpoint: str = setting(
        "",
        "Public HTTP(S) URL of this mediator, given to agents in the invitation and the "
        "mediation grant. Empty: http://<host>:<port>.",
    )
    ws_endpoint: str = setting(
        "", "Public WebSocket URL. Empty: the endpoint with ws(s):// instead."
    )
    label: str = setting("Mediator", "Name shown to agents in invitations.")
    key_seed: str = setting(
        "",
        "32-byte seed (64 hex characters) of the mediator's Ed25519 key. Empty: a seed is "
        "made once and kept in Redis, so every node shares the key.",
        secret=True,
    )
    invitation_multi_use: bool = setting(
        True,
        "One invitation for any number of agents (the cluster's key). Off: every "
        "GET /invitation makes a single-use invitation with a key of its own.",
    )
    invitation_ttl_seconds: int = setting(
        7 * 86400, "How long a single-use invitation stays usable."
    )
    unmediated_connection_seconds: int = setting(
        86400,
        "How long a connection that has not been granted mediation is kept (handshakes "
        "cost nothing to start, so their records must not pile up); a grant keeps it.",
    )
    did_web: str = setting(
        "",
        "A host (and port) whose https://HOST/.well-known/did.json this node serves: the "
        "mediator's DIDComm v2 keys and services as did:web:HOST, for v2 wallets that resolve "
        "did:web (the did:peer:2 stays the invitation's). Empty: not served.",
        scope="serve",
    )
    v2_nist_keys: bool = setting(
        False,
        "List P-256 and P-384 key agreement keys (derived from the key seed) in the "
        "mediator's DIDComm v2 DIDs beside X25519, for v2 wallets that speak only the NIST "
        "curves. Off by default: Identus 7 cannot resolve a did:peer:2 with a NIST key. "
        "Turning it on or off changes the DIDs; messages to either form are read.",
    )
    allow_plaintext: bool = setting(
        False,
        "Accept unencrypted JSON messages (application/json) for forward, noop and trust "
        "ping. Connection-bound messages always need authcrypt.",
        scope="serve",
    )
    mediation_open: bool = setting(
        True, "Grant mediation to any connection that asks (else: only the allowlist)."
    )
    mediation_allowlist: str = setting(
        "",
        "Comma-separated connection keys (base58 or did:key) granted mediation when "
        "--mediation-open is off.",
    )
    max_envelope_bytes: int = setting(
        2 * 1024 * 1024,
        "Largest DIDComm envelope accepted over HTTP or WebSocket.",
        scope="serve",
    )
    max_delivery_limit: int = setting(
        100, "Most messages handed out by one delivery-request, batch or fetch."
    )
    thread_state_seconds: int = setting(
        600,
        "How long a connection's per-thread sender orders (RFC 0008) are kept after its "
        "last message (up to twice as long: they are forgotten a generation at a time). "
        "Every request opens a thread (about 60 bytes), so a wallet polling every 5 s "
        "holds 120 to 240 threads (7 to 14 KB) with the default, however long it polls.",
    )
    forward_unknown_key_wait_seconds: float = setting(
        1.0,
        "How long a forward to a key that no recipient has registered yet waits for its "
        "registration before it is refused (404): agents hand out invitations before "
        "their keylist update reaches the mediator (0: refuse at once).",
        scope="serve",
    )
    handshake_push_delay_seconds: float = setting(
        1.0,
        "How long the answer to a handshake request waits before it is pushed to an agent "
        "that asked for no return route: ACA-Py records its own request only after it has "
        "gone out, and an answer arriving before that is dropped (docs/interop.md).",
        scope="serve",
    )

    def __post_init__(self) -> None:
        if self.key_seed:
            _check_seed(self.key_seed)


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


@dataclass(frozen=True)
class LimitSettings:
    """The abuse limits held across the cluster, and whom a request counts against."""

    PREFIX: ClassVar[str] = "limit_"

    trusted_proxies: str = setting(
        "",
        "Comma-separated networks (CIDR) of the proxies in front of the nodes: only a "
        "request from one of them has its client address taken from X-Forwarded-For "
        "(the nearest address not itself a trusted proxy). Empty: the peer's address.",
        scope="serve",
        name="trusted_proxies",
    )
    exempt_networks: str = setting(
        "127.0.0.0/8,::1/128",
        "Comma-separated networks (CIDR) whose client addresses no per-address limit "
        "applies to (loopback by default: a local agent, the tests). `none`: no "
        "exemption.",
        scope="serve",
    )
    handshakes_per_minute: int = setting(
        60,
        "Handshake requests (DID Exchange, connections) one client address may make per "
        "minute, across the cluster; more are answered 429 with Retry-After (0: no "
        "limit). Many phones may share an address behind a carrier's NAT.",
        scope="serve",
    )
    connections_per_minute: int = setting(
        30,
        "New connections (handshakes that succeeded, not yet granted mediation) one "
        "client address may make per minute, across the cluster (0: no limit).",
        scope="serve",
    )
    forwards_per_second: int = setting(
        100,
        "Forwards one recipient connection accepts per second, across the cluster, so a "
        "flood against one wallet cannot starve the others; more are answered 429 with "
        "Retry-After (0: no limit). Counted in the forward's own script call.",
    )
    sender_bytes_per_minute: int = setting(
        64 * 1024 * 1024,
        "Bytes of forwarded messages one sender may have queued per minute, across the "
        "cluster: the sender is its connection when it authcrypts the forward, else its "
        "client address (0: no limit).",
        scope="serve",
    )
    sender_queued_bytes: int = setting(
        256 * 1024 * 1024,
        "Bytes of forwarded messages one sender may have queued here at once, over all "
        "its recipients, across the cluster (the sender as for the per-minute budget; "
        "client addresses in --limit-exempt-networks are not counted). Forwards beyond it "
        "are answered 429 with Retry-After until its recipients have taken enough; "
        "counted within a few seconds (0: no limit). Workers need the nodes' value.",
    )


@dataclass(frozen=True)
class QueueSettings:
    """The DIDComm mailboxes' limits: the operator's defaults, the most a recipient may ask
    for, and how long a delivery waits for its acknowledgement."""

    PREFIX: ClassVar[str] = "queue_"

    message_count_limit: int = setting(
        10_000, "Default most messages queued per recipient connection (0: no limit)."
    )
    message_count_max: int = setting(
        100_000,
        "Most a recipient may ask for with status-update-request (0: no maximum).",
    )
    size_limit: int = setting(
        100 * 1024 * 1024, "Default most bytes queued per recipient (0: no limit)."
    )
    size_max: int = setting(
        1024 * 1024 * 1024, "Most bytes a recipient may ask for (0: no maximum)."
    )
    message_size_limit: int = setting(
        1024 * 1024, "Default largest single queued message in bytes (0: no limit)."
    )
    message_size_max: int = setting(
        2 * 1024 * 1024,
        "Largest single message a recipient may ask for (0: no maximum).",
    )
    duration_limit: int = setting(
        30 * 86400,
        "Default seconds a message may wait undelivered before it expires (0: no limit).",
    )
    duration_max: int = setting(
        90 * 86400, "Longest duration_limit a recipient may ask for (0: no maximum)."
    )
    delivery_timeout_seconds: int = setting(
        30,
        "A delivered message that is not acknowledged (messages-received) within this "
        "time is offered again.",
        name="delivery_timeout_seconds",
    )
