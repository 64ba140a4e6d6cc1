"""What may disturb a measurement, read around it: Redis forking or fsyncing late, the
commands the servers' clients ran, and the CPU of the benchmark's processes, of this one
and of all others on the machine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis

from bench.harness.machine import CpuMeter

Since = Callable[[], Awaitable[dict[str, Any]]]


async def redis_counters(redis: Redis) -> dict[str, int]:
    """Counters that tell whether Redis forked or waited on the disk during a block, how
    many commands the servers' clients ran (`tot-cmds` of CLIENT LIST: a script call counts
    with every command it runs), how many script calls and how many PUBLISH there were."""
    info = await redis.info("all")
    names = ("total_forks", "aof_rewrites", "aof_delayed_fsync", "aof_rewrite_in_progress")
    out = {k: int(info[k]) for k in names if k in info}
    for cmd in ("publish", "evalsha"):
        stat = info.get(f"cmdstat_{cmd}")
        out[f"{cmd}_calls"] = int(stat["calls"]) if isinstance(stat, dict) else 0
    for client in await redis.client_list():
        if "tot-cmds" in client and not str(client.get("name", "")).startswith("bench-"):
            out[f"client:{client['id']}"] = int(client["tot-cmds"])
    return out


def client_commands(before: dict[str, int], after: dict[str, int]) -> int:
    """Commands the servers' clients ran between two `redis_counters()` (clients gone before
    the end are missed; the servers keep their pools open)."""
    return sum(v - before.get(k, 0) for k, v in after.items() if k.startswith("client:"))


def redis_events(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Forks (AOF rewrites) and fsyncs Redis ran late, between two `redis_counters()`."""
    names = ("total_forks", "aof_rewrites", "aof_delayed_fsync")
    return {name: after.get(name, 0) - before.get(name, 0) for name in names}


def disturbances(
    cpu: dict[str, float], machine: dict[str, dict[str, float]], events: dict[str, int]
) -> str:
    """What may have disturbed a phase, in brackets (empty when nothing did): other
    processes on the machine, time the host stole from a CPU, time spent waiting on the
    disk, Redis forking or fsyncing late."""
    notes = [f"OTHER PROCESSES {cpu['others']:.0%} cpu"] if cpu.get("others", 0) >= 0.1 else []
    for name, shares in machine.items():
        notes += [f"{name} {k} {shares[k]:.0%}" for k in ("steal", "iowait") if shares[k] >= 0.02]
    if events.get("total_forks"):
        notes.append(f"redis forked {events['total_forks']}x")
    if events.get("aof_delayed_fsync"):
        notes.append(f"aof delayed fsync {events['aof_delayed_fsync']}x")
    return f" [{', '.join(notes)}]" if notes else ""


async def watch(redis: Redis, pids: dict[str, int]) -> Since:
    """Start watching `pids`, this process and the machine; await the function returned
    for their CPU use and the disturbances since."""
    counters0 = await redis_counters(redis)
    meter = CpuMeter(pids)

    async def since() -> dict[str, Any]:
        cpu, machine = meter.shares(), meter.machine()
        events = redis_events(counters0, await redis_counters(redis))
        return {"cpu": cpu, "machine": machine, "redis": events}

    return since
