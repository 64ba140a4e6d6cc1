"""A real ACA-Py agent (PyPI acapy-agent, in its own Python 3.13 environment, installed by
interop/install-acapy.sh) driven over its admin API.

As a mediation client it is started with `--mediator-invitation`; it can also play a plain
agent (a sender) or, with `open_mediation=True`, a mediator itself (ACA-Py as mediator is the
reference the harness is checked against). ACA-Py stores no basic messages: it posts them to
its webhook URL, so each agent runs a small HTTP receiver in the test's event loop and keeps
every event (`events(topic)`, `basic_messages()`).

Facts this wrapper relies on (ACA-Py 1.7.0, see docs/ or the interop notes):
- Its askar wallet lives under $ACAPY_HOME/wallet/<name>/sqlite.db (acapy_agent/utils/env.py);
  `--wallet-storage-config` is only for postgres. Each agent gets a fresh temporary ACAPY_HOME.
- Every `ACAPY_*` environment variable is read as a command-line flag (ConfigArgParse), so
  inherited ones are dropped.
- `/status/ready` answers once the conductor has started; with `--mediator-invitation` the
  DID Exchange request to the mediator has been sent by then, not answered."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlparse

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mediator.embedded import free_port
from tests.interop.installs import installed
from tests.local_server import LocalServer

T = TypeVar("T")

DIDEXCHANGE_1_1 = "https://didcomm.org/didexchange/1.1"
DIDEXCHANGE_1_0 = "https://didcomm.org/didexchange/1.0"


def acapy_install_dir() -> Path:
    return installed("acapy")


class AcaPyError(Exception):
    pass


class Webhooks(LocalServer):
    """Where ACA-Py posts its events (`POST <webhook-url>/topic/<topic>/`)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.changed = asyncio.Event()
        super().__init__(Starlette(routes=[Route("/topic/{topic}/", self._take, methods=["POST"])]))

    async def _take(self, request: Request) -> Response:
        self.events.append((request.path_params["topic"], await request.json()))
        self.changed.set()
        return Response(status_code=200)


class AcaPyAgent:
    """One `aca-py start` process.

    label: its label (and wallet name). port / admin_port: its inbound HTTP endpoint and admin
    API (free ports when None). ws_port: also listen for DIDComm over WebSocket there (its
    ws:// URL is advertised as a second endpoint). mediator_invitation_url: connect to that
    mediator at start-up and make it the default one. open_mediation: grant every mediation
    request (ACA-Py as a mediator). extra_args: appended to the command line."""

    def __init__(
        self,
        label: str,
        *,
        mediator_invitation_url: str | None = None,
        port: int | None = None,
        admin_port: int | None = None,
        ws_port: int | None = None,
        open_mediation: bool = False,
        log_level: str = "info",
        extra_args: Sequence[str] = (),
    ) -> None:
        self.label = label
        self.port = port or free_port()
        self.admin_port = admin_port or free_port()
        self.ws_port = ws_port
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.ws_endpoint = f"ws://127.0.0.1:{ws_port}" if ws_port else None
        self.admin = httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.admin_port}", timeout=30)
        self.mediator_invitation_url = mediator_invitation_url
        self.open_mediation = open_mediation
        self.log_level = log_level
        self.extra_args = list(extra_args)
        self.webhooks = Webhooks()
        self.home = tempfile.TemporaryDirectory(prefix=f"acapy-{label}-")
        self.log = Path(self.home.name) / "acapy.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at: float | None = None
        self.ready_after: float | None = None  # seconds from launch to /status/ready

    # -- process ------------------------------------------------------------------------

    def command(self, venv: Path) -> list[str]:
        endpoints = [self.endpoint] + ([self.ws_endpoint] if self.ws_endpoint else [])
        args = [
            str(venv / "bin" / "aca-py"),
            "start",
            "--label", self.label,
            "--inbound-transport", "http", "127.0.0.1", str(self.port),
            "--outbound-transport", "http",
            "--outbound-transport", "ws",
            "--endpoint", *endpoints,
            "--wallet-type", "askar",
            "--wallet-name", self.label,
            "--wallet-key", "interop-key",
            "--auto-provision",
            "--no-ledger",
            "--admin", "127.0.0.1", str(self.admin_port),
            "--admin-insecure-mode",
            "--webhook-url", self.webhooks.url,
            "--auto-accept-invites",
            "--auto-accept-requests",
            "--log-level", self.log_level,
        ]  # fmt: skip
        if self.ws_port:
            args += ["--inbound-transport", "ws", "127.0.0.1", str(self.ws_port)]
        if self.open_mediation:
            args += ["--open-mediation"]
        if self.mediator_invitation_url is not None:
            args += ["--mediator-invitation", self.mediator_invitation_url]
        return args + self.extra_args

    async def start(self, timeout: float = 120.0) -> None:  # noqa: ASYNC109
        await self.webhooks.start()
        venv = await asyncio.to_thread(acapy_install_dir)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ACAPY_")}
        # Its wallet and anything else it keeps under its home: a fresh folder per agent.
        env |= {"ACAPY_HOME": self.home.name, "HOME": self.home.name}
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(  # noqa: ASYNC220 (starting it does not block)
                self.command(venv), env=env, stdout=log, stderr=subprocess.STDOUT
            )
        self.started_at = time.monotonic()

        async def ready() -> bool:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                answer = await self.admin.get("/status/ready")
                return answer.status_code == 200 and bool(answer.json().get("ready"))
            return False

        await self.wait_for(ready, timeout, f"{self.label} not ready", interval=0.25)
        self.ready_after = time.monotonic() - self.started_at

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def stop(self) -> None:
        if self.running():
            assert self.proc is not None
            self.proc.terminate()
            try:
                await asyncio.to_thread(self.proc.wait, 15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                await asyncio.to_thread(self.proc.wait)
        await self.admin.aclose()
        if self.webhooks.task is not None:
            await self.webhooks.stop()
        self.home.cleanup()

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_text()[-chars:]

    async def wait_for(
        self,
        probe: Callable[[], Awaitable[T | None]],
        timeout: float,  # noqa: ASYNC109
        what: str,
        interval: float = 0.2,
    ) -> T:
        """Poll `probe` until it returns something truthy; fail with the log's tail (and
        at once when the process has exited)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise AcaPyError(
                    f"{what}: {self.label} exited ({self.proc.returncode})\n{self.log_tail()}"
                )
            result = await probe()
            if result:
                return result
            if loop.time() >= deadline:
                raise AcaPyError(f"{what} in {timeout} s\n{self.log_tail()}")
            await asyncio.sleep(interval)

    # -- admin API ----------------------------------------------------------------------

    async def get(self, path: str, **params: Any) -> Any:
        answer = await self.admin.get(path, params=params or None)
        if answer.status_code != 200:
            raise AcaPyError(f"GET {path}: {answer.status_code} {answer.text}\n{self.log_tail()}")
        return answer.json()

    async def post(self, path: str, body: dict[str, Any] | None = None, **params: Any) -> Any:
        answer = await self.admin.post(path, json=body or {}, params=params or None)
        if answer.status_code != 200:
            raise AcaPyError(f"POST {path}: {answer.status_code} {answer.text}\n{self.log_tail()}")
        return answer.json()

    # -- mediation (client side) ----------------------------------------------------------

    async def mediation_requests(self) -> list[dict[str, Any]]:
        """Its mediation records (client and, as a mediator, server role)."""
        return list((await self.get("/mediation/requests"))["results"])

    async def wait_mediation_granted(self, timeout: float = 60.0) -> dict[str, Any]:  # noqa: ASYNC109
        """The first granted mediation record: `endpoint` and `routing_keys` (did:key) are
        what the mediator's mediate-grant said."""

        async def granted() -> dict[str, Any] | None:
            for record in await self.mediation_requests():
                if record.get("state") == "granted":
                    return dict(record)
                if record.get("state") == "denied":
                    raise AcaPyError(f"mediation denied: {record}\n{self.log_tail()}")
            return None

        return await self.wait_for(granted, timeout, "mediation not granted")

    async def default_mediator(self) -> dict[str, Any] | None:
        answer = await self.admin.get("/mediation/default-mediator")
        return answer.json() if answer.status_code == 200 else None

    async def keylist(self) -> list[dict[str, Any]]:
        """The keys it registered with its mediator(s) (keylist-update answered `success`)."""
        return list((await self.get("/mediation/keylists", role="client"))["results"])

    # -- connections ----------------------------------------------------------------------

    async def create_invitation(
        self,
        handshake_protocols: Sequence[str] = (DIDEXCHANGE_1_1,),
        *,
        use_did_method: str | None = None,
        multi_use: bool = False,
    ) -> str:
        """An Out-of-Band invitation URL. With a default mediator (granted through
        `--mediator-invitation`) its inline service names the mediator's endpoint and routing
        key."""
        return str((await self.create_invitation_record(
            handshake_protocols, use_did_method=use_did_method, multi_use=multi_use
        ))["invitation_url"])  # fmt: skip

    async def create_invitation_record(
        self,
        handshake_protocols: Sequence[str] = (DIDEXCHANGE_1_1,),
        *,
        use_did_method: str | None = None,
        multi_use: bool = False,
    ) -> dict[str, Any]:
        """POST /out-of-band/create-invitation's answer: `invitation` (the OOB message),
        `invitation_url`, `oob_id`, `invi_msg_id`."""
        body: dict[str, Any] = {
            "handshake_protocols": list(handshake_protocols),
            "use_public_did": False,
        }
        if use_did_method:
            body["use_did_method"] = use_did_method
        answer = await self.post(
            "/out-of-band/create-invitation", body, multi_use=str(multi_use).lower()
        )
        return dict(answer)

    async def receive_invitation(self, invitation: str | dict[str, Any]) -> str:
        """Accept an OOB invitation (URL or message); returns the new connection's id. It
        sends its DID Exchange request at once (`--auto-accept-invites`)."""
        if isinstance(invitation, str):
            invitation = invitation_from_url(invitation)
        answer = await self.post("/out-of-band/receive-invitation", invitation)
        connection_id = answer.get("connection_id")
        if not connection_id:
            raise AcaPyError(f"no connection from invitation: {answer}\n{self.log_tail()}")
        return str(connection_id)

    async def connections(self) -> list[dict[str, Any]]:
        return list((await self.get("/connections"))["results"])

    async def connection(self, connection_id: str) -> dict[str, Any]:
        return dict(await self.get(f"/connections/{connection_id}"))

    async def wait_connection_active(
        self,
        connection_id: str,
        timeout: float = 60.0,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        async def active() -> dict[str, Any] | None:
            record = await self.connection(connection_id)
            if record.get("state") == "abandoned":
                raise AcaPyError(f"connection abandoned: {record}\n{self.log_tail()}")
            return record if record.get("state") in ("active", "completed") else None

        return await self.wait_for(active, timeout, f"connection {connection_id} not active")

    async def send_basic_message(self, connection_id: str, content: str) -> None:
        await self.post(f"/connections/{connection_id}/send-message", {"content": content})

    # -- webhooks -------------------------------------------------------------------------

    def events(self, topic: str | None = None) -> list[dict[str, Any]]:
        return [e for t, e in self.webhooks.events if topic is None or t == topic]

    def basic_messages(self) -> list[str]:
        """The contents of the basic messages it received, in arrival order."""
        return [e["content"] for e in self.events("basicmessages")]

    def basic_message_events(self) -> list[dict[str, Any]]:
        """Whole `basicmessages` events: connection_id, message_id, content, sent_time."""
        return self.events("basicmessages")

    async def wait_for_messages(self, count: int, timeout: float = 60.0) -> list[str]:  # noqa: ASYNC109
        """The basic messages received, once there are `count` of them (or at the timeout:
        the caller compares)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.basic_messages()) < count and loop.time() < deadline:
            self.webhooks.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.webhooks.changed.wait(), deadline - loop.time())
        return self.basic_messages()


def invitation_from_url(url: str) -> dict[str, Any]:
    """The OOB message in an invitation URL (`?oob=` base64url JSON; `?c_i=` too)."""
    query = parse_qs(urlparse(url).query)
    for name in ("oob", "c_i", "d_m"):
        if name in query:
            data = query[name][0]
            return dict(json.loads(base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))))
    raise ValueError(f"no invitation in {url}")


def invitation_to_url(base: str, invitation: dict[str, Any]) -> str:
    data = base64.urlsafe_b64encode(json.dumps(invitation).encode()).decode().rstrip("=")
    return f"{base}?oob={data}"
