"""Simulated acceptance, the sampler, on CPU against the real SGLang 0.5.17 modules:
- the chain sampler draws the requested conditional rates (statistical test, fixed seed, tolerance
  from the sample size);
- the override writes exactly the tensors SGLang's own `generate_simulated_accept_index` writes
  (same batch-wide length: identical; per-request lengths: identical to SGLang's function applied
  row by row), in both token modes.
The CUDA test (no host synchronization) runs only where a GPU is present (the GPU plan files run
it as `tests/test_simulate.py -k cuda`). The hook is tested in test_simulate_hooks.py, the settings
and the "simulated" labels in test_simulate_settings.py."""
from __future__ import annotations

import math

import pytest
import torch

from sglang_patches.vocab import rates as R
from sglang_patches.server.simulate.sampler import ChainSampler
from simulate_tensors import verify_state as _verify_state


# ---------------------------------------------------------------- the sampler's statistics

@pytest.mark.parametrize("rates,steps", [([0.8, 0.7, 0.6], 3), ([0.91, 0.86, 0.8, 0.75, 0.7], 5),
                                         ([0.52, 0.42], 4), ([1.0, 0.0, 0.9], 3)])
def test_sampler_draws_the_requested_conditional_rates(rates, steps):
    n = 20000
    s = ChainSampler(rates, steps, "cpu", seed=1234)
    got = torch.cat([s.draw(bs) for bs in (1, 7, 64, 1000) for _ in range(n // 1072 + 1)])[:n]
    assert got.dtype == torch.int32 and int(got.min()) >= 0 and int(got.max()) <= steps
    realised, reached = R.conditional_rates(got.tolist(), steps)
    padded = R.fit_to_steps(rates, steps)
    for k, (want, have, m) in enumerate(zip(padded, realised, reached)):
        if m == 0:
            assert want == 0.0 or any(r == 0.0 for r in padded[:k]), k
            continue
        # 5 standard errors of a binomial proportion over the m request-cycles that reached position k
        tol = 5 * math.sqrt(max(want * (1 - want), 1.0 / m) / m)
        assert abs(have - want) <= tol, (k, have, want, tol, m)
    dist = R.accepted_distribution(padded)
    mean_len = sum((a + 1) * p for a, p in enumerate(dist))
    var = sum((a + 1 - mean_len) ** 2 * p for a, p in enumerate(dist))
    assert mean_len == pytest.approx(R.accept_length(padded))
    assert abs(float(got.double().mean()) + 1 - mean_len) <= 5 * math.sqrt(var / n) + 1e-12


def test_sampler_is_reproducible_and_independent_per_request():
    a, b = ChainSampler([0.5, 0.5], 2, "cpu", seed=7), ChainSampler([0.5, 0.5], 2, "cpu", seed=7)
    assert torch.equal(a.draw(100), b.draw(100))
    x = ChainSampler([0.5], 1, "cpu", seed=3).draw(20000).double()
    # one request's draw says nothing about its neighbour's: lag-1 correlation within 5/sqrt(n)
    corr = torch.corrcoef(torch.stack([x[:-1], x[1:]]))[0, 1]
    assert abs(float(corr)) < 5 / math.sqrt(len(x))


# ---------------------------------------------------------------- the tensors SGLang writes

def _sglang_sim():
    from sglang.srt.speculative.spec_utils import generate_simulated_accept_index

    return generate_simulated_accept_index


@pytest.mark.parametrize("mode", ["fixed", "real-draft-token"])
def test_override_equals_sglang_for_a_batch_wide_length(mode):
    pytest.importorskip("sglang")
    sglang_fn = _sglang_sim()
    bs, steps = 5, 3
    for n in (1, 2, 4):  # rates [1]*(n-1) + [0]: every request accepts exactly n - 1 drafts
        ai, pr, nc, cand, tp = _verify_state(bs, steps, seed=n)
        ours = [ai.clone(), pr.clone(), nc.clone(), cand, tp]
        want_idx = sglang_fn(ai, pr, nc, cand, tp, bs, steps, simulate_acc_len=float(n),
                             simulate_acc_method="match-expected", simulate_acc_token_mode=mode)
        s = ChainSampler([1.0] * (n - 1) + ([0.0] if n - 1 < steps else []), steps, "cpu")
        got_idx = s.write_verify_result(accept_index=ours[0], predict=ours[1], num_correct_drafts=ours[2],
                                        candidates=cand, target_predict=tp, bs=bs, spec_steps=steps,
                                        token_mode=mode)
        assert got_idx.dtype == want_idx.dtype == torch.int32 and got_idx.shape == want_idx.shape
        assert torch.equal(got_idx, want_idx), (n, got_idx, want_idx)
        assert torch.equal(ours[2], nc) and torch.equal(ours[1], pr), n


@pytest.mark.parametrize("mode", ["fixed", "real-draft-token"])
def test_override_equals_sglang_row_by_row_for_per_request_lengths(mode):
    pytest.importorskip("sglang")
    sglang_fn = _sglang_sim()
    bs, steps = 9, 4
    ai, pr, nc, cand, tp = _verify_state(bs, steps, seed=11)
    s = ChainSampler([0.7, 0.6, 0.5, 0.4], steps, "cpu", seed=5)
    drawn = ChainSampler([0.7, 0.6, 0.5, 0.4], steps, "cpu", seed=5).draw(bs)  # what s will draw
    assert len(set(drawn.tolist())) > 1  # the batch really has different lengths
    ours_pr, ours_nc = pr.clone(), nc.clone()
    got_idx = s.write_verify_result(accept_index=ai.clone(), predict=ours_pr, num_correct_drafts=ours_nc,
                                    candidates=cand, target_predict=tp, bs=bs, spec_steps=steps, token_mode=mode)
    ref_pr, ref_nc, rows = pr.clone(), nc.clone(), []
    for i in range(bs):  # SGLang's own function, one request at a time, with that request's length
        n = int(drawn[i]) + 1
        nc_i = ref_nc[i:i + 1]
        rows.append(sglang_fn(ai[i:i + 1], ref_pr, nc_i, cand[i:i + 1], tp[i:i + 1], 1, steps,
                              simulate_acc_len=float(n), simulate_acc_method="match-expected",
                              simulate_acc_token_mode=mode))
    assert torch.equal(got_idx, torch.cat(rows)), (got_idx, torch.cat(rows))
    assert torch.equal(ours_nc, ref_nc) and torch.equal(ours_nc, drawn)
    assert torch.equal(ours_pr, ref_pr)


def test_sglang_0517_simulation_signature_is_what_the_hook_declares():
    pytest.importorskip("sglang")
    import inspect

    from sglang_patches.server.simulate import sglang_hooks as sim

    params = tuple(inspect.signature(_sglang_sim()).parameters)
    assert params == sim.SIM_FUNCTION_PARAMS


# ---------------------------------------------------------------- GPU only

@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_override_does_not_synchronize():
    bs, steps = 16, 5
    ai, pr, nc, cand, tp = (t.cuda() for t in _verify_state(bs, steps))
    s = ChainSampler([0.9, 0.8, 0.7, 0.6, 0.5], steps, "cuda", seed=0)
    s.write_verify_result(accept_index=ai, predict=pr, num_correct_drafts=nc, candidates=cand,
                          target_predict=tp, bs=bs, spec_steps=steps, token_mode="real-draft-token")  # warm
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for mode in ("fixed", "real-draft-token"):
            s.write_verify_result(accept_index=ai, predict=pr, num_correct_drafts=nc, candidates=cand,
                                  target_predict=tp, bs=bs, spec_steps=steps, token_mode=mode)
    finally:
        torch.cuda.set_sync_debug_mode("default")
