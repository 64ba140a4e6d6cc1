"""The subscribed connections of a deployment (its one server, or each cluster node): to cut
one node's wake-up subscription and no other."""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from mediator.storage.clients import Backend


def servers(backend: Backend) -> list[Redis]:
    """Every server a subscription may be on: the one, or each node of a cluster."""
    client = backend.client
    if isinstance(client, RedisCluster):
        return [backend.pinned_at(n.host, int(n.port)) for n in client.get_nodes()]
    return [client]


async def subscribers(backend: Backend) -> set[tuple[int, str]]:
    """The subscribed connections: (server index, client id)."""
    found = set()
    for i, server in enumerate(servers(backend)):
        found |= {(i, str(c["id"])) for c in await server.client_list(_type="pubsub")}
    return found


async def cut(backend: Backend, subscriber: tuple[int, str]) -> None:
    server, client_id = subscriber
    assert await servers(backend)[server].client_kill_filter(_id=client_id) == 1
