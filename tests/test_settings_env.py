"""Tools without settings flags of their own (the capacity jobs) read the same MEDIATOR_*
variables as `mediator serve`, with the same types and defaults; and every variable and
flag keeps its name whichever section of the settings holds it."""

from __future__ import annotations

import click
import pytest

from mediator.cli import main
from mediator.errors import ConfigError
from mediator.settings import Settings


def test_variables_give_the_settings_a_node_would_have() -> None:
    seed = "ab9c1e2f3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f"
    settings = Settings.from_environment(
        {
            "MEDIATOR_KEY_SEED": seed,
            "MEDIATOR_QUEUE_DURATION_LIMIT": "86400",
            "MEDIATOR_IN_PROCESS_WORKER": "false",
            "MEDIATOR_DRAIN_SECONDS": "7.5",
            "OTHER_VARIABLE": "ignored",
        }
    )
    assert settings.didcomm.key_seed == seed
    assert settings.queue.duration_limit == 86400
    assert settings.worker.in_process is False
    assert settings.node.drain_seconds == 7.5
    assert Settings.from_environment({}) == Settings()


@pytest.mark.parametrize(
    ("name", "raw"),
    [("MEDIATOR_QUEUE_DURATION_LIMIT", "a month"), ("MEDIATOR_IN_PROCESS_WORKER", "maybe")],
)
def test_a_malformed_variable_says_which_and_why(name: str, raw: str) -> None:
    with pytest.raises(ConfigError, match=f"{name}='{raw}' is not a valid"):
        Settings.from_environment({name: raw})


def test_flat_names_and_sections_are_one_settings_object() -> None:
    """Tests and tools may name a setting as its flag does, or reach it in its section."""
    settings = Settings.of(lease_seconds=3.0, websocket_idle_seconds=0.0, node_id="n1")
    assert (settings.worker.lease_seconds, settings.websocket.idle_seconds) == (3.0, 0.0)
    assert settings.replace(node_id="n2").node.id == "n2"
    assert settings.replace(node_id="n2").worker == settings.worker
    with pytest.raises(TypeError, match="no setting is named 'idle_seconds'"):
        Settings.of(idle_seconds=1.0)


# ------------------------------------------------------------------ names and flags

# Every variable and flag a user may have in a deployment, by the commands that take them:
# `serve` and `worker` add theirs to the shared ones (migrate, invitation and pseudonym take
# only those). Grouping the settings in sections must never rename one.
SHARED = """
    REDIS_URL REDIS_PASSWORD REDIS_SENTINEL_AUTH WAIT_REPLICAS WAIT_FSYNC WAIT_TIMEOUT_SECONDS
    NODE_ID WORKER_PARTITIONS LEASE_SECONDS WORKER_TICK_SECONDS STATS_SECONDS HINT_POLL_SECONDS
    AUDIT_QUEUES_PER_SECOND WORKER_HEALTH_FILE LOG_LEVEL ENDPOINT WS_ENDPOINT LABEL KEY_SEED
    INVITATION_MULTI_USE INVITATION_TTL_SECONDS UNMEDIATED_CONNECTION_SECONDS MEDIATION_OPEN
    MEDIATION_ALLOWLIST LIMIT_FORWARDS_PER_SECOND LIMIT_SENDER_QUEUED_BYTES
    DELIVERY_TIMEOUT_SECONDS MAX_DELIVERY_LIMIT PUSH_TIMEOUT_SECONDS PUSH_RETRY_MIN_SECONDS
    PUSH_RETRY_MAX_SECONDS OUTBOUND_CA_FILE OUTBOUND_ALLOW OUTBOUND_DNS_SERVER
    OUTBOUND_CONNECT_TIMEOUT_SECONDS OUTBOUND_MAX_RESPONSE_BYTES OUTBOUND_PER_DESTINATION
    NOTIFY_DELAY_SECONDS NOTIFY_INTERVAL_SECONDS NOTIFY_ATTEMPTS NOTIFY_ALERT_TITLE
    NOTIFY_ALERT_BODY FCM_CREDENTIALS_FILE FCM_API_URL APNS_KEY_FILE APNS_KEY_ID APNS_TEAM_ID
    APNS_TOPIC APNS_ENVIRONMENT APNS_API_URL NOTIFY_WEBHOOK_URL NOTIFY_WEBHOOK_SECRET
    PUSH_APPS_FILE ROUTE_CACHE_SECONDS THREAD_STATE_SECONDS QUEUE_MESSAGE_COUNT_LIMIT
    QUEUE_MESSAGE_COUNT_MAX QUEUE_SIZE_LIMIT QUEUE_SIZE_MAX QUEUE_MESSAGE_SIZE_LIMIT
    QUEUE_MESSAGE_SIZE_MAX QUEUE_DURATION_LIMIT QUEUE_DURATION_MAX V2_NIST_KEYS
"""
SERVE_ONLY = """
    HOST PORT DATA_DIR REDIS_SERVER_BINARY STREAM_NODE_MAX_BYTES APPENDFSYNC API_TOKENS
    MAX_MESSAGE_BYTES MAX_REQUEST_BYTES MAX_BATCH_MESSAGES LONG_POLL_RECHECK_SECONDS
    IN_PROCESS_WORKER ALLOW_PLAINTEXT MAX_ENVELOPE_BYTES TRUSTED_PROXIES LIMIT_EXEMPT_NETWORKS
    LIMIT_HANDSHAKES_PER_MINUTE LIMIT_CONNECTIONS_PER_MINUTE LIMIT_SENDER_BYTES_PER_MINUTE
    WEBSOCKET_MESSAGES_PER_SECOND WEBSOCKET_SOCKETS_PER_ADDRESS WEBSOCKET_HANDSHAKE_SECONDS
    WEBSOCKET_COMPRESSION FORWARD_UNKNOWN_KEY_WAIT_SECONDS HANDSHAKE_PUSH_DELAY_SECONDS
    DRAIN_SECONDS STORAGE_LOST_SECONDS PRESENCE_SECONDS LIVE_RECHECK_SECONDS
    WEBSOCKET_PING_SECONDS WEBSOCKET_IDLE_SECONDS WEBSOCKET_MAX_AGE_SECONDS
    IMPLICIT_PICKUP_DELAY_SECONDS DID_WEB
"""
WORKER_ONLY = "WORKER_METRICS_LISTEN"
# On/off flags (--x / --no-x), and secrets (also read from a file: --x-file, MEDIATOR_X_FILE).
SWITCHES = """
    REDIS_SENTINEL_AUTH WAIT_FSYNC IN_PROCESS_WORKER INVITATION_MULTI_USE ALLOW_PLAINTEXT
    MEDIATION_OPEN WEBSOCKET_COMPRESSION V2_NIST_KEYS
"""
SECRETS = "REDIS_PASSWORD API_TOKENS KEY_SEED NOTIFY_WEBHOOK_SECRET"
OWN_FLAGS = {
    "serve": set(),
    "worker": {"--check"},
    "migrate": {"--dry-run", "--force"},
    "invitation": {"--json", "--v2", "--v2-did"},
    "pseudonym": set(),
}

Offered = set[tuple[tuple[str, ...], str | None]]


def _expected(command: str) -> Offered:
    names = SHARED.split()
    names += {"serve": SERVE_ONLY.split(), "worker": WORKER_ONLY.split()}.get(command, [])
    out: Offered = {((flag,), None) for flag in OWN_FLAGS[command]}
    for name in names:
        flag = "--" + name.lower().replace("_", "-")
        negated = ("--no-" + flag[2:],) if name in SWITCHES.split() else ()
        out.add((tuple(sorted((flag, *negated))), "MEDIATOR_" + name))
        if name in SECRETS.split():
            out.add(((flag + "-file",), f"MEDIATOR_{name}_FILE"))
    return out


def _offered(command: str) -> Offered:
    params = main.commands[command].params
    return {
        (tuple(sorted(p.opts + p.secondary_opts)), p.envvar if isinstance(p.envvar, str) else None)
        for p in params
        if isinstance(p, click.Option) and "--help" not in p.opts
    }


@pytest.mark.parametrize("command", sorted(OWN_FLAGS))
def test_every_variable_and_flag_keeps_its_name(command: str) -> None:
    offered, expected = _offered(command), _expected(command)
    assert offered - expected == set(), "new or renamed"
    assert expected - offered == set(), "gone or renamed"


def test_every_variable_reaches_the_settings() -> None:
    """Each variable, set to a value other than its default, changes the settings object
    (as the capacity jobs read them): none is read into a field of another name, none lost."""
    base = {"MEDIATOR_REDIS_URL": "redis+sentinel://s1:26379/main"}
    special = {
        "MEDIATOR_REDIS_URL": "redis://db:6379/3",
        "MEDIATOR_KEY_SEED": "ab9c1e2f3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f",
        "MEDIATOR_REDIS_SENTINEL_AUTH": "true",
    }
    params = {p.envvar: p for p in main.commands["serve"].params if isinstance(p, click.Option)}
    params |= {p.envvar: p for p in main.commands["worker"].params if isinstance(p, click.Option)}
    files = {f"MEDIATOR_{name}_FILE" for name in SECRETS.split()}
    variables = [v for v in params if isinstance(v, str) and v not in files]
    assert len(variables) == len(SHARED.split() + SERVE_ONLY.split() + WORKER_ONLY.split())
    for variable in variables:
        p = params[variable]
        if variable in special:
            text = special[variable]
        elif p.is_flag:
            text = "false" if p.default else "true"
        elif isinstance(p.default, int | float):
            text = str(p.default + 1)
        else:
            text = f"{p.default}-changed"
        env = dict(base)
        if variable == "MEDIATOR_REDIS_SENTINEL_AUTH":
            env["MEDIATOR_REDIS_PASSWORD"] = "pw"
            base_env = {**base, "MEDIATOR_REDIS_PASSWORD": "pw"}
        else:
            base_env = base
        env[variable] = text
        assert Settings.from_environment(env) != Settings.from_environment(base_env), variable
