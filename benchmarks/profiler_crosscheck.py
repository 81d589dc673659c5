"""Phase timer vs torch.profiler on the GPU: do the cycle events agree with the
GPU kernel timeline over the same window (goal: within 10 %)?

Starts the drop-in server on a fixture with the timer on, keeps `--batch-size` long greedy requests
in flight (decode-only traffic), opens SGLang's torch-profiler window (/start_profile,
/stop_profile; GPU activities only) for `--seconds`, and compares the union of GPU activity in the
trace with the timer's cycle time over the same window (cycles selected by the trace's base time
when it has one, else the /spec_timing window between reset and read).

    python benchmarks/profiler_crosscheck.py --fixture llama3-8b --out OUT_DIR
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import threading
import time

from sglang_patches.offline.fixtures import ensure_fixture
from sglang_patches.offline.sweep.load import run_batch
from sglang_patches.httpjson import http_json
from sglang_patches.offline.sweep.server import Server
from sglang_patches.offline.trace_compare import compare, load_trace, timer_ms_in_window, trace_window_unix

from harness.files import run_meta  # benchmarks/, beside this script


def crosscheck(url: str, log: str, trace_dir: str, batch_size: int, seconds: float) -> dict:
    """On a running drop-in server with `--timing-log log`: one profiled window under decode load."""
    res: dict = {}
    run_batch(url, ["warm up"], batch_size, 64)
    load = threading.Thread(target=run_batch, args=(url, ["def f(x):\n    "], batch_size, 2048), daemon=True)
    load.start()
    time.sleep(2.0)  # past prefill: decode-only traffic from here
    http_json(url + "/spec_timing/reset", {})
    http_json(url + "/start_profile", {"output_dir": trace_dir, "activities": ["GPU"], "profile_id": "xcheck",
                                       "with_stack": False, "record_shapes": False})
    time.sleep(seconds)
    http_json(url + "/stop_profile", {}, timeout=300)
    st = http_json(url + "/spec_timing")["spec_timing"]
    load.join(timeout=300)
    time.sleep(2.0)
    traces = sorted(glob.glob(os.path.join(trace_dir, "**", "*.json*"), recursive=True))
    res["traces"] = traces
    res["spec_timing_window"] = compare(traces, st["cycles"]["decode"] * st["phases"]["cycle"]["mean"])
    windows = [w for w in (trace_window_unix(load_trace(t)) for t in traces) if w]
    if windows:
        with open(log) as fh:
            records = [json.loads(x) for x in fh if x.strip()]
        window = (min(w[0] for w in windows), max(w[1] for w in windows))
        ms, n = timer_ms_in_window(records, window)
        res["aligned_window"] = {**compare(traces, ms), "cycles": n, "window_s": window[1] - window[0]}
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixture", default="llama3-8b")
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--simulate-acc-len", type=float, default=3.3)
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure='timer vs torch.profiler cycle span (run by timing_overhead)', folder='2026-11-29-overhead-profile',
                       duration='about 3 min')
    args = ap.parse_args()
    if args.dry_run:
        return figure_cli.dry_run(out=args.out, servers=[f"python -m sglang_patches.launch --fixture {args.fixture} (simulated accept {args.simulate_acc_len})"], cases=[f"bs {args.batch_size}, {args.seconds} s profiler window"])
    os.makedirs(args.out, exist_ok=True)
    fx = ensure_fixture(args.fixture)
    log = os.path.join(args.out, "timing.jsonl")
    trace_dir = os.path.join(args.out, "torch")
    srv = Server(fx.cli_flags() + ["--attention-backend", "triton", "--sampling-backend", "pytorch",
                                   "--cuda-graph-max-bs-decode", str(args.batch_size), "--timing-log", log],
                 port=30041, log_path=os.path.join(args.out, "server.log"),
                 env={"SGLANG_SIMULATE_ACC_LEN": str(args.simulate_acc_len)})
    res = run_meta()
    try:
        srv.start().wait_ready(480)
        res.update(crosscheck(srv.url, log, trace_dir, args.batch_size, args.seconds))
    except Exception as exc:  # noqa: BLE001
        res["error"] = repr(exc)[:2000]
        print(srv.log_tail(40), file=sys.stderr)
    finally:
        srv.stop()
        with open(os.path.join(args.out, "profiler_crosscheck.json"), "w") as fh:
            json.dump(res, fh, indent=1, default=str)
    for key in ("aligned_window", "spec_timing_window"):
        r = res.get(key)
        if r:
            print(f"| {key} | busy {r.get('busy_ms', 0):.1f} ms | timer {r.get('timer_ms', 0):.1f} ms | "
                  f"busy/timer {r.get('busy_over_timer')} | ok {r.get('ok')} |")
    return 1 if "error" in res else 0


if __name__ == "__main__":
    raise SystemExit(main())
