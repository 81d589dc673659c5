"""Per-steps decode cycles of every adaptive_bench cell: what each server ran inside the client's window.

For each cell (OUT/cells/*.json) the decode records of its server's timing log with t in [t0 + skip, t1]
(t0: the cell's start, its warm-up included; skip drops the warm-up), grouped by the steps that ran:
cycles, median cycle / verify / draft ms, tokens per request-cycle (accepted drafts + 1) and the
tok/s of those cycles alone (their tokens over the sum of their cycle_ms). Under adaptive speculation
this shows where SGLang's slot sat and what each chain cost there.

The truncation check puts each pair of fixed-steps rows of one cell side by side: the longer chain's
cycles truncated to the shorter one (min(accepted, shorter) + 1 per request-cycle, what `advise`
prices a shorter chain by) against the shorter chain's own server. On one text they would differ only
by where cycles start (a shorter chain starts more of them inside easy spans, so truncation reads
low); servers whose outputs part add their texts' difference. The spread bounds any ranking of
chains that the cells' tok/s differences are read as.

    python benchmarks/adaptive_cycles.py OUT [--skip-s 1.0] [--out cycles_by_steps.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import adaptive_summary as asum  # noqa: E402
import adaptive_log_checks as achk  # noqa: E402


def _median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def cell_cycles(cell: dict, recs: list[dict]) -> dict:
    """recs: the cell's decode records inside its window (_in_window)."""
    by_steps: dict[int, list[dict]] = {}
    for r in recs:
        by_steps.setdefault(int(r["steps"]), []).append(r)
    rows = {}
    for steps, rs in sorted(by_steps.items()):
        tokens = sum(a + 1 for r in rs for a in r["accepted"])
        req_cycles = sum(len(r["accepted"]) for r in rs)
        ms = sum(r.get("cycle_ms") or 0.0 for r in rs)
        rows[str(steps)] = {"cycles": len(rs), "cycle_ms_p50": _median(r.get("cycle_ms") for r in rs),
                            "verify_ms_p50": _median(r.get("verify_ms") for r in rs),
                            "draft_ms_p50": _median(r.get("draft_ms") for r in rs),
                            "tokens_per_request_cycle": round(tokens / req_cycles, 3) if req_cycles else None,
                            "tok_s_of_these_cycles": round(1000.0 * tokens / ms, 1) if ms else None}
    total = sum(v["cycles"] for v in rows.values())
    for v in rows.values():
        v["share_of_cycles"] = round(v["cycles"] / total, 3)
    return {"row": cell["row"], "set": cell["set"], "bs": cell["bs"],
            "output_tok_s": cell["result"].get("output_throughput"), "steps": rows}


def _in_window(cell: dict, lines, skip_s: float) -> list[dict]:
    return [r for r in achk.decode_records(lines) if cell["t0"] + skip_s <= r["t"] <= cell["t1"]]


def truncation_check(fixed: dict) -> list[dict]:
    """fixed: {(row, set, bs): records} of fixed-steps cells -> one entry per longer/shorter pair."""
    out = []
    for (row, pset, bs), recs in sorted(fixed.items()):
        for (row2, pset2, bs2), recs2 in sorted(fixed.items()):
            long_s, short_s = asum.FIXED[row], asum.FIXED[row2]
            if (pset2, bs2) != (pset, bs) or short_s >= long_s:
                continue
            trunc = [min(a, short_s) + 1 for r in recs for a in r["accepted"]]
            own = [a + 1 for r in recs2 for a in r["accepted"]]
            if not trunc or not own:
                continue
            t, m = sum(trunc) / len(trunc), sum(own) / len(own)
            out.append({"set": pset, "bs": bs, "longer": row, "shorter": row2, "truncated": round(t, 3),
                        "shorter_own": round(m, 3), "ratio": round(t / m, 3)})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="an adaptive_bench --out folder (or an unpacked export of one)")
    ap.add_argument("--skip-s", type=float, default=1.0, help="seconds after a cell's start left out (warm-up)")
    ap.add_argument("--out", dest="dst", default=None, help="write the table as JSON here")
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure="the cycles behind the adaptive rows' tok/s (steps vs cycle ms per cell)", folder=('2026-12-03-adaptive-fixed-build', '2026-12-02-adaptive-rule-check'),
                       duration='seconds, CPU only (reads an adaptive_bench --out)')
    args = ap.parse_args(argv)
    if args.dry_run:
        return figure_cli.dry_run(out=args.dst or "stdout", reads=[f"{args.out}/cells/*.json and their timing logs"], notes=[f"skip {args.skip_s} s after each cell start"])
    out = Path(args.out)
    cells = sorted((out / "cells").glob("*.json"))
    if not cells:
        print(f"{out}: no cells/*.json; pass an adaptive_bench --out folder", file=sys.stderr)
        return 2
    if args.dst and Path(args.dst).resolve().parent in ((out / "cells").resolve(), (out / "timing").resolve()):
        print(f"--out {args.dst}: inside the cells or timing folder it reads; write it elsewhere", file=sys.stderr)
        return 2
    table, read, fixed = {}, set(), {}
    for f in cells:
        try:
            cell = json.loads(f.read_text())
            log = cell.get("timing_log")
            missing = [k for k in ("t0", "t1", "row", "set", "bs", "result") if k not in cell]
            if missing:
                raise KeyError(", ".join(missing))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            print(f"{f.name}: not a complete cell ({type(exc).__name__}: {exc}), left out", file=sys.stderr)
            continue
        if not log:
            continue  # plain decode: no timing log
        path = Path(log)
        if not path.exists():  # an export unpacked elsewhere: the same name under OUT/timing
            path = out / "timing" / path.name
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            print(f"{f.name}: timing log {log} not found, left out", file=sys.stderr)
            continue
        read.add(path.resolve())
        recs = _in_window(cell, lines, args.skip_s)
        table[f.stem] = cell_cycles(cell, recs)
        if cell["row"] in asum.FIXED:
            fixed[(cell["row"], cell["set"], cell["bs"])] = recs
    for name, c in table.items():
        parts = [f"s{s}: {v['share_of_cycles']:.0%} {v['cycle_ms_p50']} ms {v['tokens_per_request_cycle']} tok/rc"
                 for s, v in c["steps"].items()]
        print(f"{name:18s} {c['output_tok_s']:8.1f} tok/s  " + "; ".join(parts))
    trunc = truncation_check(fixed)
    for t in trunc:
        print(f"truncation {t['set']} bs{t['bs']}: {t['longer']} cut to {t['shorter']} {t['truncated']} tok/rc, "
              f"{t['shorter']}'s own {t['shorter_own']} ({t['ratio']:.3f}x)")
    if args.dst and Path(args.dst).resolve() in read:
        print(f"--out {args.dst}: a timing log it reads; write it elsewhere", file=sys.stderr)
        return 2
    if args.dst:
        Path(args.dst).write_text(json.dumps({"skip_s": args.skip_s, "cells": table, "truncation_check": trunc}, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
