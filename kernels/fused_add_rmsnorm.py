"""Residual add + RMSNorm, SGLang's fused_add_rmsnorm semantics (RMSNorm.forward(x, residual)).

    s = x.f32 + residual.f32
    residual_out = s.to(residual dtype)            # the new residual
    out = (s * rsqrt(mean(s^2) + eps) * w).to(x dtype)   # normalized from the *unrounded* fp32 s
(forward_native and flashinfer's FusedAddRMSNorm both normalize the fp32 sum.) SGLang's CUDA op works
in place (out -> x, residual_out -> residual); pass out=x, residual_out=residual for that: each
element is read before it is written by the same program, so aliasing is safe. A fp32 residual
(RMSNorm(fp32_residual=True)) is accepted: residual_out keeps the residual's dtype.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import triton
import triton.language as tl

from ._common import check_2d, check_eps, out_2d, check_weight, pick_num_warps, row_blocking, rows_per_program


@triton.jit
def _fused_add_rmsnorm_kernel(x_ptr, x_row_stride, r_ptr, r_row_stride, w_ptr, y_ptr, y_row_stride,
                              ro_ptr, ro_row_stride, n_rows, N, eps,
                              ROWS: tl.constexpr, BLOCK_N: tl.constexpr, NUM_CHUNKS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    rows64 = rows.to(tl.int64)
    x_rows = x_ptr + rows64[:, None] * x_row_stride
    r_rows = r_ptr + rows64[:, None] * r_row_stride
    y_rows = y_ptr + rows64[:, None] * y_row_stride
    ro_rows = ro_ptr + rows64[:, None] * ro_row_stride
    cols = tl.arange(0, BLOCK_N)
    if NUM_CHUNKS == 1:
        cmask = cols < N
        m = row_mask[:, None] & cmask[None, :]
        s = (tl.load(x_rows + cols[None, :], mask=m, other=0.0).to(tl.float32)
             + tl.load(r_rows + cols[None, :], mask=m, other=0.0).to(tl.float32))
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(s * s, axis=1) / N + eps)
        tl.store(ro_rows + cols[None, :], s.to(ro_ptr.dtype.element_ty), mask=m)
        tl.store(y_rows + cols[None, :], (s * rstd[:, None] * w[None, :]).to(y_ptr.dtype.element_ty), mask=m)
    else:
        # Pass 1 only reads; pass 2 recomputes s and writes both outputs chunk by chunk (alias-safe).
        acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_N + cols
            m = row_mask[:, None] & (cc < N)[None, :]
            s = (tl.load(x_rows + cc[None, :], mask=m, other=0.0).to(tl.float32)
                 + tl.load(r_rows + cc[None, :], mask=m, other=0.0).to(tl.float32))
            acc += s * s
        rstd = tl.rsqrt(tl.sum(acc, axis=1) / N + eps)
        for c in range(NUM_CHUNKS):
            cc = c * BLOCK_N + cols
            cmask = cc < N
            m = row_mask[:, None] & cmask[None, :]
            s = (tl.load(x_rows + cc[None, :], mask=m, other=0.0).to(tl.float32)
                 + tl.load(r_rows + cc[None, :], mask=m, other=0.0).to(tl.float32))
            w = tl.load(w_ptr + cc, mask=cmask, other=0.0).to(tl.float32)
            tl.store(ro_rows + cc[None, :], s.to(ro_ptr.dtype.element_ty), mask=m)
            tl.store(y_rows + cc[None, :], (s * rstd[:, None] * w[None, :]).to(y_ptr.dtype.element_ty), mask=m)


def fused_add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                      out: Optional[torch.Tensor] = None, residual_out: Optional[torch.Tensor] = None,
                      *, rows_per_program_: Optional[int] = None,
                      num_warps: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Returns (out, residual_out). x: [T, H]; residual: [T, H] of x's dtype or fp32."""
    check_2d("x", x)
    T, H = x.shape
    check_2d("residual", residual, rows=T, cols=H, device=x.device)
    assert residual.dtype in (x.dtype, torch.float32), \
        f"residual: dtype {residual.dtype} must be x's ({x.dtype}) or float32"
    check_weight("weight", weight, H, x.device)
    check_eps(eps)
    out = out_2d(out, "out", T, H, like=x)
    residual_out = out_2d(residual_out, "residual_out", T, H, like=residual)
    if T == 0 or H == 0:
        return out, residual_out
    block_n, chunks = row_blocking(H)
    rows = rows_per_program(T, block_n, rows_per_program_)
    _fused_add_rmsnorm_kernel[(triton.cdiv(T, rows),)](
        x, x.stride(0), residual, residual.stride(0), weight, out, out.stride(0),
        residual_out, residual_out.stride(0), T, H, eps,
        ROWS=rows, BLOCK_N=block_n, NUM_CHUNKS=chunks, num_warps=pick_num_warps(rows * block_n, num_warps))
    return out, residual_out


def fused_add_rmsnorm_ref(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                          eps: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm.forward_native(x, residual): fp32_residual=True when residual is fp32, else False."""
    orig = x.dtype
    s = x.to(torch.float32) + residual.to(torch.float32)
    res_out = s.clone() if residual.dtype == torch.float32 else s.to(orig)
    var = s.pow(2).mean(dim=-1, keepdim=True)
    y = s * torch.rsqrt(var + eps)
    return (y * weight).to(orig), res_out
