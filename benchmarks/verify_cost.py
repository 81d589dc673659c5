"""Verify cost over a no-speculation decode step, MoE target vs dense target.

    python benchmarks/verify_cost.py --out DIR [--fixtures qwen3-moe-shape,llama3-8b]
        [--draft-tokens 2,4,6,8] [--batch-sizes 1,4,16] [--input-len 512] [--cycles 48] [--deadline 510]
    python benchmarks/verify_cost.py --out DIR --model TARGET_DIR --draft DRAFT_DIR [--extra "--tp-size 8"]

With --model / --draft your own checkpoints (local folders with a config.json, real weights, EAGLE3) are
measured in place of the fixtures, under the name of the target's folder: `advise --verify-cost
DIR/summary.json` then prices verify by your model's own growth over draft tokens.

One GPU for the fixtures, your model on the GPUs its --extra flags ask for (e.g. "--tp-size 8"; figures
are rank 0's); SGLang 0.5.17 or 0.5.23, the overlay installed (`pip install -e .`). For each fixture:
- a no-speculation server (the target alone) with the overlay's opt-in `step_timing` feature: per
  batch size the median GPU ms (CUDA events) of the rank-0 decode steps of that size during one
  closed batch of `bs` requests x --cycles tokens; for comparison also the wall ms per step as the
  difference of two closed batches that differ only in output length ((wall(N + cycles) - wall(N))
  / cycles), median of --repeats (a one-off stall in one run, e.g. a kernel compiled for a new
  prefill shape, moves this one; the GPU median does not see host stalls between steps);
- per draft-token count T one EAGLE-3 server (topk 1, steps T - 1, T draft tokens), with
  `SGLANG_SIMULATE_ACC_LEN=1` (every request accepts exactly the bonus token, so all requests of a
  batch stay in lockstep and each cycle's verify checks T tokens per request) and `--timing-log`:
  per batch size the median verify GPU ms (CUDA events) of the rank-0 decode cycles of that size
  measured during that batch, plus the draft / extend / cycle GPU ms and the wall ms per cycle.
Ratio = verify GPU ms / no-speculation decode-step GPU ms (both CUDA events on the worker's stream;
both spans hold the target forward, the verify's also its sampling). summary.json keeps every raw
number, and the same tables with the wall step (verify_over_step_wall_by_fixture).

Time: the servers of one round (one role for every fixture: the baselines, then one draft-token count
at a time; --parallel of them) start side by side (a 30B MoE + an 8B dense pair take about 90 GB with
--max-total-tokens capping the KV pools) and are measured one after the other, never while another
starts. CUDA graphs only for --batch-sizes, prefill graphs off, to cut start time. A round that would
end after --deadline (seconds since start) is skipped, its cells null. Order: baselines, T = 4, 8, 2, 6.
Output: DIR/summary.json (verify_over_step_moe / _dense: {bs: {T: ratio}}, rows with every raw figure,
the command, the environment), DIR/logs/ (server logs, timing JSONL); a table prints last.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from sglang_patches.errors import UserError, exit_with  # noqa: E402
from cycle_stats import PHASES, cycle_stats, median_or_none, p90_or_none, step_from_walls  # noqa: E402,F401
from moe_routing import distinct_experts_uniform, moe_meta, moe_shape, routing_env  # noqa: E402,F401
from harness.own_model import check_own_model, own_paths  # noqa: E402

MOE_FIXTURE, DENSE_FIXTURE = "qwen3-moe-shape", "llama3-8b"
ROUND_ORDER = (4, 8, 2, 6)          # draft-token counts first measured when the deadline is short
COMMON_FLAGS = ["--attention-backend", "triton", "--sampling-backend", "pytorch",
                "--disable-prefill-cuda-graph", "--mem-fraction-static", "0.8",
                "--max-total-tokens", "32768"]


# ---------------------------------------------------------------- pure parts (tested on CPU)

def int_list(text: str, name: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{name} {text!r}: expected comma-separated integers, e.g. 1,4,16") from None
    if not vals or any(v < 1 for v in vals):
        raise UserError(f"{name} {text!r}: expected positive integers, e.g. 1,4,16")
    return list(dict.fromkeys(vals))


def plan_rounds(fixtures: list[str], draft_tokens: list[int], parallel: int = 2) -> list[tuple[int | None, list[str]]]:
    """[(T or None for the baseline, fixtures started together)] in run order: baselines, then
    ROUND_ORDER, then the rest; at most `parallel` servers per round."""
    order = [t for t in ROUND_ORDER if t in draft_tokens] + [t for t in draft_tokens if t not in ROUND_ORDER]
    groups = [fixtures[i:i + parallel] for i in range(0, len(fixtures), parallel)]
    return [(t, list(g)) for t in [None, *order] for g in groups]


def server_flags(paths, draft_tokens: int | None, batch_sizes: list[int], timing_log: str | None,
                 extra: list[str] = ()) -> list[str]:
    """Launcher flags for one server of fixture `paths` (FixturePaths); T=None: no speculation."""
    flags = ["--model-path", str(paths.target), "--load-format", paths.load_format, *COMMON_FLAGS, *extra,
             "--cuda-graph-bs-decode", *[str(b) for b in sorted(batch_sizes)],
             "--max-running-requests", str(max(batch_sizes))]
    if draft_tokens is None:
        flags += ["--patches", "marker,timing,step_timing"]
        return flags + (["--timing-log", timing_log] if timing_log else [])
    flags += ["--speculative-algorithm", paths.algorithm, "--speculative-draft-model-path", str(paths.draft),
              "--speculative-draft-load-format", paths.load_format,
              "--speculative-num-steps", str(draft_tokens - 1), "--speculative-eagle-topk", "1",
              "--speculative-num-draft-tokens", str(draft_tokens)]
    if timing_log:
        flags += ["--timing-log", timing_log]
    return flags


def server_spec(args, paths, fixture: str, t: int | None) -> tuple[list[str], dict, str]:
    """(launcher flags, environment, timing log) of one server, as run() starts it and --dry-run prints it:
    every draft rejected (SGLANG_SIMULATE_ACC_LEN=1.0) so each verify holds t tokens, and --routing's switch."""
    log = os.path.join(args.out, "logs", f"{fixture}-{'base' if t is None else f't{t}'}.jsonl")
    env = {**routing_env(args.routing), **({"SGLANG_SIMULATE_ACC_LEN": "1.0"} if t is not None else {})}
    return server_flags(paths, t, args.batch_sizes, log, args.extra), env, log


def ratio_tables(rows: list[dict], fixture: str, batch_sizes: list[int], draft_tokens: list[int],
                 step_key: str = "step_ms") -> dict:
    """{bs: {T: verify ms / baseline step ms or None}} (string keys, for JSON)."""
    base = {r["bs"]: r.get(step_key) for r in rows if r["fixture"] == fixture and r["draft_tokens"] is None}
    spec = {(r["bs"], r["draft_tokens"]): r.get("verify_ms") for r in rows
            if r["fixture"] == fixture and r["draft_tokens"] is not None}
    table = {}
    for bs in batch_sizes:
        cells = {}
        for t in draft_tokens:
            v, s = spec.get((bs, t)), base.get(bs)
            cells[str(t)] = round(v / s, 4) if v is not None and s else None
        table[str(bs)] = cells
    return table


def summary(rows: list[dict], fixtures: list[str], batch_sizes: list[int], draft_tokens: list[int],
            meta: dict) -> dict:
    out = dict(meta)
    for key, fx in (("verify_over_step_moe", MOE_FIXTURE), ("verify_over_step_dense", DENSE_FIXTURE)):
        out[key] = ratio_tables(rows, fx, batch_sizes, draft_tokens) if fx in fixtures else None
    out["verify_over_step_by_fixture"] = {f: ratio_tables(rows, f, batch_sizes, draft_tokens) for f in fixtures}
    out["verify_over_step_wall_by_fixture"] = {f: ratio_tables(rows, f, batch_sizes, draft_tokens, "step_wall_ms")
                                               for f in fixtures}
    out["rows"] = rows
    return out


def format_table(summ: dict, fixtures: list[str], batch_sizes: list[int], draft_tokens: list[int]) -> str:
    lines = []
    base = {(r["fixture"], r["bs"]): r.get("step_ms") for r in summ["rows"] if r["draft_tokens"] is None}
    verify = {(r["fixture"], r["bs"], r["draft_tokens"]): r.get("verify_ms") for r in summ["rows"]
              if r["draft_tokens"] is not None}
    for f in fixtures:
        lines.append(f"{f}: verify GPU ms / no-spec decode step ms   (verify ms | step ms)")
        lines.append("  bs  " + "".join(f"{'T=' + str(t):>18}" for t in draft_tokens) + "   step ms")
        tab = summ["verify_over_step_by_fixture"][f]
        for bs in batch_sizes:
            cells = []
            for t in draft_tokens:
                r, v = tab[str(bs)][str(t)], verify.get((f, bs, t))
                cells.append(f"{'-' if r is None else f'{r:.2f}'} ({'-' if v is None else f'{v:.2f}'})".rjust(18))
            s = base.get((f, bs))
            lines.append(f"  {bs:<4}" + "".join(cells) + f"   {'-' if s is None else f'{s:.2f}'}")
    return "\n".join(lines)


# ---------------------------------------------------------------- GPU parts

def _prompt_ids(n: int, input_len: int, seed: int, vocab: int = 8000) -> list[list[int]]:
    """Distinct random prompts (no radix-cache sharing): ids 10..vocab-1 of the fixture tokenizer."""
    rng = random.Random(seed)
    return [[rng.randrange(10, vocab) for _ in range(input_len)] for _ in range(n)]


def run_closed_batch(url: str, prompts: list[list[int]], max_new_tokens: int, timeout: float = 300.0) -> float:
    """Send all prompts at once (one closed batch); return the wall seconds until the last answer."""
    import concurrent.futures as cf

    from sglang_patches.httpjson import http_json

    def one(ids):
        out = http_json(url + "/generate", {"input_ids": ids, "sampling_params": {
            "max_new_tokens": max_new_tokens, "temperature": 0.0, "ignore_eos": True}}, timeout=timeout)
        got = (out or {}).get("meta_info", {}).get("completion_tokens")
        if got != max_new_tokens:
            raise RuntimeError(f"asked for {max_new_tokens} tokens, got {got}")

    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(max_workers=len(prompts)) as pool:
        list(pool.map(one, prompts))
    return time.perf_counter() - t0


def _read_records(path: str) -> list[dict]:
    if not path or not os.path.exists(path):
        return []
    out = []
    with open(path) as fh:
        for ln in fh:
            if ln.strip():
                try:
                    out.append(json.loads(ln))
                except ValueError:
                    pass  # a line cut by the rotation or an unfinished flush
    return out


def measure_baseline(url: str, fixture: str, timing_log: str, args, seed: int) -> list[dict]:
    rows, windows = [], []
    short = 16
    for bs in args.batch_sizes:
        run_closed_batch(url, _prompt_ids(bs, args.input_len, seed), 8)  # warm-up at this batch size
        t0 = time.time()
        run_closed_batch(url, _prompt_ids(bs, args.input_len, seed + 1), args.cycles)
        windows.append((bs, t0, time.time()))
        shorts, longs = [], []
        for rep in range(args.repeats):
            shorts.append(run_closed_batch(url, _prompt_ids(bs, args.input_len, seed + 1000 * rep + 2), short))
            longs.append(run_closed_batch(url, _prompt_ids(bs, args.input_len, seed + 1000 * rep + 3),
                                          short + args.cycles))
        rows.append({"fixture": fixture, "draft_tokens": None, "bs": bs,
                     "step_wall_ms": step_from_walls(shorts, longs, args.cycles), "walls_short_s": shorts,
                     "walls_long_s": longs, "short_tokens": short, "long_tokens": short + args.cycles})
    time.sleep(2.5)  # the JSONL sink flushes every second
    recs = _read_records(timing_log)
    for row, (bs, t0, t1) in zip(rows, windows):
        st = cycle_stats(recs, bs, t0, t1)
        row.update(step_ms=st["cycle_ms"], step_cycles=st["cycles"], step_ms_p90=p90_or_none(
            [r["cycle_ms"] for r in recs if r.get("kind") == "decode" and r.get("rank", 0) == 0
             and r.get("bs") == bs and t0 <= r.get("t", -1.0) <= t1]),
                   step_wall_ms_per_cycle=st["wall_ms_per_cycle"])
    return rows


def measure_spec(url: str, fixture: str, t: int, timing_log: str, args, seed: int) -> list[dict]:
    windows = []
    for bs in args.batch_sizes:
        run_closed_batch(url, _prompt_ids(bs, args.input_len, seed), 8)
        t0 = time.time()
        run_closed_batch(url, _prompt_ids(bs, args.input_len, seed + 1), args.cycles)
        windows.append((bs, t0, time.time()))
    time.sleep(2.5)  # the JSONL sink flushes every second
    recs = _read_records(timing_log)
    return [{"fixture": fixture, "draft_tokens": t, "steps": t - 1, "bs": bs,
             **cycle_stats(recs, bs, t0, t1)} for bs, t0, t1 in windows]


def _null_rows(fixture: str, t: int | None, batch_sizes: list[int], why: str) -> list[dict]:
    key = "step_ms" if t is None else "verify_ms"
    return [{"fixture": fixture, "draft_tokens": t, "bs": bs, key: None, "error": why} for bs in batch_sizes]


def run(args) -> dict:
    from sglang_patches.offline.fixtures import ensure_fixture
    from sglang_patches.offline.sweep.server import Server, ServerError

    t_start = time.time()
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    paths = own_paths(args) or {f: ensure_fixture(f) for f in args.fixtures}  # built once, before servers race
    from harness.files import run_meta  # benchmarks/, beside this script

    meta = {**run_meta(), "batch_sizes": args.batch_sizes, "draft_tokens": args.draft_tokens, "input_len": args.input_len,
            "cycles": args.cycles, "simulate_acc_len": 1.0, "common_flags": COMMON_FLAGS, "extra_flags": args.extra,
            "routing": args.routing, "moe": moe_meta(paths, args.draft_tokens, args.routing),
            "decode_step_source": "median GPU ms (CUDA events, overlay step_timing) of rank-0 decode steps of "
                                  "that batch size of the no-speculation server; step_wall_ms: "
                                  "(wall(N + cycles) - wall(N)) / cycles, median of repeats",
            "verify_source": "median verify GPU ms (CUDA events, overlay --timing-log) of rank-0 decode "
                             "cycles of that batch size"}
    rows: list[dict] = []
    round_s: list[float] = []
    for t, fixtures in plan_rounds(args.fixtures, args.draft_tokens, args.parallel):
        label = "baseline" if t is None else f"T={t}"
        est = 1.1 * round_s[-1] if round_s else args.round_estimate  # the first round also JIT-compiles
        if args.deadline and time.time() - t_start + est > args.deadline:
            print(f"verify_cost: {label}: skipped (deadline {args.deadline:.0f} s, round ~{est:.0f} s)", flush=True)
            for f in fixtures:
                rows += _null_rows(f, t, args.batch_sizes, "skipped: deadline")
            continue
        r0 = time.time()
        servers = {}
        for i, f in enumerate(fixtures):
            flags, env, log = server_spec(args, paths[f], f, t)
            servers[f] = (Server(flags, port=args.port + i, env=env, log_path=log[:-len(".jsonl")] + ".log"), log)
        try:
            for srv, _ in servers.values():
                srv.start()
            for f, (srv, log) in servers.items():
                try:
                    srv.wait_ready(timeout=args.start_timeout)
                    print(f"verify_cost: {f} {label}: up in {srv.started_s:.0f} s", flush=True)
                except ServerError as exc:
                    print(f"verify_cost: {f} {label}: server failed: {str(exc)[-300:]}", flush=True)
                    rows += _null_rows(f, t, args.batch_sizes, f"server: {str(exc)[-600:]}")
                    servers[f] = (None, log)
                    srv.stop()
            for i, (f, (srv, log)) in enumerate(servers.items()):
                if srv is None:
                    continue
                try:
                    got = (measure_baseline(srv.url, f, log, args, seed=7 + i) if t is None
                           else measure_spec(srv.url, f, t, log, args, seed=7 + i))
                    for r in got:
                        r["server_start_s"] = srv.started_s
                    rows += got
                except Exception as exc:  # noqa: BLE001 - a failed measurement becomes null rows
                    print(f"verify_cost: {f} {label}: measurement failed: {exc!r}"[:600], flush=True)
                    rows += _null_rows(f, t, args.batch_sizes, f"measure: {exc!r}"[:600])
        finally:
            for srv, _ in servers.values():
                if srv is not None:
                    srv.stop()
        round_s.append(time.time() - r0)
        print(f"verify_cost: {label}: round {round_s[-1]:.0f} s (elapsed {time.time() - t_start:.0f} s)", flush=True)
        write_summary(args, rows, meta)
    return write_summary(args, rows, meta)


def write_summary(args, rows, meta) -> dict:
    summ = summary(rows, args.fixtures, args.batch_sizes, args.draft_tokens, meta)
    from pathlib import Path

    from sglang_patches.offline.sweep.results import write_text_atomic  # a kill mid-write never leaves half a JSON

    write_text_atomic(Path(args.out) / "summary.json", json.dumps(summ, indent=1))
    return summ


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, metavar="DIR", help="results directory (new or empty)")
    p.add_argument("--fixtures", default=None,
                   help=f"comma-separated fixtures (default: {MOE_FIXTURE},{DENSE_FIXTURE})")
    p.add_argument("--model", default=None, metavar="TARGET_DIR",
                   help="your target's local checkpoint folder, measured in place of the fixtures (with --draft)")
    p.add_argument("--draft", default=None, metavar="DRAFT_DIR", help="its EAGLE-3 drafter's local folder")
    p.add_argument("--draft-tokens", default="2,4,6,8", help="draft-token counts T (steps T-1, topk 1)")
    p.add_argument("--batch-sizes", default="1,4,16", help="batch sizes (default: %(default)s)")
    p.add_argument("--input-len", type=int, default=512, help="prompt tokens per request (default: %(default)s)")
    p.add_argument("--cycles", type=int, default=48,
                   help="measured decode cycles per batch size (and extra tokens of the baseline's long run)")
    p.add_argument("--repeats", type=int, default=3, help="baseline short/long wall pairs per batch size "
                   "(the wall cross-check; default: %(default)s)")
    p.add_argument("--deadline", type=float, default=510.0,
                   help="seconds since start after which no round may end (0: none; default: %(default)s)")
    p.add_argument("--round-estimate", type=float, default=150.0,
                   help="assumed seconds per round until one has been measured (default: %(default)s)")
    p.add_argument("--parallel", type=int, default=2, choices=(1, 2, 3, 4),
                   help="servers started side by side per round (memory: ~62 GB for qwen3-moe-shape, ~17 GB "
                        "for llama3-8b, KV pools capped; default: %(default)s)")
    p.add_argument("--start-timeout", type=float, default=240.0, help="seconds for a server to become healthy")
    p.add_argument("--port", type=int, default=31000, help="first server port (one per fixture in a round)")
    p.add_argument("--routing", choices=("model", "uniform"), default="model",
                   help="model: the fixture's own (dummy) router, which can send every token to the same experts; "
                        "uniform: SGLang's SGLANG_SIMULATE_UNIFORM_EXPERTS, each token to its own random experts "
                        "(a verify's T tokens spread as independent tokens do: the upper end of a trained router)")
    p.add_argument("--extra", default="", help="more launcher flags for every server, one string "
                                               "(e.g. \"--mem-fraction-static 0.6\")")
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(p, figure="verify over a decode step (qwen3-moe-shape, llama3-8b)", folder="2026-12-01-moe",
                       duration="about 10 min per draft-token round pair")
    args = p.parse_args(argv)
    from sglang_patches.offline.fixtures import fixture_names
    args.fixtures_given = args.fixtures is not None
    args.fixtures = [f.strip() for f in (args.fixtures or f"{MOE_FIXTURE},{DENSE_FIXTURE}").split(",") if f.strip()]
    check_own_model(args)
    bad = [f for f in args.fixtures if f not in fixture_names() and not args.model]
    if bad or not args.fixtures:
        raise UserError(f"--fixtures {','.join(args.fixtures)}: unknown {bad}; choose from {', '.join(fixture_names())}")
    args.draft_tokens = int_list(args.draft_tokens, "--draft-tokens")
    if any(t < 2 for t in args.draft_tokens):
        raise UserError(f"--draft-tokens {args.draft_tokens}: each must be >= 2 (steps = T - 1 >= 1)")
    args.batch_sizes = int_list(args.batch_sizes, "--batch-sizes")
    try:
        args.extra = shlex.split(args.extra)
    except ValueError as err:
        raise UserError(f"--extra {args.extra!r}: {err}; give the flags as one shell string") from None
    for name in ("input_len", "cycles", "repeats"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} {getattr(args, name)}: must be >= 1")
    if os.path.isdir(args.out) and os.listdir(args.out):
        raise UserError(f"--out {args.out} is not empty; choose a new directory")
    return args


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
        if args.dry_run:
            import figure_cli  # benchmarks/, beside this script
            own = own_paths(args)  # the user's own folders: each server's command, nothing to build first
            specs = [(t, *server_spec(args, own[args.fixtures[0]], args.fixtures[0], t))
                     for t, _ in plan_rounds(args.fixtures, args.draft_tokens)] if own else []
            return figure_cli.dry_run(
                out=args.out, cases=[f"round: draft tokens {'baseline' if t is None else t}, servers {', '.join(fx)}"
                                     for t, fx in plan_rounds(args.fixtures, args.draft_tokens)],
                servers=[f"{'baseline' if t is None else f'T={t}'}: " + " ".join(f"{k}={v}" for k, v in env.items())
                         + f"{' ' if env else ''}python -m sglang_patches.launch {shlex.join(flags)} --host 127.0.0.1 "
                         f"--port {args.port}" for t, flags, env, _ in specs],
                notes=[f"batch sizes {args.batch_sizes}, first port {args.port}"])
        summ = run(args)
    except UserError as err:
        exit_with(err, "verify_cost")
    print(format_table(summ, args.fixtures, args.batch_sizes, args.draft_tokens))
    ok = any(v is not None for f in args.fixtures for row in summ["verify_over_step_by_fixture"][f].values()
             for v in row.values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
