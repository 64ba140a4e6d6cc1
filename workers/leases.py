"""Which upkeep partitions this worker holds: one script call renews its heartbeat, keeps its
share of the leases (ceil(partitions / live workers)), takes free ones and gives up the
rest. A worker that dies stops renewing, and its partitions go to the others when the leases
run out; only a lease holder touches a partition's shards, so each job runs once."""

from __future__ import annotations

import asyncio
import contextlib

from mediator.engine import keys
from mediator.engine.replies import held_partitions
from mediator.engine.scripts import Scripts


class Leases:
    def __init__(self, scripts: Scripts, worker_id: str, partitions: int, lease_ms: int) -> None:
        self.scripts = scripts
        self.worker_id = worker_id
        self.partitions = partitions
        self.lease_ms = lease_ms
        self.held: list[int] = []
        self._balancing: asyncio.Future[list[int]] | None = None

    async def balance(self) -> tuple[list[int], list[int]]:
        """Renew and rebalance: (partitions gained, partitions lost) since the last call.

        The call runs on even if the worker is stopped meanwhile, and `release` waits for
        it: a balance that Redis ran after the release would take the leases back."""
        self._balancing = asyncio.ensure_future(self._call("balance"))
        now_held = await asyncio.shield(self._balancing)
        gained = [p for p in now_held if p not in self.held]
        lost = [p for p in self.held if p not in now_held]
        self.held = now_held
        return gained, lost

    async def release(self) -> None:
        """Give every lease up (compare-and-delete: a lease another worker took is kept)."""
        if self._balancing is not None and not self._balancing.done():
            with contextlib.suppress(Exception):
                await self._balancing
        await self._call("release")
        self.held = []

    async def _call(self, op: str) -> list[int]:
        return held_partitions(
            await self.scripts.call(
                "leases",
                [keys.workers(), keys.leases()],
                [self.worker_id, self.lease_ms, self.partitions, op],
            )
        )
