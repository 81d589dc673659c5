"""EAGLE-3 draft layer input: RMSNorm(embeds) | RMSNorm(hidden) side by side in one [T, 2H] buffer.

SGLang (models/llama_eagle3.py, LlamaDecoderLayer.forward, input layer):
    residual = hidden_states
    hidden_states = self.hidden_norm(hidden_states)
    embeds = self.input_layernorm(embeds)
    hidden_states = torch.cat([embeds, hidden_states], dim=-1)      # -> qkv_proj
Three launches and a [T, 2H] copy become one launch that writes the qkv input directly.
Grid (row blocks, 2): program (b, 0) normalizes embeds rows, (b, 1) hidden rows, so batch 1
still gets two CTAs working in parallel. The caller keeps `residual = hidden` (no copy needed).
"""
from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

from ._common import (check_2d, check_eps, check_weight, out_2d, pick_num_warps, rmsnorm_ref, rmsnorm_rows,
                      row_blocking, rows_per_program)


@triton.jit
def _fused_draft_input_kernel(emb_ptr, emb_row_stride, hid_ptr, hid_row_stride, w_emb_ptr, w_hid_ptr,
                              out_ptr, out_row_stride, n_rows, H, eps,
                              ROWS: tl.constexpr, BLOCK_N: tl.constexpr, NUM_CHUNKS: tl.constexpr):
    row_start = tl.program_id(0) * ROWS
    if tl.program_id(1) == 0:
        rmsnorm_rows(emb_ptr, emb_row_stride, w_emb_ptr, out_ptr, out_row_stride,
                     row_start, n_rows, H, eps, ROWS, BLOCK_N, NUM_CHUNKS)
    else:
        rmsnorm_rows(hid_ptr, hid_row_stride, w_hid_ptr, out_ptr + H, out_row_stride,
                     row_start, n_rows, H, eps, ROWS, BLOCK_N, NUM_CHUNKS)


def fused_draft_input(embeds: torch.Tensor, hidden: torch.Tensor, input_layernorm_weight: torch.Tensor,
                      hidden_norm_weight: torch.Tensor, eps: float, out: Optional[torch.Tensor] = None,
                      *, rows_per_program_: Optional[int] = None, num_warps: Optional[int] = None) -> torch.Tensor:
    """out[:, :H] = RMSNorm(embeds; input_layernorm_weight), out[:, H:] = RMSNorm(hidden; hidden_norm_weight).
    embeds, hidden: [T, H], same dtype; out: [T, 2H] of that dtype (allocated if None)."""
    check_2d("embeds", embeds)
    T, H = embeds.shape
    check_2d("hidden", hidden, dtype=embeds.dtype, rows=T, cols=H, device=embeds.device)
    check_weight("input_layernorm_weight", input_layernorm_weight, H, embeds.device)
    check_weight("hidden_norm_weight", hidden_norm_weight, H, embeds.device)
    check_eps(eps)
    out = out_2d(out, "out", T, 2 * H, like=embeds)
    if T == 0 or H == 0:
        return out
    block_n, chunks = row_blocking(H)
    rows = rows_per_program(T, block_n, rows_per_program_)
    grid = (triton.cdiv(T, rows), 2)
    _fused_draft_input_kernel[grid](
        embeds, embeds.stride(0), hidden, hidden.stride(0), input_layernorm_weight, hidden_norm_weight,
        out, out.stride(0), T, H, eps,
        ROWS=rows, BLOCK_N=block_n, NUM_CHUNKS=chunks, num_warps=pick_num_warps(rows * block_n, num_warps))
    return out


def fused_draft_input_ref(embeds: torch.Tensor, hidden: torch.Tensor, input_layernorm_weight: torch.Tensor,
                          hidden_norm_weight: torch.Tensor, eps: float) -> torch.Tensor:
    """What llama_eagle3.LlamaDecoderLayer.forward does for the input layer (before qkv_proj)."""
    h = rmsnorm_ref(hidden, hidden_norm_weight, eps)
    e = rmsnorm_ref(embeds, input_layernorm_weight, eps)
    return torch.cat([e, h], dim=-1)
