"""--draft-backend triton vs sglang on the GPU: same fixture, same greedy prompts.

For each backend start the drop-in server with the timer on, reset /spec_timing, run batch 1 and
batch 8 greedy generation, and read: accept length (tokens / spec_verify_ct, and the timer's),
draft / extend / cycle GPU ms (timer p50 and mean), tok/s, and proof the backend was active (the
"triton draft backend on" log line, the hooks in /server_info). Pass criteria: accept length of
triton within 2 % of sglang at every batch size; draft_ms is reported (expected a few % lower).
The stock backend runs --stock-repeats times (default 2, separate servers): the second run gives the
noise floor (stock vs stock accept length and how many outputs are identical), so a triton
difference can be told from batch-composition noise. Output texts are compared by hash.

    python benchmarks/draft_backend_check.py --out OUT_DIR                       # trained fixture (built, ~4 min)
    python benchmarks/draft_backend_check.py --out OUT_DIR --fixture llama3-8b   # 8B shapes, dummy weights: timing only
"""
from __future__ import annotations

import argparse
import json
import os

from sglang_patches.offline.fixtures import ensure_fixture
from sglang_patches.offline.sweep.load import run_batch
from sglang_patches.httpjson import http_json
from sglang_patches.offline.sweep.server import Server
from sglang_patches.offline.sweep.prompts import EVAL_PROMPTS, load_prompts

from harness.files import run_meta  # benchmarks/, beside this script

COMMON = ["--attention-backend", "triton", "--sampling-backend", "pytorch",
          "--mem-fraction-static", "0.6", "--log-level", "info"]


def prompts(n: int) -> list[str]:
    return load_prompts(EVAL_PROMPTS)[:n]


def run_backend(backend, model_args, out, texts, max_new_tokens, port, batch_sizes=(1, 8), tag=None):
    tag = tag or backend
    log = os.path.join(out, f"server_{tag}.log")
    srv = Server(model_args + COMMON + ["--cuda-graph-max-bs-decode", str(max(batch_sizes)), "--draft-backend", backend, "--timing-log",
                                        os.path.join(out, f"timing_{tag}.jsonl")], port=port, log_path=log)
    res: dict = {}
    try:
        srv.start().wait_ready(600)
        res["startup_s"] = srv.started_s
        run_batch(srv.url, texts, 1, 16, num_requests=2)  # warm-up
        for bs in batch_sizes:
            http_json(srv.url + "/spec_timing/reset", {})
            r = run_batch(srv.url, texts, bs, max_new_tokens, num_requests=max(len(texts), bs))
            st = (http_json(srv.url + "/spec_timing") or {}).get("spec_timing") or {}
            ph = st.get("phases") or {}
            res[f"bs{bs}"] = {
                "tok_s": r["tok_s"], "accept_length_sglang": r["output_tokens"] / r["verify_ct"] if r["verify_ct"] else None,
                "accept_length_timer": st.get("accept_length"),
                **{f"{p}_ms_{k}": (ph.get(p) or {}).get(k) for p in ("draft", "verify", "extend", "cycle")
                   for k in ("p50", "mean")}, "text_hashes": r.get("text_hashes")}
        info = http_json(srv.url + "/server_info", method="GET") or {}
        states = info.get("internal_states") or [{}]
        hooks = (states[0].get("sglang_patches") or {}).get("applied") or []
        res["triton_hooks"] = [h for h in map(str, hooks) if "triton_draft" in h]
    except Exception as exc:  # noqa: BLE001 - record and continue with the other backend
        res["error"] = repr(exc)[:2000]
    finally:
        srv.stop()
    with open(log, errors="replace") as fh:
        text = fh.read()
    res["backend_on_line"] = next((ln.strip() for ln in text.splitlines() if "triton draft backend on" in ln), None)
    res["fallback_or_error"] = [ln.strip() for ln in text.splitlines()
                                if "falling back" in ln or "draft-backend triton:" in ln][:3]
    print(tag, json.dumps(res), flush=True)
    return res


def _ratio(a: dict, b: dict, key: str) -> float | None:
    return b[key] / a[key] if a.get(key) and b.get(key) else None


def _same(a: dict, b: dict) -> float | None:
    ha, hb = a.get("text_hashes") or [], b.get("text_hashes") or []
    return sum(x == y for x, y in zip(ha, hb)) / len(ha) if ha and len(ha) == len(hb) else None


def verdicts(res: dict, names: list[str]) -> dict:
    """Per batch size: triton vs the first stock run (accept length within 2 %, draft / extend p50
    ratios, share of identical outputs) and, with a second stock run, the same for stock vs stock."""
    verdict: dict = {}
    for bs in names:
        a, b = res["sglang"].get(bs) or {}, res["triton"].get(bs) or {}
        acc = _ratio(a, b, "accept_length_sglang")
        if acc is None:
            continue
        v = {"accept_rel": acc - 1, "accept_ok": abs(acc - 1) <= 0.02,
             "draft_ms_p50_ratio": _ratio(a, b, "draft_ms_p50"), "extend_ms_p50_ratio": _ratio(a, b, "extend_ms_p50"),
             "identical_outputs": _same(a, b)}
        again = (res.get("sglang_2") or {}).get(bs) or {}
        if again:
            stock = _ratio(a, again, "accept_length_sglang")
            v["stock_accept_rel"] = None if stock is None else stock - 1
            v["stock_identical_outputs"] = _same(a, again)
        verdict[bs] = v
    verdict["triton_active"] = bool(res["triton"].get("backend_on_line")) and not res["triton"].get("fallback_or_error")
    return verdict


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--fixture", default="trained", help="trained (accept length meaningful) or llama3-8b (timing only)")
    ap.add_argument("--max-seconds", type=float, default=200, help="trained fixture build budget")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--batch-sizes", default="1,8", help="comma-separated (default: %(default)s)")
    ap.add_argument("--port", type=int, default=30041, help="sglang backend's server port; triton's is PORT+1, "
                    "the stock repeats' PORT+2...")
    ap.add_argument("--stock-repeats", type=int, default=2, help="stock (sglang) server runs; the 2nd gives the "
                    "noise floor (default: %(default)s)")
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure='the --draft-backend triton rows', folder='2026-11-29-draft-backend-triton',
                       duration='about 8 min (trained build ~200 s, then two servers)')
    args = ap.parse_args()
    if args.dry_run:
        return figure_cli.dry_run(out=args.out, servers=[f"sglang: python -m sglang_patches.launch --fixture {args.fixture} --port {args.port}", f"triton: the same with --draft-backend triton --port {args.port + 1}"], cases=[f"bs {b}: {args.prompts} prompts x {args.max_new_tokens} tokens" for b in args.batch_sizes.split(",")])
    if args.stock_repeats < 1:
        ap.error(f"--stock-repeats {args.stock_repeats}: must be at least 1")
    bss = tuple(int(x) for x in args.batch_sizes.split(","))
    os.makedirs(args.out, exist_ok=True)
    res = {**run_meta(), "fixture": args.fixture}
    kw = {"max_seconds": args.max_seconds} if args.fixture == "trained" else {}
    model_args = ensure_fixture(args.fixture, **kw).cli_flags()  # cached in ~/.cache/sglang_patches
    res["model_args"] = model_args
    texts = prompts(args.prompts)
    res["sglang"] = run_backend("sglang", model_args, args.out, texts, args.max_new_tokens, args.port, bss)
    res["triton"] = run_backend("triton", model_args, args.out, texts, args.max_new_tokens, args.port + 1, bss)
    for i in range(1, args.stock_repeats):
        res[f"sglang_{i + 1}"] = run_backend("sglang", model_args, args.out, texts, args.max_new_tokens,
                                             args.port + 1 + i, bss, tag=f"sglang_{i + 1}")
    names = [f"bs{bs}" for bs in bss]
    verdict = res["verdict"] = verdicts(res, names)
    with open(os.path.join(args.out, "draft_backend_check.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    print("| bs | accept sglang | accept triton | rel | same outputs | stock vs stock rel | same | "
          "draft p50 ms sglang | triton | ratio |")
    for bs in names:
        a, b, v = res["sglang"].get(bs) or {}, res["triton"].get(bs) or {}, verdict.get(bs) or {}
        print(f"| {bs} | {a.get('accept_length_sglang')} | {b.get('accept_length_sglang')} | {v.get('accept_rel')} "
              f"| {v.get('identical_outputs')} | {v.get('stock_accept_rel')} | {v.get('stock_identical_outputs')} "
              f"| {a.get('draft_ms_p50')} | {b.get('draft_ms_p50')} | {v.get('draft_ms_p50_ratio')} |")
    print("triton active:", verdict["triton_active"])
    ok = verdict["triton_active"] and all(verdict.get(bs, {}).get("accept_ok") for bs in names)
    return 0 if ok or args.fixture != "trained" else 1


if __name__ == "__main__":
    raise SystemExit(main())
