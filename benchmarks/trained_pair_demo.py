"""Trained fixture + the EAGLE-vs-EAGLE3 demonstration on the GPU.

1. Build the `trained` fixture (tokenizer, small Llama target, EAGLE-3 drafter) from a seed.
2. Baseline: the target alone (no speculation), greedy, batch 1, held-out prompts.
3. (d) Overlay + EAGLE3: accept length, per-position acceptance, tok/s.
4. (a) Stock SGLang with --speculative-algorithm EAGLE on the same EAGLE-3 drafter: it runs, no error.
5. (b) Overlay with EAGLE: refused by preflight before anything is spawned.
6. (c) Overlay with EAGLE and --skip-preflight: the in-server load-time check stops it.

    python benchmarks/trained_pair_demo.py --out OUT_DIR [--max-seconds 400] [--cases baseline,eagle3_overlay]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from sglang_patches.offline.fixtures import build_fixture, ensure_fixture
from sglang_patches.offline.sweep.load import generate
from sglang_patches.httpjson import http_json
from sglang_patches.offline.sweep.server import Server
from sglang_patches.offline.sweep.prompts import EVAL_PROMPTS, load_prompts

from harness.files import run_meta  # benchmarks/, beside this script

COMMON = ["--attention-backend", "triton", "--sampling-backend", "pytorch", "--cuda-graph-max-bs-decode", "4",
          "--mem-fraction-static", "0.5", "--log-level", "info"]


def eval_prompts(n: int) -> list[str]:
    return load_prompts(EVAL_PROMPTS)[:n]


def measure(url: str, prompts: list[str], max_new_tokens: int) -> dict:
    generate(url, prompts[0], 16)  # warm-up
    t0 = time.perf_counter()
    rows = [generate(url, p, max_new_tokens) for p in prompts]
    wall = time.perf_counter() - t0
    tokens = sum(r["completion_tokens"] for r in rows)
    verify = sum(r["spec_verify_ct"] or 0 for r in rows)
    return {"requests": len(rows), "output_tokens": tokens, "wall_s": wall, "tok_s": tokens / wall,
            "accept_length": tokens / verify if verify else None}


def run_server(name, args, overlay, out, prompts, max_new_tokens, results, port=30021):
    srv = Server(args, port=port, log_path=os.path.join(out, f"server_{name}.log"), overlay=overlay)
    timed = overlay and "--patches" not in args  # the baseline runs the launcher with --patches none
    try:
        srv.start().wait_ready(400)
        if timed:
            http_json(srv.url + "/spec_timing/reset", {})
        results[name] = measure(srv.url, prompts, max_new_tokens)
        results[name]["startup_s"] = srv.started_s
        if timed:
            body = http_json(srv.url + "/spec_timing")
            st = body.get("spec_timing") or {}
            results[name]["timer"] = {k: st.get(k) for k in ("accept_length", "pos_rates", "phases", "cycles")}
    except Exception as exc:  # noqa: BLE001 - record and continue
        results[name] = {"error": repr(exc)[:2000]}
    finally:
        srv.stop()
    print(name, json.dumps({k: v for k, v in results[name].items() if k != "timer"}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--fixture-dir", default=None, help="build the fixture here, from scratch (default: reuse the "
                    "cached one, `sglang-patches fixtures` cache, or build it there)")
    ap.add_argument("--train-overrides", default=None, metavar="JSON",
                    help="trainer overrides (offline/fixtures/trained.py DEFAULTS keys) for an experiment; builds into "
                         "--fixture-dir (required then), never into the cache")
    ap.add_argument("--port", type=int, default=30021, help="server port (the load-time check uses PORT+1)")
    ap.add_argument("--cases", default="baseline,eagle3_overlay,eagle_stock,preflight,loadcheck",
                    help="which cases to run (default: all): baseline, eagle3_overlay, eagle_stock, preflight, loadcheck")
    ap.add_argument("--max-seconds", type=float, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prompts", type=int, default=24)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure="the trained fixture's served accept length", folder=('2026-11-29-trained-pair-accept', '2026-11-29-trained-pair-demo'),
                       duration='about 7 min (the build ~210 s, then the cases)')
    args = ap.parse_args()
    if args.dry_run:
        return figure_cli.dry_run(out=args.out, servers=[f"{c}: python -m sglang_patches.launch --fixture trained --port {args.port}" for c in args.cases.split(",") if c], cases=[f"{args.prompts} prompts x {args.max_new_tokens} tokens"])
    os.makedirs(args.out, exist_ok=True)
    cases = {c.strip() for c in args.cases.split(",") if c.strip()}
    res = run_meta()
    t0 = time.time()
    overrides = json.loads(args.train_overrides) if args.train_overrides else None
    if overrides and not args.fixture_dir:
        ap.error("--train-overrides needs --fixture-dir (an experiment never replaces the cached fixture)")
    res["train_overrides"] = overrides
    if args.fixture_dir:
        fx = build_fixture("trained", args.fixture_dir, force=True, seed=args.seed, max_seconds=args.max_seconds,
                           train_overrides=overrides)
    else:  # the cached fixture when it is there (another job may have built it), else built into the cache
        fx = ensure_fixture("trained", seed=args.seed, max_seconds=args.max_seconds)
    fx_dir = str(fx.root)
    res["fixture_dir"] = fx_dir
    with open(os.path.join(fx_dir, "fixture.json")) as fh:
        res["build_s"] = json.load(fh).get("build_seconds")  # the build's own time, also when reused
    with open(os.path.join(fx_dir, "train_report.json")) as fh:
        res["train_report"] = json.load(fh)
    print("fixture", fx_dir, "built in", res["build_s"], "s", flush=True)
    prompts = eval_prompts(args.prompts)
    model = ["--model-path", str(fx.target)]
    spec = ["--speculative-draft-model-path", str(fx.draft), "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    results: dict = {}
    if "baseline" in cases:
        run_server("baseline", model + COMMON + ["--patches", "none"], True, args.out, prompts, args.max_new_tokens, results, args.port)
    if "eagle3_overlay" in cases:
        run_server("eagle3_overlay", model + spec + ["--speculative-algorithm", "EAGLE3"] + COMMON, True, args.out,
                   prompts, args.max_new_tokens, results, args.port)
    if "eagle_stock" in cases:
        run_server("eagle_stock", model + spec + ["--speculative-algorithm", "EAGLE"] + COMMON, False, args.out,
                   prompts, args.max_new_tokens, results, args.port)
    if "preflight" in cases:
        preflight_case(model, spec, results)
    if "loadcheck" in cases:
        loadcheck_case(model, spec, args.out, results, args.port + 1)
    res["results"] = results
    res["wall_s"] = time.time() - t0
    with open(os.path.join(args.out, "trained_pair_demo.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    print("| case | tok/s | accept length |")
    for name in ("baseline", "eagle3_overlay", "eagle_stock"):
        if name in results:
            r = results[name]
            print(f"| {name} | {r.get('tok_s', float('nan')):.1f} | {r.get('accept_length')} |")
    for name in ("eagle_overlay_preflight", "eagle_overlay_loadcheck"):
        if name in results:
            print(f"| {name} | exit {results[name]['exit_code']} | {results[name]['seconds']:.2f} s |")
    return 0


def preflight_case(model, spec, results):
    # (b) preflight refusal: nothing is spawned.
    t1 = time.time()
    proc = subprocess.run([sys.executable, "-m", "sglang_patches.launch", *model, *spec,
                           "--speculative-algorithm", "EAGLE", *COMMON], capture_output=True, text=True, timeout=120)
    results["eagle_overlay_preflight"] = {"exit_code": proc.returncode, "seconds": time.time() - t1,
                                          "stderr": proc.stderr[-1500:]}


def loadcheck_case(model, spec, out, results, port=30022):
    # (c) past preflight: the load-time check must stop the server.
    srv = Server(model + spec + ["--speculative-algorithm", "EAGLE", "--skip-preflight"] + COMMON, port=port,
                 log_path=os.path.join(out, "server_eagle_loadcheck.log"))
    t2 = time.time()
    srv.start()
    code = srv.wait_exit(300)
    srv.stop()
    with open(srv.log_path, errors="replace") as fh:
        lines = [ln.strip() for ln in fh if "HIDDEN-STATE MISMATCH" in ln]
    results["eagle_overlay_loadcheck"] = {"exit_code": code, "seconds": time.time() - t2,
                                          "mismatch_lines": lines[:3]}

if __name__ == "__main__":
    raise SystemExit(main())
