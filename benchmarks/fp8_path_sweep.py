"""The sweep that chose kernels/fp8_linear.py's two paths and its tuned table (`_TUNED`), one H200:
per drafter shape (llama3-8b, kimi-k2-shape) and M in 1, 8, 32 it times fp8_linear's "swap" (MMA,
weight as the dot's left operand) path over (block_n, block_k, split_k, warps, stages), at M == 1 its
"gemv" path, the default config ("default"), at M > 1 the fp8-activation path (kernels/fp8_w8a8_linear.py,
its per-token quantization included, "w8a8") and SGLang's apply_fp8_linear, and writes every timing.

    python benchmarks/fp8_path_sweep.py OUT.json [BUDGET_S]      # ~210 s on one H200

The recorded run (benchmarks/results/2026-12-01-fp8-kernel-sweep/path_sweep.json.xz) timed prototypes of the
two paths, written in this script before fp8_linear took them over with the same tiles and loops, and
the first single-path kernel as "current"; this script now runs the module's own kernels.
"""
import itertools
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sglang_patches.kernels.fp8_linear import fp8_linear, fp8_linear_ref, quantize_fp8_per_channel
from sglang_patches.kernels.fp8_w8a8_linear import fp8_w8a8_linear, fp8_w8a8_linear_ref
from bench_fp8_linear import drafter_shapes, graph_us, sglang_fp8_op, rel_err


PATH = {"swap": "mma", "gemv": "gemv"}  # the sweep's names (kept: the recorded JSON and the table test use them)


def run_path(kind, x, w8, scale, out, ws, bn, bk, split, nw, ns):
    return fp8_linear(x, w8, scale, out=out, workspace=ws, path=PATH[kind], block_n=bn, block_k=bk, split_k=split,
                      num_warps=nw, num_stages=ns)


def _die(msg):
    print(f"fp8_path_sweep: {msg}", file=sys.stderr)
    sys.exit(2)


def _args(argv):
    """(out_path, budget_s), or exit 2 with one line."""
    usage = "usage: python benchmarks/fp8_path_sweep.py OUT.json [BUDGET_S]"
    if not 1 <= len(argv) <= 2 or not argv[0].endswith(".json"):
        _die(f"expected OUT.json and an optional budget in seconds ({usage})")
    out = argv[0]
    if os.path.isdir(out) or not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        _die(f"{out}: not a file in an existing folder ({usage})")
    try:
        budget = float(argv[1]) if len(argv) > 1 else 200.0
    except ValueError:
        _die(f"budget {argv[1]!r} is not a number of seconds ({usage})")
    if not torch.cuda.is_available():
        _die("needs a CUDA GPU (it times the kernels); none is visible")
    return out, budget


def main():
    import figure_cli  # benchmarks/, beside this script
    argv = sys.argv[1:]
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__ + "\n" + figure_cli.figure_note(
            figure="the FP8 kernel sweeps (fp8_linear's paths and tuned table)",
            folder=("2026-12-01-fp8-kernel-sweep", "2026-12-02-fp8-w8a8-sweep"),
            duration="about 3-6 min (138 s and ~330 s recorded; BUDGET_S bounds it)"))
        return 0
    if "--dry-run" in argv:
        rest = [a for a in argv if a != "--dry-run"]
        return figure_cli.dry_run(out=rest[0] if rest else "OUT.json (not given)", cases=[
            f"{fx}: {', '.join(drafter_shapes(fx))} at M 1, 8, 32: swap / gemv / default / w8a8 / SGLang"
            for fx in ("llama3-8b", "kimi-k2-shape")], notes=[f"budget {rest[1] if len(rest) > 1 else 200} s"])
    out_path, budget = _args(argv)
    t0 = time.time()
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
    for _ in range(3): b.copy_(a)
    torch.cuda.synchronize(); ts = []
    for _ in range(10):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); b.copy_(a); e1.record(); e1.synchronize(); ts.append(e0.elapsed_time(e1) / 1e3)
    bw = 2 * (1 << 30) / statistics.median(ts); del a, b
    print(f"copy bw {bw/1e9:.0f} GB/s", flush=True)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    sgl, why = sglang_fp8_op()
    res = []
    for fixture in ("llama3-8b", "kimi-k2-shape"):
        for name, (N, K) in drafter_shapes(fixture).items():
            n8 = max(3, -(-2 * l2 // (N * K)))
            W = [(torch.randn(N, K, device="cuda") * 0.02).bfloat16() for _ in range(n8)]
            Q = [quantize_fp8_per_channel(w) for w in W]; del W
            ws = torch.empty(16 * 64 * N, dtype=torch.float32, device="cuda")
            for M in (1, 8, 32):
                X = [torch.randn(M, K, device="cuda").bfloat16() for _ in range(n8)]
                out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
                ref = fp8_linear_ref(X[0], *Q[0])
                cands = [("default", None)]
                for bn, bk, sp, (nw, ns) in itertools.product((64, 128), (128, 256), (1, 2, 4, 8), ((4, 3), (4, 4), (8, 3))):
                    if -(-N // bn) * sp < 100 or -(-K // bk) < 4 * sp:
                        continue
                    cands.append(("swap", (bn, bk, sp, nw, ns)))
                if M == 1:
                    for bn, bk, sp, (nw, ns) in itertools.product((8, 16, 32), (256, 512), (1, 2, 4, 8), ((4, 2), (4, 3), (8, 3))):
                        if -(-N // bn) * sp < 100 or -(-N // bn) * sp > 4096 or -(-K // bk) < 2 * sp:
                            continue
                        cands.append(("gemv", (bn, bk, sp, nw, ns)))
                if M > 1:
                    cands.append(("w8a8", None))
                    X8 = torch.empty(M, K, device="cuda", dtype=torch.float8_e4m3fn)
                    XS = torch.empty(M, device="cuda", dtype=torch.float32)
                if sgl is not None:
                    cands.append(("sglang_fp8", None))
                best = {}
                for kind, cfg in cands:
                    if time.time() - t0 > budget:
                        break
                    if kind == "default":  # fp8_linear_config's choice
                        fn = lambda i: fp8_linear(X[i], *Q[i], out=out, workspace=ws)
                    elif kind == "w8a8":
                        fn = lambda i: fp8_w8a8_linear(X[i], *Q[i], out=out, workspace=ws, x8=X8, xs=XS)
                    elif kind in PATH:
                        fn = lambda i, kind=kind, cfg=cfg: run_path(kind, X[i], *Q[i], out, ws, *cfg)
                    else:
                        WT = [q[0].t() for q in Q]; SC = [q[1].view(-1, 1) for q in Q]
                        fn = lambda i, WT=WT, SC=SC: sgl(X[i], WT[i], SC[i], None)
                    try:
                        y = fn(0)
                        err = rel_err(y, fp8_w8a8_linear_ref(X[0], *Q[0]) if kind == "w8a8" else ref)
                        t = graph_us(fn, n8, 5, inner=2 * n8)
                    except Exception as e:  # noqa: BLE001
                        res.append(dict(fixture=fixture, shape=name, M=M, kind=kind, cfg=cfg, failed=str(e)[:200])); continue
                    r = dict(fixture=fixture, shape=name, N=N, K=K, M=M, kind=kind, cfg=cfg, us=t, err=err,
                             pct=100 * N * K / (t * 1e-6) / bw)
                    res.append(r)
                    if (err < 1e-2 or kind == "sglang_fp8") and (kind not in best or t < best[kind]["us"]):
                        best[kind] = r
                line = " ".join(f"{k}={v['us']:.1f}us({v['pct']:.0f}%){'' if v['cfg'] is None else v['cfg']}" for k, v in best.items())
                print(f"{fixture:14s} {name:8s} M={M:<3d} {line}", flush=True)
            del Q, ws
            torch.cuda.empty_cache()
    json.dump(dict(bw=bw, rows=res), open(out_path, "w"))


if __name__ == "__main__":
    sys.exit(main())
