"""GPU benchmark of the Triton draft-path kernels (sglang_patches.kernels) against torch and
SGLang/sgl_kernel equivalents, at draft batch sizes for a Llama-3.1-8B-shaped EAGLE-3 drafter.

    python benchmarks/bench_draft_kernels.py --out OUT/bench_draft_kernels.json [--batches 1,16] [--large 4096]
    python benchmarks/bench_draft_kernels.py --fp8 [--fp8-sweep] --out OUT/bench_fp8_linear.json

--fp8: the FP8 weight-only linear section instead (drafter GEMM shapes, M 1..64; bench_fp8_linear.py).

For every case: a correctness check of each variant against the PyTorch reference on the GPU
(rel. L2 error), then timing with CUDA events: warm-up, then `--reps` replays of a CUDA graph holding
`inner` back-to-back calls (median per call), and the same calls launched eagerly. Inputs rotate over
enough copies to exceed 2x the L2 cache when one copy is large (--no-rotate to time L2-resident).
Achieved bandwidth is the minimal byte count (each input read once, each output written once)
over the graph time, compared with a measured device-to-device copy bandwidth (1 GiB buffer,
read + write bytes). Writes JSON to --out and prints a table last.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F

from sglang_patches.kernels._common import rmsnorm_ref
from sglang_patches.kernels.draft_topk import draft_topk, draft_topk_ref
from sglang_patches.kernels.fused_add_rmsnorm import fused_add_rmsnorm, fused_add_rmsnorm_ref
from sglang_patches.kernels.fused_aux_fc import aux_norm, aux_norm_ref, fused_aux_fc
from sglang_patches.kernels.fused_draft_input import fused_draft_input, fused_draft_input_ref
from sglang_patches.kernels.silu_and_mul import silu_and_mul, silu_and_mul_ref

sys.path.insert(0, __import__("os").path.dirname(__file__))
import bench_fp8_linear  # noqa: E402
from harness.files import run_meta  # noqa: E402

EPS = 1e-5
DEV = "cuda"
# No error check: in-place variants change their own inputs; the bare GEMM skips the norms; SGLang's
# topk=1 kernel returns p = 1.0 by design.
NO_CHECK = {"triton_inplace", "sgl_kernel_inplace", "fc_gemm_only(cublas)", "sglang_topk1_postprocess"}
L2_BYTES = 50 * 2 ** 20  # H100/H200; overwritten from the device when torch exposes it


def sgl_ops():
    """sgl_kernel's CUDA ops (what SGLang's RMSNorm/SiluAndMul.forward_cuda call) and SGLang's topk=1 kernel."""
    ops = {}
    try:
        import sgl_kernel
        ops.update(rmsnorm=sgl_kernel.rmsnorm, fused_add_rmsnorm=sgl_kernel.fused_add_rmsnorm,
                   silu_and_mul=sgl_kernel.silu_and_mul)
    except Exception as e:  # noqa: BLE001
        print(f"sgl_kernel not importable ({e}); sgl variants skipped", file=sys.stderr)
    try:
        from sglang.kernels.ops.speculative.topk1 import draft_topk1_postprocess
        ops["draft_topk1_postprocess"] = draft_topk1_postprocess
    except Exception as e:  # noqa: BLE001
        print(f"draft_topk1_postprocess not importable ({e})", file=sys.stderr)
    return ops


def copy_bandwidth(nbytes=2 ** 30, reps=20):
    src = torch.randn(nbytes // 2, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); dst.copy_(src); b.record(); b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    t = statistics.median(times)
    return 2 * nbytes / t, t


def time_variant(fn, n_sets, reps, warmup, use_graph=True):
    """fn(i) runs one call on input set i. Returns (graph_us, eager_us) medians per call."""
    inner = max(20, n_sets)
    for i in range(warmup):
        fn(i % n_sets)
    torch.cuda.synchronize()

    def run_inner():
        for i in range(inner):
            fn(i % n_sets)

    def timed(body):
        ts = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); body(); b.record(); b.synchronize()
            ts.append(a.elapsed_time(b) * 1e3 / inner)
        return statistics.median(ts), ts

    eager_us, eager_all = timed(run_inner)
    graph_us, graph_all = None, None
    if use_graph:
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                run_inner()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                run_inner()
            g.replay(); torch.cuda.synchronize()
            graph_us, graph_all = timed(g.replay)
        except Exception as e:  # noqa: BLE001
            print(f"  graph capture failed: {e}", file=sys.stderr)
    spread = lambda xs: None if xs is None else (min(xs), max(xs))  # noqa: E731
    return graph_us, eager_us, spread(graph_all), spread(eager_all)


def rel_err(out, ref):
    out, ref = out.double(), ref.double()
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def n_sets_for(set_bytes, rotate):
    if not rotate:
        return 1
    return max(1, min(64, -(-2 * L2_BYTES // max(set_bytes, 1))))


def cases(T, args, ops, rotate):
    """Yields (case name, min bytes, n_sets, {variant: fn(i)}, reference output of set 0).
    A variant's output for the error check is fn(0) (its first element when a tuple)."""
    H, I, K, dt = args.hidden, args.inter, args.num_aux, getattr(torch, args.dtype)
    es = lambda n: torch.finfo(dt).bits // 8 * n  # noqa: E731
    dev = DEV
    w = lambda n: (1 + 0.1 * torch.randn(n, device=dev)).to(dt)  # noqa: E731

    # 1. draft input: RMSNorm(embeds) | RMSNorm(hidden) -> [T, 2H]
    nb = es(2 * T * H + 2 * H + 2 * T * H)
    ns = n_sets_for(nb, rotate)
    E = [torch.randn(T, H, device=dev, dtype=dt) for _ in range(ns)]
    Hs = [torch.randn(T, H, device=dev, dtype=dt) * 4 for _ in range(ns)]
    w1, w2 = w(H), w(H)
    out = torch.empty(T, 2 * H, device=dev, dtype=dt)
    v = {"triton_fused": lambda i: fused_draft_input(E[i], Hs[i], w1, w2, EPS, out=out),
         "torch_native": lambda i: fused_draft_input_ref(E[i], Hs[i], w1, w2, EPS)}
    if "rmsnorm" in ops:
        v["sgl_kernel_2norm+cat"] = lambda i: torch.cat([ops["rmsnorm"](E[i], w1, EPS), ops["rmsnorm"](Hs[i], w2, EPS)], -1)
    yield "draft_input", nb, ns, v, fused_draft_input_ref(E[0], Hs[0], w1, w2, EPS)

    # 2. fc input norms (fc_norm per chunk, and input_norm over the concat) and the fc GEMM
    nb = es(2 * T * K * H + K * H)
    ns = n_sets_for(nb, rotate)
    A = [torch.randn(T, K * H, device=dev, dtype=dt) * 2 for _ in range(ns)]
    wf = torch.stack([w(H) for _ in range(K)])
    nout = torch.empty(T, K * H, device=dev, dtype=dt)
    v = {"triton_fused": lambda i: aux_norm(A[i], K, EPS, fc_norm_weight=wf, out=nout),
         "torch_native": lambda i: aux_norm_ref(A[i], K, EPS, fc_norm_weight=wf)}
    if "rmsnorm" in ops:
        v["sgl_kernel_Knorm+cat"] = lambda i: torch.cat([ops["rmsnorm"](c, wf[j], EPS)
                                                        for j, c in enumerate(A[i].chunk(K, -1))], -1)
    yield "aux_fc_norm", nb, ns, v, aux_norm_ref(A[0], K, EPS, fc_norm_weight=wf)

    w_in = w(K * H)
    v = {"triton_fused": lambda i: aux_norm(A[i], K, EPS, input_norm_weight=w_in, out=nout),
         "torch_native": lambda i: rmsnorm_ref(A[i], w_in, EPS)}
    if "rmsnorm" in ops:
        v["sgl_kernel_rmsnorm"] = lambda i: ops["rmsnorm"](A[i], w_in, EPS)
    yield "aux_input_norm", nb, ns, v, rmsnorm_ref(A[0], w_in, EPS)

    fcw = (torch.randn(H, K * H, device=dev) * 0.02).to(dt)
    fout = torch.empty(T, H, device=dev, dtype=dt)
    nb = es(H * K * H + T * K * H + T * H)
    v = {"fc_gemm_only(cublas)": lambda i: torch.mm(A[i], fcw.t(), out=fout),
         "triton_norm+cublas": lambda i: fused_aux_fc(A[i], fcw, num_aux=K, eps=EPS, fc_norm_weight=wf,
                                                      out=fout, norm_out=nout),
         "torch_native_norm+linear": lambda i: F.linear(aux_norm_ref(A[i], K, EPS, fc_norm_weight=wf), fcw)}
    ref = F.linear(aux_norm_ref(A[0], K, EPS, fc_norm_weight=wf), fcw)
    yield "aux_fc_full", nb, 1, v, ref  # the fc weight (100 MB) alone exceeds L2

    # 3. residual add + RMSNorm
    nb = es(4 * T * H + H)
    ns = n_sets_for(nb, rotate)
    X = [torch.randn(T, H, device=dev, dtype=dt) for _ in range(ns)]
    R = [torch.randn(T, H, device=dev, dtype=dt) * 3 for _ in range(ns)]
    wa = w(H)
    yo, ro = torch.empty(T, H, device=dev, dtype=dt), torch.empty(T, H, device=dev, dtype=dt)
    Xc, Rc = [x.clone() for x in X], [r.clone() for r in R]
    v = {"triton_fused": lambda i: fused_add_rmsnorm(X[i], R[i], wa, EPS, out=yo, residual_out=ro),
         "triton_inplace": lambda i: fused_add_rmsnorm(Xc[i], Rc[i], wa, EPS, out=Xc[i], residual_out=Rc[i]),
         "torch_native": lambda i: fused_add_rmsnorm_ref(X[i], R[i], wa, EPS)}
    if "fused_add_rmsnorm" in ops:
        Xs, Rs = [x.clone() for x in X], [r.clone() for r in R]
        v["sgl_kernel_inplace"] = lambda i: ops["fused_add_rmsnorm"](Xs[i], Rs[i], wa, EPS)
    ref = fused_add_rmsnorm_ref(X[0], R[0], wa, EPS)[0]
    yield "add_rmsnorm", nb, ns, v, ref

    # 4. SiLU and mul
    nb = es(3 * T * I)
    ns = n_sets_for(nb, rotate)
    G = [torch.randn(T, 2 * I, device=dev, dtype=dt) * 3 for _ in range(ns)]
    so = torch.empty(T, I, device=dev, dtype=dt)
    v = {"triton": lambda i: silu_and_mul(G[i], out=so),
         "torch_native": lambda i: F.silu(G[i][:, :I]) * G[i][:, I:]}
    if "silu_and_mul" in ops:
        v["sgl_kernel"] = lambda i: ops["silu_and_mul"](G[i], so)
    yield "silu_and_mul", nb, ns, v, silu_and_mul_ref(G[0])

    # 5. draft top-k over the draft vocabulary (and the full vocabulary), fp32 logits
    for V in (args.draft_vocab, args.vocab):
        for k in (1, 4):
            nb = 4 * T * V
            ns = n_sets_for(nb, rotate)
            L = [torch.randn(T, V, device=dev) * 3 for _ in range(ns)]
            pos = torch.zeros(T, dtype=torch.int64, device=dev)
            po, io = torch.empty(T, k, device=dev), torch.empty(T, k, device=dev, dtype=torch.int64)
            v = {"triton_2pass": (lambda L, po, io, k: lambda i: draft_topk(L[i], k, out=(po, io)))(L, po, io, k),
                 "torch_softmax+topk": (lambda L, k: lambda i: (torch.max(torch.softmax(L[i], -1), -1, keepdim=True)
                                                                  if k == 1 else torch.topk(torch.softmax(L[i], -1), k, -1)))(L, k)}
            if k == 1 and "draft_topk1_postprocess" in ops:
                v["sglang_topk1_postprocess"] = (lambda L, pos: lambda i: ops["draft_topk1_postprocess"](L[i], pos))(L, pos)
            ref = draft_topk_ref(L[0], k)[0]
            yield f"topk_V{V}_k{k}", nb, ns, v, ref


def dry_run(args):
    rows = []
    for T in [int(b) for b in args.batches.split(",")]:
        for name, nb, ns, variants, ref in cases(T, args, {}, False):
            for vname, fn in variants.items():
                out = fn(0)
                out = out[0] if isinstance(out, tuple) else out
                err = rel_err(out, ref) if isinstance(out, torch.Tensor) and out.shape == ref.shape \
                    and vname not in NO_CHECK else None
                rows.append({"batch": T, "case": name, "variant": vname, "bytes": nb, "rel_err": err})
                print(f"  T={T:<4} {name:<18} {vname:<26} {nb:>10} B  err {err if err is not None else float('nan'):.1e}")
    with open(args.out, "w") as fh:
        json.dump({"meta": {"dry_run_cpu": True, "args": vars(args)}, "rows": rows}, fh, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--large", type=int, default=0, help="also run this many rows (bandwidth-bound check)")
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--inter", type=int, default=14336)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--draft-vocab", type=int, default=32000)
    ap.add_argument("--num-aux", type=int, default=3)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--no-graph", action="store_true")
    ap.add_argument("--no-rotate", action="store_true")
    ap.add_argument("--dry-run-cpu", action="store_true",
                    help="check the script's cases on CPU (run with TRITON_INTERPRET=1 and small sizes); no timing")
    bench_fp8_linear.add_args(ap)
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure='the Triton kernels row (draft kernels at bs 1)', folder='2026-11-29-draft-kernels',
                       duration='about 1 min')
    args = ap.parse_args()
    if args.dry_run:
        return figure_cli.dry_run(out=args.out, cases=[f"batch {b}: every draft kernel vs its reference, {args.reps} reps" for b in args.batches.split(",")], notes=[f"shapes hidden {args.hidden}, inter {args.inter}, vocab {args.vocab}, draft vocab {args.draft_vocab}, {args.dtype}"])
    args.fp8 = args.fp8 or args.fp8_sweep
    if args.fp8:
        bench_fp8_linear.check_args(args)
    if args.dry_run_cpu:
        global DEV
        DEV = "cpu"
        return dry_run(args)
    if not torch.cuda.is_available():
        sys.exit("bench_draft_kernels.py needs a CUDA GPU")
    global L2_BYTES
    props = torch.cuda.get_device_properties(0)
    L2_BYTES = getattr(props, "L2_cache_size", L2_BYTES) or L2_BYTES
    torch.manual_seed(0)
    ops = sgl_ops()
    bw, t_copy = copy_bandwidth()
    import triton
    meta = {**run_meta(), "gpu": props.name, "sms": props.multi_processor_count, "l2_bytes": L2_BYTES,
            "torch": torch.__version__, "triton": triton.__version__, "copy_bw_GBps": bw / 1e9,
            "copy_1GiB_ms": t_copy * 1e3, "args": vars(args), "sgl_ops": sorted(ops)}
    meta["sglang"] = meta["env"].get("sglang")
    print(f"copy bandwidth (1 GiB D2D, read+write): {bw / 1e9:.0f} GB/s", flush=True)
    if args.fp8:
        return fp8_main(args, bw, meta)
    rows = []
    batches = [int(b) for b in args.batches.split(",")] + ([args.large] if args.large else [])
    for T in batches:
        for name, nb, ns, variants, ref in cases(T, args, ops, not args.no_rotate):
            for vname, fn in variants.items():
                err = None
                out = fn(0)
                if isinstance(out, tuple):
                    out = out[0]
                if isinstance(out, torch.Tensor) and out.shape == ref.shape and vname not in NO_CHECK:
                    err = rel_err(out, ref)
                g_us, e_us, g_spread, e_spread = time_variant(fn, ns, args.reps, args.warmup, not args.no_graph)
                t_us = g_us if g_us is not None else e_us
                row = {"batch": T, "case": name, "variant": vname, "bytes": nb, "input_sets": ns,
                       "graph_us": g_us, "eager_us": e_us, "graph_us_minmax": g_spread, "eager_us_minmax": e_spread,
                       "floor_us": nb / bw * 1e6, "achieved_GBps": nb / (t_us * 1e-6) / 1e9,
                       "pct_copy_bw": 100 * nb / (t_us * 1e-6) / bw, "rel_err": err}
                rows.append(row)
                print(f"  T={T:<5} {name:<18} {vname:<26} graph {g_us or float('nan'):8.2f} us  "
                      f"eager {e_us:8.2f} us  err {err if err is not None else float('nan'):.1e}", flush=True)
    with open(args.out, "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1)
    print(f"\nwrote {args.out}; copy BW {bw / 1e9:.0f} GB/s; {props.name}")
    print(f"{'T':>5} {'case':<18} {'variant':<26} {'graph us':>9} {'eager us':>9} {'floor us':>9} {'%BW':>6} {'rel err':>8}")
    for r in rows:
        print(f"{r['batch']:>5} {r['case']:<18} {r['variant']:<26} {r['graph_us'] or float('nan'):9.2f} "
              f"{r['eager_us']:9.2f} {r['floor_us']:9.3f} {r['pct_copy_bw']:6.1f} "
              f"{r['rel_err'] if r['rel_err'] is not None else float('nan'):8.1e}")


def fp8_main(args, bw, meta):
    rows, sweep = bench_fp8_linear.run_fp8(args, bw, L2_BYTES, meta)
    best = {f"{s['fixture']}/{s['shape']}/M{s['M']}": s.get("best") for s in sweep}
    with open(args.out, "w") as fh:
        json.dump({"meta": meta, "fp8_rows": rows, "fp8_sweep_best": best, "fp8_sweep": sweep}, fh, indent=1)
    print(f"\nwrote {args.out}; copy BW {bw / 1e9:.0f} GB/s")
    print(f"{'fixture':<14} {'shape':<8} {'M':>3} {'variant':<12} {'us':>8} {'floor':>7} {'GB/s':>6} {'%BW':>5}")
    for r in rows:
        if "graph_us" in r:
            print(f"{r['fixture']:<14} {r['shape']:<8} {r['M']:>3} {r['variant']:<12} {r['graph_us']:8.2f} "
                  f"{r['floor_us']:7.2f} {r['GBps']:6.0f} {r['pct_copy_bw']:5.1f}")


if __name__ == "__main__":
    main()
