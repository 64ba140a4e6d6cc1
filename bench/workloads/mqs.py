"""mqs benchmark: throughput, long-poll wake-up latency and Redis memory, in one run.

Every throughput figure is a ratio to an anchor measured in the same run on the same machine,
in interleaved blocks (anchor, subject, anchor, subject, ...) after a warm-up, so that a
shared or noisy machine moves both sides alike. The anchor (bench/harness/anchor_app.py) is a
bare Starlette app on uvicorn that parses a JSON body and does one XADD: what a Python HTTP
front to Redis costs at the least. Workloads:

  send      POST /messages/<q>, one 1 KiB message             ratio to anchor     >= 0.5
  recv      GET /messages/<q> (1 message) + DELETE by id       ratio to anchor     >= 0.4
  batch     POST /messages/<q>, multipart of 10 x 1 KiB        ratio to single send >= 5
  latency   long poll on node 1 woken by a send on node 2      p99                 <= 5 ms
            (from the send's answer to the poll's answer; end to end also shown)
            (next to a bare redis-py PUBLISH -> subscriber floor)
  memory    Redis used_memory per queued 1 KiB message         <= 1536 B

It starts its own Redis-compatible server (the embedded valkey, AOF everysec, noeviction),
two `mediator serve` nodes and the anchor app, pins the server under test to one CPU and the
load generator and Redis to the other (taskset, when there are two CPUs), the nodes with
every setting at its default (no abuse limit applies to the mqs API: the report says
"limits off: none"), prints one line per workload and a summary, and writes
bench/results/mqs-<timestamp>.json. It exits 0 even when a target is missed (the line says
MISSED), and non-zero only when something failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import cli
from bench.harness.blocks import Block, BlockOptions, Blocks, Side, Target, report_paired
from bench.harness.errors import BenchError
from bench.harness.floors import publish_floor
from bench.harness.loadgen import (
    HOST,
    Connection,
    HttpError,
    Operation,
    Response,
    build_request,
    expect,
    send_all,
)
from bench.harness.machine import machine_info
from bench.harness.output import Goal, dist, fmt_rate, percentile, progress
from bench.harness.report import Report, options
from bench.harness.run import event_loop_runner, guarded, run_main
from bench.harness.servers import Servers
from mediator.mqs import multipart

KIB = 1024
WORKLOADS = ("memory", "send", "recv", "batch", "latency")
QUEUE_HEADERS = {"X-MQS-RETENTION-SECONDS": "3600", "X-MQS-VISIBILITY-TIMEOUT-SECONDS": "30"}
OCTET = {"Content-Type": "application/octet-stream"}
RUN_TIMEOUT_S = 20 * 60  # the whole run, whatever the options

GOALS = {
    "send": Goal(">=", 0.5),
    "recv": Goal(">=", 0.4),
    "batch": Goal(">=", 5.0),
    "latency": Goal("<=", 5.0),
    "memory": Goal("<=", 1536.0),
}


class Api:
    """Setup and cleanup calls (not timed) on one keep-alive connection to a node."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn: Connection | None = None

    async def call(
        self,
        method: str,
        path: str,
        statuses: Sequence[int],
        headers: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> Response:
        raw = build_request(method, path, headers, body)
        for attempt in range(2):
            if self.conn is None:
                self.conn = await Connection(HOST, self.port).open()
            try:
                resp = await self.conn.request(raw)
            except (OSError, TimeoutError, HttpError) as exc:
                await self.close()
                if attempt or (isinstance(exc, HttpError) and exc.status):
                    raise BenchError(f"{method} {path}: {exc}") from exc
                continue
            if resp.status not in statuses:
                raise BenchError(
                    f"{method} {path}: status {resp.status}, wanted {list(statuses)}: "
                    f"{resp.body[:300]!r}"
                )
            return resp
        raise BenchError(f"{method} {path}: no answer")

    async def create_queue(self, name: str) -> None:
        await self.call("PUT", f"/queues/{name}", [201], QUEUE_HEADERS)

    async def delete_queue(self, name: str) -> None:
        await self.call("DELETE", f"/queues/{name}", [200, 404])

    async def visible(self, name: str) -> int:
        resp = await self.call("GET", f"/queues/{name}", [200])
        return int(json.loads(resp.body)["status"]["visibleMessages"])

    async def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            await conn.close()


class MqsBench:
    """The mqs workloads on node 1, against the anchor, with node 2 sending the wake-ups."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.report = Report()
        self.servers = Servers("mqs-bench-", args.redis_url)
        self.blocks = Blocks(self.servers, BlockOptions.from_args(args), self.report)
        self._api: Api | None = None
        self.queues: set[str] = set()
        self.body = secrets.token_bytes(KIB)

    # ------------------------------------------------------------------ setup

    @property
    def api(self) -> Api:
        """Set-up calls to node 1."""
        if self._api is None:
            raise BenchError("node 1 is not started")
        return self._api

    @property
    def port1(self) -> int:
        assert self.servers.node1 is not None
        return self.servers.node1.port

    def q(self, suffix: str) -> str:
        name = f"bench-{self.servers.run_id}-{suffix}"
        self.queues.add(name)
        return name

    async def start(self) -> None:
        await self.servers.start_all(self.args.no_pin)
        self._api = Api(self.port1)

    async def stop(self) -> None:
        with contextlib.suppress(Exception):
            await self.cleanup_queues()
        if self._api is not None:
            await self._api.close()
        await self.servers.stop(self.args.keep_tmp)

    async def cleanup_queues(self) -> None:
        if self.servers.node1 is None or not self.queues:
            return
        requests = [build_request("DELETE", f"/queues/{q}") for q in sorted(self.queues)]
        await send_all(self.port1, requests, [200, 404], conns=8)
        self.queues.clear()

    async def sanity(self) -> None:
        """The API behaves as the benchmark assumes (fails loudly otherwise)."""
        q = self.q("sanity")
        api = self.api
        await api.create_queue(q)
        empty = await api.call("GET", f"/messages/{q}", [200], {"X-MQS-MAX-MESSAGES": "1"})
        if empty.body.strip() != b"[]" or empty.header(b"x-mqs-message-count") != b"0":
            raise BenchError(f"an empty receive answered {empty.headers!r} {empty.body[:100]!r}")
        sent = await api.call("POST", f"/messages/{q}", [201], OCTET, self.body)
        ids = json.loads(sent.body)["messageIds"]
        ctype, batch = multipart.encode([(OCTET, self.body) for _ in range(10)])
        sent10 = await api.call("POST", f"/messages/{q}", [201], {"Content-Type": ctype}, batch)
        if len(json.loads(sent10.body)["messageIds"]) != 10:
            raise BenchError(f"a batch of 10 answered {sent10.body[:300]!r}")
        got = await api.call("GET", f"/messages/{q}", [200], {"X-MQS-MAX-MESSAGES": "1"})
        mid = got.header(b"x-mqs-message-id").decode()
        if got.body != self.body or mid != ids[0]:
            raise BenchError("the first message received is not the one sent first")
        await api.call("DELETE", f"/messages/{mid}", [204])
        await api.call("DELETE", f"/messages/{mid}", [404])
        if await api.visible(q) != 10:
            raise BenchError("the queue does not show the 10 messages of the batch")
        await api.delete_queue(q)
        progress("sanity checks passed (send, batch, receive, delete, empty receive)")

    # ------------------------------------------------------------------ sides

    def node1_target(self) -> Target:
        node1 = self.servers.node1
        assert node1 is not None
        return Target("node1", node1.port, node1.pid)

    def send_side(self, label: str, per_request: int) -> Side:
        """Sends of `per_request` 1 KiB messages (1: plain body, more: multipart/mixed)."""
        api = self.api
        if per_request == 1:
            headers, body = OCTET, self.body
        else:
            ctype, body = multipart.encode([(OCTET, self.body) for _ in range(per_request)])
            headers = {"Content-Type": ctype}

        async def prepare(tag: str) -> Operation:
            queue = self.q(f"{label}-{tag}")
            await api.create_queue(queue)
            raw = build_request("POST", f"/messages/{queue}", headers, body)

            async def op(conn: Connection) -> int:
                expect(await conn.request(raw), 201)
                return per_request

            return op

        async def cleanup(tag: str) -> None:
            queue = self.q(f"{label}-{tag}")
            await api.delete_queue(queue)
            self.queues.discard(queue)

        return Side(label, self.node1_target(), prepare, cleanup)

    def recv_side(self, queue: str) -> tuple[Side, dict[str, Any]]:
        api = self.api
        port = self.port1
        state: dict[str, Any] = {"rate": 1000.0, "refills": [], "dry": 0}
        get_raw = build_request("GET", f"/messages/{queue}", {"X-MQS-MAX-MESSAGES": "1"})
        delete_head = b"DELETE /messages/"
        delete_tail = b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        ctype, batch100 = multipart.encode([(OCTET, self.body) for _ in range(100)])
        batch_raw = build_request("POST", f"/messages/{queue}", {"Content-Type": ctype}, batch100)

        async def prepare(tag: str) -> Operation:
            seconds = self.args.warmup if tag.startswith("w") else self.args.seconds
            # Enough for the block at 2.5 times the last rate seen, so it never runs dry.
            need = min(300_000, max(5_000, int(state["rate"] * seconds * 2.5)))
            have = await api.visible(queue)
            if have < need:
                batches = (need - have + 99) // 100
                await send_all(port, [batch_raw] * batches, [201], conns=8)
                state["refills"].append({"block": tag, "had": have, "added": batches * 100})

            async def op(conn: Connection) -> int:
                got = await conn.request(get_raw)
                if got.status != 200:
                    expect(got, 200)
                mid = got.headers.get(b"x-mqs-message-id")
                if not mid:
                    if got.headers.get(b"x-mqs-message-count") == b"0":
                        return 0  # the queue ran dry: counted as an idle op
                    raise HttpError("a receive answered without a message id", 200, got.body)
                expect(await conn.request(delete_head + mid + delete_tail), 204)
                return 1

            return op

        def observe(block: Block) -> None:
            state["rate"] = max(state["rate"], block.rate)
            state["dry"] += block.idle_ops

        side = Side("mqs-recv+delete", self.node1_target(), prepare, observe=observe)
        return side, state

    # ------------------------------------------------------------------ workloads

    async def workload_send(self) -> None:
        anchor = self.blocks.anchor_side()
        r = await self.blocks.paired("send", anchor, self.send_side("mqs-send", 1))
        self.report.results["send"] = r.to_json()
        other = f"anchor {fmt_rate(r.a_rate)}/s"
        report_paired(self.report, "send", GOALS["send"], "send 1KiB", r, other, "target >= 0.5")

    async def workload_recv(self) -> None:
        queue = self.q("recv")
        await self.api.create_queue(queue)
        # The side learns the rate as it goes, so that each refill is big enough.
        side, state = self.recv_side(queue)
        r = await self.blocks.paired("recv", self.blocks.anchor_side(), side)
        dry_total = sum(b.idle_ops for b in r.b_blocks)
        left = await self.api.visible(queue)
        await self.api.delete_queue(queue)
        self.queues.discard(queue)
        out = r.to_json()
        out.update({"refills": state["refills"], "dry_receives": dry_total, "left": left})
        self.report.results["recv"] = out
        note = "target >= 0.4" + (f"  (queue ran dry {dry_total} times!)" if dry_total else "")
        other = f"anchor {fmt_rate(r.a_rate)}/s"
        report_paired(self.report, "recv", GOALS["recv"], "receive+delete", r, other, note)

    async def workload_batch(self) -> None:
        r = await self.blocks.paired(
            "batch", self.send_side("mqs-single", 1), self.send_side("mqs-batch10", 10)
        )
        self.report.results["batch"] = r.to_json()
        report_paired(
            self.report,
            "batch",
            GOALS["batch"],
            "batch 10x1KiB",
            r,
            f"single {fmt_rate(r.a_rate)}/s",
            "target >= 5x",
            suffix="x",
        )

    async def workload_latency(self) -> None:
        node1, node2 = self.servers.node1, self.servers.node2
        assert node1 is not None and node2 is not None
        args = self.args
        rounds, park = args.rounds, args.park_ms / 1000
        queue = self.q("longpoll")
        await self.api.create_queue(queue)
        poll_raw = build_request(
            "GET", f"/messages/{queue}", {"X-MQS-MAX-MESSAGES": "1", "X-MQS-WAIT-TIME": "10"}
        )
        send_raw = build_request("POST", f"/messages/{queue}", OCTET, self.body)
        poll_conn = await Connection(HOST, node1.port).open()
        send_conn = await Connection(HOST, node2.port).open()
        total: list[float] = []
        after_send: list[float] = []
        send_rtt: list[float] = []
        perf = time.perf_counter

        async def arrival() -> tuple[Response, float]:
            resp = await poll_conn.receive(limit_s=15)
            return resp, perf()

        try:
            # A few unmeasured rounds first (connections, scripts, code paths warm).
            for i in range(-min(20, rounds), rounds):
                await poll_conn.send(poll_raw)
                task = asyncio.create_task(arrival())
                await asyncio.sleep(park)
                if task.done():
                    resp, _ = task.result()
                    raise BenchError(
                        f"the long poll answered before any send: {resp.status} {resp.body[:200]!r}"
                    )
                t0 = perf()
                sent = await send_conn.request(send_raw)
                t1 = perf()
                resp, t2 = await asyncio.wait_for(task, 15)
                expect(sent, 201)
                expect(resp, 200)
                mid = resp.header(b"x-mqs-message-id").decode()
                if mid != json.loads(sent.body)["messageIds"][0]:
                    raise BenchError(f"the long poll got {mid!r}, not the message just sent")
                if i >= 0:
                    total.append((t2 - t0) * 1000)
                    after_send.append((t2 - t1) * 1000)
                    send_rtt.append((t1 - t0) * 1000)
                expect(await poll_conn.request(build_request("DELETE", f"/messages/{mid}")), 204)
                if i >= 0 and (i + 1) % 100 == 0:
                    progress(
                        f"latency: {i + 1}/{rounds} rounds, p50 {percentile(total, 50):.2f} ms "
                        f"p99 {percentile(total, 99):.2f} ms"
                    )
        finally:
            await poll_conn.close()
            await send_conn.close()
        await self.api.delete_queue(queue)
        self.queues.discard(queue)
        progress(
            f"latency: the send through node 2 itself was answered in p50 "
            f"{percentile(send_rtt, 50):.2f} ms, p99 {percentile(send_rtt, 99):.2f} ms"
        )
        floor = await publish_floor(self.servers.redis_url, self.servers.run_id, rounds, park)
        # The wake-up is judged from the moment the send is answered (the message is in the
        # queue) to the poll's answer. The end-to-end figure adds the send request itself,
        # which on an idle node of this VM is mostly the cost of waking an idle process.
        p50, p99 = percentile(after_send, 50), percentile(after_send, 99)
        status = GOALS["latency"].verdict(p99)
        self.report.emit(
            f"long-poll wake-up (send answered -> poll answered): p50 {p50:.2f} ms "
            f"p99 {p99:.2f} ms (max {max(after_send):.2f}; {len(total)} rounds)  "
            f"end to end from send issued: p50 {percentile(total, 50):.2f} ms "
            f"p99 {percentile(total, 99):.2f} ms  "
            f"floor PUBLISH->subscriber p50 {percentile(floor, 50):.2f} ms "
            f"p99 {percentile(floor, 99):.2f} ms  target p99 <= 5 ms  {status}"
        )
        self.report.results["latency"] = {
            "rounds": len(total),
            "park_ms": args.park_ms,
            "send_start_to_poll_answer_ms": dist(total),
            "send_answer_to_poll_answer_ms": dist(after_send),
            "send_round_trip_ms": dist(send_rtt),
            "floor_publish_to_subscriber_ms": dist(floor),
            "target_p99_ms": GOALS["latency"].value,
            "status": status,
            "samples_ms": [round(x, 4) for x in total],
        }
        self.report.summary.append(
            (
                "long-poll wake-up p99",
                f"{p99:.2f} ms (p50 {p50:.2f})",
                "<= 5 ms",
                f"{status}  [end to end p99 {percentile(total, 99):.2f} ms; "
                f"floor p99 {percentile(floor, 99):.2f} ms]",
            )
        )

    async def used_memory(self) -> int:
        await asyncio.sleep(self.args.memory_settle)
        values = []
        for _ in range(3):
            info = await self.servers.redis.info("memory")
            values.append(int(info["used_memory"]))
            await asyncio.sleep(0.05)
        return int(statistics.median(values))

    async def workload_memory(self) -> None:
        port = self.port1
        n = self.args.memory_messages
        per = 100
        ctype, batch = multipart.encode([(OCTET, self.body) for _ in range(per)])
        # Warm the scripts and the global keys on a throw-away queue first.
        warm = self.q("mem-warm")
        await self.api.create_queue(warm)
        await send_all(
            port,
            [build_request("POST", f"/messages/{warm}", {"Content-Type": ctype}, batch)],
            [201],
        )
        await self.api.delete_queue(warm)
        self.queues.discard(warm)

        queue = self.q("mem")
        await self.api.create_queue(queue)
        before = await self.used_memory()
        raw = build_request("POST", f"/messages/{queue}", {"Content-Type": ctype}, batch)
        await send_all(port, [raw] * (n // per), [201], conns=4)
        sent = (n // per) * per
        after = await self.used_memory()
        per_msg = (after - before) / sent
        progress(f"memory: {sent:,} messages in one queue: +{after - before:,} B")

        # One message in each of many queues.
        nq = self.args.memory_queues
        names = [self.q(f"mq{i}") for i in range(nq)]
        base = await self.used_memory()
        await send_all(
            port, [build_request("PUT", f"/queues/{x}", QUEUE_HEADERS) for x in names], [201]
        )
        created = await self.used_memory()
        await send_all(
            port, [build_request("POST", f"/messages/{x}", OCTET, self.body) for x in names], [201]
        )
        filled = await self.used_memory()
        requests = [build_request("DELETE", f"/queues/{x}") for x in [*names, queue]]
        await send_all(port, requests, [200])
        for x in [*names, queue]:
            self.queues.discard(x)
        emptied = await self.used_memory()
        per_queue_msg = (filled - created) / nq
        per_queue_total = (filled - base) / nq
        status = GOALS["memory"].verdict(per_msg)
        self.report.emit(
            f"memory per 1KiB message: {per_msg:,.0f} B ({sent:,} messages in one queue)  "
            f"target <= 1536 B  {status}"
        )
        self.report.emit(
            f"memory, 1 message in each of {nq:,} queues: {per_queue_msg:,.0f} B per message, "
            f"{per_queue_total:,.0f} B per queue with its message (info)"
        )
        self.report.results["memory"] = {
            "messages": sent,
            "used_memory_before": before,
            "used_memory_after": after,
            "bytes_per_message": per_msg,
            "queues": nq,
            "one_per_queue_bytes_per_message": per_queue_msg,
            "one_per_queue_bytes_per_queue_total": per_queue_total,
            "used_memory_base": base,
            "used_memory_queues_created": created,
            "used_memory_queues_filled": filled,
            "used_memory_after_deleting_all": emptied,
            "residual_after_delete_bytes": emptied - before,
            "target_bytes": GOALS["memory"].value,
            "status": status,
        }
        self.report.summary.append(
            ("memory per 1KiB message", f"{per_msg:,.0f} B", "<= 1536 B", status)
        )
        self.report.summary.append(
            (f"memory, 1 msg x {nq:,} queues", f"{per_queue_msg:,.0f} B/msg", "(info)", "")
        )

    # ------------------------------------------------------------------ run

    async def run(self) -> dict[str, Any]:
        selected = self.args.only
        started = datetime.now(UTC)
        loadavg0 = os.getloadavg()
        await self.start()
        await self.sanity()
        steps: dict[str, Callable[[], Awaitable[None]]] = {
            "memory": self.workload_memory,
            "send": self.workload_send,
            "recv": self.workload_recv,
            "batch": self.workload_batch,
            "latency": self.workload_latency,
        }
        for name in WORKLOADS:
            if name in selected:
                progress(f"--- {name}")
                await steps[name]()
        return {
            "started": started.isoformat(timespec="seconds"),
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine_info(loadavg0),
            "options": options(self.args),
            "pinning": asdict(self.servers.pinning),
            "redis_url": self.servers.redis_url,
            "redis_embedded": self.servers.server is not None,
            "anchor_json": await self.anchor_json_lib(),
            "loadgen_loop": type(asyncio.get_running_loop()).__module__,
            "results": self.report.results,
            "lines": self.report.lines,
            "errors": self.report.errors,
            "server_log_lines": self.servers.log_problems()[:200],
        }

    async def anchor_json_lib(self) -> str:
        anchor = self.servers.anchor
        assert anchor is not None
        conn = await Connection(HOST, anchor.port).open()
        try:
            resp = await conn.request(build_request("GET", "/readyz"))
            return str(json.loads(resp.body).get("json", "?"))
        finally:
            await conn.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.new_parser(
        __doc__ or "", "What each figure means, and figures measured: bench/README.md."
    )
    cli.add_redis_url(
        parser,
        "use this (loopback) Redis server instead of starting an embedded one; "
        "queues are created and deleted under the names bench-<run id>-*",
    )
    cli.add_blocks(parser)
    add = parser.add_argument
    add("--rounds", type=int, default=300, help="long-poll latency rounds (default 300)")
    add(
        "--park-ms",
        type=float,
        default=50.0,
        help="how long the long poll is left parked before the send (default 50)",
    )
    add(
        "--memory-messages",
        type=int,
        default=10_000,
        help="1 KiB messages sent to one fresh queue for the memory figure (default 10000)",
    )
    add(
        "--memory-queues",
        type=int,
        default=1_000,
        help="queues holding one message each for the second memory figure (default 1000)",
    )
    add(
        "--memory-settle",
        type=float,
        default=1.2,
        help="seconds to wait before each used_memory reading (default 1.2)",
    )
    cli.add_only(parser, WORKLOADS)
    add(
        "--quick",
        action="store_true",
        help="smoke run: 1.5 s blocks, 1 pair, 0.5 s warm-up, 60 latency rounds, "
        "2000 messages / 200 queues for memory",
    )
    cli.add_profile(
        parser,
        "after each throughput workload, run one more block per side (not counted) "
        "with py-spy sampling the server, and print where its CPU time goes",
    )
    cli.add_run(parser, "mqs")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.pairs, args.warmup = 1.5, 1, 0.5
        args.rounds, args.memory_messages, args.memory_queues = 60, 2_000, 200
        args.memory_settle = 0.6
    args.only = cli.parse_only(parser, args.only, WORKLOADS)
    cli.check_blocks(parser, args)
    if not 1 <= args.rounds <= 100_000:
        parser.error("--rounds must be 1..100000")
    if not (100 <= args.memory_messages <= 1_000_000 and 1 <= args.memory_queues <= 100_000):
        parser.error("--memory-messages must be 100..1000000 and --memory-queues 1..100000")
    if not 1 <= args.park_ms <= 5000:
        parser.error("--park-ms must be 1..5000")
    return args


async def amain(args: argparse.Namespace) -> tuple[Report, dict[str, Any]]:
    bench = MqsBench(args)
    doc = await guarded(bench.servers, bench.run(), RUN_TIMEOUT_S, bench.stop)
    return bench.report, doc


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    Path(args.output_dir).mkdir(parents=True, exist_ok=True)
    run = event_loop_runner(uvloop=True)
    return run_main(lambda: run(amain(args)), args.output_dir, "mqs")
