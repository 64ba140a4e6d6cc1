"""The SparkSession both jobs use: local by default, quiet logs, UTC, the job's own Python
for the workers, and dynamic partition overwrite (a rerun replaces its snapshot only)."""

from __future__ import annotations

import os
import sys
import time

from pyspark.sql import SparkSession


def start(app: str, master: str | None, *, driver_memory: str = "2g") -> SparkSession:
    # Workers run the interpreter that runs the job (its packages, its version), unless the
    # operator chose another for a cluster.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Timestamps come back from Spark as naive datetimes in the process's zone: make it UTC.
    os.environ["TZ"] = "UTC"
    time.tzset()
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app)
    # Under spark-submit the JVM is already running with the submitter's master and memory.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if master or not submitted:
        builder = builder.master(master or "local[*]")
    if not submitted:
        builder = builder.config("spark.driver.memory", driver_memory)
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.parquet.compression.codec", "zstd")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
