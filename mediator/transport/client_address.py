"""Whom a request comes from, for the abuse limits: the peer's address, or, only when the
peer is one of the operator's proxies (--trusted-proxies), the address those proxies name in
X-Forwarded-For. Trust is never implied: a stranger's X-Forwarded-For is ignored, so it
cannot pick an address whose limits it uses up, nor dodge its own.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from mediator.networks import in_networks, proxy_networks

UNKNOWN = "unknown"  # a Unix socket, or a test client without an address


def client_address(
    peer: tuple[str, int] | None, headers: Iterable[tuple[bytes, bytes]], trusted: str
) -> str:
    """The address the limits count against: `peer`, or, when `peer` is a trusted proxy, the
    nearest X-Forwarded-For entry that is not itself a trusted proxy."""
    address = peer[0] if peer else UNKNOWN
    networks = proxy_networks(trusted)
    if not networks or not in_networks(address, networks):
        return address
    hops: list[str] = []
    for name, value in headers:
        if name == b"x-forwarded-for":
            hops += [h.strip() for h in value.decode("latin-1").split(",")]
    for hop in reversed(hops):
        if not hop:
            continue
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return address  # a malformed chain: the proxy itself is who we know
        if not in_networks(hop, networks):
            return hop
    return address
