"""The DIDComm benchmark's `forward-latency` workload (bench/workloads/didcomm.py runs it):
how long node 1 takes to answer a forward, from the write of the request to its answer.

The request is the `forward` workload's (POST / with an anoncrypted routing/1.0 forward of a
1 KiB authcrypted basic message, answered 202), but every one distinct, so that each is
stored: the `forward` workload's 8 requests in turn are duplicates after the first 8,
answered without being stored. They rotate over fresh recipients of node 1 (at most
PER_RECIPIENT forwards each, far below a mailbox's message limit), each sent one forward
before it is used, so that no measured forward pays for a cold route; they are packed before
each phase (every fixed rate's before the first), in worker processes.

Phases, in this order:

  idle rate     IDLE_RATE forwards/s on a fixed schedule (open loop) for --rate-seconds, at
                least MIN_FORWARDS forwards, over a pool of --connections keep-alive
                connections: p50/p99 of an idle node                        recorded
  saturation    closed-loop blocks of --connections (a warm-up, then --pairs): the forwards
                node 1 answered per second, the best block                   (info)
  fractions     the same open loop at each of --latency-fractions of the saturation: p50/p99
                                                    p99 <= 5 ms at 50% of saturation

Latency is measured from the actual write of each request (its send) to the read of its
answer; how late each send went out against its scheduled time is reported apart
("lateness"), with the latency from the scheduled time next to it, so that a reader can tell
whether this process (the load generator, on one CPU with Redis) kept up with the schedule.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import math
import os
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from bench.harness.blocks import Block, Blocks, Side, Target, describe
from bench.harness.conditions import disturbances
from bench.harness.errors import BenchError
from bench.harness.loadgen import (
    HOST,
    Connection,
    HttpError,
    Operation,
    build_request,
    close_connections,
    expect,
    open_connections,
    send_all,
)
from bench.harness.output import Goal, dist, fmt_cpu, fmt_rate, percentile, progress
from bench.harness.report import Report
from bench.harness.servers import Servers, node_metrics
from bench.support.live import ENVELOPE, Schedule, open_loop
from bench.support.recipients import FORWARDED, Recipients
from mediator.client import Sender

IDLE_RATE = 10.0  # forwards/s of the idle phase
MIN_FORWARDS = 60  # the least forwards of a fixed rate (a longer schedule when fewer)
RATE_LIMIT_S = 30.0  # longest schedule of one fixed rate, whatever the options
RATE_MAX_FORWARDS = 40_000
VERDICT_FRACTION = 0.5  # judged at this fraction of the saturation
GOAL = Goal("<=", 5.0)  # p99 ms at VERDICT_FRACTION
# A mailbox holds at most 10,000 messages by default (`MEDIATOR_QUEUE_MESSAGE_COUNT_LIMIT`);
# nobody picks up here, so each recipient gets at most this many forwards.
PER_RECIPIENT = 2_000
PACK_CHUNK = 500  # forwards per task of the packing processes
# What the first saturation block is packed for: more than this node answers on this VM
# (the anchor's bare XADD runs at 5,000-9,000/s). Later blocks: twice the fastest so far
# (what is left over is used by the next phases).
FIRST_GUESS_PER_S = 6_000.0
# A send this much behind its scheduled time counts as late. asyncio's timers wake on whole
# milliseconds (the selector's timeout), so every send of the schedule is up to about 1 ms
# late by construction; later than that, something held the sender back.
LATE_MS = 2.0
DUPLICATES = "mediator_didcomm_duplicate_forwards_total"
IN_FLIGHT_SUM, CALLS = (
    "mediator_redis_calls_in_flight_sum",
    "mediator_redis_calls_in_flight_count",
)


def _unpin() -> None:
    """A packing process runs on any CPU, free of the parent's pin."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setaffinity(0, range(os.cpu_count() or 1))


def held_by_pool(run: Schedule, connections: int) -> list[bool]:
    """For each send of an open-loop run: whether the pool held it up, i.e. all
    `connections` were busy (sent and not yet answered) at its scheduled time, or it queued
    behind a send that the pool held up and that was still unsent when this one was due.
    The lateness of the other sends is the sender's own."""
    done = [k for k, t in enumerate(run.answered) if not math.isnan(t)]  # failed: not counted
    sent = sorted(run.sent[k] for k in done)
    answered = sorted(run.answered[k] for k in done)
    held: list[bool] = []
    for k, due in enumerate(run.due):
        full = bisect.bisect_right(sent, due) - bisect.bisect_right(answered, due)
        behind = k > 0 and held[k - 1] and run.sent[k - 1] > due
        held.append(full >= connections or behind)
    return held


def _pack(mediator: str, key: str, count: int) -> list[bytes]:
    """`count` distinct forwards (POST / requests) of the `forward` workload's 1 KiB message
    to `key` from a third party (a fresh key per call; each message authcrypted, and its
    forward anoncrypted, anew: no two alike)."""
    sender = Sender(mediator)
    return [
        build_request("POST", "/", ENVELOPE, sender.wrap(key, dict(FORWARDED)))
        for _ in range(count)
    ]


class DistinctForwards:
    """Distinct forwards to fresh recipients of node 1, packed ahead and taken in turn; new
    recipients are made (and sent one forward each, untimed) as the earlier ones fill up."""

    def __init__(self, recipients: Recipients, port: int) -> None:
        self.recipients = recipients
        self.port = port
        self.ready: list[bytes] = []
        self.taken = 0
        self.made = 0  # recipients
        self._pool: ProcessPoolExecutor | None = None

    def pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(2, mp_context=get_context("spawn"), initializer=_unpin)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    async def top_up(self, count: int) -> None:
        """At least `count` forwards ready: the missing ones to new recipients, at most
        PER_RECIPIENT each."""
        missing = count - (len(self.ready) - self.taken)
        if missing <= 0:
            return
        keys: list[tuple[str, str]] = []
        primers: list[bytes] = []
        for _ in range(-(-missing // PER_RECIPIENT)):
            recipient, key = await self.recipients.mediated()
            await recipient.close()
            keys.append((recipient.routing_key, key))
            primers += _pack(recipient.routing_key, key, 1)
        self.made += len(keys)
        await send_all(self.port, primers, [202])  # each route cached before it is timed
        share = -(-missing // len(keys))
        jobs = [
            (mediator, key, min(PACK_CHUNK, share - start))
            for mediator, key in keys
            for start in range(0, share, PACK_CHUNK)
        ]
        if missing < 2 * PACK_CHUNK:
            parts = [_pack(*job) for job in jobs]
        else:
            loop = asyncio.get_running_loop()
            parts = await asyncio.gather(
                *(loop.run_in_executor(self.pool(), _pack, *job) for job in jobs)
            )
        # Interleaved, so that the recipients take turns as in the `forward` workload.
        self.ready = self.ready[self.taken :]
        self.taken = 0
        width = max(len(p) for p in parts)
        self.ready += [p[i] for i in range(width) for p in parts if i < len(p)]

    def take(self, count: int) -> list[bytes]:
        """The next `count` forwards (ready: see `top_up`)."""
        if len(self.ready) - self.taken < count:
            raise BenchError("forward-latency: not enough forwards packed")
        out = self.ready[self.taken : self.taken + count]
        del self.ready[: self.taken + count]  # not held twice
        self.taken = 0
        return out

    def operation(self) -> Operation:
        """A closed-loop operation taking the ready forwards in turn, each answered 202. When
        they are used up, each connection's loop stops with an error of the block (never a
        duplicate sent instead)."""

        async def op(conn: Connection) -> int:
            if self.taken >= len(self.ready):
                raise HttpError("the forwards packed for this block were used up")
            self.taken += 1
            expect(await conn.request(self.ready[self.taken - 1]), 202)
            return 1

        return op


class ForwardLatency:
    """forward-latency on node 1 of a DIDComm run."""

    def __init__(
        self,
        args: argparse.Namespace,
        servers: Servers,
        blocks: Blocks,
        report: Report,
        recipients: Recipients,
        node1: Target,
    ) -> None:
        self.args = args
        self.servers = servers
        self.blocks = blocks
        self.report = report
        self.node1 = node1
        self.forwards = DistinctForwards(recipients, node1.port)

    async def node_counters(self) -> dict[str, float]:
        """Node 1's duplicate forwards and its hot-path calls with how many were in flight
        as each went (its group commit) so far."""
        node = self.servers.node1
        assert node is not None
        metrics = await node_metrics(node)
        return {k: metrics.get(k, math.nan) for k in (DUPLICATES, IN_FLIGHT_SUM, CALLS)}

    @staticmethod
    def counted(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
        """Duplicates and the mean calls in flight between two `node_counters()`."""
        calls = after[CALLS] - before[CALLS]
        in_flight = after[IN_FLIGHT_SUM] - before[IN_FLIGHT_SUM]
        duplicates = after[DUPLICATES] - before[DUPLICATES]
        return {
            "duplicates": 0 if math.isnan(duplicates) else int(duplicates),
            "redis_calls": None if math.isnan(calls) else int(calls),
            "calls_in_flight": in_flight / calls if calls > 0 else None,
        }

    # ------------------------------------------------------------------ saturation

    async def saturation(self) -> tuple[float, list[dict[str, Any]]]:
        """Closed-loop blocks of --connections on node 1 (a warm-up, then --pairs): the best
        block's forwards answered per second."""
        args = self.args
        best = fastest = 0.0  # fastest: the warm-up too, to size the next block's forwards
        seconds_of: dict[str, float] = {}

        async def prepare(tag: str) -> Operation:
            per_s = 2 * fastest if fastest > 0 else FIRST_GUESS_PER_S
            await self.forwards.top_up(int(per_s * seconds_of[tag]) + 500)
            return self.forwards.operation()

        side = Side("forward-distinct", self.node1, prepare)
        blocks: list[dict[str, Any]] = []
        for b in range(-1, args.pairs):
            seconds = args.warmup if b < 0 else args.seconds
            if seconds <= 0:
                continue
            tag = f"fl-sat{b + 1}"
            seconds_of[tag] = seconds
            before = await self.node_counters()
            block: Block = await self.blocks.run(side, seconds, tag)
            counts = self.counted(before, await self.node_counters())
            fastest = max(fastest, block.rate)
            label = "warm-up" if b < 0 else f"block {b + 1}/{args.pairs}"
            group = counts["calls_in_flight"]
            progress(
                f"forward-latency saturation {label}: {describe(block)}"
                + (f" in flight {group:.1f}" if group else "")
                + (f" {counts['duplicates']} DUPLICATES" if counts["duplicates"] else "")
            )
            if block.errors:
                self.report.errors.append(
                    f"forward-latency saturation {label}: {block.errors} errors, first: "
                    f"{block.first_error}"
                )
            if b >= 0:
                blocks.append(
                    {
                        "seconds": block.seconds,
                        "rate": block.rate,
                        "server_cpu": block.server_cpu_util,
                        "loadgen_cpu": block.loadgen_cpu_util,
                        "redis_cpu": block.redis_cpu_util,
                        "foreign_load": block.foreign_load,
                        "redis_events": block.redis_events,
                        "errors": block.errors,
                        **counts,
                    }
                )
                best = max(best, block.rate)
            await asyncio.sleep(args.pause)
        if best <= 0:
            raise BenchError("forward-latency: node 1 answered no forward in a closed loop")
        return best, blocks

    # ------------------------------------------------------------------ fixed rates

    def count_at(self, rate: float) -> int:
        """Forwards of a fixed rate: --rate-seconds of them, at least MIN_FORWARDS, at most
        RATE_LIMIT_S seconds' and RATE_MAX_FORWARDS."""
        count = max(rate * self.args.rate_seconds, MIN_FORWARDS)
        return max(1, int(min(count, rate * RATE_LIMIT_S, RATE_MAX_FORWARDS)))

    async def at_rate(self, name: str, rate: float) -> dict[str, Any]:
        """Forwards sent to node 1 on a fixed schedule at `rate` over a pool of --connections
        keep-alive connections (open loop), timed each from its write to its answer."""
        requests = self.forwards.take(self.count_at(rate))
        conns = await open_connections(HOST, self.node1.port, self.args.connections)
        try:
            await asyncio.sleep(0.05)
            before = await self.node_counters()
            since = await self.servers.watch()
            run = await open_loop(conns, requests, rate)
            conditions = await since()
            counts = self.counted(before, await self.node_counters())
        finally:
            await close_connections(conns)
        figures = self.rate_figures(name, rate, run, conditions, counts)
        await asyncio.sleep(self.args.pause)
        return figures

    def rate_figures(
        self,
        name: str,
        rate: float,
        run: Schedule,
        conditions: dict[str, Any],
        counts: dict[str, Any],
    ) -> dict[str, Any]:
        done = [k for k, t in enumerate(run.answered) if not math.isnan(t)]
        latency = [(run.answered[k] - run.sent[k]) * 1000 for k in done]
        from_due = [(run.answered[k] - run.due[k]) * 1000 for k in done]
        lag = run.lag_ms()
        late = sum(1 for x in lag if x > LATE_MS)
        held = held_by_pool(run, self.args.connections)
        # The lateness of the sends the pool did not hold up: the sender's own delay.
        free = [x for x, h in zip(lag, held, strict=True) if not h] or [math.nan]
        span = run.sent[-1] - run.sent[0] if len(run.sent) > 1 else 0.0
        sent_rate = (len(run.sent) - 1) / span if span > 0 else math.nan
        if run.errors:
            self.report.errors.append(
                f"forward-latency {name}: {len(run.errors)} forwards failed, first: {run.errors[0]}"
            )
        if not latency:
            raise BenchError(f"forward-latency {name}: no forward was answered 202")
        group = counts["calls_in_flight"]
        progress(
            f"forward-latency {name} ({fmt_rate(rate)}/s, {len(run.sent):,} forwards, sent at "
            f"{fmt_rate(sent_rate)}/s): send -> answer p50 {percentile(latency, 50):.2f} ms "
            f"p99 {percentile(latency, 99):.2f} ms max {max(latency):.2f} ms; from the "
            f"scheduled time p99 {percentile(from_due, 99):.2f} ms; lateness p50 "
            f"{percentile(lag, 50):.2f} ms p99 {percentile(lag, 99):.2f} ms max {max(lag):.2f} "
            f"ms, {late} sends > {LATE_MS:g} ms late, {sum(held)} held up by the pool (all "
            f"{self.args.connections} connections busy), the others' lateness p99 "
            f"{percentile(free, 99):.2f} ms"
            + (f"; calls in flight {group:.1f}" if group else "")
            + (f"; {counts['duplicates']} DUPLICATES" if counts["duplicates"] else "")
            + f" (cpu {fmt_cpu(conditions['cpu'])})"
            + disturbances(conditions["cpu"], conditions["machine"], conditions["redis"])
        )
        return {
            "rate_per_second": rate,
            "sent": len(run.sent),
            "sent_per_second": sent_rate,
            "answered_202": len(done),
            "errors": len(run.errors),
            "send_to_answer_ms": dist(latency),
            "due_to_answer_ms": dist(from_due),
            "lateness_ms": dist(lag),
            "late_sends": late,
            "late_share": late / len(lag),
            "late_threshold_ms": LATE_MS,
            "sends_held_up_by_the_pool": sum(held),
            "lateness_not_held_up_ms": dist(free),
            **counts,
            **conditions,
        }

    # ------------------------------------------------------------------ run

    async def run(self) -> None:
        args = self.args
        progress(
            f"forward-latency: distinct 1 KiB forwards to node 1; {IDLE_RATE:g}/s first, then "
            f"the saturation ({args.connections} connections, closed loop), then "
            f"{', '.join(f'{f:.0%}' for f in args.latency_fractions)} of it (open loop, a "
            f"pool of {args.connections} connections)"
        )
        try:
            await self.forwards.top_up(self.count_at(IDLE_RATE))
            idle = await self.at_rate(f"{IDLE_RATE:g}/s", IDLE_RATE)
            saturation, blocks = await self.saturation()
            # Packed before the first rate: no packing between the rates' schedules.
            counts = [self.count_at(f * saturation) for f in args.latency_fractions]
            await self.forwards.top_up(sum(counts))
            rates = []
            for fraction in args.latency_fractions:
                r = await self.at_rate(f"{fraction:.0%} of saturation", fraction * saturation)
                rates.append({"fraction": fraction, **r})
        finally:
            self.forwards.close()
        self.report_all(idle, saturation, blocks, rates)

    def report_all(
        self,
        idle: dict[str, Any],
        saturation: float,
        blocks: list[dict[str, Any]],
        rates: list[dict[str, Any]],
    ) -> None:
        report = self.report

        def shown(r: dict[str, Any]) -> str:
            ms, lag = r["send_to_answer_ms"], r["lateness_ms"]
            return (
                f"send -> answer p50 {ms['p50']:.2f} ms p99 {ms['p99']:.2f} ms ({r['sent']:,} "
                f"forwards; from the scheduled time p99 {r['due_to_answer_ms']['p99']:.2f} ms; "
                f"lateness p99 {lag['p99']:.2f} ms, {r['late_share']:.1%} of sends > "
                f"{LATE_MS:g} ms late, {r['sends_held_up_by_the_pool']} held up by a full "
                f"pool; the others' lateness p99 {r['lateness_not_held_up_ms']['p99']:.2f} ms)"
            )

        ms = idle["send_to_answer_ms"]
        report.emit(f"forward latency at {IDLE_RATE:g}/s (idle node 1, open loop): {shown(idle)}")
        report.summary.append(
            (
                f"forward latency @{IDLE_RATE:g}/s",
                f"p50 {ms['p50']:.2f} ms (p99 {ms['p99']:.2f})",
                "recorded",
                f"[lateness p99 {idle['lateness_ms']['p99']:.2f} ms]",
            )
        )
        report.emit(
            f"forward saturation of node 1: {fmt_rate(saturation)} forwards/s (the best of "
            f"{len(blocks)} closed-loop blocks of {self.args.connections} connections: "
            f"{', '.join(fmt_rate(b['rate']) for b in blocks)}; distinct forwards, each stored)"
        )
        report.summary.append(
            ("forward saturation (node 1)", f"{fmt_rate(saturation)} forwards/s", "(info)", "")
        )
        judged: dict[str, Any] | None = None
        for r in rates:
            ms = r["send_to_answer_ms"]
            is_judged = math.isclose(r["fraction"], VERDICT_FRACTION)
            status = GOAL.verdict(ms["p99"]) if is_judged else ""
            r["status"] = status or "info"
            if is_judged:
                judged = r
            report.emit(
                f"forward latency at {r['fraction']:.0%} of saturation "
                f"({fmt_rate(r['rate_per_second'])}/s, open loop): {shown(r)}"
                + (f"  target p99 <= {GOAL.value:g} ms  {status}" if is_judged else "")
            )
            report.summary.append(
                (
                    f"forward latency p99 @{r['fraction']:.0%}",
                    f"{ms['p99']:.2f} ms (p50 {ms['p50']:.2f})",
                    f"<= {GOAL.value:g} ms" if is_judged else "(info)",
                    f"{status}  [{fmt_rate(r['rate_per_second'])}/s; lateness p99 "
                    f"{r['lateness_ms']['p99']:.2f} ms]".strip(),
                )
            )
        if judged is None:
            report.emit(f"forward-latency: no rate at {VERDICT_FRACTION:.0%}: not judged")
        report.results["forward-latency"] = {
            "measured_from": "the write of each request (its send) to the read of its answer; "
            "due_to_answer_ms from its scheduled time; lateness_ms = send - scheduled time "
            "(up to about 1 ms by construction: asyncio's timers wake on whole milliseconds)",
            "idle": idle,
            "saturation_per_second": saturation,
            "saturation_definition": "best over closed-loop blocks of --connections of the "
            "forwards node 1 answered 202 per second (distinct forwards, each stored)",
            "saturation_blocks": blocks,
            "rates": rates,
            "recipients": self.forwards.made,
            "forwards_per_recipient_at_most": PER_RECIPIENT,
            "target": f"p99 <= {GOAL.value:g} ms at {VERDICT_FRACTION:.0%} of saturation",
            "status": judged["status"] if judged else "not judged",
        }
