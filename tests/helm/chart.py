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


def secret_refs(container: Doc) -> dict[str, tuple[str, str]]:
    """The container's variables Kubernetes fills from a Secret: name -> (Secret, key)
    (`envFrom` Secrets as `*`)."""
    refs = {
        e["name"]: (e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
        for e in container.get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    for source in container.get("envFrom", []):
        if "secretRef" in source:
            refs[f"{source.get('prefix', '')}*"] = (source["secretRef"]["name"], "*")
    return refs


def secret_file(pod: Doc, container: Doc, path: str) -> tuple[str, str]:
    """The Secret and key whose value the container reads at `path`: a file of a mounted
    `secret` volume (its items, else every key under its own name) or of a `projected`
    volume's secret sources. Fails when no mounted Secret gives that file."""
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    for mount in container.get("volumeMounts", []):
        folder = mount["mountPath"].rstrip("/") + "/"
        if not path.startswith(folder):
            continue
        name = path[len(folder) :]
        volume = volumes[mount["name"]]
        if "secret" in volume:
            sources = [{"name": volume["secret"]["secretName"], **volume["secret"]}]
        else:
            sources = [s["secret"] for s in volume.get("projected", {}).get("sources", [])]
        for source in sources:
            items = source.get("items")
            if items is None:
                return source["name"], name
            for item in items:
                if item["path"] == name:
                    return source["name"], item["key"]
    raise AssertionError(f"no mounted Secret gives {path}")


def process_environment(
    render: Render, pod: Doc, container: Doc, secrets: dict[tuple[str, str], str], folder: Path
) -> dict[str, str]:
    """The environment the container's process gets, as Kubernetes gives it: the ConfigMap,
    then `env` with `$(VAR)` expanded and secretKeyRefs filled from `secrets` ((Secret, key)
    -> value). Each *_FILE variable naming a mounted Secret file that `secrets` has a value
    for then names a copy of that file written under `folder`."""
    env = dict(render.config())
    for entry in container["env"]:
        if "value" in entry:
            env[entry["name"]] = re.sub(
                r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), entry["value"]
            )
        else:
            ref = entry["valueFrom"]["secretKeyRef"]
            env[entry["name"]] = secrets[(ref["name"], ref["key"])]
    for name, path in list(env.items()):
        if not name.endswith("_FILE"):
            continue
        try:
            source = secret_file(pod, container, path)
        except AssertionError:
            continue
        if source in secrets:
            local = folder / path.lstrip("/")
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text(secrets[source])
            env[name] = str(local)
    return env


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())
