"""FP8 weight-only linear (sglang_patches.kernels.fp8_linear) at EAGLE-3 drafter decode shapes, run by
`bench_draft_kernels.py --fp8 [--fp8-sweep]` (this module holds that section).

Shapes: the six GEMMs of the drafter (qkv [input 2H], o, gate_up, down, lm_head [draft vocab], fc
[3 aux x H]) derived from the fixture configs `llama3-8b` and `kimi-k2-shape`; M in --fp8-batches.
Variants per (shape, M):
  triton_fp8       our kernel, default config (fp8_linear_config)
  cublas_bf16      torch F.linear on the bf16 weight (what the drafter runs today)
  sglang_fp8       SGLang's w8a8 FP8 path on Hopper, per-channel weight scale: apply_fp8_linear
                   (per-token dynamic activation quant + sgl_kernel fp8_scaled_mm); skipped with the
                   reason recorded when it does not import or run
Timing: median per call of a CUDA graph of back-to-back calls; the weight (and x) rotate over enough
copies (>= 3, total >= 2x L2) that L2 cannot hold them. GB/s = weight bytes / time (the weight is
what streams at M <= 64), compared with the measured copy ceiling. --fp8-sweep times a grid of
(block_n, block_k, split_k, num_warps, num_stages) per (shape, M) and records the best.
"""
from __future__ import annotations

import itertools
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from sglang_patches.kernels.fp8_linear import fp8_linear, fp8_linear_config, fp8_linear_ref, quantize_fp8_per_channel
from sglang_patches.offline.fixtures.specs import get_spec

SWEEP_BLOCK_N = (16, 32, 64, 128)
SWEEP_BLOCK_K = (128, 256)
SWEEP_SPLIT_K = (1, 2, 4)
SWEEP_WARPS_STAGES = ((4, 4), (8, 3))


def drafter_shapes(fixture: str) -> dict[str, tuple[int, int]]:
    """{name: (N, K)} of the EAGLE-3 drafter layer of `fixture` (nn.Linear layout [out, in])."""
    d = get_spec(fixture).draft
    H, I = d["hidden_size"], d["intermediate_size"]
    hd = d.get("head_dim") or H // d["num_attention_heads"]
    q, kv = d["num_attention_heads"] * hd, d["num_key_value_heads"] * hd
    return {"qkv": (q + 2 * kv, 2 * H), "o": (H, q), "gate_up": (2 * I, H), "down": (H, I),
            "lm_head": (d["draft_vocab_size"], H), "fc": (H, 3 * H)}


def sweep_configs(M, N, K):
    """At most 40 points (4 x 2 x 3 x 2, less block_n 128 with split-K), pruned per shape to the plausible
    ones; ~40 distinct configs x 3 BLOCK_M values = ~120 compiles for the whole sweep."""
    out = []
    for bn, bk, sk, (nw, ns) in itertools.product(SWEEP_BLOCK_N, SWEEP_BLOCK_K, SWEEP_SPLIT_K, SWEEP_WARPS_STAGES):
        progs = -(-N // bn) * sk
        if progs < 66 or progs > 8 * 132 or -(-K // bk) < 4 * sk:   # too few programs / too many / tiny splits
            continue
        bm = max(16, 1 << (M - 1).bit_length())
        if (bm * bk * 2 + bn * bk) * ns > 200 * 1024:        # x + w tiles over the stages beyond shared memory
            continue
        if bn == 128 and sk > 1:                              # more programs: smaller block_n first
            continue
        out.append(dict(block_n=bn, block_k=bk, split_k=sk, num_warps=nw, num_stages=ns))
    return out


def graph_us(fn, n_sets, reps, inner=None):
    """Median us per call of a CUDA graph holding `inner` calls fn(0), fn(1), ... (sets rotate)."""
    inner = inner or max(12, 2 * n_sets)
    for i in range(n_sets):
        fn(i)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(inner):
            fn(i % n_sets)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(inner):
            fn(i % n_sets)
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / inner)
    del g
    return statistics.median(ts)


def sglang_fp8_op():
    """(fn(x, wT, scale_col, bias) -> y, None) or (None, why): SGLang's apply_fp8_linear."""
    try:
        from sglang.srt.layers.quantization.fp8_utils import apply_fp8_linear, cutlass_fp8_supported
        if not cutlass_fp8_supported():
            return None, "cutlass_fp8_supported() is False on this GPU/build"
        return (lambda x, wT, sc, bias: apply_fp8_linear(x, wT, sc, bias=bias, cutlass_fp8_supported=True)), None
    except Exception as e:  # noqa: BLE001
        return None, f"apply_fp8_linear not importable: {type(e).__name__}: {e}"


def rel_err(out, ref):
    out, ref = out.double(), ref.double()
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def run_fp8(args, bw, l2_bytes, meta):
    """Rows for the fp8 section (and sweep results); prints as it goes."""
    batches = [int(b) for b in args.fp8_batches.split(",")]
    fixtures = args.fp8_fixtures.split(",")
    dt = getattr(torch, args.dtype)
    sgl, why = sglang_fp8_op()
    meta["sglang_fp8"] = "apply_fp8_linear (per-token dynamic act quant + fp8_scaled_mm)" if sgl else f"skipped: {why}"
    print(f"sglang fp8 path: {meta['sglang_fp8']}", flush=True)
    rows, sweep = [], []
    t_start = time.time()
    for fixture in fixtures:
        for name, (N, K) in drafter_shapes(fixture).items():
            wbytes8 = N * K
            n8 = max(3, -(-2 * l2_bytes // wbytes8))
            n16 = max(3, -(-2 * l2_bytes // (2 * wbytes8)))
            W16 = [(torch.randn(N, K, device="cuda") * 0.02).to(dt) for _ in range(max(n8, n16))]
            Q = [quantize_fp8_per_channel(w) for w in W16[:n8]]
            W16 = W16[:n16]
            WT = [w8.t() for w8, _ in Q[:n8]]          # SGLang keeps the fp8 weight as [K, N] column-major
            SC = [s.view(-1, 1) for _, s in Q[:n8]]
            for M in batches:
                X = [torch.randn(M, K, device="cuda").to(dt) for _ in range(n8)]
                out = torch.empty(M, N, device="cuda", dtype=dt)
                ref = fp8_linear_ref(X[0], *Q[0])
                variants = {"triton_fp8": (lambda i: fp8_linear(X[i], *Q[i], out=out), n8, wbytes8),
                            "cublas_bf16": (lambda i: torch.mm(X[i % n8], W16[i].t(), out=out), n16, 2 * wbytes8)}
                if sgl is not None:
                    variants["sglang_fp8"] = (lambda i: sgl(X[i], WT[i], SC[i], None), n8, wbytes8)
                for vname, (fn, ns, nbytes) in variants.items():
                    row = {"fixture": fixture, "shape": name, "N": N, "K": K, "M": M, "variant": vname,
                           "weight_bytes": nbytes, "input_sets": ns, "floor_us": nbytes / bw * 1e6}
                    try:
                        y = fn(0)
                        row["rel_err_vs_fp8_ref"] = rel_err(y, ref) if vname != "cublas_bf16" else None
                        if vname == "cublas_bf16":
                            row["rel_err_vs_bf16"] = rel_err(y, F.linear(X[0].float(), W16[0].float()))
                        t = graph_us(fn, ns, args.fp8_reps)
                        row.update(graph_us=t, GBps=nbytes / t / 1e3, pct_copy_bw=100 * nbytes / (t * 1e-6) / bw)
                        if vname == "triton_fp8":
                            row["config"] = fp8_linear_config(M, N, K)
                    except Exception as e:  # noqa: BLE001
                        row["skipped"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                    rows.append(row)
                    print(f"  {fixture:<14} {name:<8} {N:>6}x{K:<6} M={M:<3} {vname:<12} "
                          + (f"{row['graph_us']:8.2f} us {row['GBps']:7.0f} GB/s {row['pct_copy_bw']:5.1f}%"
                             if "graph_us" in row else f"skipped: {row['skipped']}"), flush=True)
                if args.fp8_sweep:
                    sweep.append(sweep_one(args, fixture, name, M, N, K, X, Q, out, ref, n8, bw, t_start))
            del W16, Q, WT, SC
            torch.cuda.empty_cache()
    return rows, sweep


def sweep_one(args, fixture, name, M, N, K, X, Q, out, ref, n8, bw, t_start):
    res = {"fixture": fixture, "shape": name, "N": N, "K": K, "M": M, "tried": []}
    if time.time() - t_start > args.fp8_sweep_budget_s:
        res["skipped"] = f"time budget --fp8-sweep-budget-s {args.fp8_sweep_budget_s} spent"
        return res
    default = fp8_linear_config(M, N, K)
    cfgs = sweep_configs(M, N, K)
    if default not in cfgs:
        cfgs.insert(0, default)
    for cfg in cfgs:
        try:
            y = fp8_linear(X[0], *Q[0], out=out, **cfg)
            err = rel_err(y, ref)
            t = graph_us(lambda i: fp8_linear(X[i], *Q[i], out=out, **cfg), n8, 5, inner=2 * n8)
            res["tried"].append(dict(cfg, us=round(t, 3), rel_err=err))
        except Exception as e:  # noqa: BLE001
            res["tried"].append(dict(cfg, failed=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"))
    ok = [r for r in res["tried"] if "us" in r and r["rel_err"] < 1e-2]
    if ok:
        best = min(ok, key=lambda r: r["us"])
        dflt = next((r for r in ok if all(r.get(k, default[k]) == default[k] for k in default)), None)
        res.update(best=best, default_us=dflt["us"] if dflt else None,
                   best_pct_copy_bw=100 * N * K / (best["us"] * 1e-6) / bw)
        print(f"  sweep {fixture:<14} {name:<8} M={M:<3} best {best['us']:8.2f} us "
              f"(default {res['default_us'] or float('nan'):.2f}) {best}", flush=True)
    return res


def add_args(ap):
    ap.add_argument("--fp8", action="store_true",
                    help="run only the FP8 weight-only linear section (kernels/fp8_linear.py) instead of the draft kernels")
    ap.add_argument("--fp8-sweep", action="store_true",
                    help="with --fp8 (implied): also sweep launch configs per (shape, M) and record the best")
    ap.add_argument("--fp8-batches", default="1,8,16,32,64")
    ap.add_argument("--fp8-fixtures", default="llama3-8b,kimi-k2-shape")
    ap.add_argument("--fp8-reps", type=int, default=20)
    ap.add_argument("--fp8-sweep-budget-s", type=float, default=170.0,
                    help="stop sweeping (remaining shapes recorded as skipped) after this many seconds")


def check_args(args):
    """One line and exit 2 on bad fp8 flags (before any GPU work)."""
    try:
        bs = [int(b) for b in args.fp8_batches.split(",")]
        assert all(1 <= b <= 64 for b in bs)
    except (ValueError, AssertionError):
        sys.exit(print(f"bench_draft_kernels: --fp8-batches {args.fp8_batches!r}: expected integers in [1, 64], "
                       "e.g. 1,8,64", file=sys.stderr) or 2)
    for f in args.fp8_fixtures.split(","):
        try:
            get_spec(f)
        except Exception:  # noqa: BLE001
            sys.exit(print(f"bench_draft_kernels: --fp8-fixtures: unknown fixture {f!r} (e.g. llama3-8b,kimi-k2-shape)",
                           file=sys.stderr) or 2)
    if not torch.cuda.is_available():
        sys.exit(print("bench_draft_kernels: --fp8 needs a CUDA GPU (sm_89+ for fp8 loads); none found",
                       file=sys.stderr) or 2)
