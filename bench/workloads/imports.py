"""`mediator import` at scale: `python bench/import_bench.py --help`.

A synthetic ACA-Py 1.7 mediator's store of --connections wallets (a mix of ACA-Py clients,
unqualified DIDs with their DID documents kept, and Credo 0.6/0.7 clients, did:peer:4), each
granted mediation with one recipient key, made with aries-askar in the records' real format
(bench/support/askar_stores.py; cached, since a million take the better part of an hour),
is imported into a fresh embedded server, as `mediator import acapy` does it:

- **import rate**: wallets imported a second (target >= 2,000);
- **Redis bytes per imported idle wallet**: used_memory after / before, per wallet
  (target <= 600 B), beside the native figure of the same run: --native recipients loaded
  by the bulk loader (bench/support/bulk_load.py) into the same server afterwards;
- **a forward to an imported wallet against one to a native wallet**: one `mediator serve`
  node on that server, blocks of forwards (32 connections, closed loop) alternating between
  imported wallets (anoncrypted to the old routing key) and native ones, the median ratio of
  their rates (target >= 0.95).

Results go to bench/results/import-<timestamp>.json; bench/README.md keeps the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import random
import resource
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness.cli import RESULTS
from bench.harness.limits import FORWARDS_PER_RECIPIENT, node_env, shown
from bench.harness.limits import to_json as limits_json
from bench.harness.loadgen import (
    build_request,
    close_connections,
    closed_loop,
    open_connections,
    rotating,
)
from bench.support import bulk_load
from bench.support.askar_stores import (
    AcapyClient,
    AcapyPlan,
    acapy_connections,
    make_acapy_store,
)
from bench.support.bulk_load import MEDIATOR_SEED, Plan
from bench.support.forwards import BASIC, forward, inner_content_length
from bench.support.live import ENVELOPE
from mediator.client import Sender
from mediator.embedded import EmbeddedServer, free_port
from mediator.imports.run import ImportOptions, run_import
from mediator.settings import Settings
from mediator.storage.clients import Backend

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mediator-bench"
SAMPLES = 2000  # wallets the forwards go to (phones: see phone_samples)
SAMPLED = "phones"  # what samples.json's samples are (older caches: re-derived)
CLIENTS: tuple[AcapyClient, ...] = (
    "sov",
    "peer4",
)  # ACA-Py clients and Credo 0.6/0.7 ones, half each


def store_path(connections: int) -> Path:
    return CACHE / f"import-acapy-{connections}" / "sqlite.db"


async def prepare_store(connections: int) -> dict[str, Any]:
    """The cached store of `connections` wallets (made when missing) and its samples."""
    path = store_path(connections)
    meta = path.with_name("samples.json")
    plan = AcapyPlan(
        connections=connections,
        clients=CLIENTS,
        key_method="raw",
        seed=f"import-bench-{connections}",
        truth_every=0,
    )
    if meta.exists() and path.exists():
        data: dict[str, Any] = json.loads(meta.read_text())
        print(f"store: {path} (cached, {path.stat().st_size / 1e9:.1f} GB)", flush=True)
        if data.get("sampled") != SAMPLED:  # cached before the samples were phones
            data.update(sampled=SAMPLED, samples=phone_samples(plan))
            meta.write_text(json.dumps(data))
        return data
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    started = time.monotonic()
    last = [started]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 30 or done == total:
            last[0] = now
            rate = done / max(now - started, 1e-9)
            print(f"store: {done:,}/{total:,} wallets ({rate:,.0f}/s)", flush=True)

    truth = await make_acapy_store(path, dataclasses.replace(plan, progress=progress))
    data = {
        "uri": truth.uri,
        "pass_key": truth.pass_key,
        "routing_key": truth.routing_keys[0].verkey,
        "connections": connections,
        "seconds": truth.seconds,
        "sampled": SAMPLED,
        "samples": phone_samples(plan),
    }
    meta.write_text(json.dumps(data))
    print(f"store: {connections:,} wallets made in {truth.seconds:.0f} s", flush=True)
    return data


def phone_samples(plan: AcapyPlan) -> list[dict[str, str]]:
    """SAMPLES granted wallets without an endpoint (phones, like the native anchor's: a
    forward to a wallet with one is pushed to it), spread over the store."""
    # Odd, so the stride does not keep landing on the same kind of client.
    stride = max(1, plan.connections // (SAMPLES * len(CLIENTS))) | 1
    found = []
    for c in acapy_connections(plan, range(0, plan.connections, stride)):
        if (
            c.mediation_state == "granted"
            and c.recipient_keys
            and not c.their_endpoint.startswith(("http", "ws"))
        ):
            found.append({"recipient_key": c.recipient_keys[0], "seed": c.recipient_seeds[0].hex()})
    if len(found) < SAMPLES // 2:
        raise RuntimeError(f"only {len(found)} phones among the sampled wallets")
    return found[:SAMPLES]


async def used_memory(url: str) -> int:
    """INFO used_memory, after the server has had a moment of quiet."""
    backend = Backend(url)
    await backend.start()
    try:
        await asyncio.sleep(1.2)
        return int((await backend.client.info("memory"))["used_memory"])
    finally:
        await backend.aclose()


async def settled(url: str, seconds: float = 600) -> float:
    """Wait until the server has no AOF rewrite or snapshot running (after a million
    wallets its rewrite writes a few GB, and a node's calls meanwhile can time out);
    the seconds waited."""
    backend = Backend(url)
    await backend.start()
    started = time.monotonic()
    try:
        while time.monotonic() - started < seconds:
            info = await backend.client.info("persistence")
            busy = int(info.get("aof_rewrite_in_progress", 0)) or int(
                info.get("rdb_bgsave_in_progress", 0)
            )
            if not busy and not int(info.get("aof_rewrite_scheduled", 0)):
                return time.monotonic() - started
            await asyncio.sleep(1)
        raise RuntimeError(f"the server was still rewriting its AOF after {seconds:.0f} s")
    finally:
        await backend.aclose()


async def import_store(url: str, store: dict[str, Any]) -> tuple[float, int]:
    """(seconds, wallets imported) of `mediator import acapy` into `url`."""
    last = [0.0]

    def progress(line: str) -> None:
        now = time.monotonic()
        if now - last[0] >= 30:
            last[0] = now
            print(f"import: {line}", flush=True)

    settings = Settings.of(key_seed=MEDIATOR_SEED)
    options = ImportOptions("acapy", store["uri"], store["pass_key"])
    outcome = await run_import(settings, url, options, progress)
    report = outcome.report
    if report.refused or report.skipped:
        print(f"import: skipped {dict(report.skipped)}, refused {dict(report.refused)}")
    return outcome.seconds, report.imported["connections"]


LIMITS = [FORWARDS_PER_RECIPIENT]


def start_node(url: str, port: int, log: Path) -> Any:
    """One `mediator serve` node on `url`, with the bulk loader's key seed."""
    import subprocess
    import sys

    env = dict(
        os.environ,
        MEDIATOR_REDIS_URL=url,
        MEDIATOR_KEY_SEED=MEDIATOR_SEED,
        MEDIATOR_PORT=str(port),
        MEDIATOR_LOG_LEVEL="warning",
        **node_env(LIMITS),
    )
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "mediator", "serve"], env=env, stdout=out, stderr=out
        )


async def wait_ready(port: int, seconds: float = 60) -> None:
    import httpx

    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            try:
                if (await client.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError(f"the node on port {port} did not get ready")


def imported_forwards(store: dict[str, Any], length: int) -> list[bytes]:
    """Forwards to the sampled imported wallets' keys, anoncrypted to the old routing key,
    from the same third party and of the same size as the native ones."""
    from bench.support.forwards import SENDER_SEED
    from mediator.client import forward_envelope
    from mediator.didcomm.keys import KeyPair

    routing = store["routing_key"]
    sender = Sender(routing, KeyPair.from_seed(SENDER_SEED))
    content = {"@type": BASIC, "content": "x" * length}
    out = []
    for sample in store["samples"]:
        key = sample["recipient_key"]
        inner = sender.pack(content, [key])
        out.append(build_request("POST", "/", ENVELOPE, forward_envelope(inner, key, routing)))
    return out


async def forward_blocks(
    port: int, imported: list[bytes], native: list[bytes], pairs: int, seconds: float
) -> list[dict[str, float]]:
    """Blocks of forwards over 32 connections, imported and native in turn (which goes first
    alternates); the rates of each pair."""
    conns = await open_connections("127.0.0.1", port, 32)
    try:
        for requests in (imported, native):  # warm-up: routes, caches, scripts
            await closed_loop(conns, rotating(requests, 202), 2.0)
        out = []
        for i in range(pairs):
            order = [("imported", imported), ("native", native)]
            if i % 2:
                order.reverse()
            rates = {}
            for name, requests in order:
                result = await closed_loop(conns, rotating(requests, 202), seconds)
                if result.errors:
                    raise RuntimeError(f"{name} forwards failed: {result.first_error}")
                rates[name] = result.rate
            out.append(rates)
            print(
                f"pair {i + 1}/{pairs}: forwards/s imported {rates['imported']:,.0f}, native "
                f"{rates['native']:,.0f} ({rates['imported'] / rates['native']:.3f}x)",
                flush=True,
            )
        return out
    finally:
        await close_connections(conns)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    cached = store_path(args.connections).with_name("samples.json").exists()
    store = await prepare_store(args.connections)
    result: dict[str, Any] = {
        "connections": args.connections,
        "store_seconds": store["seconds"],
        "store_cached": cached,  # if not, the peak RSS below includes making the store
    }
    with tempfile.TemporaryDirectory(prefix="import-bench-") as tmp:
        server = EmbeddedServer(Path(tmp) / "redis", lock=False)
        server.start()
        node = None
        try:
            empty = await used_memory(server.url)
            seconds, imported = await import_store(server.url, store)
            after_import = await used_memory(server.url)
            result["import_seconds"] = seconds
            result["imported"] = imported
            result["import_rate"] = imported / seconds
            result["bytes_per_imported_wallet"] = (after_import - empty) / imported
            # The importer's peak memory (this process; a cached store was not made in it).
            result["import_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            # The largest of its worker processes (index passes, key loading), each ended.
            result["import_worker_peak_rss_mb"] = (
                resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            )
            print(
                f"import: {imported:,} wallets in {seconds:.0f} s = {imported / seconds:,.0f}/s;"
                f" Redis {result['bytes_per_imported_wallet']:.0f} B per imported wallet;"
                f" importer peak RSS {result['import_peak_rss_mb']:,.0f} MB"
                f" (its largest worker {result['import_worker_peak_rss_mb']:,.0f} MB)",
                flush=True,
            )
            plan = Plan(args.native)
            report = await bulk_load.load(server.url, plan, "recipients", report=print)
            after_native = await used_memory(server.url)
            result["bytes_per_native_wallet"] = (after_native - after_import) / args.native
            result["native_load_rate"] = report.rate
            print(
                f"native: {args.native:,} wallets loaded; Redis "
                f"{result['bytes_per_native_wallet']:.0f} B per native wallet",
                flush=True,
            )
            waited = await settled(server.url)
            print(f"server: background rewrite over after {waited:.0f} s", flush=True)
            port = free_port()
            node = start_node(server.url, port, Path(tmp) / "node.log")
            await wait_ready(port)
            length = inner_content_length(plan)
            content = {"@type": BASIC, "content": "x" * length}
            native = [forward(plan, i, content)[0] for i in range(SAMPLES)]
            random.shuffle(native)
            imported_requests = imported_forwards(store, length)
            try:
                pairs = await forward_blocks(
                    port, imported_requests, native, args.pairs, args.seconds
                )
            except RuntimeError:
                lines = (Path(tmp) / "node.log").read_text(errors="replace").splitlines()
                print("the node's log ends:", *lines[-20:], sep="\n  ", flush=True)
                raise
            ratios = [p["imported"] / p["native"] for p in pairs]
            result["forward_pairs"] = pairs
            result["forward_ratio"] = statistics.median(ratios)
        finally:
            if node is not None:
                node.terminate()
                node.wait()
            server.stop()
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python bench/import_bench.py",
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--connections", type=int, default=1_000_000, help="wallets in the store")
    p.add_argument("--native", type=int, default=100_000, help="native wallets, for the anchor")
    p.add_argument("--pairs", type=int, default=6, help="imported/native forward block pairs")
    p.add_argument("--seconds", type=float, default=5.0, help="seconds a forward block lasts")
    args = p.parse_args(argv)
    result = asyncio.run(run(args))
    print(
        f"import rate {result['import_rate']:,.0f} wallets/s (target >= 2,000); Redis "
        f"{result['bytes_per_imported_wallet']:.0f} B per imported wallet (target <= 600; "
        f"native {result['bytes_per_native_wallet']:.0f} B); forwards to imported wallets "
        f"{result['forward_ratio']:.3f}x native ones (target >= 0.95)"
    )
    print(shown(LIMITS))
    result["limits_off"] = limits_json(LIMITS)
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"import-{stamp}.json").write_text(json.dumps(result, indent=2))
    return 0
