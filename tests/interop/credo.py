"""A real Credo agent in a Node.js process, driven over JSON lines: the wallet a mobile user
runs, talking to our mediator unmodified. Credo 0.5.19 runs `interop/credo/agent.js`; 0.6.3
and 0.7.0, whose API moved DIDComm into a module of its own, run `interop/credo-next/agent.mjs`
(same commands and events)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import Any

from tests.interop.installs import ROOT, installed
from tests.logs import log_file

VERSIONS = ("0.5.19", "0.6.3", "0.7.0")
DEFAULT_VERSION = "0.5.19"
AGENT = ROOT / "interop" / "credo" / "agent.js"
NEXT_AGENT = ROOT / "interop" / "credo-next" / "agent.mjs"


def credo_install_dir(version: str = DEFAULT_VERSION) -> Path:
    """The install folder of that Credo version (installed on first use, then cached)."""
    if version not in VERSIONS:
        raise ValueError(f"Credo {version}: the interop tests know {', '.join(VERSIONS)}")
    return installed("credo", version)


def agent_script(version: str = DEFAULT_VERSION) -> Path:
    return AGENT if version.startswith("0.5.") else NEXT_AGENT


class CredoError(Exception):
    pass


class CredoAgent:
    def __init__(
        self,
        label: str,
        *,
        version: str = DEFAULT_VERSION,
        mediator_invitation_url: str | None = None,
        pickup: str | None = None,
        inbound_port: int | None = None,
        polling_ms: int = 500,
        log_level: str = "info",
        peer_num_algo: int | None = None,
    ) -> None:
        """`pickup` is a Credo pickup strategy or "auto" (none: Discover Features decides).
        `peer_num_algo` (1, 2 or 4; 0.6+ only) is the did:peer method of Credo's DID
        Exchange requests."""
        self.options: dict[str, Any] = {
            "label": label,
            "pollingMs": polling_ms,
            "logLevel": log_level,
        }
        if mediator_invitation_url is not None:
            self.options["mediatorInvitationUrl"] = mediator_invitation_url
            self.options["pickup"] = pickup or "PickUpV2"
        if inbound_port is not None:
            self.options["inboundPort"] = inbound_port
        if peer_num_algo is not None:
            if agent_script(version) == AGENT:
                raise ValueError("Credo 0.5 has no choice of did:peer method")
            self.options["peerNumAlgo"] = peer_num_algo
        self.label = label
        self.version = version
        self.proc: asyncio.subprocess.Process | None = None
        self.messages: list[dict[str, Any]] = []
        self.ready: dict[str, Any] | None = None
        self._answers: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ready = asyncio.Event()
        self._changed = asyncio.Event()
        self._next_id = 0
        self._reader: asyncio.Task[None] | None = None
        self._stderr = log_file(f"credo-{version}-{label}-")

    async def start(self, timeout: float = 90.0) -> dict[str, Any]:  # noqa: ASYNC109
        home = credo_install_dir(self.version)
        env = {**os.environ, "CREDO_HOME": str(home), "NODE_PATH": str(home / "node_modules")}
        self.proc = await asyncio.create_subprocess_exec(
            "node",
            str(agent_script(self.version)),
            json.dumps(self.options),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._stderr,
            env=env,
        )
        self._reader = asyncio.create_task(self._read())
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError as exc:
            raise CredoError(
                f"{self.label} did not start in {timeout} s\n{self.log_tail()}"
            ) from exc
        assert self.ready is not None
        if self.ready.get("event") == "failed":
            raise CredoError(f"{self.label} failed to start: {self.ready}\n{self.log_tail()}")
        return self.ready

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if item.get("event") in ("ready", "failed"):
                self.ready = item
                self._ready.set()
            elif item.get("event") == "basic-message":
                self.messages.append(item)
                self._changed.set()
            elif "id" in item and item["id"] in self._answers:
                self._answers.pop(item["id"]).set_result(item)
        for waiter in self._answers.values():
            if not waiter.done():
                waiter.set_exception(CredoError(f"{self.label} exited\n{self.log_tail()}"))
        self._ready.set()

    async def command(self, cmd: str, timeout: float = 60.0, **fields: Any) -> dict[str, Any]:  # noqa: ASYNC109
        assert self.proc is not None and self.proc.stdin is not None
        self._next_id += 1
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._answers[self._next_id] = waiter
        self.proc.stdin.write(json.dumps({"id": self._next_id, "cmd": cmd, **fields}).encode())
        self.proc.stdin.write(b"\n")
        await self.proc.stdin.drain()
        try:
            answer = await asyncio.wait_for(waiter, timeout)
        except TimeoutError as exc:
            raise CredoError(
                f"{self.label}: {cmd} took over {timeout} s\n{self.log_tail()}"
            ) from exc
        if not answer.get("ok"):
            raise CredoError(
                f"{self.label}: {cmd} failed: {answer.get('error')}\n{self.log_tail()}"
            )
        return answer

    async def create_invitation(self) -> str:
        return str((await self.command("create-invitation"))["url"])

    async def receive_invitation(self, url: str) -> str:
        answer = await self.command("receive-invitation", url=url, timeoutMs=45_000)
        return str(answer["connectionId"])

    async def send(self, connection_id: str, content: str) -> None:
        await self.command("send", connectionId=connection_id, content=content)

    async def mediation(self) -> dict[str, Any]:
        return await self.command("mediation")

    async def wait_for_messages(self, count: int, timeout: float = 60.0) -> list[str]:  # noqa: ASYNC109
        """The contents of the basic messages received, once there are `count` of them."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.messages) < count:
            left = deadline - loop.time()
            if left <= 0:
                break
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                break
        return [m["content"] for m in self.messages]

    def log_tail(self, chars: int = 4000) -> str:
        self._stderr.flush()
        return Path(self._stderr.name).read_text(errors="replace")[-chars:]

    async def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.returncode is None:
            with contextlib.suppress(CredoError, ConnectionError):
                await self.command("shutdown", timeout=15)
            try:
                await asyncio.wait_for(self.proc.wait(), 15)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._reader is not None:
            await self._reader
        self._stderr.close()
        self.proc = None
