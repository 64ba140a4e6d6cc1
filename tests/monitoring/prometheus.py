"""What the monitoring tests run: Debian's `prometheus` and `promtool`, a real Prometheus server
on a free loopback port, a `mediator worker` with its metrics endpoint, and the rule file."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

from mediator.embedded import free_port
from tests.servers import missing

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yaml"
RULES_TEST = ROOT / "deploy" / "prometheus" / "rules.test.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "mediator.json"
INSTALL = "deploy/prometheus/install.sh"

T = TypeVar("T")


def tool(name: str) -> str:
    """The path of `prometheus` or `promtool`; skipped locally, failed in CI, when missing."""
    path = shutil.which(name)
    if path is None:
        missing(f"{name} is not installed (run {INSTALL} as root)")
        raise AssertionError  # not reached: missing() skips or fails
    return path


def load_rules(path: Path = RULES) -> list[dict[str, Any]]:
    """Every rule of a rule file, groups flattened."""
    data = yaml.safe_load(path.read_text())
    return [rule for group in data["groups"] for rule in group["rules"]]


def until(probe: Callable[[], T], done: Callable[[T], bool], within: float, what: str) -> T:
    """Poll `probe` until `done` holds; fail with the last value when the time is up."""
    deadline = time.monotonic() + within
    while True:
        value = probe()
        if done(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {within} s; last: {value!r}")
        time.sleep(0.1)


class Prometheus:
    """A Prometheus server of its own: temporary config and storage, 1 s scrapes and rule
    evaluations, on a free loopback port."""

    def __init__(self, rules: Path, jobs: dict[str, list[str]]) -> None:
        self.binary = tool("prometheus")
        self.dir = tempfile.TemporaryDirectory(prefix="mediator-prometheus-")
        root = Path(self.dir.name)
        config = {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "evaluation_interval": "1s",
            },
            "rule_files": [str(rules)],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": targets}]}
                for job, targets in jobs.items()
            ],
        }
        (root / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = (root / "prometheus.log").open("wb")
        self.proc: subprocess.Popen[bytes] | None = None
        self.args = [
            self.binary,
            f"--config.file={root / 'prometheus.yml'}",
            f"--storage.tsdb.path={root / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]

    def start(self, timeout: float = 30) -> Prometheus:
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.output()[-3000:]}")
            try:
                return httpx.get(f"{self.base}/-/ready", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        until(ready, bool, timeout, "Prometheus ready")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self.log.close()
        self.dir.cleanup()

    def output(self) -> str:
        self.log.flush()
        return (Path(self.dir.name) / "prometheus.log").read_text(errors="replace")

    def api(self, path: str, **params: str) -> Any:
        answer = httpx.get(f"{self.base}/api/v1/{path}", params=params, timeout=10)
        body = answer.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("query", query=expr)["result"]
        return result

    def firing(self, alertname: str) -> list[dict[str, str]]:
        """The labels of the alerts of that name that are firing."""
        return [
            alert["labels"]
            for alert in self.api("alerts")["alerts"]
            if alert["labels"]["alertname"] == alertname and alert["state"] == "firing"
        ]


def fast_copy(rules: Path, into: Path) -> Path:
    """The rule file with every `for:` set to 1 s, so that an alert fires within seconds of
    its condition. Everything else, expressions and thresholds included, is as shipped."""
    data = yaml.safe_load(rules.read_text())
    for group in data["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "1s"
    path = into / "rules-fast.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


_TYPE = re.compile(r"^# TYPE (\S+) (\S+)$", re.MULTILINE)
_SUFFIXES = {
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
    "counter": ("",),
    "gauge": ("",),
    "untyped": ("",),
}


def exported_names(exposition: str) -> set[str]:
    """The series names an exposition declares, samples or not: a labelled family with no child
    yet has its `# TYPE` line all the same (counters are declared with `_total`)."""
    names: set[str] = set()
    for family, kind in _TYPE.findall(exposition):
        names.update(family + suffix for suffix in _SUFFIXES.get(kind, ("",)))
    return names
