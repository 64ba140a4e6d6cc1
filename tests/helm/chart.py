"""Rendering helm/mediator with the real helm binary, and reading the render as data."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "mediator"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
NAMESPACE = "mediator"
RELEASE = "med"

Doc = dict[str, Any]


class RenderError(Exception):
    """helm refused the values; the message is what helm printed."""


@dataclass(frozen=True)
class Render:
    text: str
    docs: list[Doc]

    def of_kind(self, kind: str) -> list[Doc]:
        return [d for d in self.docs if d["kind"] == kind]

    def get(self, kind: str, name: str) -> Doc:
        found = [d for d in self.of_kind(kind) if d["metadata"]["name"] == name]
        assert len(found) == 1, f"{kind}/{name}: {len(found)} in the render"
        return found[0]

    def component(self, kind: str, component: str) -> Doc:
        """The one resource of a kind that carries app.kubernetes.io/component=component."""
        found = [
            d
            for d in self.of_kind(kind)
            if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component
        ]
        assert len(found) == 1, f"{kind} of {component}: {len(found)} in the render"
        return found[0]

    def names(self, kind: str) -> set[str]:
        return {d["metadata"]["name"] for d in self.of_kind(kind)}

    def workloads(self) -> Iterator[tuple[Doc, Doc]]:
        """(resource, pod template) of every Deployment and CronJob."""
        for doc in self.docs:
            if doc["kind"] == "Deployment":
                yield doc, doc["spec"]["template"]
            elif doc["kind"] == "CronJob":
                yield doc, doc["spec"]["jobTemplate"]["spec"]["template"]

    def config(self) -> dict[str, str]:
        """The data of the chart's settings ConfigMap."""
        [found] = [d for d in self.of_kind("ConfigMap") if "MEDIATOR_HOST" in d.get("data", {})]
        data: dict[str, str] = found["data"]
        return data


class Helm:
    def __init__(self, binary: Path) -> None:
        self.binary = binary

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), *args], capture_output=True, text=True, timeout=120, check=False
        )

    def template(
        self,
        values: Sequence[Path] = (),
        sets: Sequence[str] = (),
        api_versions: Sequence[str] = (),
        kube_version: str = "",
    ) -> Render:
        args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
        args += _options(values, sets, api_versions)
        if kube_version:
            args += ["--kube-version", kube_version]
        done = self.run(*args)
        if done.returncode != 0:
            raise RenderError(done.stderr)
        docs = [d for d in yaml.safe_load_all(done.stdout) if d]
        return Render(done.stdout, docs)

    def notes(self, values: Sequence[Path] = (), sets: Sequence[str] = ()) -> str:
        """NOTES.txt as an install prints it (a client-side dry run: no cluster)."""
        args = ["install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client"]
        done = self.run(*args, *_options(values, sets, ()), "-o", "json")
        if done.returncode != 0:
            raise RenderError(done.stderr)
        notes: str = json.loads(done.stdout)["info"]["notes"]
        return notes


def _options(values: Sequence[Path], sets: Sequence[str], api_versions: Sequence[str]) -> list[str]:
    args: list[str] = []
    for path in values:
        args += ["--values", str(path)]
    for assignment in sets:
        args += ["--set", assignment]
    for api in api_versions:
        args += ["--api-versions", api]
    return args


def ci(name: str) -> Path:
    return CHART / "ci" / f"{name}-values.yaml"


def container(pod: Doc, name: str) -> Doc:
    found: list[Doc] = [c for c in pod["spec"]["containers"] if c["name"] == name]
    assert len(found) == 1, name
    return found[0]


def env_value(container: Doc, name: str) -> Doc:
    found: list[Doc] = [e for e in container["env"] if e["name"] == name]
    assert len(found) == 1, name
    return found[0]


def expand(container: Doc, name: str, secrets: dict[str, str]) -> str:
    """An env var's value as Kubernetes gives it to the process: `$(VAR)` replaced by the
    value of a variable defined before it (secrets: values of secretKeyRef'd variables)."""
    known: dict[str, str] = {}
    for entry in container["env"]:
        if "value" in entry:
            value = re.sub(
                r"\$\((\w+)\)", lambda m: known.get(m.group(1), m.group(0)), entry["value"]
            )
        else:
            value = secrets.get(entry["name"], "")
        known[entry["name"]] = value
        if entry["name"] == name:
            return value
    raise KeyError(name)


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())
