"""EAGLE-3 `fc` input: optional whole-concat RMSNorm (input_norm) and/or per-aux-chunk RMSNorm
(fc_norm) over the target's concatenated auxiliary hidden states, then the fc GEMM.

SGLang (models/llama_eagle3.py, LlamaModel.forward):
    if hidden_states.shape[-1] != embeds.shape[-1]:
        if self.input_norm is not None: hidden_states = self.input_norm(hidden_states)
        if self.fc_norm is not None:
            chunks = hidden_states.chunk(self.num_aux_hidden_states, dim=-1)
            hidden_states = torch.cat([norm(c) for norm, c in zip(self.fc_norm, chunks)], dim=-1)
        hidden_states = self.fc(hidden_states)
fc_norm: K RMSNorm launches + a cat (K+1 launches, one extra [T, K*Hin] round trip) become one
launch, grid (row blocks, K): program (b, k) normalizes chunk k of its rows with weight k and writes
it straight into the fc input buffer. input_norm is one RMSNorm over the K*Hin-wide row (chunked
two-pass kernel: 3*4096 does not fit one block). Both enabled (rare) = the two kernels in sequence,
which also reproduces the intermediate rounding of SGLang's two modules exactly.

The GEMM stays in torch (cuBLAS): at draft batch sizes (T <= 64) it is a skinny GEMM bound by
reading the [H, K*Hin] weight (4096 x 12288 bf16 = 100.7 MB, ~21 us at 4.8 TB/s), which cuBLAS already
streams near peak with split-K. Fusing the norm as a GEMM prologue would save one ~2-3 us launch
but would mean writing and tuning a Triton skinny GEMM to beat cuBLAS on the dominant 21 us;
that is a later experiment (needs a GPU), not this first version.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ._common import (check_2d, check_eps, check_weight, out_2d, pick_num_warps, rmsnorm_ref, rmsnorm_rows,
                      row_blocking, rows_per_program)


@triton.jit
def _aux_chunk_rmsnorm_kernel(x_ptr, x_row_stride, w_ptr, out_ptr, out_row_stride, n_rows, CHUNK, eps,
                              ROWS: tl.constexpr, BLOCK_N: tl.constexpr, NUM_CHUNKS: tl.constexpr):
    """Program (b, k): rows [b*ROWS, (b+1)*ROWS), columns [k*CHUNK, (k+1)*CHUNK), weight row k.
    With one chunk (grid dim 1 == 1) this is a plain RMSNorm of the whole row (input_norm)."""
    k = tl.program_id(1)
    rmsnorm_rows(x_ptr + k * CHUNK, x_row_stride, w_ptr + k * CHUNK, out_ptr + k * CHUNK, out_row_stride,
                 tl.program_id(0) * ROWS, n_rows, CHUNK, eps, ROWS, BLOCK_N, NUM_CHUNKS)


def _launch_chunk_norm(x, w_flat, out, num_chunks, eps, rows_override, num_warps):
    T, width = x.shape
    chunk = width // num_chunks
    block_n, nch = row_blocking(chunk)
    rows = rows_per_program(T, block_n, rows_override)
    _aux_chunk_rmsnorm_kernel[(triton.cdiv(T, rows), num_chunks)](
        x, x.stride(0), w_flat, out, out.stride(0), T, chunk, eps,
        ROWS=rows, BLOCK_N=block_n, NUM_CHUNKS=nch, num_warps=pick_num_warps(rows * block_n, num_warps))


def aux_norm(aux: torch.Tensor, num_aux: int, eps: float, *, input_norm_weight: Optional[torch.Tensor] = None,
             fc_norm_weight: Optional[torch.Tensor] = None, out: Optional[torch.Tensor] = None,
             rows_per_program_: Optional[int] = None, num_warps: Optional[int] = None) -> torch.Tensor:
    """The fc input. aux: [T, K*Hin]; input_norm_weight: [K*Hin]; fc_norm_weight: [K, Hin] (the K
    fc_norm weights stacked once at load time, see stack_fc_norm_weights). With neither norm, aux is
    returned as is (no copy). out: optional preallocated [T, K*Hin] buffer of aux's dtype."""
    check_2d("aux", aux)
    T, width = aux.shape
    assert isinstance(num_aux, int) and num_aux >= 1, f"num_aux must be a positive int, got {num_aux!r}"
    assert width % num_aux == 0, f"aux width {width} is not a multiple of num_aux={num_aux}"
    hin = width // num_aux
    check_eps(eps)
    if input_norm_weight is not None:
        check_weight("input_norm_weight", input_norm_weight, width, aux.device)
    if fc_norm_weight is not None:
        assert fc_norm_weight.dim() == 2 and tuple(fc_norm_weight.shape) == (num_aux, hin), \
            f"fc_norm_weight: expected shape ({num_aux}, {hin}), got {tuple(fc_norm_weight.shape)}"
        check_weight("fc_norm_weight", fc_norm_weight.view(-1), width, aux.device)
    if input_norm_weight is None and fc_norm_weight is None:
        return aux
    out = out_2d(out, "out", T, width, like=aux)
    if T == 0 or width == 0:
        return out
    src = aux
    if input_norm_weight is not None:
        _launch_chunk_norm(src, input_norm_weight, out, 1, eps, rows_per_program_, num_warps)
        src = out  # in place for the per-chunk pass: each program reads its elements before writing them
    if fc_norm_weight is not None:
        _launch_chunk_norm(src, fc_norm_weight.view(-1), out, num_aux, eps, rows_per_program_, num_warps)
    return out


def fused_aux_fc(aux: torch.Tensor, fc_weight: torch.Tensor, fc_bias: Optional[torch.Tensor] = None, *,
                 num_aux: int, eps: float, input_norm_weight: Optional[torch.Tensor] = None,
                 fc_norm_weight: Optional[torch.Tensor] = None, out: Optional[torch.Tensor] = None,
                 norm_out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """fc(norms(aux)): aux [T, K*Hin], fc_weight [H, K*Hin] (nn.Linear layout), returns [T, H].
    out / norm_out: optional preallocated buffers (CUDA graphs)."""
    x = aux_norm(aux, num_aux, eps, input_norm_weight=input_norm_weight, fc_norm_weight=fc_norm_weight,
                 out=norm_out)
    assert fc_weight.dim() == 2 and fc_weight.shape[1] == x.shape[1], \
        f"fc_weight: expected [H, {x.shape[1]}], got {tuple(fc_weight.shape)}"
    assert fc_weight.dtype == x.dtype, f"fc_weight: dtype {fc_weight.dtype} != aux dtype {x.dtype}"
    if out is None:
        return F.linear(x, fc_weight, fc_bias)
    check_2d("out", out, dtype=x.dtype, rows=x.shape[0], cols=fc_weight.shape[0], device=x.device)
    if fc_bias is None:
        return torch.mm(x, fc_weight.t(), out=out)
    return torch.addmm(fc_bias, x, fc_weight.t(), out=out)


def stack_fc_norm_weights(fc_norm_modules) -> torch.Tensor:
    """[K, Hin] from SGLang's nn.ModuleList of RMSNorm (do it once at load time, not per forward)."""
    return torch.stack([m.weight.data for m in fc_norm_modules]).contiguous()


def fused_aux_fc_ref(aux: torch.Tensor, fc_weight: torch.Tensor, fc_bias: Optional[torch.Tensor] = None, *,
                     num_aux: int, eps: float, input_norm_weight: Optional[torch.Tensor] = None,
                     fc_norm_weight: Optional[torch.Tensor] = None) -> torch.Tensor:
    return F.linear(aux_norm_ref(aux, num_aux, eps, input_norm_weight=input_norm_weight,
                                 fc_norm_weight=fc_norm_weight), fc_weight, fc_bias)


def aux_norm_ref(aux: torch.Tensor, num_aux: int, eps: float, *, input_norm_weight=None,
                 fc_norm_weight=None) -> torch.Tensor:
    """Line for line what llama_eagle3.LlamaModel.forward does before self.fc."""
    h = aux
    if input_norm_weight is not None:
        h = rmsnorm_ref(h, input_norm_weight, eps)
    if fc_norm_weight is not None:
        chunks = h.chunk(num_aux, dim=-1)
        h = torch.cat([rmsnorm_ref(c, fc_norm_weight[i], eps) for i, c in enumerate(chunks)], dim=-1)
    return h
