"""What SGLang's adaptive `0` costs: the steps-0 cycles of an adaptive server against a plain server's step.

Under `--speculative-adaptive` a candidate 0 is not plain decode. SGLang 0.5.17 builds a one-node tree
(`EAGLEWorkerV2._build_trivial_verify_input`), runs the target through its verify path at one token per
request, then the drafter's extend. This script reads unpacked adaptive_bench exports (`--run DIR`, any
number: one may hold the plain and default cells, another the `zero` case). For every measured cell it
reports tok/s, and per steps value the decode cycles inside the client's window (adaptive_cycles). It also
gives the plain server's step ms per batch size, from SGLang's own log (advise's --baseline-log parser),
and then:
  * steps0_over_plain_step[bs]: the steps-0 cycle p50 over the plain step;
  * zero_vs_plain / default_vs_plain: tok/s ratios per cell (a run's prompt counts are said per cell);
  * steps1_over_steps0_cycle: inside the default's cells, its steps-1 cycle p50 over its steps-0 one.

    python benchmarks/adaptive_steps0.py --run A --run B --out summary.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import adaptive_cycles as acyc  # noqa: E402


def _local(run: Path, path: str | None, sub: str) -> Path | None:
    """A path the GPU machine recorded, found in the unpacked export (same name under RUN/sub)."""
    if not path:
        return None
    p = Path(path)
    return p if p.exists() else run / sub / p.name


def read_run(run: Path) -> tuple[dict, dict]:
    """(cells by name with their per-steps cycles, plain step ms by batch size from a plain server's log)."""
    from sglang_patches.offline.advise_inputs import parse_baseline_log

    cells, plain_ms = {}, {}
    for f in sorted((run / "cells").glob("*.json")):
        cell = json.loads(f.read_text())
        entry = {"tok_s": cell["result"]["output_throughput"], "accept_length": cell["result"].get("accept_length"),
                 "num_prompts": cell["num_prompts"], "temperature": cell.get("temperature"),
                 "fixture_build": cell.get("fixture_build"), "server_cmd": cell.get("server_cmd"),
                 "client_cmd": cell.get("client_cmd"), "run": run.name,
                 "row": cell["row"], "set": cell["set"], "bs": cell["bs"]}
        log = _local(run, cell.get("timing_log"), "timing")
        if log is not None and log.exists():
            recs = acyc._in_window(cell, log.read_text(errors="replace").splitlines(), 1.0)
            entry["steps"] = acyc.cell_cycles(cell, recs)["steps"]
        if cell["row"] == "plain" and not plain_ms:
            server_log = _local(run, cell.get("server_log"), "logs")
            if server_log is not None and server_log.exists():
                plain_ms = {int(k): round(v, 4) for k, v in parse_baseline_log(str(server_log)).items()}
        cells[f.stem] = entry
    return cells, plain_ms


def summarize(runs: list[Path]) -> dict:
    cells, plain_ms = {}, {}
    for run in runs:
        c, p = read_run(run)
        clash = sorted(set(c) & set(cells))
        if clash:
            raise SystemExit(f"{run}: cells {', '.join(clash)} also in an earlier --run; give each cell once")
        cells.update(c)
        plain_ms = plain_ms or p
    out: dict = {"cells": cells, "plain_step_ms": plain_ms, "steps0_over_plain_step": {}, "steps1_over_steps0_cycle": {}}
    for name, c in sorted(cells.items()):
        row, pset, bs = c["row"], c["set"], c["bs"]
        plain = cells.get(f"plain_{pset}_bs{bs}")
        if row in ("zero", "default") and plain:
            out[f"{row}_vs_plain_{pset}_bs{bs}"] = round(c["tok_s"] / plain["tok_s"], 4)
        s0 = (c.get("steps") or {}).get("0")
        if row == "zero" and s0 and plain_ms.get(bs):
            out["steps0_over_plain_step"][f"{pset}_bs{bs}"] = round(s0["cycle_ms_p50"] / plain_ms[bs], 4)
        s1 = (c.get("steps") or {}).get("1")
        if row == "default" and s0 and s1:
            out["steps1_over_steps0_cycle"][f"{pset}_bs{bs}"] = round(s1["cycle_ms_p50"] / s0["cycle_ms_p50"], 4)
    out["fixture_builds"] = sorted({c.get("fixture_build") or "not recorded" for c in cells.values()})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="append", required=True, help="an unpacked adaptive_bench export (repeatable)")
    ap.add_argument("--out", required=True, help="summary JSON to write")
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure='sampled traffic: steps-0 cycle vs a plain step', folder='2026-12-05-adaptive-sampled',
                       duration='seconds, CPU only (reads adaptive_bench exports)')
    args = ap.parse_args(argv)
    if args.dry_run:
        return figure_cli.dry_run(out=args.out, reads=[f"{r}/cells/*.json" for r in args.run])
    from sglang_patches.errors import UserError

    runs = [Path(r) for r in args.run]
    for r in runs:
        if not (r / "cells").is_dir():
            print(f"--run {r}: no cells/ folder; unpack an export's run.tgz there", file=sys.stderr)
            return 2
    if not Path(args.out).resolve().parent.is_dir():
        print(f"--out {args.out}: folder {Path(args.out).parent} does not exist; create it first", file=sys.stderr)
        return 2
    try:
        s = summarize(runs)
    except (UserError, OSError, ValueError, KeyError) as exc:  # a broken cell or server log: one line
        print(f"adaptive_steps0: {exc}", file=sys.stderr)
        return 2
    s["command"] = " ".join(["python", "benchmarks/adaptive_steps0.py", *sum((["--run", str(r)] for r in runs), []),
                             "--out", args.out])
    Path(args.out).write_text(json.dumps(s, indent=1, sort_keys=True) + "\n")
    for k in sorted(s):
        if k.startswith(("zero_vs", "default_vs")) or k in ("steps0_over_plain_step", "steps1_over_steps0_cycle",
                                                             "plain_step_ms"):
            print(f"{k}: {s[k]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
