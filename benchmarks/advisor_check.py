"""GPU check of the speculation advisor and the accept-collapse alarm, one H200.

Part `advise` (on --fixture, default trained-8b):
  1. a server without speculation (`--patches none`): end-to-end tok/s, and its log is the
     advisor's --baseline-log (SGLang's "Decode batch ... gen throughput" lines);
  2. a server at --logged-steps (default 5; topk 1, draft tokens steps + 1) with --timing-log;
  3. `sglang-patches advise LOG --steps 1,2,3,5 --baseline-log ... --json`: predictions;
  4. one server per --predict-steps value (default 1,2,3): measured accept length and tok/s, same
     prompts, greedy (bf16 rounding lets each server's text drift from the others': same_text_as_logged);
  5. accept error = |predicted - measured| / measured accept length (both from the timing logs:
     mean over request-cycles of accepted + 1); tok/s error end to end: predicted = the logged
     run's measured tok/s x predicted(s) / predicted(logged), against the client's measured tok/s
     (also reported: the decode-only tok/s estimator of the advisor applied to each run's own log);
     recommended_vs_best = measured tok/s of the recommended configuration (or of no speculation)
     / the best measured. `advise`'s estimate is the span replay on batch-1 logs (the truncation
     elsewhere); the same errors for the plain truncation it shows beside it (`*_truncated`).
  False alarms: every speculative server of this part has the right drafter; warnings counted in
  their logs and /spec_timing, decode cycles summed over the servers at steps >= 2 (the alarm is off
  at steps 1); the last of those keeps generating until --quiet-cycles decode cycles in all
  (default 10000; 0 = no extra).
Part `alarm` (on --alarm-fixture, default trained): the trained target with a dummy-weight EAGLE-3
  drafter of the right shape (`--speculative-draft-load-format dummy`), `--on-accept-collapse exit`:
  load at batch 1 until the server stops; alarm_cycles_to_fire is parsed from its message.

Results in --out: summary.json (accept_err_max, tok_s_err_median, recommended_vs_best,
alarm_cycles_to_fire, false_alarms, ...), advise.json, timing_*.jsonl, server_*.log; a short table
last. Engine starts dominate (~40-90 s each; 6 starts): --prompts / --max-new-tokens /
--quiet-cycles / --parts / --no-baseline cut the time; no server starts that could not finish
before --deadline (default 560 s from the start; fixture builds count), so a part that runs out
of time fails with that reason and the other part's results are still written.

    python benchmarks/advisor_check.py --out OUT [--fixture trained-8b] [--parts advise,alarm]
"""
from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time

from sglang_patches.server.deliberate_stop import EXIT_STOPPED
from sglang_patches.offline.fixtures import ensure_fixture
from sglang_patches.httpjson import http_json
from sglang_patches.offline.sweep.load import generate, run_batch
from sglang_patches.offline.sweep.prompts import EVAL_PROMPTS, load_prompts
from sglang_patches.offline.sweep.server import Server
from sglang_patches.whatif import advisor as adv
from sglang_patches.offline.advise_cli import read_observation
from sglang_patches.vocab.logread import read_records

from harness.files import run_meta  # benchmarks/, beside this script

COLLAPSE = "ACCEPT LENGTH COLLAPSE"
T0 = time.time()


class OutOfTime(RuntimeError):
    pass


def need(args, seconds: float, what: str) -> None:
    """Refuse to start `what` when less than `seconds` remain before --deadline (the part fails with
    that reason instead of the whole bounded GPU run being killed with nothing written)."""
    left = args.deadline - (time.time() - T0)
    if left < seconds:
        raise OutOfTime(f"{what}: {left:.0f} s left before --deadline {args.deadline:.0f}, need ~{seconds:.0f}")


def log(msg: str) -> None:
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def common(args) -> list[str]:
    return ["--attention-backend", "triton", "--sampling-backend", "pytorch",
            "--cuda-graph-max-bs-decode", str(args.batch_size), "--mem-fraction-static", str(args.mem_fraction),
            "--log-level", "info"]


def spec_flags(fx, steps: int, draft_load_format: str | None = None) -> list[str]:
    return ["--model-path", str(fx.target), "--load-format", fx.load_format,
            "--speculative-algorithm", fx.algorithm, "--speculative-draft-model-path", str(fx.draft),
            "--speculative-draft-load-format", draft_load_format or fx.load_format,
            "--speculative-num-steps", str(steps), "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", str(steps + 1)]


def measure(srv: Server, texts: list[str], args) -> dict:
    generate(srv.url, texts[-1], 16)  # warm-up on a prompt the measurement does not use
    r = run_batch(srv.url, texts[:-1] if len(texts) > 1 else texts, args.batch_size, args.max_new_tokens,
                  num_requests=max(len(texts) - 1, 1))
    return {k: r[k] for k in ("tok_s", "tok_s_per_request", "output_tokens", "wall_s", "accept_length",
                              "verify_ct", "text_hashes")}


def decode_records(path: str) -> int:
    """Decode-cycle records in a timing log, read by the project's own reader (a torn last line
    of a live log is skipped, quietly)."""
    records, _ = read_records([path], warn_stream=io.StringIO())
    return sum(r["kind"] == "decode" for r in records)


def run_spec(name, fx, steps, texts, args, quiet_remaining=0) -> dict:
    out = args.out
    timing = os.path.join(out, f"timing_{name}.jsonl")
    need(args, args.server_s, name)
    srv = Server(spec_flags(fx, steps) + common(args) + args.spec_server_args + ["--timing-log", timing],
                 port=args.port, log_path=os.path.join(out, f"server_{name}.log"))
    measured = os.path.join(out, f"timing_{name}_measured.jsonl")
    res: dict = {"steps": steps, "timing_log": measured}
    try:
        srv.start().wait_ready(args.start_timeout)
        res["startup_s"] = srv.started_s
        log(f"{name}: up in {srv.started_s:.0f} s")
        res.update(measure(srv, texts, args))
        time.sleep(1.5)  # the JSONL sink flushes every second
        shutil.copyfile(timing, measured)  # the measured prompts only (the quiet top-up below has others)
        extra = quiet_remaining - decode_records(timing)
        if extra > 0:  # more right-drafter cycles for the false-alarm count (not part of the measurement)
            log(f"{name}: {extra} more decode cycles for --quiet-cycles")
            t_end = min(time.time() + args.quiet_max_s, T0 + args.deadline - 30)
            done, i = 0, 0
            while done < extra and time.time() < t_end:
                r = generate(srv.url, texts[i % len(texts)], args.max_new_tokens)
                done += r["spec_verify_ct"] or 0
                i += 1
            res["extra_quiet_cycles"] = done
            time.sleep(1.5)
        st = (http_json(srv.url + "/spec_timing") or {}).get("spec_timing") or {}
        res["accept_collapse"] = st.get("accept_collapse")
        res["server_advice"] = (st.get("advice") or {}).get("lines")
    finally:
        srv.stop()
    with open(srv.log_path, errors="replace") as fh:
        res["collapse_warnings"] = sum(COLLAPSE in line for line in fh)
    res["decode_cycles"] = decode_records(timing)
    obs, _, _ = read_observation([measured])
    res["accept_length_log"] = obs.accept_length(obs.steps)
    (row,) = adv.predict(obs, [obs.steps])
    res["decode_tok_s_log"] = row.tok_s
    log(f"{name}: {res['tok_s']:.1f} tok/s, accept {res['accept_length_log']:.3f}, "
        f"{res['decode_cycles']} decode cycles, warnings {res['collapse_warnings']}")
    return res


def part_advise(args, summary: dict) -> None:
    t = time.time()
    fx = ensure_fixture(args.fixture)
    summary["seconds"]["advise_fixture"] = round(time.time() - t, 1)
    texts = load_prompts(args.prompts_file)[:args.prompts + 1]
    runs: dict = {}
    base_log = os.path.join(args.out, "server_baseline.log")
    if not args.no_baseline:
        need(args, args.server_s * (2 + len(args.predict_steps)), "baseline and every speculative server")
        srv = Server(["--model-path", str(fx.target), "--load-format", fx.load_format, "--patches", "none"]
                     + common(args), port=args.port, log_path=base_log)
        try:
            srv.start().wait_ready(args.start_timeout)
            log(f"baseline: up in {srv.started_s:.0f} s")
            runs["baseline"] = {**measure(srv, texts, args), "startup_s": srv.started_s}
        finally:
            srv.stop()
        log(f"baseline: {runs['baseline']['tok_s']:.1f} tok/s")
    S = args.logged_steps
    runs[f"s{S}"] = run_spec(f"s{S}", fx, S, texts, args)
    cmd = [sys.executable, "-m", "sglang_patches", "advise", runs[f"s{S}"]["timing_log"], "--json",
           "--steps", ",".join(map(str, sorted(set(args.predict_steps) | {S})))]
    if not args.no_baseline:
        cmd += ["--baseline-log", base_log]
    if args.calibration:
        cmd += ["--calibration", args.calibration]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"advise failed ({proc.returncode}): {proc.stderr.strip()}")
    advice = json.loads(proc.stdout)
    with open(os.path.join(args.out, "advise.json"), "w") as fh:
        json.dump({"command": cmd, **advice}, fh, indent=1)
    log("advise: " + " | ".join(advice["recommendation"]))
    pred = {r["steps"]: r for r in advice["advice"]["rows"]}
    order = sorted(args.predict_steps, reverse=True)
    # The false-alarm top-up runs on the last server where the alarm watches (steps >= 2; at steps 1
    # it is off), so the quiet cycles all count.
    watched = [s for s in order if s >= 2]
    for s in order:
        remaining = 0
        if watched and s == watched[-1] and args.quiet_cycles:
            remaining = args.quiet_cycles - sum(r.get("decode_cycles", 0) for k, r in runs.items()
                                                if k != "baseline" and r.get("steps", 0) >= 2)
        try:
            runs[f"s{s}"] = run_spec(f"s{s}", fx, s, texts, args, quiet_remaining=remaining)
        except OutOfTime as exc:  # keep what was measured; the summary names what was not
            summary.setdefault("skipped", []).append(str(exc))
            log(f"skipped: {exc}")
    logged = runs[f"s{S}"]
    rows = []
    for s in sorted(args.predict_steps):
        if f"s{s}" not in runs:
            continue
        m, p = runs[f"s{s}"], pred[s]
        tok_pred = logged["tok_s"] * p["tok_s"] / pred[S]["tok_s"]
        trunc = p.get("accept_length_truncated") or p["accept_length"]
        rng = p.get("accept_length_interval")  # advise's 95 % range (bootstrap over the logged requests)
        rows.append({"steps": s, "accept_pred": p["accept_length"], "accept_meas": m["accept_length_log"],
                     "accept_range": rng,
                     "accept_in_range": (rng[0] <= m["accept_length_log"] <= rng[1]) if rng else None,
                     "accept_basis": p.get("accept_basis"),
                     "accept_pred_truncated": trunc,
                     "accept_err_truncated": abs(trunc / m["accept_length_log"] - 1),
                     "tok_s_err_truncated": abs(tok_pred * trunc / p["accept_length"] / m["tok_s"] - 1),
                     "accept_meas_sglang": m["accept_length"],
                     "accept_err": abs(p["accept_length"] / m["accept_length_log"] - 1),
                     "tok_s_pred": tok_pred, "tok_s_meas": m["tok_s"], "tok_s_err": abs(tok_pred / m["tok_s"] - 1),
                     "decode_tok_s_pred": p["tok_s"], "decode_tok_s_meas": m["decode_tok_s_log"],
                     "decode_tok_s_err": abs(p["tok_s"] / m["decode_tok_s_log"] - 1),
                     "same_text_as_logged": m["text_hashes"] == logged["text_hashes"]})
    if not rows:
        raise OutOfTime("no predicted configuration could be measured before --deadline")
    measured = {k: r["tok_s"] for k, r in runs.items()}
    rec = advice["advice"]["recommended"]
    rec_key = "baseline" if rec is None else rec.split("_")[0]   # s3_k1_n4 -> s3
    spec_runs = [r for k, r in runs.items() if k != "baseline"]
    summary.update({
        "fixture": args.fixture, "batch_size": args.batch_size, "logged_steps": S,
        "accept_err_max": max(r["accept_err"] for r in rows),
        "tok_s_err_median": statistics.median(r["tok_s_err"] for r in rows),
        "decode_tok_s_err_median": statistics.median(r["decode_tok_s_err"] for r in rows),
        "accept_estimate": ("advise's estimate: the span replay of the logged requests where it applies "
                            "(rows' accept_basis 'replayed'), else the truncation; before commit 39ac8b0 "
                            "accept_pred / accept_err* held the truncation and *_replay the replay"),
        # the plain truncation beside the estimate
        "accept_err_max_truncated": max(r["accept_err_truncated"] for r in rows),
        "tok_s_err_median_truncated": statistics.median(r["tok_s_err_truncated"] for r in rows),
        # information, not a check of the range: the range is the logged run's sampling noise over its
        # requests, and the measured runs used the same prompts (so a miss is the estimate's bias)
        "accept_in_range_all": (all(r["accept_in_range"] for r in rows)
                                if all(r["accept_in_range"] is not None for r in rows) else None),
        "recommended": rec or "no speculation", "best_measured": max(measured, key=measured.get),
        "recommended_vs_best": measured[rec_key] / max(measured.values()) if rec_key in measured else None,
        "false_alarms": sum(r["collapse_warnings"] for r in spec_runs),
        "quiet_cycles": sum(r["decode_cycles"] for r in spec_runs if r["steps"] >= 2),  # alarm on
        "rows": rows, "runs": runs, "advice": advice["recommendation"],
    })


def part_alarm(args, summary: dict) -> None:
    t = time.time()
    fx = ensure_fixture(args.alarm_fixture)
    summary["seconds"]["alarm_fixture"] = round(time.time() - t, 1)
    need(args, args.server_s, "alarm server")
    texts = load_prompts(EVAL_PROMPTS)
    timing = os.path.join(args.out, "timing_alarm.jsonl")
    srv = Server(spec_flags(fx, 3, draft_load_format="dummy") + common(args)
                 + ["--timing-log", timing, "--on-accept-collapse", "exit"],
                 port=args.port + 1, log_path=os.path.join(args.out, "server_alarm.log"))
    res: dict = {"fixture": args.alarm_fixture, "drafter": "dummy weights (--speculative-draft-load-format dummy)"}
    stop = threading.Event()

    def load():
        i = 0
        while not stop.is_set():
            try:
                generate(srv.url, texts[i % len(texts)], 128, timeout=60)
            except Exception:  # noqa: BLE001 - the server is expected to go away
                time.sleep(0.2)
            i += 1

    try:
        srv.start().wait_ready(args.start_timeout)
        log(f"alarm: up in {srv.started_s:.0f} s")
        t_load = time.time()
        th = threading.Thread(target=load, daemon=True)
        th.start()
        code = srv.wait_exit(args.alarm_timeout)
        res["server_exit_code"] = code
        # the deliberate stop only: a crash, an OOM or SGLang's SIGQUIT path would exit otherwise
        res["stopped"] = code == EXIT_STOPPED
        res["seconds_from_load_to_exit"] = time.time() - t_load if code is not None else None
    finally:
        stop.set()
        srv.stop()
    with open(srv.log_path, errors="replace") as fh:
        lines = [ln.strip() for ln in fh if COLLAPSE in ln]
    res["collapse_lines"] = len(lines)
    res["message"] = lines[0][:1500] if lines else None
    m = re.search(r"at decode cycle (\d+) since", lines[0]) if lines else None
    acc = re.search(r"accept length ([0-9.]+) over the last (\d+)", lines[0]) if lines else None
    res["alarm_cycles_to_fire"] = int(m.group(1)) if m else None
    res["rolling_accept_length"] = float(acc.group(1)) if acc else None
    res["window"] = int(acc.group(2)) if acc else None
    summary.update({"alarm_cycles_to_fire": res["alarm_cycles_to_fire"], "alarm_stopped_server": res["stopped"],
                    "alarm": res})
    log(f"alarm: fired at decode cycle {res['alarm_cycles_to_fire']}, stopped={res['stopped']} "
        f"(exit code {res.get('server_exit_code')})")


def table(summary: dict) -> str:
    out = []
    for r in summary.get("rows", []):
        out.append(f"s{r['steps']}: accept pred {r['accept_pred']:.3f} meas {r['accept_meas']:.3f} "
                   f"(err {100 * r['accept_err']:.1f}%) | tok/s pred {r['tok_s_pred']:.0f} meas {r['tok_s_meas']:.0f} "
                   f"(err {100 * r['tok_s_err']:.1f}%) | decode tok/s err {100 * r['decode_tok_s_err']:.1f}%"
                   + f" | {r['accept_basis']}; truncated accept {r['accept_pred_truncated']:.3f} "
                     f"(err {100 * r['accept_err_truncated']:.1f}%)")
    keys = ("fixture", "accept_err_max", "tok_s_err_median", "decode_tok_s_err_median", "accept_err_max_truncated",
            "tok_s_err_median_truncated", "recommended",
            "best_measured", "recommended_vs_best", "false_alarms", "quiet_cycles", "alarm_cycles_to_fire",
            "alarm_stopped_server", "seconds")
    out += [f"{k}: {summary[k]}" for k in keys if k in summary]
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--fixture", default="trained-8b", help="fixture of the advise part (trained-8b, qwen3-moe-shape, trained)")
    p.add_argument("--alarm-fixture", default="trained", help="target of the alarm demo (its drafter gets dummy weights)")
    p.add_argument("--parts", default="advise,alarm")
    p.add_argument("--logged-steps", type=int, default=5)
    p.add_argument("--predict-steps", default="1,2,3")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--prompts", type=int, default=8, help="measured requests per server (one more warms up)")
    p.add_argument("--prompts-file", default=str(EVAL_PROMPTS))
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--quiet-cycles", type=int, default=10000, help="right-drafter decode cycles to reach (0: no extra)")
    p.add_argument("--quiet-max-s", type=float, default=90.0, help="cap on the extra generation for --quiet-cycles")
    p.add_argument("--no-baseline", action="store_true", help="skip the no-speculation server (no ratios)")
    p.add_argument("--alarm-timeout", type=float, default=120.0)
    p.add_argument("--start-timeout", type=float, default=400.0)
    p.add_argument("--mem-fraction", type=float, default=0.7)
    p.add_argument("--port", type=int, default=30061)
    p.add_argument("--calibration", metavar="SWEEP_DIR",
                   help="passed to advise: a sweep of the same fixture (verify cost vs draft tokens; wanted for MoE "
                        "targets, whose verify cost grows with draft tokens)")
    p.add_argument("--spec-server-args", default="",
                   help="extra flags for the advise part's speculative servers, one string, e.g. "
                        "'--simulate-acceptance 0.8,0.7,0.6,0.5,0.4' for a dummy-weight fixture such as qwen3-moe-shape")
    p.add_argument("--deadline", type=float, default=560.0,
                   help="seconds from the start: no server is started that could not finish before it (default 560)")
    p.add_argument("--server-s", type=float, default=75.0, help="seconds one server start + measurement is assumed to take")
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(p, figure='the advise and alarm rows (advisor)', folder='2026-12-01-advisor',
                       duration='about 10 min per part (--deadline 560 s; builds trained / trained-8b if missing, ~230 s)')
    args = p.parse_args()
    if args.dry_run:
        return figure_cli.dry_run(out=args.out, servers=[f"{x}: python -m sglang_patches.launch --fixture {args.fixture if x == 'advise' else args.alarm_fixture} --port {args.port}" for x in args.parts.split(",") if x], cases=[f"advise: logged steps {args.logged_steps}, predicted {args.predict_steps}, bs {args.batch_size}, {args.prompts} prompts x {args.max_new_tokens} tokens"] + ([] if args.no_baseline else ["plain baseline server"]))
    global T0
    T0 = time.time()  # --deadline counts from here
    args.spec_server_args = args.spec_server_args.split()
    args.predict_steps = sorted({int(x) for x in args.predict_steps.split(",") if x.strip()})
    parts = {x.strip() for x in args.parts.split(",") if x.strip()}
    if parts - {"advise", "alarm"} or not parts:
        p.error("--parts: advise, alarm or both")
    if args.out and os.path.exists(os.path.join(args.out, "summary.json")):
        p.error(f"{args.out}/summary.json exists; give a new --out")
    os.makedirs(args.out, exist_ok=True)
    summary: dict = {**run_meta(), "parts": sorted(parts), "seconds": {}}
    status = 0
    for part, fn in (("advise", part_advise), ("alarm", part_alarm)):
        if part not in parts:
            continue
        t = time.time()
        try:
            fn(args, summary)
        except Exception as exc:  # noqa: BLE001 - record, keep the other part
            summary[f"{part}_error"] = repr(exc)[:2000]
            log(f"{part}: FAILED {exc!r}"[:500])
            status = 1
        summary["seconds"][part] = round(time.time() - t, 1)
    goals = {}
    if "accept_err_max" in summary:
        goals["accept_err_max <= 0.02"] = summary["accept_err_max"] <= 0.02
        goals["tok_s_err_median <= 0.10"] = summary["tok_s_err_median"] <= 0.10
        goals["recommended_vs_best >= 0.95"] = (summary["recommended_vs_best"] or 0) >= 0.95
        goals["false_alarms == 0"] = summary["false_alarms"] == 0
    if "alarm_cycles_to_fire" in summary:
        w = (summary.get("alarm") or {}).get("window") or 256
        goals["alarm fires within the window"] = (summary["alarm_cycles_to_fire"] or 10**9) <= w
        goals["exit stops the server"] = bool(summary["alarm_stopped_server"])
    summary["goals"] = goals
    with open(os.path.join(args.out, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1, default=str)
    print(table(summary))
    for g, ok in goals.items():
        print(f"{'PASS' if ok else 'FAIL'}  {g}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
