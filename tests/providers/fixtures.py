"""Pytest fixtures for the local push providers, each yielding a running server whose credential
files live in the test's tmp_path; stopped after the test. Use them from a conftest or test
module with `from tests.providers.fixtures import fcm_server, apns_servers, webhook_server`
(and `tls_cert`, `apns_key` if needed)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.providers.apns import ApnsServer
from tests.providers.credentials import ApnsKey, TlsCert, write_apns_key, write_tls_cert
from tests.providers.fcm import FcmServer
from tests.providers.webhook import WebhookServer

APNS_TOPIC = "org.example.mediator"


@dataclass(frozen=True)
class ApnsServers:
    """The two APNs environments, sharing one auth key and one TLS CA as Apple's do."""

    sandbox: ApnsServer
    production: ApnsServer
    key: ApnsKey
    tls: TlsCert
    topic: str

    def env(self, production: bool = False) -> dict[str, str]:
        """Settings a client would need; the names are suggestions for the mediator's."""
        server = self.production if production else self.sandbox
        return {
            "MEDIATOR_APNS_KEY_FILE": str(self.key.path),
            "MEDIATOR_APNS_KEY_ID": self.key.key_id,
            "MEDIATOR_APNS_TEAM_ID": self.key.team_id,
            "MEDIATOR_APNS_TOPIC": self.topic,
            "MEDIATOR_APNS_API_URL": server.url,
            "MEDIATOR_APNS_CA_FILE": str(self.tls.ca_path),
        }


@pytest.fixture
def tls_cert(tmp_path: Path) -> TlsCert:
    """A CA (`ca_path`, the client's verify= bundle) and a server certificate for 127.0.0.1."""
    return write_tls_cert(tmp_path / "tls")


@pytest.fixture
def apns_key(tmp_path: Path) -> ApnsKey:
    """An APNs auth key file AuthKey_<KEYID>.p8 with its key id and team id."""
    return write_apns_key(tmp_path / "apns")


@pytest.fixture
def fcm_server(tmp_path: Path) -> Iterator[FcmServer]:
    """Google's token endpoint and FCM HTTP v1; `credentials_file` is the service account."""
    with FcmServer(tmp_path / "fcm") as server:
        yield server


@pytest.fixture
def apns_servers(apns_key: ApnsKey, tls_cert: TlsCert) -> Iterator[ApnsServers]:
    """A sandbox and a production APNs accepting topic `org.example.mediator`."""
    with (
        ApnsServer(apns_key, tls_cert, [APNS_TOPIC], "sandbox") as sandbox,
        ApnsServer(apns_key, tls_cert, [APNS_TOPIC], "production") as production,
    ):
        yield ApnsServers(sandbox, production, apns_key, tls_cert, APNS_TOPIC)


@pytest.fixture
def webhook_secret() -> str:
    return "whsec_" + secrets.token_hex(16)


@pytest.fixture
def webhook_server(webhook_secret: str) -> Iterator[WebhookServer]:
    """A receiver that checks X-Mediator-Signature with `webhook_secret` (its `secret`)."""
    with WebhookServer(webhook_secret) as server:
        yield server
