"""Capacity planning on Spark: snapshots of the engine's Redis into a Parquet history, and
the report SREs read (`mediator capacity snapshot|report`, or `spark-submit spark/<job>.py`).

    schema.py        the three tables' columns and schema version
    topology.py      which Redis servers hold which engine shards (standalone, Sentinel, Cluster)
    pacing.py        a partition's command budget (--max-commands-per-second)
    mailboxes.py     reading one partition's queues, pipelined, into Arrow batches
    source.py        the PySpark Python Data Source over them
    servers.py       the servers and cluster tables (INFO, CLUSTER SHARDS, SLOT-STATS, books)
    pseudonyms.py    recipients' keyed hashes
    session.py       the SparkSession both jobs use
    snapshot.py      the snapshot job
    history.py       reading and checking the history
    figures.py       the report's figures, computed in Spark (SUMMARY.md)
    forecast.py      days until full
    verdict.py       under-, right- or over-provisioned
    charts.py        inline SVG charts
    page.py          the self-contained HTML page
    report.py        the report job
    cli.py           the command-line options both ways of running share
"""
