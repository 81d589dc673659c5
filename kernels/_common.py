"""Shared pieces of the draft-path kernels: launcher checks, launch heuristics, the RMSNorm row
helper (a `@triton.jit` function inlined into each op's kernel) and the PyTorch RMSNorm reference.

Numerics follow SGLang's `RMSNorm.forward_native` (sglang/srt/layers/layernorm.py) and the
sgl_kernel/flashinfer CUDA kernels it stands for: upcast to fp32, variance = mean(x^2) in fp32,
x * rsqrt(var + eps), then times the weight (upcast to fp32), one rounding to the input dtype at the end.
"""
from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# Largest row kept whole in registers by one program; wider rows are walked in chunks (two passes).
MAX_SINGLE_BLOCK = 8192
CHUNK_BLOCK = 4096


# ----------------------------------------------------------------------------- launcher checks
def check_2d(name: str, t: torch.Tensor, *, dtype=None, cols: Optional[int] = None,
             rows: Optional[int] = None, device=None) -> None:
    """A 2-D float tensor whose last dim is contiguous (rows may be strided) and 16-byte aligned."""
    assert isinstance(t, torch.Tensor), f"{name}: expected a tensor, got {type(t).__name__}"
    assert t.dim() == 2, f"{name}: expected 2-D [rows, cols], got shape {tuple(t.shape)}"
    assert t.dtype in FLOAT_DTYPES, f"{name}: dtype {t.dtype} not in {FLOAT_DTYPES}"
    if dtype is not None:
        assert t.dtype == dtype, f"{name}: dtype {t.dtype} != expected {dtype}"
    if cols is not None:
        assert t.shape[1] == cols, f"{name}: {t.shape[1]} columns != expected {cols}"
    if rows is not None:
        assert t.shape[0] == rows, f"{name}: {t.shape[0]} rows != expected {rows}"
    assert t.shape[1] == 0 or t.stride(1) == 1, f"{name}: last dim must be contiguous (stride {t.stride()})"
    assert t.shape[0] <= 1 or t.stride(0) >= t.shape[1], f"{name}: overlapping rows (stride {t.stride()})"
    if device is not None:
        assert t.device == device, f"{name}: on {t.device}, expected {device}"


def out_2d(out: Optional[torch.Tensor], name: str, rows: int, cols: int, like: torch.Tensor) -> torch.Tensor:
    """`out` checked as a [rows, cols] tensor with `like`'s dtype and device, or a new one if None."""
    if out is None:
        return torch.empty((rows, cols), dtype=like.dtype, device=like.device)
    check_2d(name, out, dtype=like.dtype, rows=rows, cols=cols, device=like.device)
    return out


def check_weight(name: str, w: torch.Tensor, n: int, device) -> None:
    assert isinstance(w, torch.Tensor), f"{name}: expected a tensor"
    assert w.dim() == 1 and w.shape[0] == n, f"{name}: expected shape ({n},), got {tuple(w.shape)}"
    assert w.dtype in FLOAT_DTYPES, f"{name}: dtype {w.dtype} not in {FLOAT_DTYPES}"
    assert w.is_contiguous(), f"{name}: must be contiguous"
    assert w.device == device, f"{name}: on {w.device}, expected {device}"


def check_eps(eps: float) -> None:
    assert isinstance(eps, float) and eps > 0.0, f"eps must be a positive float, got {eps!r}"


# ----------------------------------------------------------------------------- launch heuristics
def row_blocking(n_cols: int) -> tuple[int, int]:
    """(BLOCK_N, NUM_CHUNKS): whole row in one power-of-two block when it fits, else 4096-wide chunks.
    Block sizes are powers of two >= 16, so a bf16 row block is a whole number of 16-byte vectors."""
    block = max(16, triton.next_power_of_2(n_cols))
    if block <= MAX_SINGLE_BLOCK:
        return block, 1
    return CHUNK_BLOCK, triton.cdiv(n_cols, CHUNK_BLOCK)


def rows_per_program(n_rows: int, block_n: int, override: Optional[int] = None) -> int:
    """Several rows per program when rows are short, but keep >= ~2 programs per H200 SM (132)."""
    if override is not None:
        assert override >= 1 and (override & (override - 1)) == 0, "rows_per_program must be a power of 2"
        return override
    rows = max(1, min(16, 2048 // block_n))
    while rows > 1 and triton.cdiv(n_rows, rows) < 264:
        rows //= 2
    return rows


def pick_num_warps(elems_per_program: int, override: Optional[int] = None) -> int:
    """About 2 16-byte vectors per thread per tensor: 4096 bf16 -> 8 warps."""
    if override is not None:
        return override
    w = elems_per_program // 512
    return int(min(16, max(2, triton.next_power_of_2(max(w, 1)))))


# ----------------------------------------------------------------------------- jit helper
@triton.jit
def rmsnorm_rows(x_ptr, x_row_stride, w_ptr, y_ptr, y_row_stride, row_start, n_rows, N, eps,
                 ROWS: tl.constexpr, BLOCK_N: tl.constexpr, NUM_CHUNKS: tl.constexpr):
    """y[r, :N] = (x[r, :N] * rsqrt(mean(x^2) + eps) * w) for ROWS rows from row_start.
    fp32 throughout, one rounding at the store. NUM_CHUNKS == 1: the row stays in registers;
    otherwise pass 1 sums squares chunk by chunk and pass 2 re-reads (from L2) and writes."""
    rows = row_start + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    rows64 = rows.to(tl.int64)
    x_rows = x_ptr + rows64[:, None] * x_row_stride
    y_rows = y_ptr + rows64[:, None] * y_row_stride
    cols = tl.arange(0, BLOCK_N)
    if NUM_CHUNKS == 1:
        cmask = cols < N
        m = row_mask[:, None] & cmask[None, :]
        x = tl.load(x_rows + cols[None, :], mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
        y = x * rstd[:, None] * w[None, :]
        tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=m)
    else:
        acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_N + cols
            m = row_mask[:, None] & (cc < N)[None, :]
            x = tl.load(x_rows + cc[None, :], mask=m, other=0.0).to(tl.float32)
            acc += x * x
        rstd = tl.rsqrt(tl.sum(acc, axis=1) / N + eps)
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_N + cols
            cmask = cc < N
            m = row_mask[:, None] & cmask[None, :]
            x = tl.load(x_rows + cc[None, :], mask=m, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cc, mask=cmask, other=0.0).to(tl.float32)
            y = x * rstd[:, None] * w[None, :]
            tl.store(y_rows + cc[None, :], y.to(y_ptr.dtype.element_ty), mask=m)


# ----------------------------------------------------------------------------- reference
def rmsnorm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Exactly SGLang's RMSNorm.forward_native without residual (default flags)."""
    orig = x.dtype
    xf = x.contiguous().to(torch.float32)
    var = xf.pow(2).mean(dim=-1, keepdim=True)
    xf = xf * torch.rsqrt(var + eps)
    return (xf * weight).to(orig)
