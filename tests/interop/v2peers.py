"""The real DIDComm v2 wallets the interop tests drive: Veramo 7 (interop/v2/veramo/agent.mjs)
and the Hyperledger Identus SDK 7 (interop/v2/identus/agent.mjs), unmodified libraries in
Node.js processes, each driven by JSON lines (a request a line on stdin, its answer a line
on stdout, logs on stderr to a file per agent). Installed by interop/install-v2.sh into the
interop cache on first use."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import IO, Any

from tests.interop.installs import ROOT, installed
from tests.logs import log_file

LINE_LIMIT = 16 * 1024 * 1024


class V2AgentError(Exception):
    pass


class V2Agent:
    """One wallet process of `lib` (veramo or identus)."""

    def __init__(self, lib: str, name: str, env: dict[str, str] | None = None) -> None:
        self.lib = lib
        self.name = name
        self.env = env or {}
        self.script = ROOT / "interop" / "v2" / lib / "agent.mjs"
        self.proc: asyncio.subprocess.Process | None = None
        self._stderr: IO[bytes] | None = None
        self._log: Path | None = None
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> V2Agent:
        installed("v2", self.lib)
        self._stderr = log_file(f"v2-{self.lib}-{self.name}-")
        self._log = Path(self._stderr.name)
        self.proc = await asyncio.create_subprocess_exec(
            "node",
            str(self.script),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._stderr,
            env={**os.environ, **self.env},
            limit=LINE_LIMIT,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(Exception):
                assert proc.stdin is not None
                proc.stdin.write(b'{"op":"stop"}\n')
                proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if self._stderr is not None:
            self._stderr.close()

    async def request(self, op: str, timeout: float = 60, **fields: Any) -> dict[str, Any]:  # noqa: ASYNC109
        """Send one request; its answer (V2AgentError when not ok, with the log's tail)."""
        proc = self.proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise V2AgentError(f"{self.name} is not running")
        async with self._lock:  # one request at a time: answers come in order
            line = json.dumps({"op": op, **fields}).encode() + b"\n"
            proc.stdin.write(line)
            await proc.stdin.drain()
            try:
                while True:
                    raw = await asyncio.wait_for(proc.stdout.readline(), timeout)
                    if not raw:
                        raise V2AgentError(f"{self.name} exited\n{self.log_tail()}")
                    try:
                        answer = json.loads(raw)
                    except ValueError:
                        continue
                    if isinstance(answer, dict) and "ok" in answer:
                        break  # answers come in order, one a request
            except TimeoutError as exc:
                raise V2AgentError(
                    f"{self.name}: {op} took over {timeout} s\n{self.log_tail()}"
                ) from exc
        if not answer.get("ok"):
            raise V2AgentError(f"{self.name}: {op} failed: {answer}\n{self.log_tail()}")
        return dict(answer)

    def log_tail(self, chars: int = 4000) -> str:
        if self._log is None:
            return ""
        if self._stderr is not None and not self._stderr.closed:
            self._stderr.flush()
        return self._log.read_text(errors="replace")[-chars:]
