"""A timing log checked against what SGLang ran: the decode records of a client's window, every
record's steps among its bucket's candidates (and SGLang's own 'Switch adaptive runtime state'
lines), and the records counted against the requests sent."""
from __future__ import annotations

import json
import re
import statistics

from adaptive_configs import GRAPH_BS, candidates_for_bs

SWITCH_LINE = re.compile(r"Switch adaptive runtime state: steps (\d+) -> (\d+)")


def records_in_window(lines, window: tuple[float, float]) -> list[str]:
    """Lines of a timing log whose record started within `window` (other lines dropped)."""
    lo, hi = window
    keep = []
    for ln in lines:
        try:
            t = json.loads(ln).get("t")
        except (ValueError, AttributeError):
            continue
        if isinstance(t, (int, float)) and lo <= t <= hi:
            keep.append(ln if ln.endswith("\n") else ln + "\n")
    return keep


def decode_records(lines, t_from: float = 0.0, rank: int = 0) -> list[dict]:
    """Decode-cycle records of one rank in cycle order, read leniently (a record the project's strict
    reader would reject, e.g. accepted > steps, is exactly what the steps check must see)."""
    recs = []
    for ln in lines:
        try:
            r = json.loads(ln)
        except ValueError:
            continue
        if (isinstance(r, dict) and r.get("schema") == "sglang_patches.spec_timing" and r.get("kind") == "decode"
                and r.get("rank", 0) == rank and isinstance(r.get("t"), (int, float)) and r["t"] >= t_from):
            recs.append(r)
    recs.sort(key=lambda r: r.get("cycle", 0))
    return recs


def switch_states(log_text: str) -> list[int]:
    """SGLang's own sequence of runtime states from its 'Switch adaptive runtime state' lines
    (info level, rank 0): [from of the first switch, to of each switch]."""
    pairs = [(int(a), int(b)) for a, b in SWITCH_LINE.findall(log_text)]
    return [pairs[0][0]] + [b for _, b in pairs] if pairs else []


def _is_subsequence(short: list[int], long: list[int]) -> bool:
    it = iter(long)
    return all(any(x == y for y in it) for x in short)


def steps_runs(records: list[dict]) -> list:
    """The records' steps with repeats collapsed, in cycle order: [3, 5, 3] for 3 3 5 5 5 3."""
    return [r.get("steps") for i, r in enumerate(records) if i == 0 or records[i - 1].get("steps") != r.get("steps")]


def path_ok(runs: list, states: list[int]) -> bool:
    """The record runs within SGLang's switch states, the last run at SGLang's last state or the one before it
    (a switch after the last cycle: seen on 0.5.23, 2026-12-06; the log's whole-second stamps cannot order it
    against the records). No switch line: one run at most. Switch lines but no records: not consistent."""
    if not states:
        return len(runs) <= 1
    return bool(runs) and any(end >= 0 and states[end] == runs[-1] and _is_subsequence(runs[:-1], states[:end])
                              for end in (len(states) - 1, len(states) - 2))


def record_problem(r: dict, cands: list[int]) -> str | None:
    """Why a record's steps cannot be what ran (None = consistent with SGLang's state)."""
    steps, acc = r.get("steps"), r.get("accepted") or []
    if steps not in cands:
        return "steps not a candidate of its bucket"
    if any((not isinstance(a, int)) or a < 0 or a > steps for a in acc):
        return "accepted > steps"
    if (steps == 0) != (r.get("draft_ms") is None):
        return "draft phase presence disagrees with steps"
    if "plain" in r and r["plain"] != (steps == 0):  # v2 records mark the cycles that drafted nothing
        return "plain flag disagrees with steps"
    if steps > 0 and r.get("draft_tokens") != steps + 1:
        return "draft_tokens != steps + 1"
    return None


def steps_check(records: list[dict], cfg: dict, log_text: str, graph_bs=GRAPH_BS) -> dict:
    """Do the records' steps match what SGLang ran? Per record: its steps are a candidate of the bucket
    SGLang routes its batch size to, no request accepted more drafts than those steps, a draft phase
    was timed exactly when steps > 0, and draft_tokens = steps + 1 (topk 1). Over the log: the runs of
    equal steps in the records follow SGLang's own switch sequence (a subsequence: a switch made after
    a verify can be undone by the next batch's bucket before any cycle runs) ending in SGLang's last state or
    the one before it (the last verify of the traffic may switch with no cycle after it)."""
    problems: dict[str, int] = {}
    ok = 0
    by_steps: dict[int, list[float]] = {}
    for r in records:
        p = record_problem(r, candidates_for_bs(cfg, int(r.get("bs", 0)), graph_bs))
        if p is None:
            ok += 1
        else:
            problems[p] = problems.get(p, 0) + 1
        if isinstance(r.get("draft_ms"), (int, float)):
            by_steps.setdefault(r.get("steps"), []).append(r["draft_ms"])
    runs = steps_runs(records)
    states = switch_states(log_text)
    return {"records": len(records), "records_ok": ok, "fraction": ok / len(records) if records else None,
            "problems": problems, "record_steps_runs": len(runs), "sglang_switches": max(len(states) - 1, 0),
            "switch_path_consistent": path_ok(runs, states),
            "steps_seen": sorted({r.get("steps") for r in records if isinstance(r.get("steps"), int)}),
            "draft_ms_p50_by_steps": {str(k): round(statistics.median(v), 4) for k, v in sorted(by_steps.items())}}


def counts_check(records: list[dict], requests: list[dict]) -> dict:
    """Records against SGLang's per-request counters over the same requests: request-cycles in the
    records (entries of `accepted`) = sum of meta_info spec_verify_ct; and the phases of each full
    decode record fit in its cycle (draft + verify + extend <= cycle, a few us of rounding allowed)."""
    req_cycles = sum(len(r.get("accepted") or []) for r in records)
    verify_ct = sum(int(q.get("spec_verify_ct") or 0) for q in requests)
    ratios, within = [], 0
    full = [r for r in records if all(isinstance(r.get(k), (int, float)) for k in ("verify_ms", "extend_ms", "cycle_ms"))
            and r.get("cycle_ms", 0) > 0]
    for r in full:
        s = (r.get("draft_ms") or 0.0) + r["verify_ms"] + r["extend_ms"]
        ratios.append(s / r["cycle_ms"])
        within += s <= r["cycle_ms"] * 1.001 + 0.01
    ratios.sort()
    return {"requests": len(requests), "record_request_cycles": req_cycles, "spec_verify_ct_sum": verify_ct,
            "records_equal_verify_ct": req_cycles == verify_ct and verify_ct > 0,
            "decode_records": len(records), "records_with_all_phases": len(full),
            "phases_within_cycle_fraction": within / len(full) if full else None,
            "phases_share_of_cycle_p50": round(ratios[len(ratios) // 2], 4) if ratios else None,
            "phases_share_of_cycle_min": round(ratios[0], 4) if ratios else None}
