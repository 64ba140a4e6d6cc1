"""The chart's tools and renders, shared by the helm tests.

The tools (helm 4, readme-generator, kubernetes-validate, checkov) come from
helm/tools/install.sh, pinned and cached. Each `ci/*-values.yaml` is rendered once a session;
the tests read the renders as data.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helm.chart import CI_VALUES, Helm, Render
from tests.servers import missing

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "helm" / "tools" / "install.sh"
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The first test of a fresh machine waits for install.sh (about a minute and a half)."""
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.timeout(600))


@pytest.fixture(scope="session")
def tools() -> Path:
    """The folder of the pinned tools (its bin/ holds helm, checkov, ...)."""
    for needed in ("npm", "node"):
        if shutil.which(needed) is None:
            missing(f"{needed} is needed to install the chart tools (helm/tools/install.sh)")
    done = subprocess.run([str(INSTALL)], capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        pytest.fail(f"helm/tools/install.sh failed:\n{done.stderr}")
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def helm(tools: Path) -> Helm:
    return Helm(tools / "bin" / "helm")


@pytest.fixture(scope="session")
def renders(helm: Helm) -> dict[str, Render]:
    """Every ci/*-values.yaml rendered once, with the Prometheus Operator's API present."""
    return {
        path.name.removesuffix("-values.yaml"): helm.template(
            values=[path], api_versions=["monitoring.coreos.com/v1"]
        )
        for path in CI_VALUES
    }


@pytest.fixture(scope="session")
def render_dir(renders: dict[str, Render], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The renders as files, one per values file, for the checkers that read folders."""
    folder = tmp_path_factory.mktemp("renders")
    for name, render in renders.items():
        (folder / f"{name}.yaml").write_text(render.text)
    return folder
