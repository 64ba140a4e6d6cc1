"""Whom a request comes from, for the abuse limits: the peer's address, or, only when the
peer is one of the operator's proxies (--trusted-proxies), the address those proxies name in
X-Forwarded-For. Trust is never implied: a stranger's X-Forwarded-For is ignored, so it
cannot pick an address whose limits it uses up, nor dodge its own.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable

from mediator.errors import ConfigError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
NONE = "none"  # a list of no networks (an empty variable means "the default")
UNKNOWN = "unknown"  # a Unix socket, or a test client without an address


@functools.cache
def proxy_networks(setting: str) -> tuple[Network, ...]:
    out = []
    if setting.strip().lower() == NONE:
        return ()
    for part in setting.split(","):
        text = part.strip()
        if not text:
            continue
        try:
            out.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ConfigError(f"{text!r} is not a network (CIDR)") from None
    return tuple(out)


def within(address: str, setting: str) -> bool:
    """Whether `address` is in one of the networks a setting lists."""
    networks = proxy_networks(setting)
    return bool(networks) and _trusted(address, networks)


def _trusted(address: str, networks: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in n for n in networks)


def client_address(
    peer: tuple[str, int] | None, headers: Iterable[tuple[bytes, bytes]], trusted: str
) -> str:
    """The address the limits count against: `peer`, or, when `peer` is a trusted proxy, the
    nearest X-Forwarded-For entry that is not itself a trusted proxy."""
    address = peer[0] if peer else UNKNOWN
    networks = proxy_networks(trusted)
    if not networks or not _trusted(address, networks):
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
        if not _trusted(hop, networks):
            return hop
    return address
