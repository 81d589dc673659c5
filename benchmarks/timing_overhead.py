"""GPU smoke test + phase-timer overhead and consistency benchmark.

Starts two drop-in servers on the same GPU from one fixture: ON (all overlay features, timing log,
metrics) and OFF (`--patches none`: SGLang with nothing patched). Then:

1. smoke: the patched scheduler reports itself through /server_info; the OpenAI API answers; one
   request yields exactly `spec_verify_ct` decode records; phases vs cycle; /spec_timing and
   Prometheus agree with the JSONL.
2. overhead: ON and OFF interleaved (order alternating), `--repeats` times per batch size;
   median tok/s ratio ON/OFF, paired per repeat with a bootstrap CI.
3. steady_decode: a second ON/OFF reading of the same runs, OFF/ON median speculation-cycle ms
   of the steady windows in both servers' own 'Decode batch' lines (no prefill, ramp or tail).

    python benchmarks/timing_overhead.py --fixture llama3-8b --out OUT_DIR
    python benchmarks/timing_overhead.py --out OUT_DIR --resummarize   # 3. again from the logs, no GPU
Writes OUT_DIR/timing_overhead.json and prints a short table last.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

from sglang_patches.cliargs import OneLineParser, positive_int
from sglang_patches.errors import UserError, exit_with
from sglang_patches.offline.fixtures import ensure_fixture
from sglang_patches.offline.sweep.load import generate, run_batch
from sglang_patches.offline.sweep.results import write_text_atomic
from sglang_patches.httpjson import http_json, http_text
from sglang_patches.offline.sweep.server import Server

from harness.files import run_meta  # benchmarks/, beside this script
from harness.pairing import alternating, bootstrap_ci, median_ratio, paired

PROMPTS = ["def fibonacci(n):\n    ", "The history of the printing press begins", "import os\nimport sys\n\n",
           "Write a short story about a lighthouse keeper.", "class Stack:\n    def __init__(self):\n"]


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def prom_value(text: str, name: str, labels: dict) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def smoke(on: Server, log_path: str) -> dict:
    out = {}
    info = http_json(on.url + "/server_info")
    marker = (info.get("internal_states") or [{}])[0].get("sglang_patches")
    out["marker"] = {"present": marker is not None, "pid": marker and marker["pid"],
                     "applied": marker and marker["applied"]}
    try:
        import openai

        client = openai.OpenAI(base_url=on.url + "/v1", api_key="none")
        comp = client.completions.create(model=info.get("served_model_name") or "default", prompt="Hello",
                                         max_tokens=16, temperature=0)
        out["openai_completion_tokens"] = comp.usage.completion_tokens
    except Exception as exc:  # noqa: BLE001 - record, keep going
        out["openai_error"] = repr(exc)
    http_json(on.url + "/spec_timing/reset", {})
    time.sleep(1.5)
    before = len(read_jsonl(log_path))
    res = generate(on.url, PROMPTS[0], 64)
    time.sleep(2.5)  # the sink's flusher writes within 1 s
    new = read_jsonl(log_path)[before:]
    decode = [r for r in new if r["kind"] == "decode"]
    out["single_request"] = {"spec_verify_ct": res["spec_verify_ct"], "decode_records": len(decode),
                             "prefill_records": len(new) - len(decode),
                             "match": res["spec_verify_ct"] == len(decode)}
    ratios = [(r["draft_ms"] + r["verify_ms"] + r["extend_ms"]) / r["cycle_ms"] for r in decode
              if None not in (r["draft_ms"], r["verify_ms"], r["extend_ms"], r["cycle_ms"])]
    positive = all(r[k] > 0 for r in decode for k in ("draft_ms", "verify_ms", "extend_ms", "cycle_ms"))
    out["phases"] = {"all_positive": positive, "sum_over_cycle_median": statistics.median(ratios) if ratios else None,
                     "sum_over_cycle_min": min(ratios) if ratios else None,
                     "within_5pct": bool(ratios) and all(0.95 <= x <= 1.0001 for x in ratios)}
    st = http_json(on.url + "/spec_timing")["spec_timing"]
    out["spec_timing_endpoint"] = {"decode_cycles": st["cycles"]["decode"], "jsonl_decode": len(decode),
                                   "accept_length": st["accept_length"],
                                   "jsonl_accept_length": statistics.mean(a + 1 for r in decode for a in r["accepted"])}
    all_records = read_jsonl(log_path)
    metrics = http_text(on.url + "/metrics")
    prom_cycles = prom_value(metrics, "sglang_patches:spec_phase_seconds_count", {"phase": "cycle"})
    prom_drafts = prom_value(metrics, "sglang_patches:spec_num_drafts_total", {})
    out["prometheus"] = {"cycle_count": prom_cycles,
                         "jsonl_decode_total": sum(r["kind"] == "decode" for r in all_records),
                         "num_drafts": prom_drafts,
                         "jsonl_request_cycles": sum(len(r["accepted"]) for r in all_records if r["kind"] == "decode")}
    return out


# Both servers get the same KV pool: sized from free memory, the first server's pool came out 84,635 tokens and
# the second's 60,280 on an H100 (0.5.23), a difference between ON and OFF that is not the overlay.
KV_TOKENS = 49152


def pair_flags(common: list[str], log_path: str) -> tuple[list[str], list[str]]:
    """(ON, OFF) launcher flags: the same model, graphs and KV pool; ON with every default feature and a timing
    log, OFF with `--patches none`. Started one after the other: SGLang takes its static memory from what is
    free when it starts, so the second server's fraction applies to what the first one left."""
    same = [*common, "--max-total-tokens", str(KV_TOKENS)]
    return ([*same, "--mem-fraction-static", "0.35", "--timing-log", log_path, "--timing-summary-interval", "200"],
            [*same, "--mem-fraction-static", "0.5", "--patches", "none"])


MIN_WINDOWS = 3   # steady 'Decode batch' windows each server needs at a batch size for a steady ratio


def overhead(on: Server, off: Server, batch_sizes, repeats, max_new_tokens, requests_per_run: int = 1,
             on_row=None) -> dict:
    """`requests_per_run` x bs requests per repeat with bs in flight: longer repeats, so that the
    steady decode (not prefill, ramp-up and the batch's tail) dominates what is compared.
    `on_row(rows)` after each batch size, so a run cut at a deadline keeps what it measured."""
    rows = {}
    for bs in batch_sizes:
        n = bs * requests_per_run
        start = {name: _size(s) for name, s in (("on", on), ("off", off))}
        for s in (on, off):  # warm-up
            run_batch(s.url, PROMPTS, bs, min(64, max_new_tokens))
        runs = {"on": [], "off": []}
        for _, (name, s) in alternating(repeats, ("on", on), ("off", off)):
            runs[name].append(run_batch(s.url, PROMPTS, bs, max_new_tokens, num_requests=n))
        med_on = statistics.median(r["tok_s"] for r in runs["on"])
        med_off = statistics.median(r["tok_s"] for r in runs["off"])
        rows[bs] = {"requests_per_repeat": n, "seconds_per_repeat": [round(r["wall_s"], 2) for r in runs["on"]],
                    **paired([r["tok_s"] for r in runs["on"]], [r["tok_s"] for r in runs["off"]]),
                    "tok_s_on": [r["tok_s"] for r in runs["on"]], "tok_s_off": [r["tok_s"] for r in runs["off"]],
                    "median_on": med_on, "median_off": med_off, "ratio": med_on / med_off,
                    "loss_pct": 100 * (1 - med_on / med_off),
                    "accept_length_on": statistics.mean(r["accept_length"] or 0 for r in runs["on"]),
                    "accept_length_off": statistics.mean(r["accept_length"] or 0 for r in runs["off"]),
                    # each server log's byte range of this batch size: steady_decode reads only it
                    "log_bytes": {name: [start[name], _size(s)] for name, s in (("on", on), ("off", off))}}
        print(f"bs={bs}: on {med_on:.1f} tok/s, off {med_off:.1f} tok/s, ratio {med_on / med_off:.4f}", flush=True)
        if on_row is not None:
            on_row(rows)
    return rows


def _size(server) -> int:
    try:
        return os.path.getsize(server.log_path)
    except (OSError, AttributeError, TypeError):
        return 0


def steady_decode(on_log: str, off_log: str, batch_sizes, log_bytes: dict | None = None) -> dict:
    """ON/OFF from SGLang's own 'Decode batch' lines (sglang_patches/offline/decode_log.py): the
    median speculation-cycle time of the steady windows (40 cycles each, the same #running-req as
    the line before, no prefill between) at #running-req = bs in each server's log, as OFF ms / ON
    ms (> 1: ON faster, like the tok/s ratios). Prefill, ramp and tail, which dominate a short
    repeat's end-to-end tok/s, are not in it; per cycle, not per token, because a window's
    acceptance swings with its text far more than the overlay could change the cycle.
    `log_bytes` {bs: {"on": [start, end], "off": [...]}}: each batch size's stretch of the logs
    (what overhead() records), so a larger batch's tail never counts at a smaller size; without
    it (runs recorded before byte ranges existed) the whole logs."""
    from sglang_patches.offline.decode_log import steady_cycles

    out = {}
    for bs in batch_sizes:
        span = (log_bytes or {}).get(bs) or (log_bytes or {}).get(str(bs)) or {}

        def cycles(log: str, side: str) -> list[float]:
            start, end = span.get(side) or (0, None)
            windows = steady_cycles(log, "server log", allow_spec=True, start_offset=start, end_offset=end)
            return [ms for ms, _ in windows.get(bs, [])]
        a, b = cycles(on_log, "on"), cycles(off_log, "off")
        row = {"windows_on": len(a), "windows_off": len(b), "ratio": None, "log_ranges": bool(span)}
        if len(a) >= MIN_WINDOWS and len(b) >= MIN_WINDOWS:
            on_ms, off_ms = statistics.median(a), statistics.median(b)
            row.update(cycle_ms_on=on_ms, cycle_ms_off=off_ms, ratio=off_ms / on_ms,
                       ratio_ci95=list(bootstrap_ci(median_ratio, b, a)))
        out[bs] = row
    return out


def resummarize(folder: str) -> int:
    """Recompute `steady_decode` of a finished run from its two server logs (no GPU), in place."""
    path = Path(folder) / "timing_overhead.json"
    try:
        result = json.loads(path.read_text())
        if not result.get("overhead"):
            raise UserError(f"{path}: no measured batch sizes under 'overhead'; nothing to recompute")
        rows = result["overhead"]
        ranged = all(isinstance(r, dict) and r.get("log_bytes") for r in rows.values())
        if (result.get("crosscheck") or result.get("profile")) and not ranged:
            raise UserError(f"{folder}: this run profiled the ON server after the overhead runs, and its log has no "
                            "byte ranges per batch size; its steady_decode as written is the only valid one")
        for row in rows.values():   # what print_table reads: refuse before anything is written
            numbers = [row[k] for k in ("median_on", "median_off", "loss_pct", "paired_ratio_median")]
            numbers += list(row["paired_ratio_ci95"])
            if len(numbers) != 6 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in numbers):
                raise ValueError("an overhead row's medians, loss_pct, paired ratio and its 2-number CI must be numbers")
        # the reading the run itself wrote is kept once, never overwritten by a later recomputation
        result.setdefault("steady_decode_as_run", result.get("steady_decode"))
        result["steady_decode"] = steady_decode(str(Path(folder) / "server_on.log"), str(Path(folder) / "server_off.log"),
                                                [int(b) for b in rows], {int(b): r.get("log_bytes") for b, r in rows.items()})
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        raise UserError(f"{folder}: not a finished timing_overhead.py run ({str(err)[:200]}); give the --out folder of one, "
                        "with timing_overhead.json, server_on.log and server_off.log") from None
    result["steady_decode_command"] = " ".join([sys.executable] + sys.argv)
    print_table(result)
    write_text_atomic(path, json.dumps(result, indent=1, default=str))   # a one-line UserError if it cannot
    return 0


def print_table(result: dict) -> None:
    steady = {str(bs): row for bs, row in (result.get("steady_decode") or {}).items()}  # int or JSON str keys
    for bs, row in (result.get("overhead") or {}).items():
        lo, hi = row["paired_ratio_ci95"]
        sd = steady.get(str(bs)) or {}
        sd_text = (f"{sd['ratio']:.4f} (95% CI {sd['ratio_ci95'][0]:.4f}-{sd['ratio_ci95'][1]:.4f}, "
                   f"{sd['windows_on']}/{sd['windows_off']} windows)" if sd.get("ratio") else "-")
        print(f"| bs {bs} | on {row['median_on']:.1f} | off {row['median_off']:.1f} | loss {row['loss_pct']:+.2f}% "
              f"| paired ON/OFF {row['paired_ratio_median']:.4f} (95% CI {lo:.4f}-{hi:.4f}) "
              f"| steady cycle OFF/ON {sd_text} |")


def profile_under_load(url: str, bs: int, seconds: float, out_dir: str) -> dict:
    """`sglang-patches profile` (py-spy + torch profiler + timing window) while `bs` requests decode."""
    import threading

    from sglang_patches.profiling import profile_server

    load = threading.Thread(target=run_batch, args=(url, PROMPTS, bs, 4096), daemon=True)
    load.start()
    time.sleep(2.0)
    try:
        summary = profile_server(url, seconds, out_dir)
    except Exception as exc:  # noqa: BLE001 - keep the rest of the run
        summary = {"error": repr(exc)[:1000]}
    load.join(timeout=600)
    return summary


def main() -> int:
    ap = OneLineParser(prog="timing_overhead.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixture", default="llama3-8b")
    ap.add_argument("--out", required=True)
    ap.add_argument("--resummarize", action="store_true",
                    help="no servers: recompute steady_decode (OFF/ON median speculation-cycle ms from both "
                         "servers' 'Decode batch' lines) of the finished run in --out from its two server logs")
    ap.add_argument("--batch-sizes", default="1,32")
    ap.add_argument("--repeats", type=positive_int, default=9)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--simulate-acc-len", type=float, default=3.3)
    ap.add_argument("--requests-per-run", type=positive_int, default=1,
                    help="requests per repeat, as a multiple of the batch size (longer repeats resolve smaller "
                         "differences; 4 makes a bs-64 repeat of 256 tokens about 13 s on an 8B target)")
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--crosscheck-seconds", type=float, default=0,
                    help="after the overhead runs: torch.profiler cross-check window on the ON server (0 = skip)")
    ap.add_argument("--profile-seconds", type=float, default=0,
                    help="after that: `sglang-patches profile` of the ON server under load at each batch size (0 = skip)")
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure="the timing overhead rows (ON/OFF end to end, steady cycles)",
                       folder=("2026-12-01-trained-8b", "2026-11-29-timing-overhead"),
                       duration="about 10 min (two servers, --repeats per batch size)")
    try:
        args = ap.parse_args()
    except UserError as err:
        exit_with(err, "timing_overhead")
    if args.dry_run:
        return figure_cli.dry_run(
            out=args.out, servers=[f"{x}: python -m sglang_patches.launch --fixture {args.fixture} timing {x}"
                                   for x in ("OFF", "ON")],
            cases=[f"bs {b}: {args.repeats} repeats x {args.max_new_tokens} tokens" for b in args.batch_sizes.split(",")])
    if args.resummarize:
        try:
            return resummarize(args.out)
        except UserError as err:
            exit_with(err, "timing_overhead")
    try:   # checked before anything is started or written
        bss = [int(x) for x in args.batch_sizes.split(",")]
        if not bss or min(bss) < 1:
            raise ValueError
    except ValueError:
        exit_with(UserError(f"--batch-sizes {args.batch_sizes}: give positive integers separated by commas, "
                            "e.g. 1,16,64"), "timing_overhead")
    if os.path.isdir(args.out) and os.listdir(args.out):   # a finished run's JSON and logs would be overwritten
        exit_with(UserError(f"--out {args.out} is not empty; give a new folder (to recompute a finished run's "
                            "steady reading, add --resummarize)"), "timing_overhead")
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    fx = ensure_fixture(args.fixture)
    common = fx.cli_flags() + ["--attention-backend", "triton", "--sampling-backend", "pytorch",
                               "--cuda-graph-max-bs-decode", str(max(bss)), "--enable-metrics", "--log-level", "info",
                               # SGLang caps running requests at 48 under speculative decoding: without
                               # this a "bs 64" row runs 48 in flight and queues the rest
                               "--max-running-requests", str(max(bss))]
    env = {"SGLANG_SIMULATE_ACC_LEN": str(args.simulate_acc_len)} if args.simulate_acc_len else {}
    log_path = os.path.join(args.out, "timing.jsonl")
    on_flags, off_flags = pair_flags(common, log_path)
    on = Server(on_flags, port=30011, log_path=os.path.join(args.out, "server_on.log"), env=env)
    off = Server(off_flags, port=30012, log_path=os.path.join(args.out, "server_off.log"), env=env)
    def save(obj: dict) -> None:  # the sweep's atomic write: a kill mid-write never leaves half a JSON
        write_text_atomic(Path(args.out) / "timing_overhead.json",
                          json.dumps({**obj, "wall_s": obj.get("wall_s", time.time() - t0)}, indent=1, default=str))

    result = {**run_meta(), "fixture": fx.to_dict(), "server_flags": common, "sim_acc_len": args.simulate_acc_len}
    try:
        on.start().wait_ready(480)
        off.start().wait_ready(480)
        result["startup_s"] = {"on": on.started_s, "off": off.started_s}
        result["smoke"] = smoke(on, log_path)
        print(json.dumps(result["smoke"], indent=1), flush=True)
        if not args.skip_overhead:
            result["overhead"] = overhead(on, off, bss, args.repeats, args.max_new_tokens, args.requests_per_run,
                                          on_row=lambda rows: save({**result, "overhead": rows, "partial": True}))
            try:  # a second, prefill-free reading of the same runs; its failure must not void the first
                result["steady_decode"] = steady_decode(
                    on.log_path, off.log_path, bss, {bs: r.get("log_bytes") for bs, r in result["overhead"].items()})
            except (UserError, OSError) as err:
                result["steady_decode"] = {"error": str(err)}
        off.stop()
        if args.crosscheck_seconds:
            from profiler_crosscheck import crosscheck  # benchmarks/ is this script's folder

            for bs in bss:
                result.setdefault("crosscheck", {})[bs] = crosscheck(
                    on.url, log_path, os.path.join(args.out, f"torch_bs{bs}"), bs, args.crosscheck_seconds)
        if args.profile_seconds:
            result["profile"] = {bs: profile_under_load(on.url, bs, args.profile_seconds,
                                                        os.path.join(args.out, f"profile_bs{bs}"))
                                 for bs in bss}
    except Exception as exc:  # noqa: BLE001 - keep what we have
        result["error"] = repr(exc)
        print("ERROR", exc, file=sys.stderr)
        print(on.log_tail(60), file=sys.stderr)
    finally:
        on.stop()
        off.stop()
        result["wall_s"] = time.time() - t0
        try:
            save(result)
        except UserError as err:
            exit_with(err, "timing_overhead")
    print_table(result)
    return 1 if "error" in result else 0


if __name__ == "__main__":
    raise SystemExit(main())
