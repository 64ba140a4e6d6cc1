"""Secrets: the key seed, the mqs tokens and the Redis password from files (as container
platforms mount them), never in --help, logs or reprs; weak seeds refused; recipient keys in
logs only as keyed hashes."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from mediator.didcomm.did_peer import numalgo2_did
from mediator.didcomm.keys import KeyPair
from mediator.embedded import free_port
from mediator.errors import ConfigError
from mediator.ops import redact
from mediator.settings import Settings
from mediator.settings.storage import url_with_password
from mediator.storage.target import parse as parse_target
from tests.didcomm_peer import Peer, forward, mediator_key
from tests.eventually import eventually
from tests.servers import Node, start_binary_server

SEED = "7d1c0f5e9a3b2c4d6e8f0a1b3c5d7e9f1a2b3c4d5e6f708192a3b4c5d6e7f809"
TOKEN = "mqs-token-from-a-mounted-secret"
PASSWORD = "redis-pass/with:odd@chars"


@pytest.fixture
def secrets_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="mediator-secrets-") as d:
        root = Path(d)
        (root / "seed").write_text(SEED + "\n")
        (root / "tokens").write_text(TOKEN + "\n")
        (root / "redis").write_text(PASSWORD + "\n")
        yield root


@pytest.fixture
def locked_redis() -> Iterator[str]:
    """A server of the test's own that wants a password."""
    with tempfile.TemporaryDirectory(prefix="mediator-locked-redis-") as d:
        server = start_binary_server(Path(d))
        try:
            redis.Redis.from_url(server.url).config_set("requirepass", PASSWORD)
            yield server.url
        finally:
            server.stop()


def _mediator(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mediator", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.full
async def test_a_node_reads_its_seed_tokens_and_redis_password_from_files(
    secrets_dir: Path, locked_redis: str
) -> None:
    node = Node(
        locked_redis,
        MEDIATOR_KEY_SEED_FILE=str(secrets_dir / "seed"),
        MEDIATOR_API_TOKENS_FILE=str(secrets_dir / "tokens"),
        MEDIATOR_REDIS_PASSWORD_FILE=str(secrets_dir / "redis"),
        MEDIATOR_LOG_LEVEL="info",
    ).start()
    try:
        expected = KeyPair.from_seed(bytes.fromhex(SEED)).verkey_b58
        assert await mediator_key(node.base) == expected
        async with httpx.AsyncClient(base_url=node.base) as http:
            ok = await http.get("/queues", headers={"Authorization": f"Bearer {TOKEN}"})
            assert ok.status_code == 200
            refused = await http.get("/queues", headers={"Authorization": "Bearer other"})
            assert refused.status_code == 401
    finally:
        node.stop()
    output = node.output()
    for secret in (SEED, TOKEN, PASSWORD, "odd@chars"):
        assert secret not in output


@pytest.mark.full
def test_without_the_password_the_node_does_not_get_ready(locked_redis: str) -> None:
    node = Node(locked_redis)
    with pytest.raises(RuntimeError):
        node.start(timeout=8)
    node.stop()


@pytest.mark.full
@pytest.mark.parametrize(
    ("seed", "why"),
    [
        (SEED[:62], "must be 32"),
        ("not hex at all", "64 hexadecimal characters"),
        ("00" * 32, "not random"),
    ],
)
def test_a_weak_or_short_seed_is_refused_before_anything_starts(seed: str, why: str) -> None:
    done = _mediator("serve", env={"MEDIATOR_KEY_SEED": seed})
    assert done.returncode == 2
    assert why in done.stderr
    if len(seed) > 8:
        assert seed not in done.stderr + done.stdout


@pytest.mark.full
def test_a_secret_given_twice_or_from_an_empty_file_is_refused(secrets_dir: Path) -> None:
    both = _mediator(
        "serve",
        env={"MEDIATOR_API_TOKENS": "x", "MEDIATOR_API_TOKENS_FILE": str(secrets_dir / "tokens")},
    )
    assert both.returncode == 2 and "both given" in both.stderr
    (secrets_dir / "empty").write_text("\n")
    empty = _mediator("worker", "--redis-password-file", str(secrets_dir / "empty"))
    assert empty.returncode == 2 and "empty file" in empty.stderr
    missing = _mediator("serve", "--key-seed-file", str(secrets_dir / "nope"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr


@pytest.mark.full
def test_help_shows_no_secret_even_when_it_is_set() -> None:
    for command in ("serve", "worker"):
        done = _mediator(
            command,
            "--help",
            env={
                "MEDIATOR_KEY_SEED": SEED,
                "MEDIATOR_API_TOKENS": TOKEN,
                "MEDIATOR_REDIS_PASSWORD": PASSWORD,
                "MEDIATOR_NOTIFY_WEBHOOK_SECRET": "hook-secret-value",
            },
        )
        assert done.returncode == 0
        assert "--key-seed-file" in done.stdout and "MEDIATOR_KEY_SEED_FILE" in done.stdout
        for secret in (SEED, TOKEN, PASSWORD, "hook-secret-value"):
            assert secret not in done.stdout


def test_settings_never_show_secrets_in_their_repr() -> None:
    settings = Settings.of(
        redis_url="redis://db.internal:6379/0",
        redis_password=PASSWORD,
        key_seed=SEED,
        api_tokens=TOKEN,
        notify_webhook_secret="hook-secret-value",
    )
    shown = repr(settings)
    for secret in (SEED, TOKEN, "redis-pass", "hook-secret-value"):
        assert secret not in shown
    with pytest.raises(ConfigError, match="needs --redis-url"):
        Settings.of(redis_password=PASSWORD)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://db:6379/2", "redis://:p%40ss@db:6379/2"),
        ("redis://app:old@db:6379/2", "redis://app:p%40ss@db:6379/2"),
        (
            "redis+sentinel://s1:26379,s2/mymaster/1",
            "redis+sentinel://:p%40ss@s1:26379,s2/mymaster/1",
        ),
        ("rediss+cluster://u@c1:6379,c2:6379", "rediss+cluster://u:p%40ss@c1:6379,c2:6379"),
        ("unix:///run/redis.sock?db=1&password=old", "unix:///run/redis.sock?db=1&password=p%40ss"),
    ],
)
def test_the_password_goes_into_every_kind_of_url(url: str, expected: str) -> None:
    assert url_with_password(url, "p@ss") == expected


def test_sentinel_auth_sends_the_password_to_the_sentinels_too() -> None:
    settings = Settings.of(
        redis_url="redis+sentinel://s1:26379,s2/mymaster/1?sentinel_password=old",
        redis_password="p@ss",
        redis_sentinel_auth=True,
    )
    target = parse_target(settings.redis.url)
    assert (target.password, target.sentinel_password) == ("p@ss", "p@ss")
    assert (target.service, target.db) == ("mymaster", 1)
    with pytest.raises(ConfigError, match="needs a redis\\+sentinel"):
        Settings.of(redis_url="redis://db:6379/0", redis_password="x", redis_sentinel_auth=True)
    with pytest.raises(ConfigError, match="give one"):
        Settings.of(redis_url="redis+sentinel://s1/m", redis_sentinel_auth=True)


def test_keys_and_dids_in_log_lines_become_keyed_hashes() -> None:
    key = KeyPair.generate()
    line = f"connection {key.verkey_b58} made; forward to {key.did_key}"
    shown = redact.redact(line)
    assert key.verkey_b58 not in shown and key.did_key not in shown
    assert shown.count(redact.PREFIX) == 2
    # Stable for one deployment key, different under another: not searchable without it.
    assert redact.pseudonym(key.verkey_b58) == redact.pseudonym(key.verkey_b58)
    other = redact.pseudonym(key.verkey_b58, under=redact.derive(b"another deployment"))
    assert other != redact.pseudonym(key.verkey_b58)
    # Base64 data is left alone (no key inside a longer run).
    blob = "eyJ" + "A" * 60 + key.verkey_b58 + "B" * 10
    assert redact.redact(blob) == blob


@pytest.mark.full
async def test_a_nodes_logs_never_name_a_wallets_keys(redis_url: str) -> None:
    """A wallet connects, is granted mediation, registers a key, gets a forward and picks it
    up; another, with an endpoint nothing listens on, gets a forward whose push fails: on a
    node logging at debug level, none of their keys appears in the node's output, not even
    as a prefix."""
    node = Node(redis_url, MEDIATOR_LOG_LEVEL="debug", MEDIATOR_OUTBOUND_ALLOW="127.0.0.0/8")
    node.start()
    try:
        mediator = await mediator_key(node.base)
        async with Peer(node.base, mediator) as peer:
            key = await peer.mediate()
            assert (await forward(node.base, mediator, key, {"hi": 1})).status_code == 202
            stranger = KeyPair.generate().verkey_b58  # nobody's: refused, its key in the answer
            assert (await forward(node.base, mediator, stranger, {"x": 1})).status_code == 404
            delivered = await peer.deliver()
            assert delivered["@type"].endswith("/delivery")
            wallet_keys = [peer.keys.verkey_b58, key, stranger]
        pushed = Peer(node.base, mediator)  # connected with an endpoint in its DID
        try:
            dead = f"http://127.0.0.1:{free_port()}/"
            request = pushed.message(
                "didexchange/1.1/request", label="pushed", did=numalgo2_did(pushed.keys, [dead])
            )
            await pushed.request_message(request)
            await pushed.mediate_request()
            pushed_key = await pushed.register_key()
            assert (await forward(node.base, mediator, pushed_key, {"n": 1})).status_code == 202

            async def output() -> str:
                return node.output()

            await eventually(output, lambda out: "push to key#" in out, within=30)
            wallet_keys += [pushed.keys.verkey_b58, pushed_key]
        finally:
            await pushed.close()
    finally:
        node.stop()
    output = node.output()
    assert redact.PREFIX in output  # the connections' lines are there, hashed
    assert "push to key#" in output, output[-3000:]
    for k in wallet_keys:
        assert k not in output and k[:8] not in output


@pytest.mark.full
def test_the_pseudonym_command_names_a_key_as_the_logs_do() -> None:
    key = KeyPair.generate().verkey_b58
    done = _mediator("pseudonym", key, env={"MEDIATOR_KEY_SEED": SEED})
    assert done.returncode == 0
    shown = done.stdout.strip().split("\t")
    under = redact.derive(bytes.fromhex(SEED))
    assert shown == [key, redact.pseudonym(key, under=under)]
