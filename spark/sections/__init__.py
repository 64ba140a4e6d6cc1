"""The report's sections, in page order: one renderer per section, each taking the whole
summary and returning the section's inner HTML. Grouped as `spark.figures` computes them.

    verdict.py    the verdict
    memory.py     days until full, servers, skew across primaries
    mailboxes.py  sizes, ages, staleness, in flight, dead letters, live sockets
    flow.py       throughput and change points
    coverage.py   what the snapshot read
    read.py       reading the summary defensively
    markup.py     the HTML pieces: tables, facts, figures, callouts
"""

from __future__ import annotations

from collections.abc import Callable

from spark.sections import coverage, flow, mailboxes, memory, verdict
from spark.sections.read import Row

Renderer = Callable[[Row], str]

# (id, heading, renderer): the page's sections and its navigation, in this order.
SECTIONS: tuple[tuple[str, str, Renderer], ...] = (
    ("verdict", "Verdict", verdict.verdict),
    ("forecast", "Days until full", memory.forecast),
    ("servers", "Servers", memory.servers),
    ("mailboxes", "Mailboxes", mailboxes.sizes),
    ("age", "Age of the oldest message", mailboxes.ages),
    ("staleness", "Stale mailboxes", mailboxes.staleness),
    ("inflight", "In flight", mailboxes.inflight),
    ("dead_letters", "Dead letters", mailboxes.dead_letters),
    ("live", "Live sockets", mailboxes.live),
    ("skew", "Skew across primaries", memory.skew),
    ("throughput", "Throughput", flow.throughput),
    ("coverage", "Coverage", coverage.coverage),
)
