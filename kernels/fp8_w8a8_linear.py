"""FP8 (e4m3) weight and activation linear for the drafter's 2..64-row decode shapes:
y = (x8 * xs[m]) @ (w8 * scale[n]).T + bias, with x quantized per token (row) at call time.

Why: at 8-32 rows fp8_linear's MMA path converts each fp8 weight tile to bf16 in registers before a
bf16 tensor-core dot, and streams the weight at 31-65 % of the copy ceiling, where SGLang's w8a8 GEMM
reaches 41-91 % on the same shapes (H200 sweep, kernels/NOTES.md). With both operands fp8 the tile
goes to Hopper's fp8 MMA as loaded: no conversion, half the operand bytes in shared memory. The cost
is one small kernel per call (per-token amax and rounding of x, M x K elements) and the activation
rounding error that SGLang's FP8 drafter also has; batch 1 stays on fp8_linear's GEMV path, which
already streams at 71-94 %.

The quantization kernel beside its launcher and reference (quantize_fp8_per_token, *_ref);
_quant_rows_kernel: program m reads row m twice (amax, then x / xs rounded to e4m3), xs[m] = amax / 448
(1.0 for an all-zero row), the same rule as quantize_fp8_per_channel. The product runs fp8_linear's own
MMA kernel and split-K reduce with A8 set (both operands fp8, epilogue * scale[n] * xs[m]); launch
parameters are fp8_linear_config's MMA choice. Reference: fp8_w8a8_linear_ref.
Numerics: products of two e4m3 values are exact in fp32. The interpreter (TRITON_INTERPRET=1) runs the
dot in fp32 on the quantized values, so there it equals fp32 math up to summation order. On Hopper the
fp8 MMA sums within one K tile at reduced precision (~14 bits; promoted to fp32 per tile, see
fp8_linear._fp8_k_tile), which the interpreter cannot show: the GPU test allows more
(tests/test_kernel_fp8_w8a8.py). Timed on an H200 (benchmarks/results/2026-12-02-fp8-w8a8-sweep): within
1-19 % of SGLang's w8a8 GEMM and 16-35 % faster than the MMA path on gate_up and lm_head at 8/32 rows, no
gain on qkv/o/down/fc; so the drafter can run it on those two (server/draft_backend/fp8_weights.W8A8_MODULES)
and by default runs it on gate_up alone (DEFAULT_FP8_INPUTS: with the lm_head's fp8 inputs acceptance fell, fp8_weights says).
CUDA graphs: no sync; per call only out / x8 / xs / workspace are allocated, each when not passed.
"""
from __future__ import annotations

import os
from typing import Optional

import torch
import triton
import triton.language as tl

from sglang_patches.kernels.fp8_linear import (FP8_MAX, MAX_M, REDUCE_BLOCK, X_DTYPES, _config_cached,
                                               _fp8_linear_kernel, _fp8_splitk_reduce_kernel,
                                               fp8_linear_workspace_numel)

QUANT_BLOCK = 1024


@triton.jit
def _row_amax(amax, row, kk, K):
    return tl.maximum(amax, tl.abs(tl.load(row + kk, mask=kk < K, other=0.0).to(tl.float32)))


@triton.jit
def _round_e4m3(v):
    """v (fp32, |v| <= 448) rounded to the nearest e4m3 value, ties to even, in fp32 arithmetic: the
    cast that follows is then exact. (Triton 3.6's interpreter casts fp32 -> e4m3 wrongly when rounding
    carries into the next exponent, 124.3 -> 64; one code path on both keeps the CPU tests honest.)"""
    a = tl.abs(v)
    e = tl.maximum(tl.floor(tl.log2(tl.maximum(a, 1e-30))), -6.0)  # below 2^-6: the subnormal step 2^-9
    step = tl.exp2(e - 3.0)  # 3 mantissa bits
    t = a * tl.exp2(3.0 - e)  # exact: a power-of-two scaling (a multiply, not the GPU's approximate `/`)
    r = tl.floor(t + 0.5)
    r = tl.where((r - t == 0.5) & (r - 2.0 * tl.floor(r * 0.5) == 1.0), r - 1.0, r)  # a tie goes to even
    q = tl.minimum(r * step, 448.0)
    return tl.where(v < 0, -q, q)


@triton.jit
def _row_store(row, out_row, kk, K, xs):
    x = tl.load(row + kk, mask=kk < K, other=0.0).to(tl.float32)
    v = tl.math.div_rn(x, tl.zeros_like(x) + xs)  # IEEE division, as torch's reference (`/` is approximate on the GPU)
    v = _round_e4m3(tl.minimum(tl.maximum(v, -448.0), 448.0))
    tl.store(out_row + kk, v.to(out_row.dtype.element_ty), mask=kk < K)


@triton.jit(do_not_specialize=["k_iters"])
def _quant_rows_kernel(x_ptr, stride_xm, x8_ptr, xs_ptr, K, k_iters, K_ITERS: tl.constexpr, BLOCK: tl.constexpr):
    m = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    row = x_ptr + m.to(tl.int64) * stride_xm
    out_row = x8_ptr + m.to(tl.int64) * K
    amax = tl.zeros((BLOCK,), dtype=tl.float32)
    if K_ITERS > 0:  # the interpreter needs a constexpr loop bound (fp8_linear's two-loop form)
        for i in range(K_ITERS):
            amax = _row_amax(amax, row, i * BLOCK + offs, K)
    else:
        for i in range(0, k_iters):
            amax = _row_amax(amax, row, i * BLOCK + offs, K)
    a = tl.max(amax, axis=0)
    xs = tl.where(a > 0, tl.math.div_rn(a, tl.zeros_like(a) + 448.0), 1.0)
    tl.store(xs_ptr + m, xs)
    if K_ITERS > 0:
        for i in range(K_ITERS):
            _row_store(row, out_row, i * BLOCK + offs, K, xs)
    else:
        for i in range(0, k_iters):
            _row_store(row, out_row, i * BLOCK + offs, K, xs)


def fp8_w8a8_workspace_numel(M: int, N: int, K: int) -> int:
    """fp32 elements of this path's split-K workspace at M rows ([split_k, M, N], 0 without a split). The
    split is fp8_linear_config's MMA choice; raising block_k to >= 32 changes the K tiles per split, not
    the split, so this equals fp8_linear's need at the same (M, N, K) (a preallocated workspace sized
    for both paths is the max over each)."""
    return fp8_linear_workspace_numel(M, N, dict(_config_cached(M, N, K))["split_k"])


# ----------------------------------------------------------------------------- launchers
def quantize_fp8_per_token(x: torch.Tensor, *, x8: Optional[torch.Tensor] = None,
                           xs: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] bf16/fp16 (rows may be strided) -> (x8 [M, K] float8_e4m3fn contiguous, xs [M] fp32)."""
    assert isinstance(x, torch.Tensor) and x.dim() == 2 and x.dtype in X_DTYPES, "x: expected a 2-D bf16/fp16 tensor"
    M, K = x.shape
    assert K >= 1 and (x.stride(1) == 1 or M == 0), f"x: last dim must be contiguous (stride {x.stride()})"
    x8 = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device) if x8 is None else x8
    xs = torch.empty((M,), dtype=torch.float32, device=x.device) if xs is None else xs
    assert x8.dtype == torch.float8_e4m3fn and x8.is_contiguous() and tuple(x8.shape) == (M, K), "x8: [M, K] e4m3 contiguous"
    assert xs.dtype == torch.float32 and xs.is_contiguous() and tuple(xs.shape) == (M,), "xs: [M] fp32 contiguous"
    if M:
        k_iters = triton.cdiv(K, QUANT_BLOCK)
        _quant_rows_kernel[(M,)](x, x.stride(0), x8, xs, K, k_iters,
                                 K_ITERS=k_iters if os.environ.get("TRITON_INTERPRET") == "1" else 0,
                                 BLOCK=QUANT_BLOCK, num_warps=4)
    return x8, xs


def fp8_w8a8_linear(x: torch.Tensor, w8: torch.Tensor, scale: torch.Tensor, bias: Optional[torch.Tensor] = None,
                    *, out: Optional[torch.Tensor] = None, workspace: Optional[torch.Tensor] = None,
                    x8: Optional[torch.Tensor] = None, xs: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y[M, N] in x's dtype for 2 <= M <= MAX_M (batch 1 belongs to fp8_linear's GEMV path). w8 [N, K]
    e4m3 contiguous and scale [N] fp32 as quantize_fp8_per_channel returns them; bias [N] or None; out,
    workspace (fp32, >= fp8_linear_workspace_numel), x8 / xs (quantize_fp8_per_token's) optional buffers."""
    assert isinstance(x, torch.Tensor) and x.dim() == 2 and x.dtype in X_DTYPES, "x: expected a 2-D bf16/fp16 tensor"
    assert isinstance(w8, torch.Tensor) and w8.dim() == 2 and w8.dtype == torch.float8_e4m3fn and w8.is_contiguous(), \
        "w8: expected a contiguous [N, K] float8_e4m3fn tensor (quantize_fp8_per_channel)"
    M, (N, K) = x.shape[0], w8.shape
    assert 2 <= M <= MAX_M, f"x: {M} rows; this path takes 2..{MAX_M} (batch 1: fp8_linear)"
    assert x.shape[1] == K, f"x: {x.shape[1]} columns != w8's K = {K}"
    assert scale.dtype == torch.float32 and scale.is_contiguous() and tuple(scale.shape) == (N,), \
        f"scale: expected contiguous fp32 of shape ({N},)"
    assert bias is None or (bias.dim() == 1 and bias.shape[0] == N and bias.is_contiguous()), f"bias: expected ({N},)"
    dev = x.device
    assert w8.device == dev and scale.device == dev and (bias is None or bias.device == dev), "tensors on several devices"
    if out is None:
        out = torch.empty((M, N), dtype=x.dtype, device=dev)
    assert tuple(out.shape) == (M, N) and out.dtype == x.dtype and out.stride(1) == 1 and out.stride(0) >= N, \
        f"out: expected a [{M}, {N}] {x.dtype} buffer with contiguous rows"
    cfg = dict(_config_cached(M, N, K))  # the MMA choice (M >= 2)
    bn, bk, split = cfg["block_n"], max(32, cfg["block_k"]), cfg["split_k"]  # fp8 dots take K tiles >= 32
    k_iters = triton.cdiv(triton.cdiv(K, bk), split)
    need = fp8_w8a8_workspace_numel(M, N, K)
    if split > 1:
        workspace = torch.empty(need, dtype=torch.float32, device=dev) if workspace is None else workspace
        assert workspace.dtype == torch.float32 and workspace.is_contiguous() and workspace.numel() >= need, \
            f"workspace: needs a contiguous fp32 tensor of >= {need} elements"
    x8, xs = quantize_fp8_per_token(x, x8=x8, xs=xs)
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    has_bias = bias is not None
    b = bias if has_bias else scale  # unused pointer without a bias
    ws = workspace if split > 1 else out
    _fp8_linear_kernel[(triton.cdiv(N, bn), split)](  # fp8_linear's MMA kernel with fp8 rows (A8)
        x8, x8.stride(0), w8, scale, b, out, out.stride(0), ws, M, N, K, k_iters, xs, HAS_BIAS=has_bias,
        BLOCK_M=max(16, triton.next_power_of_2(M)), BLOCK_N=bn, BLOCK_K=bk, K_ITERS=k_iters if interp else 0,
        SPLIT_K=split, DOT_F32=interp, A8=True, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    if split > 1:
        _fp8_splitk_reduce_kernel[(triton.cdiv(N, REDUCE_BLOCK), M)](
            workspace, scale, b, out, out.stride(0), M, N, xs, HAS_BIAS=has_bias, SPLIT_K=split,
            BLOCK=REDUCE_BLOCK, A8=True, num_warps=4)
    return out


# ----------------------------------------------------------------------------- references
def quantize_fp8_per_token_ref(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()
    amax = xf.abs().amax(dim=1)
    xs = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
    return (xf / xs[:, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), xs


def fp8_w8a8_linear_ref(x: torch.Tensor, w8: torch.Tensor, scale: torch.Tensor,
                        bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    x8, xs = quantize_fp8_per_token_ref(x)
    y = (x8.float() * xs[:, None]) @ w8.float().T * scale
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)
