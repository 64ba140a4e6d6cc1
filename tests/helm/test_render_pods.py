"""The pods the chart renders: probes, drain and grace, security, settings and secrets."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import redis

from mediator.settings import Settings
from mediator.storage.target import Mode, parse
from tests.helm.chart import (
    Doc,
    Helm,
    Render,
    ci,
    container,
    env_value,
    process_environment,
    secret_file,
    secret_refs,
)

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)

MODES = ["standalone", "sentinel", "cluster", "minimal", "full"]
URL = "redis.url=redis://redis-master:6379/0"


def node_pod(render: Render) -> Doc:
    pod: Doc = render.component("Deployment", "node")["spec"]["template"]
    return pod


def worker_pod(render: Render) -> Doc:
    pod: Doc = render.component("Deployment", "worker")["spec"]["template"]
    return pod


def prestop_seconds(node: Doc) -> float:
    pre_stop = node["lifecycle"]["preStop"]
    if "sleep" in pre_stop:
        return float(pre_stop["sleep"]["seconds"])
    command = pre_stop["exec"]["command"]
    assert command[:2] == ["/opt/mediator/bin/python", "-c"]
    found = re.fullmatch(r"import time; time\.sleep\(([\d.]+)\)", command[2])
    assert found, command
    return float(found.group(1))


# ------------------------------------------------------------------ probes


@pytest.mark.parametrize("mode", MODES)
def test_node_probes(renders: dict[str, Render], mode: str) -> None:
    render = renders[mode]
    node = container(node_pod(render), "node")
    [port] = node["ports"]

    assert port == {"name": "http", "containerPort": 8080, "protocol": "TCP"}
    assert render.config()["MEDIATOR_PORT"] == "8080"
    assert render.config()["MEDIATOR_HOST"] == "0.0.0.0"
    assert node["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert node["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert node["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert node["args"] == ["serve"]


@pytest.mark.parametrize("mode", MODES)
def test_worker_probes_and_metrics(renders: dict[str, Render], mode: str) -> None:
    render = renders[mode]
    worker = container(worker_pod(render), "worker")
    check = ["/opt/mediator/bin/mediator", "worker", "--check"]
    health = render.config()["MEDIATOR_WORKER_HEALTH_FILE"]
    mounts = {m["mountPath"] for m in worker["volumeMounts"]}

    assert worker["args"] == ["worker"]
    assert worker["livenessProbe"]["exec"]["command"] == check
    assert worker["readinessProbe"]["exec"]["command"] == check
    assert health.startswith("/tmp/") and "/tmp" in mounts
    assert env_value(worker, "MEDIATOR_WORKER_METRICS_LISTEN")["value"] == "0.0.0.0:9091"
    assert worker["ports"] == [{"name": "metrics", "containerPort": 9091, "protocol": "TCP"}]
    assert render.config()["MEDIATOR_IN_PROCESS_WORKER"] == "false"


def test_without_worker_deployment_nodes_run_the_worker(helm: Helm) -> None:
    render = helm.template(sets=[URL, "worker.enabled=false"])

    assert render.config()["MEDIATOR_IN_PROCESS_WORKER"] == "true"
    for kind in ("Deployment", "PodDisruptionBudget", "NetworkPolicy"):
        components = [
            d["metadata"]["labels"]["app.kubernetes.io/component"] for d in render.of_kind(kind)
        ]
        assert components == ["node"], kind


def test_worker_metrics_off(helm: Helm) -> None:
    render = helm.template(sets=[URL, "worker.metrics.enabled=false"])
    worker = container(worker_pod(render), "worker")

    assert env_value(worker, "MEDIATOR_WORKER_METRICS_LISTEN")["value"] == ""
    assert "ports" not in worker
    assert not [s for s in render.of_kind("Service") if s["spec"].get("clusterIP") == "None"]


# ------------------------------------------------------------------ drain


@pytest.mark.parametrize("mode", MODES)
def test_grace_period_covers_prestop_and_drain(renders: dict[str, Render], mode: str) -> None:
    render = renders[mode]
    pod = node_pod(render)["spec"]
    pause = prestop_seconds(container(node_pod(render), "node"))
    drain = float(render.config()["MEDIATOR_DRAIN_SECONDS"])

    assert pause >= 5
    assert pod["terminationGracePeriodSeconds"] >= pause + drain + 5


def test_prestop_sleep_action_and_exec(renders: dict[str, Render]) -> None:
    standalone = container(node_pod(renders["standalone"]), "node")
    full = container(node_pod(renders["full"]), "node")

    assert standalone["lifecycle"]["preStop"] == {"sleep": {"seconds": 5}}
    assert prestop_seconds(full) == 10
    assert renders["full"].config()["MEDIATOR_DRAIN_SECONDS"] == "30"


def test_rollout_adds_before_it_removes(renders: dict[str, Render]) -> None:
    strategy = renders["minimal"].component("Deployment", "node")["spec"]["strategy"]

    assert strategy == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0},
    }


# ------------------------------------------------------------------ security


@pytest.mark.parametrize("mode", MODES)
def test_every_pod_is_restricted(renders: dict[str, Render], mode: str) -> None:
    """Deployments and CronJobs alike: non-root 10001, RuntimeDefault, no token, read-only."""
    workloads = list(renders[mode].workloads())
    assert workloads
    for resource, template in workloads:
        pod = template["spec"]
        where = f"{mode}: {resource['kind']}/{resource['metadata']['name']}"
        assert pod["automountServiceAccountToken"] is False, where
        context = pod["securityContext"]
        assert context["runAsNonRoot"] is True, where
        assert (context["runAsUser"], context["runAsGroup"], context["fsGroup"]) == (
            10001,
            10001,
            10001,
        ), where
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, where
        tmp = [v for v in pod["volumes"] if v["name"] == "tmp"]
        assert tmp and "emptyDir" in tmp[0], where
        for box in pod["containers"]:
            security = box["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["readOnlyRootFilesystem"] is True, where
            assert security["privileged"] is False, where
            assert security["runAsNonRoot"] is True, where
            assert security["capabilities"] == {"drop": ["ALL"]}, where
            assert {"name": "tmp", "mountPath": "/tmp"} in box["volumeMounts"], where
            assert box["resources"]["requests"] and box["resources"]["limits"], where


def test_service_account(renders: dict[str, Render]) -> None:
    [account] = renders["full"].of_kind("ServiceAccount")

    assert account["automountServiceAccountToken"] is False
    for _, template in renders["full"].workloads():
        assert template["spec"]["serviceAccountName"] == account["metadata"]["name"]
    for _, template in renders["minimal"].workloads():
        assert template["spec"]["serviceAccountName"] == "default"
    assert not renders["minimal"].of_kind("ServiceAccount")


# ------------------------------------------------------------------ images


def test_images(renders: dict[str, Render]) -> None:
    minimal = container(node_pod(renders["minimal"]), "node")
    full = container(node_pod(renders["full"]), "node")
    [snapshot] = [
        c for c in renders["full"].of_kind("CronJob") if "snapshot" in c["metadata"]["name"]
    ]
    spark = snapshot["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]

    assert minimal["image"] == "localhost/mediator:0.1.0"
    assert minimal["imagePullPolicy"] == "IfNotPresent"
    assert full["image"] == (
        "registry.example.org/mediator/mediator@sha256:"
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    )
    assert full["imagePullPolicy"] == "Always"
    assert spark["image"].startswith("registry.example.org/mediator/mediator-spark@sha256:")
    assert node_pod(renders["full"])["spec"]["imagePullSecrets"] == [
        {"name": "registry-credentials"}
    ]


# ------------------------------------------------------------------ settings and secrets


SECRETS_DIR = "/etc/mediator/secrets"
# The variables naming a secret's file; the mediator reads each (mediator/settings/).
REDIS_FILE = "MEDIATOR_REDIS_PASSWORD_FILE"
SEED_FILE = "MEDIATOR_KEY_SEED_FILE"
TOKENS_FILE = "MEDIATOR_API_TOKENS_FILE"
WEBHOOK_FILE = "MEDIATOR_NOTIFY_WEBHOOK_SECRET_FILE"
SECRET_FILES = (REDIS_FILE, SEED_FILE, TOKENS_FILE, WEBHOOK_FILE)
COMPONENTS = {"node": "Deployment", "worker": "Deployment", "capacity-snapshot": "CronJob"}

# Where each component's secret files come from: variable -> (Secret, key).
EXPECTED_FILES: dict[str, dict[str, dict[str, tuple[str, str]]]] = {
    "full": {
        "node": {
            REDIS_FILE: ("med-didcomm", "redis-password"),
            SEED_FILE: ("med-didcomm", "key-seed"),
            TOKENS_FILE: ("med-didcomm", "api-tokens"),
            WEBHOOK_FILE: ("mediator-push", "webhook-secret"),
        },
        "worker": {
            REDIS_FILE: ("med-didcomm", "redis-password"),
            SEED_FILE: ("med-didcomm", "key-seed"),
            WEBHOOK_FILE: ("mediator-push", "webhook-secret"),
        },
        "capacity-snapshot": {
            REDIS_FILE: ("med-didcomm", "redis-password"),
            SEED_FILE: ("med-didcomm", "key-seed"),
        },
    },
    "standalone": {
        "node": {
            REDIS_FILE: ("valkey", "valkey-password"),
            TOKENS_FILE: ("med-mediator", "api-tokens"),
        },
        "worker": {REDIS_FILE: ("valkey", "valkey-password")},
    },
    "sentinel": {
        "node": {REDIS_FILE: ("redis", "redis-password")},
        "worker": {REDIS_FILE: ("redis", "redis-password")},
    },
    "cluster": {
        "node": {
            REDIS_FILE: ("valkey-cluster", "valkey-password"),
            SEED_FILE: ("mediator-secrets", "key-seed"),
            TOKENS_FILE: ("mediator-secrets", "api-tokens"),
        },
        "worker": {
            REDIS_FILE: ("valkey-cluster", "valkey-password"),
            SEED_FILE: ("mediator-secrets", "key-seed"),
        },
        "capacity-snapshot": {
            REDIS_FILE: ("valkey-cluster", "valkey-password"),
            SEED_FILE: ("mediator-secrets", "key-seed"),
        },
    },
    "minimal": {"node": {}, "worker": {}},
}

# The values of the Secrets the ci values name but the chart does not make.
PASSWORD = "Pw0rd-x"
SEED = "1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100"
FULL_SEED = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"  # ci/full
EXISTING = {
    ("valkey", "valkey-password"): PASSWORD,
    ("redis", "redis-password"): PASSWORD,
    ("valkey-cluster", "valkey-password"): PASSWORD,
    ("mediator-secrets", "key-seed"): SEED,
    ("mediator-secrets", "api-tokens"): "cluster-token",
    ("mediator-push", "webhook-secret"): "hook-key",
}


def own_secrets(render: Render) -> dict[tuple[str, str], str]:
    """(Secret, key) -> value of the chart's own Secret."""
    return {
        (secret["metadata"]["name"], key): base64.b64decode(value).decode()
        for secret in render.of_kind("Secret")
        for key, value in secret.get("data", {}).items()
    }


def secret_values(render: Render) -> dict[str, str]:
    return {key: value for (_, key), value in own_secrets(render).items()}


def all_secrets(render: Render) -> dict[tuple[str, str], str]:
    """(Secret, key) -> value: the chart's own Secret and the existing ones above."""
    return {**EXISTING, **own_secrets(render)}


def pod_of(render: Render, component: str) -> Doc:
    """The pod template of a component's Deployment or CronJob."""
    resource = render.component(COMPONENTS[component], component)
    if resource["kind"] == "CronJob":
        return dict(resource["spec"]["jobTemplate"]["spec"]["template"])
    return dict(resource["spec"]["template"])


def process_settings(render: Render, component: str, folder: Path) -> Settings:
    """The settings the component's process starts with: its environment and secret files as
    Kubernetes gives them, read by the mediator's own code."""
    pod = pod_of(render, component)
    box = pod["spec"]["containers"][0]
    env = process_environment(render, pod, box, all_secrets(render), folder / component)
    return Settings.from_environment(env)


def test_no_secret_value_outside_the_secret(renders: dict[str, Render]) -> None:
    """The password, seed and tokens are in the Secret and nowhere else in the render."""
    render = renders["full"]
    secrets = secret_values(render)
    others = "\n".join(str(d) for d in render.docs if d["kind"] != "Secret")

    assert set(secrets) == {"redis-password", "key-seed", "api-tokens"}
    assert secrets["api-tokens"] == "token-one,token-two"
    for value in [secrets["redis-password"], secrets["key-seed"], "token-one", "token-two"]:
        assert value not in others
    for key in render.config():
        assert key.removesuffix("_FILE") not in {
            "MEDIATOR_KEY_SEED",
            "MEDIATOR_API_TOKENS",
            "MEDIATOR_REDIS_URL",
            "MEDIATOR_REDIS_PASSWORD",
            "MEDIATOR_NOTIFY_WEBHOOK_SECRET",
        }


@pytest.mark.parametrize("mode", MODES)
def test_no_secret_in_any_environment(renders: dict[str, Render], mode: str) -> None:
    """No container of nodes, workers or jobs, the capacity snapshot included, gets a secret
    as a variable: no secretKeyRef, no Secret as envFrom, no secret's value."""
    render = renders[mode]
    for resource, template in render.workloads():
        component = resource["metadata"]["labels"]["app.kubernetes.io/component"]
        for box in template["spec"]["containers"]:
            assert secret_refs(box) == {}, (mode, component)
            assert "REDIS_PASSWORD" not in {e["name"] for e in box.get("env", [])}
            for entry in box.get("env", []):
                for value in all_secrets(render).values():
                    assert value not in str(entry.get("value", "")), (mode, entry["name"])


@pytest.mark.parametrize("mode", MODES)
def test_secrets_reach_each_pod_as_files(renders: dict[str, Render], mode: str) -> None:
    """Each *_FILE variable names a file of a mounted Secret: the right Secret and key."""
    render = renders[mode]
    own = {(s["metadata"]["name"], k) for s in render.of_kind("Secret") for k in s["data"]}
    for component, expected in EXPECTED_FILES[mode].items():
        pod = pod_of(render, component)
        box = pod["spec"]["containers"][0]
        named = {e["name"]: e["value"] for e in box["env"] if e["name"] in SECRET_FILES}
        found = {name: secret_file(pod, box, path) for name, path in named.items()}

        assert found == expected, (mode, component)
        for name, path in named.items():
            if name != WEBHOOK_FILE:
                assert path.startswith(SECRETS_DIR + "/"), path
        for secret, key in found.values():
            if secret in render.names("Secret"):  # the chart's own: the key is in it
                assert (secret, key) in own
    # and every key of the chart's Secret reaches some pod
    assert own <= {s for files in EXPECTED_FILES[mode].values() for s in files.values()}


def test_secrets_volume(renders: dict[str, Render]) -> None:
    """One projected volume, read-only, group-readable only, each key to a fixed file, no
    key optional; one source per Secret."""
    for mode, component, sources in [
        (
            "full",
            "node",
            [("med-didcomm", ["redis-password", "key-seed", "api-tokens"])],
        ),
        ("full", "worker", [("med-didcomm", ["redis-password", "key-seed"])]),
        ("full", "capacity-snapshot", [("med-didcomm", ["redis-password", "key-seed"])]),
        (
            "cluster",
            "capacity-snapshot",
            [("valkey-cluster", ["valkey-password"]), ("mediator-secrets", ["key-seed"])],
        ),
        (
            "cluster",
            "node",
            [
                ("valkey-cluster", ["valkey-password"]),
                ("mediator-secrets", ["key-seed", "api-tokens"]),
            ],
        ),
    ]:
        pod = pod_of(renders[mode], component)
        box = pod["spec"]["containers"][0]
        [volume] = [v for v in pod["spec"]["volumes"] if v["name"] == "secrets"]

        assert {"name": "secrets", "mountPath": SECRETS_DIR, "readOnly": True} in box[
            "volumeMounts"
        ]
        assert volume["projected"]["defaultMode"] == 0o440
        rendered = [
            (s["secret"]["name"], [i["key"] for i in s["secret"]["items"]])
            for s in volume["projected"]["sources"]
        ]
        assert rendered == sources, (mode, component)
        for source in volume["projected"]["sources"]:
            assert "optional" not in source["secret"]
            for item in source["secret"]["items"]:
                assert set(item) == {"key", "path"}
                assert item["path"] in {"redis-password", "key-seed", "api-tokens"}


def test_no_secrets_volume_without_secrets(renders: dict[str, Render]) -> None:
    render = renders["minimal"]
    node = container(node_pod(render), "node")

    assert node["env"] == [{"name": "MEDIATOR_REDIS_URL", "value": "redis://redis-master:6379/0"}]
    for _, template in render.workloads():
        assert all(v["name"] != "secrets" for v in template["spec"]["volumes"])
    assert not render.of_kind("Secret")


@pytest.mark.parametrize(
    ("mode", "expected_mode", "hosts", "user", "password"),
    [
        ("standalone", Mode.STANDALONE, (), None, PASSWORD),
        ("sentinel", Mode.SENTINEL, (("redis", 26379),), None, PASSWORD),
        ("cluster", Mode.CLUSTER, (("valkey-cluster", 6379),), None, PASSWORD),
        ("full", Mode.STANDALONE, (), "mediator", "s3cr3t-Password"),
    ],
)
def test_redis_url_as_the_process_sees_it(
    renders: dict[str, Render],
    tmp_path: Path,
    mode: str,
    expected_mode: Mode,
    hosts: tuple[tuple[str, int], ...],
    user: str | None,
    password: str,
) -> None:
    """MEDIATOR_REDIS_URL holds no password; the mediator's settings, read from the pod's
    environment and files, put the one from the file into it."""
    render = renders[mode]
    for component in ("node", "worker"):
        box = pod_of(render, component)["spec"]["containers"][0]
        literal = env_value(box, "MEDIATOR_REDIS_URL")["value"]
        assert password not in literal and "$(" not in literal and ":@" not in literal
        assert urlsplit(literal).password is None

        url = process_settings(render, component, tmp_path).redis.url
        target = parse(url)
        assert target.mode is expected_mode
        if expected_mode is Mode.STANDALONE:  # handed to redis-py's from_url as it is
            parts = urlsplit(url)
            assert (parts.username or None, parts.password) == (user, password)
        else:
            assert (target.username, target.password) == (user, password)
            assert target.hosts == hosts
        if mode == "sentinel":
            assert target.service == "mymaster"
            assert target.sentinel_password == password
        else:
            assert target.sentinel_password is None
        if mode == "full":
            assert target.tls
            assert urlsplit(url).path == "/2"
            assert literal == "rediss://mediator@redis.example.org:6380/2"


def test_seed_tokens_and_webhook_secret_as_the_process_sees_them(
    renders: dict[str, Render], tmp_path: Path
) -> None:
    full = renders["full"]
    node = process_settings(full, "node", tmp_path)
    worker = process_settings(full, "worker", tmp_path)
    cluster = process_settings(renders["cluster"], "node", tmp_path / "cluster")

    assert node.didcomm.key_seed == worker.didcomm.key_seed == FULL_SEED
    assert node.mqs.tokens == {"token-one", "token-two"}
    assert worker.mqs.tokens == frozenset()  # workers serve no API
    assert node.notify.webhook_secret == worker.notify.webhook_secret == "hook-key"
    assert cluster.didcomm.key_seed == SEED
    assert cluster.mqs.tokens == {"cluster-token"}


def redis_credentials(url: str) -> tuple[Mode, str | None, str | None, str | None]:
    """(mode, user, password, the sentinels' password) as the Redis clients get them from a
    URL: mediator.storage.target.parse, and redis-py's from_url for a single server (the
    mediator hands it that URL as it is; no connection is made here)."""
    target = parse(url)
    if target.mode is Mode.STANDALONE:
        found = redis.Redis.from_url(url).connection_pool.connection_kwargs
        return target.mode, found.get("username"), found.get("password"), None
    return target.mode, target.username, target.password, target.sentinel_password


@pytest.mark.parametrize(
    ("mode", "expected_mode", "user", "seed"),
    [
        pytest.param("full", Mode.STANDALONE, "mediator", FULL_SEED, id="full"),
        pytest.param("cluster", Mode.CLUSTER, None, SEED, id="cluster"),
    ],
)
def test_capacity_snapshot_reads_the_password_from_its_file(
    renders: dict[str, Render],
    tmp_path: Path,
    mode: str,
    expected_mode: Mode,
    user: str | None,
    seed: str,
) -> None:
    """`mediator capacity snapshot` reads Redis as the nodes do: the same MEDIATOR_REDIS_URL,
    without the password, and the password from its file (the nodes' Secret and key), which
    the mediator's settings put into the URL; no variable of its pod holds it."""
    render = renders[mode]
    box = pod_of(render, "capacity-snapshot")["spec"]["containers"][0]
    node = pod_of(render, "node")["spec"]["containers"][0]
    literal = env_value(box, "MEDIATOR_REDIS_URL")["value"]
    password = all_secrets(render)[EXPECTED_FILES[mode]["node"][REDIS_FILE]]

    assert literal == env_value(node, "MEDIATOR_REDIS_URL")["value"]
    assert urlsplit(literal).password is None and "$(" not in literal
    assert env_value(box, REDIS_FILE)["value"] == f"{SECRETS_DIR}/redis-password"
    assert "REDIS_PASSWORD" not in {e["name"] for e in box["env"]}
    settings = process_settings(render, "capacity-snapshot", tmp_path)
    assert redis_credentials(settings.redis.url) == (expected_mode, user, password, None)
    assert settings.didcomm.key_seed == seed  # the mailboxes' hash key is derived from it


def test_capacity_snapshot_sends_the_password_to_the_sentinels(helm: Helm, tmp_path: Path) -> None:
    """With redis.sentinelAuth the snapshot, as the nodes, gives the file's password to the
    sentinels too (MEDIATOR_REDIS_SENTINEL_AUTH)."""
    render = helm.template(values=[ci("sentinel")], sets=["capacity.enabled=true"])
    box = pod_of(render, "capacity-snapshot")["spec"]["containers"][0]

    assert env_value(box, "MEDIATOR_REDIS_SENTINEL_AUTH")["value"] == "true"
    assert secret_refs(box) == {}
    url = process_settings(render, "capacity-snapshot", tmp_path).redis.url
    assert redis_credentials(url) == (Mode.SENTINEL, None, PASSWORD, PASSWORD)
    assert parse(url).service == "mymaster"


def test_sentinel_auth(renders: dict[str, Render], helm: Helm) -> None:
    """redis.sentinelAuth: MEDIATOR_REDIS_SENTINEL_AUTH, for Sentinel URLs with a password."""
    for component in ("node", "worker"):
        box = pod_of(renders["sentinel"], component)["spec"]["containers"][0]
        assert env_value(box, "MEDIATOR_REDIS_SENTINEL_AUTH")["value"] == "true"
        literal = env_value(box, "MEDIATOR_REDIS_URL")["value"]
        assert literal == "redis+sentinel://redis:26379/mymaster"
    for mode in ("standalone", "cluster", "full", "minimal"):
        box = container(node_pod(renders[mode]), "node")
        assert "MEDIATOR_REDIS_SENTINEL_AUTH" not in {e["name"] for e in box["env"]}
    sentinel = "redis.url=redis+sentinel://redis:26379/mymaster"
    for sets in (
        [URL, "redis.password=pw", "redis.sentinelAuth=true"],  # not a Sentinel URL
        [sentinel, "redis.sentinelAuth=true"],  # no password to send
    ):
        box = container(node_pod(helm.template(sets=sets)), "node")
        assert "MEDIATOR_REDIS_SENTINEL_AUTH" not in {e["name"] for e in box["env"]}, sets


def test_an_existing_secret_key_set_to_empty_is_left_out(helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        "redis: {url: 'redis://valkey-primary:6379/0', existingSecret: valkey,"
        " existingSecretPasswordKey: ''}\n"
        "auth: {existingSecret: mine, existingSecretKeySeedKey: ''}\n"
    )
    render = helm.template(values=[values])
    node = container(node_pod(render), "node")
    worker = container(worker_pod(render), "worker")
    [volume] = [v for v in node_pod(render)["spec"]["volumes"] if v["name"] == "secrets"]

    assert {e["name"] for e in node["env"] if e["name"] in SECRET_FILES} == {TOKENS_FILE}
    assert volume["projected"]["sources"] == [
        {"secret": {"name": "mine", "items": [{"key": "api-tokens", "path": "api-tokens"}]}}
    ]
    assert worker["env"] == [
        {"name": "MEDIATOR_REDIS_URL", "value": "redis://valkey-primary:6379/0"},
        {"name": "MEDIATOR_WORKER_METRICS_LISTEN", "value": "0.0.0.0:9091"},
    ]
    assert all(v["name"] != "secrets" for v in worker_pod(render)["spec"]["volumes"])
    assert "No key seed" in helm.notes(values=[values])

    none = helm.template(values=[values], sets=["auth.existingSecretApiTokensKey="])
    assert all(v["name"] != "secrets" for v in node_pod(none)["spec"]["volumes"])
    assert "No API token" in helm.notes(values=[values], sets=["auth.existingSecretApiTokensKey="])


def test_redis_url_from_an_existing_secret(helm: Helm) -> None:
    """A whole URL has no file form: it stays a secretKeyRef, with checkov's skip, in every
    pod that reads Redis (the capacity snapshot too), and only there."""
    render = helm.template(
        sets=[
            "redis.existingSecret=redis-url",
            "redis.existingSecretUrlKey=url",
            "redis.sentinelAuth=true",
            "auth.keySeed=" + SEED,
            "capacity.enabled=true",
        ]
    )
    assert not secret_env_skipped(render.component("CronJob", "capacity-report"))
    for component in ("node", "worker", "capacity-snapshot"):
        pod = pod_of(render, component)
        box = pod["spec"]["containers"][0]
        assert env_value(box, "MEDIATOR_REDIS_URL") == {
            "name": "MEDIATOR_REDIS_URL",
            "valueFrom": {"secretKeyRef": {"name": "redis-url", "key": "url"}},
        }
        assert secret_refs(box) == {"MEDIATOR_REDIS_URL": ("redis-url", "url")}
        names = {e["name"] for e in box["env"]}
        assert not names & {REDIS_FILE, "REDIS_PASSWORD", "MEDIATOR_REDIS_SENTINEL_AUTH"}
        assert secret_file(pod, box, env_value(box, SEED_FILE)["value"]) == (
            "med-mediator",
            "key-seed",
        )
        resource = render.component(COMPONENTS[component], component)
        annotations = resource["metadata"]["annotations"]
        assert annotations["checkov.io/skip1"].startswith("CKV_K8S_35=redis.existingSecretUrlKey")


def secret_env_skipped(resource: Doc) -> bool:
    """Whether the resource carries checkov's skip of CKV_K8S_35 (secrets as files)."""
    annotations = resource["metadata"].get("annotations", {})
    skips = [v for k, v in annotations.items() if k.startswith("checkov.io/skip")]
    return any(s.startswith("CKV_K8S_35=") for s in skips)


@pytest.mark.parametrize("mode", MODES)
def test_secrets_as_files_never_skipped_without_a_url_secret(
    renders: dict[str, Render], mode: str
) -> None:
    """No ci values take the whole URL from a Secret: no workload, the capacity snapshot
    included, skips checkov's CKV_K8S_35 (secrets as files); each passes it
    (tests/helm/test_checkov.py)."""
    for resource, _ in renders[mode].workloads():
        component = resource["metadata"]["labels"]["app.kubernetes.io/component"]
        assert not secret_env_skipped(resource), (mode, component)


ODD_PASSWORD = "p@ss/w:rd%?#&x"


@pytest.mark.parametrize(
    ("url", "expected_mode"),
    [
        pytest.param("redis://redis-master:6379/0", Mode.STANDALONE, id="standalone"),
        pytest.param("redis+cluster://valkey-cluster:6379", Mode.CLUSTER, id="cluster"),
    ],
)
def test_any_password_characters_reach_every_process(
    helm: Helm, tmp_path: Path, url: str, expected_mode: Mode
) -> None:
    """The mediator escapes the file's password into the URL: any characters will do, with
    capacity.enabled too, the capacity snapshot reading it as the nodes and workers do."""
    render = helm.template(
        sets=[
            "redis.url=" + url,
            "redis.password=" + ODD_PASSWORD,
            "redis.username=app",
            "capacity.enabled=true",
        ]
    )
    assert own_secrets(render)[("med-mediator", "redis-password")] == ODD_PASSWORD
    for component in ("node", "worker", "capacity-snapshot"):
        redis_url = process_settings(render, component, tmp_path).redis.url
        found = redis_credentials(redis_url)
        assert found == (expected_mode, "app", ODD_PASSWORD, None), component
        if expected_mode is Mode.STANDALONE:
            parts = urlsplit(redis_url)
            assert (parts.hostname, parts.port, parts.path) == ("redis-master", 6379, "/0")
            assert unquote(parts.password or "") == ODD_PASSWORD
        else:
            assert parse(redis_url).hosts == (("valkey-cluster", 6379),)


def test_settings_in_the_configmap(renders: dict[str, Render]) -> None:
    full = renders["full"].config()
    standalone = renders["standalone"].config()

    assert full["MEDIATOR_WORKER_PARTITIONS"] == "32"
    assert full["MEDIATOR_QUEUE_DURATION_LIMIT"] == "2592000"
    assert full["MEDIATOR_LOG_LEVEL"] == "debug"
    assert standalone["MEDIATOR_ENDPOINT"] == "https://mediator.example.org"
    assert renders["cluster"].config()["MEDIATOR_ENDPOINT"] == "https://mediator.example.org"
    assert "MEDIATOR_ENDPOINT" not in renders["minimal"].config()
    [settings] = [d for d in renders["full"].of_kind("ConfigMap") if "MEDIATOR_HOST" in d["data"]]
    for _, template in renders["full"].workloads():
        for box in template["spec"]["containers"]:
            assert box["envFrom"] == [{"configMapRef": {"name": settings["metadata"]["name"]}}]


def checksums(render: Render) -> tuple[str, str]:
    annotations = node_pod(render)["metadata"]["annotations"]
    return annotations["checksum/config"], annotations["checksum/secret"]


def test_checksums_roll_the_pods(helm: Helm) -> None:
    base = helm.template(values=[ci("full")])
    settings = helm.template(values=[ci("full")], sets=["config.logLevel=warning"])
    secret = helm.template(values=[ci("full")], sets=["auth.apiTokens={token-three}"])

    assert checksums(base) == checksums(helm.template(values=[ci("full")]))
    assert checksums(settings)[0] != checksums(base)[0]
    assert checksums(settings)[1] == checksums(base)[1]
    assert checksums(secret)[0] == checksums(base)[0]
    assert checksums(secret)[1] != checksums(base)[1]
    for render in (base, settings, secret):
        for _, template in render.workloads():
            assert template["metadata"]["annotations"]["checksum/config"] == checksums(render)[0]
            assert template["metadata"]["annotations"]["checksum/secret"] == checksums(render)[1]


# ------------------------------------------------------------------ notifications


def test_nodes_and_workers_get_the_providers_credentials_from_one_secret(
    renders: dict[str, Render],
) -> None:
    """Workers send the notifications, nodes check the device registrations: both see the
    Secret's files, read-only, and the same settings; the webhook's key as a file too."""
    render = renders["full"]
    folder = "/etc/mediator/notifications"
    for pod, name in ((node_pod(render), "node"), (worker_pod(render), "worker")):
        box = container(pod, name)
        assert {"name": "notifications", "mountPath": folder, "readOnly": True} in box[
            "volumeMounts"
        ]
        [volume] = [v for v in pod["spec"]["volumes"] if v["name"] == "notifications"]
        assert volume["secret"] == {"secretName": "mediator-push", "defaultMode": 0o440}
        files = {
            "MEDIATOR_FCM_CREDENTIALS_FILE": f"{folder}/firebase-service-account.json",
            "MEDIATOR_APNS_KEY_FILE": f"{folder}/AuthKey_ABC123DEFG.p8",
            "MEDIATOR_APNS_TOPIC": "org.example.wallet",
            "MEDIATOR_APNS_ENVIRONMENT": "sandbox",
            "MEDIATOR_NOTIFY_INTERVAL_SECONDS": "60",
            "MEDIATOR_NOTIFY_WEBHOOK_URL": "https://notifier.example.org/didcomm",
        }
        for variable, value in files.items():
            assert env_value(box, variable)["value"] == value, (name, variable)
        webhook = env_value(box, "MEDIATOR_NOTIFY_WEBHOOK_SECRET_FILE")["value"]
        assert webhook == f"{folder}/webhook-secret"
        assert secret_file(pod, box, webhook) == ("mediator-push", "webhook-secret")
        assert "MEDIATOR_NOTIFY_WEBHOOK_SECRET" not in {e["name"] for e in box["env"]}


def test_no_notifications_by_default(renders: dict[str, Render]) -> None:
    for pod in (node_pod(renders["standalone"]), worker_pod(renders["standalone"])):
        assert all(v["name"] != "notifications" for v in pod["spec"]["volumes"])
        names = {e["name"] for c in pod["spec"]["containers"] for e in c.get("env", [])}
        assert not {n for n in names if "FCM" in n or "APNS" in n or "NOTIFY" in n}


def test_trusted_proxies_and_outbound_allow_reach_every_process(helm: Helm) -> None:
    render = helm.template(
        sets=[
            URL,
            "config.trustedProxies={10.0.0.0/8,fd00::/8}",
            "config.outboundAllow={10.20.0.0/16,*.agents.svc.cluster.local}",
        ]
    )
    config = render.config()
    assert config["MEDIATOR_TRUSTED_PROXIES"] == "10.0.0.0/8,fd00::/8"
    assert config["MEDIATOR_OUTBOUND_ALLOW"] == "10.20.0.0/16,*.agents.svc.cluster.local"
    plain = helm.template(sets=[URL]).config()
    assert "MEDIATOR_TRUSTED_PROXIES" not in plain and "MEDIATOR_OUTBOUND_ALLOW" not in plain
