"""Outbound calls are safe: every trick a peer naming a push endpoint might play, against real
local servers (uvicorn on 127.0.0.1, 127.0.0.2 and ::1, a real DNS server speaking UDP), through
the mediator's real outbound clients and, end to end, through real nodes."""

from __future__ import annotations

import asyncio
import ipaddress
import re
import select
import socket
import time
import tracemalloc
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import uvicorn
from dnslib import AAAA, QTYPE, RCODE, RR, DNSRecord
from dnslib import A as ARecord
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from websockets.asyncio.client import ClientConnection

from mediator import outbound
from mediator.client import Sender
from mediator.didcomm.did_peer import numalgo2_did
from mediator.embedded import free_port
from mediator.engine import keys
from mediator.errors import AnswerTooLarge, ConfigError, OutboundError, OutboundRefused
from mediator.outbound.addresses import Allowlist, refusal
from mediator.outbound.resolver import DnsServerResolver, parse_server
from mediator.settings import OutboundSettings, Settings
from mediator.storage.clients import Backend
from tests.didcomm_peer import Peer, mediator_key
from tests.providers.credentials import write_tls_cert
from tests.scrape import value
from tests.servers import Node, RedisUnderTest

# ---------------------------------------------------------------- the address checks

DENIED = [
    ("127.0.0.1", "loopback"),
    ("127.9.9.9", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("100.64.0.1", "CGNAT"),
    ("169.254.1.1", "link-local"),
    ("169.254.169.254", "metadata"),
    ("100.100.100.200", "metadata"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("192.0.2.1", "documentation"),
    ("198.18.0.1", "benchmarking"),
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("fd00:ec2::254", "metadata"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("ff02::1", "multicast"),
    ("2001:db8::1", "documentation"),
    ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
    ("::ffff:10.0.0.1", "private"),
    ("::ffff:169.254.169.254", "metadata"),
    ("::127.0.0.1", "loopback"),  # IPv4-compatible (deprecated)
    ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
    ("64:ff9b::a9fe:a9fe", "metadata"),  # NAT64 of 169.254.169.254
    ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
    ("2002:c0a8:101::1", "private"),  # 6to4 of 192.168.1.1
    ("2001::1", "IETF"),  # Teredo
]

PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8"]


@pytest.mark.parametrize(("address", "kind"), DENIED, ids=[a for a, _ in DENIED])
def test_non_public_addresses_are_refused(address: str, kind: str) -> None:
    why = refusal(ipaddress.ip_address(address), Allowlist())
    assert why is not None and kind in why


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert refusal(ipaddress.ip_address(address), Allowlist()) is None


def test_the_allowlist_opens_networks_and_mapped_forms_but_metadata_only_by_name() -> None:
    allow = Allowlist.parse(" 127.0.0.0/8, 169.254.0.0/16 , fd00::/8, agent.internal")
    ip = ipaddress.ip_address
    assert refusal(ip("127.0.0.1"), allow) is None
    assert refusal(ip("::ffff:127.0.0.1"), allow) is None  # the address it stands for is open
    assert refusal(ip("169.254.1.1"), allow) is None
    assert "metadata" in str(refusal(ip("169.254.169.254"), allow))  # a CIDR is not enough
    assert "metadata" in str(refusal(ip("fd00:ec2::254"), allow))
    assert "private" in str(refusal(ip("10.0.0.1"), allow))
    named = Allowlist.parse("169.254.169.254,fd00:ec2::254/128")
    assert refusal(ip("169.254.169.254"), named) is None
    assert refusal(ip("fd00:ec2::254"), named) is None
    assert allow.names_host("Agent.Internal.") and not allow.names_host("other.internal")
    wild = Allowlist.parse("*.svc.cluster.local")
    assert wild.names_host("agent.ns.svc.cluster.local")
    assert not wild.names_host("svc.cluster.local") and not wild.names_host("evilsvc.cluster.local")


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "not a name", "*.", "a..b", "http://x/"])
def test_a_bad_allowlist_entry_stops_the_start(entry: str) -> None:
    with pytest.raises(ConfigError, match="outbound-allow"):
        Allowlist.parse(entry)


def test_dns_server_setting() -> None:
    assert parse_server("10.0.0.53") == ("10.0.0.53", 53)
    assert parse_server("127.0.0.1:5353") == ("127.0.0.1", 5353)
    assert parse_server("[::1]:5353") == ("::1", 5353)
    for bad in ("dns.example", "127.0.0.1:0", "[::1]:x1", "1.2.3.4:99999"):
        with pytest.raises(ConfigError, match="outbound-dns-server"):
            parse_server(bad)


# ---------------------------------------------------------------- real local servers


class Server:
    """A Starlette app served by uvicorn in the test's loop, on any loopback address."""

    def __init__(
        self, app: Starlette, host: str = "127.0.0.1", port: int = 0, ssl_dir: Path | None = None
    ) -> None:
        self.host = host
        self.port = port or free_port()
        options: dict[str, Any] = {}
        if ssl_dir is not None:
            options = {
                "ssl_certfile": str(ssl_dir / "server.pem"),
                "ssl_keyfile": str(ssl_dir / "server.key"),
            }
        config = uvicorn.Config(app, host=host, port=self.port, log_level="warning", **options)
        self.server = uvicorn.Server(config)
        self.task: asyncio.Task[None] | None = None

    def url(self, host: str = "", scheme: str = "http") -> str:
        shown = host or (f"[{self.host}]" if ":" in self.host else self.host)
        return f"{scheme}://{shown}:{self.port}/"

    async def __aenter__(self) -> Server:
        self.task = asyncio.create_task(self.server.serve())
        while not self.server.started:  # noqa: ASYNC110 (uvicorn offers no event for it)
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *_: object) -> None:
        self.server.should_exit = True
        if self.task is not None:
            await self.task


class Agent:
    """An agent's endpoint: records what it is posted (and the Host header), over HTTP and
    WebSocket; what it answers is scripted."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.hosts: list[str] = []
        self.status = 200
        self.location = ""
        self.in_flight = 0
        self.most_in_flight = 0
        self.hold = 0.0
        self.app = Starlette(
            routes=[
                Route("/", self._post, methods=["POST"]),
                WebSocketRoute("/ws", self._socket),
            ]
        )

    async def _post(self, request: Request) -> Response:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            body = await request.body()
            self.hosts.append(request.headers.get("host", ""))
            if self.hold:
                await asyncio.sleep(self.hold)
            if self.location:
                return Response(status_code=302, headers={"Location": self.location})
            self.received.append(body)
            return Response(status_code=self.status)
        finally:
            self.in_flight -= 1

    async def _socket(self, socket: WebSocket) -> None:
        if self.location:  # answer the upgrade with a redirect instead
            await socket.send_denial_response(
                Response(status_code=302, headers={"Location": self.location})
            )
            return
        await socket.accept()
        self.hosts.append(socket.headers.get("host", ""))
        self.received.append((await socket.receive_text()).encode())
        await socket.close()


def settings(**changes: Any) -> OutboundSettings:
    """Outbound calls' settings, changed as the flags name them (outbound_allow=...)."""
    quick = Settings.of(push_timeout_seconds=5.0, outbound_connect_timeout_seconds=2.0)
    return quick.replace(**changes).outbound


async def post(config: OutboundSettings, url: str, body: bytes = b"{}") -> httpx.Response:
    async with outbound.client(config, peers=True) as client:
        return await client.post(url, content=body)


async def ws_send(config: OutboundSettings, url: str, text: str = "{}") -> None:
    guard = outbound.Guard(config, peers=True)
    connection: ClientConnection
    async with outbound.websocket(
        guard,
        url,
        total=config.timeout_seconds,
        cap=config.max_response_bytes,
        tls=outbound.tls_context(config),
    ) as connection:
        await connection.send(text)


@pytest.fixture
async def agent() -> AsyncIterator[tuple[Agent, Server]]:
    a = Agent()
    async with Server(a.app) as server:
        yield a, server


async def test_loopback_is_refused_by_default_and_opened_by_the_allowlist(
    agent: tuple[Agent, Server],
) -> None:
    a, server = agent
    with pytest.raises(OutboundRefused, match="loopback"):
        await post(settings(), server.url())
    with pytest.raises(OutboundRefused, match="loopback"):
        await ws_send(settings(), server.url(scheme="ws") + "ws")
    assert a.received == []
    assert (await post(settings(outbound_allow="127.0.0.1/32"), server.url())).status_code == 200
    await ws_send(settings(outbound_allow="127.0.0.1"), server.url(scheme="ws") + "ws")
    assert a.received == [b"{}", b"{}"]


@pytest.mark.parametrize("host", ["localhost", "2130706433", "0x7f000001", "127.1", "0x7f.1"])
async def test_other_spellings_of_loopback_are_refused(
    agent: tuple[Agent, Server], host: str
) -> None:
    a, server = agent
    with pytest.raises(OutboundRefused, match="loopback"):
        await post(settings(), server.url(host))
    assert a.received == []


async def test_ipv6_loopback_and_ipv4_mapped_forms() -> None:
    a = Agent()
    async with Server(a.app, host="::1") as server:
        with pytest.raises(OutboundRefused, match="loopback"):
            await post(settings(), server.url())
        assert (await post(settings(outbound_allow="::1/128"), server.url())).status_code == 200
    b = Agent()
    async with Server(b.app) as v4:  # on 127.0.0.1, reached through ::ffff:127.0.0.1
        mapped = f"http://[::ffff:127.0.0.1]:{v4.port}/"
        with pytest.raises(OutboundRefused, match=re.escape("stands for 127.0.0.1 is loopback")):
            await post(settings(), mapped)
        with pytest.raises(OutboundRefused, match="stands for"):
            await post(settings(outbound_allow="::1"), mapped)  # opening ::1 is not 127/8
        assert b.received == []
        assert (await post(settings(outbound_allow="127.0.0.0/8"), mapped)).status_code == 200
    assert a.received == b.received == [b"{}"]


@pytest.mark.parametrize("transport", ["http", "ws"])
async def test_a_redirect_to_loopback_or_metadata_is_not_followed(transport: str) -> None:
    """The agent (allowed) answers 302 to another local server (which the allowlist would let
    through, too): the call ends with the redirect, the target never hears of it."""
    bouncer, target = Agent(), Agent()
    async with Server(bouncer.app) as b, Server(target.app, host="127.0.0.2") as t:
        config = settings(outbound_allow="127.0.0.0/8")
        scheme = "ws" if transport == "ws" else "http"
        target_url = t.url(scheme=scheme) + ("ws" if transport == "ws" else "")
        for location in (target_url, f"{scheme}://169.254.169.254/"):
            bouncer.location = location
            if transport == "http":
                answer = await post(config, b.url())
                assert answer.status_code == 302
            else:
                with pytest.raises(Exception, match="redirect"):
                    await ws_send(config, b.url(scheme="ws") + "ws")
        assert target.received == [] and target.hosts == []


# ---------------------------------------------------------------- DNS tricks


class DnsServer(asyncio.DatagramProtocol):
    """A real DNS server on a loopback UDP port. Each name has a script: a list of answers
    (lists of addresses), given in turn to successive queries of each type, the last one
    repeated; a name with no script is NXDOMAIN. `silent` answers nothing at all."""

    def __init__(self) -> None:
        self.script: dict[str, list[list[str]]] = {}
        self.asked: Counter[tuple[str, str]] = Counter()
        self.silent = False
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        if self.silent or self.transport is None:
            return
        query = DNSRecord.parse(data)
        name = str(query.q.qname).rstrip(".").lower()
        kind = QTYPE[query.q.qtype]
        reply = query.reply()
        steps = self.script.get(name)
        if steps is None:
            reply.header.rcode = RCODE.NXDOMAIN
        else:
            step = steps[min(self.asked[name, kind], len(steps) - 1)]
            self.asked[name, kind] += 1
            for address in step:
                v6 = ":" in address
                if (kind == "AAAA") == v6:
                    data_ = AAAA(address) if v6 else ARecord(address)
                    reply.add_answer(RR(name, getattr(QTYPE, kind), rdata=data_, ttl=0))
        self.transport.sendto(reply.pack(), addr)

    def queries(self, name: str) -> int:
        return self.asked[name, "A"]


@pytest.fixture
async def dns() -> AsyncIterator[tuple[DnsServer, str]]:
    loop = asyncio.get_running_loop()
    transport, server = await loop.create_datagram_endpoint(DnsServer, local_addr=("127.0.0.1", 0))
    port = transport.get_extra_info("sockname")[1]
    yield server, f"127.0.0.1:{port}"
    transport.close()


async def test_the_dns_server_setting_resolves_names(dns: tuple[DnsServer, str]) -> None:
    server, address = dns
    server.script["agent.test"] = [["203.0.113.7", "2001:db8::7"]]
    found = await DnsServerResolver(address).resolve("Agent.Test.")
    assert sorted(map(str, found)) == ["2001:db8::7", "203.0.113.7"]
    with pytest.raises(OSError, match="no address"):
        await DnsServerResolver(address).resolve("nothing.test")


async def test_dns_rebinding_connects_to_the_checked_address(
    dns: tuple[DnsServer, str],
) -> None:
    """The name answers 127.0.0.2 (opened by the allowlist) and then 127.0.0.1 (not): the
    connection goes to the address that was checked, never to a second answer, and the next
    connection's fresh answer is checked again and refused. The Host header keeps the name."""
    server, address = dns
    good, victim = Agent(), Agent()
    port = free_port()
    server.script["rebind.test"] = [["127.0.0.2"], ["127.0.0.1"]]
    config = settings(outbound_allow="127.0.0.2", outbound_dns_server=address)
    async with Server(good.app, "127.0.0.2", port), Server(victim.app, "127.0.0.1", port):
        assert (await post(config, f"http://rebind.test:{port}/", b"one")).status_code == 200
        with pytest.raises(OutboundRefused, match=re.escape("rebind.test: 127.0.0.1 is loopback")):
            await post(config, f"http://rebind.test:{port}/", b"two")
        server.script["rebind.test"] = [["127.0.0.2"], ["127.0.0.1"]]
        server.asked.clear()
        await ws_send(config, f"ws://rebind.test:{port}/ws", "three")
    assert good.received == [b"one", b"three"]
    assert good.hosts == [f"rebind.test:{port}"] * 2
    assert victim.received == [] and victim.hosts == []
    assert server.queries("rebind.test") == 1  # resolved once per connection, not twice


async def test_a_name_with_a_public_and_a_private_address_is_refused(
    dns: tuple[DnsServer, str], agent: tuple[Agent, Server]
) -> None:
    server, address = dns
    a, local = agent
    server.script["mixed.test"] = [["93.184.216.34", "127.0.0.1"]]
    server.script["mixed6.test"] = [["2606:4700:4700::1111", "::1"]]
    config = settings(outbound_dns_server=address)
    for name in ("mixed.test", "mixed6.test"):
        with pytest.raises(OutboundRefused, match="loopback"):
            await post(config, f"http://{name}:{local.port}/")
        with pytest.raises(OutboundRefused, match="loopback"):
            await ws_send(config, f"ws://{name}:{local.port}/ws")
    assert a.received == []


async def test_an_allowlisted_name_is_reached_at_the_address_resolved(
    dns: tuple[DnsServer, str], agent: tuple[Agent, Server]
) -> None:
    """A cluster-internal agent, opened by its name: whatever private address it has."""
    server, address = dns
    a, local = agent
    server.script["agent.ns.svc.cluster.local"] = [["127.0.0.1"]]
    config = settings(outbound_dns_server=address, outbound_allow="*.svc.cluster.local")
    url = f"http://agent.ns.svc.cluster.local:{local.port}/"
    assert (await post(config, url)).status_code == 200
    assert a.hosts == [f"agent.ns.svc.cluster.local:{local.port}"]
    with pytest.raises(OutboundRefused):
        await post(settings(outbound_dns_server=address), url)


async def test_tls_verifies_the_name_while_connecting_to_the_checked_address(
    dns: tuple[DnsServer, str], tmp_path: Path
) -> None:
    """The certificate names only `agent.test`; the connection goes to 127.0.0.2: it holds
    only if SNI and verification use the URL's host, not the address connected to."""
    server, address = dns
    tls = write_tls_cert(tmp_path, names=("agent.test",))
    server.script["agent.test"] = [["127.0.0.2"]]
    server.script["other.test"] = [["127.0.0.2"]]
    a = Agent()
    config = settings(
        outbound_dns_server=address,
        outbound_allow="127.0.0.2",
        outbound_ca_file=str(tls.ca_path),
    )
    async with Server(a.app, "127.0.0.2", ssl_dir=tmp_path) as s:
        assert (await post(config, f"https://agent.test:{s.port}/", b"tls")).status_code == 200
        await ws_send(config, f"wss://agent.test:{s.port}/ws", "wss")
        with pytest.raises(httpx.ConnectError, match="certificate"):
            await post(config, f"https://other.test:{s.port}/")  # the name is checked
    assert a.received == [b"tls", b"wss"]


async def test_connect_timeout_covers_a_dns_server_that_never_answers(
    dns: tuple[DnsServer, str],
) -> None:
    server, address = dns
    server.silent = True
    config = settings(outbound_dns_server=address, outbound_connect_timeout_seconds=0.5)
    started = time.monotonic()
    with pytest.raises(httpx.ConnectTimeout):
        await post(config, "http://slow.test/")
    with pytest.raises(TimeoutError):
        await ws_send(config, "ws://slow.test/")
    assert time.monotonic() - started < 2.5


# ---------------------------------------------------------------- limits


@pytest.fixture
def unaccepting() -> Iterator[int]:
    """A port whose accept queue is full: a new connection's SYN is dropped, connect hangs."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        fillers.append(s)
    # One of them is in the accept queue (a backlog of 0 holds one): it is full.
    _, connected, _ = select.select([], fillers, [], 5)
    assert connected
    yield port
    for s in fillers:
        s.close()
    listener.close()


async def test_connect_timeout(unaccepting: int) -> None:
    config = settings(outbound_allow="127.0.0.1", outbound_connect_timeout_seconds=0.5)
    started = time.monotonic()
    with pytest.raises(httpx.ConnectTimeout):
        await post(config, f"http://127.0.0.1:{unaccepting}/")
    assert 0.4 < time.monotonic() - started < 2.0


def slow_app(sent: list[int], late_answer: asyncio.Event) -> Starlette:
    async def trickle(request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            while True:  # a byte every 0.1 s: no read ever waits long
                sent[0] += 1
                yield b"x"
                await asyncio.sleep(0.1)

        return StreamingResponse(body())

    async def late(request: Request) -> Response:
        await late_answer.wait()  # set once the client has given up
        return Response(b"late")

    return Starlette(routes=[Route("/trickle", trickle), Route("/late", late)])


async def test_total_timeout_ends_a_slow_answer() -> None:
    sent = [0]
    config = settings(outbound_allow="127.0.0.1", push_timeout_seconds=1.0)
    late_answer = asyncio.Event()
    async with Server(slow_app(sent, late_answer)) as s:
        for path in ("trickle", "late"):
            started = time.monotonic()
            with pytest.raises(httpx.TimeoutException):
                async with outbound.client(config, peers=True) as client:
                    await client.get(s.url() + path)
            assert 0.9 < time.monotonic() - started < 2.0, path
        late_answer.set()  # the server can stop: no request of its left waiting
    assert 5 <= sent[0] <= 15


class Endless:
    """A raw HTTP server whose answer to anything never ends (1 MiB writes, each waiting for
    the socket to take it): `sent` stops growing once the client drops the connection."""

    def __init__(self) -> None:
        self.sent = 0
        self.dropped = asyncio.Event()
        self.server: asyncio.Server | None = None
        self.port = 0

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        chunk = b"x" * (1 << 20)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = [ln for ln in head.lower().split(b"\r\n") if ln.startswith(b"content-length:")]
            if length:
                await reader.readexactly(int(length[0].split(b":")[1]))
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
            )
            while True:
                writer.write(chunk)
                await writer.drain()
                self.sent += len(chunk)
        except (OSError, asyncio.IncompleteReadError):
            self.dropped.set()
        finally:
            writer.close()

    async def __aenter__(self) -> Endless:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        if self.server is not None:
            self.server.close()


async def test_a_huge_answer_is_cut_at_the_cap_and_the_connection_dropped() -> None:
    config = settings(outbound_allow="127.0.0.1", outbound_max_response_bytes=64 * 1024)
    async with Endless() as server:
        tracemalloc.start()
        try:
            with pytest.raises(AnswerTooLarge, match="65536"):
                await post(config, server.url())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        await asyncio.wait_for(server.dropped.wait(), 5)  # the connection is gone
    assert server.sent < 16 << 20  # what socket buffers took before the drop
    assert peak < 4 << 20, f"peak {peak} bytes while reading an endless answer"


async def test_calls_to_one_destination_are_capped_per_process(
    agent: tuple[Agent, Server],
) -> None:
    a, server = agent
    a.hold = 0.3
    config = settings(outbound_allow="127.0.0.1", outbound_per_destination=3)
    other = Agent()
    other.hold = 0.3
    async with (
        Server(other.app) as o,
        outbound.client(config, peers=True) as one,
        outbound.client(config, peers=True) as two,  # another client of the process
    ):
        calls = [c.post(server.url(), content=b"{}") for c in (one, two) for _ in range(6)]
        calls += [one.post(o.url(), content=b"{}") for _ in range(3)]
        started = time.monotonic()
        answers = await asyncio.gather(*calls)
        took = time.monotonic() - started
    assert [r.status_code for r in answers] == [200] * 15
    assert a.most_in_flight == 3 and len(a.received) == 12
    assert other.most_in_flight == 3  # another destination is not held up by the first
    assert took >= 4 * 0.3 - 0.05  # 12 calls, 3 at a time


async def test_operator_urls_are_trusted_but_limited(agent: tuple[Agent, Server]) -> None:
    """Providers and the webhook (peers=False): loopback is fine, the cap still holds."""
    a, server = agent
    async with outbound.client(settings()) as client:
        assert (await client.post(server.url(), content=b"op")).status_code == 200
    async with Endless() as endless, outbound.client(settings()) as client:
        with pytest.raises(OutboundError):
            await client.post(endless.url(), content=b"{}")
    assert a.received == [b"op"]


# ---------------------------------------------------------------- end to end: real nodes

FAST = {
    "MEDIATOR_DELIVERY_TIMEOUT_SECONDS": "2",
    "MEDIATOR_WORKER_TICK_SECONDS": "0.2",
    "MEDIATOR_PUSH_RETRY_MIN_SECONDS": "0.2",
    "MEDIATOR_PUSH_RETRY_MAX_SECONDS": "0.5",
    "MEDIATOR_PUSH_TIMEOUT_SECONDS": "2",
    "MEDIATOR_STATS_SECONDS": "1",
}


def database_15(server: RedisUnderTest) -> str:
    """Storage of the push suites' nodes alone (Redis Cluster has only database 0: a
    cluster of its own)."""
    return server.isolated_url("push")


@pytest.fixture
async def start_node(redis_server: RedisUnderTest) -> AsyncIterator[Any]:
    nodes: list[Node] = []

    async def start(**env: str) -> Node:
        node = Node(database_15(redis_server), **{**FAST, **env})
        nodes.append(node)
        return await asyncio.to_thread(node.start)

    yield start
    for node in nodes:
        node.stop()


async def pushes(node: Node, outcome: str) -> float:
    async with httpx.AsyncClient() as client:
        text = (await client.get(node.base + "/metrics")).text
    return value(text, "mediator_didcomm_pushes_total", outcome=outcome) or 0.0


async def until(condition: Any, timeout: float = 10.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.05)


async def connected_wallet(node: Node, endpoint: str) -> tuple[Peer, str, str]:
    """A wallet whose DID document names `endpoint`, mediated, with a key (over the return
    route: nothing needs the endpoint for that)."""
    med = await mediator_key(node.base)
    wallet = Peer(node.base, med)
    request = wallet.message(
        "didexchange/1.1/request", label="agent", did=numalgo2_did(wallet.keys, [endpoint])
    )
    assert (await wallet.request_message(request))["@type"].endswith("/response")
    await wallet.mediate_request()
    return wallet, med, await wallet.register_key()


@pytest.mark.full
@pytest.mark.parametrize("transport", ["http", "ws"])
async def test_a_node_refuses_a_loopback_push_endpoint_and_keeps_the_messages(
    start_node: Any, agent: tuple[Agent, Server], transport: str, redis_server: RedisUnderTest
) -> None:
    a, server = agent
    node = await start_node()
    endpoint = server.url() if transport == "http" else server.url(scheme="ws") + "ws"
    wallet, med, key = await connected_wallet(node, endpoint)
    await Sender(med).send_to(key, {"n": 1}, node.base)
    await until(lambda: pushes(node, "refused"))
    # No retry comes: none is scheduled once the push ends (its lease let go).
    backend = Backend(database_15(redis_server))
    await backend.start()
    try:
        due = keys.queue_keys(f"{keys.DIDCOMM_NAMESPACE}:{wallet.verkey}").due
        lease = keys.connection_keys(wallet.verkey).push

        async def push_idle() -> bool:
            if await backend.client.exists(lease):
                return False
            return await backend.client.zscore(due, keys.PUSH_MEMBER + wallet.verkey) is None

        await until(push_idle)
    finally:
        await backend.aclose()
    assert await pushes(node, "refused") == 1 and await pushes(node, "failed") == 0
    assert a.received == []
    assert "refused: 127.0.0.1: 127.0.0.1 is loopback" in node.output()
    delivery = await wallet.delivery_request(10)  # kept for pickup
    assert [wallet.open_forwarded(b)["n"] for b in _bodies(delivery)] == [1]
    await wallet.close()


@pytest.mark.full
@pytest.mark.parametrize("transport", ["http", "ws"])
async def test_a_node_pushes_to_an_allowlisted_loopback_endpoint(
    start_node: Any, agent: tuple[Agent, Server], transport: str
) -> None:
    a, server = agent
    node = await start_node(MEDIATOR_OUTBOUND_ALLOW="127.0.0.1/32")
    endpoint = server.url() if transport == "http" else server.url(scheme="ws") + "ws"
    wallet, med, key = await connected_wallet(node, endpoint)
    for n in range(3):
        await Sender(med).send_to(key, {"n": n}, node.base)
    await until(lambda: len(a.received) == 3)
    assert [wallet.open_forwarded(b)["n"] for b in a.received] == [0, 1, 2]
    assert await pushes(node, "delivered") == 3 and await pushes(node, "refused") == 0
    await wallet.close()


@pytest.mark.full
async def test_a_node_follows_no_redirect_and_drops_a_huge_answer(
    start_node: Any, agent: tuple[Agent, Server]
) -> None:
    """A 302 to a metadata address is a failed push (retried, kept for pickup), never
    followed; a 2xx with an endless body is delivered once, its body cut at the cap."""
    a, server = agent
    node = await start_node(MEDIATOR_OUTBOUND_ALLOW="127.0.0.1")
    a.location = "http://169.254.169.254/latest/meta-data/"
    wallet, med, key = await connected_wallet(node, server.url())
    await Sender(med).send_to(key, {"n": "bounced"}, node.base)
    await until(lambda: pushes(node, "failed"))
    assert a.received == []
    a.location = ""
    await until(lambda: len(a.received) == 1)  # the retry, to the endpoint itself
    await wallet.close()
    async with Endless() as huge:
        wallet, med, key = await connected_wallet(node, huge.url())
        await Sender(med).send_to(key, {"n": "big"}, node.base)
        await until(lambda: _delivered(node, 2))
        await asyncio.wait_for(huge.dropped.wait(), 5)
        assert huge.sent < 16 << 20
        assert (await wallet.status())["message_count"] == 0
        await wallet.close()


async def _delivered(node: Node, count: int) -> bool:
    return await pushes(node, "delivered") >= count


def _bodies(delivery: dict[str, Any]) -> list[bytes]:
    from mediator.client import delivered

    return [body for _, body in delivered(delivery)]
