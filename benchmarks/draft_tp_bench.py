"""draft_tp at TP N (4 or 8 GPUs): stock drafter (K=N) vs `--draft-tp-size K` per cycle.

    python benchmarks/draft_tp_bench.py --out OUT_DIR [--tp N] [--fixtures llama3-8b,kimi-k2-shape]
        [--draft-tp N,1] [--steps 2,3,5] [--batch-sizes 1 16] [--parts c,b] [--deadline SECONDS]

Needs N GPUs on one host, sglang 0.5.17 and `pip install -e .` (N defaults to the `nvidia-smi -L`
count; CUDA is not initialised in this process before the servers start).
(c) collectives, first: NCCL all-reduce [tokens, H] (H = 4096 and 7168) and all-gather [tokens, V/N]
    latency among the N GPUs (CUDA events, median of --iters), and the on-paper saving of a TP1
    drafter per cycle = (steps - 1) draft forwards + 1 draft-extend forward, each 3 all-reduces
    (embedding, o_proj, down_proj) + 1 logits all-gather, for each H, steps and batch size.
(b) performance: for each fixture, K and steps (topk 1, draft tokens = steps + 1) one drop-in server
    (target TP N, triton attention, SGLANG_SIMULATE_ACC_LEN), warmed up, then per batch size a closed
    loop of bs * --rounds requests: tok/s, accept length, and from the timing JSONL (rank 0 decode
    cycles of that batch size) median / mean / p90 of draft, verify, extend, cycle, gpu_gap and
    host_gap ms and the wall ms per cycle (median `t` step between consecutive cycle ids).
    Order: steps 3 of the first fixture (every K), steps 3 of the next fixtures, then the other steps.
A failed config becomes rows with `error` (+ server log tail); with --deadline the configs that would
start later than deadline - 100 s become rows with `skipped: deadline`. OUT_DIR/draft_tp_bench.json is
rewritten after every config; server logs and timing JSONLs go to OUT_DIR/logs/. A table prints last.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time


PHASES = ("draft", "verify", "extend", "cycle", "gpu_gap", "host_gap")
HIDDENS = (4096, 7168)
MARGIN_S = 100.0  # a config is not started later than deadline - MARGIN_S


# ---------------------------------------------------------------- pure parts (tested on CPU)

def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for ln in out.splitlines() if ln.startswith("GPU "))


def parse_ks(text: str, n: int) -> list[int]:
    ks = []
    for part in text.split(","):
        part = part.strip()
        k = n if part.upper() == "N" else int(part)
        if part and k not in ks:
            ks.append(k)
    return ks


def plan_configs(fixtures: list[str], ks: list[int], steps: list[int], primary: int = 3) -> list[tuple]:
    """(fixture, k, steps) in run order: `primary` steps for every fixture first, then the other steps."""
    first = primary if primary in steps else steps[0]
    order = [first] + [s for s in steps if s != first]
    return [(f, k, s) for s in order for f in fixtures for k in ks]


def server_flags(fixture: str, n: int, k: int, steps: int, timing_log: str, max_bs: int = 16) -> list[str]:
    flags = ["--fixture", fixture, "--tp-size", str(n), "--speculative-num-steps", str(steps),
             "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(steps + 1),
             "--attention-backend", "triton", "--sampling-backend", "pytorch",
             "--cuda-graph-max-bs-decode", str(max(16, max_bs)), "--mem-fraction-static", "0.8",
             "--timing-log", timing_log]
    return flags + (["--draft-tp-size", str(k)] if k < n else [])


def dist(vals: list[float]) -> dict:
    vals = sorted(v for v in vals if v is not None)
    if not vals:
        return {"med": None, "mean": None, "p90": None}
    p90 = vals[0] if len(vals) == 1 else statistics.quantiles(vals, n=10, method="inclusive")[8]
    return {"med": statistics.median(vals), "mean": statistics.fmean(vals), "p90": p90}


def summarize(recs: list[dict], bs: int) -> dict:
    """Per-cycle stats of rank-0 decode records of batch size bs."""
    recs = sorted((r for r in recs if r.get("kind") == "decode" and r.get("bs") == bs
                   and r.get("rank", 0) == 0), key=lambda r: r["cycle"])
    out: dict = {"cycles": len(recs)}
    for p in PHASES:
        d = dist([r.get(f"{p}_ms") for r in recs])
        out.update({f"{p}_ms_{s}": v for s, v in d.items()})
    walls = [(b["t"] - a["t"]) * 1000.0 for a, b in zip(recs, recs[1:]) if b["cycle"] == a["cycle"] + 1]
    out["wall_ms_per_cycle"] = statistics.median(walls) if walls else None
    acc = [statistics.fmean(r["accepted"]) + 1 for r in recs if r.get("accepted")]
    out["accept_length_cycles"] = statistics.fmean(acc) if acc else None
    return out


def ratios(rows: list[dict], n: int) -> list[dict]:
    """K vs K=N per (fixture, steps, bs): tok/s ratio, mean draft ms ratio, and the ratio of the median
    wall ms per cycle (robust to the one-off hiccups that move tok/s and means in a ~1 s measurement)."""
    ok = {(r["fixture"], r["steps"], r["bs"], r["draft_tp"]): r for r in rows if r.get("tok_s") is not None}
    out = []
    for (f, s, bs, k), r in ok.items():
        base = ok.get((f, s, bs, n))
        if k == n or base is None:
            continue
        dm, bm = r.get("draft_ms_mean"), base.get("draft_ms_mean")
        wm, bw = r.get("wall_ms_per_cycle"), base.get("wall_ms_per_cycle")
        out.append({"fixture": f, "steps": s, "bs": bs, "draft_tp": k,
                    "tok_s_ratio": r["tok_s"] / base["tok_s"] if base["tok_s"] else None,
                    "draft_ms_mean_ratio": dm / bm if dm is not None and bm else None,
                    "wall_ms_per_cycle_ratio": wm / bw if wm is not None and bw else None})
    return out


def on_paper(rows: list[dict], steps_list: list[int], batch_sizes: list[int], n: int,
             hiddens=HIDDENS) -> list[dict]:
    by = {r["tokens"]: r for r in rows}
    out = []
    for h in hiddens:
        for s in steps_list:
            for bs in batch_sizes:
                a, b = by.get(bs), by.get(bs * (s + 1))  # topk 1: a draft step has bs tokens
                if a is None or b is None:
                    continue
                step = 3 * a[f"all_reduce_us_h{h}"] + a["all_gather_us"]
                ext = 3 * b[f"all_reduce_us_h{h}"] + b["all_gather_us"]
                out.append({"n": n, "hidden": h, "steps": s, "bs": bs, "per_draft_step_us": step,
                            "extend_us": ext, "saved_per_cycle_us": (s - 1) * step + ext})
    return out


# ---------------------------------------------------------------- (c) collectives at world size N

def _coll_worker(rank, world, port, sizes, hiddens, vocab, iters, out_path):
    import torch
    import torch.distributed as dist_

    torch.cuda.set_device(rank)
    dist_.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)

    def timed(op):
        for _ in range(20):
            op()
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            op()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1000.0)
        return statistics.median(times)

    res = []
    for tokens in sizes:
        row = {"tokens": tokens}
        for h in hiddens:
            x = torch.randn(tokens, h, dtype=torch.bfloat16, device="cuda")
            row[f"all_reduce_us_h{h}"] = timed(lambda: dist_.all_reduce(x))
        shard = torch.randn(tokens, vocab // world, dtype=torch.bfloat16, device="cuda")
        gathered = torch.empty(world * tokens, vocab // world, dtype=torch.bfloat16, device="cuda")
        row["all_gather_us"] = timed(lambda: dist_.all_gather_into_tensor(gathered, shard))
        res.append(row)
    if rank == 0:
        with open(out_path, "w") as fh:
            json.dump(res, fh)
    dist_.destroy_process_group()


def collectives(args, hiddens=HIDDENS) -> dict:
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sizes = sorted({1, 2, 4, 8, 16} | set(args.batch_sizes)
                   | {bs * (s + 1) for bs in args.batch_sizes for s in args.steps})
    path = os.path.join(args.out, "collectives.json")
    mp.spawn(_coll_worker, args=(args.tp, port, sizes, hiddens, args.draft_vocab, args.iters, path),
             nprocs=args.tp)
    rows = json.load(open(path))
    return {"world": args.tp, "draft_vocab": args.draft_vocab, "hiddens": list(hiddens), "rows": rows,
            "on_paper": on_paper(rows, args.steps, args.batch_sizes, args.tp, hiddens)}


# ---------------------------------------------------------------- (b) servers

def _decode_records(path: str, start: int) -> list[dict]:
    """The timing JSONL's decode records after its first `start` lines."""
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        lines = fh.readlines()[start:]
    recs = [json.loads(ln) for ln in lines if ln.strip()]
    return [r for r in recs if r.get("kind") == "decode"]


def run_config(args, cfg, port, prompts, *, server_cls, run_batch_fn, clock, sleep) -> list[dict]:
    fixture, k, steps = cfg
    tag = f"{fixture}-k{k}-s{steps}"
    log = os.path.join(args.out, "logs", f"cycles-{tag}.jsonl")
    base = {"fixture": fixture, "draft_tp": k, "steps": steps, "tp": args.tp}
    env = {"SGLANG_SIMULATE_ACC_LEN": str(args.simulate_acc_len)}
    flags = server_flags(fixture, args.tp, k, steps, log, max(args.batch_sizes))
    rows, srv, t0 = [], None, clock()
    left = (lambda: args.t0 + args.deadline - clock()) if args.deadline else (lambda: 1e9)
    try:
        srv = server_cls(flags, port=port, log_path=os.path.join(args.out, "logs", f"server-{tag}.log"), env=env)
        with srv:
            srv.wait_ready(max(30.0, min(args.ready_timeout, left() - 20)))
            ready_s = round(clock() - t0, 1)
            run_batch_fn(srv.url, prompts, 4, 32)  # warm-up
            for bs in args.batch_sizes:
                if left() < 30:
                    rows.append({**base, "bs": bs, "skipped": "deadline"})
                    continue
                run_batch_fn(srv.url, prompts, bs, 16, num_requests=bs,  # first replays at this batch size
                             timeout=max(30.0, min(600.0, left())))
                sleep(1.5)  # the JSONL sink flushes every second
                start = sum(1 for _ in open(log)) if os.path.exists(log) else 0
                r = run_batch_fn(srv.url, prompts, bs, args.new_tokens, num_requests=bs * args.rounds,
                                 timeout=max(30.0, min(600.0, left())))
                sleep(1.5)
                rows.append({**base, "bs": bs, "ready_s": ready_s, "tok_s": r["tok_s"],
                             "tok_s_per_request": r["tok_s_per_request"], "accept_length": r["accept_length"],
                             "wall_s": r.get("wall_s"), **summarize(_decode_records(log, start), bs)})
    except Exception as exc:  # noqa: BLE001 - a failed config is a row; the others still run
        tail = srv.log_tail(20) if srv is not None else ""
        done = {r["bs"] for r in rows}
        rows += [{**base, "bs": bs, "error": f"{type(exc).__name__}: {exc}"[:2000], "log_tail": tail}
                 for bs in args.batch_sizes if bs not in done]
    return rows


def run_all(args, plan, prompts, result, save, *, server_cls=None, run_batch_fn=None, clock=time.time,
            sleep=time.sleep) -> None:
    if server_cls is None:
        from sglang_patches.offline.sweep.server import Server as server_cls
    if run_batch_fn is None:
        from sglang_patches.offline.sweep.load import run_batch as run_batch_fn
    for i, cfg in enumerate(plan):
        if args.deadline and clock() > args.t0 + args.deadline - MARGIN_S:
            rows = [{"fixture": cfg[0], "draft_tp": cfg[1], "steps": cfg[2], "tp": args.tp, "bs": bs,
                     "skipped": "deadline"} for bs in args.batch_sizes]
        else:
            t0 = clock()
            rows = run_config(args, cfg, args.port + 10 * i, prompts, server_cls=server_cls,
                              run_batch_fn=run_batch_fn, clock=clock, sleep=sleep)
            for r in rows:
                r["config_s"] = round(clock() - t0, 1)
        result["rows"] += rows
        result["ratios"] = ratios(result["rows"], args.tp)
        save(result)


# ---------------------------------------------------------------- output

def table(result, n) -> str:
    f = lambda v, w=7, d=2: "-".rjust(w) if v is None else f"{v:{w}.{d}f}"  # noqa: E731
    lines = []
    for r in result.get("collectives", {}).get("on_paper", []):
        if r["bs"] in (1, 16) and r["steps"] == 3:
            lines.append(f"on paper N={r['n']} H={r['hidden']} steps=3 bs={r['bs']}: TP1 drafter saves "
                         f"~{r['saved_per_cycle_us']:.0f} us/cycle")
    lines.append("fixture          K  st   bs    tok/s  draft med/mean   verify med/mean  extend med/mean"
                 "   cycle med/mean  accept")
    for r in result.get("rows", []):
        head = f"{r['fixture']:<15} {r['draft_tp']:>2} {r['steps']:>3} {r['bs']:>4}"
        if r.get("tok_s") is None:
            lines.append(f"{head}  {r.get('skipped') or (r.get('error') or '?')[:80]}")
            continue
        cols = "  ".join(f"{f(r[f'{p}_ms_med'])}/{f(r[f'{p}_ms_mean'])}" for p in ("draft", "verify", "extend", "cycle"))
        lines.append(f"{head} {f(r['tok_s'], 8, 1)}  {cols}  {f(r['accept_length'], 6)}")
    for q in result.get("ratios", []):
        lines.append(f"K={q['draft_tp']} vs K={n}: {q['fixture']} steps={q['steps']} bs={q['bs']}: tok/s x"
                     f"{f(q['tok_s_ratio'], 5, 3)}, mean draft ms x{f(q['draft_ms_mean_ratio'], 5, 3)}, "
                     f"median wall ms/cycle x{f(q.get('wall_ms_per_cycle_ratio'), 5, 3)}")
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--tp", type=int, default=None, help="GPUs = target TP size (default: nvidia-smi -L count)")
    p.add_argument("--fixtures", default="llama3-8b,kimi-k2-shape")
    p.add_argument("--draft-tp", default="N,1", help="draft TP sizes; N = the stock drafter (no flag)")
    p.add_argument("--steps", default="2,3,5", help="speculative steps (topk 1, draft tokens = steps + 1)")
    p.add_argument("--batch-sizes", nargs="+", default=["1,16"], help="e.g. 1,16 or 1 16")
    p.add_argument("--parts", default="c,b", help="c (collectives) and/or b (performance); c runs first")
    p.add_argument("--simulate-acc-len", type=float, default=3.3)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3, help="requests per batch slot")
    p.add_argument("--deadline", type=float, default=None, help="seconds from start; no config starts after "
                   f"deadline - {MARGIN_S:.0f} s")
    p.add_argument("--draft-vocab", type=int, default=32000)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--port", type=int, default=31800)
    p.add_argument("--ready-timeout", type=float, default=900)
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(p, figure="the --draft-tp-size 1 at TP2 rows (7168 wide)", folder="2026-11-29-draft-tp-tp2-kimi",
                       duration="about 10 min on two GPUs")
    args = p.parse_args(argv)
    args.t0 = time.time()
    args.tp = args.tp or gpu_count()
    if args.tp < 1:
        p.error("no GPU found by nvidia-smi -L; pass --tp N")
    args.steps = [int(s) for s in args.steps.split(",") if s.strip()]
    args.batch_sizes = [int(b) for x in args.batch_sizes for b in x.split(",") if b.strip()]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    fixtures = [x.strip() for x in args.fixtures.split(",") if x.strip()]
    plan = plan_configs(fixtures, parse_ks(args.draft_tp, args.tp), args.steps)
    if args.dry_run:
        import figure_cli  # benchmarks/, beside this script
        return figure_cli.dry_run(out=os.path.join(args.out, "draft_tp_bench.json"), cases=plan,
                                  notes=[f"TP {args.tp}, batch sizes {args.batch_sizes}, port {args.port}"])
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    out_path = os.path.join(args.out, "draft_tp_bench.json")

    def save(res):   # the sweep's atomic write: a kill mid-write never leaves half a JSON
        from pathlib import Path

        from sglang_patches.offline.sweep.results import write_text_atomic

        write_text_atomic(Path(out_path), json.dumps(res, indent=1))

    from harness.files import run_meta  # benchmarks/, beside this script

    result = {**run_meta(), "tp": args.tp, "simulate_acc_len": args.simulate_acc_len, "plan": plan, "rows": [],
              "ratios": []}
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    if "c" in parts:
        try:
            result["collectives"] = collectives(args)
        except Exception as exc:  # noqa: BLE001 - the performance part still runs
            result["collectives_error"] = f"{type(exc).__name__}: {exc}"[:2000]
        save(result)
    if "b" in parts:
        from sglang_patches.offline.sweep.prompts import load_prompts

        run_all(args, plan, load_prompts(), result, save)
    result["seconds"] = round(time.time() - args.t0, 1)
    save(result)
    print(table(result, args.tp))
    if result.get("collectives_error"):
        print("collectives failed:", result["collectives_error"])
    return 1 if result.get("collectives_error") or any(r.get("error") for r in result["rows"]) else 0


if __name__ == "__main__":
    from sglang_patches.errors import UserError, exit_with

    try:
        raise SystemExit(main())
    except UserError as err:   # e.g. the result file cannot be written: one line, not a traceback
        exit_with(err, "draft_tp_bench")
