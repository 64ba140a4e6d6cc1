"""A real ACA-Py agent (PyPI acapy-agent, in its own Python 3.13 environment), driven through
its admin API, with its basic messages collected from its webhooks by a small HTTP receiver in
the test's event loop.

By default a mediation client (`--mediator-invitation`) or a plain peer with its own HTTP
endpoint, its wallet in a temporary home removed when it stops. Given a `home`, its wallet
(Askar on SQLite, `<home>/.acapy_agent/wallet/<wallet name>/sqlite.db`) and its ports outlive
`stop()`, and `start()` again carries on from that wallet: same DIDs, connections and
mediator. Subclasses change the command line (tests/interop/old_acapy.py runs it as a
mediator)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import subprocess
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mediator.embedded import free_port
from tests.interop.installs import installed
from tests.local_server import LocalServer

# Loggers whose lines `log_tail` leaves out (each line: date, time, logger, level, text).
NOISE = (
    "aiohttp.access",
    "aries_askar.",
    "acapy_agent.admin.",
    "acapy_agent.anoncreds.",
    "acapy_agent.core.event_bus",
    "acapy_agent.resolver.",
    "acapy_agent.utils.classloader",
    "acapy_agent.wallet.askar",
)
# Connection states (ACA-Py's RFC 0160 `state`, RFC 0023 `rfc23_state`) a message can go over.
READY = ("active", "completed")


def acapy_install_dir() -> Path:
    return installed("acapy")


class AcaPyError(Exception):
    pass


class Webhooks(LocalServer):
    """Where ACA-Py posts its events (`/topic/<topic>/`), appended to `events`."""

    def __init__(self, events: list[tuple[str, dict[str, Any]]], changed: asyncio.Event) -> None:
        self.events = events
        self.changed = changed
        super().__init__(Starlette(routes=[Route("/topic/{topic}/", self._take, methods=["POST"])]))

    async def _take(self, request: Request) -> Response:
        self.events.append((request.path_params["topic"], await request.json()))
        self.changed.set()
        return Response(status_code=200)


def invitation_of(url: str) -> dict[str, Any]:
    """The Out-of-Band invitation an invitation URL carries (`?oob=`, base64url)."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    [encoded] = query["oob"]
    return dict(json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))))


class AcaPyAgent:
    def __init__(
        self,
        label: str,
        *,
        mediator_invitation_url: str | None = None,
        home: Path | None = None,
        port: int | None = None,
        wallet_name: str | None = None,
        wallet_key: str = "interop-key",
    ) -> None:
        """`home`: where its wallet and log live, kept after `stop()` (default: a temporary
        folder removed by `stop()`). `port`: its HTTP endpoint's port, kept across restarts
        (what its mediator pushes to). The wallet is named `wallet_name` (default: the
        label)."""
        self.label = label
        self.port = port or free_port()
        self.admin_port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.mediator_invitation_url = mediator_invitation_url
        self.wallet_name = wallet_name or label
        self.wallet_key = wallet_key
        self._temporary: tempfile.TemporaryDirectory[str] | None = None
        if home is None:
            self._temporary = tempfile.TemporaryDirectory(prefix=f"acapy-{label}-")
            home = Path(self._temporary.name)
        self.home = home
        self.home.mkdir(parents=True, exist_ok=True)
        self.log = self.home / "acapy.log"
        # Events of every run, so that a restarted agent still shows what came before.
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.changed = asyncio.Event()
        self.webhooks: Webhooks | None = None
        self.admin = self._admin_client()
        self.proc: subprocess.Popen[bytes] | None = None

    def _admin_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.admin_port}", timeout=30)

    @property
    def store_path(self) -> Path:
        """Its Askar SQLite file."""
        return self.home / ".acapy_agent" / "wallet" / self.wallet_name / "sqlite.db"

    @property
    def store_uri(self) -> str:
        return f"sqlite://{self.store_path}"

    # The command line, in parts a subclass may replace.

    def transport_args(self) -> list[str]:
        return [
            "--inbound-transport", "http", "127.0.0.1", str(self.port),
            "--outbound-transport", "http",
            "--outbound-transport", "ws",
            "--endpoint", self.endpoint,
        ]  # fmt: skip

    def wallet_args(self) -> list[str]:
        return [
            "--wallet-type", "askar",
            "--wallet-name", self.wallet_name,
            # One argument: a random key may begin with "-", which argparse takes for a flag.
            f"--wallet-key={self.wallet_key}",
            "--auto-provision",
        ]  # fmt: skip

    def role_args(self) -> list[str]:
        args = ["--auto-accept-invites", "--auto-accept-requests"]
        if self.mediator_invitation_url is not None:
            args += ["--mediator-invitation", self.mediator_invitation_url]
        return args

    def command(self, webhook_url: str) -> list[str]:
        return [
            str(acapy_install_dir() / "bin" / "aca-py"),
            "start",
            "--label", self.label,
            *self.transport_args(),
            *self.wallet_args(),
            "--no-ledger",
            "--admin", "127.0.0.1", str(self.admin_port),
            "--admin-insecure-mode",
            "--webhook-url", webhook_url,
            *self.role_args(),
            "--log-level", "debug",  # what happened to each message, should a test fail
        ]  # fmt: skip

    async def start(self, timeout: float = 120.0) -> None:  # noqa: ASYNC109
        """Start it (again, after `stop()`: from the same home, wallet and ports)."""
        if self.proc is not None and self.proc.poll() is None:
            raise AcaPyError(f"{self.label} is running")
        await asyncio.to_thread(acapy_install_dir)
        if self.admin.is_closed:
            self.admin = self._admin_client()
        self.webhooks = Webhooks(self.events, self.changed)
        await self.webhooks.start()
        # Its wallet lives under $HOME (.acapy_agent/wallet/<name>).
        env = {**os.environ, "HOME": str(self.home)}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(  # noqa: ASYNC220 (starting it does not block)
                self.command(self.webhooks.url), env=env, stdout=log, stderr=subprocess.STDOUT
            )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if self.proc.poll() is not None:
                raise AcaPyError(f"{self.label} exited\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                answer = await self.admin.get("/status/ready")
                if answer.status_code == 200 and answer.json().get("ready"):
                    return
            await asyncio.sleep(0.1)
        raise AcaPyError(f"{self.label} not ready in {timeout} s\n{self.log_tail()}")

    async def get(self, path: str) -> Any:
        answer = await self.admin.get(path)
        if answer.status_code != 200:
            raise AcaPyError(f"GET {path}: {answer.status_code} {answer.text}\n{self.log_tail()}")
        return answer.json()

    async def post(self, path: str, body: dict[str, Any] | None = None, **params: str) -> Any:
        answer = await self.admin.post(path, json=body or {}, params=params)
        if answer.status_code != 200:
            raise AcaPyError(f"POST {path}: {answer.status_code} {answer.text}\n{self.log_tail()}")
        return answer.json()

    async def wait_mediation_granted(self, timeout: float = 60.0) -> dict[str, Any]:  # noqa: ASYNC109
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            for record in (await self.get("/mediation/requests"))["results"]:
                if record.get("state") == "granted":
                    return dict(record)
            await asyncio.sleep(0.1)
        raise AcaPyError(f"mediation not granted in {timeout} s\n{self.log_tail()}")

    async def create_invitation(self) -> str:
        """An Out-of-Band invitation (DID Exchange) routed through its default mediator."""
        answer = await self.post(
            "/out-of-band/create-invitation",
            {
                "handshake_protocols": ["https://didcomm.org/didexchange/1.1"],
                "use_public_did": False,
            },
        )
        return str(answer["invitation_url"])

    async def receive_invitation(self, url: str, timeout: float = 60.0) -> str:  # noqa: ASYNC109
        """Accept an Out-of-Band invitation; the connection's id once it is ready for
        messages (what CredoAgent.receive_invitation answers too)."""
        record = await self.post(
            "/out-of-band/receive-invitation", invitation_of(url), auto_accept="true"
        )
        connection_id = str(record["connection_id"])
        await self.wait_connection(connection_id, timeout)
        return connection_id

    async def connections(self) -> list[dict[str, Any]]:
        return list((await self.get("/connections"))["results"])

    async def wait_connection(
        self,
        connection_id: str | None = None,
        timeout: float = 60.0,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        """That connection (or, without an id, any but its mediator's) once it is ready."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        mediators = set()
        if connection_id is None:
            mediators = {
                r["connection_id"] for r in (await self.get("/mediation/requests"))["results"]
            }
        while loop.time() < deadline:
            for record in await self.connections():
                if connection_id not in (None, record["connection_id"]):
                    continue
                if record["connection_id"] in mediators:
                    continue
                if record.get("state") in READY or record.get("rfc23_state") in READY:
                    return record
            await asyncio.sleep(0.1)
        raise AcaPyError(
            f"{self.label}: connection {connection_id or '(any)'} not ready in {timeout} s\n"
            f"{self.log_tail()}"
        )

    async def send(self, connection_id: str, content: str) -> None:
        await self.post(f"/connections/{connection_id}/send-message", {"content": content})

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The basic messages received (webhook bodies: `content`, `connection_id`, ...)."""
        return [event for topic, event in self.events if topic == "basicmessages"]

    def basic_messages(self) -> list[str]:
        return [m["content"] for m in self.messages]

    async def wait_for_messages(self, count: int, timeout: float = 60.0) -> list[str]:  # noqa: ASYNC109
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.basic_messages()) < count and loop.time() < deadline:
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), deadline - loop.time())
        return self.basic_messages()

    def log_tail(self, chars: int = 6000) -> str:
        """The end of ACA-Py's log without its noise: the admin API's requests (the tests
        poll it), Askar's queries, the revocation middleware, the event bus, the resolver
        and the class loader. What is left says what ACA-Py received, which handler ran and
        what it sent, with every warning and error."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        kept = [line[:300] for line in text.splitlines() if not line.startswith(NOISE, 24)]
        return "\n".join(kept)[-chars:]

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def stop(self) -> None:
        """Stop the process (SIGTERM: ACA-Py closes its wallet) and the webhook receiver. A
        temporary home is removed; a given one stays for `start()`."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                await asyncio.to_thread(self.proc.wait, 15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                await asyncio.to_thread(self.proc.wait)
        await self.admin.aclose()
        if self.webhooks is not None:
            await self.webhooks.stop()
            self.webhooks = None
        if self._temporary is not None:
            self._temporary.cleanup()
