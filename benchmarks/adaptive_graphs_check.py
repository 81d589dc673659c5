"""Where does a swapped-in adaptive state lose time? Three servers side by side on one GPU, batch 1,
the same flags otherwise:

  fixed_s4          --speculative-num-steps 4 (draft tokens 5): the chain's own graphs
  adaptive          --speculative-adaptive, config {1: [4], 8: [5]}, started at 5: batch 1 runs steps 4
                    on the runtime state SGLang builds for that candidate (in 0.5.17 its draft-extend
                    graphs are captured at the start's width)
                    (--patches all,-adaptive_graphs: the launcher would add the feature)
  adaptive_graphs   the same with --patches all,adaptive_graphs (sglang_patches.server.patches.adaptive_graphs)

Per server: greedy /generate at batch 1 (sglang_patches.offline.sweep.load.run_batch, ignore_eos,
--max-new-tokens) after POST /spec_timing/reset, then GET /spec_timing's steps-4 window: draft /
verify / extend / cycle GPU ms (p50, mean) from the overlay's CUDA events, the steps-4 share of the
window's cycles, and the applied hooks. GPU ms only: whether a graph replays is not seen directly (an
eager draft-extend shows as its GPU time, launch gaps included). A server without a steps-4 window is
recorded as such, not as measured.

    python benchmarks/adaptive_graphs_check.py --out /tmp/ag --export $OUT --fixture llama3-8b --deadline 540

Writes OUT/adaptive_graphs_check.json after every server (and copies it to --export), a table last.
"""
from __future__ import annotations

import argparse
import datetime
import json
import shutil
import sys
import time
from pathlib import Path

T0 = time.time()
CONFIG = {"1": {"candidate_steps": [4], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
          "8": {"candidate_steps": [5], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0}}
CASES = ("fixed_s4", "adaptive", "adaptive_graphs")
COMMON = ["--attention-backend", "triton", "--sampling-backend", "pytorch", "--mem-fraction-static", "0.6",
          "--speculative-eagle-topk", "1", "--cuda-graph-bs-decode", "1", "8", "--log-level", "info"]
START_S, MEASURE_S = 100, 25  # a warm H200 started these servers in 70-75 s, the first of a fresh one in 118 s


def log(msg: str) -> None:
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def case_flags(case: str, cfg_path: Path) -> list[str]:
    if case == "fixed_s4":
        return ["--speculative-num-steps", "4", "--speculative-num-draft-tokens", "5"]
    flags = ["--speculative-num-steps", "5", "--speculative-num-draft-tokens", "6", "--speculative-adaptive",
             "--speculative-adaptive-config", str(cfg_path)]
    # the launcher adds adaptive_graphs to all under --speculative-adaptive: the stock case opts out
    return flags + ["--patches", "all,adaptive_graphs" if case == "adaptive_graphs" else "all,-adaptive_graphs"]


def summary_of(answer: dict | None) -> dict:
    """The overlay's summary inside a GET /spec_timing answer (endpoint.collect_from_states)."""
    return (answer or {}).get("spec_timing") or {}


def window(st: dict, steps: int) -> dict:
    """One steps value's figures from that summary (its by_steps entry, a WindowStats summary)."""
    w = (st.get("by_steps") or {}).get(str(steps)) or {}
    ph = w.get("phases") or {}
    row = {f"{p}_ms_{k}": (ph.get(p) or {}).get(k) for p in ("draft", "verify", "extend", "cycle") for k in ("p50", "mean")}
    counted = (w.get("cycles") or {}).get("counted") or 0
    total = (st.get("cycles") or {}).get("counted") or 0
    return {**row, "cycles": counted, "share_of_window": counted / total if total else None,
            "accept_length": w.get("accept_length")}


def run_case(args, case: str, fx, port: int, cfg_path: Path) -> dict:
    from sglang_patches.httpjson import http_json
    from sglang_patches.offline.sweep.load import run_batch
    from sglang_patches.offline.sweep.prompts import EVAL_PROMPTS, load_prompts
    from sglang_patches.offline.sweep.server import Server

    srv = Server(fx.model_flags() + case_flags(case, cfg_path) + COMMON, port=port, log_path=str(Path(args.out) / f"{case}.log"))
    rec = {"case": case, "server_cmd": " ".join(srv.cmd), "error": None,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    try:
        srv.start().wait_ready(max(30.0, min(240.0, args.deadline - (time.time() - T0) - MEASURE_S)))
        rec["startup_s"] = round(srv.started_s, 1)
        log(f"{case}: up in {srv.started_s:.0f} s")
        texts = load_prompts(EVAL_PROMPTS)
        run_batch(srv.url, texts, 1, 32, num_requests=2)  # warm-up (the adaptive slot settles on steps 4)
        http_json(srv.url + "/spec_timing/reset", {}, timeout=30)
        r = run_batch(srv.url, texts, 1, args.max_new_tokens, num_requests=args.requests, offset=2)
        st = summary_of(http_json(srv.url + "/spec_timing", method="GET", timeout=30))
        info = http_json(srv.url + "/server_info", method="GET", timeout=30) or {}
        hooks = ((info.get("internal_states") or [{}])[0].get("sglang_patches") or {}).get("applied") or []
        by_steps = {k: (v.get("cycles") or {}).get("counted") for k, v in (st.get("by_steps") or {}).items()}
        rec.update(steps4=window(st, 4), by_steps_cycles=by_steps, tok_s=r["tok_s"], requests=args.requests,
                   max_new_tokens=args.max_new_tokens,
                   adaptive_graphs_hooks=[h for h in map(str, hooks) if "adaptive_graphs" in h],
                   records_steps_match_fraction=(st.get("recorder") or {}).get("records_steps_match_fraction"))
        log(f"{case}: steps-4 extend p50 {rec['steps4']['extend_ms_p50']} ms, cycle p50 {rec['steps4']['cycle_ms_p50']} ms")
    except Exception as exc:  # noqa: BLE001 - recorded; the other servers still run
        rec["error"] = f"{type(exc).__name__}: {str(exc)[-800:]}"
        log(f"{case}: {rec['error'][:300]}")
    finally:
        srv.stop()
    text = (Path(args.out) / f"{case}.log").read_text(errors="replace") if (Path(args.out) / f"{case}.log").exists() else ""
    rec["adaptive_log_lines"] = [ln.strip()[:300] for ln in text.splitlines() if "adaptive" in ln.lower()][:8]
    if rec["error"]:
        rec["log_tail"] = text.splitlines()[-25:]
    return rec


def main(argv=None) -> int:
    from sglang_patches.cliargs import OneLineParser, finite_float, positive_int

    ap = OneLineParser(prog="adaptive_graphs_check", description=__doc__.split("\n\n")[0] + "\n\n"
                       + __doc__.split("\n\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter,
                       allow_abbrev=False)
    ap.add_argument("--out", required=True, help="working folder (server logs, the config, the result JSON)")
    ap.add_argument("--export", default=None, help="copy the result JSON here after every server")
    ap.add_argument("--fixture", default="llama3-8b", help="model fixture (default: %(default)s, dummy weights)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma list of " + ", ".join(CASES))
    ap.add_argument("--requests", type=positive_int, default=6, help="measured requests per server (default 6)")
    ap.add_argument("--max-new-tokens", type=positive_int, default=256)
    ap.add_argument("--deadline", type=finite_float, default=540.0, help="seconds from start; no server starts past it")
    ap.add_argument("--port", type=positive_int, default=30081)
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure='the adaptive_graphs rows', folder='2026-12-03-adaptive-graphs',
                       duration='about 10 min (--deadline 540 s; three servers)')
    args = ap.parse_args(argv)
    if args.dry_run:
        return figure_cli.dry_run(out=args.out, servers=[f"{c}: python -m sglang_patches.launch --fixture {args.fixture} --port {args.port}" for c in args.cases.split(",") if c], cases=[f"{args.requests} requests x {args.max_new_tokens} tokens per server"])
    cases = [c for c in args.cases.split(",") if c]
    bad = [c for c in cases if c not in CASES]
    if bad or not cases:
        ap.error(f"--cases: unknown {bad or args.cases!r}; choose from {', '.join(CASES)}")
    from sglang_patches.offline.fixtures import base_build_id, ensure_fixture
    from harness.files import run_meta  # benchmarks/, beside this script

    built = time.time()
    fx = ensure_fixture(args.fixture)  # an unknown name: UserError, before anything is written
    build = {"build_id": base_build_id(fx.root), "ready_s": round(time.time() - built, 1)}
    log(f"fixture {args.fixture}: build {build['build_id']}, ready in {build['ready_s']:.0f} s")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg_path = out / "adaptive_config.json"
    cfg_path.write_text(json.dumps(CONFIG, indent=1))
    run = {**run_meta(), "fixture": args.fixture,
           "fixture_build": build, "adaptive_config": CONFIG, "cases": {}, "outcomes": {}}
    res_file = out / "adaptive_graphs_check.json"

    def save() -> None:  # after every server and every skip, so a killed run keeps what finished
        res_file.write_text(json.dumps(run, indent=1))
        if args.export:
            Path(args.export).mkdir(parents=True, exist_ok=True)
            shutil.copy(res_file, Path(args.export) / res_file.name)

    for i, case in enumerate(cases):
        left = args.deadline - (time.time() - T0)
        if left < START_S + MEASURE_S:
            run["outcomes"][case] = f"not started: {left:.0f} s left before --deadline, needs ~{START_S + MEASURE_S} s"
        else:
            rec = run["cases"][case] = run_case(args, case, fx, args.port + i, cfg_path)
            run["outcomes"][case] = ("error" if rec["error"] else "measured" if (rec.get("steps4") or {}).get("cycles")
                                     else "no steps-4 window in /spec_timing")
        save()
    print(f"{'case':18} {'share':>6} {'draft':>7} {'verify':>7} {'extend':>7} {'cycle':>7} {'tok/s':>7}  (steps 4, ms p50)")
    for case, rec in run["cases"].items():
        w = rec.get("steps4") or {}
        f = lambda v: f"{v:7.3f}" if isinstance(v, (int, float)) else f"{'-':>7}"  # noqa: E731
        print(f"{case:18} {f(w.get('share_of_window'))[1:]} {f(w.get('draft_ms_p50'))} {f(w.get('verify_ms_p50'))} "
              f"{f(w.get('extend_ms_p50'))} {f(w.get('cycle_ms_p50'))} {f(rec.get('tok_s'))}")
    for case, why in run["outcomes"].items():
        if why != "measured":
            print(f"{case}: {why}")
    return 0 if any(why == "measured" for why in run["outcomes"].values()) else 1  # nothing measured: a failure


def cli() -> int:
    from sglang_patches.errors import UserError

    try:
        return main()
    except UserError as exc:  # bad flags or fixture: one line, exit 2
        text = str(exc)
        print(text if text.startswith("adaptive_graphs_check") else f"adaptive_graphs_check: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(cli())
