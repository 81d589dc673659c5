"""Triton draft-path kernels (sglang_patches.kernels) against their PyTorch references, and the
references against SGLang's own modules. On a CPU machine the kernels run in Triton's interpreter
(TRITON_INTERPRET=1, set by tests/run_cpu.sh); on a CUDA machine they run on the GPU.

Note: the interpreter converts fp32 -> bf16 by truncation, not round-to-nearest, so bf16 outputs
may differ from the reference by one ulp here; the bf16 tolerance (rtol 1.6e-2 = 2 ulp) allows it.
"""
from __future__ import annotations

import os

import pytest
import torch

from sglang_patches.kernels._common import rmsnorm_ref
from sglang_patches.kernels.draft_topk import draft_topk, draft_topk_ref
from sglang_patches.kernels.fused_add_rmsnorm import fused_add_rmsnorm, fused_add_rmsnorm_ref
from sglang_patches.kernels.fused_aux_fc import (aux_norm, aux_norm_ref, fused_aux_fc, fused_aux_fc_ref,
                                                 stack_fc_norm_weights)
from sglang_patches.kernels.fused_draft_input import fused_draft_input, fused_draft_input_ref
from sglang_patches.kernels.silu_and_mul import silu_and_mul, silu_and_mul_ref

DEV = "cuda" if torch.cuda.is_available() else "cpu"
needs_triton = pytest.mark.skipif(DEV == "cpu" and os.environ.get("TRITON_INTERPRET") != "1",
                                  reason="no GPU and TRITON_INTERPRET != 1")
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
TOL = {torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2), torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.float32: dict(rtol=1e-5, atol=1e-5)}
EPS = 1e-5


def rand(*shape, dtype=torch.float32, scale=1.0, seed=None):
    g = torch.Generator().manual_seed(seed) if seed is not None else None
    return (torch.randn(*shape, generator=g) * scale).to(dtype).to(DEV)


def poisoned(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype, device=DEV)


def check(out, ref, dtype):
    assert not torch.isnan(out).any(), "unwritten (NaN-poisoned) or NaN output elements"
    torch.testing.assert_close(out.float().cpu(), ref.float().cpu(), **TOL[dtype])
    rel = (out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)
    assert rel < {torch.bfloat16: 1e-2, torch.float16: 1e-3, torch.float32: 1e-6}[dtype], float(rel)


# (rows, hidden, rows_per_program override): odd rows, non-power-of-two widths, both row blockings,
# and one width past the single-block limit (two-pass chunked path).
NORM_SHAPES = [(1, 96, None), (5, 200, None), (123, 96, 8), (123, 200, None), (5, 4096, None), (3, 9000, 2)]


# ----------------------------------------------------------------------------- references vs SGLang
@pytest.fixture(scope="module")
def sgl():
    layernorm = pytest.importorskip("sglang.srt.layers.layernorm")
    activation = pytest.importorskip("sglang.srt.layers.activation")
    common = pytest.importorskip("sglang.srt.utils.common")
    return layernorm.RMSNorm, activation.SiluAndMul, common.fast_topk


def _sgl_norm(RMSNorm, weight, eps, **kw):
    n = RMSNorm(weight.shape[0], eps=eps, **kw)
    n.weight.data = weight.clone()
    return n


@pytest.mark.parametrize("dtype", DTYPES)
@torch.no_grad()
def test_refs_match_sglang_forward_native(sgl, dtype):
    RMSNorm, SiluAndMul, fast_topk = sgl
    torch.manual_seed(0)
    x, r = torch.randn(7, 200).to(dtype), torch.randn(7, 200).to(dtype)
    w = (1 + 0.3 * torch.randn(200)).to(dtype)
    n = _sgl_norm(RMSNorm, w, EPS)
    assert torch.equal(rmsnorm_ref(x, w, EPS), n.forward_native(x))
    y, res = n.forward_native(x, r)
    ry, rres = fused_add_rmsnorm_ref(x, r, w, EPS)
    assert torch.equal(ry, y) and torch.equal(rres, res)
    # fp32 residual stream (RMSNorm(fp32_residual=True))
    r32 = torch.randn(7, 200)
    y, res = _sgl_norm(RMSNorm, w, EPS, fp32_residual=True).forward_native(x, r32)
    ry, rres = fused_add_rmsnorm_ref(x, r32, w, EPS)
    assert torch.equal(ry, y) and torch.equal(rres, res) and rres.dtype == torch.float32
    # draft input layer: llama_eagle3.LlamaDecoderLayer.forward (input layer) with SGLang modules
    e, h = torch.randn(7, 96).to(dtype), torch.randn(7, 96).to(dtype)
    w1, w2 = torch.randn(96).to(dtype), torch.randn(96).to(dtype)
    sg = torch.cat([_sgl_norm(RMSNorm, w1, EPS).forward_native(e), _sgl_norm(RMSNorm, w2, EPS).forward_native(h)], -1)
    assert torch.equal(fused_draft_input_ref(e, h, w1, w2, EPS), sg)
    # fc input: llama_eagle3.LlamaModel.forward, input_norm then fc_norm chunks
    K, hin = 3, 64
    aux = torch.randn(7, K * hin).to(dtype)
    w_in = torch.randn(K * hin).to(dtype)
    fc_norm = torch.nn.ModuleList([_sgl_norm(RMSNorm, torch.randn(hin).to(dtype), EPS) for _ in range(K)])
    hs = _sgl_norm(RMSNorm, w_in, EPS).forward_native(aux)
    hs = torch.cat([m.forward_native(c) for m, c in zip(fc_norm, hs.chunk(K, dim=-1))], dim=-1)
    assert torch.equal(aux_norm_ref(aux, K, EPS, input_norm_weight=w_in,
                                    fc_norm_weight=stack_fc_norm_weights(fc_norm)), hs)
    # SiLU-and-mul: forward_native rounds twice in 16-bit dtypes, the reference once (sgl_kernel semantics)
    g = torch.randn(7, 2 * 200).to(dtype)
    # SiluAndMul.__init__ reads the server's runtime context; forward_native does not use self
    sg = SiluAndMul.forward_native(None, g)
    if dtype == torch.float32:
        assert torch.equal(silu_and_mul_ref(g), sg)
    else:
        torch.testing.assert_close(silu_and_mul_ref(g).float(), sg.float(), **TOL[dtype])
    # draft top-k: renorm_draft_probs (softmax) + fast_topk
    logits = torch.randn(5, 1000)
    for k in (1, 4):
        p, i = fast_topk(torch.softmax(logits, dim=-1), k, dim=-1)
        rp, ri = draft_topk_ref(logits, k)
        assert torch.equal(rp, p) and torch.equal(ri, i)


# ----------------------------------------------------------------------------- kernels vs references
@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("T,H,rpp", NORM_SHAPES)
def test_fused_draft_input(dtype, T, H, rpp):
    seed = T * 1000 + H
    e, h = rand(T, H, dtype=dtype, seed=seed), rand(T, H, dtype=dtype, scale=4.0, seed=seed + 1)
    w1, w2 = rand(H, dtype=dtype, seed=seed + 2), rand(H, dtype=dtype, seed=seed + 3)
    ref = fused_draft_input_ref(e, h, w1, w2, EPS)
    out = poisoned((T, 2 * H), dtype)
    assert fused_draft_input(e, h, w1, w2, EPS, out=out, rows_per_program_=rpp) is out
    check(out, ref, dtype)
    check(fused_draft_input(e, h, w1, w2, EPS), ref, dtype)


@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("T,H,rpp", NORM_SHAPES)
def test_fused_add_rmsnorm(dtype, T, H, rpp):
    seed = T * 1000 + H + 7
    x, r = rand(T, H, dtype=dtype, seed=seed), rand(T, H, dtype=dtype, scale=3.0, seed=seed + 1)
    w = rand(H, dtype=dtype, seed=seed + 2)
    ref_y, ref_r = fused_add_rmsnorm_ref(x, r, w, EPS)
    out, rout = poisoned((T, H), dtype), poisoned((T, H), dtype)
    y, ro = fused_add_rmsnorm(x, r, w, EPS, out=out, residual_out=rout, rows_per_program_=rpp)
    assert y is out and ro is rout
    check(y, ref_y, dtype)
    check(ro, ref_r, dtype)
    # in place, as SGLang's CUDA op (out -> x, residual_out -> residual)
    xi, ri = x.clone(), r.clone()
    fused_add_rmsnorm(xi, ri, w, EPS, out=xi, residual_out=ri, rows_per_program_=rpp)
    check(xi, ref_y, dtype)
    check(ri, ref_r, dtype)


@needs_triton
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fused_add_rmsnorm_fp32_residual(dtype):
    x, r, w = rand(5, 200, dtype=dtype, seed=1), rand(5, 200, seed=2), rand(200, dtype=dtype, seed=3)
    y, ro = fused_add_rmsnorm(x, r, w, EPS)
    ref_y, ref_r = fused_add_rmsnorm_ref(x, r, w, EPS)
    assert ro.dtype == torch.float32
    check(y, ref_y, dtype)
    check(ro, ref_r, torch.float32)


@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("T,Hin,K,mode", [(1, 96, 3, "fc_norm"), (5, 200, 3, "input_norm"), (123, 96, 3, "both"),
                                          (5, 200, 2, "fc_norm"), (2, 4096, 3, "input_norm"),
                                          (2, 4096, 3, "fc_norm")])
def test_aux_norm(dtype, T, Hin, K, mode):
    seed = T * 31 + Hin + K
    aux = rand(T, K * Hin, dtype=dtype, scale=2.0, seed=seed)
    kw = {}
    if mode in ("input_norm", "both"):
        kw["input_norm_weight"] = rand(K * Hin, dtype=dtype, seed=seed + 1)
    if mode in ("fc_norm", "both"):
        kw["fc_norm_weight"] = rand(K, Hin, dtype=dtype, seed=seed + 2)
    ref = aux_norm_ref(aux, K, EPS, **kw)
    out = poisoned((T, K * Hin), dtype)
    assert aux_norm(aux, K, EPS, out=out, **kw) is out
    check(out, ref, dtype)


@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_aux_fc(dtype):
    T, Hin, K, H = 5, 96, 3, 80
    aux = rand(T, K * Hin, dtype=dtype, seed=11)
    fw, fb = rand(H, K * Hin, dtype=dtype, scale=0.1, seed=12), rand(H, dtype=dtype, seed=13)
    wf = rand(K, Hin, dtype=dtype, seed=14)
    assert aux_norm(aux, K, EPS) is aux  # neither norm: fc straight on aux, no copy
    for bias in (None, fb):
        ref = fused_aux_fc_ref(aux, fw, bias, num_aux=K, eps=EPS, fc_norm_weight=wf)
        check(fused_aux_fc(aux, fw, bias, num_aux=K, eps=EPS, fc_norm_weight=wf), ref, dtype)
        out, nout = poisoned((T, H), dtype), poisoned((T, K * Hin), dtype)
        got = fused_aux_fc(aux, fw, bias, num_aux=K, eps=EPS, fc_norm_weight=wf, out=out, norm_out=nout)
        assert got is out
        check(out, ref, dtype)


@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("T,I,rpp", [(1, 96, None), (5, 200, None), (123, 100, 4), (16, 1000, None), (2, 14336, None)])
def test_silu_and_mul(dtype, T, I, rpp):
    x = rand(T, 2 * I, dtype=dtype, scale=3.0, seed=T + I)
    out = poisoned((T, I), dtype)
    assert silu_and_mul(x, out=out, rows_per_program_=rpp) is out
    check(out, silu_and_mul_ref(x), dtype)
    check(silu_and_mul(x), silu_and_mul_ref(x), dtype)


def _expected_topk_indices(logits, k):
    # stable sort: among equal logits the lower index first, which is the kernel's documented tie rule
    return torch.sort(-logits.float().cpu(), dim=-1, stable=True).indices[:, :k]


@needs_triton
@pytest.mark.parametrize("T,V,k,dtype,block_v", [
    (1, 5, 4, torch.float32, None), (5, 1000, 4, torch.float32, None), (5, 1000, 8, torch.bfloat16, 256),
    (3, 32000, 1, torch.float32, None), (16, 32000, 4, torch.bfloat16, 4096), (2, 3001, 3, torch.float16, 512),
    (1, 128256, 4, torch.float32, 4096)])
def test_draft_topk(T, V, k, dtype, block_v):
    logits = rand(T, V, dtype=dtype, scale=3.0, seed=V + k)
    probs, idx = poisoned((T, k), torch.float32), torch.full((T, k), -7, dtype=torch.int64, device=DEV)
    p, i = draft_topk(logits, k, out=(probs, idx), block_v=block_v)
    assert p is probs and i is idx
    assert (idx >= 0).all() and (idx < V).all(), "unwritten or out-of-range indices"
    assert torch.equal(idx.cpu(), _expected_topk_indices(logits, k))
    rp, _ = draft_topk_ref(logits, k)
    assert not torch.isnan(probs).any()
    torch.testing.assert_close(probs.cpu(), rp.cpu(), rtol=1e-5, atol=1e-7)


@needs_triton
def test_draft_topk_masked_vocab_and_token_map():
    V, k = 700, 4
    logits = rand(3, V, seed=5)
    logits[0, :] = float("-inf")
    logits[0, [3, 650]] = torch.tensor([1.0, 2.0], device=DEV)  # only 2 finite logits < k
    logits[1, 100:] = float("-inf")
    p, i = draft_topk(logits, k, block_v=128)
    assert torch.equal(i.cpu(), _expected_topk_indices(logits, k))
    torch.testing.assert_close(p.cpu(), draft_topk_ref(logits, k)[0].cpu(), rtol=1e-5, atol=1e-7)
    assert i[0].tolist() == [650, 3, 0, 1] and p[0, 2:].tolist() == [0.0, 0.0]
    tmap = torch.randperm(50000, generator=torch.Generator().manual_seed(0))[:V].to(torch.int32).to(DEV)
    _, im = draft_topk(logits, k, token_map=tmap, block_v=128)
    assert im.dtype == torch.int64 and torch.equal(im, tmap[i].long())


# ----------------------------------------------------------------------------- launcher checks
def test_launcher_assertions():
    bf = torch.bfloat16
    x, w = torch.randn(4, 64, dtype=bf), torch.randn(64, dtype=bf)
    bad = [
        lambda: fused_draft_input(x, torch.randn(4, 32, dtype=bf), w, w, EPS),          # hidden width
        lambda: fused_draft_input(x, torch.randn(3, 64, dtype=bf), w, w, EPS),          # rows
        lambda: fused_draft_input(x, x.half(), w, w, EPS),                              # dtype mismatch
        lambda: fused_draft_input(x, x, torch.randn(32, dtype=bf), w, EPS),              # weight size
        lambda: fused_draft_input(x, x, w, w, EPS, out=torch.empty(4, 64, dtype=bf)),    # out shape
        lambda: fused_draft_input(x, x, w, w, EPS, out=torch.empty(4, 128)),             # out dtype
        lambda: fused_draft_input(x.t(), x.t(), torch.randn(4, dtype=bf), torch.randn(4, dtype=bf), EPS),
        lambda: fused_draft_input(x, x, w, w, 0),                                        # eps
        lambda: fused_draft_input(x.view(-1), x.view(-1), w, w, EPS),                   # 1-D
        lambda: fused_add_rmsnorm(x, torch.randn(64, 4, dtype=bf).t(), w, EPS),          # non-contiguous
        lambda: fused_add_rmsnorm(x, x.half(), w, EPS),                                  # residual dtype
        lambda: fused_add_rmsnorm(x.to(torch.int32), x.to(torch.int32), w, EPS),         # int input
        lambda: fused_add_rmsnorm(x, x, w, EPS, residual_out=torch.empty(4, 64)),        # residual_out dtype
        lambda: aux_norm(torch.randn(4, 100, dtype=bf), 3, EPS, fc_norm_weight=torch.randn(3, 33, dtype=bf)),
        lambda: aux_norm(torch.randn(4, 96, dtype=bf), 3, EPS, fc_norm_weight=torch.randn(96, dtype=bf)),
        lambda: aux_norm(torch.randn(4, 96, dtype=bf), 3, EPS, input_norm_weight=torch.randn(32, dtype=bf)),
        lambda: fused_aux_fc(torch.randn(4, 96, dtype=bf), torch.randn(8, 95, dtype=bf), num_aux=3, eps=EPS),
        lambda: silu_and_mul(torch.randn(4, 65, dtype=bf)),                              # odd width
        lambda: silu_and_mul(torch.randn(64, 4, dtype=bf).t()),                          # non-contiguous
        lambda: silu_and_mul(x, out=torch.empty(4, 64, dtype=bf)),                       # out width
        lambda: draft_topk(torch.randn(2, 100), 9),                                      # k > 8
        lambda: draft_topk(torch.randn(2, 100), 0),
        lambda: draft_topk(torch.randn(2, 3), 4),                                        # k > V
        lambda: draft_topk(torch.randn(100, 2).t(), 1),                                  # non-contiguous
        lambda: draft_topk(torch.randn(2, 100).to(torch.int64), 1),
        lambda: draft_topk(torch.randn(2, 100), 2, out=(torch.empty(2, 2), torch.empty(2, 2))),  # idx dtype
        lambda: draft_topk(torch.randn(2, 100), 2, token_map=torch.arange(99)),
    ]
    for i, fn in enumerate(bad):
        with pytest.raises(AssertionError):
            fn()
            pytest.fail(f"case {i} did not raise")


@needs_triton
def test_row_strided_inputs_and_empty_batch():
    bf = torch.bfloat16
    big = rand(5, 300, dtype=bf, seed=3)
    x = big[:, :200]                       # rows strided, last dim contiguous
    w = rand(200, dtype=bf, seed=4)
    check(fused_draft_input(x, x, w, w, EPS), fused_draft_input_ref(x, x, w, w, EPS), bf)
    check(silu_and_mul(big[:, :200]), silu_and_mul_ref(big[:, :200]), bf)
    p, i = draft_topk(big[:, :200].float(), 2)
    assert torch.equal(i.cpu(), _expected_topk_indices(big[:, :200], 2))
    assert fused_draft_input(x[:0], x[:0], w, w, EPS).shape == (0, 400)
    assert draft_topk(torch.empty(0, 100, device=DEV), 2)[0].shape == (0, 2)
