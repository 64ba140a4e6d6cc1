"""A lean HTTP/1.1 keep-alive load generator on asyncio streams.

httpx spends more CPU per request than the servers under test, so it cannot saturate them
from one core. This client only does what the benchmark needs: write prebuilt request bytes,
read the status line, the headers and a Content-Length (or chunked) body, and keep the
connection open. N connections run a closed loop each, for a bounded time and count.

Only loopback addresses may be targeted.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from bench.harness.errors import BenchError

HOST = "127.0.0.1"  # every server a benchmark starts listens here
MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024
MAX_OPS_PER_WORKER = 10_000_000  # a hard bound on every closed loop, whatever the deadline


class HttpError(Exception):
    """A malformed answer, or one whose status the caller did not expect."""

    def __init__(self, message: str, status: int = 0, body: bytes = b"") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


def check_loopback(host: str) -> str:
    """Refuse any address that is not loopback: the benchmark never leaves the machine."""
    name = host.strip("[]")
    if name == "localhost":
        return "127.0.0.1"
    try:
        if ipaddress.ip_address(name).is_loopback:
            return name
    except ValueError:
        pass
    raise ValueError(f"only loopback addresses may be targeted, not {host!r}")


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[bytes, bytes]  # names lower-cased; the last value wins
    body: bytes

    def header(self, name: bytes, default: bytes = b"") -> bytes:
        return self.headers.get(name, default)


def build_request(
    method: str,
    path: str,
    headers: Mapping[str, str] | None = None,
    body: bytes = b"",
    host: str = HOST,
) -> bytes:
    """The bytes of one request, built once and written as often as needed."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Connection:
    """One keep-alive connection; requests on it go one after the other."""

    def __init__(self, host: str, port: int, *, timeout: float = 15.0) -> None:
        self.host = check_loopback(host)
        self.port = port
        self.timeout = timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> Connection:
        async with asyncio.timeout(self.timeout):
            self._reader, self._writer = await asyncio.open_connection(
                self.host, self.port, limit=MAX_HEAD_BYTES
            )
        sock = self._writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self

    async def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 2)

    async def request(self, raw: bytes) -> Response:
        """Write a prebuilt request and read its answer, within the connection's timeout."""
        if self._writer is None or self._reader is None:
            raise HttpError("connection is not open")
        async with asyncio.timeout(self.timeout):
            self._writer.write(raw)
            return await self._read_response(self._reader)

    async def send(self, raw: bytes) -> None:
        """Write a request without waiting for its answer (read it later with `receive`)."""
        if self._writer is None:
            raise HttpError("connection is not open")
        self._writer.write(raw)

    async def receive(self, limit_s: float | None = None) -> Response:
        """Read one answer, waiting at most `limit_s` (default: the connection's timeout)."""
        if self._reader is None:
            raise HttpError("connection is not open")
        async with asyncio.timeout(self.timeout if limit_s is None else limit_s):
            return await self._read_response(self._reader)

    @staticmethod
    async def _read_response(reader: asyncio.StreamReader) -> Response:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            raise HttpError("connection closed by the server") from exc
        except asyncio.LimitOverrunError as exc:
            raise HttpError("response head too large") from exc
        lines = head[:-4].split(b"\r\n")
        status_line = lines[0]
        if not status_line.startswith(b"HTTP/1.") or len(status_line) < 12:
            raise HttpError(f"bad status line {status_line[:80]!r}")
        status = int(status_line[9:12])
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise HttpError(f"bad header line {line[:80]!r}")
            headers[name.strip().lower()] = value.strip()
        length = headers.get(b"content-length")
        if length is not None:
            n = int(length)
            if n > MAX_BODY_BYTES:
                raise HttpError(f"response body of {n} bytes is too large")
            body = await reader.readexactly(n) if n else b""
        elif headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            body = await Connection._read_chunked(reader)
        elif status in (204, 304) or 100 <= status < 200:
            body = b""
        else:
            raise HttpError("response without Content-Length (read-until-close unsupported)")
        return Response(status, headers, body)

    @staticmethod
    async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
        chunks: list[bytes] = []
        total = 0
        for _ in range(1_000_000):
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                # Trailers (if any) end with an empty line.
                for _ in range(1000):
                    if await reader.readuntil(b"\r\n") == b"\r\n":
                        return b"".join(chunks)
                raise HttpError("too many trailer lines")
            total += size
            if total > MAX_BODY_BYTES:
                raise HttpError("chunked response body is too large")
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        raise HttpError("too many chunks")


# An operation run in a closed loop: it gets its worker's connection and returns the number
# of messages it handled (0 when it did nothing useful, e.g. an empty receive).
Operation = Callable[[Connection], Awaitable[int]]


@dataclass
class LoadResult:
    ops: int = 0
    messages: int = 0
    elapsed: float = 0.0
    errors: int = 0
    first_error: str = ""
    idle_ops: int = 0  # operations that handled no message
    latencies: list[float] = field(default_factory=list, repr=False)

    @property
    def rate(self) -> float:
        return self.messages / self.elapsed if self.elapsed > 0 else 0.0


async def open_connections(host: str, port: int, count: int) -> list[Connection]:
    conns = [Connection(host, port) for _ in range(count)]
    try:
        await asyncio.gather(*(c.open() for c in conns))
    except BaseException:
        await close_connections(conns)
        raise
    return conns


async def close_connections(conns: list[Connection]) -> None:
    await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)


async def closed_loop(
    conns: list[Connection],
    operation: Operation,
    seconds: float,
    *,
    max_errors: int = 50,
    on_start: Callable[[], None] | None = None,
) -> LoadResult:
    """Every connection runs `operation` back to back until `seconds` have passed.

    No operation starts after the deadline; those under way finish and count, and the elapsed
    time runs until the last one has finished. A worker whose connection fails stops.
    """
    result = LoadResult()
    perf = time.perf_counter
    start = perf()
    deadline = start + seconds
    if on_start is not None:
        on_start()

    async def worker(conn: Connection) -> None:
        for _ in range(MAX_OPS_PER_WORKER):
            if perf() >= deadline:
                return
            try:
                handled = await operation(conn)
            except HttpError as exc:
                result.errors += 1
                if not result.first_error:
                    result.first_error = f"{exc} {exc.body[:200]!r}".strip()
                if exc.status == 0 or result.errors >= max_errors:
                    return  # a broken connection, or a server answering nothing useful
                continue
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
                result.errors += 1
                if not result.first_error:
                    result.first_error = f"{type(exc).__name__}: {exc}"
                return
            result.ops += 1
            if handled:
                result.messages += handled
            else:
                result.idle_ops += 1

    await asyncio.wait_for(asyncio.gather(*(worker(c) for c in conns)), timeout=seconds + 60)
    result.elapsed = perf() - start
    return result


def expect(resp: Response, *statuses: int) -> Response:
    if resp.status not in statuses:
        raise HttpError(
            f"unexpected status {resp.status} (wanted {', '.join(map(str, statuses))})",
            resp.status,
            resp.body,
        )
    return resp


def rotating(requests: list[bytes], status: int) -> Operation:
    """An operation sending `requests` in turn, each expected to answer `status`."""
    turn = 0

    async def op(conn: Connection) -> int:
        nonlocal turn
        turn += 1
        expect(await conn.request(requests[turn % len(requests)]), status)
        return 1

    return op


async def send_all(
    port: int,
    requests: list[bytes],
    statuses: Sequence[int],
    conns: int = 8,
) -> int:
    """Run prebuilt requests over a few connections to the server on `port` (set-up work,
    not timed); each must answer one of `statuses`. Returns how many ran."""
    pending = list(reversed(requests))
    done = 0

    async def worker(conn: Connection) -> None:
        nonlocal done
        while pending:
            raw = pending.pop()
            resp = await conn.request(raw)
            if resp.status not in statuses:
                raise BenchError(f"bulk request: status {resp.status}: {resp.body[:300]!r}")
            done += 1

    opened = await open_connections(HOST, port, max(1, min(conns, len(requests))))
    try:
        await asyncio.wait_for(asyncio.gather(*(worker(c) for c in opened)), 300)
    finally:
        await close_connections(opened)
    return done
