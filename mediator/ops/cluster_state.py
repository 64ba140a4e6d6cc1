"""What every node's /metrics tells of the whole deployment, read at scrape time: the Redis
primaries' memory against their limit, whether the upkeep partitions have live workers,
and how many senders are refused for what they have queued.

A few commands per scrape whatever the number of queues: TIME, the lease hash (one field
per partition), the worker set, the refused senders' count, and INFO memory from each
primary.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from redis.asyncio import Redis
from redis.asyncio.sentinel import SentinelConnectionPool

from mediator.engine import keys
from mediator.engine.leases import Lease
from mediator.storage.clients import Backend, RedisClient

READ_SECONDS = 2.0  # a scrape waits no longer for Redis


@dataclass(frozen=True)
class ServerMemory:
    server: str  # host:port of the primary, or "primary" when Sentinel hides it
    used_bytes: int
    max_bytes: int  # 0: no limit


@dataclass(frozen=True)
class ClusterState:
    workers: int  # live workers (heartbeat not expired)
    partitions_leased: int  # partitions some live worker holds an unexpired lease on
    memory: list[ServerMemory] = field(default_factory=list)
    senders_refused: int = 0  # listed over --limit-sender-queued-bytes (mediation/senders.py)


async def read(backend: Backend, partitions: int) -> ClusterState:
    """The deployment as Redis sees it now; raises what a storage call raises."""
    async with asyncio.timeout(READ_SECONDS):
        redis = backend.client
        now_ms = await _now_ms(redis)
        workers = await redis.zcount(keys.workers(), now_ms, "+inf")
        leases = await redis.hgetall(keys.leases())
        leased = sum(
            1 for p, v in leases.items() if int(p) < partitions and Lease.parse(v).live(now_ms)
        )
        memory = [await _memory(client) for client in backend.primaries()]
        refused = await redis.zcount(keys.senders_over(), now_ms, "+inf")
    return ClusterState(int(workers), leased, memory, int(refused))


async def _now_ms(redis: RedisClient) -> int:
    seconds, micros = await redis.time()
    return int(seconds) * 1000 + int(micros) // 1000


async def _memory(client: Redis) -> ServerMemory:
    info = await client.info("memory")
    pool = client.connection_pool
    kwargs = pool.connection_kwargs
    if isinstance(pool, SentinelConnectionPool):  # it finds the primary per connection
        server = "primary"
    elif kwargs.get("path"):
        server = str(kwargs["path"])
    else:
        server = f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
    return ServerMemory(server, int(info.get("used_memory", 0)), int(info.get("maxmemory", 0)))
