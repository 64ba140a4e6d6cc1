"""`mediator capacity snapshot|report`: the options both ways of running the jobs share (the
product's CLI, and `spark-submit spark/snapshot.py|report.py`). PySpark is imported only
when a job runs, so `mediator --help` works on a node without the `[spark]` extra."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click

from mediator.errors import ConfigError, MediatorError

MISSING_SPARK = (
    "the capacity jobs need PySpark: pip install 'didcomm-mediator-cluster[spark]' "
    "(and a Java 17+ runtime, e.g. Debian's openjdk-17-jre-headless)"
)


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _guarded(job: Callable[[], Any]) -> Any:
    """Run a job; every failure ends with one readable line and a non-zero exit."""
    try:
        return job()
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in ("pyspark", "pyarrow", "pandas", "py4j"):
            _fail(MISSING_SPARK, 2)
        raise
    except ConfigError as e:
        _fail(str(e), 2)
    except MediatorError as e:
        _fail(str(e), 1)
    except Exception as e:  # Spark's and the JVM's, which come with long traces
        from spark.failures import explain

        explained = explain(e)
        if explained is None:
            raise
        _fail(explained, 1)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def capacity() -> None:
    """Capacity planning: snapshots of Redis into a Parquet history, and the report.

    Needs the [spark] extra and a Java runtime. Both jobs run in Spark's local mode by
    default (--master local[*]); docs/capacity.md explains every figure.
    """


_master = click.option(
    "--master", default=None, help="Spark master URL (default: local[*], or spark-submit's)."
)


@capacity.command("snapshot")
@click.option(
    "--redis-url",
    envvar="MEDIATOR_REDIS_URL",
    show_envvar=True,
    required=True,
    help="The engine's Redis: redis://, rediss://, unix://, redis+sentinel://, redis+cluster://.",
)
@click.option("--out", required=True, help="The history folder (local path or any Hadoop URL).")
@_master
@click.option(
    "--read-from",
    type=click.Choice(["primary", "replica"]),
    default="primary",
    show_default=True,
    help="Read the mailboxes from the primaries or their replicas "
    "(Sentinel's, or the cluster's with READONLY); the replicas' lag is recorded.",
)
@click.option(
    "--max-commands-per-second",
    type=float,
    default=10_000,
    show_default=True,
    help="Each partition's command budget (0: no limit).",
)
@click.option(
    "--memory-sample-rate",
    type=float,
    default=0.01,
    show_default=True,
    help="Share of mailboxes whose keys' MEMORY USAGE is read (1: all).",
)
@click.option(
    "--shards-per-partition",
    type=click.IntRange(1, 1024),
    default=64,
    show_default=True,
    help="Engine shards one Spark partition reads.",
)
@click.option(
    "--snapshot-time",
    type=click.DateTime(["%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S"]),
    default=None,
    help="The snapshot's time (UTC; default now). A rerun with the same "
    "time replaces that snapshot.",
)
@click.option(
    "--hash-key-file",
    default=None,
    help="Key of the mailboxes' keyed hashes (default: derived from the mediator's identity seed).",
)
@click.option(
    "--driver-memory", default="2g", show_default=True, help="Spark driver memory in local mode."
)
def snapshot_command(**options: Any) -> None:
    """Snapshot the engine's Redis into the history (one row per mailbox and per server).

    Partitions follow the engine's 1,024 shards (and on a cluster the servers holding them);
    each reads pipelined, never with KEYS, within its command budget. Prints one line per
    phase and a summary: rows, bytes written, time, commands, the highest rate.
    """

    def job() -> None:
        from spark.snapshot import SnapshotOptions, run

        when = options.pop("snapshot_time")
        if when is not None:
            options["snapshot_time"] = when.replace(tzinfo=dt.UTC)
        result = run(SnapshotOptions(**options))
        click.echo(
            f"snapshot {result.snapshot_id}: {result.rows:,} mailboxes, "
            f"{result.bytes_written:,} bytes written, {result.seconds:.1f} s, "
            f"{result.commands:,} commands in {result.partitions} partitions, "
            f"highest rate {result.peak_partition_rate:,} commands/s in a partition"
        )

    _guarded(job)


@capacity.command("report")
@click.option("--history", required=True, help="The history folder the snapshots wrote.")
@click.option("--out", required=True, help="Folder for report.html and summary.json.")
@_master
@click.option(
    "--days",
    type=click.IntRange(1, 3650),
    default=30,
    show_default=True,
    help="Days of history to read, ending with the latest snapshot.",
)
@click.option(
    "--memory-headroom",
    type=click.FloatRange(0.05, 1.0),
    default=0.6,
    show_default=True,
    help="Target share of memory used at peak.",
)
@click.option(
    "--node-forwards-per-second",
    type=click.FloatRange(1),
    default=3000,
    show_default=True,
    help="Forwards one node sustains (bench/README.md).",
)
@click.option(
    "--horizon-days",
    type=click.IntRange(1, 3650),
    default=30,
    show_default=True,
    help="How far ahead the verdict plans (the lead time to add capacity).",
)
@click.option(
    "--top",
    type=click.IntRange(1, 1000),
    default=20,
    show_default=True,
    help="Rows in each table before the 'other' row.",
)
@click.option(
    "--driver-memory", default="2g", show_default=True, help="Spark driver memory in local mode."
)
def report_command(**options: Any) -> None:
    """Write REPORT_DIR/report.html (one offline file) and summary.json from the history:
    the provisioning verdict, days until full, and the mailbox figures behind them."""

    def job() -> None:
        from spark.report import ReportOptions, run

        result = run(ReportOptions(**options))
        click.echo(f"report: {result.html} ({result.html_bytes:,} bytes), {result.summary}")
        for notice in result.notices:
            click.echo(f"note: {notice}")

    _guarded(job)
