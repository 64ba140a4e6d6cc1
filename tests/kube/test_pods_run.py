"""The chart's rendered pods run: node, worker and CronJob pod specs from `helm template`,
started as a kubelet would start them (tests/kube/kubelet.py says how, and where it differs),
against a real Redis that wants a password, one no URL could carry as it is. The password,
the key seed and the API tokens reach the nodes, the workers and the capacity snapshot only
as files of their secrets volume, made from the rendered Secret or from existing Secrets,
never as variables.

Two node pods behind one Service address carry a wallet's messages; the exec probe of the
workers passes; deleting a node pod runs its preStop, then SIGTERM, and its drain ends inside
the grace period with the wallet's socket closed 1012 and nothing lost; the capacity
CronJobs' pods write a snapshot (of the Redis that wants the password, read from the
snapshot's file) and a report to their volume."""

from __future__ import annotations

import asyncio
import re
import secrets
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml

from mediator.didcomm.identity import from_seed_setting
from tests.deploy.podman import Podman
from tests.didcomm_peer import attachments, collect, forward, live_peer, mediator_key
from tests.kube.kubelet import (
    Cluster,
    Container,
    ImageRuntime,
    Pod,
    VolumeError,
    by_kind,
    named,
    pod_template,
)
from tests.kube.service import Service
from tests.servers import missing, start_binary_server

# Starts processes: the full tier; runs Spark: on the Spark modules' worker (tests/tiers.py).
pytestmark = [pytest.mark.full, pytest.mark.timeout(600)]

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
    """A server of its own with a password: (URL without the password, the password). The
    password holds the characters a URL's user info cannot (`@ / : % ? # &`): only an
    escaping mediator reaches the server with it."""
    server = start_binary_server(tmp_path_factory.mktemp("pods-redis"))
    password = "p@ss/w:rd%?#&" + secrets.token_hex(12)
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


SECRETS = "/etc/mediator/secrets"


def assert_secrets_are_files(container: Container, expected: dict[str, str]) -> None:
    """No variable of the container holds a secret; each `*_FILE` variable of `expected`
    names a file of the pod's secrets volume holding that value, group-readable only."""
    env = container.environment()
    for name, value in env.items():
        for secret in expected.values():
            assert secret not in value, f"{container.name}: {name} holds a secret"
    files = {name: path for name, path in env.items() if path.startswith(SECRETS + "/")}
    assert set(files) == set(expected), container.name
    for name, value in expected.items():
        local = Path(container.pod.local(files[name]))
        assert local.read_text() == value, name
        assert local.stat().st_mode & 0o777 == 0o440, name


async def assert_seed_and_token_reached(base: str, seed: str, token: str) -> None:
    """The mediator's key is the seed's, and the mqs API takes the token (only that)."""
    assert await mediator_key(base) == from_seed_setting(seed).verkey_b58
    async with httpx.AsyncClient(base_url=base, timeout=10) as web:
        bearer = {"Authorization": f"Bearer {token}"}
        assert (await web.get("/queues", headers=bearer)).status_code == 200
        assert (await web.get("/queues")).status_code == 401
        wrong = {"Authorization": "Bearer not-the-token"}
        assert (await web.get("/queues", headers=wrong)).status_code == 401


async def test_rendered_pods_serve_drain_and_run_their_jobs(
    helm: str, locked_redis: tuple[str, str], tmp_path: Path, runtime: ImageRuntime | None
) -> None:
    url, password = locked_redis
    seed = secrets.token_hex(32)
    docs = render(
        helm,
        {
            "redis": {"url": url, "password": password},
            "auth": {"apiTokens": ["pods-token"], "keySeed": seed},
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
    node_files = {
        "MEDIATOR_REDIS_PASSWORD_FILE": password,
        "MEDIATOR_KEY_SEED_FILE": seed,
        "MEDIATOR_API_TOKENS_FILE": "pods-token",
    }
    for pod in nodes:
        assert_secrets_are_files(pod.containers[0], node_files)
    for pod in workers:
        worker_files = {k: v for k, v in node_files.items() if "API_TOKENS" not in k}
        assert_secrets_are_files(pod.containers[0], worker_files)
    try:
        with Service() as service:
            for pod in pods:
                pod.start()
            for pod in nodes:
                # Ready: it reached the Redis that wants the password, read from its file.
                (node,) = pod.containers
                await asyncio.to_thread(node.wait_until, "startupProbe", 30)
                await asyncio.to_thread(node.wait_until, "readinessProbe", 30)
                assert node.probe("livenessProbe")
                service.add(pod.ip, node.port("http"))
            await assert_seed_and_token_reached(service.base, seed, "pods-token")
            for pod in workers:
                # The worker's exec probe (`mediator worker --check`) passes once it ticks.
                await asyncio.to_thread(pod.containers[0].wait_until, "readinessProbe", 40)
                assert pod.containers[0].probe("livenessProbe")

            await _deliver_and_drain(service, nodes)

            # The CronJobs' pods: a snapshot into the history on their volume, then a report
            # (as processes: tests/deploy runs a snapshot in the Spark image).
            if runtime is None:
                await asyncio.to_thread(
                    _run_capacity_jobs,
                    cluster,
                    docs,
                    tmp_path,
                    {"password": password, "seed": seed},
                )
    finally:
        for pod in pods:
            pod.kill()


async def test_a_node_reads_its_secrets_from_existing_secrets(
    helm: str, locked_redis: tuple[str, str], tmp_path: Path
) -> None:
    """Bitnami's way: the password in the Redis chart's Secret, the seed and tokens in one of
    the operator's. The node's files come from those keys, it gets ready against the Redis
    that wants the password, and its key and API are the seed's and the tokens'; a Secret
    lacking a key the values name keeps the pod from starting, and a wrong password in the
    file keeps the node from getting ready."""
    url, password = locked_redis
    seed = secrets.token_hex(32)
    values = {
        "redis": {
            "url": url,
            "existingSecret": "valkey",
            "existingSecretPasswordKey": "valkey-password",
        },
        "auth": {"existingSecret": "mediator-secrets"},
        "config": {"endpoint": "http://mediator.test"},
        "worker": {"enabled": False},
    }
    docs = render(helm, values, tmp_path)
    assert not by_kind(docs, "Secret")  # nothing of the chart's own

    def existing(redis_password: str, auth: dict[str, str]) -> list[dict[str, Any]]:
        return [
            {
                "kind": "Secret",
                "metadata": {"name": "valkey"},
                "stringData": {"valkey-password": redis_password},
            },
            {"kind": "Secret", "metadata": {"name": "mediator-secrets"}, "stringData": auth},
        ]

    node_spec = pod_template(named(docs, "Deployment", f"{RELEASE}-mediator-node"))
    both = {"key-seed": seed, "api-tokens": "token-a,token-b"}
    pod = Pod(
        Cluster(docs + existing(password, both)), "node-0", "127.0.0.2", node_spec, tmp_path / "n"
    )
    (node,) = pod.containers
    assert_secrets_are_files(
        node,
        {
            "MEDIATOR_REDIS_PASSWORD_FILE": password,
            "MEDIATOR_KEY_SEED_FILE": seed,
            "MEDIATOR_API_TOKENS_FILE": "token-a,token-b",
        },
    )
    try:
        pod.start()
        await asyncio.to_thread(node.wait_until, "startupProbe", 30)
        await asyncio.to_thread(node.wait_until, "readinessProbe", 30)
        base = f"http://{pod.ip}:{node.port('http')}"
        await assert_seed_and_token_reached(base, seed, "token-b")
    finally:
        pod.kill()

    # A key the values name but the Secret lacks: the pod never starts (ContainerCreating).
    seed_only = Cluster(docs + existing(password, {"key-seed": seed}))
    with pytest.raises(
        VolumeError, match="couldn't find key api-tokens in Secret mediator-secrets"
    ):
        Pod(seed_only, "node-1", "127.0.0.3", node_spec, tmp_path / "n1")

    # The password the node uses is the file's: a wrong one, and it never gets ready.
    wrong = Cluster(docs + existing("not-" + password, both))
    pod = Pod(wrong, "node-2", "127.0.0.4", node_spec, tmp_path / "n2")
    try:
        pod.start()
        with pytest.raises(AssertionError) as failed:
            await asyncio.to_thread(pod.containers[0].wait_until, "readinessProbe", 8)
        assert "invalid username-password pair" in str(failed.value)
    finally:
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


def _job_pod(cluster: Cluster, job: dict[str, Any], name: str, tmp: Path, shared: Path) -> Pod:
    """A pod of the CronJob, its /data on the `shared` folder (the chart's PVC)."""
    pod = Pod(cluster, f"capacity-{name}", "127.0.0.9", pod_template(job), tmp / name)
    assert "/data" in pod.mounts
    pod.mounts["/data"] = shared
    shared.mkdir(exist_ok=True)
    assert pod.template["spec"]["restartPolicy"] in ("Never", "OnFailure")
    return pod


def _run_to_end(pod: Pod, job: dict[str, Any]) -> tuple[int, str]:
    """Start the job's pod and wait for its one container: (exit code, output)."""
    pod.start()
    (container,) = pod.containers
    assert container.proc is not None
    deadline = float(job["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"])
    return container.proc.wait(min(deadline, 300)), container.output()


def _run_capacity_jobs(
    cluster: Cluster, docs: list[dict[str, Any]], tmp: Path, secret: dict[str, str]
) -> None:
    """Both jobs' pods share one volume (the chart's PVC), as on a cluster. The snapshot
    reads the Redis that wants the password from its file, its environment holding no
    secret, and a wrong password in the Secret makes it fail; the report reads only the
    volume."""
    snapshot = named(docs, "CronJob", f"{RELEASE}-mediator-capacity-snapshot")
    report = named(docs, "CronJob", f"{RELEASE}-mediator-capacity-report")
    shared = tmp / "capacity-pvc"
    expected_files = {
        "snapshot": {
            "MEDIATOR_REDIS_PASSWORD_FILE": secret["password"],
            "MEDIATOR_KEY_SEED_FILE": secret["seed"],
        },
        "report": {},
    }

    # The control: the chart's Secret with a wrong password, and the snapshot cannot read.
    [own] = by_kind(docs, "Secret")
    wrong_secret = {**own, "stringData": {"redis-password": "not-" + secret["password"]}}
    wrong = Cluster([wrong_secret if d is own else d for d in docs])
    code, output = _run_to_end(_job_pod(wrong, snapshot, "wrong", tmp, tmp / "wrong-pvc"), snapshot)
    assert code != 0 and "invalid username-password pair" in output, output[-4000:]
    assert not list((tmp / "wrong-pvc").rglob("*.parquet"))

    for job, name in ((snapshot, "snapshot"), (report, "report")):
        pod = _job_pod(cluster, job, name, tmp, shared)
        (container,) = pod.containers
        assert_secrets_are_files(container, expected_files[name])
        assert secret["password"] not in str(container.spec), name
        assert all("valueFrom" not in v for v in container.spec.get("env", [])), name
        code, output = _run_to_end(pod, job)
        assert code == 0, output[-4000:]
        if name == "snapshot":  # what it read through the password: the mailboxes
            summary = re.search(r"snapshot \w+: ([\d,]+) mailboxes", output)
            assert summary and int(summary.group(1).replace(",", "")) > 0, output[-4000:]
    assert list((shared / "history").rglob("*.parquet")), "the snapshot wrote no Parquet"
    reports = list(shared.rglob("report.html"))
    assert reports and "Capacity" in reports[0].read_text()
