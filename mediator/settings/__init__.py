"""The one settings object, read once at start-up, in sections:

    node        the process's name and logs; a node's server, lease and shutdown
    redis       where Redis is, and its password
    durability  what a send waits for (WAIT, WAITAOF)
    embedded    the private server `serve` starts without a Redis URL
    mqs         the mqs API's tokens and sizes
    worker      the upkeep worker
    didcomm     the mediator's identity and invitations, grants, sizes and delays
    limits      the abuse limits, and whom a request counts against
    websocket   the DIDComm WebSocket's limits, pings and delivery pace
    queue       the DIDComm mailboxes' limits
    outbound    every call the mediator makes out
    push        push retries
    notify      phone notifications

Every field has a `MEDIATOR_<NAME>` environment twin and a `--<name>` CLI flag built from the
same table (mediator/options.py), so the flag, the variable and the default can never
disagree. The names stay flat (`--redis-url`, `--lease-seconds`) whichever section holds the
field (mediator/settings/fields.py). The composition root (mediator/runtime.py, app.py,
cli.py) hands each component its sections. Tests build `Settings(...)` from sections, or
`Settings.of(...)` from the flat names, instead of touching the environment.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass, field
from typing import Any

from mediator.settings.didcomm import DidcommSettings, LimitSettings, QueueSettings
from mediator.settings.fields import (
    FILE_SUFFIX,
    Setting,
    convert,
    env_name,
    read_secret_files,
    section_settings,
)
from mediator.settings.node import NodeSettings, WorkerSettings
from mediator.settings.outbound import NotifySettings, OutboundSettings, PushSettings
from mediator.settings.storage import DurabilitySettings, EmbeddedSettings, RedisSettings
from mediator.settings.transport import MqsSettings, WebSocketSettings

__all__ = [
    "FILE_SUFFIX",
    "DidcommSettings",
    "DurabilitySettings",
    "EmbeddedSettings",
    "LimitSettings",
    "MqsSettings",
    "NodeSettings",
    "NotifySettings",
    "OutboundSettings",
    "PushSettings",
    "QueueSettings",
    "RedisSettings",
    "Setting",
    "Settings",
    "WebSocketSettings",
    "WorkerSettings",
    "all_settings",
    "env_name",
    "read_secret_files",
    "secret_fields",
    "settings_fields",
]


@dataclass(frozen=True)
class Settings:
    """Everything a node or a worker can be told. Frozen: nothing changes after start-up."""

    node: NodeSettings = field(default_factory=NodeSettings)
    redis: RedisSettings = field(default_factory=RedisSettings)
    durability: DurabilitySettings = field(default_factory=DurabilitySettings)
    embedded: EmbeddedSettings = field(default_factory=EmbeddedSettings)
    mqs: MqsSettings = field(default_factory=MqsSettings)
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    didcomm: DidcommSettings = field(default_factory=DidcommSettings)
    limits: LimitSettings = field(default_factory=LimitSettings)
    websocket: WebSocketSettings = field(default_factory=WebSocketSettings)
    queue: QueueSettings = field(default_factory=QueueSettings)
    outbound: OutboundSettings = field(default_factory=OutboundSettings)
    push: PushSettings = field(default_factory=PushSettings)
    notify: NotifySettings = field(default_factory=NotifySettings)

    @classmethod
    def of(cls, **values: Any) -> Settings:
        """The settings that flat names give (`redis_url=...`, as the flags and variables
        name them); the rest at their defaults."""
        return cls(**_sections(values, None))

    def replace(self, **values: Any) -> Settings:
        """These settings with some changed, by their flat names."""
        return dataclasses.replace(self, **_sections(values, self))

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Settings:
        """The settings the MEDIATOR_* variables give, as `mediator serve` reads them: for
        tools that take no settings flags of their own (the capacity jobs)."""
        environ = dict(os.environ) if environ is None else environ
        values: dict[str, Any] = {}
        files: dict[str, str] = {}
        for s in all_settings():
            raw = environ.get(s.env)
            if raw is not None:
                values[s.name] = convert(s, raw)
            path = environ.get(env_name(s.name + FILE_SUFFIX))
            if s.secret and path:
                files[s.name] = path
        return cls.of(**read_secret_files(values, files))

    @property
    def public_endpoint(self) -> str:
        """Where agents reach this mediator over HTTP(S): --endpoint, else the listener."""
        return self.didcomm.endpoint or f"http://{self.node.host}:{self.node.port}"

    @property
    def public_ws_endpoint(self) -> str:
        if self.didcomm.ws_endpoint:
            return self.didcomm.ws_endpoint
        http = self.public_endpoint
        return "ws" + http[4:] if http.startswith("http") else http


@functools.cache
def all_settings() -> tuple[Setting, ...]:
    """Every setting, in the sections' order and each section's."""
    out: list[Setting] = []
    for f in dataclasses.fields(Settings):
        out += section_settings(f.name, _section_class(f.name))
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise TypeError(f"two settings share a name: {twice}")
    return tuple(out)


@functools.cache
def _section_class(section: str) -> type[Any]:
    """A section's class: what makes its default."""
    for f in dataclasses.fields(Settings):
        if f.name == section and isinstance(f.default_factory, type):
            return f.default_factory
    raise KeyError(section)


@functools.cache
def _named() -> dict[str, Setting]:
    return {s.name: s for s in all_settings()}


def _sections(values: dict[str, Any], base: Settings | None) -> dict[str, Any]:
    """Flat values as sections: new ones, or `base`'s with those values changed."""
    grouped: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        s = _named().get(name)
        if s is None:
            raise TypeError(f"no setting is named {name!r}")
        grouped.setdefault(s.section, {})[s.attr] = value
    if base is None:
        return {section: _section_class(section)(**kw) for section, kw in grouped.items()}
    return {
        section: dataclasses.replace(getattr(base, section), **kw)
        for section, kw in grouped.items()
    }


def settings_fields(scope: str) -> list[Setting]:
    """The settings a command offers: shared ones and those of its own scope."""
    return [s for s in all_settings() if s.scope == "all" or scope in s.scope.split()]


def secret_fields() -> list[Setting]:
    return [s for s in all_settings() if s.secret]
