"""A throw-away PostgreSQL cluster (Debian's server programs), for the old mediators that
keep their store or their queue in PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

from mediator.embedded import free_port


def postgres_bin() -> Path:
    """The folder of the newest installed PostgreSQL's programs (Debian's layout, else PATH)."""
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3])
    )
    if versions:
        return versions[-1].parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise RuntimeError("no PostgreSQL here (initdb not found)")
    return Path(initdb).resolve().parent


def loopback_address() -> str:
    """A random address of 127.0.0.0/8 other than 127.0.0.1 (all of it is the loopback
    interface on Linux): a server that must take a fixed port listens there without meeting
    another one (a system PostgreSQL on 127.0.0.1:5432, a parallel test's)."""
    pick = secrets.SystemRandom().randint
    return f"127.{pick(1, 254)}.{pick(0, 255)}.{pick(1, 254)}"


class Postgres:
    """A PostgreSQL cluster of its own in a temporary folder, on a free loopback port (or
    `port` on a loopback address of its own, for clients that fix the port), with password
    logins over TCP: the superuser `admin_account` and `account`, a plain role that may
    create databases and owns one of its name. Run as the `postgres` system user when the
    tests run as root (PostgreSQL refuses root); removed by `stop()`."""

    def __init__(
        self,
        *,
        account: str = "acapy",
        admin_account: str = "postgres",
        port: int | None = None,
    ) -> None:
        self.account = account
        self.password = secrets.token_hex(8)
        self.admin_account = admin_account
        self.admin_password = secrets.token_hex(8)
        self.host = "127.0.0.1" if port is None else loopback_address()
        self.port = port or free_port()
        self.bin = postgres_bin()
        self.folder: Path | None = None

    def _as_owner(self) -> list[str]:
        return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    async def _run(self, *args: str, env: dict[str, str] | None = None) -> bytes:
        proc = await asyncio.create_subprocess_exec(
            *args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:6])}: {err.decode(errors='replace')[-2000:]}")
        return out

    @property
    def data(self) -> Path:
        assert self.folder is not None
        return self.folder / "data"

    async def start(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="old-acapy-postgres-"))
        password_file = self.folder / "admin-password"
        password_file.write_text(self.admin_password)
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
            shutil.chown(password_file, "postgres", "postgres")
        await self._run(
            *self._as_owner(),
            str(self.bin / "initdb"),
            "--pgdata", str(self.data),
            "--username", self.admin_account,
            "--pwfile", str(password_file),
            "--auth-local", "trust",
            "--auth-host", "scram-sha-256",
            "--encoding", "UTF8",
            "--locale", "C.UTF-8",
        )  # fmt: skip
        options = f"-p {self.port} -k {self.folder} -c listen_addresses={self.host} -c fsync=off"
        await self._run(
            *self._as_owner(),
            str(self.bin / "pg_ctl"),
            "--pgdata", str(self.data),
            "--log", str(self.folder / "postgres.log"),
            "--options", options,
            "--wait",
            "start",
        )  # fmt: skip
        await self.sql(
            f"CREATE ROLE {self.account} LOGIN CREATEDB PASSWORD '{self.password}'", "postgres"
        )
        # As the postgres image does for POSTGRES_USER: clients that name no database (the
        # Credo queue's set-up) connect to the one named after their role.
        await self.sql(f"CREATE DATABASE {self.account} OWNER {self.account}", "postgres")

    async def sql(self, statement: str, database: str) -> str:
        """Run one statement as the admin account; its output (unaligned, no headers)."""
        out = await self._run(
            str(self.bin / "psql"),
            "--host", self.host,
            "--port", str(self.port),
            "--username", self.admin_account,
            "--dbname", database,
            "--no-align", "--tuples-only", "--quiet",
            "--set", "ON_ERROR_STOP=1",
            "--command", statement,
            env={"PGPASSWORD": self.admin_password},
        )  # fmt: skip
        return out.decode()

    async def dump(self, database: str) -> bytes:
        """`pg_dump` of a database (schema and data, plain SQL): what digests a Postgres
        store. Without the `\\restrict` lines that pg_dump 15.14+ writes with a random key."""
        out = await self._run(
            str(self.bin / "pg_dump"),
            "--host", self.host,
            "--port", str(self.port),
            "--username", self.admin_account,
            "--dbname", database,
            env={"PGPASSWORD": self.admin_password},
        )  # fmt: skip
        lines = out.splitlines(keepends=True)
        return b"".join(
            line for line in lines if not line.startswith((b"\\restrict", b"\\unrestrict"))
        )

    def uri(self, database: str) -> str:
        """The Askar URI of a store (= database) that `account` reaches."""
        return f"postgres://{self.account}:{self.password}@{self.host}:{self.port}/{database}"

    def log_tail(self, chars: int = 4000) -> str:
        if self.folder is None:
            return ""
        with contextlib.suppress(OSError):
            return (self.folder / "postgres.log").read_text(errors="replace")[-chars:]
        return ""

    async def stop(self) -> None:
        if self.folder is None:
            return
        with contextlib.suppress(RuntimeError):
            await self._run(
                *self._as_owner(),
                str(self.bin / "pg_ctl"),
                "--pgdata", str(self.data),
                "--mode", "fast",
                "--wait",
                "stop",
            )  # fmt: skip
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None
