"""The HTTP client of every call the mediator makes out: pushes to agents' endpoints and the
notification providers. One place sets what they share: the push timeout, no redirects
followed, a bound on connections, and the trusted CAs (the system's, plus
--outbound-ca-file)."""

from __future__ import annotations

import ssl

import httpx

from mediator.errors import ConfigError
from mediator.settings import Settings

MAX_CONNECTIONS = 100  # per client, whatever the destinations
MAX_KEEPALIVE = 20


def tls_context(settings: Settings) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if settings.outbound_ca_file:
        try:
            context.load_verify_locations(cafile=settings.outbound_ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"--outbound-ca-file {settings.outbound_ca_file}: {exc}") from None
    return context


def client(settings: Settings, *, http2: bool = False) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=settings.push_timeout_seconds,
        limits=httpx.Limits(
            max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_KEEPALIVE
        ),
        follow_redirects=False,
        verify=tls_context(settings),
        http2=http2,
    )
