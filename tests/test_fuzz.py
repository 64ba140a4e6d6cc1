"""The fuzzer's short form (tests/soak/fuzz.py): two real nodes on the session's Redis,
every layer of hostile input over HTTP and WebSocket, honest traffic alongside, seeded."""

from __future__ import annotations

import pytest

from tests.soak.fuzz import run

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)


async def test_fuzz_short(redis_url: str) -> None:
    report = await run(
        6_000,
        seed=20_240_601,
        redis_url=redis_url,
        workers=2,
        mqs=False,
        progress=lambda _: None,
        progress_every=5,
    )
    tally = report.tally
    print(report.summary())
    for layer in ("bytes", "json", "envelope", "plaintext", "handshake", "order", "v2"):
        assert tally.inputs[layer] > 0, f"no {layer} input was sent"
    assert tally.sent >= 6_000
    assert tally.server_errors == 0, report.summary()
    assert tally.loop_crashes == 0 and report.crashes.total == 0, report.summary()
    assert tally.http[400] > 0 and tally.frames["unreadable-envelope"] > 0
    assert report.verdict.accepted > 0
    assert not report.verdict.lost and not report.verdict.duplicated, report.verdict.summary()
    assert not report.order_verdict.lost and not report.order_verdict.duplicated
