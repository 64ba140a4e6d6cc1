"""The chart's rendered pods run: node, worker and CronJob pod specs from `helm template`,
started as a kubelet would start them (tests/kube/kubelet.py says how, and where it differs),
against a real Redis that wants a password, which reaches the pods only through the rendered
Secret and the `$(REDIS_PASSWORD)` in the rendered URL.

Two node pods behind one Service address carry a wallet's messages; the exec probe of the
workers passes; deleting a node pod runs its preStop, then SIGTERM, and its drain ends inside
the grace period with the wallet's socket closed 1012 and nothing lost; the capacity
CronJobs' pods write a snapshot and a report to their volume."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from tests.deploy.podman import Podman
from tests.didcomm_peer import attachments, collect, forward, live_peer, mediator_key
from tests.kube.kubelet import Cluster, ImageRuntime, Pod, by_kind, named, pod_template
from tests.kube.service import Service
from tests.servers import missing, start_binary_server

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "mediator"
RELEASE = "m"
MESSAGES = 30
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture(scope="module")
def helm() -> str:
    done = subprocess.run(
        [str(ROOT / "helm" / "tools" / "install.sh")], capture_output=True, text=True
    )
    if done.returncode != 0:
        missing(f"helm/tools/install.sh failed: {done.stderr[-2000:]}")
    return str(Path(done.stdout.strip().splitlines()[-1]) / "bin" / "helm")


@pytest.fixture(scope="module")
def locked_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A server of its own with a password: (URL without the password, the password)."""
    server = start_binary_server(tmp_path_factory.mktemp("pods-redis"))
    password = secrets.token_hex(16)
    redis.Redis.from_url(server.url).config_set("requirepass", password)
    yield server.url.rsplit("/", 1)[0] + "/0", password
    server.stop()


def render(helm: str, values: dict[str, Any], tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    done = subprocess.run(
        [helm, "template", RELEASE, str(CHART), "-f", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@pytest.fixture(params=["processes", "image"])
def runtime(request: pytest.FixtureRequest) -> ImageRuntime | None:
    """The pods' containers as processes of the test's environment, or from the image
    `make image` built (tests/deploy/podman.py), loaded under the name the chart gives."""
    if request.param == "processes":
        return None
    podman = Podman.configured()
    loaded = podman.load(podman.archive("mediator", VERSION))
    assert loaded == f"localhost/mediator:{VERSION}"
    return ImageRuntime(podman)


async def test_rendered_pods_serve_drain_and_run_their_jobs(
    helm: str, locked_redis: tuple[str, str], tmp_path: Path, runtime: ImageRuntime | None
) -> None:
    url, password = locked_redis
    docs = render(
        helm,
        {
            "redis": {"url": url, "password": password},
            "auth": {"apiTokens": ["pods-token"], "keySeed": secrets.token_hex(32)},
            "config": {"endpoint": "http://mediator.test"},
            "node": {
                "replicaCount": 2,
                "drainSeconds": 6,
                "preStopSeconds": 2,
                "terminationGracePeriodSeconds": 14,
            },
            "worker": {"replicaCount": 2},
            "capacity": {"enabled": True},
        },
        tmp_path,
    )
    cluster = Cluster(docs)
    node_spec = named(docs, "Deployment", f"{RELEASE}-mediator-node")
    worker_spec = named(docs, "Deployment", f"{RELEASE}-mediator-worker")
    assert node_spec["spec"]["replicas"] == 2 and worker_spec["spec"]["replicas"] == 2
    # Nothing secret in the ConfigMap: the password reaches the pods from the Secret only.
    assert all(password not in str(cm) for cm in by_kind(docs, "ConfigMap"))

    nodes = [
        Pod(
            cluster,
            f"node-{i}",
            f"127.0.0.{2 + i}",
            pod_template(node_spec),
            tmp_path / f"n{i}",
            runtime,
        )
        for i in range(2)
    ]
    workers = [
        Pod(
            cluster,
            f"worker-{i}",
            f"127.0.0.{4 + i}",
            pod_template(worker_spec),
            tmp_path / f"w{i}",
            runtime,
        )
        for i in range(2)
    ]
    pods = nodes + workers
    try:
        with Service() as service:
            for pod in pods:
                pod.start()
            for pod in nodes:
                (node,) = pod.containers
                await asyncio.to_thread(node.wait_until, "startupProbe", 30)
                await asyncio.to_thread(node.wait_until, "readinessProbe", 30)
                assert node.probe("livenessProbe")
                service.add(pod.ip, node.port("http"))
            for pod in workers:
                # The worker's exec probe (`mediator worker --check`) passes once it ticks.
                await asyncio.to_thread(pod.containers[0].wait_until, "readinessProbe", 40)
                assert pod.containers[0].probe("livenessProbe")

            await _deliver_and_drain(service, nodes)

            # The CronJobs' pods: a snapshot into the history on their volume, then a report
            # (as processes: tests/deploy runs a snapshot in the Spark image).
            if runtime is None:
                await asyncio.to_thread(_run_capacity_jobs, cluster, docs, tmp_path)
    finally:
        for pod in pods:
            pod.kill()


async def _deliver_and_drain(service: Service, nodes: list[Pod]) -> None:
    med = await mediator_key(service.base)
    recipient = await live_peer(service.base, med)
    assert service.last is not None
    socket_pod = next(p for p in nodes if p.ip == service.last[0])
    other = next(p for p in nodes if p is not socket_pod)
    [key] = recipient.recipient_keys

    seen: dict[str, Any] = {}
    for n in range(MESSAGES // 2):  # a new connection each: they go round both pods
        assert (await forward(service.base, med, key, {"n": n})).status_code == 202
    await collect(recipient, MESSAGES // 2, seen)
    assert len(seen) == MESSAGES // 2
    assert all(service.connections.get(p.ip, 0) > 0 for p in nodes), service.connections

    # Delete the pod holding the wallet's socket, as Kubernetes does: out of the Service's
    # endpoints, preStop, SIGTERM; forwards go on meanwhile through the Service.
    socket = recipient.ws._ws
    assert socket is not None
    service.remove(socket_pod.ip)
    stopping = asyncio.create_task(asyncio.to_thread(socket_pod.terminate))
    for n in range(MESSAGES // 2, MESSAGES):
        assert (await forward(service.base, med, key, {"n": n})).status_code == 202
    seconds, codes = await stopping
    assert codes == [0], socket_pod.containers[0].output()[-3000:]
    assert seconds < socket_pod.grace, f"drain took {seconds:.1f} s of {socket_pod.grace} s"
    assert socket.close_code == 1012  # "service restart": reconnect elsewhere
    assert other.containers[0].probe("readinessProbe")

    # The wallet reconnects through the same address and fetches what waited (Pickup 2.0:
    # live mode hands out what arrives from then on), each message once.
    again = await live_peer(service.base, med, like=recipient)
    for _ in range(MESSAGES):
        items = attachments(await again.delivery_request(limit=10))
        if not items:
            break
        for mid, body in items:
            seen.setdefault(mid, again.open(body))
        await again.messages_received([mid for mid, _ in items])
    assert sorted(m["n"] for m in seen.values()) == list(range(MESSAGES))
    await again.close()
    await recipient.close()


def _run_capacity_jobs(cluster: Cluster, docs: list[dict[str, Any]], tmp: Path) -> None:
    """Both jobs' pods share one volume (the chart's PVC), as on a cluster."""
    snapshot = named(docs, "CronJob", f"{RELEASE}-mediator-capacity-snapshot")
    report = named(docs, "CronJob", f"{RELEASE}-mediator-capacity-report")
    shared = tmp / "capacity-pvc"
    for job, name in ((snapshot, "snapshot"), (report, "report")):
        pod = Pod(cluster, f"capacity-{name}", "127.0.0.9", pod_template(job), tmp / name)
        assert "/data" in pod.mounts
        pod.mounts["/data"] = shared
        shared.mkdir(exist_ok=True)
        assert pod.template["spec"]["restartPolicy"] in ("Never", "OnFailure")
        pod.start()
        (container,) = pod.containers
        assert container.proc is not None
        deadline = float(job["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"])
        code = container.proc.wait(min(deadline, 300))
        assert code == 0, container.output()[-4000:]
    assert list((shared / "history").rglob("*.parquet")), "the snapshot wrote no Parquet"
    reports = list(shared.rglob("report.html"))
    assert reports and "Capacity" in reports[0].read_text()
