"""Prefill stalls per sweep row, from the configuration's timing log: prefills that took several
times the row's median, the signature of one-off work such as Triton compiling a kernel for a
new prefill shape. The first servers of a sweep pay it and later ones find the compiled kernel
on disk, which biases the end-to-end comparison (on the H200 MoE fixture: 5 of 29 bs-1 prefills
of the first speculative server took 0.58-1.6 s, against a median of 93 ms; later servers had
none at bs 1). Steady decode columns are not affected. Read at report time, from the client
side: the server flushes its timing log about once a second.
"""
from __future__ import annotations

import io
import statistics
from pathlib import Path

from sglang_patches.errors import UserError
from sglang_patches.offline.sweep import results as res

STALL_FACTOR = 4.0      # a stall takes at least this many times the row's median prefill ...
STALL_MIN_MS = 250.0    # ... and at least this long (small prefills vary by more than 4x)
MIN_PREFILLS = 3        # fewer prefills give no median to compare with


def prefill_stalls(timing_log: str, start: float, end: float) -> dict | None:
    """The prefills logged between the epoch seconds `start` and `end`, against the median of every
    prefill in the log (the whole configuration: when most of one row's prefills stall, that row's
    own median is a stall too); None when the log has fewer than MIN_PREFILLS prefills."""
    from sglang_patches.vocab.logread import read_records

    records, _ = read_records([timing_log], warn_stream=io.StringIO())   # a bad line is skipped quietly here
    prefills = [(r["t"], r["cycle_ms"]) for r in records if r["kind"] == "prefill" and r.get("cycle_ms") is not None]
    if len(prefills) < MIN_PREFILLS:
        return None
    median = statistics.median(ms for _, ms in prefills)
    ms = [x for t, x in prefills if start <= t <= end]
    stalls = [x for x in ms if x >= max(STALL_MIN_MS, STALL_FACTOR * median)]
    return {"prefills": len(ms), "prefill_ms_p50_log": median, "stalls": len(stalls),
            "stall_ms_max": max(stalls) if stalls else None, "stall_s_total": sum(stalls) / 1000.0}


def with_stalls(rows: list[dict], out_dir: str | Path) -> dict[tuple[str, int], dict]:
    """{(config, bs): prefill_stalls(...)} for the ok speculative rows whose timing log is there
    (results.after_the_fact: DIR/timing/<name> or the row's timing_log, over the row's own
    measurement; rows measured under --profile-seconds get none)."""
    out = {}
    for r in rows:
        if r.get("status") != "ok" or r.get("config") == "baseline":
            continue
        try:
            found = res.after_the_fact(r, out_dir, "timing", "timing_log", ".jsonl")
            if not found or found[1][1].tzinfo is None:   # a naive date cannot meet the log's epoch clock
                continue
            path, (start, end) = found
            stalls = prefill_stalls(str(path), start.timestamp(), end.timestamp())
            if stalls:
                out[(r["config"], int(r["batch_size"]))] = stalls
        except (UserError, OSError, ValueError, KeyError, TypeError, ArithmeticError):
            continue   # no date or measure_s, an unreadable log: no stall figures for that row
    return out


def stall_lines(stalls: dict[tuple[str, int], dict], rows: list[dict]) -> list[str]:
    """The report section; empty when no row had a stall."""
    hit = {k: v for k, v in stalls.items() if v["stalls"]}
    if not hit:
        return []
    wall = {(r["config"], int(r["batch_size"])): r.get("measure_s") for r in rows if r.get("status") == "ok"}
    lines = ["## Prefill stalls", "",
             f"Prefills that took at least {STALL_FACTOR:g}x the median prefill of the configuration's timing log "
             f"and {STALL_MIN_MS:g} ms. "
             "Usually one-off work, such as compiling a kernel for a new prefill shape, that the first servers "
             "of a sweep pay: these rows' end-to-end tok/s is biased low, their steady columns are not. "
             "Compiled kernels stay cached on disk: the same sweep run again into a new --out measures "
             "these configurations warm.", "",
             "| config | bs | prefills | log median ms | stalls | longest ms | stalled s | share of the row's time |",
             "|---|---|---|---|---|---|---|---|"]
    for (config, bs), v in sorted(hit.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        w = wall.get((config, bs))
        share = f"{100 * v['stall_s_total'] / w:.0f}%" if isinstance(w, (int, float)) and w > 0 else "-"
        lines.append(f"| {config} | {bs} | {v['prefills']} | {v['prefill_ms_p50_log']:.0f} | {v['stalls']} | "
                     f"{v['stall_ms_max']:.0f} | {v['stall_s_total']:.2f} | {share} |")
    return lines + [""]
