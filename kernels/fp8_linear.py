"""FP8 (e4m3) weight-only linear for the EAGLE-3 drafter's decode shapes: y = x @ dequant(w8).T + bias
with a per-output-channel fp32 scale, x and y in bf16/fp16, M (tokens) <= 64.

At M <= 64 a drafter GEMM is a weight stream: the time is reading the [N, K] weight, so storing it as
fp8 halves the bytes against bf16 (8B-shaped drafter layer + lm_head: ~0.75 GB bf16 -> ~0.37 GB fp8).
Activations stay 16-bit (no per-token activation quantization, unlike SGLang's w8a8 path), so the only
error is the weight rounding to e4m3 (relative 2^-4 of each element, at most, below the row's amax).
(fp8_w8a8_linear.py runs the MMA kernel below with fp8 activation rows too: A8.)

Two paths, both with grid (N blocks, SPLIT_K), program (n, s) streaming weight rows [n*BLOCK_N, +BLOCK_N)
over its K range in [BLOCK_N, BLOCK_K] fp8 tiles (16-byte loads, evict-first: the weight is read once):
  * GEMV (M == 1, the batch-1 draft step): each tile is converted to fp32 in registers and multiplied
    element by element with x's K slice into a [BLOCK_N, BLOCK_K] fp32 accumulator, summed over K once
    at the end. No tensor cores, so no shuffle of the weight tile into an MMA operand layout.
  * MMA (2..64 rows): swap-AB, acc[BLOCK_N, BLOCK_M] = w_tile (converted to x's dtype) @ x_tile^T, so the
    weight's 64/128 rows fill the MMA's M side and the few tokens (BLOCK_M = max(16, next_pow2(M)),
    masked) its N side.
SPLIT_K == 1: the epilogue multiplies by scale[n], adds the bias and rounds once at the store.
SPLIT_K > 1 (to fill the 132 SMs when N / BLOCK_N is small): fp32 partial sums go to a [SPLIT_K, M, N]
workspace and a second kernel sums them in a fixed order (deterministic, no atomics), then scale, bias,
one rounding. Launch parameters: fp8_linear_config (the H200 sweep's best per drafter shape, a rule
otherwise).

Numerics: e4m3 values are exact in bf16 and fp16 (3 mantissa bits, exponents 2^-9..2^8), and the
product of two bf16 (or two fp16) values is exact in fp32 (<= 22 significant bits), so the
tensor-core dot with fp32 accumulation equals fp32 math on the same values up to summation order.
That is why the interpreter path (DOT_F32, set when TRITON_INTERPRET=1: Triton 3.6's interpreter gives
wrong results for tl.dot with bf16 operands) computes the same function with fp32 operands.
In the interpreter the number of K tiles is a constexpr (it fails on a runtime loop bound); on the
GPU it is a runtime argument, so one compile per (BLOCK_M, config) serves every layer's K (a sweep
over 12 shapes x 40 configs would otherwise compile ~1000 kernels).

CUDA graphs: no host sync, no .item(); grid and constexprs come from shapes only. Per call the
launcher allocates only the output (when out is None) and, for SPLIT_K > 1, the workspace (when
workspace is None; fp8_linear_workspace_numel gives its size for a preallocated one).
"""
from __future__ import annotations

import functools
import os
from typing import Optional

import torch
import triton
import triton.language as tl

MAX_M = 64
FP8_MAX = 448.0  # largest finite float8_e4m3fn
X_DTYPES = (torch.bfloat16, torch.float16)
N_SMS = 132  # H200; the heuristic's target for programs in flight
REDUCE_BLOCK = 512


@triton.jit
def _fp8_k_tile(acc, x_rows, w_rows, m_mask, n_mask, kk, K, X_DTYPE: tl.constexpr, DOT_F32: tl.constexpr,
                A8: tl.constexpr):
    """acc[BLOCK_N, BLOCK_M] += w[:, kk] @ x[:, kk]^T for one [BLOCK_N, BLOCK_K] fp8 weight tile (swap-AB:
    the weight is the dot's left operand, so its 64/128 rows fill the MMA's M side and the few tokens
    its N side). A8: x is fp8 too (fp8_w8a8_linear's per-token quantized rows)."""
    k_mask = kk < K
    w = tl.load(w_rows + kk[None, :], mask=n_mask[:, None] & k_mask[None, :], other=0.0,
                eviction_policy="evict_first")  # streamed once: keep x and the outputs in L2 instead
    x = tl.load(x_rows + kk[None, :], mask=m_mask[:, None] & k_mask[None, :], other=0.0)
    if DOT_F32:  # interpreter: same products (exact in fp32), see the module docstring
        acc += tl.dot(w.to(tl.float32), tl.trans(x.to(tl.float32)), input_precision="ieee")
    elif A8:  # GPU: fp8 x fp8 tensor-core dot on the tile as loaded. Hopper's fp8 MMA adds at reduced
        # precision (~14 bits) and Triton 3.6 would promote to fp32 only after 2^30 products: promote
        # per K tile instead, so the K loop itself accumulates in fp32.
        acc = tl.dot(w, tl.trans(x), acc, max_num_imprecise_acc=w.shape[1])
    else:  # GPU: fp8 -> x's dtype (exact), tensor-core dot, fp32 accumulate
        acc = tl.dot(w.to(X_DTYPE), tl.trans(x), acc)
    return acc


@triton.jit(do_not_specialize=["M", "k_iters"])  # no extra compiles for M == 1 / one K tile
def _fp8_linear_kernel(x_ptr, stride_xm, w_ptr, scale_ptr, bias_ptr, out_ptr, stride_om, ws_ptr, M, N, K,
                       k_iters, xs_ptr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, K_ITERS: tl.constexpr, SPLIT_K: tl.constexpr,
                       DOT_F32: tl.constexpr, A8: tl.constexpr = False):
    """The MMA path (2 <= M <= 64): program (n, s) owns weight rows [n*BLOCK_N, +BLOCK_N) over its K split.
    A8 (fp8_w8a8_linear): x is fp8 with one scale per row, xs_ptr[m], applied in the epilogue."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_mask = offs_m < M
    n_mask = offs_n < N
    x_rows = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm
    w_rows = w_ptr + offs_n.to(tl.int64)[:, None] * K
    # K tiles per split: the constexpr K_ITERS in the interpreter (it fails on a runtime loop bound),
    # the runtime k_iters on the GPU (K_ITERS == 0 there: one compile serves every K). Two loops, not
    # one over a variable set in an `if`: the interpreter turns that variable into a tensor.
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    if K_ITERS > 0:
        for i in range(K_ITERS):
            acc = _fp8_k_tile(acc, x_rows, w_rows, m_mask, n_mask, (pid_k * K_ITERS + i) * BLOCK_K + offs_k, K,
                              x_ptr.dtype.element_ty, DOT_F32, A8)
    else:
        for i in range(0, k_iters):
            acc = _fp8_k_tile(acc, x_rows, w_rows, m_mask, n_mask, (pid_k * k_iters + i) * BLOCK_K + offs_k, K,
                              x_ptr.dtype.element_ty, DOT_F32, A8)
    mask = n_mask[:, None] & m_mask[None, :]
    if SPLIT_K == 1:
        y = acc * tl.load(scale_ptr + offs_n, mask=n_mask, other=1.0)[:, None]
        if A8:
            y = y * tl.load(xs_ptr + offs_m, mask=m_mask, other=1.0)[None, :]
        if HAS_BIAS:
            y += tl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)[:, None]
        out_ptrs = out_ptr + offs_m.to(tl.int64)[None, :] * stride_om + offs_n[:, None]
        tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        ws_ptrs = ws_ptr + (pid_k * M + offs_m).to(tl.int64)[None, :] * N + offs_n[:, None]
        tl.store(ws_ptrs, acc, mask=mask)


@triton.jit
def _gemv_k_tile(acc, x_ptr, w_rows, n_mask, kk, K):
    """acc[BLOCK_N, BLOCK_K] += w[:, kk] * x[kk]: elementwise FMAs, reduced over K once at the end."""
    k_mask = kk < K
    w = tl.load(w_rows + kk[None, :], mask=n_mask[:, None] & k_mask[None, :], other=0.0,
                eviction_policy="evict_first")
    x = tl.load(x_ptr + kk, mask=k_mask, other=0.0)
    return acc + w.to(tl.float32) * x.to(tl.float32)[None, :]


@triton.jit(do_not_specialize=["k_iters"])
def _fp8_gemv_kernel(x_ptr, w_ptr, scale_ptr, bias_ptr, out_ptr, ws_ptr, N, K, k_iters, HAS_BIAS: tl.constexpr,
                     BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, K_ITERS: tl.constexpr, SPLIT_K: tl.constexpr):
    """The GEMV path (M == 1): no tensor cores, no layout change of the weight tile between load and use
    (fp8 -> fp32 in registers, one FMA per element), which is what lets it stream at 71-94 % of the
    copy bandwidth on the >= 50 MB drafter shapes (51 % on the 17 MB 8B o_proj) where the MMA path reaches
    31-65 % at 8-32 rows (H200 sweep, kernels/NOTES.md)."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    n_mask = offs_n < N
    w_rows = w_ptr + offs_n.to(tl.int64)[:, None] * K
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    if K_ITERS > 0:
        for i in range(K_ITERS):
            acc = _gemv_k_tile(acc, x_ptr, w_rows, n_mask, (pid_k * K_ITERS + i) * BLOCK_K + offs_k, K)
    else:
        for i in range(0, k_iters):
            acc = _gemv_k_tile(acc, x_ptr, w_rows, n_mask, (pid_k * k_iters + i) * BLOCK_K + offs_k, K)
    s = tl.sum(acc, axis=1)
    if SPLIT_K == 1:
        y = s * tl.load(scale_ptr + offs_n, mask=n_mask, other=1.0)
        if HAS_BIAS:
            y += tl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + offs_n, y.to(out_ptr.dtype.element_ty), mask=n_mask)
    else:
        tl.store(ws_ptr + pid_k * N + offs_n, s, mask=n_mask)


@triton.jit
def _fp8_splitk_reduce_kernel(ws_ptr, scale_ptr, bias_ptr, out_ptr, stride_om, M, N, xs_ptr,
                              HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr,
                              A8: tl.constexpr = False):
    """Program (b, m): out[m, b*BLOCK:+BLOCK] = (sum_s ws[s, m, :]) * scale (* xs[m] when A8) (+ bias), s in order."""
    m = tl.program_id(1)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(SPLIT_K):
        acc += tl.load(ws_ptr + (s * M + m).to(tl.int64) * N + offs, mask=mask, other=0.0)
    y = acc * tl.load(scale_ptr + offs, mask=mask, other=1.0)
    if A8:
        y = y * tl.load(xs_ptr + m)
    if HAS_BIAS:
        y += tl.load(bias_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + m.to(tl.int64) * stride_om + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


# ----------------------------------------------------------------------------- load time
def quantize_fp8_per_channel(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[N, K] bf16/fp16/fp32 -> (w8 [N, K] float8_e4m3fn contiguous, scale [N] fp32), with
    scale[n] = amax(|w[n, :]|) / 448 (1.0 for an all-zero row). Load time only (allocates, syncs)."""
    assert isinstance(w, torch.Tensor) and w.dim() == 2, "w: expected a 2-D [N, K] tensor"
    assert w.dtype in (torch.bfloat16, torch.float16, torch.float32), f"w: dtype {w.dtype} not bf16/fp16/fp32"
    assert w.shape[0] >= 1 and w.shape[1] >= 1, f"w: empty shape {tuple(w.shape)}"
    wf = w.float()
    amax = wf.abs().amax(dim=1)
    assert bool(torch.isfinite(amax).all()), "w: has inf/NaN values; fp8 quantization needs finite weights"
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
    w8 = (wf / scale[:, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).contiguous()
    return w8, scale.contiguous()


# ----------------------------------------------------------------------------- launch parameters
# Best configs of the H200 sweep (benchmarks/results/2026-12-01-fp8-kernel-sweep/, kernels/NOTES.md) for the
# drafters' own shapes, (N, K) -> {M bucket: (path, block_n, block_k, split_k, num_warps, num_stages)};
# M buckets: 1 (GEMV path), 16 (2..16 rows), 64 (17..64). Other shapes (e.g. TP shards) use the rule below.
_TUNED = {
    # llama3-8b-shaped drafter: qkv, o, gate_up, down, lm_head, fc
    (6144, 8192): {1: ("gemv", 16, 512, 1, 8, 3), 16: ("mma", 128, 128, 8, 4, 3), 64: ("mma", 64, 128, 4, 4, 3)},
    (4096, 4096): {1: ("gemv", 16, 512, 1, 8, 3), 16: ("mma", 128, 128, 8, 4, 3), 64: ("mma", 64, 128, 8, 4, 3)},
    (28672, 4096): {1: ("gemv", 16, 256, 1, 4, 3), 16: ("mma", 128, 128, 4, 8, 3), 64: ("mma", 64, 128, 1, 4, 3)},
    (4096, 14336): {1: ("gemv", 32, 256, 4, 8, 3), 16: ("mma", 128, 128, 8, 4, 3), 64: ("mma", 64, 256, 4, 4, 3)},
    (32000, 4096): {1: ("gemv", 32, 256, 1, 8, 3), 16: ("mma", 64, 128, 1, 4, 3), 64: ("mma", 64, 128, 1, 4, 3)},
    (4096, 12288): {1: ("gemv", 32, 256, 4, 8, 3), 16: ("mma", 128, 128, 8, 4, 3), 64: ("mma", 64, 256, 4, 4, 3)},
    # kimi-k2-shape (7168-wide) drafter: qkv, o, gate_up, down, lm_head, fc
    (9216, 14336): {1: ("gemv", 16, 512, 2, 8, 3), 16: ("mma", 128, 128, 8, 4, 3), 64: ("mma", 64, 128, 8, 4, 3)},
    (7168, 7168): {1: ("gemv", 8, 512, 1, 4, 2), 16: ("mma", 128, 128, 4, 4, 3), 64: ("mma", 64, 128, 8, 4, 3)},
    (36864, 7168): {1: ("gemv", 32, 256, 2, 8, 3), 16: ("mma", 128, 128, 8, 8, 3), 64: ("mma", 64, 128, 1, 4, 3)},
    (7168, 18432): {1: ("gemv", 16, 256, 2, 4, 2), 16: ("mma", 128, 128, 4, 4, 3), 64: ("mma", 64, 128, 8, 4, 3)},
    (32000, 7168): {1: ("gemv", 32, 256, 1, 8, 3), 16: ("mma", 64, 128, 1, 4, 3), 64: ("mma", 64, 128, 1, 4, 3)},
    (7168, 21504): {1: ("gemv", 16, 256, 2, 4, 2), 16: ("mma", 128, 128, 4, 4, 3), 64: ("mma", 64, 128, 8, 4, 3)},
}
_KEYS = ("path", "block_n", "block_k", "split_k", "num_warps", "num_stages")


def fp8_linear_config(M: int, N: int, K: int) -> dict:
    """Launch parameters for an [M, K] x [N, K]^T product: the H200 sweep's best for a tuned shape,
    else the rule the sweep's winners follow: M == 1 takes the GEMV path (16-row blocks, 32 for wide
    N, 256-wide K tiles, 8 warps), more rows the MMA path (128 weight rows per program up to 16 tokens,
    64 above, 128-wide K tiles, 4 warps); K is split (deterministic second pass) until there are
    >= 512 (GEMV) / 384 (MMA) programs, keeping >= 8 K tiles per split (narrower blocks first when
    even that leaves too few, e.g. for a TP shard)."""
    bucket = 1 if M <= 1 else (16 if M <= 16 else 64)
    tuned = _TUNED.get((N, K), {}).get(bucket)
    if tuned is not None:
        return dict(zip(_KEYS, tuned))
    if bucket == 1:
        path, block_n, block_k, warps, want = "gemv", (16 if N < 16384 else 32), 256, 8, 512
    else:
        path, block_n, block_k, warps, want = "mma", (128 if M <= 16 else 64), 128, 4, 384
    block_k = min(block_k, max(16, triton.next_power_of_2(K)))
    k_tiles = triton.cdiv(K, block_k)
    max_split = max(1, triton.next_power_of_2(k_tiles // 8 + 1) // 2)  # >= 8 K tiles per split
    while block_n > 16 and triton.cdiv(N, block_n) * max_split < want:  # small N (TP shards): narrower blocks
        block_n //= 2
    split = 1
    while triton.cdiv(N, block_n) * split < want and split < max_split:
        split *= 2
    return dict(path=path, block_n=block_n, block_k=block_k, split_k=split, num_warps=warps, num_stages=3)


@functools.lru_cache(maxsize=4096)
def _config_cached(M: int, N: int, K: int) -> tuple:
    """fp8_linear_config as (key, value) pairs, computed once per (M, N, K): a cache lookup and a copy per
    call instead of the table lookup or the rule. _TUNED is read once per shape: edit it before any call."""
    return tuple(fp8_linear_config(M, N, K).items())


def fp8_linear_workspace_numel(M: int, N: int, split_k: int) -> int:
    """fp32 elements of the split-K workspace ([split_k, M, N]); 0 when split_k == 1."""
    return 0 if split_k <= 1 else split_k * M * N


def _pow2(name, v, lo, hi):
    assert isinstance(v, int) and lo <= v <= hi and (v & (v - 1)) == 0, \
        f"{name}={v!r}: expected a power of two in [{lo}, {hi}]"


# ----------------------------------------------------------------------------- launcher
def fp8_linear(x: torch.Tensor, w8: torch.Tensor, scale: torch.Tensor, bias: Optional[torch.Tensor] = None, *,
               out: Optional[torch.Tensor] = None, workspace: Optional[torch.Tensor] = None,
               path: Optional[str] = None, block_n: Optional[int] = None, block_k: Optional[int] = None,
               split_k: Optional[int] = None, num_warps: Optional[int] = None,
               num_stages: Optional[int] = None) -> torch.Tensor:
    """y[M, N] = (x @ w8.float().T) * scale (+ bias) in x's dtype; fp32 accumulation, one rounding.
    x: [M, K] bf16/fp16, 1 <= M <= MAX_M, rows may be strided (last dim contiguous); w8: [N, K]
    float8_e4m3fn contiguous; scale: [N] fp32; bias: [N] float or None. out: optional [M, N] buffer of
    x's dtype (rows may be strided). workspace: optional fp32 buffer with >= fp8_linear_workspace_numel
    elements, used only when split_k > 1. The keyword overrides replace fp8_linear_config's choice."""
    assert isinstance(x, torch.Tensor) and x.dim() == 2, "x: expected a 2-D [M, K] tensor"
    assert x.dtype in X_DTYPES, f"x: dtype {x.dtype} not bf16/fp16"
    assert isinstance(w8, torch.Tensor) and w8.dim() == 2, "w8: expected a 2-D [N, K] tensor"
    assert w8.dtype == torch.float8_e4m3fn, f"w8: dtype {w8.dtype}, expected torch.float8_e4m3fn " \
                                            "(quantize_fp8_per_channel)"
    N, K = w8.shape
    M = x.shape[0]
    assert N >= 1 and K >= 1, f"w8: empty shape {tuple(w8.shape)}"
    assert x.shape[1] == K, f"x: {x.shape[1]} columns != w8's K = {K}"
    assert M <= MAX_M, f"x: {M} rows > MAX_M = {MAX_M} (this kernel is for decode batch sizes)"
    assert w8.is_contiguous(), "w8: must be contiguous (quantize_fp8_per_channel returns it so)"
    assert x.stride(1) == 1 or M == 0, f"x: last dim must be contiguous (stride {x.stride()})"
    assert M <= 1 or x.stride(0) >= K, f"x: overlapping rows (stride {x.stride()})"
    assert isinstance(scale, torch.Tensor) and scale.dim() == 1 and scale.shape[0] == N, \
        f"scale: expected shape ({N},), got {tuple(scale.shape)}"
    assert scale.dtype == torch.float32 and scale.is_contiguous(), "scale: must be contiguous fp32"
    dev = x.device
    assert w8.device == dev and scale.device == dev, f"w8/scale on {w8.device}/{scale.device}, x on {dev}"
    if bias is not None:
        assert isinstance(bias, torch.Tensor) and bias.dim() == 1 and bias.shape[0] == N, \
            f"bias: expected shape ({N},), got {tuple(bias.shape)}"
        assert bias.dtype in (torch.bfloat16, torch.float16, torch.float32) and bias.is_contiguous(), \
            f"bias: must be a contiguous float tensor (got {bias.dtype})"
        assert bias.device == dev, f"bias on {bias.device}, x on {dev}"
    if out is None:
        out = torch.empty((M, N), dtype=x.dtype, device=dev)
    else:
        assert isinstance(out, torch.Tensor) and out.dim() == 2 and tuple(out.shape) == (M, N), \
            f"out: expected shape ({M}, {N}), got {tuple(out.shape)}"
        assert out.dtype == x.dtype and out.device == dev, f"out: {out.dtype} on {out.device}, expected {x.dtype} on {dev}"
        assert out.stride(1) == 1 or M == 0, f"out: last dim must be contiguous (stride {out.stride()})"
        assert M <= 1 or out.stride(0) >= N, f"out: overlapping rows (stride {out.stride()})"
    if M == 0:
        return out
    cfg = dict(_config_cached(M, N, K))  # a copy: the overrides below change it
    for key, v in (("path", path), ("block_n", block_n), ("block_k", block_k), ("split_k", split_k),
                   ("num_warps", num_warps), ("num_stages", num_stages)):
        if v is not None:
            cfg[key] = v
    assert cfg["path"] in ("gemv", "mma"), f"path={cfg['path']!r}: expected 'gemv' or 'mma'"
    assert cfg["path"] == "mma" or M == 1, f"path='gemv' takes one row, x has {M}"
    _pow2("block_n", cfg["block_n"], 8 if cfg["path"] == "gemv" else 16, 256)
    _pow2("block_k", cfg["block_k"], 16, 512)
    _pow2("split_k", cfg["split_k"], 1, 64)
    _pow2("num_warps", cfg["num_warps"], 1, 16)
    assert isinstance(cfg["num_stages"], int) and 1 <= cfg["num_stages"] <= 8, f"num_stages={cfg['num_stages']!r}"
    bn, bk, split = cfg["block_n"], cfg["block_k"], cfg["split_k"]
    k_iters = triton.cdiv(triton.cdiv(K, bk), split)
    need = fp8_linear_workspace_numel(M, N, split)
    if split > 1:
        if workspace is None:
            workspace = torch.empty(need, dtype=torch.float32, device=dev)
        assert workspace.dtype == torch.float32 and workspace.is_contiguous() and workspace.numel() >= need, \
            f"workspace: needs a contiguous fp32 tensor of >= {need} elements"
        assert workspace.device == dev, f"workspace on {workspace.device}, x on {dev}"
    ws = workspace if split > 1 else out  # unused pointer when split == 1
    has_bias = bias is not None
    b = bias if has_bias else scale  # unused pointer when there is no bias
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    if cfg["path"] == "gemv":
        _fp8_gemv_kernel[(triton.cdiv(N, bn), split)](
            x, w8, scale, b, out, ws, N, K, k_iters, HAS_BIAS=has_bias, BLOCK_N=bn, BLOCK_K=bk,
            K_ITERS=k_iters if interp else 0, SPLIT_K=split, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    else:
        _fp8_linear_kernel[(triton.cdiv(N, bn), split)](
            x, x.stride(0), w8, scale, b, out, out.stride(0), ws, M, N, K, k_iters, scale,  # no xs: unused pointer
            HAS_BIAS=has_bias, BLOCK_M=max(16, triton.next_power_of_2(M)), BLOCK_N=bn, BLOCK_K=bk,
            K_ITERS=k_iters if interp else 0, SPLIT_K=split, DOT_F32=interp, num_warps=cfg["num_warps"],
            num_stages=cfg["num_stages"])
    if split > 1:
        _fp8_splitk_reduce_kernel[(triton.cdiv(N, REDUCE_BLOCK), M)](
            workspace, scale, b, out, out.stride(0), M, N, scale, HAS_BIAS=has_bias, SPLIT_K=split,
            BLOCK=REDUCE_BLOCK, num_warps=4)
    return out


# ----------------------------------------------------------------------------- reference
def fp8_linear_ref(x: torch.Tensor, w8: torch.Tensor, scale: torch.Tensor,
                   bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    y = x.float() @ w8.float().T * scale
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)
