"""The capacity report's page as a reader sees it: rendered from a summary, opened in headless
Chromium in light and dark, and checked for what is on screen. No Spark needed.

Three summaries: a rich one covering every section (`sample_summary.json`), a near-empty one
(no snapshots at all), and one day of a standalone server.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from spark import charts, page
from tests.capacity.browser import PageView, is_blank, needs_chromium, open_page

SAMPLE = Path(__file__).with_name("sample_summary.json")
ALL_CHARTS = [
    "forecast",
    "server-share",
    "server-fragmentation",
    "mailbox-ccdf",
    "mailbox-lorenz",
    "age-heatmap",
    "staleness",
    "inflight-deliveries",
    "skew-heatmap",
    "throughput",
]
ONE_PRIMARY = [name for name in ALL_CHARTS if name != "skew-heatmap"]
SECTIONS = [
    "verdict",
    "forecast",
    "servers",
    "mailboxes",
    "age",
    "staleness",
    "inflight",
    "dead_letters",
    "live",
    "skew",
    "throughput",
    "coverage",
]
# What the tests read from the page besides PageView's own fields.
PROBES = {
    "sections": "[...document.querySelectorAll('main > section')].map(s => s.id)",
    "embedded": "JSON.parse(document.getElementById('summary').textContent)",
    "badge_top": "document.querySelector('#verdict .badge').getBoundingClientRect().top",
    "chart_top": "document.querySelector('svg.chart').getBoundingClientRect().top",
    "verdict_first": (
        "!!(document.querySelector('#verdict .badge').compareDocumentPosition("
        "document.querySelector('svg.chart')) & Node.DOCUMENT_POSITION_FOLLOWING)"
    ),
    "verdict_text": "document.querySelector('#verdict').innerText",
    "other_rows": "[...document.querySelectorAll('tr.other')].map(r => r.innerText)",
    "notices": "[...document.querySelectorAll('header .callout')].map(c => c.innerText)",
    "no_data": "document.querySelectorAll('svg.chart text.nodata').length",
    "forecast_dots": "document.querySelectorAll('svg[data-chart=forecast] circle').length",
}


# The summaries --------------------------------------------------------------------------------


def rich() -> dict[str, Any]:
    summary: dict[str, Any] = json.loads(SAMPLE.read_text())
    return summary


def near_empty() -> dict[str, Any]:
    """No snapshot in the window: every figure null, every list empty."""
    return {
        "schema_version": 1,
        "generated_at": "2026-11-24T12:00:00Z",
        "history": {
            "path": "/data/capacity",
            "days_requested": 30,
            "first_date": None,
            "last_date": None,
            "snapshots": 0,
            "days_with_data": 0,
            "gaps": [],
            "latest_snapshot_time": None,
            "mode": None,
        },
        "notices": ["No snapshots under /data/capacity in the last 30 days."],
        "verdict": {
            "status": "undecided",
            "reasons": [],
            **dict.fromkeys(
                [
                    "memory_headroom",
                    "horizon_days",
                    "peak_used_memory",
                    "projected_used_memory",
                    "memory_per_primary",
                    "primaries_now",
                    "recommended_primaries",
                    "recommended_memory_per_primary",
                    "n_plus_one_fits",
                    "peak_forwards_per_second",
                    "node_forwards_per_second",
                    "nodes_now",
                    "recommended_nodes",
                ]
            ),
        },
        "forecast": {
            "status": "not_enough_history",
            "min_days": 7,
            "days_of_history": 0,
            "slope_bytes_per_day": None,
            "intercept_bytes": None,
            "r2": None,
            "points": [],
            "cone": [],
            "headroom_line": None,
            "capacity": None,
            "days_to_headroom": None,
            "days_to_capacity": None,
        },
        "servers": [],
        "mailboxes": {
            "count": None,
            "didcomm": None,
            "mqs": None,
            "messages": dict.fromkeys(["total", "p50", "p95", "p99", "max"]),
            "bytes": dict.fromkeys(["total", "p50", "p95", "p99", "max"]),
            "ccdf": [],
            "lorenz": [],
            "gini": None,
            "top1_bytes_share": None,
            "heaviest": [],
        },
        "age": {
            "buckets": ["empty", "< 1 h", "1-6 h", "6-24 h", "1-7 d", "7-30 d", "> 30 d"],
            "days": [],
            "past_horizon": None,
        },
        "staleness": [],
        "inflight": {
            "messages": None,
            "mailboxes": None,
            "histogram": [],
            "max_deliveries": None,
            "redelivered_mailboxes": None,
        },
        "dead_letters": [],
        "live": {
            "sockets": None,
            "with_backlog": None,
            "backlog_messages": None,
            "by_node": [],
            "worst": [],
        },
        "skew": {
            "applies": False,
            "threshold": 1.2,
            "keys_max_mean": None,
            "bytes_max_mean": None,
            "flagged": False,
            "primaries": [],
            "heatmap": {"rows": [], "columns": 64, "values": []},
        },
        "throughput": {"days": [], "change_points": [], "peak_forwards_per_second": None},
        "coverage": dict.fromkeys(
            [
                "snapshot_time",
                "read_from",
                "mailboxes_read",
                "mailboxes_in_books",
                "share_read",
                "memory",
                "memory_sample_rate",
                "memory_sampled_mailboxes",
                "estimated_mailbox_memory",
                "replica_lag_seconds",
                "replica_lag_bytes",
                "commands",
                "duration_seconds",
            ]
        ),
    }


def one_day() -> dict[str, Any]:
    """The first day of a standalone server: one point, zeros, one primary."""
    summary = near_empty()
    day = "2026-11-24"
    summary["history"].update(
        first_date=day,
        last_date=day,
        snapshots=1,
        days_with_data=1,
        latest_snapshot_time="2026-11-24T03:00:00Z",
        mode="standalone",
    )
    summary["notices"] = ["Only one day of history: trends need at least 7 days."]
    summary["verdict"].update(
        status="right",
        reasons=["the primary peaked at 41 % of maxmemory (target 60 %); no trend yet"],
        memory_headroom=0.6,
        horizon_days=30,
        peak_used_memory=440_000_000,
        projected_used_memory=440_000_000,
        memory_per_primary=1_073_741_824,
        primaries_now=1,
        recommended_primaries=2,
        recommended_memory_per_primary=1_073_741_824,
        n_plus_one_fits=False,
        peak_forwards_per_second=3.5,
        node_forwards_per_second=3000,
        nodes_now=1,
        recommended_nodes=2,
    )
    summary["forecast"].update(
        days_of_history=1,
        points=[{"date": day, "used_memory": 440_000_000}],
        headroom_line=644_245_094,
        capacity=1_073_741_824,
    )
    summary["servers"] = [
        {
            "server": "127.0.0.1:6379",
            "role": "primary",
            "primary": None,
            "used_memory": 440_000_000,
            "used_memory_peak": 450_000_000,
            "maxmemory": 1_073_741_824,
            "capacity": 1_073_741_824,
            "used_share": 0.41,
            "rss": 470_000_000,
            "fragmentation": 1.07,
            "keys": 130,
            "ops_per_sec": 0,
            "clients": 2,
            "replication_lag_seconds": None,
            "aof_size": None,
            "slots": None,
            "over_headroom": False,
            "fragmented": False,
        }
    ]
    summary["mailboxes"].update(
        count=120,
        didcomm=120,
        mqs=0,
        messages={"total": 14, "p50": 0, "p95": 1, "p99": 3, "max": 3},
        bytes={"total": 52_000, "p50": 0, "p95": 4_000, "p99": 12_000, "max": 12_000},
        ccdf=[{"messages": 1, "share": 0.08}, {"messages": 3, "share": 0.0083}],
        lorenz=[{"mailboxes": 0.0, "bytes": 0.0}, {"mailboxes": 0.92, "bytes": 0.0}],
        gini=0.95,
        top1_bytes_share=0.23,
        heaviest=[
            {
                "mailbox": "9c1e0f4b7a2d4e55b0c3a1f2e8d7c6b5",
                "namespace": "didcomm",
                "messages": 3,
                "bytes": 12_000,
                "oldest_age_seconds": 5400,
                "live": False,
            }
        ],
    )
    summary["age"].update(days=[{"date": day, "counts": [110, 4, 3, 2, 1, 0, 0]}], past_horizon=0)
    summary["staleness"] = [{"days": d, "mailboxes": 0, "bytes": 0} for d in (7, 30, 90)]
    summary["inflight"].update(messages=0, mailboxes=0, max_deliveries=0, redelivered_mailboxes=0)
    summary["live"].update(
        sockets=4, with_backlog=0, backlog_messages=0, by_node=[{"node": "n1", "sockets": 4}]
    )
    summary["skew"]["primaries"] = [
        {"server": "127.0.0.1:6379", "keys": 130, "bytes": 52_000, "mailboxes": 120, "ratio": 1.0}
    ]
    summary["skew"]["heatmap"] = None
    summary["throughput"].update(
        days=[
            {
                "date": day,
                "added": 40,
                "delivered": 30,
                "acknowledged": 26,
                "expired": 0,
                "dead_lettered": 0,
            }
        ],
        peak_forwards_per_second=3.5,
    )
    summary["coverage"].update(
        snapshot_time="2026-11-24T03:00:00Z",
        read_from="primary",
        mailboxes_read=120,
        mailboxes_in_books=120,
        share_read=1.0,
        memory="exact",
        memory_sample_rate=1.0,
        memory_sampled_mailboxes=120,
        estimated_mailbox_memory=61_000,
        commands=512,
        duration_seconds=0.4,
    )
    return summary


SUMMARIES: dict[str, tuple[Callable[[], dict[str, Any]], list[str]]] = {
    "rich": (rich, ALL_CHARTS),
    "empty": (near_empty, ONE_PRIMARY),
    "one_day": (one_day, ONE_PRIMARY),
}


# Opening pages --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str, bool], PageView]]:
    """Each summary's page, opened once per colour scheme; screenshots stay in tmp_path."""
    views: dict[tuple[str, bool], PageView] = {}

    def view(name: str, dark: bool) -> PageView:
        if (name, dark) not in views:
            needs_chromium()
            folder = tmp_path_factory.mktemp(f"{name}-{'dark' if dark else 'light'}")
            report = folder / "report.html"
            report.write_text(page.render(SUMMARIES[name][0]()), encoding="utf-8")
            views[name, dark] = open_page(report, dark=dark, evaluate=PROBES)
            (folder / "screenshot.png").write_bytes(views[name, dark].screenshot)
        return views[name, dark]

    yield view


def _luminance(css: str) -> float:
    red, green, blue = (int(v) for v in re.findall(r"\d+", css)[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


# What a reader sees ---------------------------------------------------------------------------


@pytest.mark.full
@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
@pytest.mark.parametrize("name", list(SUMMARIES))
def test_page_draws_every_chart_without_errors(
    seen: Callable[[str, bool], PageView], name: str, dark: bool
) -> None:
    view = seen(name, dark)
    assert view.console_errors == []
    assert view.chart_names == SUMMARIES[name][1]
    assert view.svg_count == len(SUMMARIES[name][1])
    assert not is_blank(view.screenshot)
    assert view.values["sections"] == SECTIONS


@pytest.mark.full
@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_colour_scheme_follows_the_reader(
    seen: Callable[[str, bool], PageView], dark: bool
) -> None:
    view = seen("rich", dark)
    assert view.color_scheme_dark is dark
    if dark:
        assert _luminance(view.background) < 0.2, view.background
    else:
        assert _luminance(view.background) > 0.9, view.background


@pytest.mark.full
@pytest.mark.parametrize("name", list(SUMMARIES))
def test_verdict_is_on_the_first_screen_before_any_chart(
    seen: Callable[[str, bool], PageView], name: str
) -> None:
    view = seen(name, False)
    assert view.values["verdict_first"] is True
    assert view.values["badge_top"] < view.values["chart_top"]
    assert view.values["badge_top"] < 900
    status = {"rich": "Under-provisioned", "empty": "Undecided", "one_day": "Right-sized"}[name]
    assert status in view.values["verdict_text"]


@pytest.mark.full
@pytest.mark.parametrize("name", list(SUMMARIES))
def test_embedded_summary_parses_back(seen: Callable[[str, bool], PageView], name: str) -> None:
    assert seen(name, False).values["embedded"] == SUMMARIES[name][0]()


@pytest.mark.full
def test_capped_table_shows_its_other_row(seen: Callable[[str, bool], PageView]) -> None:
    (other,) = seen("rich", False).values["other_rows"]
    assert other.split("\t")[0] == "other (119,980 more)"
    assert "2,391,002" in other
    assert "1.3 GiB" in other


@pytest.mark.full
def test_rich_summary_reads_in_human_units(seen: Callable[[str, bool], PageView]) -> None:
    text = seen("rich", False).text
    for shown in ["1,000,000", "1.7 GiB", "71 %", "2 d 12 h", "65 d 12 h", "19.5 MiB /day"]:
        assert shown in text
    assert seen("rich", False).values["notices"] == rich()["notices"]


@pytest.mark.full
@pytest.mark.parametrize("name", ["empty", "one_day"])
def test_short_history_says_so_and_still_draws_the_points(
    seen: Callable[[str, bool], PageView], name: str
) -> None:
    view = seen(name, False)
    assert "Not enough history for a forecast" in view.text
    assert view.values["forecast_dots"] == len(SUMMARIES[name][0]()["forecast"]["points"])
    assert "One primary: no skew to show." in view.text


@pytest.mark.full
def test_empty_history_draws_empty_frames(seen: Callable[[str, bool], PageView]) -> None:
    view = seen("empty", False)
    assert view.values["no_data"] == len(ONE_PRIMARY)
    assert "no snapshots" in view.text
    assert "No snapshots under /data/capacity in the last 30 days." in view.values["notices"]


@pytest.mark.full
def test_text_from_the_summary_cannot_break_out(tmp_path: Path) -> None:
    needs_chromium()
    summary = rich()
    hostile = "</script><script>console.error('escaped')</script><b>bold</b> & <!-- --> \u2028"
    summary["notices"].append(hostile)
    summary["verdict"]["reasons"].append(hostile)
    report = tmp_path / "report.html"
    report.write_text(page.render(summary), encoding="utf-8")
    view = open_page(report, evaluate=PROBES)
    assert view.console_errors == []
    assert view.values["embedded"] == summary
    assert hostile in view.values["notices"]
    assert view.svg_count == len(ALL_CHARTS)


# The HTML itself ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SUMMARIES))
def test_page_has_no_urls(name: str) -> None:
    html = page.render(SUMMARIES[name][0]())
    assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", html, re.IGNORECASE)
    assert '<meta name="color-scheme" content="light dark">' in html
    assert "@media (prefers-color-scheme:dark)" in html
    assert "@media print" in html


@pytest.mark.parametrize(
    "summary",
    [
        {},
        dict.fromkeys(["history", "verdict", "forecast", "servers", "mailboxes", "skew"]),
        {"verdict": {"status": "sideways", "reasons": "not a list"}, "servers": [None, 3, "x"]},
        {"forecast": {"points": [{"date": "yesterday", "used_memory": float("nan")}]}},
        {"age": {"buckets": ["a"], "days": [{"date": "2026-11-24", "counts": None}]}},
        {"skew": {"applies": True, "heatmap": {"rows": ["p"], "columns": 1e12, "values": 7}}},
    ],
    ids=["nothing", "nulls", "wrong-types", "nan", "null-counts", "absurd-heatmap"],
)
def test_any_figure_may_be_missing(summary: dict[str, Any]) -> None:
    html = page.render(summary)
    assert html.count("<svg") == html.count('<svg class="chart"') >= 8
    assert not re.search(r"\b(nan|inf|infinity)\b", html.split('id="summary"')[0], re.IGNORECASE)
    embedded = html.split('id="summary">')[1].split("</script>")[0]
    json.loads(embedded)


# The chart builders alone ---------------------------------------------------------------------

DAY = date(2026, 11, 24)
NAN = math.nan
SHAPES: dict[str, Callable[[list[Any]], str]] = {
    "line": lambda v: charts.line_chart(
        "t",
        "t",
        [(date.fromordinal(DAY.toordinal() + i), x) for i, x in enumerate(v)],
        cone=[charts.Band(DAY, x, x, x) for x in v[:1]],
        refs=[charts.Ref("cap", v[0] if v else None)],
    ),
    "bars": lambda v: charts.bar_chart("t", "t", [charts.Bar(str(i), x) for i, x in enumerate(v)]),
    "hbars": lambda v: charts.hbar_chart(
        "t", "t", [charts.Bar(str(i), x) for i, x in enumerate(v)]
    ),
    "ccdf": lambda v: charts.ccdf_chart("t", "t", [(x, x) for x in v]),
    "lorenz": lambda v: charts.lorenz_chart("t", "t", [(x, x) for x in v]),
    "heatmap": lambda v: charts.heatmap("t", "t", ["r"], [str(i) for i in range(len(v))], [v]),
    "diverging": lambda v: charts.heatmap("t", "t", ["r"], ["c"] * len(v), [v], center=1.0),
    "daily": lambda v: charts.daily_bars(
        "t",
        "t",
        [date.fromordinal(DAY.toordinal() + i) for i in range(len(v))],
        [[charts.Series("a", v)], [charts.Series("b", v), charts.Series("c", v)]],
        markers=[charts.Marker(DAY, "here")],
    ),
}
VALUES = {
    "empty": [],
    "one": [0.5],
    "zeros": [0, 0, 0],
    "nulls": [None, None],
    "mixed": [None, 0.2, NAN, 1e12, float("inf"), -3, True],
}


@pytest.mark.parametrize("values", list(VALUES.values()), ids=list(VALUES))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_chart_survives_odd_data(shape: str, values: list[Any]) -> None:
    svg = SHAPES[shape](values)
    assert svg.startswith('<svg class="chart" data-chart="t" role="img"')
    assert svg.count("<svg") == 1 and svg.endswith("</svg>")
    assert "<title>t</title>" in svg
    assert not re.search(r"nan|inf", svg, re.IGNORECASE)


def test_units_read_like_a_person_wrote_them() -> None:
    assert charts.fmt_count(12345) == "12,345"
    assert charts.fmt_bytes(1.2 * 1024**3) == "1.2 GiB"
    assert charts.fmt_bytes(512) == "512 B"
    assert charts.fmt_share(0.61) == "61 %"
    assert charts.fmt_share(0.0001) == "0.01 %"
    assert charts.fmt_duration(3 * 86400 + 4 * 3600 + 59) == "3 d 4 h"
    assert charts.fmt_duration(95) == "1 min 35 s"
    assert charts.fmt_compact(2_500_000) == "2.5M"
    for fmt in (charts.fmt_count, charts.fmt_bytes, charts.fmt_share, charts.fmt_duration):
        assert fmt(None) == fmt(NAN) == fmt(True) == charts.DASH
