"""Under-, right- or over-provisioned, and why (after Cruise Control's provisioning
status): memory at the target headroom with the largest primary lost (N+1), projected
over the planning horizon, and nodes for the peak forward rate with one to spare."""

from __future__ import annotations

import math
from typing import Any

LEAD_DAYS_WARNING = 1.0  # reaching the headroom line within the horizon is under-provisioned
OVER_SHARE = 0.5  # every primary below half the target, and capacity to spare: over


def verdict(
    figures: dict[str, Any], per_snapshot: list[dict[str, Any]], *, headroom: float,
    horizon_days: int, node_rate: float,
) -> dict[str, Any]:  # fmt: skip
    out: dict[str, Any] = {
        "status": "undecided", "reasons": [], "memory_headroom": headroom,
        "horizon_days": horizon_days, "peak_used_memory": None, "projected_used_memory": None,
        "memory_per_primary": None, "primaries_now": None, "recommended_primaries": None,
        "recommended_memory_per_primary": None, "n_plus_one_fits": None,
        "peak_forwards_per_second": figures["throughput"]["peak_forwards_per_second"],
        "node_forwards_per_second": node_rate, "nodes_now": None, "recommended_nodes": None,
    }  # fmt: skip
    if not per_snapshot:
        out["reasons"].append("no snapshot in the history yet")
        return out
    latest = per_snapshot[-1]
    peak = max(s["used"] for s in per_snapshot)
    forecast = figures["forecast"]
    growth = 0.0
    if forecast["status"] == "ok" and (forecast["slope_bytes_per_day"] or 0) > 0:
        growth = forecast["slope_bytes_per_day"] * horizon_days
    projected = peak + growth
    per_primary = latest["largest_capacity"]
    primaries = latest["primaries"]
    target = headroom * per_primary
    need = max(1, math.ceil(projected / target)) if target else None
    recommended = None if need is None else (need + 1 if primaries > 1 else 1)
    memory_per_primary = per_primary if primaries > 1 else math.ceil(projected / headroom)
    n1 = primaries > 1 and projected <= (primaries - 1) * target
    out.update(
        peak_used_memory=peak, projected_used_memory=projected, memory_per_primary=per_primary,
        primaries_now=primaries, recommended_primaries=recommended,
        recommended_memory_per_primary=memory_per_primary, n_plus_one_fits=n1,
    )  # fmt: skip
    nodes_now = figures.get("nodes_alive")
    rate = out["peak_forwards_per_second"]
    recommended_nodes = max(2, math.ceil((rate or 0) / node_rate) + 1)
    out.update(nodes_now=nodes_now, recommended_nodes=recommended_nodes)
    under, over = _weigh(out, figures, target)
    out["reasons"] = under or over or ["memory and nodes fit the targets with one to spare"]
    out["status"] = "under" if under else "over" if over else "right"
    return out


def _weigh(
    out: dict[str, Any], figures: dict[str, Any], target: float
) -> tuple[list[str], list[str]]:
    under: list[str] = []
    headroom = out["memory_headroom"]
    for s in figures["servers"]:
        if s["role"] == "primary" and s["used_share"] is not None and s["used_share"] > headroom:
            under.append(
                f"primary {s['server']} uses {s['used_share']:.0%} of its memory "
                f"(target {headroom:.0%})"
            )
    if out["projected_used_memory"] > (out["primaries_now"] * target):
        under.append(
            f"the projected peak in {out['horizon_days']} days does not fit "
            f"{out['primaries_now']} primar{'y' if out['primaries_now'] == 1 else 'ies'} "
            f"at {headroom:.0%}"
        )
    if out["primaries_now"] > 1 and not out["n_plus_one_fits"]:
        under.append("losing the largest primary would leave too little memory (N+1)")
    days = figures["forecast"].get("days_to_headroom")
    if days is not None and days < out["horizon_days"]:
        under.append(f"memory reaches the headroom line in {days:.0f} days")
    nodes = out["nodes_now"]
    if nodes is not None and nodes < out["recommended_nodes"]:
        under.append(
            f"{nodes} node{'s' if nodes != 1 else ''} alive; the peak rate needs "
            f"{out['recommended_nodes']} with one to spare"
        )
    over: list[str] = []
    if not under:
        primaries = [s for s in figures["servers"] if s["role"] == "primary"]
        low = all((s["used_share"] or 0) < headroom * OVER_SHARE for s in primaries)
        rec = out["recommended_primaries"] or 0
        if low and out["primaries_now"] > rec:
            over.append(
                f"every primary is below {headroom * OVER_SHARE:.0%} of its memory and "
                f"{rec} primar{'y' if rec == 1 else 'ies'} would do (N+1)"
            )
        if nodes is not None and nodes > 2 * out["recommended_nodes"]:
            over.append(f"{nodes} nodes alive; {out['recommended_nodes']} carry the peak rate")
    return under, over
