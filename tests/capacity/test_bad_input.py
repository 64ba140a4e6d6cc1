"""What an SRE sees when the input is wrong: one clear line and a non-zero exit, never a
Java or Python stack trace as the only output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.capacity.scenario import capacity
from tests.capacity.synthetic import write_history
from tests.servers import start_binary_server

# Starts processes: the full tier; runs Spark: on the Spark modules' worker (tests/tiers.py).
pytestmark = [pytest.mark.full, pytest.mark.timeout(600)]


def _fails_clearly(args: list[str], says: str, code: int | None = None) -> str:
    done = capacity(*args)
    assert done.returncode != 0, done.stdout
    if code is not None:
        assert done.returncode == code
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), done.stderr[-2000:]
    assert says in last, last
    assert "Traceback" not in done.stderr
    return last


def test_unreachable_redis(tmp_path: Path) -> None:
    _fails_clearly(
        ["snapshot", "--redis-url", "redis://127.0.0.1:9/0", "--out", str(tmp_path)],
        "cannot reach Redis at redis://127.0.0.1:9/0",
        1,
    )
    assert not any(tmp_path.iterdir())  # nothing half-written


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:6379", "unknown Redis URL scheme"),
        ("127.0.0.1:6379", "not a Redis URL"),
        ("redis+sentinel://127.0.0.1:26379", "names the service"),
    ],
)
def test_wrong_url(tmp_path: Path, url: str, says: str) -> None:
    _fails_clearly(["snapshot", "--redis-url", url, "--out", str(tmp_path)], says, 2)


def _report(history: Path, out: Path) -> list[str]:
    return ["report", "--history", str(history), "--out", str(out)]


def test_history_folder_missing(tmp_path: Path) -> None:
    _fails_clearly(_report(tmp_path / "nowhere", tmp_path / "r"), "no history folder", 1)


def test_empty_and_corrupt_parquet(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    for table in ("mailboxes", "servers", "cluster"):
        (empty / table / "snapshot_date=2026-11-01" / "snapshot_id=20261101T000000Z").mkdir(
            parents=True
        )
    _fails_clearly(_report(empty, tmp_path / "r1"), "cannot read the cluster table", 1)

    corrupt = tmp_path / "corrupt"
    write_history(corrupt, days=2, mailboxes=20)
    victim = next((corrupt / "servers").rglob("*.parquet"))
    victim.write_bytes(b"PAR1 this is not a parquet file PAR1")
    _fails_clearly(_report(corrupt, tmp_path / "r2"), "cannot read the servers table", 1)
    assert not (tmp_path / "r2" / "report.html").exists()


def test_a_day_missing_from_one_table(tmp_path: Path) -> None:
    history = tmp_path / "h"
    write_history(history, days=4, mailboxes=20)
    shutil.rmtree(history / "cluster" / "snapshot_date=2026-10-03")
    last = _fails_clearly(_report(history, tmp_path / "r"), "is incomplete", 1)
    assert "2026-10-03" in last and "cluster" in last


def test_a_future_schema_version(tmp_path: Path) -> None:
    history = tmp_path / "h"
    write_history(history, days=2, mailboxes=20, version=99)
    _fails_clearly(_report(history, tmp_path / "r"), "newer release", 1)


def test_an_empty_history_is_reported_plainly(tmp_path: Path) -> None:
    history = tmp_path / "h"
    history.mkdir()
    done = capacity(*_report(history, tmp_path / "r"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "no snapshot yet" in done.stdout
    html = (tmp_path / "r" / "report.html").read_text()
    assert "no snapshot yet" in html


def test_a_deployment_without_queues(tmp_path: Path) -> None:
    """Snapshotted before its first wallet: no mailbox row, no identity yet (a key file
    instead); the report reads it and says there is nothing to show rather than failing."""
    server = start_binary_server(tmp_path / "redis")
    try:
        key = tmp_path / "pseudonym.key"
        key.write_text("a-secret-of-more-than-16-bytes")
        history = tmp_path / "h"
        done = capacity("snapshot", "--redis-url", server.url, "--out", str(history),
                        "--hash-key-file", str(key))  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert "snapshot " in done.stdout and ": 0 mailboxes" in done.stdout
        done = capacity(*_report(history, tmp_path / "r"))
        assert done.returncode == 0, done.stderr[-2000:]
        summary = json.loads((tmp_path / "r" / "summary.json").read_text())
        assert summary["history"]["snapshots"] == 1
        assert summary["mailboxes"]["count"] == 0
    finally:
        server.stop()
