"""The two ways in besides the DIDComm envelope itself: the mqs API and the WebSocket."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

from mediator.settings.fields import setting


@dataclass(frozen=True)
class MqsSettings:
    """The mqs API: its tokens and the sizes it accepts."""

    api_tokens: str = setting(
        "",
        "Comma-separated bearer tokens accepted by the mqs API. Empty: mqs is served "
        "on a loopback address only.",
        scope="serve",
        secret=True,
    )
    max_message_bytes: int = setting(
        1024 * 1024, "Largest mqs message body accepted (413 above).", scope="serve"
    )
    max_request_bytes: int = setting(
        10 * 1024 * 1024,
        "Largest mqs request body, batches included (413 above).",
        scope="serve",
    )
    max_batch_messages: int = setting(
        1000, "Most parts accepted in one multipart send.", scope="serve"
    )
    long_poll_recheck_seconds: float = setting(
        2.0,
        "A waiting long poll (mqs) re-reads its queue at least this often, in case a "
        "wake-up was lost (live sockets: --live-recheck-seconds).",
        scope="serve",
    )

    @functools.cached_property
    def tokens(self) -> frozenset[str]:
        return frozenset(t.strip() for t in self.api_tokens.split(",") if t.strip())


@dataclass(frozen=True)
class WebSocketSettings:
    """The DIDComm WebSocket: its limits, pings and delivery pace."""

    PREFIX: ClassVar[str] = "websocket_"

    messages_per_second: int = setting(
        200,
        "Messages one WebSocket may send per second: more are refused with a "
        "`rate-limited` frame, and a socket sending four times as many is closed (1008). "
        "0: no limit.",
        scope="serve",
    )
    sockets_per_address: int = setting(
        200,
        "WebSockets one client address may hold open on one node: more are closed at "
        "once (1008). 0: no limit.",
        scope="serve",
    )
    handshake_seconds: float = setting(
        30.0,
        "A WebSocket that has not sent one valid DIDComm message this long after it "
        "opened is closed (1008). 0: never.",
        scope="serve",
    )
    compression: bool = setting(
        False,
        "Accept permessage-deflate on WebSockets. Off: DIDComm frames are base64 "
        "ciphertext that shrinks by about a quarter, for about 0.5 ms of CPU per pickup "
        "round trip and 0.25-2 ms more live-delivery latency (measured).",
        scope="serve",
    )
    ping_seconds: float = setting(
        30.0,
        "WebSocket ping interval; a peer that does not answer within as long again is "
        "taken for dead and its socket closed (its deliveries are offered again). 30 s "
        "keeps sockets open through proxies that close after 60 s idle; each ping costs "
        "the node about 0.09 ms of CPU (measured).",
        scope="serve",
    )
    idle_seconds: float = setting(
        600.0,
        "A WebSocket that delivers nothing live and has sent no frame for this long is "
        "closed (code 1000). 0: never.",
        scope="serve",
    )
    max_age_seconds: float = setting(
        0.0,
        "A WebSocket open this long is closed with 1012 so its client reconnects, which "
        "spreads sockets over nodes added since. 0: never.",
        scope="serve",
    )
    implicit_pickup_delay_seconds: float = setting(
        0.5,
        "How long a WebSocket waits for an explicit pickup message before a return_route "
        "'all' message starts the implicit drain of its queue.",
        scope="serve",
        name="implicit_pickup_delay_seconds",
    )
    live_recheck_seconds: float = setting(
        300.0,
        "An idle live socket (live mode, implicit pickup) re-reads its queue this often "
        "in case a wake-up was lost, renewing its hold in the same call (the hold's own "
        "entry lives three times this). Redis load from idle sockets is one script call "
        "per socket per this interval, and node CPU about 0.4 ms per call (measured).",
        scope="serve",
        name="live_recheck_seconds",
    )
