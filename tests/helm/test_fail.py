"""Values the chart must refuse, with a message that says what to do."""

from __future__ import annotations

import base64

import pytest

from tests.helm.chart import Helm, RenderError, ci

pytestmark = pytest.mark.full  # starts processes: the full tier (tests/tiers.py)

URL = "redis.url=redis://redis-master:6379/0"


def refused(helm: Helm, *sets: str) -> str:
    with pytest.raises(RenderError) as failure:
        helm.template(sets=sets)
    return str(failure.value)


def test_missing_redis_url(helm: Helm) -> None:
    message = refused(helm)

    assert "VALUES VALIDATION" in message
    assert "redis.url: the nodes need a Redis, and none is given" in message


def test_url_from_an_existing_secret_needs_no_redis_url(helm: Helm) -> None:
    render = helm.template(
        sets=["redis.existingSecret=redis-url", "redis.existingSecretUrlKey=url"]
    )

    assert render.of_kind("Deployment")


def test_a_password_of_any_characters_renders_with_the_snapshot(helm: Helm) -> None:
    """The mediator escapes the password from its file into the URL, the capacity snapshot
    too (what each then reads: tests/helm/test_render_pods.py): no character is refused,
    capacity.enabled or not, and the Secret holds the password as it was given."""
    password = "p@ss/w:rd%?#&x"
    render = helm.template(sets=[URL, "redis.password=" + password, "capacity.enabled=true"])
    [secret] = render.of_kind("Secret")
    snapshot = render.component("CronJob", "capacity-snapshot")
    [box] = snapshot["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]

    assert base64.b64decode(secret["data"]["redis-password"]).decode() == password
    assert {e["name"] for e in box["env"]} >= {"MEDIATOR_REDIS_URL", "MEDIATOR_REDIS_PASSWORD_FILE"}
    assert password not in render.text.replace(secret["data"]["redis-password"], "")


def test_drain_longer_than_the_grace_period(helm: Helm) -> None:
    message = refused(helm, URL, "node.drainSeconds=60")

    assert "node.terminationGracePeriodSeconds: 40 is too short" in message
    assert "node.preStopSeconds (5) + node.drainSeconds (60) + 5 s of margin = 70" in message


def test_grace_period_exactly_enough_renders(helm: Helm) -> None:
    render = helm.template(
        sets=[URL, "node.drainSeconds=30", "node.terminationGracePeriodSeconds=40"]
    )

    assert render.config()["MEDIATOR_DRAIN_SECONDS"] == "30"


def test_every_problem_in_one_message(helm: Helm) -> None:
    """Bitnami style: the aggregator lists every failed check, not just the first."""
    message = refused(helm, "node.drainSeconds=60", "config.extra.API_TOKENS=leak")

    assert "redis.url: the nodes need a Redis" in message
    assert "node.terminationGracePeriodSeconds" in message
    assert "config.extra.API_TOKENS: is a secret" in message


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        pytest.param(["redis.url=http://redis:6379"], "is not a Redis URL", id="scheme"),
        pytest.param(
            ["redis.url=redis://:pw@redis:6379/0", "redis.password=other"],
            "holds user info",
            id="password-twice",
        ),
        pytest.param(
            ["redis.url=redis://app@redis:6379/0", "redis.username=other"],
            "holds user info (…@host) while redis.username names the user",
            id="user-twice",
        ),
        pytest.param(
            ["redis.url=redis://:pw@redis:6379/0", "redis.existingSecret=valkey"],
            "while the password comes from redis.existingSecret",
            id="password-in-url-and-secret",
        ),
        pytest.param(
            ["redis.url=unix:///run/redis.sock", "redis.password=pw"],
            "a unix:// URL cannot carry a password here",
            id="unix-password",
        ),
        pytest.param(
            [URL, "config.extra.REDIS_PASSWORD=leak"], "is a secret", id="password-in-config"
        ),
        pytest.param(
            [URL, "config.extra.NOTIFY_WEBHOOK_SECRET=leak"],
            "is a secret",
            id="webhook-secret-in-config",
        ),
        pytest.param(
            [URL, "redis.password=a", "redis.existingSecret=s"],
            "give the password one way only",
            id="two-sources",
        ),
        pytest.param(
            ["redis.existingSecretUrlKey=url"],
            "redis.existingSecretUrlKey: names a key of redis.existingSecret",
            id="url-key-without-secret",
        ),
        pytest.param([URL, "config.extra.KEY_SEED=00"], "is a secret", id="seed-in-config"),
        pytest.param(
            [URL, "capacity.enabled=true", "capacity.persistence.enabled=false"],
            "capacity.report.enabled: the report writes report.html to the volume",
            id="report-without-volume",
        ),
        pytest.param(
            [URL, "node.preStopAction=wait"], 'is neither "sleep" nor "exec"', id="prestop"
        ),
        pytest.param(
            [
                URL,
                "node.autoscaling.enabled=true",
                "node.autoscaling.minReplicas=5",
                "node.autoscaling.maxReplicas=3",
            ],
            "is above node.autoscaling.maxReplicas",
            id="hpa-bounds",
        ),
    ],
)
def test_impossible_values(helm: Helm, sets: list[str], expected: str) -> None:
    assert expected in refused(helm, *sets)


@pytest.mark.parametrize(
    ("assignment", "path", "got"),
    [
        pytest.param("node.replicaCount=two", "/node/replicaCount", "string", id="replicas"),
        pytest.param("node.drainSeconds=long", "/node/drainSeconds", "string", id="drain"),
        pytest.param("ingress.enabled=yes", "/ingress/enabled", "string", id="bool"),
        pytest.param("auth.apiTokens=abc", "/auth/apiTokens", "string", id="list"),
        pytest.param("redis.url=6379", "/redis/url", "number", id="url"),
    ],
)
def test_schema_refuses_wrong_types(helm: Helm, assignment: str, path: str, got: str) -> None:
    """values.schema.json (generated from values.yaml) is enforced by helm itself."""
    with pytest.raises(RenderError) as failure:
        helm.template(sets=[URL, assignment])

    message = str(failure.value)
    assert "don't meet the specifications of the schema" in message
    assert f"at '{path}': got {got}" in message


def test_schema_refuses_wrong_types_in_a_values_file(helm: Helm) -> None:
    with pytest.raises(RenderError, match="at '/worker/replicaCount': got string"):
        helm.template(values=[ci("minimal")], sets=["worker.replicaCount=two"])


def test_kubernetes_older_than_supported(helm: Helm) -> None:
    with pytest.raises(RenderError, match="kubeVersion"):
        helm.template(sets=[URL], kube_version="1.29.0")


def test_notification_keys_need_their_secret(helm: Helm) -> None:
    message = refused(helm, URL, "notifications.fcmCredentialsKey=firebase.json")

    assert "notifications: firebase.json name keys of notifications.existingSecret" in message


def test_an_apns_key_needs_its_ids_and_topic(helm: Helm) -> None:
    message = refused(
        helm, URL, "notifications.existingSecret=push", "notifications.apns.keyKey=key.p8"
    )

    assert "notifications.apns: the auth key needs keyId, teamId and topic" in message


def test_a_notifications_secret_nobody_uses(helm: Helm) -> None:
    message = refused(helm, URL, "notifications.existingSecret=push")

    assert "no provider uses it" in message
