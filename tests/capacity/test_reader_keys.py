"""The snapshot reader builds key names from the shard it is reading instead of hashing
every name again: they must be the engine's own (mediator/engine/keys.py)."""

from __future__ import annotations

import pytest

from mediator.engine import keys
from mediator.engine.snapshot import PageQueue
from spark.source.reader import _Queue


@pytest.mark.parametrize(
    ("namespace", "name"),
    [("didcomm", "3Fq9vVkZ1c7Rr1s8yZyB2sB4hGqgY6QmHkL5Q7aXhS2k"), ("mqs", "jobs")],
)
def test_reader_keys_are_the_engines(namespace: str, name: str) -> None:
    qualified = f"{namespace}:{name}"
    k = keys.queue_keys(qualified)
    q = _Queue(PageQueue.of(k.shard, namespace, name, True), "x", True)
    expected = [k.cfg, k.stream, k.inflight, k.receives, k.delayed, k.delayed_bodies, k.refs,
                k.outbox]  # fmt: skip
    assert q.page.script_keys[:8] == expected
    memory = [*k.own]
    if namespace == keys.DIDCOMM_NAMESPACE:
        conn = keys.connection_keys(name)
        assert q.page.script_keys[8] == conn.presence
        memory += [conn.presence, conn.threads, conn.threads_before, conn.device]
    assert q.memory_keys == memory
