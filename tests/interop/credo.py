"""A real Credo agent in a Node.js process, driven over JSON lines: the wallet a mobile user
runs, talking to our mediator unmodified. Credo 0.5.19 runs `interop/credo/agent.js`; 0.6.3
and 0.7.0, whose API moved DIDComm into a module of its own, run `interop/credo-next/agent.mjs`
(same commands and events).

A wallet is in memory unless given `storage_dir`: then it is an Askar SQLite store in that
folder, and `await agent.stop(); await agent.start()` (or `restart()`) carries on with the
same connections, mediator connection and mediation record (Credo finds the mediator's
invitation among the ones it received and does not connect or ask for mediation again)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tests.interop.installs import ROOT, installed
from tests.logs import log_file

VERSIONS = ("0.5.19", "0.6.3", "0.7.0")
DEFAULT_VERSION = "0.5.19"
AGENT = ROOT / "interop" / "credo" / "agent.js"
NEXT_AGENT = ROOT / "interop" / "credo-next" / "agent.mjs"
LINE_LIMIT = 64 * 1024 * 1024  # one answer line can hold many queued messages


def credo_install_dir(version: str = DEFAULT_VERSION) -> Path:
    """The install folder of that Credo version (installed on first use, then cached)."""
    if version not in VERSIONS:
        raise ValueError(f"Credo {version}: the interop tests know {', '.join(VERSIONS)}")
    return installed("credo", version)


def agent_script(version: str = DEFAULT_VERSION) -> Path:
    return AGENT if version.startswith("0.5.") else NEXT_AGENT


class CredoError(Exception):
    pass


@dataclass(frozen=True)
class AskarStore:
    """Where a Credo agent keeps its Askar store and how to open it (e.g. with `aries_askar`:
    `Store.open(uri, key_method, key, profile)`)."""

    uri: str  # sqlite://<file>
    path: Path  # the SQLite file
    key: str
    key_method: str  # kdf:argon2i:mod, kdf:argon2i:int or raw
    profile: str  # Credo names the default profile after the store id

    @property
    def files(self) -> list[Path]:
        """The store's files as they are now: sqlite.db, and -wal/-shm while it is open."""
        return sorted(p for p in self.path.parent.glob(self.path.name + "*") if p.is_file())


class NodeDriver:
    """A Node.js script driven by JSON lines (interop/driver.cjs): commands on stdin, answers
    and events on stdout, logs on stderr (to a log file per run). It can be started again
    after `stop()`; each run's `ready` event replaces the last."""

    def __init__(self, name: str, script: Path, options: dict[str, Any], version: str) -> None:
        self.name = name
        self.label = name
        self.script = script
        self.options = options
        self.version = version
        self.proc: asyncio.subprocess.Process | None = None
        self.ready: dict[str, Any] | None = None
        self.runs = 0
        self._answers: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ready = asyncio.Event()
        self._next_id = 0
        self._reader: asyncio.Task[None] | None = None
        self._stderr: IO[bytes] | None = None
        self._log: Path | None = None

    def on_event(self, item: dict[str, Any]) -> None:
        """An event other than ready/failed (subclasses keep what they need)."""

    async def start(self, timeout: float = 90.0) -> dict[str, Any]:  # noqa: ASYNC109
        if self.proc is not None:
            raise CredoError(f"{self.name} is running")
        home = credo_install_dir(self.version)
        env = {**os.environ, "CREDO_HOME": str(home), "NODE_PATH": str(home / "node_modules")}
        self.runs += 1
        self.ready = None
        self._ready = asyncio.Event()
        self._answers = {}
        self._stderr = log_file(f"credo-{self.version}-{self.name}-run{self.runs}-")
        self._log = Path(self._stderr.name)
        self.proc = await asyncio.create_subprocess_exec(
            "node",
            str(self.script),
            json.dumps(self.options),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            limit=LINE_LIMIT,
        )
        self._reader = asyncio.create_task(self._read())
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError as exc:
            raise CredoError(
                f"{self.name} did not start in {timeout} s\n{self.log_tail()}"
            ) from exc
        assert self.ready is not None
        if self.ready.get("event") != "ready":
            raise CredoError(f"{self.name} failed to start: {self.ready}\n{self.log_tail()}")
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
            elif "event" in item:
                self.on_event(item)
            elif "id" in item and item["id"] in self._answers:
                self._answers.pop(item["id"]).set_result(item)
        for waiter in self._answers.values():
            if not waiter.done():
                waiter.set_exception(CredoError(f"{self.name} exited\n{self.log_tail()}"))
        if self.ready is None:
            self.ready = {"event": "exited"}
        self._ready.set()

    async def command(self, cmd: str, timeout: float = 60.0, **fields: Any) -> dict[str, Any]:  # noqa: ASYNC109
        if self.proc is None or self.proc.stdin is None:
            raise CredoError(f"{self.name} is not running")
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
                f"{self.name}: {cmd} took over {timeout} s\n{self.log_tail()}"
            ) from exc
        if not answer.get("ok"):
            raise CredoError(f"{self.name}: {cmd} failed: {answer.get('error')}\n{self.log_tail()}")
        return answer

    def log_tail(self, chars: int = 4000) -> str:
        if self._log is None:
            return ""
        if self._stderr is not None and not self._stderr.closed:
            self._stderr.flush()
        return self._log.read_text(errors="replace")[-chars:]

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
            self._reader = None
        if self._stderr is not None:
            self._stderr.close()
        self.proc = None

    async def restart(self, timeout: float = 90.0) -> dict[str, Any]:  # noqa: ASYNC109
        await self.stop()
        return await self.start(timeout)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None


class CredoAgent(NodeDriver):
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
        storage_dir: Path | None = None,
        storage_id: str | None = None,
        storage_key: str | None = None,
        key_method: str = "kdf:argon2i:mod",
    ) -> None:
        """`pickup` is a Credo pickup strategy or "auto" (none: Discover Features decides).
        `peer_num_algo` (1, 2 or 4; 0.6+ only) is the did:peer method of Credo's DID
        Exchange requests. `storage_dir` (absolute, created if missing) keeps the wallet in
        `<storage_dir>/sqlite.db` across restarts; its id (profile name) defaults to
        `wallet-<label>` and its key to a random one (`store` tells both)."""
        options: dict[str, Any] = {
            "label": label,
            "pollingMs": polling_ms,
            "logLevel": log_level,
        }
        if mediator_invitation_url is not None:
            options["mediatorInvitationUrl"] = mediator_invitation_url
            options["pickup"] = pickup or "PickUpV2"
        if inbound_port is not None:
            options["inboundPort"] = inbound_port
        if peer_num_algo is not None:
            if agent_script(version) == AGENT:
                raise ValueError("Credo 0.5 has no choice of did:peer method")
            options["peerNumAlgo"] = peer_num_algo
        self.store: AskarStore | None = None
        if storage_dir is not None:
            folder = Path(storage_dir).absolute()
            folder.mkdir(parents=True, exist_ok=True)
            store_id = storage_id or f"wallet-{label}"
            key = storage_key or secrets.token_urlsafe(24)
            options["storage"] = {
                "path": str(folder),
                "id": store_id,
                "key": key,
                "keyDerivationMethod": key_method,
            }
            file = folder / "sqlite.db"
            self.store = AskarStore(f"sqlite://{file}", file, key, key_method, store_id)
        super().__init__(label, agent_script(version), options, version)
        self.messages: list[dict[str, Any]] = []
        self._changed = asyncio.Event()

    def on_event(self, item: dict[str, Any]) -> None:
        if item.get("event") == "basic-message":
            self.messages.append(item)
            self._changed.set()

    async def create_invitation(
        self, *, multi_use: bool = False, invitation_did: str | None = None
    ) -> str:
        """An OOB invitation URL (single use unless `multi_use`); with `invitation_did`, the
        invitation names that DID instead of an inline service (so a receiver that already
        has a connection from that DID can reuse it)."""
        fields: dict[str, Any] = {"multiUse": multi_use}
        if invitation_did is not None:
            fields["invitationDid"] = invitation_did
        return str((await self.command("create-invitation", **fields))["url"])

    async def receive_invitation(self, url: str) -> str:
        answer = await self.command("receive-invitation", url=url, timeoutMs=45_000)
        return str(answer["connectionId"])

    async def accept_invitation(self, url: str, *, reuse_connection: bool = True) -> dict[str, Any]:
        """Receive an invitation with Credo's `reuseConnection`: {"connectionId", "reused"},
        reused = Credo kept a connection it already had (found by the invitation's key or
        DID; OOB handshake-reuse) instead of making a new one."""
        return await self.command(
            "receive-invitation", url=url, reuseConnection=reuse_connection, timeoutMs=45_000
        )

    async def send(self, connection_id: str, content: str) -> None:
        await self.command("send", connectionId=connection_id, content=content)

    async def mediation(self) -> dict[str, Any]:
        """The default mediator's record: mediationId, connectionId, state, endpoint, routingKeys,
        recipientKeys, pickup, default, createdAt ({"state": None} without one)."""
        answer = await self.command("mediation")
        return {k: v for k, v in answer.items() if k not in ("id", "ok")}

    async def mediations(self) -> list[dict[str, Any]]:
        """All mediation records in the wallet."""
        return list((await self.command("mediations"))["mediations"])

    async def connections(self) -> list[dict[str, Any]]:
        """All connection records: id, state, role, protocol, theirLabel, did, theirDid,
        outOfBandId, invitationDid, mediatorId, createdAt."""
        return list((await self.command("connections"))["connections"])

    async def basic_messages(self) -> list[dict[str, Any]]:
        """The basic message records the wallet keeps (sent and received, all runs), oldest
        first: id, connectionId, role (sender/receiver), content, sentTime, createdAt."""
        return list((await self.command("basic-messages"))["messages"])

    async def wait_for_messages(self, count: int, timeout: float = 60.0) -> list[str]:  # noqa: ASYNC109
        """The contents of the basic messages received (by every run of this agent), once
        there are `count` of them."""
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
