"""Cross-check the phase timer against torch.profiler's GPU kernel timeline.

The timer says how long the cycles took on the GPU stream (CUDA events). torch.profiler (through
SGLang's /start_profile, /stop_profile) records every GPU kernel, memcpy and memset. Over the same
window of decode-only traffic:

    timer_ms  = sum of cycle_ms of the decode cycles timed in the window
    busy_ms   = union of GPU activity intervals in the trace (overlaps on several streams merged)
    span_ms   = last activity end - first activity start

busy_ms <= span_ms; timer_ms sits between them when the window holds only decode cycles (the cycle
event includes bubbles inside a cycle but not the gaps between cycles). The check passes when
busy_ms / timer_ms is within the tolerance of 1 (CUDA graphs keep the GPU busy inside a cycle).
"""
from __future__ import annotations

import gzip
import json

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def load_trace(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def gpu_intervals(trace: dict) -> list[tuple[float, float]]:
    """(start_us, end_us) of every complete GPU activity event of the trace."""
    out = []
    for ev in trace.get("traceEvents", []):
        if ev.get("ph") == "X" and ev.get("cat") in GPU_CATEGORIES and "ts" in ev:
            start = float(ev["ts"])
            out.append((start, start + float(ev.get("dur", 0.0))))
    return out


def union_length(intervals: list[tuple[float, float]]) -> float:
    total, cur_start, cur_end = 0.0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def trace_window_unix(trace: dict) -> tuple[float, float] | None:
    """Unix-time span of the trace's GPU activity, when the trace carries Kineto's base time."""
    base = trace.get("baseTimeNanoseconds")
    iv = gpu_intervals(trace)
    if base is None or not iv:
        return None
    return base / 1e9 + min(s for s, _ in iv) / 1e6, base / 1e9 + max(e for _, e in iv) / 1e6


def timer_ms_in_window(records: list[dict], window: tuple[float, float]) -> tuple[float, int]:
    """Sum of cycle_ms of the decode records whose host start time lies inside `window`."""
    lo, hi = window
    picked = [r["cycle_ms"] for r in records if r.get("kind") == "decode" and r.get("cycle_ms") is not None
              and lo <= r["t"] <= hi]
    return sum(picked), len(picked)


def compare(trace_paths: list[str], timer_cycle_ms_total: float, tolerance: float = 0.10) -> dict:
    intervals = []
    for path in trace_paths:
        intervals += gpu_intervals(load_trace(path))
    if not intervals:
        return {"ok": False, "reason": "no GPU activity in the trace(s)", "events": 0}
    busy_ms = union_length(intervals) / 1e3
    span_ms = (max(e for _, e in intervals) - min(s for s, _ in intervals)) / 1e3
    ratio = busy_ms / timer_cycle_ms_total if timer_cycle_ms_total else None
    return {"events": len(intervals), "busy_ms": busy_ms, "span_ms": span_ms, "timer_ms": timer_cycle_ms_total,
            "busy_over_timer": ratio, "span_over_timer": span_ms / timer_cycle_ms_total if timer_cycle_ms_total else None,
            "ok": ratio is not None and abs(ratio - 1.0) <= tolerance, "tolerance": tolerance}
