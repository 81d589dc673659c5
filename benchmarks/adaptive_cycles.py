"""Per-steps decode cycles of every adaptive_bench cell: what each server ran inside the client's window.

For each cell (OUT/cells/*.json) the decode records of its server's timing log with t in [t0 + skip, t1]
(t0: the cell's start, its warm-up included; skip drops the warm-up), grouped by the steps that ran:
cycles, median cycle / verify / draft ms, tokens per request-cycle (accepted drafts + 1) and the
tok/s of those cycles alone (their tokens over the sum of their cycle_ms). Under adaptive speculation
this shows where SGLang's slot sat and what each chain cost there.

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


def _median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def cell_cycles(cell: dict, lines, skip_s: float) -> dict:
    recs = [r for r in asum.decode_records(lines) if cell["t0"] + skip_s <= r["t"] <= cell["t1"]]
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="an adaptive_bench --out folder (or an unpacked export of one)")
    ap.add_argument("--skip-s", type=float, default=1.0, help="seconds after a cell's start left out (warm-up)")
    ap.add_argument("--out", dest="dst", default=None, help="write the table as JSON here")
    args = ap.parse_args(argv)
    out = Path(args.out)
    cells = sorted((out / "cells").glob("*.json"))
    if not cells:
        print(f"{out}: no cells/*.json; pass an adaptive_bench --out folder", file=sys.stderr)
        return 2
    if args.dst and Path(args.dst).resolve().parent in ((out / "cells").resolve(), (out / "timing").resolve()):
        print(f"--out {args.dst}: inside the cells or timing folder it reads; write it elsewhere", file=sys.stderr)
        return 2
    table, read = {}, set()
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
        table[f.stem] = cell_cycles(cell, lines, args.skip_s)
    for name, c in table.items():
        parts = [f"s{s}: {v['share_of_cycles']:.0%} {v['cycle_ms_p50']} ms {v['tokens_per_request_cycle']} tok/rc"
                 for s, v in c["steps"].items()]
        print(f"{name:18s} {c['output_tok_s']:8.1f} tok/s  " + "; ".join(parts))
    if args.dst and Path(args.dst).resolve() in read:
        print(f"--out {args.dst}: a timing log it reads; write it elsewhere", file=sys.stderr)
        return 2
    if args.dst:
        Path(args.dst).write_text(json.dumps({"skip_s": args.skip_s, "cells": table}, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
