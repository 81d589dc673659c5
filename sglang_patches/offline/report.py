"""`sglang-patches report FILE [FILE ...] [--png OUT.png] [--json] [--rank R] [--kind K]`.

Summarises `--timing-log` JSONL files per TP rank: phase p50/p90/p99 (over the stated percentile
window) and share of the cycle, accept length, per-position acceptance (P(accepted > k) and conditional), estimated
tok/s, host-gap and GPU-gap time relative to the cycle (outside it, overlapping each other), cycle
counts and skipped lines; then the advice (`advisor.Advice.to_dict()`, the object `advise --json`
has), led by the no-acceptance verdict when the drafter accepts nothing. Output: a table (rich if
importable, else plain text), `--json` (stable keys), and/or a PNG (`--png`, needs matplotlib:
report_plot.py).
"""
from __future__ import annotations

import argparse
import json
import math
import sys

from sglang_patches.cliargs import OneLineParser, refuse_output_on_input
from sglang_patches.errors import UserError
from sglang_patches.offline.advise_inputs import add_baseline_args, check_baseline_args
from sglang_patches.offline.report_advice import advice_object, figure_title
from sglang_patches.offline.report_notes import CYCLE_NOTE, SHARES_NOTE, idle_waits_note, pct as _pct, slow_cycles_note
from sglang_patches.offline.report_plot import check_png_path
from sglang_patches.whatif.advisor_records import ObservationBuilder
from sglang_patches.vocab.logread import LogReader, check_paths
from sglang_patches.vocab.schema import KINDS, PHASES, SCHEMA_VERSION
from sglang_patches.vocab.stats import SERIES, WindowStats, percentile

JSON_FORMAT = 4  # bump when the --json layout changes incompatibly (2: the advice never recommends past the logged steps;
#                  3: phase `share` leaves out slow cycles, `share_all` keeps them, `slow_cycles` counts them;
#                  4: the gap shares also leave out idle waits between cycles, `idle_waits` counts them)


ROWS = (
    ("cycles decode / prefill", "records of each kind in the log(s), all counted (plain steps-0 decode steps: their own row)"),
    ("window s", "wall-clock seconds from the first to the last summarised cycle"),
    ("cycles/s", "summarised cycles per wall-clock second"),
    ("percentile window", "the cycles every p50/p90/p99 row covers: the last --ring of them, or all"),
    ("PHASE ms p50/p90/p99", "GPU ms of draft, verify, extend (draft-extend), the whole cycle, the host gap and "
                             "the GPU gap before a cycle"),
    ("PHASE share of cycle", "draft, verify, extend: parts of the GPU cycle, over the summarised cycles but the slow "
                             "ones (over about 3x their batch size's median cycle: warm-up, graph capture; a note counts them) (at most "
                             "100 % together)"),
    ("other in-cycle time", "the cycle's GPU time in no phase (100 % minus the three shares)"),
    ("host gap vs cycle", "host time between cycles relative to GPU cycle time: outside the cycle, and it "
                          "overlaps GPU work and the GPU gap, so it adds to nothing; idle waits (a gap over 20 ms "
                          "and 3 decode cycles, or before a prefill: no request to run) left out, a note counts them"),
    ("gpu gap vs cycle", "GPU-idle time between cycles relative to GPU cycle time: outside the cycle; idle waits "
                         "left out as above"),
    ("mean batch size", "requests per cycle"),
    ("cycle time by batch", "share of GPU cycle time per batch size, the three largest and the rest, slow cycles "
                            "left out as from the shares: a short run's ramp and drain show as time below its top batch"),
    ("accept length", "tokens per request-cycle: accepted drafts + 1 bonus token"),
    ("pos acc P(acc > k)", "share of request-cycles that accepted more than k drafts, k = 0, 1, ..., of those "
                           "that drafted position k (vLLM's per-position rate)"),
    ("pos acc conditional", "position k accepted given 0..k-1 were: P(acc > k) / P(acc > k-1); the form "
                            "--simulate-acceptance takes"),
    ("tok/s/req, cycles only", "accept length / mean GPU cycle time of the steady cycles, the gaps between cycles "
                               "left out; advise prices median cycles plus the GPU gap, so its tok/s differs"),
    ("tok/s batch, cycles only", "the steady cycles' tokens / their GPU cycle time, over every batch size logged "
                                 "(the gaps between cycles left out; --json's tok_s_batch_all keeps every cycle)"),
    ("steps mix: % cycles", "a mixed-steps (adaptive) log only: each steps value's share of the drafting decode "
                            "cycles and its own accept length; the rows above pool them"),
    ("plain decode steps", "steps-0 decode steps (adaptive, step_timing): count x GPU step ms p50, per batch size "
                           "held 5 steps or more (a plain server's log given beside: its prefills stay out)"),
)


def build_parser() -> argparse.ArgumentParser:
    w = max(len(r) for r, _ in ROWS)
    p = OneLineParser(
        prog="sglang-patches report", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Summarise phase-timing JSONL logs written by --timing-log: a table per TP rank, then the "
                    "advice (in --json: the object `sglang-patches advise --json` has under `advice`).",
        epilog="rows:\n" + "".join(f"  {r:<{w}}  {h}\n" for r, h in ROWS) + "\nexamples:\n"
               "  sglang-patches report cycles.jsonl                    # the table and the advice\n"
               "  sglang-patches report cycles.jsonl cycles.jsonl.rank1 --png cycles.png   # two TP ranks, a figure\n")
    p.add_argument("files", nargs="+", metavar="FILE", help="timing log(s); several ranks allowed")
    p.add_argument("--png", metavar="OUT.png", help="also write a figure: phase times, shares, acceptance, the advice "
                                                    "(needs matplotlib; an existing file is refused unless --force)")
    p.add_argument("--force", action="store_true", help="with --png: overwrite an existing OUT.png")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    p.add_argument("--rank", type=int, metavar="R", help="only this TP rank")
    p.add_argument("--kind", choices=("decode", "prefill", "all"), default="decode",
                   help="which cycles to summarise (default: decode)")
    p.add_argument("--ring", type=int, default=4096, metavar="N",
                   help="percentiles over the last N cycles per rank (default: 4096)")
    add_baseline_args(p)  # advise's: the verdict then says "N.NNx plain decode" and speculate / don't
    return p


def is_plain(rec: dict) -> bool:
    """A decode step that drafted nothing: `plain` (schema v2, adaptive steps 0) or steps 0 (a v1 log,
    step_timing). No acceptance to count: accept length 1 by construction."""
    return rec["kind"] == "decode" and (bool(rec.get("plain")) or rec["steps"] == 0)


class PlainSteps(WindowStats):
    """The plain decode steps of one rank, with each batch size's step times (a step grows with the batch)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.by_bs: dict[int, list[float]] = {}

    def add(self, rec: dict) -> None:
        super().add(rec)
        if rec["kind"] == "decode" and rec["cycle_ms"] is not None:
            self.by_bs.setdefault(rec["bs"], []).append(rec["cycle_ms"])


def collect(reader: LogReader, rank, kinds, ring: int, want_series: bool, also=None, plain=None, mix=None):
    """Per-rank WindowStats of the cycles that drafted (and per-cycle phase series for the plot) from
    the reader's records; plain decode steps (`is_plain`) go to `plain[rank]` instead, a WindowStats of
    their own. `also(rec)` sees every record of the selected rank(s) too (the advice). `mix[rank][steps]`
    gets a WindowStats of that steps value's drafting decode cycles: an adaptive server's steps differ."""
    stats: dict[int, WindowStats] = {}
    series: dict[int, dict] = {}
    plain = {} if plain is None else plain
    seen_ranks, seen_kinds, plain_prefills, drafted = set(), {}, {}, set()

    def add(r: int, rec: dict) -> None:
        stats[r].add(rec)
        if mix is not None and rec["kind"] == "decode" and "decode" in kinds:  # per steps, as /spec_timing's by_steps
            mix.setdefault(r, {}).setdefault(rec["steps"], WindowStats(ring=ring)).add(rec)
        if want_series and rec["kind"] in kinds:
            s = series[r]
            s["cycle"].append(rec["cycle"])
            for p in PHASES:
                s[p].append(rec[p + "_ms"] or 0.0)
            s["cycle_ms"].append(rec["cycle_ms"])

    for rec in reader:
        r = rec["rank"]
        seen_ranks.add(r)
        seen_kinds[rec["kind"]] = seen_kinds.get(rec["kind"], 0) + 1
        if rank is not None and r != rank:
            continue
        if r not in stats:
            stats[r] = WindowStats(ring=ring, kinds=kinds)
            series[r] = {"cycle": [], "cycle_ms": [], **{p: [] for p in PHASES}}
        if also is not None:
            also(rec)
        if rec["kind"] == "prefill" and not rec["topk"] and not rec["draft_tokens"]:  # a server without speculation:
            plain_prefills.setdefault(r, []).append(rec)  # the speculative server's column only if there is none
            continue
        if "decode" in kinds and is_plain(rec):
            plain.setdefault(r, PlainSteps(ring=ring)).add(rec)
            continue
        if rec["kind"] == "decode" and not is_plain(rec):
            drafted.add(r)
        add(r, rec)
    for r, recs in plain_prefills.items():  # a plain server's log beside a speculative one: its prefills stay out
        for rec in recs:
            if r in drafted:
                plain.setdefault(r, PlainSteps(ring=ring)).add(rec)
            else:
                add(r, rec)
    if rank is not None and rank not in stats:
        present = ", ".join(map(str, sorted(seen_ranks)))
        raise UserError(f"--rank {rank}: no records for that rank; ranks present: {present}")
    if not any(st.counted for st in stats.values()) and not any(st.counted for st in plain.values()):
        names = ", ".join(reader.paths)
        held = ", ".join(f"{n} {k}" for k, n in sorted(seen_kinds.items()))
        if "decode" in kinds and set(seen_kinds) == {"prefill"}:  # a run stopped after its prefills, or cut short
            raise UserError(f"no decode cycles in {names}: its records are prefills only ({held}): the server "
                            "logged no decode; log a run that generates tokens (report --kind all shows the prefills)")
        raise UserError(f"no {'/'.join(kinds)} cycles in {names} (it holds {held}); try --kind all")
    return dict(sorted(stats.items())), dict(sorted(series.items()))


def mix_summary(mix: dict | None) -> dict:
    """{steps: cycles, share of the drafting decode cycles, accept length}, largest steps first."""
    sums = {k: st.summary() for k, st in sorted((mix or {}).items(), reverse=True)}
    total = sum(s["cycles"]["decode"] for s in sums.values())
    return {str(k): {"cycles": s["cycles"]["decode"], "share": s["cycles"]["decode"] / total,
                     "accept_length": s["accept_length"]} for k, s in sums.items()}


def skipped_by_rank(reader: LogReader) -> tuple[dict, int]:
    """Skipped lines attributed to a rank when their file holds only that rank; the rest total."""
    per_rank, other = {}, 0
    for f in reader.files:
        if len(f.ranks) == 1:
            r = next(iter(f.ranks))
            per_rank[r] = per_rank.get(r, 0) + f.skipped
        else:
            other += f.skipped
    return per_rank, other


def plain_summary(st: WindowStats | None) -> dict | None:
    """The plain decode steps of one rank: count, GPU step ms (cycle_ms), mean batch size."""
    if st is None or not st.counted:
        return None
    s = st.summary()
    return {"steps": s["cycles"]["decode"], "mean_bs": s["mean_bs"],
            "step_ms": {k: s["phases"]["cycle"][k] for k in ("p50", "p90", "p99", "mean")},
            "by_bs": {str(b): {"steps": len(v), "p50": percentile(sorted(v), 50)}
                      for b, v in sorted(getattr(st, "by_bs", {}).items())}}


def build_result(reader: LogReader, summaries: dict, kind: str, plain: dict | None = None,
                 mix: dict | None = None) -> dict:
    per_rank, other = skipped_by_rank(reader)
    return {
        "format": JSON_FORMAT,
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "files": [{"path": f.path, "valid": f.valid, "skipped": f.skipped, "ranks": sorted(f.ranks)}
                  for f in reader.files],
        "skipped_lines": reader.skipped,
        "skipped_unattributed": other,
        "ranks": {str(r): {**s, "skipped_lines": per_rank.get(r, 0),
                           "plain_steps": plain_summary((plain or {}).get(r)),
                           "by_steps": mix_summary((mix or {}).get(r))} for r, s in summaries.items()},
    }


def finite_or_null(obj):
    """`obj` with every NaN/Infinity replaced by null: --json output is always valid JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_null(v) for v in obj]
    return obj


def _f(x, fmt=".2f") -> str:
    return "-" if x is None else format(x, fmt)


def table_rows(result: dict) -> list[tuple[str, list[str]]]:
    sums = list(result["ranks"].values())
    rows = [("cycles decode / prefill", [f"{s['cycles']['decode']} / {s['cycles']['prefill']}" for s in sums]),
            ("window s", [_f(s["window"]["seconds"], ".1f") for s in sums]),
            ("cycles/s", [_f(s["cycles_per_s"], ".1f") for s in sums]),
            ("percentile window", [percentile_window(s) for s in sums])]
    for ph in SERIES:
        rows.append((f"{ph} ms p50/p90/p99", [
            " / ".join(_f(s["phases"][ph][q]) for q in ("p50", "p90", "p99")) for s in sums]))
    for ph in PHASES:  # parts of the cycle; the gaps lie outside it and get their own rows
        rows.append((f"{ph} share of cycle", [_pct(s["phases"][ph]["share"]) for s in sums]))
    rows += [
        ("other in-cycle time", [_pct(in_cycle_rest(s)) for s in sums]),
        ("host gap vs cycle", [_pct(s["phases"]["host_gap"]["share"]) for s in sums]),
        ("gpu gap vs cycle", [_pct(s["phases"]["gpu_gap"]["share"]) for s in sums]),
        ("mean batch size", [_f(s["mean_bs"]) for s in sums]),
        ("cycle time by batch", [by_batch(s.get("cycle_time_by_bs") or {}) for s in sums]),
        ("accept length", [_f(s["accept_length"]) for s in sums]),
        ("pos acc P(acc > k)", [" ".join(_f(r) for r in s["pos_rates"]) or "-" for s in sums]),
        ("pos acc conditional", [" ".join(_f(r) for r in conditional(s["pos_rates"])) or "-" for s in sums]),
        ("tok/s/req, cycles only", [_f(s["tok_s_per_request"], ".1f") for s in sums]),
        ("tok/s batch, cycles only", [_f(s["tok_s_batch"], ".1f") for s in sums]),
    ]
    if any(len(s.get("by_steps") or {}) > 1 for s in sums):  # adaptive: the rows above pool these
        rows.append(("steps mix: % cycles (accept len)", [" ".join(
            f"{k}: {v['share']:.0%} ({_f(v['accept_length'])})" for k, v in (s.get("by_steps") or {}).items()) or "-"
            for s in sums]))
    if any(s.get("plain_steps") for s in sums):  # adaptive steps 0: not in the rows above
        rows.append(("plain decode steps, ms p50", [plain_cell(s.get("plain_steps")) for s in sums]))
    return rows


def by_batch(shares: dict) -> str:
    """'8: 54% 6: 10% 2: 9% +5: 27%': the three largest shares, then how many more and their total."""
    items = list(shares.items())
    head = " ".join(f"{b}: {v:.0%}" for b, v in items[:3])
    rest = items[3:]
    return (head + (f" +{len(rest)}: {sum(v for _, v in rest):.0%}" if rest else "")) or "-"


def conditional(pos_rates: list) -> list:
    """P(acc > k | acc > k-1) from P(acc > k): the rates --simulate-acceptance takes (None once a
    position is never reached)."""
    out, prev = [], 1.0
    for r in pos_rates:
        out.append(None if r is None or not prev else r / prev)
        prev = r
    return out


def plain_cell(p: dict | None) -> str:
    held = {b: v for b, v in ((p or {}).get("by_bs") or {}).items() if v["steps"] >= 5}  # a ramp's sizes left out
    if len(held) > 1:  # one p50 over several batch sizes is no step of any of them
        return ", ".join(f"{b}: {v['steps']} x {_f(v['p50'])}" for b, v in held.items())
    if len(held) == 1 and len(p["by_bs"]) > 1:
        b, v = next(iter(held.items()))
        return f"{v['steps']} x {_f(v['p50'])} (batch {b})"
    return "-" if not p else f"{p['steps']} x {_f(p['step_ms']['p50'])}"


def percentile_window(s: dict) -> str:
    """Which cycles the p50/p90/p99 rows cover: the last `ring` of the counted ones, or all."""
    n, in_ring = s["cycles"]["counted"], s["cycles"]["in_ring"]
    return f"last {in_ring} of {n} cycles" if in_ring < n else f"all {n} cycles"


def in_cycle_rest(s: dict):
    """The cycle's share in no phase: 1 minus the phase shares (None without them)."""
    shares = [s["phases"][p]["share"] for p in PHASES]
    if all(x is None for x in shares):
        return None
    return max(0.0, 1.0 - sum(x or 0.0 for x in shares))  # a phase that never ran (prefill's draft) is 0


def _import_rich():
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        return None
    return Console, Table


def render_table(result: dict, out=None, use_rich: bool = True) -> None:
    out = out or sys.stdout
    cols = [f"rank {r}" for r in result["ranks"]]
    rows = table_rows(result)
    title = f"spec timing ({result['kind']} cycles)"
    if any((s.get("simulated_records") or 0) for s in result["ranks"].values()):
        title = "SIMULATED ACCEPTANCE (accept figures drawn from rates set at launch, not measured): " + title
    foot = (f"{result['skipped_lines']} bad line(s) skipped"
            + (f", {result['skipped_unattributed']} in multi-rank files" if result["skipped_unattributed"] else "")
            + " | " + ", ".join(f["path"] for f in result["files"]))
    rich = _import_rich() if use_rich else None
    if rich is not None:
        Console, Table = rich
        table = Table(title=title, caption=foot)
        table.add_column("metric", style="bold")
        for c in cols:
            table.add_column(c, justify="right")
        for label, vals in rows:
            table.add_row(label, *vals)
        console = Console(file=out, width=max(100, 28 + 26 * len(cols)))

        def closed_pipe():  # rich's own answer is SystemExit(1); a closed pipe is no error (cli.main)
            raise BrokenPipeError(32, "the reader closed the pipe")

        console.on_broken_pipe = closed_pipe
        console.print(table)
        return
    w0 = max(len(label) for label, _ in rows)
    widths = [max(len(c), *(len(v[i]) for _, v in rows)) for i, c in enumerate(cols)]
    print(title, file=out)
    print("  ".join(["metric".ljust(w0)] + [c.rjust(w) for c, w in zip(cols, widths)]), file=out)
    for label, vals in rows:
        print("  ".join([label.ljust(w0)] + [v.rjust(w) for v, w in zip(vals, widths)]), file=out)
    print(foot, file=out)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.ring < 1:
        raise UserError("--ring must be at least 1")
    check_paths(args.files)
    check_baseline_args(args)
    if args.png:
        refuse_output_on_input(args.png, "--png", [("log", f) for f in args.files])
        check_png_path(args.png, args.force)  # before reading anything (report_plot.py)
    elif args.force:
        raise UserError("--force only applies to --png OUT.png; drop it")
    kinds = KINDS if args.kind == "all" else (args.kind,)
    reader = LogReader(args.files)
    builders, plain, mix = {}, {}, {}
    stats, series = collect(reader, args.rank, kinds, args.ring, want_series=bool(args.png),
                            also=lambda rec: builders.setdefault(rec["rank"], ObservationBuilder()).add(rec),
                            plain=plain, mix=mix)
    summaries = {r: st.summary() for r, st in stats.items()}
    result = build_result(reader, summaries, args.kind, plain, mix)
    first = min(builders)
    result["advice"] = advice_object(builders[first], args.files, summaries.get(first, {}), args)
    lines = result["advice"]["lines"]
    if args.png:  # written before any text: a reader that stops early (report ... | head) still gets the figure
        from sglang_patches.offline.report_plot import plot_report
        plot_report(args.png, series, summaries, title=figure_title(builders[first], summaries.get(first, {}), args.kind),
                    advice=result["advice"])
    if args.json:
        print(json.dumps(finite_or_null(result), indent=2, allow_nan=False))
    else:
        lead = result["advice"].get("verdict_lines") or []
        rest = lines[len(lead):]
        warned = [ln for ln in rest if ln.startswith("warning: ")]  # a figure that may not hold: right after it
        for line in lead + warned:  # the verdict comes before any number
            print(line)
        render_table(result)
        print(SHARES_NOTE)
        slow_note = slow_cycles_note(summaries)
        if slow_note:
            print(slow_note)
        idle_note = idle_waits_note(summaries)
        if idle_note:
            print(idle_note)
        print(CYCLE_NOTE)
        for i, line in enumerate(ln for ln in rest if ln not in warned):
            print(("advice: " if i == 0 else "") + line)
    if args.png:
        print(f"wrote {args.png}", file=sys.stderr if args.json else sys.stdout)
    return 0
