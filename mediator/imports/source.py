"""The source of an import: an Askar store (ACA-Py's and Credo's wallets), opened so that
nothing is ever written to it.

Askar has no read-only mode, and opening a SQLite store may write to it (its journal), so a
SQLite store is copied, with its `-wal` and `-shm` files, into a temporary directory and the
copy is opened. A Postgres store is opened where it is: give the importer a role that can
only read, or a restored dump (docs/migrating.md).

The key method is the one the old mediator was configured with, in Askar's names or
ACA-Py's (`ARGON2I_MOD`, `ARGON2I_INT`, `RAW`); without one, the store's own record says.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from aries_askar import Store
from aries_askar.error import AskarError, AskarErrorCode

from mediator.didcomm.envelope import b64url_decode
from mediator.didcomm.keys import KeyPair
from mediator.errors import EnvelopeError, ImportRefused

# ACA-Py's names for Askar's key methods (its multi-tenant admin API still uses them).
KEY_METHODS = {
    "argon2i_mod": "kdf:argon2i:mod",
    "argon2i_int": "kdf:argon2i:int",
    "raw": "raw",
    "kdf:argon2i:mod": "kdf:argon2i:mod",
    "kdf:argon2i:int": "kdf:argon2i:int",
    "kdf:argon2i": "kdf:argon2i:mod",
}
SQLITE_COMPANIONS = ("-wal", "-shm")
COPY_PREFIX = "mediator-import-"  # the temporary directory of a SQLite store's copy
LOOKUP_SESSIONS = 4
PROGRESS_SECONDS = 5.0


def key_method(name: str | None) -> str | None:
    """Askar's name for a key method given in either spelling; None: the store decides."""
    if not name:
        return None
    method = KEY_METHODS.get(name.strip().lower())
    if method is None:
        known = "kdf:argon2i:mod, kdf:argon2i:int, raw (or ARGON2I_MOD, ARGON2I_INT, RAW)"
        raise ImportRefused(f"unknown wallet key method {name!r}: one of {known}")
    return method


def describe(uri: str) -> str:
    """The store's URI without its passwords (the user's, and parameters such as ACA-Py's
    `admin_password`), for messages and reports."""
    try:
        parts = urlsplit(uri)
        password = parts.password
    except ValueError:
        return "(an unreadable URI)"
    query = parse_qsl(parts.query, keep_blank_values=True)
    hidden = [(n, "***" if "password" in n.lower() else v) for n, v in query]
    if password is None and hidden == query:
        return uri
    if password is not None:
        parts = parts._replace(netloc=parts.netloc.replace(f":{password}@", ":***@", 1))
    return parts._replace(query=urlencode(hidden, safe="*")).geturl()


@dataclass(frozen=True)
class StoreAddress:
    """How another process opens the same store: the URI Askar opened (the SQLite copy's,
    or the Postgres database), its key and method, and the profile."""

    uri: str = field(repr=False)
    pass_key: str = field(repr=False)
    method: str | None
    profile: str
    given: str = field(repr=False)  # the URI the operator gave, for messages


@dataclass
class Item:
    """One record: its category, name, value (JSON text) and tags."""

    category: str
    name: str
    value: bytes
    tags: dict[str, str]


class SourceStore:
    """An opened source store: records by category, keys by name, and the profile."""

    def __init__(self, store: Any, address: StoreAddress, copy: Path | None, uri: str) -> None:
        self._store = store
        self.address = address
        self.profile = address.profile
        self._copy = copy
        self.uri = uri
        self.progress: Callable[[str], None] = lambda line: None  # long scans say how far
        self._readers: list[Any] = []  # sessions for lookups, opened on first use
        self._turn = 0
        self._opening = asyncio.Lock()

    @classmethod
    async def open(
        cls, uri: str, pass_key: str, method: str | None = None, profile: str | None = None
    ) -> SourceStore:
        """Open `uri` read-only; ImportRefused, in one line, when it cannot be."""
        try:
            scheme = urlsplit(uri).scheme
        except ValueError:
            scheme = ""
        if scheme not in ("sqlite", "postgres"):
            raise ImportRefused(
                f"{describe(uri)}: a wallet URI is sqlite:///absolute/path/sqlite.db or "
                "postgres://user:password@host:port/database"
            )
        askar_method = key_method(method)
        copy: Path | None = None
        target = uri
        if scheme == "sqlite":
            copy, target = await asyncio.to_thread(_copy_sqlite, uri)
        try:
            store = await Store.open(target, askar_method, pass_key, profile=profile)
            name = profile or await store.get_default_profile()
        except AskarError as exc:
            if copy is not None:
                shutil.rmtree(copy, ignore_errors=True)
            raise ImportRefused(_explain(uri, exc, askar_method)) from exc
        return cls(store, StoreAddress(target, pass_key, askar_method, name, uri), copy, uri)

    @classmethod
    async def attach(cls, address: StoreAddress) -> SourceStore:
        """The store another SourceStore opened (its copy, when it made one), opened again
        by a worker process; closing it leaves the copy."""
        try:
            store = await Store.open(
                address.uri, address.method, address.pass_key, profile=address.profile
            )
        except AskarError as exc:
            raise ImportRefused(_explain(address.given, exc, address.method)) from exc
        return cls(store, address, None, address.given)

    async def items(
        self, category: str, tags: dict[str, str] | None = None, *, with_tags: bool = False
    ) -> AsyncIterator[Item]:
        """Every record of `category` (whose tags include `tags`), as the store pages them;
        their own tags only `with_tags` (reading them costs as much as the rest)."""
        read, last = 0, time.monotonic()
        try:
            async for entry in self._store.scan(category, tags, profile=self.profile):
                found = dict(entry.tags) if with_tags else {}
                yield Item(category, entry.name, bytes(entry.value), found)
                read += 1
                if read % 1000 == 0 and time.monotonic() - last >= PROGRESS_SECONDS:
                    last = time.monotonic()
                    self.progress(f"reading {category}: {read:,} records")
        except AskarError as exc:
            raise ImportRefused(f"{describe(self.uri)}: reading {category}: {_first(exc)}") from exc

    async def item(self, category: str, name: str) -> Item | None:
        """The record of `category` named `name`, if there is one."""
        session = await self._session()
        try:
            entry = await session.fetch(category, name)
        except AskarError as exc:
            raise ImportRefused(f"{describe(self.uri)}: reading {category}: {_first(exc)}") from exc
        if entry is None:
            return None
        return Item(category, entry.name, bytes(entry.value), dict(entry.tags))

    async def find(self, category: str, tags: dict[str, str], limit: int = 8) -> list[Item]:
        """Up to `limit` records of `category` whose tags include `tags`."""
        session = await self._session()
        try:
            found = await session.fetch_all(category, tags, limit)
        except AskarError as exc:
            raise ImportRefused(f"{describe(self.uri)}: reading {category}: {_first(exc)}") from exc
        return [Item(category, e.name, bytes(e.value), dict(e.tags)) for e in found]

    async def _session(self) -> Any:
        """A session for a lookup. Lookups run concurrently (an import resolves many
        connections at once) over LOOKUP_SESSIONS sessions, taken in turn: each lookup
        waits on Askar's threads, not on the one before it."""
        if len(self._readers) < LOOKUP_SESSIONS:
            async with self._opening:
                while len(self._readers) < LOOKUP_SESSIONS:
                    try:
                        self._readers.append(await self._store.session(self.profile))
                    except AskarError as exc:
                        raise ImportRefused(f"{describe(self.uri)}: {_first(exc)}") from exc
        self._turn = (self._turn + 1) % LOOKUP_SESSIONS
        return self._readers[self._turn]

    async def count(self, category: str) -> int:
        try:
            async with self._store.session(self.profile) as session:
                return int(await session.count(category))
        except AskarError as exc:
            raise ImportRefused(
                f"{describe(self.uri)}: counting {category}: {_first(exc)}"
            ) from exc

    async def key_pair(self, name: str) -> KeyPair | None:
        """The Ed25519 key named `name`, or None when the store has no such key (or one of
        another kind). Askar derives the public half as it loads the key: it is taken from
        there rather than derived again (a million imported keys)."""
        session = await self._session()
        try:
            entry = await session.fetch_key(name)
        except AskarError as exc:
            raise ImportRefused(f"{describe(self.uri)}: reading key: {_first(exc)}") from exc
        if entry is None:
            return None
        return _key_pair(entry)

    async def close(self) -> None:
        try:
            readers, self._readers = self._readers, []
            for reader in readers:
                await reader.close()
            await self._store.close()
        finally:
            if self._copy is not None:
                shutil.rmtree(self._copy, ignore_errors=True)


def _copy_sqlite(uri: str) -> tuple[Path, str]:
    path = Path(urlsplit(uri).path)
    if not path.is_file():
        raise ImportRefused(f"{uri}: no such file")
    copy = Path(tempfile.mkdtemp(prefix=COPY_PREFIX))
    try:
        shutil.copy2(path, copy / path.name)
        for suffix in SQLITE_COMPANIONS:
            companion = path.with_name(path.name + suffix)
            if companion.exists():
                shutil.copy2(companion, copy / companion.name)
    except OSError as exc:
        shutil.rmtree(copy, ignore_errors=True)
        raise ImportRefused(f"{uri}: cannot be read: {exc.strerror or exc}") from exc
    _uncache(path)
    # Room for the lookup sessions beside a scan (Askar's default pool is smaller).
    return copy, f"sqlite://{copy / path.name}?max_connections={LOOKUP_SESSIONS + 4}"


def _key_pair(entry: Any) -> KeyPair | None:
    """An Ed25519 key entry's key pair (None: another kind of key, or unreadable). One call
    for the kind and both halves: three calls into Askar cost twice as much."""
    try:
        jwk = json.loads(entry.key.get_jwk_secret())
    except (AskarError, ValueError):
        return None
    if not isinstance(jwk, dict) or jwk.get("crv") != "Ed25519":
        return None
    try:
        seed, public = b64url_decode(jwk.get("d")), b64url_decode(jwk.get("x"))
    except EnvelopeError:
        return None
    if len(seed) != 32 or len(public) != 32:
        return None
    return KeyPair(public, seed + public)


def _uncache(path: Path) -> None:
    """Tell the kernel the source's pages will not be read again (only the copy is): a
    store of a million wallets is 13 GB, and the import's scans each read all of the copy,
    which then stays in memory instead of sharing it with the source. Advice only: the
    file is not touched."""
    if not hasattr(os, "posix_fadvise"):
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass
    finally:
        os.close(fd)


def _first(exc: AskarError) -> str:
    return str(exc).splitlines()[0] if str(exc) else exc.code.name.lower()


def _explain(uri: str, exc: AskarError, method: str | None) -> str:
    where = describe(uri)
    if exc.code == AskarErrorCode.ENCRYPTION:
        return f"{where}: the wallet key does not open this store (wrong key)"
    if exc.code == AskarErrorCode.INPUT and "key method" in str(exc):
        return f"{where}: the store was not made with key method {method} (leave it out)"
    if exc.code == AskarErrorCode.NOT_FOUND:
        return f"{where}: no such store or profile"
    if exc.code == AskarErrorCode.BACKEND:
        return f"{where}: not an Askar store, or unreachable ({_first(exc)})"
    return f"{where}: {_first(exc)}"
