"""The steady soak's short form (tests/soak/steady.py): saturation measured, then 25 s at
half of it with live, polling and pushed recipients. Every forward accepted, no wallet
error, and the history clean: nothing lost, duplicated, reordered or stray.

Memory flatness (±5 % after warm-up) is asserted by the long form only: 25 s is mostly
warm-up. Here the run just must not leave Redis holding more than it started with plus
what the saturation phase queued (the recipients' queues are empty at the end)."""

from __future__ import annotations

import asyncio

import pytest

from tests.soak.steady import run

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)


async def test_short_steady_soak_delivers_everything_without_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--seconds", "25", "--measure", "4", "--sample", "1", "--progress", "5"]
    argv += ["--live", "12", "--polling", "6", "--pushed", "3", "--no-check-memory"]
    result = await asyncio.to_thread(run, argv)
    print(capsys.readouterr().out)
    assert result.saturation > 0 and result.sent.statuses[202] > 0, result.summary()
    assert set(result.sent.statuses) == {202} and result.sent.unanswered == 0, result.summary()
    assert result.wallet_errors == 0, result.summary()
    v = result.verdict
    assert v.ok and v.delivered == v.accepted, result.summary()
    assert result.samples.redis_used[-1] <= result.samples.redis_used[0] * 1.25, result.summary()
    assert not result.broken, result.summary()
