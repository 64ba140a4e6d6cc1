"""The real app in the test's own process, for the fast tier: `create_app` with its lifespan
run (the runtime, the WakeHub, the in-process worker: everything `mediator serve` starts but
uvicorn), reached through httpx's ASGI transport. Two of them on one Redis are two nodes of
a cluster: each has its own node id, connections and pub/sub channel."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from asgi_lifespan import LifespanManager

from mediator.app import create_app
from mediator.settings import Settings

# What the tests' nodes change from the defaults: a quick upkeep worker, fresh totals.
QUICK_WORKER = {"worker_tick_seconds": 0.2, "stats_seconds": 1.0}


class AppNode:
    """One node's app, started in this process; `client()` talks to it."""

    def __init__(self, redis_url: str, name: str = "app", **settings: Any) -> None:
        self.settings = Settings(node_id=f"{name}-{uuid.uuid4().hex[:6]}", **settings)
        self.app = create_app(self.settings, redis_url)
        self.base = f"http://{name}.inprocess"
        self._lifespan = LifespanManager(self.app, startup_timeout=30, shutdown_timeout=30)

    async def start(self) -> AppNode:
        await self._lifespan.__aenter__()
        return self

    async def stop(self) -> None:
        await self._lifespan.__aexit__(None, None, None)

    def client(self, timeout: float = 90) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.app, client=("127.0.0.1", 40000))
        return httpx.AsyncClient(transport=transport, base_url=self.base, timeout=timeout)
