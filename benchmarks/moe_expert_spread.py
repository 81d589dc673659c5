"""Distinct experts one MoE layer reads per target forward at batch 1, measured by SGLang's own expert
distribution recorder (`--expert-distribution-recorder-mode per_token`), against the top_k x T bound.

T = 1: a server without speculation (each decode pass reads one token's experts). T >= 2: an EAGLE-3
server with T draft tokens (steps T - 1, topk 1) and every draft rejected (SGLANG_SIMULATE_ACC_LEN=1), so
each verify pass reads exactly T tokens. Per server: a warm-up request, then the recorder is started, one
request of --tokens new tokens runs alone, the recorder is stopped and dumped (a torch file per rank in
OUT/dumps-T, read here with weights_only loading: tensors, numbers and strings only). per_token is the mode
whose records carry each pass's forward mode and tokens (per_pass records hold the counts alone); it keeps
8 experts per token, so fixtures with top_k > 8 are refused. Per pass of rank 0 of the kind that T runs
(decode, or target verify) with T tokens: the experts of each MoE layer whose count is non-zero; dense
layers (no count at all) are left out. Routing `uniform` is SGLang's
SGLANG_SIMULATE_UNIFORM_EXPERTS (each token to its own random experts); `model` the fixture's own router
(dummy weights: whatever a random router does). CUDA graphs are off on these servers (the recorder reads
each pass's tokens on the host); shared-expert fusion is off (a fused shared expert would count as routed).

Output: OUT/summary.json (per T: passes, mean / min / max distinct experts per MoE layer, the bound and,
under uniform routing, the expected value of moe_routing.distinct_experts_uniform), a table last.

    python benchmarks/moe_expert_spread.py --out OUT --fixture kimi-k2-mla --draft-tokens 1,4,8 --routing uniform
"""
from __future__ import annotations

import argparse
import glob
import os
import shlex
import sys
import time
from pathlib import Path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from sglang_patches.errors import UserError, exit_with  # noqa: E402
from moe_routing import distinct_experts_uniform, moe_shape, routing_env  # noqa: E402
from harness.files import run_meta, write_json  # noqa: E402

RECORDER_TOP_K = 8  # SGLang's per_token gatherer keeps this many experts per token (_DetailSinglePassGatherer)
RECORDER_FLAGS = ["--expert-distribution-recorder-mode", "per_token", "--disable-cuda-graph",
                  "--disable-shared-experts-fusion"]


# ---------------------------------------------------------------- pure parts (tested on CPU)

def pass_mode(tokens: int) -> str:
    """The ForwardMode name of the passes that read `tokens` tokens at batch 1 (T = 1: plain decode)."""
    return "DECODE" if tokens == 1 else "TARGET_VERIFY"


def spread(records: list[dict], mode_value: int, tokens: int) -> dict:
    """Distinct experts per MoE layer over the recorder's per-pass records (rank 0: under TP every rank records
    the same passes) of forward mode `mode_value` holding `tokens` tokens: mean, min and max over (pass, MoE
    layer), and the passes counted."""
    counts: list[int] = []
    passes = 0
    for rec in records:
        if (rec.get("rank", 0) != 0 or rec.get("forward_mode") != mode_value
                or len(rec.get("input_ids") or ()) != tokens):
            continue
        hit = rec["global_physical_count"] > 0           # [layers, experts]
        moe = hit[hit.any(dim=1)]                         # a dense layer routes nothing
        if not len(moe):
            continue
        passes += 1
        counts += moe.sum(dim=1).tolist()
    if not counts:
        return {"passes": 0, "distinct_mean": None, "distinct_min": None, "distinct_max": None}
    return {"passes": passes, "distinct_mean": round(sum(counts) / len(counts), 3),
            "distinct_min": min(counts), "distinct_max": max(counts)}


def load_dumps(folder: str) -> list[dict]:
    """The records of every recorder dump in `folder` (weights_only: a file holding anything but tensors,
    numbers, strings and containers is refused, never executed)."""
    import pickle

    import torch

    records: list[dict] = []
    for path in sorted(glob.glob(os.path.join(folder, "expert_distribution_recorder_*.pt"))):
        try:
            data = torch.load(path, map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError, OSError) as exc:
            raise UserError(f"{path}: not a recorder dump of tensors and numbers ({type(exc).__name__}); "
                            "rerun the server's dump") from None
        records += list(data.get("records") or []) if isinstance(data, dict) else []
    return records


# ---------------------------------------------------------------- GPU run

def measure(args, paths, tokens: int, port: int) -> dict:
    from sglang_patches.compat import current
    from sglang_patches.httpjson import http_json
    from sglang_patches.offline.sweep.server import Server

    from verify_cost import _prompt_ids, run_closed_batch, server_flags

    dumps = os.path.join(args.out, f"dumps-T{tokens}")
    env = {**routing_env(args.routing), current().EXPERT_RECORDER_DIR_ENV.name: dumps,
           **({"SGLANG_SIMULATE_ACC_LEN": "1.0"} if tokens > 1 else {})}
    timing = os.path.join(args.out, f"timing-T{tokens}.jsonl")  # the cycles beside the counts, for a look later
    flags = server_flags(paths, tokens if tokens > 1 else None, [1], timing, [*RECORDER_FLAGS, *args.extra])
    srv = Server(flags, port=port, log_path=os.path.join(args.out, f"server-T{tokens}.log"), env=env)
    row: dict = {"tokens": tokens, "command": shlex.join(srv.cmd)}
    try:
        srv.start().wait_ready(timeout=args.start_timeout)
        row["server_start_s"] = round(srv.started_s, 1)
        run_closed_batch(srv.url, _prompt_ids(1, args.input_len, 5), 8)  # warm-up
        http_json(f"{srv.url}/start_expert_distribution_record", {}, timeout=120)
        run_closed_batch(srv.url, _prompt_ids(1, args.input_len, 6), args.tokens)
        http_json(f"{srv.url}/stop_expert_distribution_record", {}, timeout=120)
        http_json(f"{srv.url}/dump_expert_distribution_record", {}, timeout=120)  # returns once written
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        row.update(spread(load_dumps(dumps), int(ForwardMode[pass_mode(tokens)]), tokens))
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - written down: the next T goes on
        row["error"] = f"{type(exc).__name__}: {str(exc)[-600:]}"
    finally:
        srv.stop()
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, metavar="DIR", help="results directory (new or empty)")
    p.add_argument("--fixture", default="kimi-k2-mla", help="an MoE fixture (default: %(default)s)")
    p.add_argument("--draft-tokens", default="1,4,8", help="tokens per pass T; 1 = plain decode (default: %(default)s)")
    p.add_argument("--routing", choices=("model", "uniform"), default="uniform")
    p.add_argument("--tokens", type=int, default=32, help="new tokens of the recorded request (default: %(default)s)")
    p.add_argument("--input-len", type=int, default=256, help="prompt tokens (default: %(default)s)")
    p.add_argument("--deadline", type=float, default=540.0, help="seconds from start; no server starts after "
                   "deadline - 100 (default: %(default)s)")
    p.add_argument("--start-timeout", type=float, default=240.0)
    p.add_argument("--port", type=int, default=31200)
    p.add_argument("--extra", default="", help="more launcher flags for every server, one string")
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(p, figure="distinct experts per MoE layer per verify (Kimi family)", folder="2026-12-06-kimi-family",
                       duration="60-120 s per T on one H100 (one server each)")
    args = p.parse_args(argv)
    try:
        args.draft_tokens = [int(x) for x in args.draft_tokens.split(",") if x.strip()]
        args.extra = shlex.split(args.extra)
        if not args.draft_tokens or min(args.draft_tokens) < 1 or args.tokens < 1 or args.input_len < 1:
            raise ValueError("each T, --tokens and --input-len must be >= 1")
    except ValueError as exc:
        exit_with(UserError(f"{exc}; e.g. --draft-tokens 1,4,8"), "moe_expert_spread")
    try:
        from sglang_patches.offline.fixtures import ensure_fixture, fixture_names
        from sglang_patches.offline.fixtures.specs import get_spec

        if args.fixture not in fixture_names() or moe_shape(get_spec(args.fixture).target) is None:
            raise UserError(f"--fixture {args.fixture}: not an MoE fixture; e.g. kimi-k2-mla or qwen3-moe-shape")
        if os.path.isdir(args.out) and os.listdir(args.out):
            raise UserError(f"--out {args.out} is not empty; choose a new directory")
        e, k = moe_shape(get_spec(args.fixture).target)
        if k > RECORDER_TOP_K:
            raise UserError(f"--fixture {args.fixture}: top_k {k}; SGLang's per-token recorder keeps {RECORDER_TOP_K} "
                            "experts a token, so the count would be short; use a fixture with top_k <= 8")
        if args.dry_run:
            return figure_cli.dry_run(out=args.out, cases=[f"T={t}: one server, {pass_mode(t)} passes" for t in args.draft_tokens],
                                      notes=[f"{args.fixture}: {e} experts, top {k}; routing {args.routing}"])
        os.makedirs(args.out, exist_ok=True)
        t0, meta = time.time(), run_meta()  # the run's start, kept for every rewrite of the summary
        paths = ensure_fixture(args.fixture)
        rows = []
        for i, t in enumerate(args.draft_tokens):
            if time.time() - t0 > args.deadline - 100:
                rows.append({"tokens": t, "error": "not started: deadline"})
                continue
            row = measure(args, paths, t, args.port + i)
            expected = distinct_experts_uniform(e, k, t) if args.routing == "uniform" else None
            row["bound_k_times_T"] = min(k * t, e)
            row["expected_uniform"] = round(expected, 2) if expected is not None else None
            rows.append(row)
            write_json(Path(args.out) / "summary.json", {
                **meta, "fixture": args.fixture,
                "experts": e, "top_k": k, "routing": args.routing, "tokens": args.tokens,
                "rows": rows})
    except UserError as err:
        exit_with(err, "moe_expert_spread")
    print(f"{args.fixture}, {e} experts top {k}, routing {args.routing}: distinct experts per MoE layer, batch 1")
    print(f"{'T':>3} {'passes':>7} {'mean':>7} {'min':>4} {'max':>4} {'bound':>6} {'expected':>9}")
    for r in rows:
        print(f"{r['tokens']:>3} {r.get('passes', '-'):>7} {r.get('distinct_mean') or '-':>7} {r.get('distinct_min') or '-':>4} "
              f"{r.get('distinct_max') or '-':>4} {r.get('bound_k_times_T', '-'):>6} {r.get('expected_uniform') or '-':>9}"
              + (f"  {r['error'][:80]}" if r.get("error") else ""))
    return 0 if any(r.get("passes") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
