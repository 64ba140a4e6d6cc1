"""Reading a Prometheus text exposition the way a scraper does."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def value(text: str, sample: str, **labels: str) -> float | None:
    """The first sample of that name whose labels include these, or None."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


def samples(text: str, sample: str) -> list[tuple[dict[str, str], float]]:
    """Every sample of that name: (labels, value)."""
    return [
        (s.labels, float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == sample
    ]
