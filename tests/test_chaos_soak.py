"""The chaos soak's short form: three nodes, a random one killed and restarted every 1.5 s
while forwards flow to live recipients. Nothing accepted may be lost."""

from __future__ import annotations

import asyncio

import pytest

from tests.soak.chaos import main

pytestmark = pytest.mark.topology  # run again on Sentinel and Redis Cluster


async def test_short_chaos_soak_loses_nothing(capsys: object) -> None:
    args = ["--nodes", "3", "--recipients", "20", "--messages", "300", "--rate", "60"]
    args += ["--kill-every", "1.5", "--settle", "20"]
    code = await asyncio.to_thread(main, args)
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    print(out)
    last = out.strip().splitlines()[-1]
    assert code == 0 and " lost 0 " in last, out
    assert "nodes killed 0" not in last  # the chaos did happen
