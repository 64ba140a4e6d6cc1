"""What the scale and capacity benchmarks read from Redis itself: memory (settled
used_memory, and MEMORY USAGE by key shape), the commands it ran over a window (INFO
commandstats, per process from CLIENT LIST, as sent from MONITOR), and how evenly a
cluster's primaries share the keys and bytes."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from bench.support.bulk_load import Plan
from mediator.engine import keys
from mediator.engine.model import QueueRef
from mediator.engine.scripts import NAMES, sha, source

SETTLE_S = 1.2
NS = keys.DIDCOMM_NAMESPACE


async def load_scripts(redis: Redis) -> None:
    """Every script in the server's cache, so memory deltas do not count them."""
    for name in NAMES:
        await redis.script_load(source(name))


async def used_memory(redis: Redis, settle: float = SETTLE_S) -> dict[str, int]:
    """used_memory (median of 3 readings after `settle` s, with no AOF rewrite running),
    and the dataset and client buffers beside it."""
    for _ in range(600):  # a rewrite forks and changes nothing in used_memory, but wait
        if not int((await redis.info("persistence"))["aof_rewrite_in_progress"]):
            break
        await asyncio.sleep(0.5)
    await asyncio.sleep(settle)
    readings = []
    for _ in range(3):
        readings.append(await redis.info("memory"))
        await asyncio.sleep(0.05)
    out = {}
    for name in ("used_memory", "used_memory_dataset", "mem_clients_normal", "used_memory_rss"):
        out[name] = int(statistics.median(int(r.get(name, 0)) for r in readings))
    return out


async def rewrite_aof(redis: Redis) -> float:
    """Rewrite the append-only file now and wait for it (seconds taken): a rewrite forks the
    server, and one that starts in a measured block (the load grew the file past its
    auto-rewrite size) slows every write to a page not yet copied."""
    started = time.monotonic()
    with contextlib.suppress(ResponseError):  # one already under way: wait for it
        await redis.bgrewriteaof()
    for _ in range(2400):
        info = await redis.info("persistence")
        if not int(info["aof_rewrite_in_progress"]) and not int(info["aof_rewrite_scheduled"]):
            break
        await asyncio.sleep(0.25)
    return time.monotonic() - started


# --------------------------------------------------------------------------- by key shape


@dataclass
class Shape:
    """One key shape: how many keys, and the bytes MEMORY USAGE gives them in all."""

    name: str
    keys: int
    bytes: float
    sampled: int  # keys actually measured (the total is scaled from them)
    per: str  # what the shape is divided by: "recipient" or "message"

    def to_json(self) -> dict[str, Any]:
        return {
            "keys": self.keys,
            "bytes": round(self.bytes),
            "sampled": self.sampled,
            "per": self.per,
        }


async def _usage(redis: Redis, names: list[str]) -> list[int]:
    out: list[int] = []
    for start in range(0, len(names), 500):
        pipe = redis.pipeline(transaction=False)
        for name in names[start : start + 500]:
            pipe.memory_usage(name, samples=0)
        out += [int(v or 0) for v in await pipe.execute()]
    return out


async def shapes(redis: Redis, plan: Plan, sample: int) -> list[Shape]:
    """MEMORY USAGE per key shape of a loaded plan: per-recipient keys from `sample`
    recipients (scaled to all), the shared ones (shard and bucket hashes) all of them."""
    rng = random.Random(7)
    n = plan.recipients
    picks = sorted(rng.sample(range(n), min(sample, n)))
    idle = [i for i in picks if not plan.messages(i)]
    busy = [i for i in picks if plan.messages(i)]
    with_messages = sum(1 for i in range(n) if plan.messages(i))
    out: list[Shape] = []

    def record(i: int) -> str:
        return keys.connection_keys(plan.wallet(i).verkey_b58).record

    if idle:
        sizes = await _usage(redis, [record(i) for i in idle])
        per = statistics.fmean(sizes)
        out.append(Shape("q:{S}:didcomm:V (record)", n, per * n, len(idle), "recipient"))
    if busy:
        sizes = await _usage(redis, [record(i) for i in busy])
        idle_size = out[0].bytes / n if out else 0.0
        extra = (statistics.fmean(sizes) - idle_size) * with_messages
        out.append(
            Shape("record fields of a queue holding messages", 0, extra, len(busy), "message")
        )
        queues = [keys.queue_keys(QueueRef(NS, plan.wallet(i).verkey_b58).qualified) for i in busy]
        for label, names in (
            ("q:{S}:didcomm:V:s (stream)", [q.stream for q in queues]),
            ("q:{S}:didcomm:V:id (ids)", [q.ids for q in queues]),
        ):
            sizes = await _usage(redis, names)
            total = statistics.fmean(sizes) * with_messages
            out.append(Shape(label, with_messages, total, len(busy), "message"))
    buckets, shards = range(keys.BUCKETS), range(keys.SHARDS)
    shared = [
        ("d:{r<B>}:r (routes bucket)", [keys.routes_bucket_at(b) for b in buckets], "recipient"),
        ("d:{o<B>}:o (our keys bucket)", [keys.ours_bucket_at(b) for b in buckets], "recipient"),
        ("x:{S}:reg:didcomm (registry)", [keys.shard_registry(s, NS) for s in shards], "recipient"),
        ("x:{S}:tot:didcomm (totals)", [keys.shard_totals(s, NS) for s in shards], "recipient"),
        ("x:{S}:old:didcomm (oldest)", [keys.shard_oldest(s, NS) for s in shards], "message"),
        ("x:{S}:due (schedule)", [keys.shard_due(s) for s in shards], "message"),
    ]
    for label, names, per_what in shared:
        sizes = await _usage(redis, names)
        present = sum(1 for s in sizes if s)
        out.append(Shape(label, present, float(sum(sizes)), present, per_what))
    return out


# --------------------------------------------------------------------------- commands


@dataclass
class Commands:
    """INFO commandstats and the processed-commands counter at one moment."""

    calls: dict[str, int] = field(default_factory=dict)
    usec: dict[str, int] = field(default_factory=dict)
    processed: int = 0
    cpu: float = 0.0  # used_cpu_sys + used_cpu_user


async def commands(redis: Redis) -> Commands:
    stats = await redis.info("commandstats")
    info = await redis.info("all")
    out = Commands(processed=int(info["total_commands_processed"]))
    out.cpu = float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
    for name, row in stats.items():
        command = name.removeprefix("cmdstat_")
        out.calls[command] = int(row["calls"])
        out.usec[command] = int(row["usec"])
    return out


@dataclass
class CommandRates:
    """Commands per second over a window, as Redis counts them (a script call counts once
    as EVALSHA and once more for every command it runs), by command."""

    seconds: float
    total: float  # all commands per second
    by_command: dict[str, float]  # per second, the busiest first
    usec_per_second: float  # time Redis spent in commands, microseconds per second

    @property
    def scripts(self) -> float:
        return self.by_command.get("evalsha", 0.0) + self.by_command.get("eval", 0.0)

    def top(self, count: int = 8) -> str:
        return ", ".join(f"{k} {v:,.1f}" for k, v in list(self.by_command.items())[:count])

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 2),
            "commands_per_second": round(self.total, 2),
            "script_calls_per_second": round(self.scripts, 2),
            "usec_in_commands_per_second": round(self.usec_per_second, 1),
            "by_command_per_second": {k: round(v, 3) for k, v in self.by_command.items()},
        }


# Commands the benchmark itself sends to read the figures (not the servers' load).
OURS = ("info", "config|resetstat", "memory|usage", "client|list")


def rates(before: Commands, after: Commands, seconds: float) -> CommandRates:
    by = {
        k: (v - before.calls.get(k, 0)) / seconds
        for k, v in after.calls.items()
        if v != before.calls.get(k, 0) and k not in OURS
    }
    usec = sum(v - before.usec.get(k, 0) for k, v in after.usec.items() if k not in OURS)
    ordered = dict(sorted(by.items(), key=lambda kv: -kv[1]))
    return CommandRates(seconds, sum(ordered.values()), ordered, usec / seconds)


# --------------------------------------------------------------------------- a cluster


@dataclass
class Balance:
    """Keys and bytes per primary of a cluster, and max/mean of each."""

    keys: list[int]
    bytes: list[int]  # used_memory minus each primary's own before the load
    slots: list[int]

    @staticmethod
    def spread(values: list[int]) -> float:
        mean = statistics.fmean(values)
        return max(values) / mean if mean else float("nan")

    def to_json(self) -> dict[str, Any]:
        return {
            "keys": self.keys,
            "bytes": self.bytes,
            "slots": self.slots,
            "keys_max_over_mean": round(self.spread(self.keys), 4),
            "bytes_max_over_mean": round(self.spread(self.bytes), 4),
        }


async def primary_memory(clients: list[Redis]) -> list[int]:
    return [(await used_memory(c, settle=0.5))["used_memory"] for c in clients]


async def balance(clients: list[Redis], baseline: list[int]) -> Balance:
    sizes = [int(await c.dbsize()) for c in clients]
    memory = await primary_memory(clients)
    slots = []
    for c in clients:
        me = (await c.execute_command("CLUSTER", "MYID")).decode()  # type: ignore[no-untyped-call]
        owned = 0
        table = await c.execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
        for start, end, primary, *_ in table:
            if primary[2].decode() == me:
                owned += end - start + 1
        slots.append(owned)
    return Balance(sizes, [m - b for m, b in zip(memory, baseline, strict=True)], slots)


# --------------------------------------------------------------------------- per process


def local_ports(pid: int) -> set[int]:
    """The local TCP ports of a process's sockets (from /proc), to find its Redis
    connections in CLIENT LIST."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/net/{table}") as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


async def client_commands(redis: Redis, pids: dict[str, int]) -> dict[str, dict[int, int]]:
    """Per process: its Redis connections (client id -> commands run so far, a script call
    counting with every command it runs: `tot-cmds` of CLIENT LIST)."""
    ports = {name: local_ports(pid) for name, pid in pids.items()}
    out: dict[str, dict[int, int]] = {name: {} for name in pids}
    for client in await redis.client_list():
        port = int(str(client.get("addr", ":0")).rsplit(":", 1)[1])
        for name, owned in ports.items():
            if port in owned and "tot-cmds" in client:
                out[name][int(client["id"])] = int(client["tot-cmds"])
    return out


def process_rates(
    before: dict[str, dict[int, int]], after: dict[str, dict[int, int]], seconds: float
) -> dict[str, float]:
    """Commands per second each process had Redis run (connections made meanwhile count
    from zero; those closed meanwhile are missed)."""
    return {
        name: sum(n - before.get(name, {}).get(cid, 0) for cid, n in conns.items()) / seconds
        for name, conns in after.items()
    }


def script_names() -> dict[str, str]:
    """SHA -> script name, as the files read now and as this process first read them
    (nodes started at another moment may run another version of the scripts)."""
    fresh = {hashlib.sha1(source.__wrapped__(n).encode()).hexdigest(): n for n in NAMES}
    return {sha(n): n for n in NAMES} | fresh


async def top_level(
    redis: Redis, seconds: float, pids: dict[str, int]
) -> dict[str, dict[str, float]]:
    """What each process sends Redis, per second, over `seconds` of MONITOR: commands as
    the process sent them (a script call is one, named by its script), not the commands
    scripts run inside. MONITOR costs Redis time: never inside a measured window."""
    ports = {port: name for name, pid in pids.items() for port in local_ports(pid)}
    scripts = script_names()
    seen: dict[str, dict[str, int]] = {name: {} for name in pids}
    seconds_now, micros = await redis.time()
    start = seconds_now + micros / 1e6
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds + 5), redis.monitor() as monitor:
            async for line in monitor.listen():
                if float(line["time"]) >= start + seconds:
                    break
                if line.get("client_type") == "lua":
                    continue
                name = ports.get(int(line.get("client_port") or 0))
                if name is None:
                    continue
                words = str(line["command"]).split(" ", 2)
                what = words[0]
                if what in ("EVALSHA", "EVAL") and len(words) > 1:
                    what = f"{what} {scripts.get(words[1], words[1][:8])}"
                seen[name][what] = seen[name].get(what, 0) + 1
    return {
        name: dict(sorted(((k, v / seconds) for k, v in counts.items()), key=lambda kv: -kv[1]))
        for name, counts in seen.items()
    }


def fmt_top_level(rates_: dict[str, dict[str, float]]) -> str:
    parts = []
    for name, counts in rates_.items():
        total = sum(counts.values())
        top = ", ".join(f"{k} {v:,.1f}" for k, v in list(counts.items())[:6])
        parts.append(f"{name} {total:,.1f}/s" + (f" ({top})" if top else ""))
    return "; ".join(parts)
