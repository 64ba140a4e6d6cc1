"""The layers hold (`make lint` runs import-linter on the tree), and the contract bites: an
import of workers/ (or of the benchmarks, bench/) anywhere under mediator/, even inside a
function, breaks it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.full  # runs lint-imports on copies of the tree

ROOT = Path(__file__).resolve().parents[1]


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(lint), "--no-logo", "--no-cache"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name in ("mediator", "workers", "spark", "bench"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def test_the_tree_keeps_every_contract(tree: Path):
    result = _lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 4 kept, 0 broken." in result.stdout


def test_importing_workers_inside_a_function_under_mediator_breaks_the_contract(tree: Path):
    books = tree / "mediator" / "engine" / "books.py"
    books.write_text(books.read_text() + "\n\ndef _sneaky() -> None:\n    import workers.runner\n")
    result = _lint(tree)
    assert result.returncode == 1, result.stdout
    assert "mediator/ never imports workers/, spark/ or bench/ BROKEN" in result.stdout
    assert "mediator.engine.books -> workers.runner" in result.stdout
    # and the layers inside mediator/: the engine may not reach up to the protocols
    books.write_text(books.read_text() + "\n\nfrom mediator.protocols import routing\n")
    result = _lint(tree)
    assert "the node's layers BROKEN" in result.stdout


def test_importing_the_benchmarks_under_mediator_breaks_the_contract(tree: Path):
    metrics = tree / "mediator" / "ops" / "metrics.py"
    metrics.write_text(
        metrics.read_text() + "\n\ndef _sneaky() -> None:\n    import bench.harness.limits\n"
    )
    result = _lint(tree)
    assert result.returncode == 1, result.stdout
    assert "mediator/ never imports workers/, spark/ or bench/ BROKEN" in result.stdout
    assert "mediator.ops.metrics -> bench.harness.limits" in result.stdout
