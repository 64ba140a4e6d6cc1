"""Names to addresses for outbound calls, resolved once per connection: the addresses
checked are the ones connected to, so an answer that changes between a check and a connect
(DNS rebinding) changes nothing. The system resolver by default, or one DNS server asked
directly over UDP (`--outbound-dns-server`): A and AAAA, recursion desired."""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import socket
import struct
from collections.abc import Iterable

from mediator.errors import ConfigError
from mediator.outbound.addresses import IPAddress

A, AAAA = 1, 28
NOERROR, NXDOMAIN = 0, 3


def literal(host: str) -> IPAddress | None:
    """`host` as an address when it is one, in any form the socket layer reads as one
    (`127.1`, `0x7f000001`, `2130706433`): these never reach a resolver."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, None, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError):
        return None
    return ipaddress.ip_address(found[0][4][0]) if found else None


class Resolver:
    """The system's resolver (getaddrinfo, in the default executor)."""

    async def resolve(self, host: str) -> list[IPAddress]:
        address = literal(host)
        if address is not None:
            return [address]
        loop = asyncio.get_running_loop()
        found = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        return _unique(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found)


class DnsServerResolver(Resolver):
    """Ask one DNS server for A and AAAA records: what operators use to pin the resolver
    that outbound calls trust, and what the tests use to play rebinding tricks."""

    def __init__(self, server: str) -> None:
        self.server = parse_server(server)

    async def resolve(self, host: str) -> list[IPAddress]:
        address = literal(host)
        if address is not None:
            return [address]
        name = host.rstrip(".").encode("idna")
        answers = await asyncio.gather(self._query(name, A), self._query(name, AAAA))
        found = _unique(a for answer in answers for a in answer)
        if not found:
            raise socket.gaierror(socket.EAI_NONAME, f"{host}: no address")
        return found

    async def _query(self, name: bytes, kind: int) -> list[IPAddress]:
        ident = secrets.randbits(16)
        query = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + _qname(name)
        query += struct.pack("!HH", kind, 1)
        loop = asyncio.get_running_loop()
        family = socket.AF_INET6 if ":" in self.server[0] else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            sock.connect(self.server)
            await loop.sock_sendall(sock, query)
            while True:  # answers to other queries (wrong id) are ignored
                data = await loop.sock_recv(sock, 65535)
                answer = _parse(data, ident, query[12:])
                if answer is not None:
                    return answer


def parse_server(server: str) -> tuple[str, int]:
    host, port = server.strip(), 53
    if host.startswith("["):
        host, _, rest = host[1:].partition("]")
        if rest:
            port = int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else -1
    elif host.count(":") == 1:
        host, _, number = host.partition(":")
        port = int(number) if number.isdigit() else -1
    try:
        ipaddress.ip_address(host)
    except ValueError:
        host = ""
    if not host or not 0 < port < 65536:
        raise ConfigError(
            f"--outbound-dns-server {server!r}: an address, address:port or [v6]:port"
        )
    return host, port


def _qname(name: bytes) -> bytes:
    labels = name.split(b".")
    if any(not label or len(label) > 63 for label in labels) or len(name) > 253:
        raise socket.gaierror(socket.EAI_NONAME, f"{name!r}: not a host name")
    return b"".join(bytes([len(label)]) + label for label in labels) + b"\0"


def _parse(data: bytes, ident: int, question: bytes) -> list[IPAddress] | None:
    """The addresses of an answer to our query (None: not an answer to it)."""
    if len(data) < 12 + len(question):
        return None
    got, flags, _, count = struct.unpack("!HHHH", data[:8])
    if got != ident or not flags & 0x8000 or data[12 : 12 + len(question)] != question:
        return None
    code = flags & 0xF
    if code == NXDOMAIN:
        return []
    if code != NOERROR:
        raise socket.gaierror(socket.EAI_AGAIN, f"DNS server answered rcode {code}")
    at, found = 12 + len(question), []
    for _ in range(count):  # the records of the answer section, CNAMEs followed by the server
        at = _skip_name(data, at)
        kind, _, _, length = struct.unpack("!HHIH", data[at : at + 10])
        at += 10
        rdata = data[at : at + length]
        at += length
        if len(rdata) != length:
            raise socket.gaierror(socket.EAI_FAIL, "truncated DNS answer")
        if (kind, length) in ((A, 4), (AAAA, 16)):
            found.append(ipaddress.ip_address(rdata))
    return found


def _skip_name(data: bytes, at: int) -> int:
    while at < len(data):
        size = data[at]
        if size & 0xC0 == 0xC0:  # a compression pointer ends the name
            return at + 2
        at += 1 + size
        if size == 0:
            return at
    raise socket.gaierror(socket.EAI_FAIL, "malformed DNS answer")


def _unique(addresses: Iterable[IPAddress]) -> list[IPAddress]:
    return list(dict.fromkeys(addresses))


def resolver(server: str) -> Resolver:
    return DnsServerResolver(server) if server else Resolver()
