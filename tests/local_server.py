"""A Starlette app served by uvicorn inside the test's event loop, on a free loopback port:
what stands in for an agent's own HTTP endpoint or webhook receiver."""

from __future__ import annotations

import asyncio

import uvicorn
from starlette.applications import Starlette

from mediator.embedded import free_port


class LocalServer:
    def __init__(self, app: Starlette) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(self.server.serve())
        while not self.server.started:  # noqa: ASYNC110 (uvicorn offers no event for it)
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.task is not None:
            await self.task
