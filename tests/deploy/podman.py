"""podman as the image tests drive it: the project's own configuration (deploy/image/env.sh),
the archives `make image` saved, and containers that are always removed afterwards."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.servers import missing

ROOT = Path(__file__).resolve().parents[2]
UID = "10001"
# What a restricted Kubernetes pod gets: a read-only root with only /tmp writable (podman's
# own tmpfs on /run, /tmp and /var/tmp turned off), a numeric user, no capabilities. The
# host's network: these machines have no iptables for podman's bridge.
CONFINED = (
    "--read-only",
    "--read-only-tmpfs=false",
    "--tmpfs",
    "/tmp",
    "--user",
    UID,
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    "--network",
    "host",
)


@dataclass
class Podman:
    env: dict[str, str]
    images_dir: Path

    @classmethod
    def configured(cls) -> Podman:
        """podman with CONTAINERS_CONF and CONTAINERS_STORAGE_CONF as build.sh uses them."""
        if shutil.which("podman") is None:
            missing("podman is not installed (make image installs it)")
        script = '. "$1" && printf "%s\\0" "$CONTAINERS_CONF" "$CONTAINERS_STORAGE_CONF" '
        script += '"$MEDIATOR_IMAGES_DIR"'
        done = subprocess.run(
            ["bash", "-c", script, "bash", str(ROOT / "deploy/image/env.sh")],
            capture_output=True,
            text=True,
            check=True,
        )
        conf, storage, images = done.stdout.split("\0")[:3]
        env = {**os.environ, "CONTAINERS_CONF": conf, "CONTAINERS_STORAGE_CONF": storage}
        return cls(env, Path(images))

    def __call__(
        self, *args: str, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["podman", *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"podman {' '.join(args)} exited with {done.returncode}: {done.stderr[-3000:]}"
            )
        return done

    def archive(self, name: str, version: str) -> Path:
        archive = self.images_dir / f"{name}-{version}.oci.tar"
        if not archive.is_file():
            missing(f"{archive} does not exist: run make image")
        return archive

    def load(self, archive: Path) -> str:
        """Loads an archive `make image` saved; returns the image's name."""
        out = self("load", "--input", str(archive), timeout=600).stdout
        loaded = re.search(r"Loaded image(?:\(s\))?: (\S+)", out)
        assert loaded, out
        return loaded[1]

    def config(self, archive: Path) -> dict[str, Any]:
        """The image configuration of an archive, as a registry would serve it."""
        if shutil.which("skopeo") is None:
            missing("skopeo is not installed (make image installs it)")
        done = subprocess.run(
            ["skopeo", "inspect", "--config", f"oci-archive:{archive}"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        config: dict[str, Any] = json.loads(done.stdout)
        return config

    @contextmanager
    def container(
        self,
        image: str,
        *command: str,
        env: dict[str, str] | None = None,
        options: Sequence[str] = (),
    ) -> Iterator[Container]:
        """A confined container in the background, removed with its anonymous volumes."""
        name = f"mediator-test-{uuid.uuid4().hex[:10]}"
        pairs = [arg for k, v in (env or {}).items() for arg in ("--env", f"{k}={v}")]
        self("run", "--detach", "--name", name, *CONFINED, *pairs, *options, image, *command)
        try:
            yield Container(self, name)
        finally:
            self("rm", "--force", "--volumes", "--time", "0", name, check=False)

    def run(
        self, image: str, *command: str, options: Sequence[str] = (), timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """A confined container in the foreground, removed when it ends."""
        return self(
            "run", "--rm", *CONFINED, *options, image, *command, timeout=timeout, check=False
        )


@dataclass
class Container:
    podman: Podman
    name: str

    def state(self) -> dict[str, Any]:
        out = self.podman("inspect", "--format", "{{json .State}}", self.name).stdout
        state: dict[str, Any] = json.loads(out)
        return state

    def logs(self) -> str:
        done = self.podman("logs", self.name, check=False)
        return done.stdout + done.stderr

    def stop(self, grace: float) -> float:
        """`podman stop -t GRACE`: SIGTERM, SIGKILL after the grace; the seconds it took."""
        started = time.monotonic()
        self.podman("stop", "--time", str(int(grace)), self.name, timeout=grace + 60)
        return time.monotonic() - started

    def wait_ready(self, base: str, timeout: float = 90) -> None:
        """Polls the node's /readyz until it answers 200."""
        self.wait_answer(f"{base}/readyz", timeout)

    def wait_answer(self, url: str, timeout: float = 90) -> httpx.Response:
        """Polls a URL until it answers 200; fails at once if the container exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                answer = httpx.get(url, timeout=2)
                if answer.status_code == 200:
                    return answer
            except httpx.HTTPError:
                pass
            if not self.state()["Running"]:
                raise AssertionError(f"{self.name} exited: {self.logs()[-3000:]}")
            time.sleep(0.1)
        raise AssertionError(f"{url} not answering in {timeout} s: {self.logs()[-3000:]}")
