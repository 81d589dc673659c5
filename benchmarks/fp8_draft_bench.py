"""FP8 drafter weights on one GPU: the draft phase of five drafter configurations side by side, and
the trained pair's acceptance and end-to-end speed with `--draft-backend triton --draft-weights fp8`.

Configurations (flags of `python -m sglang_patches.launch`):
  stock        --draft-backend sglang
  sglang_fp8   --draft-backend sglang --speculative-draft-model-quantization fp8   (SGLang's online FP8, w8a8)
  triton_bf16  --draft-backend triton
  triton_fp8   --draft-backend triton --draft-weights fp8   (FP8 e4m3 weights; gate_up also fp8
               activations at 2..64 rows, fp8_w8a8_linear; until 2026-12-04 the lm_head too)
  triton_fp8_wo --draft-backend triton --draft-weights fp8-weight-only   (FP8 e4m3 weight-only Triton GEMMs
               in every module: the A/B baseline for triton_fp8's fp8 activations)
  triton_fp8_gu, triton_fp8_a8lm (by name only)   triton_fp8 with SGLANG_PATCHES_FP8_INPUTS=gate_up (the
               default, spelled out) or =gate_up,lm_head (the earlier default) in the server's environment

Cases, one server each, run in --cases order (a fixture name = all its cases, `all` = every case):
  llama3-8b:CONFIG, kimi-k2-shape:CONFIG   dummy weights, timing only: steps --steps (3) / topk 1 /
      draft tokens steps+1, CUDA graphs --cuda-graph-max-bs-decode max(--batch-sizes); at each batch size (1, 8, 32)
      greedy /generate load (sglang_patches.offline.sweep.load.run_batch, the tool draft_backend_check.py
      uses; ignore_eos, --max-new-tokens) after POST /spec_timing/reset, then GET /spec_timing: the
      overlay's draft / verify / extend / cycle GPU ms (p50, mean) and accept length.
  trained-8b:s3:stock, trained-8b:s3:triton_fp8, trained-8b:s5:... (by name only, not in `all`:
      trained-8b:s3:triton_fp8_wo / _gu / _a8lm / s5, the fp8-inputs A/B of acceptance)   real acceptance on the held-out
      prompts (sglang_patches/data/eval_prompts.jsonl): a greedy pass at batch 8 (natural EOS) gives the
      accept length from SGLang's spec_verify_ct (tokens / verifies) and the timer's; then SGLang's own
      `python -m sglang.bench_serving` at --max-concurrency 1 and 8 (ShareGPT file of the same prompts,
      --output-len tokens, EOS ignored, as benchmarks/adaptive_bench.py runs it) gives output tok/s.

First the copy bandwidth: a 1 GiB device-to-device torch copy, (read + write bytes) / time, median of
--copy-repeats, in a child process. Per case: the server command, startup seconds, sglang version, GPU,
date, any error (the run goes on), the log line proving the backend ("triton draft backend on ..."),
/server_info's draft quantization, and the drafter's weight bytes per draft phase (its config.json; see
fp8_draft_summary.drafter_weight_bytes) for roofline = bytes / draft p50 / copy bandwidth.

No server starts unless its estimated start + measurement fits before --deadline (seconds from this
script's start, fixture builds included). After every case OUT/fp8_draft_run_STAMP.json is rewritten
and, with --export DIR, copied there with summary.json and table.txt, so a killed run keeps what finished.
Merge several runs' files: python benchmarks/fp8_draft_summary.py DIR... --out summary.json

    python benchmarks/fp8_draft_bench.py --out /tmp/fp8 --export $OUT --deadline 540 --cases llama3-8b
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import bench_serving as bclient  # noqa: E402
import adaptive_summary as asum  # noqa: E402
import fp8_draft_summary as fs  # noqa: E402
import figure_cli  # noqa: E402
from harness.files import run_meta, write_json  # noqa: E402

T0 = time.time()
# Seconds on an H200, the top of the recorded ranges (server start with graphs up to bs 32, a case's
# measurement, the stop; the trained-8b build; trained-8b starts 64-111 s warm, +60 s first after a build).
START_S = {"llama3-8b": 100, "kimi-k2-shape": 110, "trained-8b": 110}
MEASURE_S, STOP_S = {"timing": 30, "trained": 90}, 10
BUILD_S, FIRST_AFTER_BUILD_S = {"trained-8b": 290}, {"trained-8b": 60}
COMMON = ["--attention-backend", "triton", "--sampling-backend", "pytorch", "--mem-fraction-static", "0.6",
          "--log-level", "info"]
LOAD_TOOL = "sglang_patches.offline.sweep.load.run_batch (greedy /generate, temperature 0)"
BW_CODE = r"""
import json, sys, torch
from sglang_patches.versions import collect
env, n = collect(), 1 << 30
x = torch.empty(n, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
ts = []
for _ in range(int(sys.argv[1])):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); y.copy_(x); b.record(); b.synchronize(); ts.append(a.elapsed_time(b) / 1e3)
print(json.dumps({"env": env, "nbytes": n, "seconds": ts}))
"""


def log(msg: str) -> None:
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def left(args) -> float:
    return args.deadline - (time.time() - T0)


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        print(f"fp8_draft_bench: error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def positive_ints(text: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        vals = []
    if not vals or min(vals) < 1 or len(set(vals)) != len(vals):
        raise argparse.ArgumentTypeError(f"{text!r}: give distinct positive integers separated by commas, e.g. 1,8,32")
    return vals


def bounded_int(lo: int):
    def conv(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            v = lo - 1
        if v < lo:
            raise argparse.ArgumentTypeError(f"{text!r}: give an integer >= {lo}")
        return v
    return conv


def seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number of seconds")
    return v


def parse_args(argv=None):
    ap = Parser(prog="fp8_draft_bench", description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="working folder (server logs, bench_serving output, the run JSON)")
    ap.add_argument("--export", default=None, help="after every case copy the run JSON, summary.json, table.txt here")
    ap.add_argument("--cases", default="all", help="comma list: all, a fixture (llama3-8b, kimi-k2-shape, trained-8b) "
                    "or cases such as llama3-8b:triton_fp8, trained-8b:s5:stock (default: %(default)s)")
    ap.add_argument("--deadline", type=seconds, default=540.0, help="seconds from start; no server starts past it")
    ap.add_argument("--steps", type=bounded_int(1), default=3, help="speculative steps of the timing cases (default 3)")
    ap.add_argument("--batch-sizes", type=positive_ints, default=[1, 8, 32], help="timing cases (default 1,8,32)")
    ap.add_argument("--cuda-graph-bs", action="store_true", help="capture CUDA graphs only at the measured batch "
                    "sizes (faster starts) instead of --cuda-graph-max-bs-decode (SGLang's 20 sizes up to 32)")
    ap.add_argument("--max-new-tokens", type=bounded_int(8), default=128, help="timing cases, per request")
    ap.add_argument("--min-requests", type=bounded_int(1), default=4, help="timing cases: max(this, 2 x bs) requests")
    ap.add_argument("--accept-requests", type=bounded_int(1), default=16, help="trained: greedy accept pass requests")
    ap.add_argument("--accept-tokens", type=bounded_int(8), default=128, help="trained: accept pass max new tokens")
    ap.add_argument("--prompts-bs1", type=bounded_int(1), default=8, help="trained: bench_serving prompts at concurrency 1")
    ap.add_argument("--prompts-bs8", type=bounded_int(1), default=16, help="trained: bench_serving prompts at concurrency 8")
    ap.add_argument("--output-len", type=bounded_int(8), default=256, help="trained: bench_serving output tokens")
    ap.add_argument("--copy-repeats", type=bounded_int(3), default=10)
    ap.add_argument("--port", type=bounded_int(1024), default=30061, help="first case's port; case i uses PORT+i")
    ap.add_argument("--start-timeout", type=seconds, default=240.0)
    figure_cli.declare(ap, figure="the FP8 drafter rows", folder=("2026-12-05-fp8-draft", "2026-12-04-fp8-draft-gu"),
                       duration="about 10 min per call (--deadline 560-585 s; trained-8b build ~270 s); four calls")
    args = ap.parse_args(argv)
    try:
        args.case_list = fs.parse_case_list(args.cases)
    except ValueError as exc:
        ap.error(str(exc))
    for flag in ("out", "export"):
        p = getattr(args, flag)
        if p and Path(p).exists() and not Path(p).is_dir():
            ap.error(f"--{flag} {p} exists and is not a folder; give a folder")
    if os.environ.get(fs.FP8_INPUTS_ENV) is not None:  # every server would inherit it unrecorded
        ap.error(f"{fs.FP8_INPUTS_ENV}={os.environ[fs.FP8_INPUTS_ENV]!r} is set here; unset it "
                 "and name the variant cases instead (triton_fp8_gu, triton_fp8_a8lm set it per server)")
    if args.port + len(args.case_list) > 65535:
        ap.error(f"--port {args.port}: PORT + number of cases must stay below 65536")
    return args


def measure_bandwidth(repeats: int) -> dict:
    """env (versions, GPU) and the copy bandwidth, from a child process (this one never opens CUDA)."""
    stderr = ""
    try:
        r = subprocess.run([sys.executable, "-c", BW_CODE, str(repeats)], capture_output=True, text=True, timeout=180)
        stderr = r.stderr[-600:]
        got = json.loads(r.stdout.strip().splitlines()[-1])
        return {"env": got["env"], "copy_bandwidth": {**fs.copy_bandwidth(got["nbytes"], got["seconds"]),
                                                      "method": "1 GiB uint8 torch copy_ on one device, CUDA events"}}
    except Exception as exc:  # noqa: BLE001 - recorded; the cases still run (roofline then null)
        return {"env": None, "copy_bandwidth": {"error": f"{type(exc).__name__}: {exc}; {stderr}"[:900]}}


def server_args(args, case: str, fx) -> list[str]:
    c = fs.parse_case(case)
    bss = [1, 8] if c["kind"] == "trained" else args.batch_sizes
    graphs = (["--cuda-graph-bs-decode", *map(str, sorted(bss))] if args.cuda_graph_bs
              else ["--cuda-graph-max-bs-decode", str(max(bss))])
    return fx.model_flags() + fs.case_flags(case, args.steps) + COMMON + graphs


def spec_timing(url: str) -> dict:
    from sglang_patches.httpjson import http_json
    return (http_json(url + "/spec_timing", timeout=30) or {}).get("spec_timing") or {}


def reset_timing(url: str) -> None:
    from sglang_patches.httpjson import http_json
    http_json(url + "/spec_timing/reset", {}, timeout=30)


def server_info(url: str) -> dict:
    from sglang_patches.httpjson import http_json
    info = http_json(url + "/server_info", method="GET", timeout=30) or {}
    states = info.get("internal_states") or [{}]
    hooks = (states[0].get("sglang_patches") or {}).get("applied") or []
    keep = ("speculative_draft_model_quantization", "speculative_num_steps", "speculative_eagle_topk",
            "speculative_num_draft_tokens", "cuda_graph_max_bs", "cuda_graph_bs", "cuda_graph_max_bs_decode",
            "cuda_graph_bs_decode", "version")
    return {**{k: info.get(k) for k in keep if k in info},
            "triton_hooks": [h for h in map(str, hooks) if "triton_draft" in h]}


def measure_timing(args, url: str) -> dict:
    from sglang_patches.offline.sweep.load import run_batch
    from sglang_patches.offline.sweep.prompts import EVAL_PROMPTS, load_prompts

    texts = load_prompts(EVAL_PROMPTS)
    run_batch(url, texts, 1, 16, num_requests=2)
    res = {}
    for bs in args.batch_sizes:
        if left(args) < 8:
            res[str(bs)] = {"skipped": f"{left(args):.0f} s left before --deadline"}
            continue
        run_batch(url, texts, bs, 16, num_requests=bs)  # warm-up at this batch size
        reset_timing(url)
        n = max(args.min_requests, 2 * bs)
        r = run_batch(url, texts, bs, args.max_new_tokens, num_requests=n, offset=bs)
        res[str(bs)] = {**fs.phase_row(spec_timing(url)), "requests": n, "max_new_tokens": args.max_new_tokens,
                        "tok_s": r["tok_s"], "output_tokens": r["output_tokens"], "verify_ct": r["verify_ct"],
                        "accept_length_sglang": r["output_tokens"] / r["verify_ct"] if r["verify_ct"] else None}
        log(f"  bs {bs}: draft p50 {res[str(bs)]['draft_ms_p50']} ms, cycle p50 {res[str(bs)]['cycle_ms_p50']} ms")
    return res


def bench_serving(args, url: str, fx, data: Path, conc: int, name: str) -> dict:
    n = args.prompts_bs1 if conc == 1 else args.prompts_bs8
    res_file = Path(args.out) / "bench" / f"{name}_c{conc}.jsonl"
    res_file.parent.mkdir(parents=True, exist_ok=True)
    res_file.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "sglang.bench_serving", "--backend", "sglang", "--host", "127.0.0.1",
           "--port", url.rsplit(":", 1)[1], "--dataset-name", "sharegpt", "--dataset-path", str(data),
           "--num-prompts", str(n), "--sharegpt-output-len", str(args.output_len), "--max-concurrency", str(conc),
           "--model", str(fx.target), "--tokenizer", str(fx.target), "--seed", "1", "--disable-tqdm",
           "--output-file", str(res_file)]
    reset_timing(url)
    r = bclient.run_bench_serving(None, cmd, res_file.with_suffix(".log"), max(10.0, min(300.0, left(args) - 3)))
    if r["rc"] != 0:
        raise RuntimeError(f"bench_serving exited {r['rc']}: {r['output'].strip()[-400:]}")
    cell = {"num_prompts": n, "output_len": args.output_len, "result": asum.parse_bench_result(res_file.read_text())}
    problem = asum.cell_problem(cell, n, args.output_len)
    if problem:
        raise RuntimeError(f"bench_serving at concurrency {conc}: {problem}")
    st = fs.phase_row(spec_timing(url))
    return {**cell["result"], "num_prompts": n, "output_len": args.output_len, "client_cmd": " ".join(cmd),
            "accept_length_timer": st["accept_length_timer"], "draft_ms_p50": st["draft_ms_p50"]}


def measure_trained(args, url: str, fx, data: Path, name: str, rec: dict) -> None:
    from sglang_patches.offline.sweep.load import run_batch
    from sglang_patches.offline.sweep.prompts import EVAL_PROMPTS, load_prompts

    prompts = load_prompts(EVAL_PROMPTS)
    run_batch(url, prompts[::-1], 8, 32, num_requests=8)  # warm-up on other prompts of the set
    reset_timing(url)
    r = run_batch(url, prompts, 8, args.accept_tokens, num_requests=args.accept_requests, ignore_eos=False)
    rec["accept"] = {**fs.phase_row(spec_timing(url)), "requests": args.accept_requests, "batch_size": 8,
                     "max_new_tokens": args.accept_tokens, "ignore_eos": False, "output_tokens": r["output_tokens"],
                     "verify_ct": r["verify_ct"], "text_hashes": r["text_hashes"],
                     "accept_length_sglang": r["output_tokens"] / r["verify_ct"] if r["verify_ct"] else None}
    log(f"  accept length {rec['accept']['accept_length_sglang']} (timer {rec['accept']['accept_length_timer']})")
    rec["e2e"] = {}
    for conc in (1, 8):
        if left(args) < (20 if conc == 1 else 12):
            rec["e2e"][str(conc)] = {"skipped": f"{left(args):.0f} s left before --deadline"}
            continue
        rec["e2e"][str(conc)] = bench_serving(args, url, fx, data, conc, name)
        log(f"  concurrency {conc}: {rec['e2e'][str(conc)]['output_throughput']:.1f} tok/s")


def run_case(args, case: str, fx, port: int, run: dict, data: Path) -> dict:
    from sglang_patches.offline.sweep.server import Server

    c = fs.parse_case(case)
    steps = c["steps"] or args.steps
    name = case.replace(":", "_")
    rec = {**c, "steps": steps, "error": None, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "sglang_version": run.get("sglang_version"), "gpu": run.get("gpu"), "load_tool": LOAD_TOOL,
           "copy_bandwidth_bytes_per_s": run["copy_bandwidth"].get("bytes_per_s")}
    cfg = json.loads((Path(fx.draft) / "config.json").read_text())
    rec["drafter"] = {**fs.drafter_weight_bytes(cfg, fs.WEIGHTS[c["config"]], steps), "config_json": str(Path(fx.draft) / "config.json")}
    log_path = Path(args.out) / "logs" / f"{name}.log"
    env = fs.CASE_ENV.get(c["config"], {})
    srv = Server(server_args(args, case, fx), port=port, log_path=str(log_path), env=env)
    rec["server_cmd"] = " ".join([f"{k}={v}" for k, v in env.items()] + srv.cmd)
    info = None
    try:
        srv.start().wait_ready(max(30.0, min(args.start_timeout, left(args) - MEASURE_S[c["kind"]])))
        rec["startup_s"] = round(srv.started_s, 1)
        log(f"{case}: up in {srv.started_s:.0f} s")
        info = rec["server_info"] = server_info(srv.url)
        if c["kind"] == "timing":
            rec["bs"] = measure_timing(args, srv.url)
        else:
            measure_trained(args, srv.url, fx, data, name, rec)
    except Exception as exc:  # noqa: BLE001 - recorded; the other cases still run
        rec["error"] = f"{type(exc).__name__}: {str(exc)[-1500:]}"
        log(f"{case}: {rec['error'][:300]}")
    finally:
        srv.stop()
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    rec.update(fs.backend_proof(text, c["config"], info))
    rec["fp8_log_lines"] = [ln.strip()[:400] for ln in text.splitlines() if "fp8" in ln.lower()][:6]
    if rec["error"]:
        rec["log_tail"] = text.splitlines()[-30:]
    rec["t_end"] = time.time()
    return rec


def export(args, run_file: Path, run: dict) -> str:
    s = fs.summarize([(str(run_file), run)])
    text = fs.table(s)
    write_json(Path(args.out) / "summary.json", s)
    if args.export:
        dst = Path(args.export)
        write_json(dst / run_file.name, run)
        write_json(dst / "summary.json", s)
        (dst / "table.txt").write_text(text)
    return text


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        return figure_cli.dry_run(out=args.out, servers=[
            f"case {i}: python -m sglang_patches.launch --port {args.port + i} ({c})" for i, c in enumerate(args.cases.split(","))],
            cases=[f"bench_serving: {args.prompts_bs1} / {args.prompts_bs8} prompts at c1 / c8, {args.output_len} tokens"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(key, "1")
    from sglang_patches.offline.fixtures import base_build_id, ensure_fixture, fixture_paths, load_fixture
    from sglang_patches.offline.sweep.prompts import EVAL_PROMPTS, load_prompts

    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_file = out / f"fp8_draft_run_{stamp}.json"
    bw = measure_bandwidth(args.copy_repeats)
    meta = run_meta(bw["env"])  # the versions the child that owns the GPU read (None: it failed, read here)
    env = meta["env"]
    run = {"schema": "fp8_draft_bench.run/1", **meta, "started": meta["date"], "sglang_version": env.get("sglang"),
           "gpu": (env.get("gpus") or [None])[0], "copy_bandwidth": bw["copy_bandwidth"], "load_tool": LOAD_TOOL,
           "settings": {k: v for k, v in vars(args).items() if k != "case_list"}, "cases": {}, "outcomes": {}}
    log(f"copy bandwidth: {bw['copy_bandwidth'].get('gb_s', bw['copy_bandwidth'].get('error'))} GB/s")
    data = out / "data" / "heldout.json"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text(json.dumps(asum.sharegpt_conversations(load_prompts(EVAL_PROMPTS), "in")))
    fixtures: dict = {}
    write_json(run_file, run)
    export(args, run_file, run)
    for i, case in enumerate(args.case_list):
        c = fs.parse_case(case)
        fxname = c["fixture"]
        built = fxname in fixtures or load_fixture(fixture_paths(fxname).root) is not None
        need = START_S[fxname] + MEASURE_S[c["kind"]] + STOP_S + (0 if built else BUILD_S.get(fxname, 10)
                                                                   + FIRST_AFTER_BUILD_S.get(fxname, 0))
        if left(args) < need:
            run["outcomes"][case] = f"not started: {left(args):.0f} s left before --deadline, needs ~{need} s"
        else:
            if fxname not in fixtures:
                t = time.time()
                try:
                    fixtures[fxname] = ensure_fixture(fxname)
                    run["outcomes"][f"fixture {fxname}"] = f"ready in {time.time() - t:.0f} s"
                    # which build of the trained pair: cells of two runs pair only when the ids match
                    run.setdefault("fixture_builds", {})[fxname] = base_build_id(fixtures[fxname].root)
                except Exception as exc:  # noqa: BLE001 - that fixture's cases are recorded as failed
                    fixtures[fxname] = exc
                    run["outcomes"][f"fixture {fxname}"] = f"failed: {type(exc).__name__}: {str(exc)[-300:]}"
            fx = fixtures[fxname]
            if isinstance(fx, Exception):
                run["cases"][case] = {**c, "error": f"fixture {fxname} failed: {fx}"[:1500], "t_end": time.time()}
            elif left(args) < START_S[fxname] + MEASURE_S[c["kind"]] + STOP_S:
                run["outcomes"][case] = f"not started: {left(args):.0f} s left after the fixture build"
            else:
                run["cases"][case] = run_case(args, case, fx, args.port + i, run, data)
            rc = run["cases"].get(case)
            if rc is not None:
                run["outcomes"][case] = "error: " + rc["error"][:200] if rc.get("error") else (
                    "measured" + ("" if rc.get("active") else f", backend not proven: {rc.get('active_why')}"))
        log(f"{case}: {run['outcomes'][case]}")
        write_json(run_file, run)
        export(args, run_file, run)
    text = export(args, run_file, run)
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
