"""The README's parameter table and values.schema.json are what the generator makes of
values.yaml today; the chart's copies of the monitoring files equal their sources."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helm.chart import CHART, ROOT


@pytest.mark.full
def test_readme_and_schema_are_current(tools: Path, tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    schema = tmp_path / "values.schema.json"
    shutil.copy(CHART / "README.md", readme)
    done = subprocess.run(
        [
            str(tools / "bin" / "readme-generator"),
            "--values",
            str(CHART / "values.yaml"),
            "--readme",
            str(readme),
            "--schema",
            str(schema),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    regenerate = (
        "regenerate them: readme-generator --values helm/mediator/values.yaml "
        "--readme helm/mediator/README.md --schema helm/mediator/values.schema.json"
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert readme.read_text() == (CHART / "README.md").read_text(), regenerate
    assert schema.read_text() == (CHART / "values.schema.json").read_text(), regenerate


@pytest.mark.parametrize(
    ("copy", "source"),
    [
        ("files/prometheus-rules.yaml", "deploy/prometheus/rules.yaml"),
        ("files/grafana-dashboard.json", "deploy/grafana/mediator.json"),
    ],
)
def test_chart_copies_equal_their_sources(copy: str, source: str) -> None:
    original = ROOT / source
    assert (CHART / copy).read_bytes() == original.read_bytes(), f"cp {source} helm/mediator/{copy}"
