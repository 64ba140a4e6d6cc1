"""What counting a sender's queued bytes costs Redis (--limit-sender-queued-bytes).

A forwarded message from a counted sender is stored with its tag, and each script that
stores or removes it also updates the queue's tally and the shard's pending changes, which
a worker adds to the sender's count (mediator/mediation/senders.py). This measures that
cost where it is paid, on the Redis server (one thread, the cluster's bottleneck), against
an anchor measured in the same run: the same messages without a tag (as from an exempt
address, or with the limit off).

One cycle: a 1 KiB message sent to one of --queues DIDComm queues, received and
acknowledged. Blocks of --cycles cycles alternate between the anchor (no tag) and the
subject (one of --senders tags; the block ends with the workers' settle of every shard,
counted in the subject's cost). For each pair: the server's CPU time per cycle (INFO's
used_cpu_user + used_cpu_sys) and the cycles a second, subject / anchor. Then the memory
they keep: --memory-messages messages of 1 KiB left queued over the queues, without and
then with tags (used_memory after / before, per message). Prints the median ratios;
results go to bench/results/sender-bytes-<timestamp>.json.

    python bench/sender_bytes_bench.py --help
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness.cli import RESULTS
from mediator.embedded import EmbeddedServer
from mediator.engine import Engine, QueueConfig, QueueRef, SendMessage, keys
from mediator.mediation.senders import SenderBooks
from mediator.settings import Settings
from mediator.storage.clients import Backend

CONFIG = QueueConfig(retention_ms=3_600_000, visibility_timeout_ms=30_000)


def server_cpu(info: dict[str, Any]) -> float:
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def block(
    engine: Engine, books: SenderBooks | None, refs: list[QueueRef], tags: list[str], n: int
) -> tuple[float, float]:
    """n cycles, 16 at once; (server CPU seconds per cycle, cycles a second)."""
    redis = engine.redis
    body = random.randbytes(1024)
    before, started = server_cpu(await redis.info("cpu")), time.perf_counter()

    async def cycle(i: int) -> None:
        ref = refs[i % len(refs)]
        tag = tags[i % len(tags)] if tags else ""
        await engine.send(ref, [SendMessage(body, sender=tag)], create_with=CONFIG)
        got = await engine.receive(ref, 1)
        await engine.acknowledge(ref, [m.message_id for m in got.messages])

    for start in range(0, n, 16):
        await asyncio.gather(*(cycle(i) for i in range(start, min(n, start + 16))))
    if books is not None:  # what the workers do for these cycles
        now = int(time.time() * 1000)
        for shard in {keys.queue_keys(r.qualified).shard for r in refs}:
            await books.settle(shard, now)
    elapsed = time.perf_counter() - started
    return (server_cpu(await redis.info("cpu")) - before) / n, n / elapsed


async def queued_memory(
    engine: Engine, refs: list[QueueRef], tags: list[str], n: int
) -> dict[str, float]:
    """Bytes of used_memory per message left queued, untagged and tagged."""
    out = {}
    body = random.randbytes(1024)
    for label, senders in (("untagged", [""]), ("tagged", tags)):
        before = int((await engine.redis.info("memory"))["used_memory"])
        for start in range(0, n, 64):
            await asyncio.gather(
                *(
                    engine.send(
                        refs[i % len(refs)],
                        [SendMessage(body, sender=senders[i % len(senders)])],
                        create_with=CONFIG,
                    )
                    for i in range(start, min(n, start + 64))
                )
            )
        after = int((await engine.redis.info("memory"))["used_memory"])
        out[label] = (after - before) / n
        print(f"memory kept per queued message, {label}: {out[label]:.0f} B", flush=True)
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="sender-bytes-") as tmp:
        server = EmbeddedServer(Path(tmp), lock=False)
        server.start()
        backend = Backend(server.url)
        await backend.start()
        try:
            engine = Engine(backend.client)
            books = SenderBooks(backend.client, engine.scripts, Settings().limits, Settings().queue)
            refs = [QueueRef(keys.DIDCOMM_NAMESPACE, f"q{i}") for i in range(args.queues)]
            tags = [f"sender{i:05d}" for i in range(args.senders)]
            await block(engine, books, refs, tags, args.cycles)  # warm-up: queues, scripts
            await block(engine, None, refs, [], args.cycles)
            cpu_ratios, rate_ratios, pairs = [], [], []
            for i in range(args.pairs):
                a_cpu, a_rate = await block(engine, None, refs, [], args.cycles)
                b_cpu, b_rate = await block(engine, books, refs, tags, args.cycles)
                cpu_ratios.append(b_cpu / a_cpu)
                rate_ratios.append(b_rate / a_rate)
                pairs.append({"anchor": [a_cpu, a_rate], "tagged": [b_cpu, b_rate]})
                print(
                    f"pair {i + 1}/{args.pairs}: server CPU per cycle {a_cpu * 1e6:.0f} -> "
                    f"{b_cpu * 1e6:.0f} µs ({b_cpu / a_cpu:.3f}x), cycles/s {a_rate:.0f} -> "
                    f"{b_rate:.0f} ({b_rate / a_rate:.3f}x)",
                    flush=True,
                )
            memory = await queued_memory(engine, refs, tags, args.memory_messages)
        finally:
            await backend.aclose()
            server.stop()
    return {
        "memory_bytes_per_message": memory,
        "cycles": args.cycles,
        "queues": args.queues,
        "senders": args.senders,
        "pairs": pairs,
        "server_cpu_ratio": statistics.median(cpu_ratios),
        "rate_ratio": statistics.median(rate_ratios),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python bench/sender_bytes_bench.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--cycles", type=int, default=4000, help="send-receive-ack cycles a block")
    p.add_argument("--pairs", type=int, default=5, help="anchor/subject block pairs")
    p.add_argument("--queues", type=int, default=1000, help="DIDComm queues the cycles use")
    p.add_argument("--senders", type=int, default=50, help="sender tags the subject uses")
    p.add_argument(
        "--memory-messages", type=int, default=20000, help="messages left queued, per kind"
    )
    args = p.parse_args(argv)
    result = asyncio.run(run(args))
    print(
        f"median: server CPU per cycle {result['server_cpu_ratio']:.3f}x the anchor's, "
        f"cycles a second {result['rate_ratio']:.3f}x; memory per queued message "
        f"{result['memory_bytes_per_message']['untagged']:.0f} -> "
        f"{result['memory_bytes_per_message']['tagged']:.0f} B"
    )
    print("limits off: none (no node is started: the engine's scripts are called directly)")
    result["limits_off"] = {"off": [], "note": "no node is started"}
    out = RESULTS
    out.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    (out / f"sender-bytes-{stamp}.json").write_text(json.dumps(result, indent=2))
    return 0
