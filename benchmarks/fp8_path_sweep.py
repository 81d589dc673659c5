"""The sweep that chose kernels/fp8_linear.py's two paths and its tuned table (`_TUNED`), H200, 2026-12-01:
the first kernel (one tl.dot path, x as the left operand) reached 25-70 % of the copy bandwidth on the
drafter shapes, SGLang's w8a8 FP8 GEMM 39-96 %. This script times, per drafter shape and M in 1, 8, 32,
that kernel ("current"), SGLang's apply_fp8_linear, and prototypes of the two paths the module now has:
"swap" (weight as the dot's left operand) over (block_n, block_k, split_k, warps, stages) and, at M == 1,
"gemv" (no tensor cores). The prototypes here are the algorithms kernels/fp8_linear.py took over (its
_fp8_linear_kernel / _fp8_gemv_kernel add bias and the interpreter branches); they are kept so the
recorded sweep can be rerun as it was:

    python benchmarks/fp8_path_sweep.py OUT.json [BUDGET_S]      # ~210 s on one H200
"""
import json, os, statistics, sys, itertools, time
import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sglang_patches.kernels.fp8_linear import fp8_linear, fp8_linear_ref, quantize_fp8_per_channel
from bench_fp8_linear import drafter_shapes, graph_us, sglang_fp8_op, rel_err


@triton.jit
def swap_ab_kernel(x_ptr, stride_xm, w_ptr, scale_ptr, out_ptr, stride_om, ws_ptr, M, N, K, k_iters,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_mask = offs_m < M
    n_mask = offs_n < N
    x_rows = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm
    w_rows = w_ptr + offs_n.to(tl.int64)[:, None] * K
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for i in range(0, k_iters):
        kk = (pid_k * k_iters + i) * BLOCK_K + offs_k
        k_mask = kk < K
        w = tl.load(w_rows + kk[None, :], mask=n_mask[:, None] & k_mask[None, :], other=0.0,
                    eviction_policy="evict_first")
        x = tl.load(x_rows + kk[None, :], mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        acc = tl.dot(w.to(x_ptr.dtype.element_ty), tl.trans(x), acc)
    if SPLIT_K == 1:
        y = acc * tl.load(scale_ptr + offs_n, mask=n_mask, other=1.0)[:, None]
        out_ptrs = out_ptr + offs_m.to(tl.int64)[None, :] * stride_om + offs_n[:, None]
        tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=n_mask[:, None] & m_mask[None, :])
    else:
        ws_ptrs = ws_ptr + (pid_k * M + offs_m).to(tl.int64)[None, :] * N + offs_n[:, None]
        tl.store(ws_ptrs, acc, mask=n_mask[:, None] & m_mask[None, :])


@triton.jit
def gemv_kernel(x_ptr, w_ptr, scale_ptr, out_ptr, ws_ptr, N, K, k_iters,
                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    n_mask = offs_n < N
    w_rows = w_ptr + offs_n.to(tl.int64)[:, None] * K
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for i in range(0, k_iters):
        kk = (pid_k * k_iters + i) * BLOCK_K + offs_k
        k_mask = kk < K
        w = tl.load(w_rows + kk[None, :], mask=n_mask[:, None] & k_mask[None, :], other=0.0,
                    eviction_policy="evict_first")
        x = tl.load(x_ptr + kk, mask=k_mask, other=0.0)
        acc += w.to(tl.float32) * x.to(tl.float32)[None, :]
    s = tl.sum(acc, axis=1)
    if SPLIT_K == 1:
        y = s * tl.load(scale_ptr + offs_n, mask=n_mask, other=1.0)
        tl.store(out_ptr + offs_n, y.to(out_ptr.dtype.element_ty), mask=n_mask)
    else:
        tl.store(ws_ptr + pid_k * N + offs_n, s, mask=n_mask)


@triton.jit
def reduce_kernel(ws_ptr, scale_ptr, out_ptr, stride_om, M, N, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    m = tl.program_id(1)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(SPLIT_K):
        acc += tl.load(ws_ptr + (s * M + m).to(tl.int64) * N + offs, mask=mask, other=0.0)
    y = acc * tl.load(scale_ptr + offs, mask=mask, other=1.0)
    tl.store(out_ptr + m.to(tl.int64) * stride_om + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def run_swap(x, w8, scale, out, ws, bn, bk, split, nw, ns):
    M, K = x.shape
    N = w8.shape[0]
    k_iters = triton.cdiv(triton.cdiv(K, bk), split)
    swap_ab_kernel[(triton.cdiv(N, bn), split)](x, x.stride(0), w8, scale, out, out.stride(0), ws, M, N, K, k_iters,
                                                BLOCK_M=max(16, triton.next_power_of_2(M)), BLOCK_N=bn, BLOCK_K=bk,
                                                SPLIT_K=split, num_warps=nw, num_stages=ns)
    if split > 1:
        reduce_kernel[(triton.cdiv(N, 512), M)](ws, scale, out, out.stride(0), M, N, SPLIT_K=split, BLOCK=512)
    return out


def run_gemv(x, w8, scale, out, ws, bn, bk, split, nw, ns):
    N, K = w8.shape
    k_iters = triton.cdiv(triton.cdiv(K, bk), split)
    gemv_kernel[(triton.cdiv(N, bn), split)](x, w8, scale, out, ws, N, K, k_iters, BLOCK_N=bn, BLOCK_K=bk,
                                             SPLIT_K=split, num_warps=nw, num_stages=ns)
    if split > 1:
        reduce_kernel[(triton.cdiv(N, 512), 1)](ws, scale, out, out.stride(0), 1, N, SPLIT_K=split, BLOCK=512)
    return out


def main():
    out_path = sys.argv[1]
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 200
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
                cands = [("current", None)]
                for bn, bk, sp, (nw, ns) in itertools.product((64, 128), (128, 256), (1, 2, 4, 8), ((4, 3), (4, 4), (8, 3))):
                    if -(-N // bn) * sp < 100 or -(-K // bk) < 4 * sp:
                        continue
                    cands.append(("swap", (bn, bk, sp, nw, ns)))
                if M == 1:
                    for bn, bk, sp, (nw, ns) in itertools.product((8, 16, 32), (256, 512), (1, 2, 4, 8), ((4, 2), (4, 3), (8, 3))):
                        if -(-N // bn) * sp < 100 or -(-N // bn) * sp > 4096 or -(-K // bk) < 2 * sp:
                            continue
                        cands.append(("gemv", (bn, bk, sp, nw, ns)))
                if sgl is not None:
                    cands.append(("sglang_fp8", None))
                best = {}
                for kind, cfg in cands:
                    if time.time() - t0 > budget:
                        break
                    if kind == "current":
                        fn = lambda i: fp8_linear(X[i], *Q[i], out=out)
                    elif kind == "swap":
                        fn = lambda i, cfg=cfg: run_swap(X[i], *Q[i], out, ws, *cfg)
                    elif kind == "gemv":
                        fn = lambda i, cfg=cfg: run_gemv(X[i], *Q[i], out, ws, *cfg)
                    else:
                        WT = [q[0].t() for q in Q]; SC = [q[1].view(-1, 1) for q in Q]
                        fn = lambda i, WT=WT, SC=SC: sgl(X[i], WT[i], SC[i], None)
                    try:
                        y = fn(0)
                        err = rel_err(y, ref)
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
    main()
