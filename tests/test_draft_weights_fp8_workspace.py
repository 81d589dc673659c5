"""The FP8 drafter's per-call cost: install() allocates one split-K workspace for all modules, sized
for the worst M the kernel may pick (fp8_linear_config: tuned table per M bucket, the rule
elsewhere, GEMV and MMA paths), and a call then allocates only its output (Triton interpreter, CPU).
No mocks: torch.empty / torch.zeros are wrapped only to count the allocations of a call."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
pytest.importorskip("sglang")

from sglang_patches.kernels import fp8_linear as k  # noqa: E402
from sglang_patches.server.draft_backend import fp8_weights  # noqa: E402

# (N, K): a TP2 shard-like shape the rule splits at every M bucket, and a tuned drafter shape
SHAPES = [(256, 4096), (4096, 14336)]


def _need(n, kk):
    """The worst M's workspace, from the config the kernel launches with (its per-shape cache)."""
    return max(k.fp8_linear_workspace_numel(m, n, dict(k._config_cached(m, n, kk))["split_k"])
               for m in range(1, k.MAX_M + 1))


def test_workspace_size_by_hand():
    """(256, 4096), 17..64 rows, by the rule: 128-wide K tiles give 32 tiles, so at most
    next_pow2(32 // 8 + 1) // 2 = 4 splits (>= 8 tiles each); block_n halves from 64 to 16 (16 blocks x 4
    splits = 64 programs, still < 384) and the split reaches 4. The worst M (64) needs 4 x 64 x 256 fp32."""
    cfg = k.fp8_linear_config(64, 256, 4096)
    assert cfg["path"] == "mma" and cfg["split_k"] == 4, cfg
    assert _need(256, 4096) == 4 * 64 * 256


def test_workspace_covers_every_m_of_tuned_and_rule_shapes():
    shapes = list(k._TUNED) + [(n // tp, kk) for n, kk in k._TUNED for tp in (2, 4, 8)] + \
             [(n, kk // tp) for n, kk in k._TUNED for tp in (2, 4, 8)]
    for n, kk in shapes:
        f = fp8_weights.Fp8Weights.__new__(fp8_weights.Fp8Weights)
        f.n, f.k, f.max_m, f._w8a8 = n, kk, k.MAX_M, None  # a weight-only module (w8a8: test_draft_weights_fp8_w8a8.py)
        got = f.workspace_numel()
        for m in range(1, k.MAX_M + 1):
            assert got >= k.fp8_linear_workspace_numel(m, n, k.fp8_linear_config(m, n, kk)["split_k"]), (n, kk, m)
    assert _need(256, 4096) > 0 and _need(4096, 14336) > 0  # both shapes below really split K


def test_one_shared_workspace_and_a_call_allocates_only_its_output(monkeypatch):
    torch.manual_seed(0)
    fcs = [torch.nn.Linear(kk, n, bias=False).to(torch.bfloat16) for n, kk in SHAPES[:1]]
    stats, fc8 = fp8_weights.install(fp8_weights.Fp8Plan(fc=fcs[0]))
    assert fc8.workspace is not None and fc8.workspace.dtype == torch.float32
    assert fc8.workspace.numel() == _need(*SHAPES[0]) and stats["workspace_bytes"] == 4 * _need(*SHAPES[0])
    ws_ptr = fc8.workspace.data_ptr()
    seen = []
    real = fc8._linear
    fc8._linear = lambda *a, **kw: (seen.append(kw.get("workspace")), real(*a, **kw))[1]
    allocs = []
    for name in ("empty", "zeros", "empty_like", "zeros_like"):
        orig = getattr(torch, name)
        monkeypatch.setattr(torch, name, lambda *a, _o=orig, _n=name, **kw: (allocs.append(_n), _o(*a, **kw))[1])
    n, kk = SHAPES[0]
    for m in (1, 2, 16, 17, 64):  # GEMV, both MMA buckets and their edges; every one splits K here
        cfg = k.fp8_linear_config(m, n, kk)
        assert cfg["split_k"] > 1, (m, cfg)
        x = torch.randn(m, kk, generator=torch.Generator().manual_seed(m)).to(torch.bfloat16)
        allocs.clear()
        y = fc8(x)
        assert allocs == ["empty"], (m, allocs)  # the output; the workspace is the shared one
        assert seen[-1] is not None and seen[-1].data_ptr() == ws_ptr
        ref = k.fp8_linear_ref(x, fc8.w8, fc8.scale)
        assert float((y.float() - ref.float()).abs().max() / ref.float().abs().max()) <= 1e-2, m


def test_non_finite_weights_are_refused_at_plan_time():
    """A drafter linear with inf/NaN weights takes SGLang's path (strict: a one-line refusal), not an
    assertion deep in the quantiser."""
    import torch

    from sglang_patches.server.draft_backend.fp8_weights import _float_2d

    w = torch.randn(8, 16, dtype=torch.bfloat16)
    assert _float_2d(w) is None
    w[3, 5] = float("nan")
    assert "inf/NaN" in _float_2d(w)
    w[3, 5] = float("inf")
    assert "inf/NaN" in _float_2d(w)
