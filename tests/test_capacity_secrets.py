"""The capacity snapshot reads the Redis password as the nodes do: from
MEDIATOR_REDIS_PASSWORD_FILE (or MEDIATOR_REDIS_PASSWORD), put into its --redis-url /
MEDIATOR_REDIS_URL escaped, and sent to the sentinels with MEDIATOR_REDIS_SENTINEL_AUTH. The
chart gives its pod only the URL and the file (tests/helm/test_render_pods.py), and its pod
runs against a Redis that wants the password in tests/kube/test_pods_run.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import redis

from mediator.storage.target import Mode, parse
from spark import snapshot

PASSWORD = "p@ss/w:rd%?#&x"


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The process environment without any MEDIATOR_ variable of the test run's."""
    for name in list(os.environ):
        if name.startswith("MEDIATOR_"):
            monkeypatch.delenv(name)
    return monkeypatch


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "redis-password"
    path.write_text(PASSWORD + "\n")  # as a Secret's file may end
    return path


@pytest.mark.parametrize(
    ("url", "mode"),
    [
        pytest.param("redis+cluster://app@valkey-cluster:6379", Mode.CLUSTER, id="cluster"),
        pytest.param("redis+sentinel://app@redis:26379/mymaster", Mode.SENTINEL, id="sentinel"),
    ],
)
def test_the_password_of_the_file_reaches_the_target(
    environment: pytest.MonkeyPatch, password_file: Path, url: str, mode: Mode
) -> None:
    environment.setenv("MEDIATOR_REDIS_PASSWORD_FILE", str(password_file))

    target = parse(snapshot._with_password(url))

    assert (target.mode, target.username, target.password) == (mode, "app", PASSWORD)
    assert target.sentinel_password is None
    assert PASSWORD not in target.redacted


def test_a_single_server_gets_it_escaped(
    environment: pytest.MonkeyPatch, password_file: Path
) -> None:
    environment.setenv("MEDIATOR_REDIS_PASSWORD_FILE", str(password_file))

    url = snapshot._with_password("rediss://app@redis.example.org:6380/2")
    kwargs = redis.Redis.from_url(url).connection_pool.connection_kwargs

    assert (kwargs["username"], kwargs["password"]) == ("app", PASSWORD)
    assert (kwargs["host"], kwargs["port"], kwargs["db"]) == ("redis.example.org", 6380, 2)


def test_the_sentinels_get_it_with_sentinel_auth(
    environment: pytest.MonkeyPatch, password_file: Path
) -> None:
    environment.setenv("MEDIATOR_REDIS_PASSWORD_FILE", str(password_file))
    environment.setenv("MEDIATOR_REDIS_SENTINEL_AUTH", "true")

    target = parse(snapshot._with_password("redis+sentinel://redis:26379/mymaster"))

    assert (target.password, target.sentinel_password) == (PASSWORD, PASSWORD)
    assert target.service == "mymaster"


def test_without_a_password_the_url_is_left_as_it_is(environment: pytest.MonkeyPatch) -> None:
    """A URL that carries its own password (redis.existingSecretUrlKey) is used as given."""
    url = "redis+cluster://:inside@valkey-cluster:6379"

    assert snapshot._with_password(url) == url
