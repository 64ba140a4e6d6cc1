"""The verdict section: under-, right- or over-provisioned in one badge, the reasons, and the
recommended primaries, memory and nodes next to what runs now.
"""

from __future__ import annotations

from spark.sections import markup
from spark.sections.markup import esc
from spark.sections.read import Row, as_dict, as_strings, as_text
from spark.units import DASH, finite, fmt_bytes, fmt_count, fmt_rate, fmt_share, plural

_STATUS = {
    "under": ("Under-provisioned", "bad"),
    "right": ("Right-sized", "good"),
    "over": ("Over-provisioned", "warn"),
    "undecided": ("Undecided", "muted"),
}


def verdict(summary: Row) -> str:
    v = as_dict(summary.get("verdict"))
    status = v.get("status")
    label, tone = _STATUS.get(str(status), _STATUS["undecided"])
    reasons = "".join(f"<li>{esc(r)}</li>" for r in as_strings(v.get("reasons")))
    headroom = fmt_share(v.get("memory_headroom"))
    fits = v.get("n_plus_one_fits")
    primaries = f"now {fmt_count(v.get('primaries_now'))} · N+1 at {headroom} headroom"
    cards = [
        _card("Recommended primaries", fmt_count(v.get("recommended_primaries")), primaries),
        _card(
            "Memory per primary",
            fmt_bytes(v.get("recommended_memory_per_primary")),
            f"now {fmt_bytes(v.get('memory_per_primary'))}",
        ),
        _card(
            "N+1 today",
            ("fits" if fits else "does not fit") if isinstance(fits, bool) else DASH,
            "the primaries now, less the largest, within the headroom",
        ),
        _card(
            "Recommended nodes",
            fmt_count(v.get("recommended_nodes")),
            f"now {fmt_count(v.get('nodes_now'))} · N+1, at least 2",
        ),
    ]
    days = v.get("horizon_days")
    horizon = f"in {plural(days, 'day')}" if finite(days) is not None else "at the horizon"
    facts = [
        ("Peak used memory, all primaries", fmt_bytes(v.get("peak_used_memory"))),
        (f"Projected {horizon}", fmt_bytes(v.get("projected_used_memory"))),
        ("Memory headroom target", headroom),
        ("Peak forwards", fmt_rate(v.get("peak_forwards_per_second"))),
        ("Forwards one node carries", fmt_rate(v.get("node_forwards_per_second"))),
    ]
    badge = f'<p class="badge {tone}" data-status="{esc(as_text(status))}">{esc(label)}</p>'
    reasons_list = f'<ul class="reasons">{reasons or "<li>no reasons given</li>"}</ul>'
    cards_html = f'<div class="cards">{"".join(cards)}</div>'
    return f'<div class="verdict">{badge}{reasons_list}</div>{cards_html}{markup.facts(facts)}'


def _card(label: str, big: str, sub: str) -> str:
    return (
        f'<div class="card"><div class="label">{esc(label)}</div>'
        f'<div class="big">{esc(big)}</div><div class="sub">{esc(sub)}</div></div>'
    )
