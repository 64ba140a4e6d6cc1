"""What surrounds the pods: labels and selectors, traffic, network policies, scaling,
disruption budgets, monitoring, the capacity jobs and NOTES."""

from __future__ import annotations

import pytest
import yaml

from tests.helm.chart import CHART, Doc, Helm, Render, ci, matches

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)

MODES = ["standalone", "sentinel", "cluster", "minimal", "full"]
URL = "redis.url=redis://redis-master:6379/0"
STANDARD = {
    "helm.sh/chart": "mediator-0.1.0",
    "app.kubernetes.io/instance": "med",
    "app.kubernetes.io/version": "0.1.0",
    "app.kubernetes.io/managed-by": "Helm",
}


def pod_labels(render: Render, component: str) -> dict[str, str]:
    labels: dict[str, str] = render.component("Deployment", component)["spec"]["template"][
        "metadata"
    ]["labels"]
    return labels


# ------------------------------------------------------------------ labels


@pytest.mark.parametrize("mode", MODES)
def test_labels_and_selectors(renders: dict[str, Render], mode: str) -> None:
    render = renders[mode]
    name = "didcomm" if mode == "full" else "mediator"
    for doc in render.docs:
        if doc["metadata"]["name"].endswith("-extra"):
            continue  # extraDeploy: the user's own manifest
        labels = doc["metadata"]["labels"]
        assert STANDARD.items() <= labels.items(), doc["metadata"]["name"]
        assert labels["app.kubernetes.io/name"] == name
        assert doc["metadata"]["namespace"] == "mediator"
    for deployment in render.of_kind("Deployment"):
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert set(selector) == {
            "app.kubernetes.io/name",
            "app.kubernetes.io/instance",
            "app.kubernetes.io/component",
        }
        assert matches(selector, deployment["spec"]["template"]["metadata"]["labels"])
    node, worker = pod_labels(render, "node"), pod_labels(render, "worker")
    service = render.component("Service", "node")
    assert matches(service["spec"]["selector"], node)
    assert not matches(service["spec"]["selector"], worker)
    for pdb in render.of_kind("PodDisruptionBudget"):
        component = pdb["metadata"]["labels"]["app.kubernetes.io/component"]
        assert matches(pdb["spec"]["selector"]["matchLabels"], pod_labels(render, component))
    for policy in render.of_kind("NetworkPolicy"):
        component = policy["metadata"]["labels"]["app.kubernetes.io/component"]
        if component != "capacity":
            selector = policy["spec"]["podSelector"]["matchLabels"]
            assert matches(selector, pod_labels(render, component))


def test_common_labels_and_extra_deploy(renders: dict[str, Render]) -> None:
    render = renders["full"]
    extra = render.get("ConfigMap", "med-extra")

    assert extra["data"] == {"note": "extra"} and extra["metadata"]["namespace"] == "mediator"
    for doc in render.docs:
        if doc is not extra:
            assert doc["metadata"]["labels"]["team"] == "messaging"
            assert doc["metadata"]["annotations"]["owner"] == "messaging@example.org"


# ------------------------------------------------------------------ traffic


def test_service(renders: dict[str, Render]) -> None:
    service = renders["minimal"].component("Service", "node")

    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP", "appProtocol": "http"}
    ]


def paths(ingress: Doc) -> dict[str, str]:
    [rule] = ingress["spec"]["rules"]
    return {p["path"]: p["pathType"] for p in rule["http"]["paths"]}


def test_ingress_routes_didcomm_with_websocket_timeouts(renders: dict[str, Render]) -> None:
    [ingress] = renders["standalone"].of_kind("Ingress")
    [rule] = ingress["spec"]["rules"]

    assert rule["host"] == "mediator.example.org"
    assert paths(ingress) == {"/": "Exact", "/invitation": "Exact"}
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["metadata"]["annotations"] == {
        "nginx.ingress.kubernetes.io/proxy-read-timeout": "3600",
        "nginx.ingress.kubernetes.io/proxy-send-timeout": "3600",
    }
    assert ingress["spec"]["tls"] == [
        {"hosts": ["mediator.example.org"], "secretName": "mediator.example.org-tls"}
    ]
    for path in rule["http"]["paths"]:
        assert path["backend"]["service"] == {"name": "med-mediator", "port": {"name": "http"}}


def test_ingress_exposes_mqs_only_when_asked(renders: dict[str, Render]) -> None:
    [ingress] = renders["full"].of_kind("Ingress")

    assert paths(ingress) == {
        "/": "Exact",
        "/invitation": "Exact",
        "/queues": "Prefix",
        "/messages": "Prefix",
        "/openapi.json": "Exact",
    }
    assert ingress["spec"]["tls"][0]["secretName"] == "mediator-tls"


def test_httproute_keeps_websockets_open(renders: dict[str, Render]) -> None:
    [route] = renders["cluster"].of_kind("HTTPRoute")
    [rule] = route["spec"]["rules"]

    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert route["spec"]["parentRefs"] == [
        {"name": "public", "namespace": "gateway", "sectionName": "https"}
    ]
    assert route["spec"]["hostnames"] == ["mediator.example.org"]
    assert rule["timeouts"] == {"request": "0s"}
    assert rule["backendRefs"] == [{"name": "med-mediator", "port": 80}]
    assert [m["path"] for m in rule["matches"]] == [
        {"type": "Exact", "value": "/"},
        {"type": "Exact", "value": "/invitation"},
    ]
    [full] = renders["full"].of_kind("HTTPRoute")
    assert {"type": "PathPrefix", "value": "/queues"} in [
        m["path"] for m in full["spec"]["rules"][0]["matches"]
    ]


# ------------------------------------------------------------------ network policies


def rules_by_port(rules: list[Doc]) -> dict[int, list[Doc]]:
    found: dict[int, list[Doc]] = {}
    for rule in rules:
        assert rule.get("ports"), f"a rule without ports allows everything: {rule}"
        for port in {p["port"] for p in rule["ports"]}:
            found.setdefault(port, []).append(rule)
    return found


def test_network_policies_default(renders: dict[str, Render]) -> None:
    render = renders["standalone"]
    private = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10"]
    valkey = [{"podSelector": {"matchLabels": {"app.kubernetes.io/instance": "valkey"}}}]
    for component in ("node", "worker"):
        spec = render.component("NetworkPolicy", component)["spec"]
        assert spec["policyTypes"] == ["Ingress", "Egress"]
        egress = rules_by_port(spec["egress"])
        assert set(egress) == {53, 6379, 26379, 443, 80}
        [dns] = egress[53]
        assert {p["protocol"] for p in dns["ports"]} == {"UDP", "TCP"}
        assert dns["to"] == [
            {
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": "kube-system"}
                },
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
            }
        ]
        assert egress[6379][0]["to"] == valkey and egress[26379][0]["to"] == valkey
        [push] = egress[443]
        assert push["to"] == [{"ipBlock": {"cidr": "0.0.0.0/0", "except": private}}]
    node = render.component("NetworkPolicy", "node")["spec"]
    assert node["ingress"] == [{"ports": [{"port": 8080, "protocol": "TCP"}]}]
    worker = render.component("NetworkPolicy", "worker")["spec"]
    assert rules_by_port(worker["ingress"]).keys() == {9091}


def test_network_policies_everything_on(renders: dict[str, Render]) -> None:
    render = renders["full"]
    node = render.component("NetworkPolicy", "node")["spec"]
    capacity = render.component("NetworkPolicy", "capacity")["spec"]
    monitoring = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    }

    assert node["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}
    ]
    assert node["ingress"][1]["from"] == [monitoring]
    assert rules_by_port(node["egress"]).keys() == {53, 6380, 443, 80, 4317}
    assert capacity["ingress"] == []
    assert rules_by_port(capacity["egress"]).keys() == {53, 6380, 443, 4317}
    assert capacity["podSelector"]["matchExpressions"] == [
        {
            "key": "app.kubernetes.io/component",
            "operator": "In",
            "values": ["capacity-snapshot", "capacity-report"],
        }
    ]
    for cronjob in render.of_kind("CronJob"):
        labels = cronjob["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
        assert matches(capacity["podSelector"]["matchLabels"], labels)
        assert labels["app.kubernetes.io/component"] in ("capacity-snapshot", "capacity-report")


def test_push_egress_off_and_network_policies_off(helm: Helm) -> None:
    no_push = helm.template(sets=[URL, "networkPolicy.pushEgress.enabled=false"])
    none = helm.template(sets=[URL, "networkPolicy.enabled=false"])

    node = no_push.component("NetworkPolicy", "node")["spec"]
    assert rules_by_port(node["egress"]).keys() == {53, 6379, 26379}
    assert not none.of_kind("NetworkPolicy")


# ------------------------------------------------------------------ scaling and disruption


def test_hpa(renders: dict[str, Render]) -> None:
    render = renders["full"]
    [hpa] = render.of_kind("HorizontalPodAutoscaler")
    node = render.component("Deployment", "node")

    assert "replicas" not in node["spec"]
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": node["metadata"]["name"],
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 12)
    assert hpa["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 70},
            },
        },
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "mediator_websockets"},
                "target": {"type": "AverageValue", "averageValue": "4000"},
            },
        },
    ]
    assert hpa["spec"]["behavior"]["scaleDown"]["policies"] == [
        {"type": "Pods", "value": 1, "periodSeconds": 60}
    ]
    assert not renders["minimal"].of_kind("HorizontalPodAutoscaler")
    assert renders["minimal"].component("Deployment", "node")["spec"]["replicas"] == 2


def test_pdbs(renders: dict[str, Render], helm: Helm) -> None:
    minimal = renders["minimal"]
    full = renders["full"]

    assert minimal.component("PodDisruptionBudget", "node")["spec"]["maxUnavailable"] == 1
    assert minimal.component("PodDisruptionBudget", "worker")["spec"]["maxUnavailable"] == 1
    assert full.component("PodDisruptionBudget", "node")["spec"]["minAvailable"] == 2
    assert "maxUnavailable" not in full.component("PodDisruptionBudget", "node")["spec"]
    assert full.component("PodDisruptionBudget", "worker")["spec"]["minAvailable"] == 1
    off = helm.template(sets=[URL, "node.pdb.create=false", "worker.pdb.create=false"])
    assert not off.of_kind("PodDisruptionBudget")


def test_topology_spread(renders: dict[str, Render]) -> None:
    default = renders["minimal"].component("Deployment", "node")["spec"]["template"]["spec"]
    custom = renders["full"].component("Deployment", "node")["spec"]["template"]["spec"]
    node = pod_labels(renders["full"], "node")

    assert [c["topologyKey"] for c in default["topologySpreadConstraints"]] == [
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
    ]
    [constraint] = custom["topologySpreadConstraints"]
    assert constraint["whenUnsatisfiable"] == "DoNotSchedule"
    assert matches(constraint["labelSelector"]["matchLabels"], node)


# ------------------------------------------------------------------ monitoring


def test_monitoring_needs_the_operator_api(helm: Helm, renders: dict[str, Render]) -> None:
    without = helm.template(values=[ci("full")])
    rules = yaml.safe_load((CHART / "files" / "prometheus-rules.yaml").read_text())

    assert not without.of_kind("ServiceMonitor") and not without.of_kind("PrometheusRule")
    with_api = renders["full"]
    [rule] = with_api.of_kind("PrometheusRule")
    assert rule["spec"]["groups"] == rules["groups"]
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    node = with_api.component("ServiceMonitor", "node")["spec"]
    worker = with_api.component("ServiceMonitor", "worker")["spec"]
    assert node["endpoints"][0]["port"] == "http" and node["endpoints"][0]["path"] == "/metrics"
    assert worker["endpoints"][0]["port"] == "metrics"
    for monitor, component in ((node, "node"), (worker, "worker")):
        services = [
            s
            for s in with_api.of_kind("Service")
            if matches(monitor["selector"]["matchLabels"], s["metadata"]["labels"])
        ]
        assert len(services) == 1
        [port] = services[0]["spec"]["ports"]
        assert port["name"] == monitor["endpoints"][0]["port"]
        assert matches(services[0]["spec"]["selector"], pod_labels(with_api, component))
    assert not renders["standalone"].of_kind("ServiceMonitor")


def test_grafana_dashboard(renders: dict[str, Render]) -> None:
    dashboard = renders["full"].component("ConfigMap", "dashboard")

    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["data"]["mediator.json"] == (
        (CHART / "files" / "grafana-dashboard.json").read_text().rstrip("\n")
    )


# ------------------------------------------------------------------ capacity jobs


def cronjob(render: Render, component: str) -> tuple[Doc, Doc]:
    job = render.component("CronJob", component)
    [box] = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return job, box


def test_capacity_jobs_on_a_volume(renders: dict[str, Render]) -> None:
    render = renders["full"]
    snapshot, snap = cronjob(render, "capacity-snapshot")
    report, rep = cronjob(render, "capacity-report")
    [claim] = render.of_kind("PersistentVolumeClaim")

    assert snapshot["spec"]["schedule"] == "7 * * * *"
    assert report["spec"]["schedule"] == "40 3 * * *"
    assert snap["args"][:4] == ["capacity", "snapshot", "--out", "/data/history"]
    assert snap["args"][-2:] == ["--memory-sample-rate", "0.05"]
    assert "--driver-memory" in snap["args"] and "3g" in snap["args"]
    assert rep["args"][:6] == [
        "capacity",
        "report",
        "--history",
        "/data/history",
        "--out",
        "/data/reports",
    ]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    for job, box in ((snapshot, snap), (report, rep)):
        spec = job["spec"]
        assert spec["concurrencyPolicy"] == "Forbid"
        assert spec["jobTemplate"]["spec"]["backoffLimit"] == 1
        assert spec["jobTemplate"]["spec"]["activeDeadlineSeconds"] > 0
        pod = spec["jobTemplate"]["spec"]["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        [data] = [v for v in pod["volumes"] if v["name"] == "data"]
        assert data["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        assert {"name": "data", "mountPath": "/data"} in box["volumeMounts"]
        assert {"name": "HOME", "value": "/tmp"} in box["env"]
        assert box["resources"]["limits"]["memory"] == "4Gi"
    # The snapshot reads Redis, the password and the key seed from their files
    # (tests/helm/test_render_pods.py); the report reads none, and no job the API tokens.
    names = {e["name"] for e in snap["env"]}
    assert {"MEDIATOR_REDIS_URL", "MEDIATOR_REDIS_PASSWORD_FILE", "MEDIATOR_KEY_SEED_FILE"} <= names
    assert not names & {
        "REDIS_PASSWORD",
        "MEDIATOR_REDIS_PASSWORD",
        "MEDIATOR_API_TOKENS",
        "MEDIATOR_API_TOKENS_FILE",
        "MEDIATOR_KEY_SEED",
    }
    assert {"name": "secrets", "mountPath": "/etc/mediator/secrets", "readOnly": True} in snap[
        "volumeMounts"
    ]
    rep_names = {e["name"] for e in rep["env"]}
    assert not rep_names & {
        "MEDIATOR_REDIS_URL",
        "REDIS_PASSWORD",
        "MEDIATOR_REDIS_PASSWORD_FILE",
        "MEDIATOR_KEY_SEED_FILE",
    }
    assert all(m["name"] != "secrets" for m in rep["volumeMounts"])


def test_capacity_history_in_an_object_store(renders: dict[str, Render]) -> None:
    render = renders["cluster"]
    _, snap = cronjob(render, "capacity-snapshot")
    report, rep = cronjob(render, "capacity-report")

    assert snap["args"][2:4] == ["--out", "s3a://mediator-capacity/history"]
    assert rep["args"][2:4] == ["--history", "s3a://mediator-capacity/history"]
    assert not render.of_kind("PersistentVolumeClaim")
    [data] = [
        v
        for v in report["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"]
        if v["name"] == "data"
    ]
    assert data["persistentVolumeClaim"]["claimName"] == "mediator-reports"
    assert not renders["minimal"].of_kind("CronJob")


# ------------------------------------------------------------------ NOTES


def test_notes_warn(helm: Helm) -> None:
    notes = helm.notes(sets=[URL, "node.pdb.create=false", "node.replicaCount=1"])

    assert "No API token (auth.apiTokens): the mqs queue API is disabled" in notes
    assert "No PodDisruptionBudget for the nodes" in notes
    assert "One node only" in notes
    assert "No public endpoint" in notes
    assert "kubectl -n mediator port-forward svc/med-mediator 8080:80" in notes


def test_notes_urls_and_exposed_mqs(helm: Helm) -> None:
    notes = helm.notes(values=[ci("full")])

    assert "POST https://mediator.example.org/" in notes
    assert "wss://mediator.example.org/" in notes
    assert "The mqs API (/queues, /messages) is exposed publicly" in notes
    assert "No API token" not in notes and "No PodDisruptionBudget" not in notes
    assert "no monitoring.coreos.com/v1 API" in notes


def test_notes_quiet_when_all_is_set(helm: Helm) -> None:
    notes = helm.notes(values=[ci("standalone")], sets=["auth.keySeed=" + "ab" * 32])

    assert "WARNINGS" not in notes, notes
