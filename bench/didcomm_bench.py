"""DIDComm benchmark: forwards, cluster scaling, pickup round trips and live-mode latency.

It reuses the mqs benchmark's machinery (bench/mqs_bench.py): the same embedded server, two
`mediator serve` nodes, the same anchor app (a bare Starlette JSON POST + one XADD), CPU
pinning, and interleaved anchor/subject blocks after a warm-up. Workloads:

  forward   POST / with an anoncrypted routing/1.0 forward of a 1 KiB message for a
            registered recipient key (answered 202)          ratio to anchor       >= 0.5
  forward-device  the same for recipients that registered a phone (push-notifications-fcm,
            the nodes notifying through a webhook to the anchor app): each forward also
            marks the connection and schedules its notification  ratio to anchor >= 0.5
  forward-nodes  the same forwards spread over 1, 2 and 3 nodes sharing the Redis (one
            group of connections per node; node 3 is started for this workload, without
            the in-process worker, like node 2); rounds of anchor, 1, 2, 3 nodes; each a
            ratio to the round's anchor, and the scaling 2/1 and 3/1 nodes     recorded
            (this VM has 2 CPUs shared with Redis and the load generator: see the README)
  pickup    over one WebSocket per recipient: delivery-request(limit 1) -> delivery ->
            messages-received -> status, round trips per second, shown next to the anchor's
            requests per second measured in the same run (one round trip = 2 requests)
  live      live mode on a WebSocket; a sender POSTs forwards one at a time at a low rate;
            from the forward's HTTP answer to the `delivery` frame on the recipient's socket
            (same node), next to a bare PUBLISH -> subscriber floor  p99 <= 2 ms
  live-cross  the same with the forwards answered by the other node: p99 as a multiple of
            the WebSocket floor's p99 (below) measured in the same run         <= 3x
  live-cross-rates  several recipients (--live-recipients) live on node 1, forwards
            answered by node 2. First the saturation of that path: the forwards node 2
            answers in a closed loop of --connections, divided by the time from the
            block's start until the last of them was delivered live (every delivery is
            acknowledged); the highest of --pairs blocks. Then open-loop sends on a fixed
            schedule at fractions of it (--rate-fractions); each delivered message is
            matched to its forward by its ciphertext; p50/p99 from the forward's answer to
            the delivery frame, as a multiple of the WebSocket floor's p99 (measured in
            slices between the rates)             p99 <= 3x the floor at 25% of saturation

The floor of the cross-node figures is what the issue names: a bare PUBLISH (from this
process) to a subscriber that writes it to a WebSocket (the anchor app's `/floor/{name}`
route, on the server CPU), read here by the same client code as the live sockets. The bare
PUBLISH -> subscriber floor (both in this process) is shown next to it.

Envelopes the client would pack are packed before timing where they can be, so the figures
measure the server. Results go to bench/results/didcomm-<timestamp>.json; the exit status is
0 even when a target is missed (the line says MISSED), non-zero only when something failed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from typing import Any

import mqs_bench
from cluster_probes import ENVELOPE, disturbances
from didcomm_cluster import RATE_LIMIT_S, ClusterWorkloads
from loadgen import (
    Connection,
    Operation,
    build_request,
    expect,
    rotating,
)
from mqs_bench import (
    HOST,
    Bench,
    BenchError,
    Proc,
    Side,
    _dist,
    fmt_rate,
    machine,
    percentile,
    progress,
    verdict,
)

from mediator.client import (
    Recipient,
    Sender,
    attachments,
    message,
)

WORKLOADS = (
    "forward",
    "forward-device",
    "forward-nodes",
    "pickup",
    "live",
    "live-cross",
    "live-cross-rates",
)
mqs_bench.TARGETS.update(
    {
        "forward": (">=", 0.5),
        "forward-device": (">=", 0.5),
        "live": ("<=", 2.0),
        "live-cross": ("<=", 3.0),
        "live-cross-rates": ("<=", 3.0),
    }
)
RECIPIENTS_PER_BLOCK = 8  # forwards rotate over them: each queue stays under its count limit


class DidcommBench(ClusterWorkloads, Bench):
    @property
    def base(self) -> str:
        assert self.node1 is not None
        return f"http://{HOST}:{self.node1.port}"

    async def recipient(self, transport: str = "http") -> tuple[Recipient, str]:
        recipient = await Recipient.connect_to(self.base, transport)
        return recipient, await recipient.mediate()

    async def sanity(self) -> None:
        recipient, key = await self.recipient()
        try:
            sender = Sender(recipient.routing_key)
            await sender.send_to(key, {"@type": "x", "n": 1}, self.base)
            delivery = await recipient.deliver()
            got = [recipient.open(body) for _, body in attachments(delivery)]
            if got != [{"@type": "x", "n": 1}]:
                raise BenchError(f"a forwarded message came back as {got!r}")
            await recipient.ack([i for i, _ in attachments(delivery)])
        finally:
            await recipient.close()
        progress("sanity checks passed (mediation, forward, delivery, acknowledgement)")

    # ------------------------------------------------------------------ forward

    def node_proc(self, name: str, in_process_worker: bool, cpu: int | None) -> Proc:
        """Nodes that notify phones through a webhook (the anchor app's XADD route): forwards
        for recipients without a device cost nothing more (the forward's script says so)."""
        proc = super().node_proc(name, in_process_worker, cpu)
        proc.env["MEDIATOR_NOTIFY_WEBHOOK_URL"] = f"http://{HOST}:{self.anchor_port}/xadd/notify"
        proc.env["MEDIATOR_NOTIFY_WEBHOOK_SECRET"] = "bench-webhook-secret"
        return proc

    async def forward_op(self, *, device: bool = False) -> Operation:
        """A closed-loop operation: POST / with a forward of a 1 KiB message, answered 202,
        rotating over RECIPIENTS_PER_BLOCK fresh recipients (any node may answer it), which
        registered a phone to notify when `device`."""
        content = {"@type": "https://didcomm.org/basicmessage/1.0/message", "content": "x" * 1000}
        raws = []
        for i in range(RECIPIENTS_PER_BLOCK):
            recipient, key = await self.recipient()
            if device:
                await recipient.send(
                    message(
                        "push-notifications-fcm/1.0/set-device-info",
                        device_token=f"bench-token-{i}",
                        device_platform="android",
                    )
                )
            await recipient.close()
            wrapped = Sender(recipient.routing_key).wrap(key, content)
            raws.append(build_request("POST", "/", ENVELOPE, wrapped))
        return rotating(raws, 202)

    def forward_side(self, *, device: bool = False) -> Side:
        async def prepare(tag: str) -> Operation:
            return await self.forward_op(device=device)

        async def cleanup(tag: str) -> None:
            return None

        name = "didcomm-forward-device" if device else "didcomm-forward"
        return Side(name, self.node1_target(), prepare, cleanup)

    async def workload_forward(self) -> None:
        r = await self.paired("forward", self.anchor_side(), self.forward_side())
        self.anchor_rate = r.a_rate
        self.results["forward"] = r.to_json()
        self.report_ratio(
            "forward", "forward 1KiB", r, f"anchor {fmt_rate(r.a_rate)}/s", "target >= 0.5"
        )

    async def workload_forward_device(self) -> None:
        r = await self.paired("forward-device", self.anchor_side(), self.forward_side(device=True))
        self.results["forward-device"] = r.to_json()
        plain = self.results.get("forward", {}).get("ratio_median")
        versus = f", {r.ratio / plain:.2f}x a plain forward's ratio" if plain else ""
        self.report_ratio(
            "forward-device",
            "forward 1KiB to a phone",
            r,
            f"anchor {fmt_rate(r.a_rate)}/s{versus}",
            "target >= 0.5",
        )

    # ------------------------------------------------------------------ forward-nodes

    async def workload_pickup(self) -> None:
        args = self.args
        users = args.pickup_recipients
        backlog = int(args.seconds * 4000 / users) + 200
        recipients = []
        for _ in range(users):
            recipient, key = await self.recipient("ws")
            sender = Sender(recipient.routing_key)
            requests = [
                build_request("POST", "/", ENVELOPE, sender.wrap(key, {"n": i}))
                for i in range(backlog)
            ]
            await mqs_bench.bulk(self.node1_target().port, requests, [202])
            recipients.append(recipient)
        progress(f"pickup: {users} recipients with {backlog} queued messages each")
        request = message("messagepickup/2.0/delivery-request", limit=1)
        perf = time.perf_counter
        rates: list[float] = []

        async def loop(i: int, recipient: Recipient, deadline: float, counts: list[int]) -> None:
            packed = recipient.pack(request)
            while perf() < deadline:
                await recipient.ws.send(packed)
                delivery = recipient.open(await recipient.ws.receive(10))
                ids = [a["@id"] for a in delivery.get("~attach", [])]
                if not ids:
                    raise BenchError(f"pickup ran dry: {delivery.get('@type')}")
                ack = message("messagepickup/2.0/messages-received", message_id_list=ids)
                await recipient.ws.send(recipient.pack(ack))
                await recipient.ws.receive(10)  # the status
                counts[i] += 1

        try:
            for block in range(-1, args.pairs):
                seconds = args.warmup if block < 0 else args.seconds
                if seconds <= 0:
                    continue
                counts = [0] * users
                deadline = perf() + seconds

                start = perf()
                await asyncio.gather(
                    *(loop(i, r, deadline, counts) for i, r in enumerate(recipients))
                )
                rate = sum(counts) / (perf() - start)
                label = "warm-up" if block < 0 else f"block {block + 1}/{args.pairs}"
                progress(f"pickup {label}: {fmt_rate(rate)} round trips/s")
                if block >= 0:
                    rates.append(rate)
                await asyncio.sleep(args.pause)
        finally:
            for recipient in recipients:
                await recipient.close()
        rate = statistics.median(rates)
        anchor = getattr(self, "anchor_rate", None)
        versus = (
            f"  = {2 * rate / anchor:.2f}x the anchor's requests/s ({fmt_rate(anchor)}/s, "
            f"2 requests per round trip)"
            if anchor
            else "  (run with the forward workload for the anchor figure)"
        )
        line = f"pickup round trips over WebSocket: {fmt_rate(rate)}/s{versus}"
        self.emit(line)
        self.results["pickup"] = {
            "round_trips_per_second_median": rate,
            "blocks": rates,
            "recipients": users,
            "anchor_requests_per_second": anchor,
            "ratio_requests_to_anchor": 2 * rate / anchor if anchor else None,
        }
        self.summary.append(
            (
                "pickup round trips (ws)",
                f"{fmt_rate(rate)}/s"
                + (f" ({2 * rate / anchor:.2f}x anchor req/s)" if anchor else ""),
                "recorded",
                "",
            )
        )

    # ------------------------------------------------------------------ live

    async def _live_rounds(self, port: int) -> tuple[list[float], list[float]]:
        """Forwards POSTed one at a time to the node on `port`, the recipient's socket live on
        node1: ms from each forward's answer, and from its sending, to the delivery frame."""
        args = self.args
        rounds, gap = args.rounds, 1 / args.live_rate
        recipient, key = await self.recipient("ws")
        sender = Sender(recipient.routing_key)
        status = await recipient.live(True)
        if status.get("live_delivery") is not True:
            raise BenchError(f"live mode was not turned on: {status!r}")
        forwards = [
            build_request("POST", "/", ENVELOPE, sender.wrap(key, {"n": i}))
            for i in range(-min(20, rounds), rounds)
        ]
        conn = await Connection(HOST, port).open()
        after_answer: list[float] = []
        end_to_end: list[float] = []
        perf = time.perf_counter
        try:
            for n, raw in enumerate(forwards):
                i = n - min(20, rounds)
                await asyncio.sleep(gap)
                t0 = perf()
                answer = await conn.request(raw)
                t1 = perf()
                frame = await recipient.ws.receive(10)
                t2 = perf()
                expect(answer, 202)
                delivery = recipient.open(frame)
                if not delivery["@type"].endswith("/delivery"):
                    raise BenchError(f"expected a live delivery, got {delivery['@type']}")
                ids = [a["@id"] for a in delivery["~attach"]]
                await recipient.ws.send(
                    recipient.pack(
                        message(
                            "messagepickup/2.0/messages-received", route=None, message_id_list=ids
                        )
                    )
                )
                if i >= 0:
                    after_answer.append((t2 - t1) * 1000)
                    end_to_end.append((t2 - t0) * 1000)
        finally:
            await conn.close()
            await recipient.close()
        return after_answer, end_to_end

    async def workload_live_cross(self) -> None:
        """The socket on node1, the forwards answered by node2: a wake-up crosses nodes."""
        args = self.args
        assert self.node2 is not None
        since = await self.watch()
        after_answer, _ = await self._live_rounds(self.node2.port)
        conditions = await since()
        floor, bare = await self.floors()
        p50, p99 = percentile(after_answer, 50), percentile(after_answer, 99)
        ratio = p99 / max(percentile(floor, 99), 1e-6)
        status_text = verdict("live-cross", ratio)
        self.emit(
            f"cross-node live delivery (node2 answered -> frame on node1, one at a time at "
            f"{args.live_rate:g}/s): p50 {p50:.2f} ms p99 {p99:.2f} ms = {ratio:.2f}x the "
            f"WebSocket floor's p99 ({percentile(floor, 99):.2f} ms; bare PUBLISH floor p99 "
            f"{percentile(bare, 99):.2f} ms)  target <= 3x  {status_text}"
            + disturbances(conditions["cpu"], conditions["machine"], conditions["redis"])
        )
        self.results["live-cross"] = {
            **conditions,
            "rounds": len(after_answer),
            "rate_per_second": args.live_rate,
            "forward_answer_to_delivery_ms": _dist(after_answer),
            "floor_publish_to_websocket_ms": _dist(floor),
            "floor_publish_to_subscriber_ms": _dist(bare),
            "p99_to_floor_p99": ratio,
            "p99_to_bare_floor_p99": p99 / max(percentile(bare, 99), 1e-6),
            "status": status_text,
        }
        self.summary.append(
            ("cross-node live p99", f"{ratio:.2f}x floor ({p99:.2f} ms)", "<= 3x", status_text)
        )

    # ------------------------------------------------------------------ floors

    async def workload_live(self) -> None:
        args = self.args
        rounds, gap = args.rounds, 1 / args.live_rate
        since = await self.watch()
        after_answer, end_to_end = await self._live_rounds(self.node1_target().port)
        conditions = await since()
        floor = await self.publish_floor(min(rounds, 300), gap)
        p50, p99 = percentile(after_answer, 50), percentile(after_answer, 99)
        status_text = verdict("live", p99)
        line = (
            f"live delivery (forward answered -> delivery frame): p50 {p50:.2f} ms "
            f"p99 {p99:.2f} ms ({len(after_answer)} rounds at {args.live_rate:g}/s)  "
            f"from forward sent: p50 {percentile(end_to_end, 50):.2f} ms "
            f"p99 {percentile(end_to_end, 99):.2f} ms  floor PUBLISH->subscriber "
            f"p50 {percentile(floor, 50):.2f} ms p99 {percentile(floor, 99):.2f} ms  "
            f"target p99 <= 2 ms  {status_text}"
        ) + disturbances(conditions["cpu"], conditions["machine"], conditions["redis"])
        self.emit(line)
        self.results["live"] = {
            **conditions,
            "rounds": len(after_answer),
            "rate_per_second": args.live_rate,
            "forward_answer_to_delivery_ms": _dist(after_answer),
            "forward_sent_to_delivery_ms": _dist(end_to_end),
            "floor_publish_to_subscriber_ms": _dist(floor),
            "target_p99_ms": 2.0,
            "status": status_text,
        }
        self.summary.append(
            (
                "live delivery p99",
                f"{p99:.2f} ms (p50 {p50:.2f})",
                "<= 2 ms",
                f"{status_text}  [floor p99 {percentile(floor, 99):.2f} ms]",
            )
        )

    # ------------------------------------------------------------------ run

    async def run_selected(self) -> None:
        steps = {
            "forward": self.workload_forward,
            "forward-device": self.workload_forward_device,
            "forward-nodes": self.workload_forward_nodes,
            "pickup": self.workload_pickup,
            "live": self.workload_live,
            "live-cross": self.workload_live_cross,
            "live-cross-rates": self.workload_live_cross_rates,
        }
        for name in WORKLOADS:
            if name in self.args.only:
                progress(f"--- {name}")
                await steps[name]()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="What each figure means, and figures measured: bench/README.md.",
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="measured block length (4)")
    parser.add_argument(
        "--pairs",
        type=int,
        default=3,
        help="measured blocks per workload: anchor/subject pairs, rounds of forward-nodes, "
        "saturation blocks (3)",
    )
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up per side (2)")
    parser.add_argument("--pause", type=float, default=0.3, help="idle seconds between blocks")
    parser.add_argument(
        "--connections",
        type=int,
        default=32,
        help="concurrent HTTP connections of a closed loop, split over the nodes in "
        "forward-nodes; also the open loop's pool (32)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=300,
        help="live-latency rounds; the floors take as many (at most 300); the least "
        "forwards per fixed rate (300)",
    )
    parser.add_argument(
        "--live-rate", type=float, default=50.0, help="forwards per second in the live run (50)"
    )
    parser.add_argument(
        "--live-recipients",
        type=int,
        default=4,
        help="live-cross-rates: recipients live on node1, one WebSocket each (4)",
    )
    parser.add_argument(
        "--rate-fractions",
        default="0.1,0.25,0.5",
        help="live-cross-rates: the fixed rates, as fractions of the measured saturation "
        "(0.1,0.25,0.5; the verdict is taken at 0.25)",
    )
    parser.add_argument(
        "--rate-seconds",
        type=float,
        default=6.0,
        help="live-cross-rates: seconds of sends per fixed rate, stretched to at least "
        "--rounds messages, at most 30 s (6)",
    )
    parser.add_argument(
        "--pickup-recipients",
        type=int,
        default=4,
        help="recipients picking up at once, one WebSocket each (4)",
    )
    parser.add_argument(
        "--only",
        default=",".join(WORKLOADS),
        help=f"comma-separated workloads (default all: {','.join(WORKLOADS)})",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 1.5 s blocks, 1 pair (1 round of nodes), 0.5 s warm-ups, 60 live "
        "rounds, 2 s per fixed rate",
    )
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after the forward blocks, one more block per side under py-spy, summarised",
    )
    parser.add_argument("--keep-tmp", action="store_true", help="keep logs and Redis data")
    parser.add_argument(
        "--output-dir", default=str(mqs_bench.BENCH_DIR / "results"), help="where results go"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.pairs, args.warmup, args.rounds = 1.5, 1, 0.5, 60
        args.rate_seconds = 2.0
    try:
        args.rate_fractions = sorted({float(x) for x in args.rate_fractions.split(",") if x})
    except ValueError:
        parser.error("--rate-fractions must be numbers, e.g. 0.1,0.25,0.5")
    if not args.rate_fractions or not all(0 < x <= 1 for x in args.rate_fractions):
        parser.error("--rate-fractions must be fractions in (0, 1]")
    if not (1 <= args.live_recipients <= 64 and 0.5 <= args.rate_seconds <= RATE_LIMIT_S):
        parser.error(f"--live-recipients must be 1..64 and --rate-seconds 0.5..{RATE_LIMIT_S:g}")
    only = {w.strip() for w in args.only.split(",") if w.strip()}
    if only - set(WORKLOADS):
        parser.error(f"unknown workloads {sorted(only - set(WORKLOADS))}")
    if not (0.1 <= args.seconds <= 120 and 1 <= args.pairs <= 50 and args.rounds >= 1):
        parser.error("--seconds must be 0.1..120, --pairs 1..50, --rounds >= 1")
    if not (0.5 <= args.live_rate <= 1000 and 1 <= args.pickup_recipients <= 64):
        parser.error("--live-rate must be 0.5..1000 and --pickup-recipients 1..64")
    # What the mqs machinery reads and this benchmark does not offer.
    args.only = only
    args.redis_url = ""
    return args


async def amain(args: argparse.Namespace) -> tuple[DidcommBench, dict[str, Any]]:
    bench = DidcommBench(args)
    try:
        async with asyncio.timeout(mqs_bench.RUN_TIMEOUT_S):
            started, loadavg = datetime.now(UTC), os.getloadavg()
            progress(
                f"load average {loadavg[0]:.2f} before the run ({os.cpu_count()} CPUs); "
                "phases that other processes disturbed say OTHER PROCESSES"
            )
            await bench.start()
            await bench.sanity()
            await bench.run_selected()
            report = {
                "benchmark": "didcomm",
                "started": started.isoformat(timespec="seconds"),
                "finished": datetime.now(UTC).isoformat(timespec="seconds"),
                "options": {k: v for k, v in vars(args).items() if k != "only"}
                | {"only": sorted(args.only)},
                "pinning": vars(bench.pinning),
                "machine": machine(loadavg),
                "results": bench.results,
                "lines": bench.lines,
                "errors": bench.errors,
                "server_log_lines": bench.node_log_problems()[:200],
            }
    except BaseException:
        for p in bench.procs:
            tail = p.log_tail(1500).strip()
            if tail:
                print(f"--- {p.name} log (last lines) ---\n{tail}", file=sys.stderr)
        raise
    finally:
        await bench.stop()
    return bench, report


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return mqs_bench.run_main(lambda: asyncio.run(amain(args)), "didcomm")


if __name__ == "__main__":
    sys.exit(main())
