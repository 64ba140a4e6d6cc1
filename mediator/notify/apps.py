"""The wallet apps a mediator notifies, and which provider reaches a device.

A device token belongs to one app: an FCM token to one Firebase project, an APNs token to
one bundle id (topic). So a mediator shared by several wallet apps keeps, per app, the
credentials that reach its devices, and ties each device to its app when the device
registers (docs/push.md):

- the app the `set-device-info` message names in its `app` field (our extension; wallets
  that send none get the default), else
- the default app: the apps file's app marked `"default": true`; without one, the app the
  `--fcm-*`, `--apns-*` and `--notify-webhook-*` settings make (named `default`); without
  those, the file's first.

Within an app a device registered through push-notifications-fcm is sent through FCM, one
registered through push-notifications-apns through APNs, and either through the app's
webhook when it has no credentials for that service.

The apps file (`--push-apps-file`) is JSON:

    {"apps": [{"name": "bcwallet", "default": true,
               "fcm": {"credentials_file": "/secrets/bc-fcm.json"},
               "apns": {"key_file": "/secrets/bc.p8", "key_id": "ABC123DEFG",
                        "team_id": "DEF123GHIJ", "topic": "ca.bc.wallet",
                        "environment": "production"},
               "webhook": {"url": "https://notifier.example/hook", "secret_file": "/s/k"}}]}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from mediator.errors import ConfigError
from mediator.notify.apns import ApnsKey, ApnsProvider
from mediator.notify.fcm import FcmProvider, ServiceAccount
from mediator.notify.provider import APNS, FCM, Device, Provider
from mediator.notify.webhook import WebhookProvider
from mediator.settings import NotifySettings

DEFAULT = "default"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass
class App:
    name: str
    fcm: Provider | None = None
    apns: Provider | None = None
    webhook: Provider | None = None

    def provider(self, service: str) -> Provider | None:
        native = self.fcm if service == FCM else self.apns if service == APNS else None
        return native or self.webhook

    @property
    def providers(self) -> list[Provider]:
        return [p for p in (self.fcm, self.apns, self.webhook) if p is not None]


@dataclass
class Apps:
    apps: dict[str, App] = field(default_factory=dict)
    default: str | None = None

    def serves(self, service: str) -> bool:
        """Whether any app can notify devices that register through this service."""
        return any(app.provider(service) is not None for app in self.apps.values())

    def app_for(self, service: str, named: str | None) -> App | None:
        """The app a registering device is tied to, or None when none can reach it."""
        app = self.apps.get(named if named is not None else self.default or "")
        if app is None or app.provider(service) is None:
            return None
        return app

    def provider(self, device: Device) -> Provider | None:
        app = self.apps.get(device.app)
        return None if app is None else app.provider(device.service)

    @property
    def configured(self) -> bool:
        return bool(self.apps)

    @classmethod
    def load(
        cls, settings: NotifySettings, http: httpx.AsyncClient, http2: httpx.AsyncClient
    ) -> Apps:
        apps = cls()
        default = _app(
            DEFAULT,
            {
                "fcm": {
                    "credentials_file": settings.fcm_credentials_file,
                    "api_url": settings.fcm_api_url,
                },
                "apns": {
                    "key_file": settings.apns_key_file,
                    "key_id": settings.apns_key_id,
                    "team_id": settings.apns_team_id,
                    "topic": settings.apns_topic,
                    "environment": settings.apns_environment,
                    "api_url": settings.apns_api_url,
                },
                "webhook": {
                    "url": settings.webhook_url,
                    "secret": settings.webhook_secret,
                },
            },
            http,
            http2,
        )
        if default.providers:
            apps.apps[DEFAULT] = default
            apps.default = DEFAULT
        if settings.apps_file:
            apps._read_file(settings.apps_file, http, http2)
        return apps

    def _read_file(self, path: str, http: httpx.AsyncClient, http2: httpx.AsyncClient) -> None:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--push-apps-file {path}: {exc}") from None
        entries = data.get("apps") if isinstance(data, dict) else None
        if not isinstance(entries, list) or not entries:
            raise ConfigError(f"--push-apps-file {path}: needs a non-empty list `apps`")
        for entry in entries:
            name = entry.get("name") if isinstance(entry, dict) else None
            if not isinstance(name, str) or not NAME.fullmatch(name):
                raise ConfigError(
                    f"--push-apps-file {path}: each app needs a name ({NAME.pattern})"
                )
            if name in self.apps:
                raise ConfigError(f"--push-apps-file {path}: app {name!r} is named twice")
            app = _app(name, entry, http, http2)
            if not app.providers:
                raise ConfigError(
                    f"--push-apps-file {path}: app {name!r} has no fcm, apns or webhook"
                )
            self.apps[name] = app
            if entry.get("default") is True or self.default is None:
                self.default = name


def _app(
    name: str, entry: dict[str, Any], http: httpx.AsyncClient, http2: httpx.AsyncClient
) -> App:
    app = App(name)
    where = f"app {name!r}"
    fcm, apns, hook = (entry.get(k) or {} for k in ("fcm", "apns", "webhook"))
    if not all(isinstance(part, dict) for part in (fcm, apns, hook)):
        raise ConfigError(f"{where}: fcm, apns and webhook must be JSON objects")
    if fcm.get("credentials_file"):
        account = ServiceAccount.load(fcm["credentials_file"])
        app.fcm = FcmProvider(account, fcm.get("api_url") or "https://fcm.googleapis.com", http)
    if apns.get("key_file"):
        try:
            key = ApnsKey.load(apns["key_file"], apns.get("key_id", ""), apns.get("team_id", ""))
            app.apns = ApnsProvider(
                key,
                apns.get("topic", ""),
                apns.get("environment") or "production",
                apns.get("api_url") or "",
                http2,
            )
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    if hook.get("url"):
        secret = hook.get("secret") or ""
        if hook.get("secret_file"):
            try:
                secret = Path(hook["secret_file"]).read_text().strip()
            except OSError as exc:
                raise ConfigError(f"{where}: webhook secret_file: {exc}") from None
        try:
            app.webhook = WebhookProvider(hook["url"], secret, name, http)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return app
