"""`mediator import`'s source: real Askar stores (made here with aries-askar, as ACA-Py and
Credo make them) opened read-only, and each way an operator can get it wrong refused in one
line."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import pytest
from aries_askar import Key, KeyAlg, Store

from mediator.didcomm.keys import KeyPair
from mediator.embedded import free_port
from mediator.errors import ImportRefused
from mediator.imports.acapy import AcapyReader
from mediator.imports.credo import CredoReader
from mediator.imports.source import COPY_PREFIX, SourceStore, describe, key_method
from tests.eventually import eventually

PASS = "mediator-wallet-key"
RAW_KEY = Store.generate_raw_key(b"test-import-source")


async def make_store(path: Path, method: str, pass_key: str = PASS) -> bytes:
    """A store with one connection record, one Ed25519 key and one X25519 key; the Ed25519
    key's secret bytes."""
    store = await Store.provision(f"sqlite://{path}", method, pass_key, recreate=True)
    key = Key.generate(KeyAlg.ED25519)
    async with store.session() as session:
        await session.insert("connection", "c-1", '{"state": "active"}', {"state": "active"})
        await session.insert_key("verkey-1", key, metadata="{}")
        await session.insert_key("x25519-1", Key.generate(KeyAlg.X25519))
    await store.close()
    # Askar's pool closes its SQLite connections after `close` returns; the last one folds
    # the journal (-wal, -shm) into the file. Wait for that: the store is then as a stopped
    # mediator leaves it.
    await eventually(lambda: journal(path), lambda left: not left, within=30)
    return bytes(key.get_secret_bytes())


async def journal(path: Path) -> list[Path]:
    return [p for p in path.parent.iterdir() if p.name.startswith(path.name + "-")]


async def closed(store: Store, path: Path) -> None:
    """Close a store as a stopped mediator leaves it: its journal folded into the file."""
    await store.close()
    await eventually(lambda: journal(path), lambda left: not left, within=30)


def digests(folder: Path) -> dict[str, str]:
    """Each file's name and SHA-256."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


@pytest.fixture(autouse=True)
def private_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Temporary files of this module's tests in a folder of their own: the importer's
    copies of other tests, running at the same time, are not theirs to count."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("tmp")))


def copies() -> set[str]:
    """The importer's temporary copies that exist now."""
    return {p.name for p in Path(tempfile.gettempdir()).glob(COPY_PREFIX + "*")}


# ACA-Py's and Credo's default is kdf:argon2i:mod, which costs seconds per opening: one
# case here; the others use the interactive level.
@pytest.mark.parametrize(
    ("provisioned", "given"),
    [
        ("kdf:argon2i:mod", "ARGON2I_MOD"),
        ("kdf:argon2i:int", None),
        ("kdf:argon2i:int", "ARGON2I_INT"),
    ],
)
async def test_a_store_is_read_and_left_as_it_was(
    tmp_path: Path, provisioned: str, given: str | None
) -> None:
    path = tmp_path / "sqlite.db"
    secret = await make_store(path, provisioned)
    before, copies_before = digests(tmp_path), copies()
    source = await SourceStore.open(f"sqlite://{path}", PASS, given)
    try:
        items = [item async for item in source.items("connection", with_tags=True)]
        assert [(i.name, i.value, i.tags) for i in items] == [
            ("c-1", b'{"state": "active"}', {"state": "active"})
        ]
        assert await source.count("connection") == 1
        assert await source.key_pair("verkey-1") == KeyPair.from_seed(secret)
        assert await source.key_pair("nobody") is None
        assert await source.key_pair("x25519-1") is None  # not a key a connection has
        assert source.profile  # the store's default profile, whatever its name
    finally:
        await source.close()
    # Byte for byte, no file added beside it, and the copy it read is gone.
    assert digests(tmp_path) == before
    assert copies() == copies_before


async def test_a_raw_key_store(tmp_path: Path) -> None:
    raw = Store.generate_raw_key(b"0" * 32)
    path = tmp_path / "sqlite.db"
    await make_store(path, "raw", raw)
    source = await SourceStore.open(f"sqlite://{path}", raw, "RAW")
    try:
        assert await source.count("connection") == 1
    finally:
        await source.close()


async def test_a_wrong_key_is_refused_plainly(tmp_path: Path) -> None:
    path = tmp_path / "sqlite.db"
    await make_store(path, "kdf:argon2i:int")
    with pytest.raises(ImportRefused, match=r"the wallet key does not open this store"):
        await SourceStore.open(f"sqlite://{path}", "not-the-key")


async def test_a_wrong_key_method_is_refused_plainly(tmp_path: Path) -> None:
    path = tmp_path / "sqlite.db"
    await make_store(path, "kdf:argon2i:int")
    with pytest.raises(ImportRefused, match=r"not made with key method kdf:argon2i:mod"):
        await SourceStore.open(f"sqlite://{path}", PASS, "ARGON2I_MOD")
    with pytest.raises(ImportRefused, match=r"unknown wallet key method 'argon'"):
        await SourceStore.open(f"sqlite://{path}", PASS, "argon")


async def test_what_is_not_a_store_is_refused_plainly(tmp_path: Path) -> None:
    with pytest.raises(ImportRefused, match=r"no such file"):
        await SourceStore.open(f"sqlite://{tmp_path}/missing.db", PASS)
    junk = tmp_path / "notes.txt"
    junk.write_text("not a database")
    copies_before = copies()
    with pytest.raises(ImportRefused, match=r"not an Askar store, or unreachable"):
        await SourceStore.open(f"sqlite://{junk}", PASS)
    assert copies() == copies_before  # no copy left behind
    with pytest.raises(ImportRefused, match=r"a wallet URI is sqlite:///"):
        await SourceStore.open("mysql://db/wallet", PASS)


async def test_an_unreachable_postgres_is_refused_without_its_password() -> None:
    uri = f"postgres://mediator:s3cret@127.0.0.1:{free_port()}/wallet?connect_timeout=2"
    with pytest.raises(ImportRefused, match=r"unreachable") as refused:
        await SourceStore.open(uri, PASS)
    assert "s3cret" not in str(refused.value) and ":***@" in str(refused.value)


def test_key_methods_in_both_spellings() -> None:
    assert key_method("ARGON2I_MOD") == key_method("kdf:argon2i:mod") == "kdf:argon2i:mod"
    assert key_method("ARGON2I_INT") == "kdf:argon2i:int"
    assert key_method("RAW") == "raw"
    assert key_method(None) is None and key_method("") is None
    assert describe("sqlite:///a/b.db") == "sqlite:///a/b.db"


@pytest.mark.parametrize(
    ("reader", "said"),
    [(AcapyReader, "not an ACA-Py store"), (CredoReader, "not a Credo store")],
)
async def test_a_store_that_is_no_mediator_is_refused_in_one_line(
    tmp_path: Path, reader: type[AcapyReader] | type[CredoReader], said: str
) -> None:
    path = tmp_path / "sqlite.db"
    store = await Store.provision(f"sqlite://{path}", "raw", RAW_KEY, recreate=True)
    async with store.session() as session:  # a wallet's store: things, but no mediation
        await session.insert("credential", "x-1", '{"schema": "id"}', {})
    await closed(store, path)
    source = await SourceStore.open(f"sqlite://{path}", RAW_KEY)
    try:
        with pytest.raises(ImportRefused, match=said) as refused:
            await reader(source).mediator()
        assert "\n" not in str(refused.value)
    finally:
        await source.close()


@pytest.mark.parametrize(
    ("reader", "said"),
    [(AcapyReader, "use `mediator import credo`"), (CredoReader, "use `mediator import acapy`")],
)
async def test_a_store_of_the_other_mediator_says_which_command_reads_it(
    tmp_path: Path, reader: type[AcapyReader] | type[CredoReader], said: str
) -> None:
    path = tmp_path / "sqlite.db"
    store = await Store.provision(f"sqlite://{path}", "raw", RAW_KEY, recreate=True)
    async with store.session() as session:
        if reader is AcapyReader:  # a Credo mediator's routing record
            await session.insert(
                "MediatorRoutingRecord", "MEDIATOR_ROUTING_RECORD", '{"routingKeys": []}', {}
            )
        else:  # an ACA-Py mediator's
            await session.insert("routing_did", "routing_did", '{"verkey": "x"}', {})
    await closed(store, path)
    source = await SourceStore.open(f"sqlite://{path}", RAW_KEY)
    try:
        with pytest.raises(ImportRefused, match=said):
            await reader(source).mediator()
    finally:
        await source.close()
