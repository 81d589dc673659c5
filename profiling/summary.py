"""`summary.json` and `summary.md` of one profiling window (pure functions of recorded inputs).

Per rank (scheduler process):
  * host-gap share, GPU-gap share: `phases.host_gap.share` / `phases.gpu_gap.share` of the overlay's
    timer summary for the window (sum of the gap / sum of GPU cycle time, decode cycles; see
    sglang_patches/vocab/stats.py) - only for the rank that records timing (TP rank 0 of each DP
    group unless --timing-all-ranks), and only with the overlay;
  * GPU-busy share estimate: sum of cycle GPU time (cycle mean x n) / wall-clock window;
  * top host functions by self time from the py-spy samples of that process (all threads);
  * links to the flamegraph SVG, the speedscope file and the torch profiler's Chrome traces.
"""
from __future__ import annotations

import json
import os
import re
import time


def timing_metrics(spec_timing: dict | None, wall_s: float | None) -> dict | None:
    """The per-rank numbers taken from one timer summary (WindowStats.summary())."""
    if not isinstance(spec_timing, dict) or "phases" not in spec_timing:
        return None
    ph = spec_timing["phases"]

    def share(name):
        return (ph.get(name) or {}).get("share")

    cyc = ph.get("cycle") or {}
    cycle_sum_s = (cyc["mean"] * cyc["n"] / 1000.0) if cyc.get("mean") is not None and cyc.get("n") else None
    busy = cycle_sum_s / wall_s if cycle_sum_s is not None and wall_s else None
    return {"cycles": (spec_timing.get("cycles") or {}).get("counted"),
            "host_gap_share": share("host_gap"), "gpu_gap_share": share("gpu_gap"),
            "draft_share": share("draft"), "verify_share": share("verify"), "extend_share": share("extend"),
            "cycle_mean_ms": cyc.get("mean"), "cycle_sum_s": cycle_sum_s, "gpu_busy_share": busy,
            "cycles_per_s": spec_timing.get("cycles_per_s"), "accept_length": spec_timing.get("accept_length"),
            "recorder_tp_rank": (spec_timing.get("recorder") or {}).get("tp_rank")}


def trace_rank(filename: str) -> int | None:
    m = re.search(r"-TP-(\d+)", filename)
    return int(m.group(1)) if m else None


def build(*, meta: dict, schedulers: list[dict], pyspy: dict, timing: dict | None, markers: list[dict],
          torch: dict, problems: list[str], notes: list[str]) -> dict:
    """The summary dict. `pyspy` maps pid -> {ok, message, speedscope, svg, threads, top};
    `timing` is the `/spec_timing` body (or None); `markers` the overlay markers of /server_info."""
    wall = (meta.get("window") or {}).get("wall_s")
    dp_timing = {d.get("dp_rank"): d.get("spec_timing") for d in (timing or {}).get("dp") or []}
    rows, seen = [], set()
    for s in schedulers:
        seen.add(s["pid"])
        rows.append({**s, "pyspy": pyspy.get(s["pid"])})
    for m in markers:  # ranks known only from the overlay (server not on this host)
        if m.get("pid") not in seen:
            rows.append({"pid": m.get("pid"), "tp_rank": m.get("tp_rank"), "dp_rank": None,
                         "label": f"tp{m.get('tp_rank')}", "sources": ["marker"], "pyspy": None})
    by_pid = {m.get("pid"): m.get("dp_index") for m in markers}
    for r in rows:
        dp_index = by_pid.get(r["pid"])
        r["timing"] = timing_metrics(dp_timing.get(dp_index), wall) if dp_index is not None else None
        r["chrome_traces"] = [f for f in torch.get("files") or [] if trace_rank(os.path.basename(f)) == r.get("tp_rank")]
    return {"meta": meta, "ranks": rows, "torch_profiler": torch, "problems": problems, "notes": notes,
            "complete": not problems and not meta.get("interrupted")}


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x, fmt=".2f") -> str:
    return "-" if x is None else format(x, fmt)


def _rel(path: str | None, out_dir: str) -> str | None:
    return None if not path else os.path.relpath(path, out_dir) if os.path.isabs(path) else path


def _link(path: str | None, out_dir: str, text: str | None = None) -> str:
    rel = _rel(path, out_dir)
    return "-" if rel is None else f"[{text or os.path.basename(rel)}]({rel})"


def render_markdown(summary: dict, out_dir: str) -> str:
    meta, t = summary["meta"], summary["torch_profiler"]
    win = meta.get("window") or {}
    status = "complete" if summary["complete"] else "PARTIAL"
    lines = ["# sglang-patches profile", "",
             f"- server: {meta['url']} (SGLang {meta.get('sglang_version')}, "
             + (f"overlay {meta['overlay_version']})" if meta.get("overlay_version") else "no overlay: no phase-timing window)"),
             f"- window: {meta['seconds']} s requested, {_num(win.get('wall_s'))} s measured, from "
             f"{_stamp(win.get('start'))} to {_stamp(win.get('end'))}",
             f"- status: **{status}**" + (" (interrupted)" if meta.get("interrupted") else ""),
             f"- py-spy: {meta.get('pyspy_cmd') or 'off'}",
             f"- torch profiler: {'off' if not t.get('requested') else t.get('output_dir')}"]
    if summary["problems"]:
        lines += ["", "## Missing or partial", ""] + [f"- {p}" for p in summary["problems"]]
    lines += ["", "## Per rank", "",
              "| rank | pid | host-gap share | GPU-gap share | GPU-busy est. | cycles | py-spy busy s / recorded s "
              "| flamegraph | speedscope | Chrome trace |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in summary["ranks"]:
        tm, ps = r.get("timing") or {}, r.get("pyspy") or {}
        thr = (ps.get("threads") or [{}])[0]
        traces = ", ".join(_link(f, out_dir) for f in r.get("chrome_traces") or []) or "-"
        lines.append(f"| {r.get('label')} | {r.get('pid')} | {_pct(tm.get('host_gap_share'))} | "
                     f"{_pct(tm.get('gpu_gap_share'))} | {_pct(tm.get('gpu_busy_share'))} | "
                     f"{_num(tm.get('cycles'), 'd') if tm.get('cycles') is not None else '-'} | "
                     f"{_num(thr.get('seconds'))} / {_num(ps.get('recorded_s'), '.1f')} | {_link(ps.get('svg'), out_dir, 'svg')} | "
                     f"{_link(ps.get('speedscope'), out_dir, 'json')} | {traces} |")
    for r in summary["ranks"]:
        ps = r.get("pyspy") or {}
        if not ps.get("top"):
            continue
        lines += ["", f"## Top host functions by self time: {r.get('label')} (pid {r.get('pid')})", "",
                  "| # | function | file:line | self s | self share | total share |", "|---|---|---|---|---|---|"]
        for i, f in enumerate(ps["top"], 1):
            lines.append(f"| {i} | `{f['function']}` | {f['file']}:{f['line']} | {f['self_s']:.3f} | "
                         f"{_pct(f['self_share'])} | {_pct(f['total_share'])} |")
    if t.get("requested"):
        lines += ["", "## torch profiler (Chrome traces)", ""]
        files = t.get("files") or []
        lines += [f"- {_link(f, out_dir)}" for f in files] or [f"- no trace file in {t.get('output_dir')}"
                                                                 + (f": {t['message']}" if t.get("message") else "")]
    lines += ["", "## Notes", ""] + [f"- {n}" for n in summary["notes"]] + [
        "- host-gap / GPU-gap share: sum of the gap over sum of GPU cycle time (decode cycles) in the "
        "window, from the overlay's timer (`GET /spec_timing`); GPU-busy est.: sum of cycle GPU time / "
        "wall window. Profilers were attached during the window, so absolute times include their overhead.",
        "- py-spy samples exclude idle threads (waiting in a syscall); shares are of sampled busy time; "
        "'busy s' is the busiest thread's sampled time. py-spy attaches just before the window opens and "
        "is stopped right after it closes, so its recording is slightly longer than the window."]
    return "\n".join(lines) + "\n"


def _stamp(t) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def write(summary: dict, out_dir: str) -> tuple[str, str]:
    js, md = os.path.join(out_dir, "summary.json"), os.path.join(out_dir, "summary.md")
    with open(js, "w") as f:
        json.dump(summary, f, indent=2, default=str)
    with open(md, "w") as f:
        f.write(render_markdown(summary, out_dir))
    return js, md
