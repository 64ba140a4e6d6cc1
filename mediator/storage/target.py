"""Where Redis is: one URL names the deployment mode and its servers.

    redis://[[user]:password@]host[:port][/db]          standalone (rediss:// for TLS)
    unix:///path/to/redis.sock[?db=N]                   standalone over a Unix socket
    redis+sentinel://[[user]:password@]h1[:p1],h2[:p2]/service[/db][?sentinel_password=...]
                                                        Sentinel: the sentinels and the
                                                        service (master) name they watch
    redis+cluster://[[user]:password@]h1[:p1],h2[:p2]   Redis Cluster: any nodes to start from

`rediss+sentinel://` and `rediss+cluster://` use TLS. The user and password are the data
servers' own; a Sentinel's password, when it has one, goes in `sentinel_password`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote

from mediator.errors import ConfigError


class Mode(enum.Enum):
    STANDALONE = "standalone"
    SENTINEL = "sentinel"
    CLUSTER = "cluster"


DEFAULT_PORTS = {Mode.SENTINEL: 26379, Mode.CLUSTER: 6379}


@dataclass(frozen=True)
class RedisTarget:
    mode: Mode
    url: str  # as given; for standalone, what redis-py's from_url reads
    hosts: tuple[tuple[str, int], ...] = ()  # sentinels, or cluster start nodes
    service: str = ""  # Sentinel's name of the monitored primary
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    sentinel_password: str | None = field(default=None, repr=False)
    tls: bool = False

    @property
    def redacted(self) -> str:
        """The URL without its passwords (user info, and any query, which may carry one),
        for logs."""
        scheme, sep, rest = self.url.partition("://")
        rest, question, _ = rest.partition("?")
        query = "?…" if question else ""
        if "@" not in rest:
            return f"{scheme}{sep}{rest}{query}"
        creds, _, tail = rest.rpartition("@")
        user = creds.split(":", 1)[0] if ":" in creds else ""
        return f"{scheme}{sep}{user}:***@{tail}{query}"


def parse(url: str) -> RedisTarget:
    """Read a Redis URL; a malformed one is a ConfigError that says what was expected."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ConfigError(f"not a Redis URL: {url!r} (expected redis://host:port/db)")
    scheme = scheme.lower()
    if scheme in ("redis", "rediss", "unix"):
        return RedisTarget(Mode.STANDALONE, url, tls=scheme == "rediss")
    base, _, mode_name = scheme.partition("+")
    modes = {"sentinel": Mode.SENTINEL, "cluster": Mode.CLUSTER}
    if base not in ("redis", "rediss") or mode_name not in modes:
        raise ConfigError(
            f"unknown Redis URL scheme {scheme!r}: use redis://, rediss://, unix://, "
            "redis+sentinel:// or redis+cluster://"
        )
    mode = modes[mode_name]
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    username = password = None
    if "@" in netloc:
        creds, _, netloc = netloc.rpartition("@")
        user, colon, secret = creds.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    hosts = tuple(_host(h, DEFAULT_PORTS[mode], url) for h in netloc.split(",") if h)
    if not hosts:
        raise ConfigError(f"no host in Redis URL {url!r}")
    parts = [p for p in path.split("/") if p]
    options = {k: v[-1] for k, v in parse_qs(query).items()}
    service, db = "", 0
    if mode is Mode.SENTINEL:
        if not parts:
            raise ConfigError(
                f"a Sentinel URL names the service after the hosts: "
                f"redis+sentinel://host:26379/mymaster[/db], not {url!r}"
            )
        service = unquote(parts[0])
        db = _int(parts[1], url) if len(parts) > 1 else 0
    elif parts and parts != ["0"]:
        raise ConfigError(f"Redis Cluster has only database 0: {url!r}")
    return RedisTarget(
        mode,
        url,
        hosts=hosts,
        service=service,
        db=db,
        username=username,
        password=password,
        sentinel_password=options.get("sentinel_password"),
        tls=base == "rediss",
    )


def _host(text: str, default_port: int, url: str) -> tuple[str, int]:
    if text.startswith("["):  # [ipv6]:port
        host, _, port = text[1:].partition("]")
        port = port.lstrip(":")
    else:
        host, _, port = text.rpartition(":") if ":" in text else (text, "", "")
    if not host:
        raise ConfigError(f"empty host in Redis URL {url!r}")
    return host, _int(port, url) if port else default_port


def _int(text: str, url: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"not a number: {text!r} in Redis URL {url!r}") from None
