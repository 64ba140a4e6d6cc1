"""A real ACA-Py agent (PyPI acapy-agent, in its own Python 3.13 environment) as a mediation
client: started with `--mediator-invitation`, observed through its admin API, and its basic
messages collected from its webhooks by a small HTTP receiver in the test's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import tempfile
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


def acapy_install_dir() -> Path:
    return installed("acapy")


class AcaPyError(Exception):
    pass


class Webhooks(LocalServer):
    """Where ACA-Py posts its events (`/topic/<topic>/`)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.changed = asyncio.Event()
        super().__init__(Starlette(routes=[Route("/topic/{topic}/", self._take, methods=["POST"])]))

    async def _take(self, request: Request) -> Response:
        self.events.append((request.path_params["topic"], await request.json()))
        self.changed.set()
        return Response(status_code=200)


class AcaPyAgent:
    def __init__(self, label: str, *, mediator_invitation_url: str | None = None) -> None:
        self.label = label
        self.port = free_port()
        self.admin_port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.admin = httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.admin_port}", timeout=30)
        self.mediator_invitation_url = mediator_invitation_url
        self.webhooks = Webhooks()
        self.home = tempfile.TemporaryDirectory(prefix=f"acapy-{label}-")
        self.log = Path(self.home.name) / "acapy.log"
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self, timeout: float = 120.0) -> None:  # noqa: ASYNC109
        await self.webhooks.start()
        venv = await asyncio.to_thread(acapy_install_dir)
        args = [
            str(venv / "bin" / "aca-py"),
            "start",
            "--label", self.label,
            "--inbound-transport", "http", "127.0.0.1", str(self.port),
            "--outbound-transport", "http",
            "--outbound-transport", "ws",
            "--endpoint", self.endpoint,
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
            "--log-level", "debug",  # what happened to each message, should a test fail
        ]  # fmt: skip
        if self.mediator_invitation_url is not None:
            args += ["--mediator-invitation", self.mediator_invitation_url]
        # Its wallet lives under $HOME: a fresh one per agent, removed with it.
        env = {**os.environ, "HOME": self.home.name}
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(  # noqa: ASYNC220 (starting it does not block)
                args, env=env, stdout=log, stderr=subprocess.STDOUT
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

    async def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        answer = await self.admin.post(path, json=body or {})
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

    def basic_messages(self) -> list[str]:
        return [e["content"] for topic, e in self.webhooks.events if topic == "basicmessages"]

    async def wait_for_messages(self, count: int, timeout: float = 60.0) -> list[str]:  # noqa: ASYNC109
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.basic_messages()) < count and loop.time() < deadline:
            self.webhooks.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.webhooks.changed.wait(), deadline - loop.time())
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

    async def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                await asyncio.to_thread(self.proc.wait, 15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                await asyncio.to_thread(self.proc.wait)
        await self.admin.aclose()
        await self.webhooks.stop()
        self.home.cleanup()
