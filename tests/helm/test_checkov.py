"""checkov on every render: no failed check, and each skip written in the chart with its reason."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm.chart import CHART, Helm

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)

# Why each skipped check does not apply; the reasons themselves live in the chart
# (templates/_helpers.tpl, mediator.checkovSkips) as checkov.io/skipN annotations.
SKIPPED = {
    "CKV_K8S_35",  # secrets as files: only where a secret must be a variable (see below)
    "CKV_K8S_43",  # image by digest: only while image.digest is empty
    "CKV_K8S_15",  # pull policy Always: only while image.pullPolicy is not Always
}


def checkov(tools: Path, folder: Path) -> dict[str, Any]:
    done = subprocess.run(
        [
            str(tools / "bin" / "checkov"),
            "--directory",
            str(folder),
            "--framework",
            "kubernetes",
            "--output",
            "json",
            "--skip-download",  # offline: no policy metadata from the vendor's API
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.stdout.strip(), done.stderr
    report = json.loads(done.stdout)
    results: dict[str, Any] = (report[0] if isinstance(report, list) else report)["results"]
    return results


@pytest.fixture(scope="module")
def results(tools: Path, render_dir: Path) -> dict[str, Any]:
    """checkov's report on every ci/*-values.yaml render, made once."""
    return checkov(tools, render_dir)


def test_no_failed_check(results: dict[str, Any]) -> None:
    failed = [(r["check_id"], r["resource"], r["file_path"]) for r in results["failed_checks"]]
    skipped = results["skipped_checks"]
    templates = (CHART / "templates" / "_helpers.tpl").read_text()

    assert failed == []
    assert len(results["passed_checks"]) > 500
    assert {s["check_id"] for s in skipped} <= SKIPPED
    for skip in skipped:
        reason = skip["check_result"]["suppress_comment"]
        assert len(reason) > 20, skip["check_id"]
        assert f"{skip['check_id']}={reason}" in templates
    full = {(s["check_id"], s["resource"]) for s in skipped if "didcomm" in s["resource"]}
    assert full == set()  # full: digests, Always, and every secret a file


def test_secrets_as_files_pass(results: dict[str, Any]) -> None:
    """CKV_K8S_35 (secrets as files, not variables) passes on every node and worker and on
    the capacity CronJobs (full, cluster), the snapshot reading the Redis password from its
    file too; no render skips it."""
    passed = {
        (r["file_path"], r["resource"].split(".")[-1])
        for r in results["passed_checks"]
        if r["check_id"] == "CKV_K8S_35"
    }
    skipped = {
        (r["file_path"], r["resource"].split(".")[-1])
        for r in results["skipped_checks"]
        if r["check_id"] == "CKV_K8S_35"
    }
    fullname = {"full": "med-didcomm"}

    for mode in ("standalone", "sentinel", "cluster", "minimal", "full"):
        name = fullname.get(mode, "med-mediator")
        assert {(f"/{mode}.yaml", f"{name}-node"), (f"/{mode}.yaml", f"{name}-worker")} <= passed
    for mode in ("cluster", "full"):
        name = fullname.get(mode, "med-mediator")
        jobs = {(f"/{mode}.yaml", f"{name}-capacity-{job}") for job in ("snapshot", "report")}
        assert jobs <= passed, mode
    assert skipped == set()


def without_skips(text: str) -> str:
    docs = [d for d in yaml.safe_load_all(text) if d]
    for doc in docs:
        annotations = doc["metadata"].get("annotations") or {}
        for key in [k for k in annotations if k.startswith("checkov.io/skip")]:
            del annotations[key]
    return yaml.safe_dump_all(docs)


def test_a_secret_as_a_variable_is_skipped_where_it_must_be(
    helm: Helm, tools: Path, tmp_path: Path
) -> None:
    """A whole Redis URL from a Secret stays a variable: the skip covers the nodes, workers
    and capacity snapshot. The control: the same renders without the chart's skips fail
    CKV_K8S_35 there, and only there; the full render, whose every secret is a file, passes
    it without skips."""
    url_key = helm.template(
        sets=[
            "redis.existingSecret=redis-url",
            "redis.existingSecretUrlKey=url",
            "capacity.enabled=true",
        ]
    ).text
    full = helm.template(values=[CHART / "ci" / "full-values.yaml"]).text
    (tmp_path / "skips").mkdir()
    (tmp_path / "skips" / "url.yaml").write_text(url_key)
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "url.yaml").write_text(without_skips(url_key))
    (tmp_path / "bare" / "full.yaml").write_text(without_skips(full))

    with_skips = checkov(tools, tmp_path / "skips")
    bare = checkov(tools, tmp_path / "bare")
    skipped = {r["resource"] for r in with_skips["skipped_checks"] if r["check_id"] == "CKV_K8S_35"}
    failed = {
        (r["file_path"], r["resource"])
        for r in bare["failed_checks"]
        if r["check_id"] == "CKV_K8S_35"
    }
    passed = {
        (r["file_path"], r["resource"])
        for r in bare["passed_checks"]
        if r["check_id"] == "CKV_K8S_35"
    }
    url_workloads = {
        "Deployment.mediator.med-mediator-node",
        "Deployment.mediator.med-mediator-worker",
        "CronJob.mediator.med-mediator-capacity-snapshot",
    }

    assert with_skips["failed_checks"] == []
    assert skipped == url_workloads
    assert failed == {("/url.yaml", resource) for resource in url_workloads}
    assert {
        ("/url.yaml", "CronJob.mediator.med-mediator-capacity-report"),
        ("/full.yaml", "Deployment.mediator.med-didcomm-node"),
        ("/full.yaml", "Deployment.mediator.med-didcomm-worker"),
        ("/full.yaml", "CronJob.mediator.med-didcomm-capacity-snapshot"),
        ("/full.yaml", "CronJob.mediator.med-didcomm-capacity-report"),
    } <= passed


def test_checkov_fails_a_weakened_chart(helm: Helm, tools: Path, tmp_path: Path) -> None:
    """The control: the same run flags a root filesystem made writable."""
    render = helm.template(
        sets=[
            "redis.url=redis://redis-master:6379/0",
            "containerSecurityContext.readOnlyRootFilesystem=false",
        ]
    )
    (tmp_path / "weak.yaml").write_text(render.text)
    results = checkov(tools, tmp_path)

    assert {r["check_id"] for r in results["failed_checks"]} == {"CKV_K8S_22"}
