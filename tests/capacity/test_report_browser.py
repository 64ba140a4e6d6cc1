"""The report the job writes from a 30-day history, opened in headless Chromium as an SRE
opens it: light and dark, every chart drawn, nothing fetched, nothing blank."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.capacity.browser import PageView, needs_chromium, open_page
from tests.capacity.scenario import capacity
from tests.capacity.synthetic import write_history

# Starts processes: the full tier; runs Spark: on the Spark modules' worker (tests/tiers.py).
pytestmark = [pytest.mark.full, pytest.mark.timeout(600)]

CHARTS = {
    "forecast", "server-share", "server-fragmentation", "mailbox-ccdf", "mailbox-lorenz",
    "age-heatmap", "staleness", "inflight-deliveries", "skew-heatmap", "throughput",
}  # fmt: skip


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    history = tmp_path_factory.mktemp("history")
    per_day = [10_000] * 15 + [40_000] * 15  # a launch on day 15
    write_history(history, days=30, mailboxes=600, skip=(9,), added_per_day=per_day)
    out = tmp_path_factory.mktemp("report")
    done = capacity("report", "--history", str(history), "--out", str(out), "--top", "10")
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.fixture(scope="module", params=[False, True], ids=["light", "dark"])
def view(request: pytest.FixtureRequest, report: Path) -> PageView:
    needs_chromium()
    return open_page(report / "report.html", dark=request.param)


def test_every_chart_is_drawn_without_errors(view: PageView) -> None:
    assert view.console_errors == []
    assert set(view.chart_names) == CHARTS and view.svg_count == len(CHARTS)
    assert not view.is_blank()


def test_the_scheme_follows_the_reader(view: PageView) -> None:
    channels = [int(c) for c in view.background.split("(")[1].split(")")[0].split(",")[:3]]
    if view.color_scheme_dark:
        assert sum(channels) < 3 * 80, view.background
    else:
        assert sum(channels) > 3 * 200, view.background


def test_what_the_first_screen_says(view: PageView, report: Path) -> None:
    summary: dict[str, Any] = json.loads((report / "summary.json").read_text())
    verdict = summary["verdict"]
    assert verdict["status"] in ("under", "right", "over")
    text = view.text
    # The verdict and its reasons come before the first chart (the forecast's).
    assert text.index(verdict["reasons"][0][:30]) < text.index("Used memory, daily peak")
    assert summary["throughput"]["change_points"][0]["date"] == "2026-10-16"
    assert summary["history"]["gaps"] == ["2026-10-10"]
    html = (report / "report.html").read_text()
    assert "http://" not in html and "https://" not in html
