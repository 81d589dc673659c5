"""`trained-8b` on one GPU: build, function preservation, cost realism, speedup.

Cases (each one SGLang server through the overlay launcher, run in this order within --deadline):
  base_8b     trained-8b, no speculation: tok/s at each --batch-sizes, ms per output token at batch 1
  dummy_8b    llama3-8b dummy weights, no speculation: ms per output token at batch 1 (cost reference)
  spec_8b     trained-8b, EAGLE3 3/1/4: the held-out prompts' output ids and accept length, then tok/s
  spec_small  trained, EAGLE3 3/1/4 (CUDA graphs off: only outputs and acceptance are compared)
The noise floor of that comparison (how often the same function, computed another way, gives other
greedy tokens) and a teacher-forced comparison (no free-running divergence):
  noise_small trained, EAGLE3 3/1/4, CUDA graphs off: outputs with all prompts in flight, then one at a time
  graph_small trained, EAGLE3 3/1/4, CUDA graphs for --batch-sizes (as spec_8b): all prompts in flight
  tf_small    trained, no speculation: per-position top-1 token and logprobs over prompt + the greedy
              continuation noise_small produced (the prompt alone if noise_small did not run)
  tf_8b       trained-8b, the same sequences: top-1 agreement with tf_small, logprob differences
              (tf_small also runs its sequences one at a time: the teacher-forced noise floor)
Prompts: the shipped held-out eval prompts, greedy, --max-new-tokens, EOS honoured; every case sees
the same prompts. Writes OUT/summary.json (every key; null for what did not run) and
OUT/trained_8b_check.json (everything), and prints a table last.

    python benchmarks/trained_8b_check.py --out OUT [--deadline 560] [--cases base_8b,dummy_8b,spec_8b,spec_small]
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import statistics
import time

from sglang_patches.offline.fixtures import ensure_fixture
from sglang_patches.httpjson import http_json
from sglang_patches.offline.sweep.load import run_batch
from sglang_patches.offline.sweep.prompts import EVAL_PROMPTS, load_prompts
from sglang_patches.offline.sweep.server import Server

from harness.files import run_meta  # benchmarks/, beside this script

COMMON = ["--attention-backend", "triton", "--sampling-backend", "pytorch", "--log-level", "warning"]
SPEC = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4"]
# rough seconds per case (start + measurement), to skip a case that cannot finish before the deadline
COST = {"base_8b": 110, "dummy_8b": 70, "spec_8b": 130, "spec_small": 50, "noise_small": 110, "graph_small": 70,
        "tf_small": 45, "tf_8b": 75}


def gen_ids(url: str, prompt: str, max_new: int) -> dict:
    out = http_json(url + "/generate", {"text": prompt, "sampling_params": {
        "max_new_tokens": max_new, "temperature": 0.0}}, timeout=600)
    meta = out.get("meta_info", {})
    return {"ids": out.get("output_ids"), "text": out.get("text", ""), "tokens": meta.get("completion_tokens", 0),
            "verify_ct": meta.get("spec_verify_ct")}


def outputs(url: str, prompts: list[str], max_new: int, concurrency: int = 0) -> dict:
    """Greedy outputs of every prompt, `concurrency` in flight (0: all at once)."""
    with cf.ThreadPoolExecutor(max_workers=concurrency or len(prompts)) as pool:
        rows = list(pool.map(lambda p: gen_ids(url, p, max_new), prompts))
    tokens = sum(r["tokens"] for r in rows)
    verify = sum(r["verify_ct"] or 0 for r in rows)
    return {"rows": rows, "accept_length": tokens / verify if verify else None, "tokens": tokens}


def speed(url: str, prompts: list[str], batch_sizes: list[int], max_new: int, per_bs: int) -> dict:
    run_batch(url, prompts, 1, 16)  # warm-up
    res = {}
    for bs in batch_sizes:
        run_batch(url, prompts, bs, 16, num_requests=bs, offset=bs)  # this batch size's graphs
        r = run_batch(url, prompts, bs, max_new, num_requests=max(per_bs, bs) if bs > 1 else per_bs,
                      ignore_eos=False)
        res[str(bs)] = {k: r[k] for k in ("tok_s", "tok_s_per_request", "output_tokens", "wall_s", "accept_length",
                                          "requests")}
        res[str(bs)]["ms_per_token_bs1"] = 1000.0 / r["tok_s"] if bs == 1 and r["tok_s"] else None
        print(f"  bs {bs}: {r['tok_s']:.1f} tok/s, accept {r['accept_length']}", flush=True)
    return res


def teacher_forced(url: str, seqs: list[list[int]], concurrency: int = 16) -> list[dict]:
    """Prefill each token sequence once (no generation beyond one token) and return, per position,
    SGLang's top-1 next-token id and logprob and the logprob of the token that actually follows:
    the model's function at every position of a fixed text, so two models compare token by token
    without one early difference changing everything after it."""
    def one(ids):
        out = http_json(url + "/generate", {"input_ids": ids, "sampling_params": {"max_new_tokens": 1,
                        "temperature": 0.0}, "return_logprob": True, "logprob_start_len": 0,
                        "top_logprobs_num": 1}, timeout=600)
        meta = out.get("meta_info", {})
        tops = [(t[0][1], t[0][0]) if t else (None, None) for t in meta.get("input_top_logprobs") or []]
        own = [t[0] if t else None for t in meta.get("input_token_logprobs") or []]
        return {"top1": [t[0] for t in tops], "top1_lp": [t[1] for t in tops], "token_lp": own}
    with cf.ThreadPoolExecutor(max_workers=concurrency) as pool:
        return list(pool.map(one, seqs))


def tf_compare(a: list[dict], b: list[dict]) -> dict:
    """Top-1 agreement and logprob differences between two teacher_forced() results."""
    agree = total = 0
    diffs = []
    if len(a) != len(b) or any(len(x["top1"]) != len(y["top1"]) for x, y in zip(a, b)):
        raise ValueError("teacher-forced results differ in sequences or positions; both servers must get the same input_ids")
    for x, y in zip(a, b):
        for i, j in zip(x["top1"], y["top1"]):
            if i is None or j is None:
                continue
            total += 1
            agree += i == j
        diffs += [abs(p - q) for p, q in zip(x["token_lp"], y["token_lp"]) if p is not None and q is not None]
    diffs.sort()
    return {"top1_agreement": agree / total if total else None, "positions": total,
            "token_logprob_abs_diff_mean": sum(diffs) / len(diffs) if diffs else None,
            "token_logprob_abs_diff_p99": diffs[int(0.99 * (len(diffs) - 1))] if diffs else None,
            "token_logprob_abs_diff_max": diffs[-1] if diffs else None}


def identical_fraction(a: list[dict], b: list[dict]) -> dict:
    same = total = full = 0
    first_div = []
    for x, y in zip(a, b):
        xi, yi = x["ids"] or [], y["ids"] or []
        n = max(len(xi), len(yi))
        eq = sum(1 for i, j in zip(xi, yi) if i == j)
        same, total = same + eq, total + n
        full += xi == yi
        d = next((k for k, (i, j) in enumerate(zip(xi, yi)) if i != j), min(len(xi), len(yi)))
        first_div.append(d)
    return {"token_identical_fraction": same / total if total else None, "requests_identical": full,
            "requests": len(first_div), "median_first_divergence": statistics.median(first_div) if first_div else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", default="base_8b,dummy_8b,spec_8b,spec_small")
    ap.add_argument("--deadline", type=float, default=560, help="seconds from start; later cases are skipped")
    ap.add_argument("--prompts", type=int, default=64, help="held-out prompts for outputs / acceptance")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--batch-sizes", default="1,8,32")
    ap.add_argument("--requests-per-bs", type=int, default=8, help="requests measured at batch 1 (and the minimum)")
    ap.add_argument("--port", type=int, default=30031)
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure='the trained-8b rows (build time, vs trained, vs plain)', folder='2026-12-01-trained-8b',
                       duration='about 10 min (--deadline 560 s; the build ~230 s)')
    args = ap.parse_args()
    if args.dry_run:
        return figure_cli.dry_run(out=args.out, servers=[f"{c}: python -m sglang_patches.launch --port {args.port}" for c in args.cases.split(",") if c], cases=[f"bs {b}, {args.requests_per_bs} requests x {args.max_new_tokens} tokens" for b in args.batch_sizes.split(",")])
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    cases = [c for c in args.cases.split(",") if c]
    bss = [int(x) for x in args.batch_sizes.split(",")]
    prompts = load_prompts(EVAL_PROMPTS)[: args.prompts]
    res: dict = {**run_meta(), "cases": {}}

    t0 = time.time()
    fx8 = ensure_fixture("trained-8b")
    res["build_s"] = round(time.time() - t0, 1)
    small = ensure_fixture("trained")
    with open(fx8.root / "fixture.json") as fh:
        stamp = json.load(fh)
    with open(small.root / "fixture.json") as fh:
        res["build_s_trained"] = json.load(fh).get("build_seconds")
    res["build_s_trained_8b_stamp"] = stamp.get("build_seconds")
    res["inflate"] = stamp.get("info")
    print(f"fixtures ready in {res['build_s']} s (trained {res['build_s_trained']} s, inflate "
          f"{(stamp.get('info') or {}).get('inflate_seconds')} s)", flush=True)
    graphs = ["--cuda-graph-bs-decode", *[str(b) for b in bss]]
    plan = {
        "base_8b": (["--model-path", str(fx8.target), "--patches", "none"] + graphs, "speed"),
        "dummy_8b": (None, "speed1"),
        "spec_8b": (["--model-path", str(fx8.target), "--speculative-draft-model-path", str(fx8.draft)] + SPEC + graphs
                    + ["--timing-log", os.path.join(args.out, "cycles_spec_8b.jsonl")], "outputs+speed"),
        "spec_small": (["--model-path", str(small.target), "--speculative-draft-model-path", str(small.draft)] + SPEC
                       + ["--disable-cuda-graph"], "outputs"),
        "noise_small": (["--model-path", str(small.target), "--speculative-draft-model-path", str(small.draft)] + SPEC
                        + ["--disable-cuda-graph"], "outputs+outputs1"),
        "graph_small": (["--model-path", str(small.target), "--speculative-draft-model-path", str(small.draft)] + SPEC
                        + graphs, "outputs"),
        "tf_small": (["--model-path", str(small.target), "--patches", "none", "--disable-cuda-graph"], "tf"),
        "tf_8b": (["--model-path", str(fx8.target), "--patches", "none", "--disable-cuda-graph"], "tf"),
    }
    tokenizer = None
    for name in cases:
        left = args.deadline - (time.time() - t_start)
        if left < COST[name]:
            res["cases"][name] = {"skipped": f"{left:.0f} s left before the deadline, needs ~{COST[name]} s"}
            print(f"{name}: skipped ({left:.0f} s left)", flush=True)
            continue
        srv_args, what = plan[name]
        if name == "dummy_8b":  # the target alone: plain decode
            fxd = ensure_fixture("llama3-8b")
            srv_args = ["--model-path", str(fxd.target), "--load-format", "dummy", "--patches", "none",
                        "--cuda-graph-bs-decode", "1"]
        r: dict = {}
        srv = Server(srv_args + COMMON, port=args.port, log_path=os.path.join(args.out, f"server_{name}.log"))
        try:
            srv.start().wait_ready(300)
            r["startup_s"] = round(srv.started_s, 1)
            print(f"{name}: up in {r['startup_s']} s", flush=True)
            if "outputs" in what:
                o = outputs(srv.url, prompts, args.max_new_tokens)
                r["accept_length"] = o["accept_length"]
                r["output_tokens"] = o["tokens"]
                with open(os.path.join(args.out, f"outputs_{name}.json"), "w") as fh:
                    json.dump([x["ids"] for x in o["rows"]], fh)
                res.setdefault("_rows", {})[name] = o["rows"]
                print(f"  outputs: accept {o['accept_length']}", flush=True)
            if "outputs1" in what:  # the same server, one request at a time: another batch composition
                o1 = outputs(srv.url, prompts, args.max_new_tokens, concurrency=1)
                r["accept_length_concurrency1"] = o1["accept_length"]
                res.setdefault("_rows", {})[name + "_c1"] = o1["rows"]
                with open(os.path.join(args.out, f"outputs_{name}_concurrency1.json"), "w") as fh:
                    json.dump([x["ids"] for x in o1["rows"]], fh)
                print(f"  outputs one at a time: accept {o1['accept_length']}", flush=True)
            if what == "tf":
                if tokenizer is None:
                    from transformers import AutoTokenizer
                    tokenizer = AutoTokenizer.from_pretrained(str(small.target))
                cont = (res.get("_rows") or {}).get("noise_small")
                seqs = [tokenizer.encode(p) + ((cont[i]["ids"] or []) if cont else []) for i, p in enumerate(prompts)]
                res.setdefault("_tf", {})[name] = teacher_forced(srv.url, seqs)
                if name == "tf_small":  # its noise floor: the same model, one sequence at a time
                    try:
                        res["_tf"]["tf_small_c1"] = teacher_forced(srv.url, seqs, concurrency=1)
                    except Exception as exc:  # noqa: BLE001 - tf_small's own result stands
                        r["noise_error"] = repr(exc)[:1000]
                r["tf_sequences"], r["tf_tokens"] = len(seqs), sum(len(x) for x in seqs)
                r["tf_continuation"] = "noise_small greedy outputs" if cont else "prompt only"
                print(f"  teacher-forced: {r['tf_tokens']} positions", flush=True)
            if "speed" in what:
                r["speed"] = speed(srv.url, prompts, [1] if what == "speed1" else bss, args.max_new_tokens,
                                   args.requests_per_bs)
            if name == "spec_8b":
                st = (http_json(srv.url + "/spec_timing") or {}).get("spec_timing") or {}
                r["timer"] = {k: st.get(k) for k in ("accept_length", "pos_rates", "phases", "cycles", "shares")}
        except Exception as exc:  # noqa: BLE001 - record and go on with the next case
            r["error"] = repr(exc)[:3000]
            print(f"{name}: ERROR {repr(exc)[:300]}", flush=True)
        finally:
            srv.stop()
        res["cases"][name] = r

    rows = res.pop("_rows", {})
    c = res["cases"]
    tfs = res.pop("_tf", {})
    ident = identical_fraction(rows["spec_small"], rows["spec_8b"]) if {"spec_small", "spec_8b"} <= set(rows) else {}
    res["identity"] = ident
    # the noise floor: the same trained pair, the same prompts, computed two other ways
    res["noise_batch"] = (identical_fraction(rows["noise_small"], rows["noise_small_c1"])
                          if "noise_small_c1" in rows else {})
    res["noise_graph"] = (identical_fraction(rows["noise_small"], rows["graph_small"])
                          if {"noise_small", "graph_small"} <= set(rows) else {})
    res["teacher_forced"] = tf_compare(tfs["tf_small"], tfs["tf_8b"]) if {"tf_small", "tf_8b"} <= set(tfs) else {}
    res["teacher_forced_noise"] = (tf_compare(tfs["tf_small"], tfs["tf_small_c1"])
                                   if {"tf_small", "tf_small_c1"} <= set(tfs) else {})

    def sp(case, bs, key="tok_s"):
        return (((c.get(case) or {}).get("speed") or {}).get(str(bs)) or {}).get(key)

    def ratio(a, b):
        return a / b if a and b else None
    summary = {
        "token_identical_fraction": ident.get("token_identical_fraction"),
        "accept_length_trained": (c.get("spec_small") or {}).get("accept_length"),
        "accept_length_trained_8b": (c.get("spec_8b") or {}).get("accept_length"),
        "step_ms_trained_8b": sp("base_8b", 1, "ms_per_token_bs1"),
        "step_ms_llama3_8b_dummy": sp("dummy_8b", 1, "ms_per_token_bs1"),
        **{f"speedup_bs{b}": ratio(sp("spec_8b", b), sp("base_8b", b)) for b in bss},
        "search_pick_ratio_bs1": None, "search_pick_ratio_bs8": None,
        "overhead_ratio_bs1": None, "overhead_ratio_bs16": None, "overhead_ratio_bs64": None,
        "build_s": res["build_s"],
        "noise_identical_fraction_batch": res["noise_batch"].get("token_identical_fraction"),
        "noise_identical_fraction_graph": res["noise_graph"].get("token_identical_fraction"),
        "teacher_forced_top1_agreement": res["teacher_forced"].get("top1_agreement"),
        "teacher_forced_logprob_abs_diff_mean": res["teacher_forced"].get("token_logprob_abs_diff_mean"),
        "teacher_forced_noise_top1_agreement": res["teacher_forced_noise"].get("top1_agreement"),
    }
    res["summary"] = summary
    res["wall_s"] = round(time.time() - t_start, 1)
    with open(os.path.join(args.out, "trained_8b_check.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    with open(os.path.join(args.out, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    print("| key | value |")
    for k, v in summary.items():
        print(f"| {k} | {v if not isinstance(v, float) else round(v, 4)} |")
    for k in ("identity", "noise_batch", "noise_graph", "teacher_forced", "teacher_forced_noise"):
        print(f"| {k} | {res[k]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
