"""Adaptive speculation on one GPU: SGLang's `--speculative-adaptive` with its built-in config against
ours (`sglang-patches advise --adaptive-config` from one steps-5 timing log), fixed steps and plain
decode, measured with SGLang's own client (`python -m sglang.bench_serving`, ShareGPT-format files).

Prompt sets: `in` = the held-out stdlib prompts the trained pair was evaluated on
(sglang_patches/data/eval_prompts.jsonl); `ood` = Python of other domains the pair never saw
(benchmarks/data/ood_python.jsonl, or --ood-prompts: ood_data_python.jsonl is Python that is mostly data
literals, made by benchmarks/data/make_ood_data_python.py). Each at concurrency 1 and 8, --output-len
tokens (EOS ignored), greedy unless --temperature (sampled traffic: the target samples where the drafter
guessed greedily, so acceptance falls most where the target's next token is uncertain).
Rows: plain, s1-s5 (EAGLE3 topk 1), default (adaptive, SGLang's config), ours (adaptive, the config advise
writes from the s5 row's timing log of that set, the plain row's server log as baseline), zero (adaptive,
[0] wherever reached). Servers ("cases") run in --cases order; `mainjob` is the README's main job once.
Resumable: --out keeps every measured cell (OUT/cells), each server start (OUT/starts), configs and
logs; a rerun with the same --out measures only what is missing. No server starts unless its
estimated cost (adaptive_budget.py: this --out's own measured starts and cells once it has some) fits
before --deadline (seconds from this script's start, the fixture build included);
summary.json is written at the end of every run (missing cells null, goals null unless shown) and, with
--export DIR, copied there with the small files. A short table is printed last.

    python benchmarks/adaptive_bench.py --out /tmp/adaptive [--export $OUT] [--deadline 540]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import adaptive_budget as budget  # noqa: E402
import adaptive_prompts as aprompts  # noqa: E402
from harness import bench_serving as bclient  # noqa: E402
import adaptive_summary as asum  # noqa: E402
import adaptive_configs as acfg  # noqa: E402
import adaptive_log_checks as achk  # noqa: E402
from adaptive_bench_summary import summarize_and_export  # noqa: E402
from harness.files import read_text, write_json  # noqa: E402
from timing_log_check import CHECK_S, counters_pass, run_mainjob  # noqa: E402
import figure_cli  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
T0 = time.time()
CLIENT_LIMIT_S = 300.0  # one cell's bench_serving is stopped past this


def log(msg: str) -> None:
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def left(args) -> float:
    return args.deadline - (time.time() - T0)


def common_args() -> list[str]:
    return ["--attention-backend", "triton", "--sampling-backend", "pytorch", "--log-level", "info",
            "--cuda-graph-bs-decode", *[str(b) for b in acfg.GRAPH_BS]]


def spec_args(fx, steps: int, timing_log: str) -> list[str]:
    return ["--model-path", str(fx.target), "--load-format", fx.load_format,
            "--speculative-algorithm", fx.algorithm, "--speculative-draft-model-path", str(fx.draft),
            "--speculative-draft-load-format", fx.load_format, "--speculative-num-steps", str(steps),
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(steps + 1),
            "--timing-log", timing_log]


def prepare_data(out: Path) -> dict[str, Path]:
    from sglang_patches.offline.sweep.prompts import EVAL_PROMPTS, load_prompts

    paths = {}
    for pset, src in (("in", EVAL_PROMPTS), ("ood", aprompts.ood_prompts())):
        p = out / "data" / f"{pset}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(asum.sharegpt_conversations(load_prompts(src), pset)))
        paths[pset] = p
    return paths


def prompts_of(pset: str) -> list[str]:
    from sglang_patches.offline.sweep.prompts import EVAL_PROMPTS, load_prompts

    return load_prompts(EVAL_PROMPTS if pset == "in" else aprompts.ood_prompts())


# ---------------------------------------------------------------- configs for `ours`

def ensure_config(args, out: Path, pset: str, cells: dict) -> tuple[str | None, str]:
    """OUT/configs/ours_SET.json, written by advise from the s5 row's log of that set (reused when it
    exists and SGLang's loader accepts it); (path, how) or (None, why not)."""
    cfg = out / "configs" / f"ours_{pset}.json"
    s5 = cells.get(asum.cell_name("s5", pset, 1))  # before a reuse too: a kept config priced its build's s5 log
    if s5 is not None and s5.get("fixture_build") != args.fixture_build:
        return None, f"the s5 cells of '{pset}' measured another trained-8b build (its log prices another drafter); use a fresh --out"
    if cfg.exists():
        try:
            acfg.load_adaptive_config(str(cfg))
            return str(cfg), "reused"
        except (ValueError, OSError, KeyError, AttributeError) as exc:
            return None, f"{cfg} exists but SGLang's loader refuses it ({exc}); delete it to rewrite"
    window = asum.set_window(cells, "s5", pset)
    if window is None:
        return None, f"s5 has not measured both concurrencies of '{pset}' on one server"
    src = cells[asum.cell_name("s5", pset, 1)]["timing_log"]
    lines = achk.records_in_window(read_text(src).splitlines(), window)
    cut = out / "advise" / f"s5_{pset}.jsonl"
    cut.parent.mkdir(parents=True, exist_ok=True)
    cut.write_text("".join(lines))
    cmd = [sys.executable, "-m", "sglang_patches", "advise", str(cut), "--adaptive-config", str(cfg),
           "--cuda-graph-bs-decode", *[str(b) for b in acfg.GRAPH_BS]]  # the servers' own, so batches route as SGLang's
    base = [json.loads(read_text(p)) for p in sorted((out / "starts").glob("plain_*.json"))]
    base = [b for b in base if b.get("cells") and b.get("server_log") and Path(b["server_log"]).exists()]
    if base:
        cmd[5:5] = ["--baseline-log", base[-1]["server_log"]]
    cfg.parent.mkdir(parents=True, exist_ok=True)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=max(20.0, min(120.0, left(args))))
    except subprocess.TimeoutExpired:
        return None, f"advise did not finish in time: {' '.join(cmd)}"
    (out / "advise" / f"ours_{pset}.txt").write_text(f"$ {' '.join(cmd)}\n{r.stdout}{r.stderr}rc={r.returncode}\n")
    if r.returncode != 0 or not cfg.exists():
        return None, f"advise exited {r.returncode}: {(r.stderr or r.stdout).strip().splitlines()[-1:]}"
    try:
        acfg.load_adaptive_config(str(cfg))
    except (ValueError, OSError, KeyError, AttributeError) as exc:
        return None, f"SGLang's loader refuses advise's config ({exc})"
    return str(cfg), " ".join(cmd)


# ---------------------------------------------------------------- one server, its cells

def bench_cell(args, srv, fx, data: dict, row: str, pset: str, bs: int, meta: dict) -> dict:
    from sglang_patches.offline.sweep.load import run_batch

    n = args.prompts_bs1 if bs == 1 else args.prompts_bs8
    name = asum.cell_name(row, pset, bs)
    res_file = Path(args.out) / "bench" / f"{name}.jsonl"
    res_file.parent.mkdir(parents=True, exist_ok=True)
    res_file.unlink(missing_ok=True)
    port = srv.url.rsplit(":", 1)[1]
    cmd = [sys.executable, "-m", "sglang.bench_serving", "--backend", "sglang", "--host", "127.0.0.1",
           "--port", port, "--dataset-name", "sharegpt", "--dataset-path", str(data[pset]),
           "--num-prompts", str(n), "--sharegpt-output-len", str(args.output_len), "--max-concurrency", str(bs),
           "--model", str(fx.target), "--tokenizer", str(fx.target), "--seed", "1", "--disable-tqdm",
           "--output-file", str(res_file)] + aprompts.client_flags()
    t0 = time.time()
    # Warm-up on the same traffic and concurrency, so an adaptive server's estimate for this batch
    # size starts from this prompt set (its EMA needs 10 verifies before it moves at all).
    run_batch(srv.url, prompts_of(pset)[::-1], bs, 64, num_requests=max(2, bs), temperature=aprompts.temperature())
    r = bclient.run_bench_serving(args.bench_client, cmd, Path(args.out) / "bench" / f"{name}.log",
                                  timeout=max(10.0, min(CLIENT_LIMIT_S, left(args) - 3)))
    t1 = time.time()
    if r["rc"] != 0:
        raise RuntimeError(f"bench_serving exited {r['rc']}: {r['output'].strip()[-400:]}")
    cell = {"row": row, "set": pset, "bs": bs, "num_prompts": n, "output_len": args.output_len, "temperature": aprompts.temperature(),
            "result": asum.parse_bench_result(read_text(res_file)), "t0": t0, "t1": t1,
            "client_cmd": " ".join(cmd), "client_process": r["how"], "client_s": r["s"], **meta}
    problem = asum.cell_problem(cell, n, args.output_len)
    if problem:
        raise RuntimeError(f"{name}: {problem}")
    write_json(Path(args.out) / "cells" / f"{name}.json", cell)
    return cell


def run_case(args, case: str, fx, data, cells: dict, configs: dict) -> str:
    """Start the case's server, measure its missing cells, run the counters pass; the start's record
    goes to OUT/starts/CASE_STAMP.json whatever happens. Returns a one-line outcome."""
    from sglang_patches.offline.sweep.server import Server

    out = Path(args.out)
    todo = asum.missing_cells(case, cells)
    if not todo:
        return "all cells measured before"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out / "timing").mkdir(parents=True, exist_ok=True)
    timing = str(out / "timing" / f"{case}_{stamp}.jsonl")
    kind, cfg_path = "fixed", None
    if case == "plain":
        kind, srv_args = "plain", ["--model-path", str(fx.target), "--load-format", fx.load_format, "--patches", "none"]
        timing = None
    elif case in asum.FIXED:
        srv_args = spec_args(fx, asum.FIXED[case], timing)
    elif case in ("default", "zero"):
        kind = "adaptive"
        if case == "zero":  # SGLang's hysteresis keys, our candidates
            base, cfg_path = acfg.load_adaptive_config(None), str(out / "configs" / "zero.json")
            write_json(Path(cfg_path), {k: {**base[k], "candidate_steps": v} for k, v in asum.ZERO_CONFIG.items()})
        cfg = acfg.load_adaptive_config(cfg_path)
        srv_args = (spec_args(fx, acfg.initial_steps(cfg), timing) + ["--speculative-adaptive"]
                    + (["--speculative-adaptive-config", cfg_path] if cfg_path else []))
    else:
        kind = "adaptive"
        pset = case.split("_", 1)[1]
        cfg_path, how = ensure_config(args, out, pset, cells)
        configs[f"ours_{pset}_how"] = how
        if cfg_path is None:
            return f"not started: no config ({how})"
        cfg = acfg.load_adaptive_config(cfg_path)
        srv_args = (spec_args(fx, acfg.initial_steps(cfg), timing)
                    + ["--speculative-adaptive", "--speculative-adaptive-config", cfg_path])
    need = (budget.start_s(out, kind) + sum(budget.cell_s(args, cells, bs) for _, _, bs in todo)
            + (CHECK_S if timing else 0))
    if left(args) < need:
        return f"not started: {left(args):.0f} s left before --deadline, needs ~{need:.0f} s"
    server_log = str(out / "logs" / f"{case}_{stamp}.log")
    srv = Server(srv_args + common_args(), port=args.port, log_path=server_log)
    start = {"case": case, "server_cmd": " ".join(srv.cmd), "server_log": server_log, "timing_log": timing,
             "adaptive_config": cfg_path, "kind": kind, "cells": [], "errors": [], "fixture_build": args.fixture_build}
    start_file = out / "starts" / f"{case}_{stamp}.json"
    try:
        srv.start().wait_ready(max(30.0, min(args.start_timeout, left(args))))
        start["startup_s"] = round(srv.started_s, 1)
        start["ready_wall"] = time.time()
        start["ready_log_offset"] = os.path.getsize(server_log)
        log(f"{case}: up in {srv.started_s:.0f} s")
        meta = {"server_cmd": start["server_cmd"], "timing_log": timing, "server_log": server_log,
                "startup_s": start["startup_s"], "start": start_file.name, "fixture_build": args.fixture_build}
        for row, pset, bs in todo:
            if left(args) < budget.cell_s(args, cells, bs):
                start["errors"].append(f"{asum.cell_name(row, pset, bs)}: skipped, {left(args):.0f} s left")
                continue
            cell = bench_cell(args, srv, fx, data, row, pset, bs, meta)
            cells[asum.cell_name(row, pset, bs)] = cell
            start["cells"].append(asum.cell_name(row, pset, bs))
            log(f"  {asum.cell_name(row, pset, bs)}: {cell['result']['output_throughput']:.1f} tok/s, "
                f"accept {cell['result'].get('accept_length')}")
        if timing and left(args) > CHECK_S:
            start["counters"] = counters_pass(srv.url, timing, prompts_of(todo[-1][1]))
    except Exception as exc:  # noqa: BLE001 - one case failing must not lose the others' results
        start["errors"].append(f"{type(exc).__name__}: {str(exc)[-600:]}")
        log(f"{case}: {start['errors'][-1][:300]}")
    finally:
        srv.stop()
        write_json(start_file, start)
    return f"{len(start['cells'])} cells" + (f", errors: {start['errors']}" if start["errors"] else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="working folder kept between runs (resume)")
    ap.add_argument("--export", default=None, help="copy summary.json and the small files here at the end")
    ap.add_argument("--cases", default=",".join(asum.CASE_ORDER) + ",mainjob")
    ap.add_argument("--deadline", type=float, default=540.0, help="seconds from start; no server starts past it")
    ap.add_argument("--prompts-bs1", type=int, default=8)
    ap.add_argument("--prompts-bs8", type=int, default=64)  # 8 waves: the last wave's drain is 1/8 of the cell
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--port", type=int, default=30041)
    ap.add_argument("--start-timeout", type=float, default=240.0)
    ap.add_argument("--export-max-mb", type=float, default=15.0)
    ap.add_argument("--summary-only", action="store_true", help="rebuild summary.json from --out, start nothing")
    ap.add_argument("--client", choices=("persistent", "subprocess"), default="persistent",
                    help="bench_serving in one process for all cells (benchmarks/harness/bench_serving.py) or one per cell")
    ap.add_argument("--ood-prompts", default=None, metavar="JSONL",
                    help="the ood prompt set (default benchmarks/data/ood_python.jsonl; pinned per --out)")
    ap.add_argument("--temperature", type=float, default=None, help="sampling temperature of every request "
                    "(bench_serving's --temperature and the warm-up; default 0, greedy; pinned per --out)")
    figure_cli.declare(ap, figure="the --speculative-adaptive rows (ours / default / fixed / plain; sampled traffic)",
                       folder=("2026-12-03-adaptive-fixed-build", "2026-12-05-adaptive-sampled"), duration=
                       "about 10 min per call (--deadline 540-585 s; the trained-8b build ~250 s of the first), "
                       "3-4 resumed calls for the full table")
    args = ap.parse_args()
    try:
        names = [c for c in args.cases.split(",") if c.strip() and c.strip() != "mainjob"]
        cases = asum.parse_case_list(",".join(names)) if names else []
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if min(args.prompts_bs1, args.prompts_bs8) < 1 or args.output_len < 4:
        print("--prompts-bs1/--prompts-bs8 must be >= 1 and --output-len >= 4", file=sys.stderr)
        return 2
    for bs, n in ((1, args.prompts_bs1), (8, args.prompts_bs8)):
        if budget.cell_guess(args, bs) > CLIENT_LIMIT_S:
            print(f"--prompts-bs{bs} {n} x --output-len {args.output_len}: a cell would take ~{budget.cell_guess(args, bs):.0f} s, "
                  f"past the client's {CLIENT_LIMIT_S:.0f} s; give fewer prompts or tokens", file=sys.stderr)
            return 2
    if args.dry_run:
        return figure_cli.dry_run(
            out=args.out, servers=[f"{c}: python -m sglang_patches.launch --model-path <trained-8b> "
                                   f"{' '.join(common_args())} (speculative flags per case)" for c in cases],
            cases=[asum.cell_name(*cell) for c in cases for cell in asum.case_cells(c)]
            + (["mainjob"] if "mainjob" in args.cases.split(",") else []),
            notes=[f"bench_serving: --output-len {args.output_len}, {args.prompts_bs1} prompts at c1, "
                   f"{args.prompts_bs8} at c8, deadline {args.deadline:.0f} s"])
    out = Path(args.out)
    refused = (aprompts.temperature_problem(args.temperature)  # before either pin writes anything
               or aprompts.pin_ood_prompts(out, args.ood_prompts)  # creates --out only once the set is known
               or aprompts.pin_temperature(out, args.temperature))
    if refused:
        print(refused, file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):  # servers and bench_serving read local folders only
        os.environ.setdefault(key, "1")
    from sglang_patches.versions import collect

    env = collect()
    nprompts = {1: args.prompts_bs1, 8: args.prompts_bs8}
    cells = asum.load_cells(out, nprompts, args.output_len)
    configs: dict = {}
    outcomes: dict = {}
    args.bench_client = None  # the persistent client process, when --client persistent
    if not args.summary_only:
        from sglang_patches.offline.fixtures import base_build_id, ensure_fixture

        if args.client == "persistent" and args.cases:  # started first: its import overlaps the build
            (out / "bench").mkdir(parents=True, exist_ok=True)
            args.bench_client = bclient.PersistentClient(stderr_path=str(out / "bench" / "client.stderr")).start()

        t = time.time()
        try:
            fx = ensure_fixture("trained-8b")
        except Exception as exc:  # noqa: BLE001 - said in the summary; nothing can be measured
            outcomes["fixture"] = f"failed: {type(exc).__name__}: {str(exc)[-300:]}"
            args.cases = ""
        outcomes["fixture_s"] = round(time.time() - t, 1)
        log(f"trained-8b: {outcomes.get('fixture', 'ready')} in {outcomes['fixture_s']} s; {len(cells)} cells measured before")
        args.fixture_build = outcomes["fixture_build"] = base_build_id(fx.root) if "fixture" not in outcomes else None
        other = sorted(n for n, c in cells.items() if c.get("fixture_build") != args.fixture_build)
        if other and args.fixture_build:  # a fresh machine rebuilt the pair: its drafter is another one
            log(f"{len(other)} cells measured before on another trained-8b build ({', '.join(other[:4])}"
                f"{', ...' if len(other) > 4 else ''}): "
                "no ratio is taken between them and this run's cells")
        data = prepare_data(out)
        for name in [c.strip() for c in args.cases.split(",") if c.strip()]:
            try:
                outcomes[name] = (run_mainjob(args.out, left(args), max(30.0, min(args.start_timeout, left(args))))
                                  if name == "mainjob" else run_case(args, name, fx, data, cells, configs))
            except Exception as exc:  # noqa: BLE001 - the summary of what was measured is still written
                outcomes[name] = f"failed: {type(exc).__name__}: {str(exc)[-300:]}"
            log(f"{name}: {outcomes[name]}")
            if args.export:  # after every server: a call killed at its time limit still returns the rest
                summarize_and_export(args, cells, configs, env, outcomes)
    if args.bench_client is not None:
        args.bench_client.stop()
    print(summarize_and_export(args, cells, configs, env, outcomes), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
