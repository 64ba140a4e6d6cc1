"""The coverage section: what the latest snapshot read, how it sampled memory, and what it
cost.
"""

from __future__ import annotations

from spark.sections import markup
from spark.sections.read import Row, as_dict, as_text
from spark.units import fmt_bytes, fmt_count, fmt_duration, fmt_share, fmt_when


def coverage(summary: Row) -> str:
    c = as_dict(summary.get("coverage"))
    facts = [
        ("Snapshot", fmt_when(c.get("snapshot_time"))),
        ("Read from", as_text(c.get("read_from"))),
        ("Mailboxes read", fmt_count(c.get("mailboxes_read"))),
        ("Mailboxes in the books", fmt_count(c.get("mailboxes_in_books"))),
        ("Share read", fmt_share(c.get("share_read"))),
        ("Memory", as_text(c.get("memory"))),
        ("Memory sample rate", fmt_share(c.get("memory_sample_rate"))),
        ("Mailboxes in the memory sample", fmt_count(c.get("memory_sampled_mailboxes"))),
        ("Estimated mailbox memory", fmt_bytes(c.get("estimated_mailbox_memory"))),
        ("Replica lag", fmt_duration(c.get("replica_lag_seconds"))),
        ("Replica lag, bytes", fmt_bytes(c.get("replica_lag_bytes"))),
        ("Commands sent", fmt_count(c.get("commands"))),
        ("Time taken", fmt_duration(c.get("duration_seconds"))),
    ]
    return markup.facts(facts)
