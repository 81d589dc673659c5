"""Per-phase statistics of a timing log's decode cycles (medians, p90, wall between cycles, accept
length), and the decode step from paired walls; pure, tested on CPU through verify_cost."""
from __future__ import annotations

import statistics

PHASES = ("draft", "verify", "extend", "cycle")


def median_or_none(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def p90_or_none(vals):
    vals = sorted(v for v in vals if v is not None)
    if not vals:
        return None
    return vals[0] if len(vals) == 1 else statistics.quantiles(vals, n=10, method="inclusive")[8]


def cycle_stats(records: list[dict], bs: int, t0: float, t1: float) -> dict:
    """Rank-0 decode cycles of batch size `bs` that started in [t0, t1]: median (and p90 for verify)
    GPU ms per phase, the cycle count, and the median wall ms between consecutive cycles."""
    recs = sorted((r for r in records if r.get("kind") == "decode" and r.get("rank", 0) == 0
                   and r.get("bs") == bs and t0 <= r.get("t", -1.0) <= t1), key=lambda r: r["cycle"])
    out = {"cycles": len(recs)}
    for p in PHASES:
        out[f"{p}_ms"] = median_or_none([r.get(f"{p}_ms") for r in recs])
    out["verify_ms_p90"] = p90_or_none([r.get("verify_ms") for r in recs])
    walls = [(b["t"] - a["t"]) * 1000.0 for a, b in zip(recs, recs[1:]) if b["cycle"] == a["cycle"] + 1]
    out["wall_ms_per_cycle"] = median_or_none(walls)
    acc = [a for r in recs for a in r.get("accepted", [])]
    out["accept_length"] = statistics.fmean(acc) + 1 if acc else None
    return out


def step_from_walls(short_s: list[float], long_s: list[float], extra_tokens: int) -> float | None:
    """Median ms per decode step from paired walls of N and N + extra_tokens output tokens."""
    diffs = [(b - a) * 1000.0 / extra_tokens for a, b in zip(short_s, long_s)]
    return median_or_none(diffs)
