"""SiLU(gate) * up on a [T, 2I] input ([gate | up], SGLang's gate_up_proj layout) -> [T, I].

Numerics: fp32 silu and product, one rounding at the store, like sgl_kernel's silu_and_mul CUDA
kernel that SiluAndMul.forward_cuda calls. SiluAndMul.forward_native (F.silu(g) * u in the input
dtype) rounds twice, so for bf16/fp16 it differs from both by about one ulp; the tests bound that.
Grid (row blocks, column blocks of BLOCK_I): at T=1, I=14336 and BLOCK_I=1024 that is 14 CTAs.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ._common import check_2d, out_2d, pick_num_warps, rows_per_program


@triton.jit
def _silu_and_mul_kernel(x_ptr, x_row_stride, out_ptr, out_row_stride, n_rows, I,
                         ROWS: tl.constexpr, BLOCK_I: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    m = (rows < n_rows)[:, None] & (cols < I)[None, :]
    rows64 = rows.to(tl.int64)
    g_ptrs = x_ptr + rows64[:, None] * x_row_stride + cols[None, :]
    g = tl.load(g_ptrs, mask=m, other=0.0).to(tl.float32)
    u = tl.load(g_ptrs + I, mask=m, other=0.0).to(tl.float32)
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(out_ptr + rows64[:, None] * out_row_stride + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=m)


def silu_and_mul(x: torch.Tensor, out: Optional[torch.Tensor] = None, *, block_i: Optional[int] = None,
                 rows_per_program_: Optional[int] = None, num_warps: Optional[int] = None) -> torch.Tensor:
    check_2d("x", x)
    T, two_i = x.shape
    assert two_i % 2 == 0, f"x: last dim {two_i} must be even ([gate | up])"
    I = two_i // 2
    out = out_2d(out, "out", T, I, like=x)
    if T == 0 or I == 0:
        return out
    if block_i is None:
        block_i = min(1024, max(16, triton.next_power_of_2(I)))
    assert block_i >= 16 and (block_i & (block_i - 1)) == 0, "block_i must be a power of 2 >= 16"
    rows = rows_per_program(T, block_i, rows_per_program_)
    grid = (triton.cdiv(T, rows), triton.cdiv(I, block_i))
    _silu_and_mul_kernel[grid](x, x.stride(0), out, out.stride(0), T, I, ROWS=rows, BLOCK_I=block_i,
                               num_warps=pick_num_warps(rows * block_i * 2, num_warps))
    return out


def silu_and_mul_ref(x: torch.Tensor) -> torch.Tensor:
    """fp32 compute, one rounding (sgl_kernel / vLLM CUDA semantics)."""
    d = x.shape[-1] // 2
    xf = x.to(torch.float32)
    return (F.silu(xf[..., :d]) * xf[..., d:]).to(x.dtype)
