"""An import's index passes in worker processes (mediator/imports/passes.py), as a large
store is read: they find what the passes in the importing process find, a worker that dies
fails the import in one line instead of leaving it waiting, and an import that stops takes
its workers with it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import multiprocessing
import os
import signal
from pathlib import Path

import pytest
from aries_askar import Store

from bench.support.askar_stores import AcapyPlan, CredoPlan, make_acapy_store, make_credo_store
from mediator.didcomm.keys import KeyPair
from mediator.errors import ImportRefused
from mediator.imports.keyloader import KeyLoader
from mediator.imports.model import Report, Source
from mediator.imports.passes import PARALLEL_FROM, Passes, workers_for
from mediator.imports.source import SourceStore
from mediator.storage.clients import RedisClient
from tests.test_imports import _import


def _found(source: Source) -> tuple[object, ...]:
    report = source.report
    return (
        dict(report.imported),
        dict(report.skipped),
        dict(report.refused),
        {reason: sorted(names) for reason, names in report.examples.items()},
        sorted(k.verkey_b58 for k in source.routing_keys),
        [i.id for i in source.invitations],
        source.endpoints,
    )


@pytest.mark.parametrize("kind", ["acapy", "credo"])
async def test_passes_in_worker_processes_find_what_this_process_finds(
    kind: str, tmp_path: Path, module_redis: RedisClient
) -> None:
    if kind == "acapy":
        acapy = AcapyPlan(
            connections=10, recipient_keys=2, invitations=1, requested=1, denied=1, noise=True,
            key_method="raw", seed="test-import-passes-acapy",
        )  # fmt: skip
        truth: object = await make_acapy_store(tmp_path / "sqlite.db", acapy)
    else:
        credo = CredoPlan(
            connections=6, recipient_keys=2, queued=2, split_mediations=1, key_method="raw",
            seed="test-import-passes-credo",
        )  # fmt: skip
        truth = await make_credo_store(tmp_path / "sqlite.db", credo)
    here = await _import(module_redis, truth, dry_run=True)  # type: ignore[arg-type]
    apart = await _import(module_redis, truth, dry_run=True, workers=2)  # type: ignore[arg-type]
    assert here.report.imported["connections"] > 0
    assert sum(here.report.skipped.values()) > 0 or kind == "credo"
    assert _found(apart) == _found(here)


async def _dies(store: SourceStore, report: Report) -> dict[str, str]:
    os._exit(3)  # as the kernel's OOM killer would end it


async def _never_ends(store: SourceStore, report: Report) -> dict[str, str]:
    await asyncio.Event().wait()  # until the import stops it
    return {}


async def _says_how_far(store: SourceStore, report: Report) -> dict[str, str]:
    store.progress("reading things: 1,000 records")
    report.skip("a thing that cannot be read", "thing-1")
    return {"read": "all"}


async def test_a_workers_progress_and_skips_reach_the_import(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    said: list[str] = []
    store.progress = said.append
    passes, report = Passes(store, 1), Report()
    try:
        assert await asyncio.wait_for(passes.start(_says_how_far, report), 60) == {"read": "all"}
    finally:
        await passes.close()
        await store.close()
    assert said == ["reading things: 1,000 records"]
    assert report.skipped == {"a thing that cannot be read": 1}
    assert report.examples == {"a thing that cannot be read": ["thing-1"]}


async def _store(tmp_path: Path) -> SourceStore:
    plan = AcapyPlan(connections=2, key_method="raw", seed="test-import-passes-workers")
    truth = await make_acapy_store(tmp_path / "sqlite.db", plan)
    return await SourceStore.open(truth.uri, truth.pass_key, truth.key_method)


async def test_a_worker_that_dies_fails_the_import_in_one_line(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    passes = Passes(store, 1)
    try:
        with pytest.raises(ImportRefused, match=r"ended \(exit code 3\) without its index"):
            await asyncio.wait_for(passes.start(_dies, Report()), 60)
    finally:
        await passes.close()
        await store.close()
    assert not multiprocessing.active_children()


async def test_an_import_that_stops_stops_its_workers(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    passes = Passes(store, 2)
    running = [passes.start(_never_ends, Report()) for _ in range(2)]
    for _ in range(200):  # until both workers run
        if len(multiprocessing.active_children()) == 2:
            break
        await asyncio.sleep(0.05)
    assert len(multiprocessing.active_children()) == 2
    await asyncio.wait_for(passes.close(), 30)
    await store.close()
    assert all(future.cancelled() for future in running)
    assert not multiprocessing.active_children()


def test_small_stores_are_read_in_this_process_large_ones_by_a_worker_a_core() -> None:
    cores = len(os.sched_getaffinity(0))
    assert workers_for(PARALLEL_FROM - 1) == 0
    assert workers_for(PARALLEL_FROM) == (cores if cores > 1 else 0)
    assert workers_for(10, asked=3) == 3  # --workers decides
    assert workers_for(10**6, asked=0) == 0


async def test_keys_loaded_by_a_worker_are_the_store_s_keys(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    here, apart = KeyLoader(store), KeyLoader(store, in_worker=True)
    try:
        names = [k.verkey_b58 for k in [await _routing_key(store)]] + ["NoSuchKey111"]
        found = await asyncio.gather(*(apart.key_pair(n) for n in names))
        assert found == [await here.key_pair(n) for n in names]
        assert found[0] is not None and found[0].verkey_b58 == names[0] and found[1] is None
    finally:
        await apart.close()
        await store.close()
    assert not multiprocessing.active_children()


async def test_a_key_worker_that_dies_fails_the_import_in_one_line(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    loader = KeyLoader(store, in_worker=True)
    try:
        name = (await _routing_key(store)).verkey_b58
        assert await loader.key_pair(name) is not None
        for child in multiprocessing.active_children():
            os.kill(child.pid or 0, signal.SIGKILL)
        with pytest.raises(ImportRefused, match=r"loading keys ended \(killed by signal 9\)"):
            await asyncio.wait_for(loader.key_pair(name), 30)
    finally:
        await loader.close()
        await store.close()


async def test_a_key_worker_that_cannot_open_the_store_says_why(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    store.address = dataclasses.replace(store.address, pass_key=Store.generate_raw_key())
    loader = KeyLoader(store, in_worker=True)
    try:
        with pytest.raises(ImportRefused, match=r"does not open this store \(wrong key\)"):
            await asyncio.wait_for(loader.key_pair("AnyName"), 60)
    finally:
        await loader.close()
        await store.close()


async def _routing_key(store: SourceStore) -> KeyPair:
    item = await store.item("routing_did", "routing_did")
    assert item is not None
    keys = await store.key_pair(json.loads(item.value)["verkey"])
    assert keys is not None
    return keys
