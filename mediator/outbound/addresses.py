"""Which addresses a destination a peer named may resolve to: none that is loopback, private,
link-local, shared (CGNAT), multicast, reserved or for documentation, in either family or in
IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4), unless the operator's
allowlist opens it. Cloud metadata addresses open only when the allowlist names them exactly:
a CIDR that happens to cover one is not enough."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from mediator.errors import ConfigError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _nets(*cidrs: str) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(c) for c in cidrs)


# (network, why) pairs; the reason is what a refusal says.
DENIED: tuple[tuple[IPNetwork, str], ...] = tuple(
    (net, why)
    for why, nets in (
        ("unspecified or 'this network'", _nets("0.0.0.0/8", "::/128")),
        ("loopback", _nets("127.0.0.0/8", "::1/128")),
        ("private", _nets("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")),
        ("shared address space (CGNAT)", _nets("100.64.0.0/10")),
        ("link-local", _nets("169.254.0.0/16", "fe80::/10", "fec0::/10")),
        ("IETF protocol assignments", _nets("192.0.0.0/24", "2001::/23")),
        (
            "documentation",
            _nets("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"),
        ),
        ("benchmarking", _nets("198.18.0.0/15")),
        ("6to4 relay anycast", _nets("192.88.99.0/24")),
        ("multicast", _nets("224.0.0.0/4", "ff00::/8")),
        ("reserved", _nets("240.0.0.0/4", "100::/64")),
    )
    for net in nets
)

# Instance metadata services: never reached through a CIDR, only when named exactly.
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean...
        "169.254.170.2",  # AWS ECS task credentials
        "169.254.169.253",  # AWS DNS
        "fd00:ec2::254",  # AWS over IPv6
        "fd00:ec2::23",  # AWS DNS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
    )
)

# IPv6 ranges whose addresses embed an IPv4 address that is what is really reached.
_NAT64 = _nets("64:ff9b::/96", "64:ff9b:1::/48")
_COMPATIBLE = ipaddress.ip_network("::/96")


def carried_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for: mapped (::ffff:a.b.c.d), compatible
    (::a.b.c.d), NAT64 (64:ff9b::a.b.c.d) or 6to4 (2002:aabb:ccdd::)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _COMPATIBLE or any(address in net for net in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


@dataclass(frozen=True)
class Allowlist:
    """The networks and host names the operator opened (`--outbound-allow`)."""

    networks: tuple[IPNetwork, ...] = ()
    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()  # from `*.example`: any name ending in `.example`

    @classmethod
    def parse(cls, value: str) -> Allowlist:
        networks: list[IPNetwork] = []
        names: set[str] = set()
        suffixes: list[str] = []
        for entry in (e.strip() for e in value.split(",")):
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            name = entry.lower().rstrip(".")
            label = name[2:] if name.startswith("*.") else name
            if not label or any(
                not p or not p.replace("-", "").isalnum() for p in label.split(".")
            ):
                raise ConfigError(
                    f"--outbound-allow {entry!r}: neither a network (CIDR), an address nor a "
                    "host name (`*.` may start one)"
                )
            if name.startswith("*."):
                suffixes.append("." + label)
            else:
                names.add(name)
        return cls(tuple(networks), frozenset(names), tuple(suffixes))

    def names_host(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return host in self.names or host.endswith(self.suffixes)

    def covers(self, address: IPAddress) -> bool:
        if address in METADATA:
            return any(net.num_addresses == 1 and address in net for net in self.networks)
        return any(address in net for net in self.networks)


def refusal(address: IPAddress, allow: Allowlist) -> str | None:
    """Why a peer-named destination may not be reached at `address` (None: it may)."""
    if allow.covers(address):
        return None
    if address in METADATA:
        return f"{address} is a cloud metadata address"
    for net, kind in DENIED:
        if address in net:
            return f"{address} is {kind} ({net})"
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            return f"{address} is link-local (zone {address.scope_id})"
        inner = carried_v4(address)
        if inner is not None:
            carried = refusal(inner, allow)
            return f"{address} stands for {carried}" if carried else None
    return None
