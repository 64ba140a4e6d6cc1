"""The chaos soak's short form: three nodes, a random one killed and restarted every 1.5 s
while forwards flow to live recipients. The history's checker must find nothing accepted
lost, nothing duplicated beyond the forwards sent again, nothing stray."""

from __future__ import annotations

import asyncio
import re

import pytest

from tests.soak.chaos import main

pytestmark = [pytest.mark.topology, pytest.mark.full]  # run again on Sentinel and Redis Cluster


async def test_short_chaos_soak_loses_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--nodes", "3", "--recipients", "20", "--messages", "300", "--rate", "60"]
    args += ["--kill-every", "1.5", "--settle", "20"]
    code = await asyncio.to_thread(main, args)
    out = capsys.readouterr().out
    print(out)
    figures = next(line for line in out.splitlines() if line.startswith("history: "))
    assert code == 0, out
    assert " lost 0 " in figures and " duplicated 0 " in figures and " stray 0 " in figures
    accepted = re.search(r"accepted (\d+)", figures)
    assert accepted is not None and int(accepted.group(1)) == 300, figures
    assert "nodes killed 0," not in out  # the chaos did happen
