"""FP8 weight-and-activation linear (sglang_patches.kernels.fp8_w8a8_linear) against its PyTorch reference.
On CPU the kernels run in Triton's interpreter (TRITON_INTERPRET=1, set by tests/run_cpu.sh) over small odd
shapes; TestCudaDrafterShapes runs the 8B drafter's shapes natively when a GPU is present.

Tolerances: the per-token quantization is exact against torch's (same fp32 amax / 448, IEEE division,
round to nearest e4m3 with ties to even), so x8 and xs must be equal. The product of two e4m3 values is
exact in fp32, so in the interpreter the linear differs from fp32 math on the same quantized values by
the summation order only, which turns into at most one ulp of the output dtype at the store, plus one
more from its truncating fp32 -> bf16 rounding: |y - ref| <= 2 * eps(dtype) * max|ref|. On Hopper the
fp8 MMA sums each K tile at ~14 bits before the fp32 promotion: relative ~2^-14 per tile partial,
below a bf16 ulp, so the GPU class allows 4 * eps (bf16) * max|ref|. Against the
unquantized bf16 product the activation and weight rounding (each <= 2^-4 relative per element) are
allowed as a 6 % relative Frobenius error: it catches a missing or misplaced scale (errors of 100 %+).
"""
from __future__ import annotations

import os

import pytest
import torch

from sglang_patches.kernels.fp8_linear import MAX_M, fp8_linear_config, quantize_fp8_per_channel
from sglang_patches.kernels.fp8_w8a8_linear import (fp8_w8a8_linear, fp8_w8a8_linear_ref, quantize_fp8_per_token,
                                                    quantize_fp8_per_token_ref)

DEV = "cuda" if torch.cuda.is_available() else "cpu"
needs_triton = pytest.mark.skipif(DEV == "cpu" and os.environ.get("TRITON_INTERPRET") != "1",
                                  reason="no GPU and TRITON_INTERPRET != 1")
EPS = {torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}
DTYPES = [torch.bfloat16, torch.float16]


def rand(*shape, dtype=torch.float32, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype).to(DEV)


def weights(N, K, seed):
    return quantize_fp8_per_channel(rand(N, K, scale=0.05, seed=seed))


def close(out, ref, ulps=2):
    assert out.dtype == ref.dtype and out.shape == ref.shape
    assert not torch.isnan(out).any(), "unwritten (NaN-poisoned) or NaN output elements"
    o, r = out.float().cpu(), ref.float().cpu()
    tol = ulps * EPS[ref.dtype] * float(r.abs().max()) + 1e-6
    assert float((o - r).abs().max()) <= tol, f"max |y - ref| = {float((o - r).abs().max()):.3g} > {tol:.3g}"


# ----------------------------------------------------------------------------- per-token quantization
@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,K", [(1, 1), (2, 7), (3, 1023), (5, 1025), (9, 2500)])
def test_quantize_per_token_equals_torch(dtype, M, K):
    x = rand(M, K + 3, dtype=dtype, seed=M + K)[:, :K]  # strided rows
    x8, xs = quantize_fp8_per_token(x)
    r8, rs = quantize_fp8_per_token_ref(x)
    assert x8.dtype == torch.float8_e4m3fn and x8.is_contiguous() and xs.dtype == torch.float32
    assert torch.equal(xs.cpu(), rs.cpu())
    assert torch.equal(x8.float().cpu(), r8.float().cpu())


@needs_triton
def test_quantize_rounding_across_an_exponent_and_ties_and_zero_rows():
    # row 0: amax 448 so x / xs == x: 124.3 must round up to 128 (the carry into the next exponent),
    # 9.5 is a tie between 9 and 10 (step 1 at 8..16) and goes to the even mantissa (10), so does 10.5,
    # 0.0009765625 = 2^-10 is half the subnormal step 2^-9 (a tie to 0); row 1 is all zeros (xs 1.0).
    row = [448.0, 124.3, 9.5, 10.5, -9.5, 0.0009765625, 0.0029296875, -447.0]
    x = torch.tensor([row, [0.0] * len(row)], dtype=torch.float32).to(DEV).to(torch.bfloat16)
    x8, xs = quantize_fp8_per_token(x)
    r8, rs = quantize_fp8_per_token_ref(x)
    assert torch.equal(x8.float().cpu(), r8.float().cpu()) and torch.equal(xs.cpu(), rs.cpu())
    assert [x8[0, i].float().item() for i in (1, 2, 3, 5)] == [128.0, 10.0, 10.0, 0.0]
    assert xs[1].item() == 1.0 and not x8[1].float().any()


# ----------------------------------------------------------------------------- the linear
SHAPES = [  # (M, N, K): odd sizes, masked edges, a split-K shape (N small against K), M at both limits
    (2, 1, 16), (3, 33, 70), (5, 130, 300), (16, 64, 1100), (17, 40, 129), (37, 200, 96), (MAX_M, 24, 520),
    (8, 64, 4096),
]


@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_linear_matches_fp32_math_on_the_quantized_values(dtype, M, N, K):
    w8, s = weights(N, K, seed=N)
    x = rand(M, K + 5, dtype=dtype, seed=M)[:, :K]
    bias = rand(N, dtype=dtype, seed=7)
    out = torch.full((M, N), float("nan"), dtype=dtype, device=DEV)
    y = fp8_w8a8_linear(x, w8, s, bias, out=out)
    assert y.data_ptr() == out.data_ptr()
    close(y, fp8_w8a8_linear_ref(x, w8, s, bias))
    exact = x.float() @ (w8.float() * s[:, None]).T + bias.float()  # no activation rounding
    rel = float((y.float() - exact).norm() / exact.norm())
    assert rel < 0.06, f"relative error {rel:.3f} against the unquantized activations"


@needs_triton
def test_split_k_shape_really_splits_and_buffers_are_used():
    M, N, K = 8, 64, 4096
    assert fp8_linear_config(M, N, K)["split_k"] > 1  # else the test above never ran the reduce kernel
    w8, s = weights(N, K, seed=1)
    x = rand(M, K, dtype=torch.bfloat16, seed=2)
    x8 = torch.empty(M, K, dtype=torch.float8_e4m3fn, device=DEV)
    xs = torch.empty(M, dtype=torch.float32, device=DEV)
    ws = torch.full((fp8_linear_config(M, N, K)["split_k"] * M * N,), float("nan"), dtype=torch.float32, device=DEV)
    y = fp8_w8a8_linear(x, w8, s, workspace=ws, x8=x8, xs=xs)
    close(y, fp8_w8a8_linear_ref(x, w8, s))
    assert not torch.isnan(ws).any()  # the partial sums went to the buffer given
    assert torch.equal(x8.float().cpu(), quantize_fp8_per_token_ref(x)[0].float().cpu())


@pytest.mark.parametrize("M", [1, MAX_M + 1])
def test_rows_outside_the_path_are_refused(M):
    w8, s = weights(8, 16, seed=0)
    with pytest.raises(AssertionError, match="rows"):
        fp8_w8a8_linear(rand(M, 16, dtype=torch.bfloat16), w8, s)


def test_bad_operands_are_refused():
    w8, s = weights(8, 16, seed=0)
    x = rand(4, 16, dtype=torch.bfloat16)
    with pytest.raises(AssertionError, match="w8"):
        fp8_w8a8_linear(x, w8.float(), s)
    with pytest.raises(AssertionError, match="columns"):
        fp8_w8a8_linear(rand(4, 15, dtype=torch.bfloat16), w8, s)
    with pytest.raises(AssertionError, match="scale"):
        fp8_w8a8_linear(x, w8, s.double())
    with pytest.raises(AssertionError, match="x8"):
        fp8_w8a8_linear(x, w8, s, x8=torch.empty(4, 16, dtype=torch.bfloat16, device=DEV))


@pytest.mark.skipif(DEV == "cpu", reason="the drafter's real shapes run natively on a GPU only")
class TestCudaDrafterShapes:
    @pytest.mark.parametrize("N,K", [(6144, 8192), (4096, 4096), (28672, 4096), (4096, 14336), (32000, 4096), (4096, 12288)])
    @pytest.mark.parametrize("M", [2, 8, 32, 64])
    def test_llama3_8b_drafter_shapes(self, N, K, M):
        w8, s = weights(N, K, seed=3)
        x = rand(M, K, dtype=torch.bfloat16, seed=4)
        close(fp8_w8a8_linear(x, w8, s), fp8_w8a8_linear_ref(x, w8, s), ulps=4)


_COMPILE = r'''
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from sglang_patches.kernels import fp8_linear as fl, fp8_w8a8_linear as fw
names = ["x_ptr", "stride_xm", "w_ptr", "scale_ptr", "bias_ptr", "out_ptr", "stride_om", "ws_ptr", "M", "N", "K",
         "k_iters", "xs_ptr", "HAS_BIAS", "BLOCK_M", "BLOCK_N", "BLOCK_K", "K_ITERS", "SPLIT_K", "DOT_F32", "A8"]
types = ["*fp8e4nv", "i32", "*fp8e4nv", "*fp32", "*bf16", "*bf16", "i32", "*fp32"] + ["i32"] * 4 + ["*fp32"] + ["constexpr"] * 8
cst = dict(HAS_BIAS=True, BLOCK_M=16, BLOCK_N=128, BLOCK_K=128, K_ITERS=0, SPLIT_K=2, DOT_F32=False, A8=True)
src = ASTSource(fn=fl._fp8_linear_kernel, signature=dict(zip(names, types)),
                constexprs={(names.index(k),): v for k, v in cst.items()})
ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 3}).asm["ptx"]
assert "e4m3" in ptx and ("wgmma" in ptx or "mma" in ptx), "no fp8 tensor-core dot in the PTX"
qn = ["x_ptr", "stride_xm", "x8_ptr", "xs_ptr", "K", "k_iters", "K_ITERS", "BLOCK"]
src = ASTSource(fn=fw._quant_rows_kernel, signature=dict(zip(qn, ["*bf16", "i32", "*fp8e4nv", "*fp32", "i32", "i32",
                "constexpr", "constexpr"])), constexprs={(6,): 0, (7,): 1024})
triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
print("compiled")
'''


def test_gpu_path_compiles_for_sm90():
    """The interpreter runs only the fp32-dot / constexpr-loop branches; this compiles the GPU branch
    (fp8 x fp8 dot promoted per K tile, the quantization kernel's IEEE division and rounding) to an sm_90
    cubin with the ptxas in the triton wheel, so a GPU-only compile error shows up on CPU. Running it
    still needs a GPU."""
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("triton.backends.nvidia")
    repo = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(repo) + os.pathsep + os.environ.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", _COMPILE], capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0 and "ptxas" in r.stderr and "not found" in r.stderr.lower():
        pytest.skip("no ptxas in this triton install")
    assert r.returncode == 0 and "compiled" in r.stdout, r.stderr[-3000:]
