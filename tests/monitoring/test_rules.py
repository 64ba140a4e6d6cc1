"""deploy/prometheus/rules.yaml passes `promtool check rules` and its unit tests
(rules.test.yaml), and those tests cover every rule: each alert fires in some case and stays
quiet in another, each recording rule has an expected value, and an alert that never fired
would fail them."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.monitoring.prometheus import RULES, RULES_TEST, load_rules, tool


def _promtool(*args: str, cwd: Path = RULES.parent) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("promtool"), *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def _cases() -> list[dict[str, Any]]:
    data = yaml.safe_load(RULES_TEST.read_text())
    assert data["rule_files"] == [RULES.name]
    return [case for test in data["tests"] for case in test.get("alert_rule_test", [])]


ALERTS = [rule["alert"] for rule in load_rules() if "alert" in rule]
RECORDS = [rule["record"] for rule in load_rules() if "record" in rule]


@pytest.mark.full
def test_rules_pass_promtool_check() -> None:
    checked = _promtool("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS) + len(RECORDS)} rules found" in checked.stdout


@pytest.mark.full
def test_rules_pass_their_unit_tests() -> None:
    tested = _promtool("test", "rules", RULES_TEST.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


@pytest.mark.parametrize("alert", ALERTS)
def test_every_alert_has_a_firing_and_a_quiet_case(alert: str) -> None:
    cases = [case for case in _cases() if case["alertname"] == alert]
    assert any(case["exp_alerts"] for case in cases), f"{alert} never fires in the tests"
    assert any(not case["exp_alerts"] for case in cases), f"{alert} is never quiet in the tests"
    for case in cases:
        for expected in case["exp_alerts"]:
            # Labels and annotations as Alertmanager gets them, runbook link included.
            assert expected["exp_labels"]["severity"] in ("warning", "critical")
            assert expected["exp_annotations"]["runbook_url"] == (f"docs/deploy.md#{alert.lower()}")


def test_every_recording_rule_has_an_expected_value() -> None:
    data = yaml.safe_load(RULES_TEST.read_text())
    tested = " ".join(
        case["expr"] for test in data["tests"] for case in test.get("promql_expr_test", [])
    )
    assert [record for record in RECORDS if record not in tested] == []


@pytest.mark.full
def test_the_unit_tests_fail_for_any_alert_that_never_fires(tmp_path: Path) -> None:
    """The tests would catch a broken alert: with its expression swapped for one that is never
    true, promtool must report a failure for that alert (one promtool run per alert)."""

    def broken(alert: str) -> str:
        data = yaml.safe_load(RULES.read_text())
        for group in data["groups"]:
            for rule in group["rules"]:
                if rule.get("alert") == alert:
                    rule["expr"] = "vector(1) == 0"
        root = tmp_path / alert
        root.mkdir()
        (root / RULES.name).write_text(yaml.safe_dump(data, sort_keys=False))
        (root / RULES_TEST.name).write_text(RULES_TEST.read_text())
        tested = _promtool("test", "rules", RULES_TEST.name, cwd=root)
        return "" if tested.returncode == 0 else tested.stdout + tested.stderr

    with ThreadPoolExecutor(4) as pool:
        reports = dict(zip(ALERTS, pool.map(broken, ALERTS), strict=True))
    assert [a for a, report in reports.items() if f"alertname: {a}," not in report] == []
