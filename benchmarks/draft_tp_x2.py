"""draft_tp on 2 GPUs: correctness, performance and collective latencies (run 2026-11-29:
benchmarks/results/2026-11-29-draft-tp-tp2-8b).

    python benchmarks/draft_tp_x2.py --out OUT_DIR [--correct-fixture trained] [--perf-fixture llama3-8b]

Needs 2 GPUs, sglang 0.5.17 and `pip install -e .`. Three parts (--parts c,a,b; run in that order):

(c) collectives: NCCL all-reduce / all-gather latency between the 2 GPUs (torch.distributed, CUDA
    events, median of --iters) for the drafter's per-step messages: all-reduce [bs*topk, H] (embedding,
    o_proj, down_proj: 3 per layer step) and the logits all-gather [bs*topk, V_draft/2]; the on-paper
    saving of a TP1 drafter per cycle = (steps - 1) draft forwards + 1 draft-extend forward of those.
(a) correctness: target TP2 with the stock drafter (draft TP2) vs `--draft-tp-size 1`, greedy, the
    same --prompts: token-identical outputs and accept length (mean over requests); plus a short run with
    SGLANG_PATCHES_DRAFT_TP_SYNC=check (all ranks must draft the same tree without the broadcast).
(b) performance: draft_tp_bench.py's server benchmark at N = 2: the 8B-shaped pair with
    SGLANG_SIMULATE_ACC_LEN, K=2 (stock) vs K=1 in one run, topk 1, at batch 1 and 16: draft / extend /
    verify / cycle GPU ms per cycle (median, mean, p90 over that batch size's decode cycles), the
    median wall ms per cycle and end-to-end tok/s (recorded 2026-11-29 with this script's own copy,
    which had no per-batch-size warm-up).
Writes OUT_DIR/draft_tp_x2.json (+ server logs) and prints a short table last.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from sglang_patches.offline.sweep.prompts import load_prompts
from sglang_patches.httpjson import http_json
from sglang_patches.offline.sweep.server import Server

COMMON = ["--tp-size", "2", "--attention-backend", "triton", "--sampling-backend", "pytorch",
          "--mem-fraction-static", "0.8"]  # headroom: gathered embedding (~1 GB) + 2x draft KV heads at TP1


# ---------------------------------------------------------------- (c) collectives

def collectives(args) -> dict:
    """The N-GPU micro-benchmark of draft_tp_bench.py at N = 2, for this drafter width."""
    import argparse as _ap

    import draft_tp_bench  # benchmarks/ is on sys.path when this script runs

    sub = _ap.Namespace(out=args.out, tp=2, batch_sizes=[1, 16], steps=[args.steps], draft_vocab=args.draft_vocab,
                        iters=args.iters)
    return draft_tp_bench.collectives(sub, hiddens=(args.hidden,))


# ---------------------------------------------------------------- servers

def _server(args, name, extra, env=None, timing_log=None):
    port = args.port + _server.count
    _server.count += 1
    flags = [*COMMON, *extra, *(["--timing-log", timing_log] if timing_log else [])]
    return Server(flags, port=port, log_path=os.path.join(args.out, f"server-{name}.log"), env=env)


_server.count = 0


def _generate(url, prompt, max_new):
    out = http_json(url + "/generate", {"text": prompt, "sampling_params": {
        "max_new_tokens": max_new, "temperature": 0.0}}, timeout=600)
    meta = out.get("meta_info", {})
    return {"text": out.get("text"), "output_ids": out.get("output_ids"),
            "accept_length": meta.get("spec_accept_length")}


def correctness(args, prompts) -> dict:
    runs = {}
    for name, extra, env in (("stock_tp2", [], None), ("draft_tp1", ["--draft-tp-size", "1"], None)):
        with _server(args, f"a-{name}", ["--fixture", args.correct_fixture, *extra], env=env) as srv:
            srv.wait_ready(args.ready_timeout)
            runs[name] = [_generate(srv.url, p, args.max_new_tokens) for p in prompts]
    check = {"prompts": 0, "ok": None, "error": None}
    if args.check_prompts:
        env = {"SGLANG_PATCHES_DRAFT_TP_SYNC": "check"}
        with _server(args, "a-check", ["--fixture", args.correct_fixture, "--draft-tp-size", "1"], env=env) as srv:
            srv.wait_ready(args.ready_timeout)
            try:
                for p in prompts[:args.check_prompts]:
                    _generate(srv.url, p, args.max_new_tokens)
                    check["prompts"] += 1
                check["ok"] = True
            except Exception as exc:  # noqa: BLE001 - a failing check kills the server: record it
                check.update(ok=False, error=f"{type(exc).__name__}: {exc}; log: {srv.log_tail(15)}")
    a, b = runs["stock_tp2"], runs["draft_tp1"]
    same = [x["output_ids"] == y["output_ids"] if x["output_ids"] is not None else x["text"] == y["text"]
            for x, y in zip(a, b)]
    acc = {k: statistics.mean([r["accept_length"] for r in v if r["accept_length"]] or [0]) for k, v in runs.items()}
    first_diff = next((i for i, s in enumerate(same) if not s), None)
    return {"fixture": args.correct_fixture, "prompts": len(prompts), "identical": sum(same),
            "all_identical": all(same), "first_mismatch": first_diff, "accept_length": acc,
            "sync_check": check, "samples": {k: [r["text"][:200] for r in v[:3]] for k, v in runs.items()}}


def performance(args, prompts) -> dict:
    """Part (b) is draft_tp_bench.py's server benchmark at N = 2 (one code path for every TP size):
    K = 2 (stock) vs K = 1, --steps, topk 1, warm-up per batch size, median and tail phase times."""
    import draft_tp_bench as bench  # benchmarks/ is on sys.path when this script runs

    sub = bench.parse_args(["--out", args.out, "--tp", "2", "--fixtures", args.perf_fixture,
                            "--draft-tp", ",".join(map(str, args.perf_k)), "--steps", str(args.steps),
                            "--batch-sizes", *map(str, args.batch_sizes), "--simulate-acc-len", str(args.simulate_acc_len),
                            "--new-tokens", str(args.perf_new_tokens), "--rounds", str(args.rounds),
                            "--port", str(args.port + 50), "--ready-timeout", str(args.ready_timeout)])
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    plan = bench.plan_configs([args.perf_fixture], bench.parse_ks(sub.draft_tp, 2), sub.steps)
    res: dict = {"rows": [], "ratios": []}
    bench.run_all(sub, plan, prompts, res, lambda _: None)
    return {"fixture": args.perf_fixture, "simulate_acc_len": args.simulate_acc_len, **res}


def table(result) -> str:
    lines = []
    if "collectives" in result:
        lines.append("collectives (2 GPUs, bf16, eager, median us): tokens  all_reduce[t,H]  all_gather[t,V/2]")
        h = f"all_reduce_us_h{result['collectives']['hiddens'][0]}"
        lines += [f"  {r['tokens']:>5}  {r[h]:8.1f}  {r['all_gather_us']:8.1f}" for r in result["collectives"]["rows"]]
        for m in result["collectives"]["on_paper"]:
            lines.append(f"  on paper bs={m['bs']}: TP1 drafter saves ~{m['saved_per_cycle_us']:.0f} us/cycle "
                         "(eager latencies: overstates the in-graph cost)")
    if "correctness" in result:
        c = result["correctness"]
        lines.append(f"correctness ({c['fixture']}): {c['identical']}/{c['prompts']} identical; accept length "
                     + ", ".join(f"{k} {v:.3f}" for k, v in c["accept_length"].items())
                     + f"; sync=check ok={c['sync_check']['ok']}")
    if "performance" in result:
        import draft_tp_bench as bench

        lines.append("performance:")
        lines.append(bench.table(result["performance"], 2))
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--parts", default="c,a,b", help="any of c (collectives), a (correctness), b (performance)")
    p.add_argument("--correct-fixture", default="trained")
    p.add_argument("--perf-fixture", default="llama3-8b")
    p.add_argument("--prompts", type=int, default=16, help="correctness prompts")
    p.add_argument("--check-prompts", type=int, default=4, help="prompts under SYNC=check (0 = skip)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--perf-new-tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3, help="requests per batch slot in a performance run")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16])
    p.add_argument("--perf-k", type=int, nargs="+", default=[2, 1], help="draft TP sizes (2 = stock drafter)")
    p.add_argument("--simulate-acc-len", type=float, default=3.0)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--topk", type=int, default=1)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--draft-vocab", type=int, default=32000)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--port", type=int, default=31700)
    p.add_argument("--ready-timeout", type=float, default=900)
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(p, figure='the --draft-tp-size 1 at TP2 rows (8B)', folder='2026-11-29-draft-tp-tp2-8b',
                       duration='about 10 min on two GPUs')
    args = p.parse_args(argv)
    if args.dry_run:
        return figure_cli.dry_run(out=args.out, cases=[f"part {x}" for x in args.parts.split(",") if x], servers=[f"a: {args.correct_fixture} at TP2, draft TP 2 vs 1, {args.prompts} prompts", f"b: {args.perf_fixture} at TP2, draft TP {args.perf_k}, bs {args.batch_sizes}, port {args.port}"])
    os.makedirs(args.out, exist_ok=True)
    prompts = load_prompts()
    from harness.files import run_meta  # benchmarks/, beside this script

    result = {**run_meta(), "note": "the GPU verification of draft_tp at TP2"}
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    for part in parts:
        t0 = time.time()
        try:
            if part == "c":
                result["collectives"] = collectives(args)
            elif part == "a":
                result["correctness"] = correctness(args, prompts[:args.prompts])
            elif part == "b":
                result["performance"] = performance(args, prompts)
                failed = [r for r in result["performance"]["rows"] if r.get("error")]
                if failed:  # the benchmark keeps going past a failed config: still a failed part
                    raise RuntimeError(f"{len(failed)} performance rows failed: {failed[0]['error'][:300]}")
        except Exception as exc:  # noqa: BLE001 - keep the other parts' results
            result.setdefault("errors", {})[part] = f"{type(exc).__name__}: {exc}"
        result.setdefault("seconds", {})[part] = round(time.time() - t0, 1)
        with open(os.path.join(args.out, "draft_tp_x2.json"), "w") as fh:
            json.dump(result, fh, indent=1)
    print(table(result))
    for part, err in result.get("errors", {}).items():
        print(f"part {part} failed: {err[:2000]}")
    return 1 if result.get("errors") else 0


if __name__ == "__main__":
    raise SystemExit(main())
