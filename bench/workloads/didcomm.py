"""DIDComm benchmark: forwards, cluster scaling, pickup round trips and live-mode latency.

It uses the harness as the mqs benchmark does: the same embedded server, two `mediator serve`
nodes, the same anchor app (a bare Starlette JSON POST + one XADD), CPU pinning, and
interleaved anchor/subject blocks after a warm-up. Workloads:

  forward   POST / with an anoncrypted routing/1.0 forward of a 1 KiB message for a
            registered recipient key (answered 202)          ratio to anchor       >= 0.5
  forward-v2  POST / with a DIDComm v2 routing/2.0 forward (anoncrypt X25519, A256CBC-HS512)
            of a 1 KiB message for a mediated v2 wallet's DID, in blocks alternating with
            the v1 forward above                              ratio to v1 forward   >= 0.8
  forward-v2-p256  the same v2 forward on P-256 (both layers anoncrypted ECDH-ES on P-256,
            to our `#key-3` and to a P-256 wallet), in blocks alternating with the X25519
            one                                            ratio to X25519      recorded
  pickup-v2  Pickup 3.0 over one WebSocket per v2 wallet (delivery-request limit 1 ->
            delivery -> messages-received -> status) in blocks alternating with Pickup 2.0's
            same round trip by v1 recipients               ratio to Pickup 2.0   >= 0.8
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
  live-v2   the same for a DIDComm v2 wallet in Pickup 3.0 live mode, in turns with v1
            rounds: v2's p99 as a multiple of v1's                          <= 1.2
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
  forward-latency  the time node 1 takes to answer a forward (the `forward` workload's
            request, but each one distinct, so stored), from the write of the request to
            its answer, open loop on a fixed schedule over a pool of --connections
            keep-alive connections: at 10 forwards/s (an idle node; --rate-seconds, at
            least 60 forwards), then the saturation (the best closed-loop block of
            --connections), then at --latency-fractions of it; schedule lateness (sends
            that went out late) reported apart                  p50 at 10/s recorded,
                                                       p99 <= 5 ms at 50% of saturation

The nodes run without the limits that would cap these figures (bench/harness/limits.py):
forwards per recipient per second (live-cross-rates' saturation, the pickup backlogs) and
WebSocket frames per second (a pickup round trip is two frames).

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
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from bench.harness import cli
from bench.harness.blocks import BlockOptions, Blocks, Side, Target, report_paired
from bench.harness.conditions import disturbances
from bench.harness.errors import BenchError
from bench.harness.floors import publish_floor, websocket_floor
from bench.harness.limits import FORWARDS_PER_RECIPIENT, WEBSOCKET_FRAMES
from bench.harness.loadgen import HOST, Connection, Operation, build_request, expect, send_all
from bench.harness.machine import machine_info
from bench.harness.output import Goal, dist, fmt_rate, percentile, progress
from bench.harness.report import Report, options
from bench.harness.run import guarded, run_main
from bench.harness.servers import Servers
from bench.support.live import ENVELOPE
from bench.support.recipients import Recipients
from bench.support.wallets_v2 import WalletsV2
from bench.workloads import live_v2, pickup_v2
from bench.workloads.didcomm_cluster import RATE_LIMIT_S, ClusterWorkloads
from bench.workloads.forward_latency import ForwardLatency
from mediator.client import Recipient, Sender, message
from mediator.errors import EnvelopeError

WORKLOADS = (
    "forward",
    "forward-v2",
    "forward-v2-p256",
    "forward-device",
    "forward-nodes",
    "pickup",
    "pickup-v2",
    "live",
    "live-v2",
    "live-cross",
    "live-cross-rates",
    "forward-latency",
)
GOALS = {
    "forward": Goal(">=", 0.5),
    "forward-v2": Goal(">=", 0.8),
    "pickup-v2": Goal(">=", 0.8),
    "forward-device": Goal(">=", 0.5),
    "live": Goal("<=", 2.0),
    "live-v2": Goal("<=", 1.2),
    "live-cross": Goal("<=", 3.0),
}
RUN_TIMEOUT_S = 20 * 60  # the whole run, whatever the options
LIMITS_OFF = (FORWARDS_PER_RECIPIENT, WEBSOCKET_FRAMES)


class DidcommBench:
    """The DIDComm workloads on node 1 (node 2 answering the cross-node forwards)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.report = Report(LIMITS_OFF)
        self.servers = Servers("didcomm-bench-", limits_off=LIMITS_OFF)
        # Nodes that notify phones through a webhook (the anchor app's XADD route): forwards
        # for recipients without a device cost nothing more (the forward's script says so).
        # Their v2 DID lists the P-256 key (forward-v2-p256); X25519 stays first, so the
        # other v2 workloads encrypt as before.
        self.servers.node_env |= {
            "MEDIATOR_V2_NIST_KEYS": "true",
            "MEDIATOR_NOTIFY_WEBHOOK_URL": f"http://{HOST}:{self.servers.anchor_port}/xadd/notify",
            "MEDIATOR_NOTIFY_WEBHOOK_SECRET": "bench-webhook-secret",
        }
        self.blocks = Blocks(self.servers, BlockOptions.from_args(args), self.report)
        self.anchor_rate: float | None = None
        self._recipients: Recipients | None = None
        self._wallets: WalletsV2 | None = None

    @property
    def recipients(self) -> Recipients:
        """Recipients of node 1."""
        if self._recipients is None:
            raise BenchError("node 1 is not started")
        return self._recipients

    def node1_target(self) -> Target:
        node1 = self.servers.node1
        assert node1 is not None
        return Target("node1", node1.port, node1.pid)

    async def start(self) -> None:
        await self.servers.start_all(self.args.no_pin)
        self._recipients = Recipients(self.node1_target().port)
        self._wallets = WalletsV2(self.node1_target().port)

    async def stop(self) -> None:
        await self.servers.stop(self.args.keep_tmp)

    async def floors(self) -> tuple[list[float], list[float]]:
        """The PUBLISH -> subscriber -> WebSocket floor and the bare PUBLISH -> subscriber
        floor, one at a time at --live-rate (--rounds, at most 300, each)."""
        rounds, gap = min(self.args.rounds, 300), 1 / self.args.live_rate
        servers = self.servers
        ws = await websocket_floor(
            servers.anchor_port, servers.redis_url, servers.run_id, rounds, gap
        )
        return ws, await publish_floor(servers.redis_url, servers.run_id, rounds, gap)

    # ------------------------------------------------------------------ forward

    def forward_side(self, *, device: bool = False) -> Side:
        async def prepare(tag: str) -> Operation:
            return await self.recipients.forward_op(device=device)

        name = "didcomm-forward-device" if device else "didcomm-forward"
        return Side(name, self.node1_target(), prepare)

    async def workload_forward(self) -> None:
        anchor = self.blocks.anchor_side()
        r = await self.blocks.paired("forward", anchor, self.forward_side())
        self.anchor_rate = r.a_rate
        self.report.results["forward"] = r.to_json()
        other = f"anchor {fmt_rate(r.a_rate)}/s"
        goal = GOALS["forward"]
        report_paired(self.report, "forward", goal, "forward 1KiB", r, other, "target >= 0.5")

    def forward_v2_side(self, curve: str = "X25519") -> Side:
        async def prepare(tag: str) -> Operation:
            assert self._wallets is not None
            return await self._wallets.forward_op(curve)

        name = "didcomm-forward-v2" if curve == "X25519" else f"didcomm-forward-v2-{curve}"
        return Side(name, self.node1_target(), prepare)

    async def workload_forward_v2_p256(self) -> None:
        """A P-256 v2 forward against the X25519 one, in alternating blocks: what the NIST
        curve costs (ECDH through `cryptography` against libsodium's X25519)."""
        r = await self.blocks.paired(
            "forward-v2-p256", self.forward_v2_side(), self.forward_v2_side("P-256")
        )
        self.report.results["forward-v2-p256"] = r.to_json()
        report_paired(
            self.report,
            "forward-v2-p256",
            None,
            "v2 forward P-256 vs X25519",
            r,
            f"X25519 v2 forward {fmt_rate(r.a_rate)}/s",
            "recorded",
        )

    async def workload_forward_v2(self) -> None:
        """A DIDComm v2 forward (anoncrypt X25519, A256CBC-HS512, a 1 KiB message) against a
        v1 forward (anoncrypt of the same size), in alternating blocks."""
        r = await self.blocks.paired("forward-v2", self.forward_side(), self.forward_v2_side())
        self.report.results["forward-v2"] = r.to_json()
        report_paired(
            self.report,
            "forward-v2",
            GOALS["forward-v2"],
            "v2 forward 1KiB vs v1",
            r,
            f"v1 forward {fmt_rate(r.a_rate)}/s",
            "target >= 0.8",
        )

    async def workload_forward_device(self) -> None:
        anchor = self.blocks.anchor_side()
        r = await self.blocks.paired("forward-device", anchor, self.forward_side(device=True))
        self.report.results["forward-device"] = r.to_json()
        plain = self.report.results.get("forward", {}).get("ratio_median")
        versus = f", {r.ratio / plain:.2f}x a plain forward's ratio" if plain else ""
        report_paired(
            self.report,
            "forward-device",
            GOALS["forward-device"],
            "forward 1KiB to a phone",
            r,
            f"anchor {fmt_rate(r.a_rate)}/s{versus}",
            "target >= 0.5",
        )

    # ------------------------------------------------------------------ pickup

    async def workload_pickup_v2(self) -> None:
        assert self._wallets is not None
        args = self.args
        result = await pickup_v2.run(
            self.recipients,
            self._wallets,
            self.node1_target().port,
            users=args.pickup_recipients,
            seconds=args.seconds,
            pairs=args.pairs,
        )
        self.report.results["pickup-v2"] = result
        ratio = result["ratio_median"]
        goal = GOALS["pickup-v2"]
        v1 = statistics.median(result["v1_round_trips_per_second"])
        self.report.emit(
            f"Pickup 3.0 over WebSocket vs Pickup 2.0: ratio {ratio:.2f} "
            f"(min {min(result['ratios']):.2f}, max {max(result['ratios']):.2f}; "
            f"Pickup 2.0 {fmt_rate(v1)} round trips/s)  target >= 0.8  "
            f"{'OK' if goal.met(ratio) else 'MISSED'}"
        )

    async def workload_pickup(self) -> None:
        args = self.args
        users = args.pickup_recipients
        recipients, senders, keys = [], [], []
        for _ in range(users):
            recipient, key = await self.recipients.mediated("ws")
            recipients.append(recipient)
            senders.append(Sender(recipient.routing_key))
            keys.append(key)
        port = self.node1_target().port
        queued = [0] * users  # each round trip takes one message
        sent = [0] * users

        async def top_up(want: int) -> None:
            """Forward to each recipient until `want` messages wait (the per-recipient
            forward limit is off: a 429 is an error)."""
            batches = []
            for i in range(users):
                more = range(sent[i], sent[i] + max(0, want - queued[i]))
                batches.append(
                    [
                        build_request("POST", "/", ENVELOPE, senders[i].wrap(keys[i], {"n": n}))
                        for n in more
                    ]
                )
                sent[i] += len(more)
                queued[i] += len(more)
            await asyncio.gather(*(send_all(port, b, [202]) for b in batches if b))

        # Before each block, refilled to 2.5 times what the fastest block so far took.
        backlog = int(args.seconds * 4000 / users) + 200
        await top_up(backlog)
        progress(f"pickup: {users} recipients with {backlog} queued messages each")
        request = message("messagepickup/2.0/delivery-request", limit=1)
        perf = time.perf_counter
        rates: list[float] = []

        def opened(recipient: Recipient, frame: bytes) -> dict[str, Any]:
            try:
                return recipient.open(frame)
            except EnvelopeError:  # e.g. a limit's `rate-limited` frame
                raise BenchError(f"pickup: the node answered {frame[:300]!r}") from None

        async def loop(i: int, recipient: Recipient, deadline: float, counts: list[int]) -> None:
            packed = recipient.pack(request)
            while perf() < deadline:
                await recipient.ws.send(packed)
                delivery = opened(recipient, await recipient.ws.receive(10))
                ids = [a["@id"] for a in delivery.get("~attach", [])]
                if not ids:
                    raise BenchError(f"pickup ran dry: {delivery.get('@type')}")
                ack = message("messagepickup/2.0/messages-received", message_id_list=ids)
                await recipient.ws.send(recipient.pack(ack))
                opened(recipient, await recipient.ws.receive(10))  # the status
                counts[i] += 1

        try:
            for block in range(-1, args.pairs):
                seconds = args.warmup if block < 0 else args.seconds
                if seconds <= 0:
                    continue
                fastest = max(rates, default=0.0) / users * seconds
                await top_up(max(backlog, int(2.5 * fastest) + 200))
                counts = [0] * users
                deadline = perf() + seconds

                start = perf()
                await asyncio.gather(
                    *(loop(i, r, deadline, counts) for i, r in enumerate(recipients))
                )
                rate = sum(counts) / (perf() - start)
                queued = [q - c for q, c in zip(queued, counts, strict=True)]
                label = "warm-up" if block < 0 else f"block {block + 1}/{args.pairs}"
                progress(f"pickup {label}: {fmt_rate(rate)} round trips/s")
                if block >= 0:
                    rates.append(rate)
                await asyncio.sleep(args.pause)
        finally:
            for recipient in recipients:
                await recipient.close()
        rate = statistics.median(rates)
        anchor = self.anchor_rate
        versus = (
            f"  = {2 * rate / anchor:.2f}x the anchor's requests/s ({fmt_rate(anchor)}/s, "
            f"2 requests per round trip)"
            if anchor
            else "  (run with the forward workload for the anchor figure)"
        )
        self.report.emit(f"pickup round trips over WebSocket: {fmt_rate(rate)}/s{versus}")
        self.report.results["pickup"] = {
            "round_trips_per_second_median": rate,
            "blocks": rates,
            "recipients": users,
            "anchor_requests_per_second": anchor,
            "ratio_requests_to_anchor": 2 * rate / anchor if anchor else None,
        }
        self.report.summary.append(
            (
                "pickup round trips (ws)",
                f"{fmt_rate(rate)}/s"
                + (f" ({2 * rate / anchor:.2f}x anchor req/s)" if anchor else ""),
                "recorded",
                "",
            )
        )

    # ------------------------------------------------------------------ live

    async def live_rounds(self, port: int) -> tuple[list[float], list[float]]:
        """Forwards POSTed one at a time to the node on `port`, the recipient's socket live on
        node1: ms from each forward's answer, and from its sending, to the delivery frame."""
        args = self.args
        rounds, gap = args.rounds, 1 / args.live_rate
        recipient, key = await self.recipients.mediated("ws")
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

    async def workload_live(self) -> None:
        args = self.args
        rounds, gap = args.rounds, 1 / args.live_rate
        since = await self.servers.watch()
        after_answer, end_to_end = await self.live_rounds(self.node1_target().port)
        conditions = await since()
        servers = self.servers
        floor = await publish_floor(servers.redis_url, servers.run_id, min(rounds, 300), gap)
        p50, p99 = percentile(after_answer, 50), percentile(after_answer, 99)
        status_text = GOALS["live"].verdict(p99)
        self.report.emit(
            f"live delivery (forward answered -> delivery frame): p50 {p50:.2f} ms "
            f"p99 {p99:.2f} ms ({len(after_answer)} rounds at {args.live_rate:g}/s)  "
            f"from forward sent: p50 {percentile(end_to_end, 50):.2f} ms "
            f"p99 {percentile(end_to_end, 99):.2f} ms  floor PUBLISH->subscriber "
            f"p50 {percentile(floor, 50):.2f} ms p99 {percentile(floor, 99):.2f} ms  "
            f"target p99 <= 2 ms  {status_text}"
            + disturbances(conditions["cpu"], conditions["machine"], conditions["redis"])
        )
        self.report.results["live"] = {
            **conditions,
            "rounds": len(after_answer),
            "rate_per_second": args.live_rate,
            "forward_answer_to_delivery_ms": dist(after_answer),
            "forward_sent_to_delivery_ms": dist(end_to_end),
            "floor_publish_to_subscriber_ms": dist(floor),
            "target_p99_ms": 2.0,
            "status": status_text,
        }
        self.report.summary.append(
            (
                "live delivery p99",
                f"{p99:.2f} ms (p50 {p50:.2f})",
                "<= 2 ms",
                f"{status_text}  [floor p99 {percentile(floor, 99):.2f} ms]",
            )
        )

    async def workload_live_v2(self) -> None:
        """v1 live rounds and v2 live rounds (Pickup 3.0) in turn, in halves: the p99 of v2's
        from the forward's answer to the delivery frame, as a multiple of v1's."""
        assert self._wallets is not None
        args = self.args
        port = self.node1_target().port
        half = max(args.rounds // 2, 50)
        v1: list[float] = []
        v2: list[float] = []
        for _ in range(2):
            self.args.rounds = half
            try:
                v1 += (await self.live_rounds(port))[0]
            finally:
                self.args.rounds = args.rounds
            v2 += await live_v2.live_rounds(self._wallets, port, half, 1 / args.live_rate)
        p99_1, p99_2 = percentile(v1, 99), percentile(v2, 99)
        ratio = p99_2 / max(p99_1, 1e-6)
        status_text = GOALS["live-v2"].verdict(ratio)
        self.report.emit(
            f"v2 live delivery (Pickup 3.0, forward answered -> delivery frame): p50 "
            f"{percentile(v2, 50):.2f} ms p99 {p99_2:.2f} ms; v1 p50 {percentile(v1, 50):.2f} "
            f"ms p99 {p99_1:.2f} ms ({len(v2)} rounds each at {args.live_rate:g}/s)  "
            f"p99 ratio {ratio:.2f}  target <= 1.2  {status_text}"
        )
        self.report.results["live-v2"] = {
            "v1_forward_answer_to_delivery_ms": dist(v1),
            "v2_forward_answer_to_delivery_ms": dist(v2),
            "p99_ratio": ratio,
            "status": status_text,
        }
        self.report.summary.append(
            ("v2 live p99 / v1", f"{ratio:.2f} ({p99_2:.2f} ms)", "<= 1.2", status_text)
        )

    async def workload_live_cross(self) -> None:
        """The socket on node1, the forwards answered by node2: a wake-up crosses nodes."""
        args = self.args
        assert self.servers.node2 is not None
        since = await self.servers.watch()
        after_answer, _ = await self.live_rounds(self.servers.node2.port)
        conditions = await since()
        floor, bare = await self.floors()
        p50, p99 = percentile(after_answer, 50), percentile(after_answer, 99)
        ratio = p99 / max(percentile(floor, 99), 1e-6)
        status_text = GOALS["live-cross"].verdict(ratio)
        self.report.emit(
            f"cross-node live delivery (node2 answered -> frame on node1, one at a time at "
            f"{args.live_rate:g}/s): p50 {p50:.2f} ms p99 {p99:.2f} ms = {ratio:.2f}x the "
            f"WebSocket floor's p99 ({percentile(floor, 99):.2f} ms; bare PUBLISH floor p99 "
            f"{percentile(bare, 99):.2f} ms)  target <= 3x  {status_text}"
            + disturbances(conditions["cpu"], conditions["machine"], conditions["redis"])
        )
        self.report.results["live-cross"] = {
            **conditions,
            "rounds": len(after_answer),
            "rate_per_second": args.live_rate,
            "forward_answer_to_delivery_ms": dist(after_answer),
            "floor_publish_to_websocket_ms": dist(floor),
            "floor_publish_to_subscriber_ms": dist(bare),
            "p99_to_floor_p99": ratio,
            "p99_to_bare_floor_p99": p99 / max(percentile(bare, 99), 1e-6),
            "status": status_text,
        }
        self.report.summary.append(
            ("cross-node live p99", f"{ratio:.2f}x floor ({p99:.2f} ms)", "<= 3x", status_text)
        )

    # ------------------------------------------------------------------ run

    def cluster(self) -> ClusterWorkloads:
        return ClusterWorkloads(self.args, self.servers, self.blocks, self.report, self.recipients)

    async def workload_forward_latency(self) -> None:
        latency = ForwardLatency(
            self.args,
            self.servers,
            self.blocks,
            self.report,
            self.recipients,
            self.node1_target(),
        )
        await latency.run()

    async def run(self) -> dict[str, Any]:
        args = self.args
        started, loadavg = datetime.now(UTC), os.getloadavg()
        progress(
            f"load average {loadavg[0]:.2f} before the run ({os.cpu_count()} CPUs); "
            "phases that other processes disturbed say OTHER PROCESSES"
        )
        await self.start()
        await self.recipients.sanity()
        cluster = self.cluster()
        steps: dict[str, Callable[[], Awaitable[None]]] = {
            "forward": self.workload_forward,
            "forward-v2": self.workload_forward_v2,
            "forward-v2-p256": self.workload_forward_v2_p256,
            "pickup-v2": self.workload_pickup_v2,
            "live-v2": self.workload_live_v2,
            "forward-device": self.workload_forward_device,
            "forward-nodes": cluster.workload_forward_nodes,
            "pickup": self.workload_pickup,
            "live": self.workload_live,
            "live-cross": self.workload_live_cross,
            "live-cross-rates": cluster.workload_live_cross_rates,
            "forward-latency": self.workload_forward_latency,
        }
        for name in WORKLOADS:
            if name in args.only:
                progress(f"--- {name}")
                await steps[name]()
        return {
            "benchmark": "didcomm",
            "started": started.isoformat(timespec="seconds"),
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            "options": options(args),
            "pinning": vars(self.servers.pinning),
            "machine": machine_info(loadavg),
            "results": self.report.results,
            "lines": self.report.lines,
            "errors": self.report.errors,
            "server_log_lines": self.servers.log_problems()[:200],
        }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.new_parser(
        __doc__ or "", "What each figure means, and figures measured: bench/README.md."
    )
    cli.add_blocks(
        parser,
        pairs_help="measured blocks per workload: anchor/subject pairs, rounds of "
        "forward-nodes, saturation blocks",
        connections_help="concurrent HTTP connections of a closed loop, split over the nodes "
        "in forward-nodes; also the open loop's pool",
    )
    add = parser.add_argument
    add(
        "--rounds",
        type=int,
        default=300,
        help="live-latency rounds; the floors take as many (at most 300); the least "
        "forwards per fixed rate (300)",
    )
    add("--live-rate", type=float, default=50.0, help="forwards per second in the live run (50)")
    add(
        "--live-recipients",
        type=int,
        default=4,
        help="live-cross-rates: recipients live on node1, one WebSocket each (4)",
    )
    add(
        "--rate-fractions",
        default="0.1,0.25,0.5",
        help="live-cross-rates: the fixed rates, as fractions of the measured saturation "
        "(0.1,0.25,0.5; the verdict is taken at 0.25)",
    )
    add(
        "--rate-seconds",
        type=float,
        default=6.0,
        help="live-cross-rates and forward-latency: seconds of sends per fixed rate, "
        "stretched to at least --rounds messages (forward-latency: 60 forwards), at most "
        "30 s (6)",
    )
    add(
        "--latency-fractions",
        default="0.25,0.5,0.75",
        help="forward-latency: the fixed rates after the idle one, as fractions of the "
        "measured saturation (0.25,0.5,0.75; the verdict is taken at 0.5)",
    )
    add(
        "--pickup-recipients",
        type=int,
        default=4,
        help="recipients picking up at once, one WebSocket each (4)",
    )
    cli.add_only(parser, WORKLOADS)
    add(
        "--quick",
        action="store_true",
        help="smoke run: 1.5 s blocks, 1 pair (1 round of nodes), 0.5 s warm-ups, 60 live "
        "rounds, 2 s per fixed rate",
    )
    cli.add_profile(
        parser, "after the forward blocks, one more block per side under py-spy, summarised"
    )
    cli.add_run(parser, "didcomm")
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
    try:
        args.latency_fractions = sorted({float(x) for x in args.latency_fractions.split(",") if x})
    except ValueError:
        parser.error("--latency-fractions must be numbers, e.g. 0.25,0.5,0.75")
    if not args.latency_fractions or not all(0 < x <= 1 for x in args.latency_fractions):
        parser.error("--latency-fractions must be fractions in (0, 1]")
    if not (1 <= args.live_recipients <= 64 and 0.5 <= args.rate_seconds <= RATE_LIMIT_S):
        parser.error(f"--live-recipients must be 1..64 and --rate-seconds 0.5..{RATE_LIMIT_S:g}")
    args.only = cli.parse_only(parser, args.only, WORKLOADS)
    cli.check_blocks(parser, args)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if not (0.5 <= args.live_rate <= 1000 and 1 <= args.pickup_recipients <= 64):
        parser.error("--live-rate must be 0.5..1000 and --pickup-recipients 1..64")
    return args


async def amain(args: argparse.Namespace) -> tuple[Report, dict[str, Any]]:
    bench = DidcommBench(args)
    doc = await guarded(bench.servers, bench.run(), RUN_TIMEOUT_S, bench.stop)
    return bench.report, doc


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_main(lambda: asyncio.run(amain(args)), args.output_dir, "didcomm")
