"""Every call the mediator makes out: pushes to agents' endpoints (HTTP or WebSocket) and the
notification providers (FCM, APNs, the webhook). What they share:

- the host is resolved once (`--outbound-dns-server`, else the system) and the connection
  goes to an address that was checked; TLS and the Host header still use the URL's host;
- destinations a PEER named (push endpoints) may not resolve to loopback, private,
  link-local, CGNAT, multicast, reserved or metadata addresses, unless `--outbound-allow`
  opens them; operator-configured URLs (provider API URLs, the webhook, a service account's
  token_uri) are trusted destinations, exempt from that list alone;
- no redirect followed, no proxy from the environment (a proxy would move the connection
  out of these checks), answers asked for uncompressed;
- a connect timeout (`--outbound-connect-timeout-seconds`) within a total one
  (`--push-timeout-seconds`, waiting for a slot and reading the answer included);
- at most `--outbound-max-response-bytes` of an answer read, then the connection dropped;
- at most `--outbound-per-destination` calls in flight to one host:port per process;
- the trusted CAs: the system's, plus `--outbound-ca-file`.
"""

from __future__ import annotations

import ssl

import httpx

from mediator.errors import ConfigError
from mediator.outbound.guard import Guard
from mediator.outbound.transport import GuardedTransport
from mediator.outbound.ws import websocket
from mediator.settings import OutboundSettings

__all__ = ["Guard", "client", "tls_context", "websocket"]


def tls_context(settings: OutboundSettings) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if settings.ca_file:
        try:
            context.load_verify_locations(cafile=settings.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"--outbound-ca-file {settings.ca_file}: {exc}") from None
    return context


def client(
    settings: OutboundSettings, *, http2: bool = False, peers: bool = False
) -> httpx.AsyncClient:
    """A client for destinations `peers` named (the deny list applies), or the operator."""
    transport = GuardedTransport(
        Guard(settings, peers=peers),
        total=settings.timeout_seconds,
        cap=settings.max_response_bytes,
        tls=tls_context(settings),
        http2=http2,
    )
    timeout = httpx.Timeout(settings.timeout_seconds, connect=settings.connect_timeout_seconds)
    return httpx.AsyncClient(
        transport=transport,
        timeout=timeout,
        follow_redirects=False,
        trust_env=False,
        headers={"Accept-Encoding": "identity"},
    )
