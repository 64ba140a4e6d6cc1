"""Capacity planning on Spark: snapshots of the engine's Redis into a Parquet history, and
the report SREs read (`mediator capacity snapshot|report`, or `spark-submit spark/<job>.py`).

    cli.py           the command-line options both ways of running share
    session.py       the SparkSession both jobs use
    source/          how Redis is read: topology (servers and the shards they hold), pacing
                     (a partition's command budget), wire (batched round trips), reader (a
                     page of queues a call of the engine's read-only snapshot_page.lua:
                     mediator/engine/snapshot.py), redis_source (the PySpark Python Data
                     Source)
    tables/          the history's three tables, one module each (mailboxes, servers,
                     cluster), their columns as explicit Arrow and Spark types (columns)
    pseudonyms.py    recipients' keyed hashes
    snapshot.py      the snapshot job
    history.py       reading and checking the history
    figures/         the report's figures, computed in Spark (SUMMARY.md)
    forecast.py      days until full
    verdict.py       under-, right- or over-provisioned
    units.py         numbers for humans
    charts/          inline SVG charts
    sections/        one renderer per part of the page
    page.py          the self-contained HTML page
    report.py        the report job
    failures.py      Spark's and the JVM's errors in one line
    progress.py      console lines
"""
