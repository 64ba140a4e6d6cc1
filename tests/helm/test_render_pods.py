"""The pods the chart renders: probes, drain and grace, security, settings and secrets."""

from __future__ import annotations

import base64
import re
from urllib.parse import urlsplit

import pytest

from mediator.storage.target import Mode, parse
from tests.helm.chart import Doc, Helm, Render, ci, container, env_value, expand

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


def secret_values(render: Render) -> dict[str, str]:
    return {
        key: base64.b64decode(value).decode()
        for secret in render.of_kind("Secret")
        for key, value in secret.get("data", {}).items()
    }


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
        assert key not in {"MEDIATOR_KEY_SEED", "MEDIATOR_API_TOKENS", "MEDIATOR_REDIS_URL"}


def test_secret_env_of_each_component(renders: dict[str, Render]) -> None:
    render = renders["full"]
    [secret] = render.of_kind("Secret")
    node = container(node_pod(render), "node")
    worker = container(worker_pod(render), "worker")

    for name, key in [("MEDIATOR_KEY_SEED", "key-seed"), ("MEDIATOR_API_TOKENS", "api-tokens")]:
        reference = env_value(node, name)["valueFrom"]["secretKeyRef"]
        assert reference == {"name": secret["metadata"]["name"], "key": key}
    names = {e["name"] for e in worker["env"]}
    assert "MEDIATOR_KEY_SEED" not in names and "MEDIATOR_API_TOKENS" not in names


def test_existing_auth_secret(renders: dict[str, Render]) -> None:
    node = container(node_pod(renders["cluster"]), "node")

    assert env_value(node, "MEDIATOR_API_TOKENS")["valueFrom"]["secretKeyRef"] == {
        "name": "mediator-secrets",
        "key": "api-tokens",
        "optional": True,
    }
    assert not renders["cluster"].of_kind("Secret")


@pytest.mark.parametrize(
    ("mode", "expected_mode", "hosts", "user"),
    [
        ("standalone", Mode.STANDALONE, (), None),
        ("sentinel", Mode.SENTINEL, (("redis", 26379),), None),
        ("cluster", Mode.CLUSTER, (("valkey-cluster", 6379),), None),
        ("full", Mode.STANDALONE, (), "mediator"),
    ],
)
def test_redis_url_as_the_process_sees_it(
    renders: dict[str, Render],
    mode: str,
    expected_mode: Mode,
    hosts: tuple[tuple[str, int], ...],
    user: str | None,
) -> None:
    """MEDIATOR_REDIS_URL after Kubernetes' $(VAR) expansion, read by the mediator's parser."""
    render = renders[mode]
    for pod in (node_pod(render), worker_pod(render)):
        box = pod["spec"]["containers"][0]
        names = [e["name"] for e in box["env"]]
        assert names.index("REDIS_PASSWORD") < names.index("MEDIATOR_REDIS_URL")
        literal = env_value(box, "MEDIATOR_REDIS_URL")["value"]
        assert "$(REDIS_PASSWORD)" in literal
        url = expand(box, "MEDIATOR_REDIS_URL", {"REDIS_PASSWORD": "Pw0rd-x"})
        target = parse(url)
        assert target.mode is expected_mode
        if expected_mode is Mode.STANDALONE:  # handed to redis-py's from_url as it is
            parts = urlsplit(url)
            assert (parts.username or None, parts.password) == (user, "Pw0rd-x")
        else:
            assert (target.username, target.password) == (user, "Pw0rd-x")
            assert target.hosts == hosts
    if mode == "sentinel":
        assert target.service == "mymaster"
        assert target.sentinel_password == "Pw0rd-x"
    if mode == "full":
        assert target.tls
        assert urlsplit(url).path == "/2"


def test_redis_password_key_of_an_existing_secret(renders: dict[str, Render]) -> None:
    node = container(node_pod(renders["standalone"]), "node")

    assert env_value(node, "REDIS_PASSWORD")["valueFrom"]["secretKeyRef"] == {
        "name": "valkey",
        "key": "valkey-password",
    }


def test_redis_without_password(renders: dict[str, Render]) -> None:
    node = container(node_pod(renders["minimal"]), "node")

    assert node["env"] == [{"name": "MEDIATOR_REDIS_URL", "value": "redis://redis-master:6379/0"}]


def test_redis_url_from_an_existing_secret(helm: Helm) -> None:
    render = helm.template(
        sets=["redis.existingSecret=redis-url", "redis.existingSecretUrlKey=url"]
    )
    node = container(node_pod(render), "node")

    assert env_value(node, "MEDIATOR_REDIS_URL") == {
        "name": "MEDIATOR_REDIS_URL",
        "valueFrom": {"secretKeyRef": {"name": "redis-url", "key": "url"}},
    }
    assert "REDIS_PASSWORD" not in {e["name"] for e in node["env"]}


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
    Secret's files, read-only, and the same settings; the webhook's key only by reference."""
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
        assert env_value(box, "MEDIATOR_NOTIFY_WEBHOOK_SECRET")["valueFrom"] == {
            "secretKeyRef": {"name": "mediator-push", "key": "webhook-secret"}
        }


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
