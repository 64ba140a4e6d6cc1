"""`helm lint --strict` on the chart with every ci/*-values.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helm.chart import CHART, CI_VALUES, Helm


@pytest.mark.full
@pytest.mark.parametrize("values", CI_VALUES, ids=lambda p: p.name)
def test_lint_strict(helm: Helm, values: Path) -> None:
    done = helm.run("lint", "--strict", str(CHART), "--values", str(values))

    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout


def test_ci_values_cover_every_mode() -> None:
    """The five renders the issue asks for: each Redis mode, the least, everything on."""
    assert {p.name for p in CI_VALUES} == {
        "standalone-values.yaml",
        "sentinel-values.yaml",
        "cluster-values.yaml",
        "minimal-values.yaml",
        "full-values.yaml",
    }
