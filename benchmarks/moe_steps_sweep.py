"""The steps sweep on the MoE fixture under simulated per-position acceptance.

    python benchmarks/moe_steps_sweep.py sweep --profile strong --out DIR     # GPU: one sweep
    python benchmarks/moe_steps_sweep.py rates --profile strong --out DIR     # GPU: the rate check
    python benchmarks/moe_steps_sweep.py summarize --runs DIR [DIR...] --out RESULTS [--verify-cost VC]

Profiles (conditional per-position rates, position k accepted given 0..k-1 were; expected accept
length at steps 3 / topk 1 / 4 draft tokens in brackets):
  strong  0.91,0.86,0.80,0.75,0.70   (3.32: the published Kimi-K2 EAGLE-3 head's ~3.3)
  weak    0.52,0.42,0.35,0.30,0.25   (1.81: ~1.8)
Both decay with position, as real acceptance does; a configuration with S steps uses the first S.

sweep: `sglang-patches sweep` (one drop-in server per configuration, the same prompts for every
  configuration, tok/s as the median of --repeats, phase split from /spec_timing) on qwen3-moe-shape,
  steps 1,2,3,5 at topk 1 (draft tokens = steps + 1) and the no-speculation baseline, batch 1 and 8,
  with --simulate-acceptance PROFILE, prefill CUDA graphs off (start time). Output DIR/sweep-PROFILE/
  (results.jsonl, summary.md, timing/). Rerunning continues a cut sweep (--resume).
rates: one server (qwen3-moe-shape, steps 5, topk 1, CUDA graphs; the overlap scheduler unless
  --no-overlap) with --simulate-acceptance PROFILE and a --timing-log; closed batches of --batch-size
  requests until the log holds >= 2,000 request-cycles and every position was reached often enough
  that its binomial standard error is <= --target-se (default 0.005, a quarter of the +-0.02
  tolerance: a correct sampler then fails the check with negligible probability), or --max-seconds
  passed; realised conditional rate k = #(accepted > k) / #(accepted > k-1) against the
  requested one. Output DIR/rates-PROFILE.json (max_abs_error, per position: requested, realised,
  request-cycles that reached it, standard error).
summarize (CPU, benchmarks/moe_summary.py): from the runs' folders write RESULTS/summary.json: rate_max_abs_error,
  best_config_strong_bs1 / best_config_weak_bs1 (with speedup over the baseline), every
  configuration's tok/s, speedup, accept length and verify share per profile and batch size, whether
  the verify-bound pattern appears (fewer steps better; verify dominating), and verify_over_step_moe /
  verify_over_step_dense from benchmarks/verify_cost.py folders (--verify-cost: one, or one per
  fixture). null = not run.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
for p in (REPO, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

from sglang_patches.errors import UserError, exit_with  # noqa: E402
from sglang_patches.offline.sweep.results import write_text_atomic  # noqa: E402

from moe_summary import (  # noqa: E402,F401  (re-exported: tests and callers use mss.*)
    BATCH_SIZES, FIXTURE, PATTERN_VERIFY_SHARE, PROFILES, STEPS, TARGET_ACCEPT_3_1_4, TOLERANCE, MIN_REQUEST_CYCLES,
    VERIFY_TABLES, best_config, format_summary, merge_cells, verify_bound_pattern, summarize, sweep_table, update_summary,
)


# ---------------------------------------------------------------- pure parts (tested on CPU)

def profile_rates(name: str) -> list[float]:
    if name not in PROFILES:
        raise UserError(f"--profile {name!r}: choose one of {', '.join(PROFILES)}")
    return list(PROFILES[name])


def sweep_command(profile: str, out: str, *, batch_sizes=BATCH_SIZES, steps=STEPS, max_new_tokens: int = 128,
                  repeats: int = 3, resume: bool = False) -> list[str]:
    rates = ",".join(str(r) for r in profile_rates(profile))
    cmd = [sys.executable, "-m", "sglang_patches", "sweep", "--fixture", FIXTURE,
           "--steps", ",".join(map(str, steps)), "--topk", "1", "--batch-sizes", ",".join(map(str, batch_sizes)),
           "--simulate-acceptance", rates, "--max-new-tokens", str(max_new_tokens), "--repeats", str(repeats),
           "--extra-server-args=--disable-prefill-cuda-graph", "--out", out]
    return cmd + (["--resume"] if resume else [])


def rate_check_flags(paths, rates: list[float], steps: int, batch_size: int, timing_log: str,
                     overlap: bool = True) -> list[str]:
    return ([] if overlap else ["--disable-overlap-schedule"]) + ["--model-path", str(paths.target), "--load-format", paths.load_format,
            "--speculative-algorithm", paths.algorithm, "--speculative-draft-model-path", str(paths.draft),
            "--speculative-draft-load-format", paths.load_format, "--speculative-num-steps", str(steps),
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(steps + 1),
            "--attention-backend", "triton", "--sampling-backend", "pytorch", "--disable-prefill-cuda-graph",
            "--cuda-graph-bs-decode", "1", str(batch_size), "--max-running-requests", str(batch_size),
            "--max-total-tokens", str(batch_size * 1024), "--timing-log", timing_log,
            "--simulate-acceptance", ",".join(str(r) for r in rates[:steps])]


def realised_rates(records: list[dict], requested: list[float]) -> dict:
    """Compare the conditional per-position rates realised in timing records with the requested ones."""
    from sglang_patches.vocab.rates import conditional_rates

    accepted = [a for r in records if r.get("kind") == "decode" for a in r.get("accepted", [])]
    rates, reached = conditional_rates(accepted, len(requested))
    positions = []
    for k, (want, have, n) in enumerate(zip(requested, rates, reached)):
        se = math.sqrt(want * (1 - want) / n) if n else None
        positions.append({"position": k, "requested": want, "realised": have, "reached": n,
                          "abs_error": None if have is None else abs(have - want), "standard_error": se})
    errors = [p["abs_error"] for p in positions if p["abs_error"] is not None]
    simulated = all(r.get("simulated") for r in records if r.get("kind") == "decode")
    return {"request_cycles": len(accepted), "positions": positions,
            "max_abs_error": max(errors) if len(errors) == len(requested) else None,
            "within_tolerance": (bool(errors) and len(errors) == len(requested) and max(errors) <= TOLERANCE
                                 and len(accepted) >= MIN_REQUEST_CYCLES),
            "tolerance": TOLERANCE, "every_record_flagged_simulated": simulated}


def enough_samples(check: dict, target_se: float) -> bool:
    """True when the check has >= MIN_REQUEST_CYCLES and every position's standard error <= target_se."""
    return (check["request_cycles"] >= MIN_REQUEST_CYCLES
            and all(p["standard_error"] is not None and p["standard_error"] <= target_se for p in check["positions"]))


def run_sweep(args) -> int:
    out = os.path.join(args.out, f"sweep-{args.profile}")
    resume = os.path.isfile(os.path.join(out, "results.jsonl"))
    cmd = sweep_command(args.profile, out, max_new_tokens=args.max_new_tokens, repeats=args.repeats, resume=resume)
    print("moe_steps_sweep: " + shlex.join(cmd), flush=True)
    return subprocess.call(cmd, cwd=REPO)


def _read_log(path: str) -> list[dict]:
    out = []
    if os.path.exists(path):
        with open(path) as fh:
            for ln in fh:
                try:
                    out.append(json.loads(ln))
                except ValueError:
                    pass
    return out


def run_rates(args) -> int:
    from verify_cost import _prompt_ids, run_closed_batch

    from sglang_patches.offline.fixtures import ensure_fixture
    from sglang_patches.offline.sweep.server import Server

    rates = profile_rates(args.profile)[:args.steps]
    os.makedirs(args.out, exist_ok=True)
    log = os.path.join(args.out, f"rates-{args.profile}.cycles.jsonl")
    if os.path.exists(log):
        raise UserError(f"{log} exists; give a new --out (a rate check starts from an empty timing log)")
    flags = rate_check_flags(ensure_fixture(FIXTURE), rates, args.steps, args.batch_size, log,
                             overlap=not args.no_overlap)
    srv = Server(flags, port=args.port, log_path=os.path.join(args.out, f"rates-{args.profile}.server.log"))
    t0 = time.time()
    try:
        srv.start().wait_ready(timeout=300)
        print(f"moe_steps_sweep: rate check server up in {srv.started_s:.0f} s", flush=True)
        wave = 0
        while time.time() - t0 < args.max_seconds:
            run_closed_batch(srv.url, _prompt_ids(args.batch_size, 256, seed=100 + wave), args.max_new_tokens)
            wave += 1
            time.sleep(1.2)  # the JSONL sink flushes every second
            check = realised_rates(_read_log(log), rates)
            worst = max((p["standard_error"] or float("inf")) for p in check["positions"])
            print(f"moe_steps_sweep: wave {wave}: {check['request_cycles']} request-cycles, largest standard "
                  f"error {worst:.4f}", flush=True)
            if enough_samples(check, args.target_se):
                break
    finally:
        srv.stop()
    result = realised_rates(_read_log(log), rates)
    result.update(profile=args.profile, steps=args.steps, batch_size=args.batch_size,
                  overlap_scheduler=not args.no_overlap, cuda_graphs=True,
                  command="python " + shlex.join(sys.argv), server_flags=flags, seconds=time.time() - t0)
    with open(os.path.join(args.out, f"rates-{args.profile}.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    for p in result["positions"]:
        print(f"  position {p['position']}: requested {p['requested']:.3f} realised "
              f"{p['realised'] if p['realised'] is None else round(p['realised'], 4)} over {p['reached']}")
    print(f"moe_steps_sweep: rate check {args.profile}: {result['request_cycles']} request-cycles, max abs error "
          f"{result['max_abs_error']}, within {TOLERANCE}: {result['within_tolerance']}")
    return 0 if result["within_tolerance"] else 1


def run_summarize(args) -> int:
    for d in args.runs:
        if not os.path.isdir(d):
            raise UserError(f"--runs {d}: no such directory")
    if os.path.realpath(args.out) in {os.path.realpath(d) for d in args.verify_cost or []}:   # links too
        raise UserError(f"--out {args.out} is a --verify-cost folder: its summary.json is an input; choose another --out")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UserError(f"--out {args.out} exists and is not a folder; choose a folder")
    s = summarize(args.runs, args.verify_cost)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "summary.json")
    if os.path.exists(path) and not (args.force or args.update):
        raise UserError(f"{path} exists; pass --update to fold the new results into it, --force to replace it, "
                        f"or choose another --out")
    if os.path.exists(path) and args.update:
        try:
            with open(path) as fh:
                old = json.load(fh)
        except (OSError, ValueError, RecursionError) as exc:
            raise UserError(f"{path} is not readable JSON ({str(exc)[:120]}); use --force to replace it") from None
        if not isinstance(old, dict):
            raise UserError(f"{path} holds a JSON {type(old).__name__}, not a summary object; use --force to replace it")
        s = update_summary(old, s)
    write_text_atomic(Path(path), json.dumps(s, indent=1))   # never half a file; a one-line error if it cannot
    print(format_summary(s))
    print(f"moe_steps_sweep: wrote {path}")
    return 0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="part", required=True)
    s = sub.add_parser("sweep", help="GPU: the steps sweep under one acceptance profile")
    s.add_argument("--profile", required=True, choices=list(PROFILES))
    s.add_argument("--out", required=True, metavar="DIR")
    s.add_argument("--max-new-tokens", type=int, default=128)
    s.add_argument("--repeats", type=int, default=3)
    r = sub.add_parser("rates", help="GPU: realised vs requested per-position rates")
    r.add_argument("--profile", default="strong", choices=list(PROFILES))
    r.add_argument("--out", required=True, metavar="DIR")
    r.add_argument("--steps", type=int, default=5, choices=range(1, len(PROFILES["strong"]) + 1), metavar="S")
    r.add_argument("--batch-size", type=int, default=64)
    r.add_argument("--max-new-tokens", type=int, default=256)
    r.add_argument("--target-se", type=float, default=TOLERANCE / 4,
                   help="keep sending batches until every position's standard error is at most this "
                        "(default: %(default)s) and >= 2000 request-cycles are logged")
    r.add_argument("--max-seconds", type=float, default=240.0)
    r.add_argument("--no-overlap", action="store_true",
                   help="serve with --disable-overlap-schedule (the check then covers both scheduler modes "
                        "when run once with and once without)")
    r.add_argument("--port", type=int, default=31500)
    m = sub.add_parser("summarize", help="CPU: summary.json from the runs' folders")
    m.add_argument("--runs", nargs="+", required=True, metavar="DIR")
    m.add_argument("--out", required=True, metavar="RESULTS_DIR")
    m.add_argument("--verify-cost", metavar="DIR", nargs="+", default=None,
                   help="benchmarks/verify_cost.py --out folder(s): one, or one per fixture")
    m.add_argument("--force", action="store_true", help="replace an existing RESULTS_DIR/summary.json")
    m.add_argument("--update", action="store_true",
                   help="fold the new results into an existing RESULTS_DIR/summary.json (its notes and earlier "
                        "measurements stay unless measured again)")
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(p, figure="the steps sweep on the MoE fixture (qwen3-moe-shape; rates)", folder="2026-12-01-moe",
                       duration="about 10 min per profile (sweep); rates about 5 min; summarize seconds (CPU)")
    args = p.parse_args(argv)
    if args.part == "rates" and not 0 < args.target_se <= TOLERANCE:
        raise UserError(f"--target-se {args.target_se}: must be in (0, {TOLERANCE}] (the check's tolerance)")
    return args


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
        if args.dry_run:
            import figure_cli  # benchmarks/, beside this script
            runs = {"sweep": lambda: [sweep_command(args.profile, os.path.join(args.out, f"sweep-{args.profile}"),
                                                    max_new_tokens=args.max_new_tokens, repeats=args.repeats)],
                    "rates": lambda: [f"rates: profile {args.profile}, steps {args.steps}, bs {args.batch_size}, "
                                      f"port {args.port}"],
                    "summarize": lambda: [f"summarize: {', '.join(args.runs)}"]}
            return figure_cli.dry_run(out=args.out, servers=runs[args.part]())
        return {"sweep": run_sweep, "rates": run_rates, "summarize": run_summarize}[args.part](args)
    except UserError as err:
        exit_with(err, "moe_steps_sweep")


if __name__ == "__main__":
    raise SystemExit(main())
