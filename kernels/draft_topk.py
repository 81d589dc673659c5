"""Top-k (k <= 8) of softmax(logits) per row for the EAGLE draft step: [T, V] -> probs [T, k] fp32,
indices [T, k] int64 (optionally mapped through the draft->target `hot_token_id` table).

SGLang (speculative/eagle_worker_v2.py, draft_forward, topk > 1):
    probs = torch.softmax(next_token_logits, dim=-1)      # renorm_draft_probs, no rejection sampling
    topk_p, topk_index = fast_topk(probs, self.topk, dim=-1)   # torch.topk (torch.max for k == 1)
    if self.hot_token_id is not None: topk_index = self.hot_token_id[topk_index]
softmax is monotonic, so the top-k of probs is the top-k of logits and only k probabilities are
needed: p = exp(v - max) / sum(exp(x - max)). No [T, V] probs tensor is written.
(For topk == 1 on CUDA SGLang uses draft_topk1_postprocess, which returns p = 1.0 and the argmax; this
kernel returns the true probability; a caller that wants 1.0 can ignore the value.)

Two passes, split over V so that batch 1 still uses many SMs:
  pass 1, grid (T, S): each program takes BLOCK_V logits of one row, computes the split's max m_s and
    sum exp(x - m_s), and its own top-k by k rounds of max-and-remove over 64-bit keys
    (order-preserving int32 of the fp32 value << 32 | (2^32-1 - index)): one reduction per round
    gives both the value and, among equal values, the lowest index.
  pass 2, grid (T,): merges the S*k candidate keys (k rounds of max) and the S (max, sumexp) pairs
    (online-softmax rescaling), writes probabilities and indices.
NaN logits rank above +inf (as in torch.topk); rows that are all -inf give NaN probabilities (as softmax).
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import triton
import triton.language as tl

MAX_K = 8
_INT64_MIN = -(2 ** 63)


@triton.jit
def _sortable_key(v, idx):
    """int64 key: larger value -> larger key; equal values -> smaller index -> larger key."""
    bits = v.to(tl.int32, bitcast=True)
    k32 = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    return (k32.to(tl.int64) << 32) | (4294967295 - idx.to(tl.int64))


@triton.jit
def _key_value(key):
    k32 = (key >> 32).to(tl.int32)
    bits = k32 ^ ((k32 >> 31) & 0x7FFFFFFF)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _key_index(key):
    return 4294967295 - (key & 4294967295)


@triton.jit
def _topk_partial_kernel(logits_ptr, row_stride, V, part_m_ptr, part_l_ptr, part_key_ptr, S,
                         K: tl.constexpr, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    offs = s * BLOCK_V + tl.arange(0, BLOCK_V)
    mask = offs < V
    x = tl.load(logits_ptr + row * row_stride + offs, mask=mask, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    l = tl.sum(tl.where(mask, tl.exp(x - m_safe), 0.0), axis=0)
    base = row * S + s
    tl.store(part_m_ptr + base, m)
    tl.store(part_l_ptr + base, l)
    keys = _sortable_key(x, offs)  # padded lanes: -inf with index >= V, below every valid -inf lane
    for j in tl.static_range(K):
        best = tl.max(keys, axis=0)
        tl.store(part_key_ptr + base * K + j, best)
        keys = tl.where(keys == best, -9223372036854775808, keys)


@triton.jit
def _topk_finalize_kernel(part_m_ptr, part_l_ptr, part_key_ptr, S, probs_ptr, probs_row_stride,
                          idx_ptr, idx_row_stride, map_ptr,
                          K: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_C: tl.constexpr, HAS_MAP: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    so = tl.arange(0, BLOCK_S)
    sm = so < S
    m = tl.load(part_m_ptr + row * S + so, mask=sm, other=float("-inf"))
    l = tl.load(part_l_ptr + row * S + so, mask=sm, other=0.0)
    gmax = tl.max(m, axis=0)
    gmax_safe = tl.where(gmax == float("-inf"), 0.0, gmax)
    total = tl.sum(tl.where(sm, l * tl.exp(m - gmax_safe), 0.0), axis=0)
    co = tl.arange(0, BLOCK_C)
    keys = tl.load(part_key_ptr + row * S * K + co, mask=co < S * K, other=-9223372036854775808)
    for j in tl.static_range(K):
        best = tl.max(keys, axis=0)
        keys = tl.where(keys == best, -9223372036854775808, keys)
        p = tl.exp(_key_value(best) - gmax_safe) / total
        idx = _key_index(best)
        if HAS_MAP:
            idx = tl.load(map_ptr + idx).to(tl.int64)
        tl.store(probs_ptr + row * probs_row_stride + j, p)
        tl.store(idx_ptr + row * idx_row_stride + j, idx)


def pick_block_v(T: int, V: int) -> int:
    """Enough splits to occupy the H200's 132 SMs at small T, but >= 1024 logits per program."""
    block = 4096
    while block > 1024 and T * triton.cdiv(V, block) < 264:
        block //= 2
    return block


def draft_topk(logits: torch.Tensor, k: int, *, token_map: Optional[torch.Tensor] = None,
               out: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
               workspace: Optional[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = None,
               block_v: Optional[int] = None, num_warps: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(probs [T, k] fp32, indices [T, k] int64). logits: [T, V] fp32/bf16/fp16, last dim contiguous.
    token_map: optional int32/int64 [V] table applied to the indices (SGLang's hot_token_id).
    out / workspace (partials from workspace_for) may be preallocated for CUDA graphs."""
    assert isinstance(logits, torch.Tensor) and logits.dim() == 2, "logits: expected a 2-D [T, V] tensor"
    assert logits.dtype in (torch.float32, torch.bfloat16, torch.float16), f"logits: dtype {logits.dtype}"
    T, V = logits.shape
    assert V == 0 or logits.stride(1) == 1, f"logits: last dim must be contiguous (stride {logits.stride()})"
    assert isinstance(k, int) and 1 <= k <= MAX_K, f"k must be an int in [1, {MAX_K}], got {k!r}"
    assert k <= V, f"k={k} > vocabulary size {V}"
    assert V < 2 ** 31, "vocabulary too large for int32 indices"
    if token_map is not None:
        assert token_map.dim() == 1 and token_map.shape[0] == V and token_map.is_contiguous(), \
            f"token_map: expected a contiguous [{V}] tensor, got {tuple(token_map.shape)}"
        assert token_map.dtype in (torch.int32, torch.int64), f"token_map: dtype {token_map.dtype}"
        assert token_map.device == logits.device
    dev = logits.device
    if out is None:
        probs = torch.empty((T, k), dtype=torch.float32, device=dev)
        idx = torch.empty((T, k), dtype=torch.int64, device=dev)
    else:
        probs, idx = out
        for name, t, dt in (("probs", probs, torch.float32), ("indices", idx, torch.int64)):
            assert t.dim() == 2 and tuple(t.shape) == (T, k), f"out {name}: expected ({T}, {k}), got {tuple(t.shape)}"
            assert t.dtype == dt and t.device == dev, f"out {name}: expected {dt} on {dev}"
            assert t.stride(1) == 1, f"out {name}: last dim must be contiguous"
    if T == 0:
        return probs, idx
    if block_v is None:
        block_v = pick_block_v(T, V)
    assert block_v >= 16 and (block_v & (block_v - 1)) == 0, "block_v must be a power of 2 >= 16"
    S = triton.cdiv(V, block_v)
    part_m, part_l, part_key = workspace if workspace is not None else workspace_for(T, V, k, block_v, dev)
    assert part_m.numel() >= T * S and part_l.numel() >= T * S and part_key.numel() >= T * S * k, \
        "workspace too small (use workspace_for with the same T, V, k, block_v)"
    _topk_partial_kernel[(T, S)](logits, logits.stride(0), V, part_m, part_l, part_key, S,
                                 K=k, BLOCK_V=block_v,
                                 num_warps=num_warps or (8 if block_v >= 4096 else 4))
    _topk_finalize_kernel[(T,)](part_m, part_l, part_key, S, probs, probs.stride(0), idx, idx.stride(0),
                                token_map if token_map is not None else idx,
                                K=k, BLOCK_S=max(16, triton.next_power_of_2(S)),
                                BLOCK_C=max(16, triton.next_power_of_2(S * k)),
                                HAS_MAP=token_map is not None, num_warps=4)
    return probs, idx


def workspace_for(T: int, V: int, k: int, block_v: int, device) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    S = triton.cdiv(V, block_v)
    return (torch.empty(T * S, dtype=torch.float32, device=device),
            torch.empty(T * S, dtype=torch.float32, device=device),
            torch.empty(T * S * k, dtype=torch.int64, device=device))


def draft_topk_ref(logits: torch.Tensor, k: int, token_map: Optional[torch.Tensor] = None):
    """SGLang: renorm_draft_probs (softmax) + fast_topk (+ hot_token_id), probabilities in fp32."""
    probs = torch.softmax(logits.to(torch.float32), dim=-1)
    if k == 1:
        p, i = torch.max(probs, dim=-1, keepdim=True)
    else:
        p, i = torch.topk(probs, k, dim=-1)
    if token_map is not None:
        i = token_map[i].to(torch.int64)
    return p, i
