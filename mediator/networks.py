"""Lists of networks the settings name (--trusted-proxies, --limit-exempt-networks), parsed
once, and whether an address is in one."""

from __future__ import annotations

import functools
import ipaddress

from mediator.errors import ConfigError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
NONE = "none"  # a list of no networks (an empty variable means "the default")


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


@functools.lru_cache(maxsize=16_384)  # every forward asks it: the busy senders' answers kept
def within(address: str, setting: str) -> bool:
    """Whether `address` is in one of the networks a setting lists."""
    networks = proxy_networks(setting)
    return bool(networks) and in_networks(address, networks)


def in_networks(address: str, networks: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in n for n in networks)
