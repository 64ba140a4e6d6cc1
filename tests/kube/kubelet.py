"""Rendered pod specs run as a kubelet would run them, here, without a cluster.

What a kubelet does and this does too: the container's command is the image's entrypoint
unless `command` replaces it, its arguments the image's CMD unless `args` replaces them; the
environment is built from `envFrom` (ConfigMaps and Secrets, with their prefix), then `env`
in order (`value` with `$(VAR)` references to what came before, `valueFrom` a ConfigMap or
Secret key or a field of the pod); probes are HTTP GETs against the pod's address or exec
commands run with the container's environment; stopping runs the `preStop` hook, then
SIGTERM, then SIGKILL when `terminationGracePeriodSeconds` is up.

Where this differs from a node, and why:
- a pod gets its own network namespace there; here each pod gets a loopback address of its
  own (127.0.0.N), and "all addresses" (`0.0.0.0`) in its variables and arguments means
  that one, so two pods can both listen on 8080;
- volumes are folders of the test's: a path under a volume's mountPath, in an argument or
  a variable, is rewritten to that folder (emptyDir and PVC alike); a `secret` or
  `projected` volume's folder holds its Secrets' keys as files, written as a kubelet writes
  them (each item's path, its mode or the volume's defaultMode, the pod's fsGroup as their
  group), and a key or Secret it names that is missing, unless optional, stops the pod from
  being made at all (`VolumeError`), as a kubelet never starts it;
- as processes, the image's files are the test's virtual environment:
  `/opt/mediator/bin/<tool>` runs `<venv>/bin/<tool>`; from the image (`ImageRuntime`), the
  container runs with podman on the host's network, with the spec's user, read-only root,
  dropped capabilities and no privilege escalation, emptyDir volumes as tmpfs mounts.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.logs import log_path

IMAGE_ROOT = "/opt/mediator/bin/"
VENV_BIN = Path(sys.executable).parent
# The image's ENTRYPOINT and CMD (deploy/Containerfile); `args` of a pod spec replace CMD.
ENTRYPOINT = ["/opt/mediator/bin/mediator"]
CMD = ["serve", "--host", "0.0.0.0"]

Doc = dict[str, Any]


class VolumeError(Exception):
    """A volume could not be set up (a kubelet's MountVolume.SetUp failed): the pod stays in
    ContainerCreating and none of its containers runs."""


def by_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d and d.get("kind") == kind]


def named(docs: list[Doc], kind: str, name: str) -> Doc:
    for d in by_kind(docs, kind):
        if d["metadata"]["name"] == name:
            return d
    raise KeyError(f"no {kind} {name} in the render")


def pod_template(workload: Doc) -> Doc:
    """The pod template of a Deployment, or of a CronJob's Job."""
    spec = workload["spec"]
    if workload["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return dict(spec["template"])


_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(value: str, known: dict[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: known names replaced, `$$` escapes, others kept."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return known.get(m.group(1), m.group(0))

    return _REFERENCE.sub(one, value)


@dataclass
class Cluster:
    """The objects pods read their configuration from (one namespace)."""

    docs: list[Doc]
    namespace: str = "default"

    def config_map(self, name: str) -> dict[str, str]:
        return dict(named(self.docs, "ConfigMap", name).get("data") or {})

    def secret(self, name: str) -> dict[str, str]:
        doc = named(self.docs, "Secret", name)
        out = {k: base64.b64decode(v).decode() for k, v in (doc.get("data") or {}).items()}
        out.update(doc.get("stringData") or {})
        return out


@dataclass
class Container:
    pod: Pod
    spec: Doc
    proc: subprocess.Popen[bytes] | None = None
    log: Path = field(default_factory=lambda: log_path("pod-container-"))

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    # ------------------------------------------------------------------ environment

    def environment(self) -> dict[str, str]:
        cluster, env = self.pod.cluster, {}
        for source in self.spec.get("envFrom") or []:
            prefix = source.get("prefix", "")
            if "configMapRef" in source:
                data = cluster.config_map(source["configMapRef"]["name"])
            else:
                data = cluster.secret(source["secretRef"]["name"])
            env.update({prefix + k: v for k, v in data.items()})
        for var in self.spec.get("env") or []:
            if "value" in var:
                env[var["name"]] = expand(str(var["value"]), env)
            elif "valueFrom" in var:
                env[var["name"]] = self._value_from(var["valueFrom"])
        return env

    def _value_from(self, source: Doc) -> str:
        cluster = self.pod.cluster
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            return cluster.secret(ref["name"])[ref["key"]]
        if "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            return cluster.config_map(ref["name"])[ref["key"]]
        if "fieldRef" in source:
            path = source["fieldRef"]["fieldPath"]
            fields = {
                "metadata.name": self.pod.name,
                "metadata.namespace": cluster.namespace,
                "status.podIP": self.pod.ip,
                "spec.nodeName": "node-1",
            }
            return fields[path]
        raise ValueError(f"valueFrom {source} is not supported here")

    def process_env(self) -> dict[str, str]:
        """What the process gets: the container's variables, paths moved to the pod's
        volumes, the pod's own address to listen on, and the host's PATH to run."""
        env = {k: self.pod.local(v) for k, v in self.environment().items()}
        keep = ("PATH", "LANG", "JAVA_HOME", "PYTHONPATH", "CI")
        env.update({k: os.environ[k] for k in keep if k in os.environ})
        return env

    # ------------------------------------------------------------------ command

    def argv(self, env: dict[str, str] | None = None) -> list[str]:
        env = self.environment() if env is None else env
        command = self.spec.get("command") or ENTRYPOINT
        args = (
            self.spec.get("args")
            if "args" in self.spec
            else ([] if self.spec.get("command") else CMD)
        )
        words = [expand(str(w), env) for w in [*command, *(args or [])]]
        # The executable is the image's (or the test's environment's), never under a volume.
        return [self._executable(words[0]), *(self.pod.local(w) for w in words[1:])]

    @staticmethod
    def _executable(path: str) -> str:
        if path.startswith(IMAGE_ROOT):
            return str(VENV_BIN / path[len(IMAGE_ROOT) :])
        return path

    def start(self) -> None:
        env = self.process_env()
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv(self.environment()), env=env, stdout=out, stderr=subprocess.STDOUT
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def exited(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def signal_term(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait_exit(self, seconds: float) -> int | None:
        """The exit code, or None when it is still running after `seconds`."""
        assert self.proc is not None
        try:
            return self.proc.wait(seconds)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def run_exec(self, argv: list[str], timeout: float) -> int | None:
        """An exec probe's or hook's command in the container; None on timeout."""
        env = self.process_env()
        argv = [
            self._executable(expand(argv[0], env)),
            *(self.pod.local(expand(w, env)) for w in argv[1:]),
        ]
        try:
            return subprocess.run(argv, env=env, capture_output=True, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return None

    # ------------------------------------------------------------------ probes

    def probe(self, kind: str) -> bool:
        spec = self.spec.get(kind)
        assert spec, f"{self.name} has no {kind}"
        timeout = float(spec.get("timeoutSeconds", 1))
        if "httpGet" in spec:
            get = spec["httpGet"]
            url = f"http://{self.pod.ip}:{self.port(get['port'])}{get.get('path', '/')}"
            try:
                return 200 <= httpx.get(url, timeout=timeout).status_code < 400
            except httpx.HTTPError:
                return False
        if "exec" in spec:
            return self.run_exec(list(spec["exec"]["command"]), timeout) == 0
        raise ValueError(f"{kind} {spec} is not supported here")

    def port(self, port: int | str) -> int:
        if isinstance(port, int):
            return port
        for p in self.spec.get("ports") or []:
            if p.get("name") == port:
                return int(p["containerPort"])
        raise KeyError(f"{self.name} has no port named {port}")

    def wait_until(self, kind: str, within: float) -> float:
        """Run the probe every periodSeconds (after initialDelaySeconds) until it
        succeeds; the seconds it took. Fails if the process exits or time runs out."""
        spec = self.spec[kind]
        started = time.monotonic()
        time.sleep(float(spec.get("initialDelaySeconds", 0)))
        period = min(float(spec.get("periodSeconds", 10)), 0.5)  # faster than a kubelet
        while True:
            if self.exited():
                raise AssertionError(f"{self.name} exited: {self.output()[-3000:]}")
            if self.probe(kind):
                return time.monotonic() - started
            if time.monotonic() - started > within:
                raise AssertionError(f"{self.name}: {kind} failing: {self.output()[-3000:]}")
            time.sleep(period)

    # ------------------------------------------------------------------ stop

    def pre_stop(self) -> None:
        hook = (self.spec.get("lifecycle") or {}).get("preStop")
        if not hook:
            return
        if "sleep" in hook:
            time.sleep(float(hook["sleep"]["seconds"]))
        elif "exec" in hook:
            self.run_exec(list(hook["exec"]["command"]), self.pod.grace)
        else:
            raise ValueError(f"preStop {hook} is not supported here")


@dataclass
class Pod:
    cluster: Cluster
    name: str
    ip: str
    template: Doc
    root: Path
    runtime: ImageRuntime | None = None  # None: the containers run as processes
    containers: list[Container] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.mounts: dict[str, Path] = {}
        spec = self.template["spec"]
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        for c in spec["containers"]:
            for mount in c.get("volumeMounts") or []:
                folder = self.root / mount["name"]
                folder.mkdir(parents=True, exist_ok=True)
                self.mounts[mount["mountPath"].rstrip("/")] = folder
        for name, volume in volumes.items():
            if "secret" in volume or "projected" in volume:
                self._write_secret_volume(volume, self.root / name)
        if self.runtime is None:
            self.containers = [Container(self, c) for c in spec["containers"]]
        else:
            self.containers = [ImageContainer(self, c, self.runtime) for c in spec["containers"]]

    def _write_secret_volume(self, volume: Doc, folder: Path) -> None:
        """The files of a `secret` volume, or of a `projected` one's secret sources."""
        if "secret" in volume:
            spec = volume["secret"]
            default = int(spec.get("defaultMode", 0o644))
            sources = [{"name": spec["secretName"], **spec}]
        else:
            default = int(volume["projected"].get("defaultMode", 0o644))
            sources = []
            for source in volume["projected"].get("sources") or []:
                if set(source) != {"secret"}:
                    raise ValueError(f"projected source {source} is not supported here")
                sources.append(source["secret"])
        group = (self.template["spec"].get("securityContext") or {}).get("fsGroup")
        folder.mkdir(parents=True, exist_ok=True)
        for source in sources:
            optional = bool(source.get("optional"))
            try:
                data = self.cluster.secret(source["name"])
            except KeyError:
                if optional:
                    continue
                raise VolumeError(f"secret {source['name']!r} not found") from None
            items = source.get("items")
            if items is None:
                items = [{"key": key, "path": key} for key in data]
            for item in items:
                if item["key"] not in data:
                    if optional:
                        continue
                    raise VolumeError(f"couldn't find key {item['key']} in Secret {source['name']}")
                path = folder / item["path"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(data[item["key"]])
                path.chmod(int(item.get("mode", default)))
                if group is not None:
                    # as a kubelet: the pod's fsGroup owns the files (this needs root)
                    with contextlib.suppress(PermissionError):
                        os.chown(path, -1, int(group))

    @property
    def grace(self) -> float:
        return float(self.template["spec"].get("terminationGracePeriodSeconds", 30))

    def local(self, value: str) -> str:
        """A value as this pod's processes see it: its volumes' folders, its own address."""
        return self.volume_path(self.address(value))

    def address(self, value: str) -> str:
        """All addresses (`0.0.0.0`, alone or with a port) as this pod's own."""
        if value == "0.0.0.0" or value.startswith("0.0.0.0:"):
            return self.ip + value[len("0.0.0.0") :]
        return value

    def volume_path(self, value: str) -> str:
        for path, folder in sorted(self.mounts.items(), key=lambda kv: -len(kv[0])):
            if value == path or value.startswith(path + "/"):
                return str(folder) + value[len(path) :]
            # --flag=/mount/path
            flag, eq, rest = value.partition("=")
            if eq and (rest == path or rest.startswith(path + "/")):
                return f"{flag}={folder}{rest[len(path) :]}"
        return value

    def start(self) -> None:
        for c in self.containers:
            c.start()

    def terminate(self) -> tuple[float, list[int | None]]:
        """As on deletion: preStop, SIGTERM, SIGKILL when the grace period is up.
        Returns the seconds it took and each container's exit code (None: killed)."""
        started = time.monotonic()
        for c in self.containers:
            c.pre_stop()
        for c in self.containers:
            c.signal_term()
        codes: list[int | None] = []
        for c in self.containers:
            code = c.wait_exit(max(0.1, self.grace - (time.monotonic() - started)))
            if code is None:
                c.kill()
            codes.append(code)
        return time.monotonic() - started, codes

    def kill(self) -> None:
        for c in self.containers:
            c.kill()


@dataclass
class ImageRuntime:
    """Runs containers from their images with podman, as the pod spec's security context
    says; `podman` is a callable that runs a podman command and returns the completed
    process (tests/deploy/podman.py)."""

    podman: Any


class ImageContainer(Container):
    """The container from the real image: the rendered command, arguments, environment and
    security context given to `podman run`; emptyDir volumes are tmpfs mounts."""

    def __init__(self, pod: Pod, spec: Doc, runtime: ImageRuntime) -> None:
        super().__init__(pod, spec)
        self.runtime = runtime
        self.id = f"kube-{pod.name}-{spec['name']}-{os.getpid()}"

    def _options(self) -> list[str]:
        pod_sc = self.pod.template["spec"].get("securityContext") or {}
        sc = {**pod_sc, **(self.spec.get("securityContext") or {})}
        options = ["--network", "host", "--name", self.id]
        if sc.get("runAsUser") is not None:
            options += ["--user", f"{sc['runAsUser']}:{sc.get('runAsGroup', sc['runAsUser'])}"]
        if sc.get("readOnlyRootFilesystem"):
            options += ["--read-only", "--read-only-tmpfs=false"]
        for cap in (sc.get("capabilities") or {}).get("drop") or []:
            options += ["--cap-drop", cap]
        if sc.get("allowPrivilegeEscalation") is False:
            options += ["--security-opt", "no-new-privileges"]
        volumes = {v["name"]: v for v in self.pod.template["spec"].get("volumes") or []}
        for mount in self.spec.get("volumeMounts") or []:
            if "emptyDir" in volumes.get(mount["name"], {}):
                options += ["--tmpfs", f"{mount['mountPath']}:mode=1777"]
            elif mount.get("readOnly"):
                folder = self.pod.mounts[mount["mountPath"].rstrip("/")]
                options += ["--volume", f"{folder}:{mount['mountPath']}:ro"]
            else:
                folder = self.pod.mounts[mount["mountPath"].rstrip("/")]
                folder.chmod(0o777)
                options += ["--volume", f"{folder}:{mount['mountPath']}"]
        return options

    def start(self) -> None:
        # The image sees the volumes at their mount paths: only the address is the pod's.
        env = {k: self.pod.address(v) for k, v in self.environment().items()}
        pairs = [a for k, v in env.items() for a in ("--env", f"{k}={v}")]
        command = self.spec.get("command")
        entry = ["--entrypoint", json.dumps(command)] if command else []
        args = self.spec.get("args") if "args" in self.spec else ([] if command else None)
        words = [self.pod.address(expand(str(w), env)) for w in (args or [])]
        self.runtime.podman(
            "run",
            "--detach",
            *self._options(),
            *pairs,
            *entry,
            self.spec["image"],
            *(words if args is not None else []),
        )

    def output(self) -> str:
        done = self.runtime.podman("logs", self.id, check=False)
        return str(done.stdout) + str(done.stderr)

    def _state(self) -> Doc:
        done = self.runtime.podman("inspect", "--format", "{{json .State}}", self.id, check=False)
        if done.returncode != 0:
            return {"Running": False, "ExitCode": None}
        state: Doc = json.loads(done.stdout)
        return state

    def exited(self) -> bool:
        return not self._state()["Running"]

    def signal_term(self) -> None:
        self.runtime.podman("kill", "--signal", "TERM", self.id, check=False)

    def wait_exit(self, seconds: float) -> int | None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            state = self._state()
            if not state["Running"]:
                return int(state["ExitCode"])
            time.sleep(0.1)
        return None

    def kill(self) -> None:
        self.runtime.podman("rm", "--force", "--time", "0", self.id, check=False)

    def run_exec(self, argv: list[str], timeout: float) -> int | None:
        try:
            done = self.runtime.podman("exec", self.id, *argv, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return None
        return int(done.returncode)
