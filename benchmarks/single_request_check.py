"""One request, one server: timing records vs SGLang's own spec_verify_ct (GPU check).

For each scheduler mode (overlap on, then off) start the drop-in server on a fixture with the timer
on, send one greedy request and compare: decode records with live requests (== SGLang's
spec_verify_ct), stale records (cycles launched after the request finished), phase sums.

    python benchmarks/single_request_check.py --fixture llama3-1b --out OUT_DIR
"""
from __future__ import annotations

import argparse
import json
import os
import time

from sglang_patches.offline.fixtures import ensure_fixture
from sglang_patches.offline.sweep.load import generate
from sglang_patches.offline.sweep.server import Server

from harness.files import run_meta  # benchmarks/, beside this script


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixture", default="llama3-1b")
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure='records vs spec_verify_ct after the compat refactor', folder='2026-12-01-compat-refactor-check',
                       duration='about 3 min')
    args = ap.parse_args()
    if args.dry_run:
        return figure_cli.dry_run(out=args.out, servers=[f"python -m sglang_patches.launch --fixture {args.fixture}"], cases=[f"one request, {args.max_new_tokens} tokens"])
    os.makedirs(args.out, exist_ok=True)
    fx = ensure_fixture(args.fixture)
    res = {**run_meta(), "fixture": args.fixture, "modes": {}}
    for mode, extra in (("overlap", []), ("no_overlap", ["--disable-overlap-schedule"])):
        log = os.path.join(args.out, f"timing_{mode}.jsonl")
        srv = Server(fx.cli_flags() + ["--attention-backend", "triton", "--sampling-backend", "pytorch",
                                       "--cuda-graph-max-bs-decode", "2", "--disable-prefill-cuda-graph",
                                       "--timing-log", log, *extra], port=30031,
                     log_path=os.path.join(args.out, f"server_{mode}.log"))
        try:
            srv.start().wait_ready(300)
            time.sleep(1.5)
            before = sum(1 for _ in open(log)) if os.path.exists(log) else 0
            out = generate(srv.url, "def fibonacci(n):\n    ", args.max_new_tokens)
            time.sleep(2.5)
            recs = [json.loads(x) for x in open(log)][before:]
            dec = [r for r in recs if r["kind"] == "decode"]
            live = [r for r in dec if r["accepted"]]
            ratios = [(r["draft_ms"] + r["verify_ms"] + r["extend_ms"]) / r["cycle_ms"] for r in dec]
            res["modes"][mode] = {
                "spec_verify_ct": out["spec_verify_ct"], "decode_records": len(dec), "live_records": len(live),
                "stale_records": sum(1 for r in dec if r.get("stale")), "match": len(live) == out["spec_verify_ct"],
                "phase_sum_over_cycle_min": min(ratios), "phase_sum_over_cycle_max": max(ratios),
                "gpu_gap_ms_median": sorted(r["gpu_gap_ms"] for r in dec if r.get("gpu_gap_ms") is not None)[len(dec) // 2]
                if dec else None,
                "startup_s": srv.started_s}
        except Exception as exc:  # noqa: BLE001
            res["modes"][mode] = {"error": repr(exc)[:1500]}
        finally:
            srv.stop()
        print(mode, json.dumps(res["modes"][mode]), flush=True)
        with open(os.path.join(args.out, "single_request_check.json"), "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
