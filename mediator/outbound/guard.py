"""Where an outbound call may connect: the host resolved once, every address checked (for a
destination a peer named), and a socket connected to one of those very addresses, within the
connect timeout. Also the per-destination slots that bound the calls in flight to one host
and port, shared by every client of the process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import weakref
from collections.abc import AsyncIterator

from mediator.errors import OutboundRefused
from mediator.outbound.addresses import Allowlist, IPAddress, refusal
from mediator.outbound.resolver import Resolver, resolver
from mediator.settings import OutboundSettings

log = logging.getLogger(__name__)

_SLOTS: weakref.WeakValueDictionary[tuple[str, int, int], asyncio.Semaphore] = (
    weakref.WeakValueDictionary()
)


class Guard:
    """The checks of one kind of destination: `peers` (named by strangers: the deny list
    applies) or trusted (named by the operator: resolved and connected the same way)."""

    def __init__(self, settings: OutboundSettings, *, peers: bool) -> None:
        self.peers = peers
        self.allow = Allowlist.parse(settings.allow)
        self.resolver: Resolver = resolver(settings.dns_server)
        self.connect_timeout = settings.connect_timeout_seconds
        self.per_destination = max(1, settings.per_destination)

    async def addresses(self, host: str) -> list[IPAddress]:
        """Every address `host` resolves to, once, all of them checked: one refused
        address refuses the host (a name that mixes public and private addresses is how
        a rebinding attack starts)."""
        try:
            found = await self.resolver.resolve(host)
        except (OSError, UnicodeError) as exc:
            raise OSError(f"{host}: cannot resolve: {exc}") from None
        if self.peers and not self.allow.names_host(host):
            for address in found:
                why = refusal(address, self.allow)
                if why is not None:
                    raise OutboundRefused(host, why)
        return found

    async def connect(self, host: str, port: int) -> socket.socket:
        """A TCP socket connected to a checked address of `host` (each tried in turn)."""
        async with asyncio.timeout(self.connect_timeout):
            addresses = await self.addresses(host)
            loop = asyncio.get_running_loop()
            failure: OSError = OSError(f"{host}: no address")
            for address in addresses:
                family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
                sock = socket.socket(family, socket.SOCK_STREAM)
                try:
                    sock.setblocking(False)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    await loop.sock_connect(sock, (str(address), port))
                    return sock
                except OSError as exc:
                    sock.close()
                    failure = exc
                except BaseException:
                    sock.close()
                    raise
            raise failure

    @contextlib.asynccontextmanager
    async def slot(self, host: str, port: int) -> AsyncIterator[None]:
        """One of the calls in flight to `host:port` this process allows; waits for one."""
        key = (host.lower(), port, self.per_destination)
        semaphore = _SLOTS.get(key)
        if semaphore is None:
            semaphore = _SLOTS[key] = asyncio.Semaphore(self.per_destination)
        async with semaphore:
            yield
