"""kubernetes-validate --strict on every render, for the oldest and the newest Kubernetes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helm.chart import Render

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)

# Chart.yaml says kubeVersion >=1.30.0-0; 1.37 is the newest the pinned kubernetes-validate
# (1.37.0) has schemas for.
VERSIONS = ["1.30.0", "1.37.0"]
# Custom resources have no schema in kubernetes-validate: they are checked as data by
# test_render_cluster.py instead.
CUSTOM = {"HTTPRoute", "ServiceMonitor", "PrometheusRule"}


def validate(tools: Path, version: str, *files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tools / "bin" / "kubernetes-validate"), "--strict", "-k", version, "--quiet"]
        + [str(f) for f in files],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_every_render_validates(tools: Path, render_dir: Path, version: str) -> None:
    files = sorted(render_dir.glob("*.yaml"))
    done = validate(tools, version, *files)

    assert len(files) == 5
    assert done.returncode == 0, done.stdout + done.stderr
    for line in done.stdout.splitlines():
        assert line.startswith("WARN") and "Couldn't find schema for kind" in line, line
        assert any(f"kind {kind} " in line for kind in CUSTOM), line


def test_strict_validation_catches_an_unknown_field(
    tools: Path, renders: dict[str, Render], tmp_path: Path
) -> None:
    """The control: the same validator refuses a pod spec with a field Kubernetes lacks."""
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        renders["minimal"].text.replace(
            "terminationGracePeriodSeconds: 40",
            "terminationGracePeriodSeconds: 40\n      drainSeconds: 25",
        )
    )
    done = validate(tools, VERSIONS[0], broken)

    assert done.returncode != 0
    assert "drainSeconds" in done.stdout + done.stderr
