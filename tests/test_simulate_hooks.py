"""Simulated acceptance, the hook, on CPU against the real modules of the SGLang under test (0.5.17
and 0.5.23 runs of tests/run_cpu.sh):
- the hook goes through the registry with the version's real signature, switches SGLang's branch on
  and off exactly, and refuses a changed caller or a user-set SGLANG_SIMULATE_ACC_LEN;
- its target resolves in the 0.5.23 sources (skipped where tests/run_cpu.sh has not unpacked them);
- apply_overlay with rates sets the marker and undo_overlay restores SGLang;
- through SGLang's own eagle_sample, the hook's result equals SGLang's own simulation. The CPU build
  of SGLang has no sgl_kernel, so `_greedy_chain_verify` stands in for its CUDA verify_tree_greedy,
  and eagle_sample's inputs are stand-ins holding only the fields it reads. 0.5.23's eagle_sample
  reads get_spec() on this path (0.5.17's does not): there it runs inside a real runtime context
  built from ServerArgs by SGLang's own create_context / use_context (its mechanism for embedded
  work, restored on exit), which the hook's topk check reads too."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import needs_sglang

from sglang_patches.errors import PatchTargetError, UserError
from sglang_patches.vocab.overlay_config import OverlayConfig
from sglang_patches.server.simulate.sampler import ChainSampler
from simulate_tensors import verify_state as _verify_state

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the hook in a process

@pytest.fixture
def sim_hooks():
    pytest.importorskip("sglang")
    from sglang.srt.speculative import spec_utils

    from sglang_patches.server.hooks import REGISTRY
    from sglang_patches.server.simulate import sglang_hooks as sim

    original_fn, original_switch = spec_utils.generate_simulated_accept_index, spec_utils.SIMULATE_ACC_LEN
    yield sim
    sim.disable()
    REGISTRY.undo([h for h in REGISTRY.applied if h.spec.feature == "simulate_acceptance"])
    assert spec_utils.generate_simulated_accept_index is original_fn
    assert spec_utils.SIMULATE_ACC_LEN == original_switch


def test_hook_switches_sglang_branch_and_draws_per_request(sim_hooks):
    from sglang.srt.speculative import spec_utils

    from sglang_patches.server.hooks import REGISTRY, is_patched

    sim = sim_hooks
    assert spec_utils.SIMULATE_ACC_LEN <= 0  # SGLang's default: the branch is off
    sim.validate()
    applied = REGISTRY.apply(sim.specs())
    sim.enable([0.9, 0.5, 0.2])
    assert spec_utils.SIMULATE_ACC_LEN > 0 and is_patched(spec_utils.generate_simulated_accept_index)
    bs, steps = 64, 3
    ai, pr, nc, cand, tp = _verify_state(bs, steps)
    # called the way eagle_sample calls it (it imports the name from spec_utils at call time)
    idx = spec_utils.generate_simulated_accept_index(accept_index=ai, predict=pr, num_correct_drafts=nc,
                                                     candidates=cand, target_predict=tp,
                                                     simulate_acc_len=spec_utils.SIMULATE_ACC_LEN,
                                                     simulate_acc_token_mode="fixed", bs=bs, spec_steps=steps)
    lengths = (idx >= 0).sum(dim=1)
    assert torch.equal(lengths.to(torch.int32), nc + 1) and len(set(nc.tolist())) > 1
    assert bool((pr == 100).all())
    assert sim.active_rates() == [0.9, 0.5, 0.2]
    sim.disable()
    REGISTRY.undo(applied)
    assert spec_utils.SIMULATE_ACC_LEN <= 0 and not is_patched(spec_utils.generate_simulated_accept_index)


def test_hook_refuses_user_simulation_and_a_changed_caller(sim_hooks, monkeypatch):
    from sglang.srt.speculative import spec_utils

    sim = sim_hooks
    monkeypatch.setattr(spec_utils, "SIMULATE_ACC_LEN", 3.0)
    with pytest.raises(UserError, match="unset SGLANG_SIMULATE_ACC_LEN"):
        sim.validate()
    monkeypatch.setattr(spec_utils, "SIMULATE_ACC_LEN", -1.0)
    monkeypatch.setattr(sim, "SIM_CALLER_MUST_READ", sim.SIM_CALLER_MUST_READ + ("if SIMULATE_ACC_LEN >= 2",))
    with pytest.raises(PatchTargetError, match="simulation branch changed"):
        sim.validate()
    monkeypatch.setattr(sim, "SIM_CALLER", ("sglang.srt.speculative.eagle_utils", "no_such_function"))
    with pytest.raises(PatchTargetError, match="not supported"):
        sim.validate()


def test_hook_signature_checked_by_the_registry():
    pytest.importorskip("sglang")
    from dataclasses import replace

    from sglang_patches.server.hooks import REGISTRY
    from sglang_patches.server.simulate import sglang_hooks as sim

    REGISTRY.validate(sim.specs())  # the real function has every declared parameter
    changed = [replace(s, params=s.params + ("draft_probs",)) for s in sim.specs()]
    with pytest.raises(PatchTargetError, match="changed in sglang"):
        REGISTRY.validate(changed)


def test_hook_target_resolves_in_0523_sources():
    import os

    from sglang_patches.server.simulate import sglang_hooks as sim
    from sglang_patches.compat.static_targets import check_all

    site = os.environ.get("SGP_SGLANG_0523_SITE", str(REPO / ".venv-test" / "sglang-0523"))
    if not os.path.isdir(os.path.join(site, "sglang")):
        pytest.skip("sglang 0.5.23 sources not unpacked (tests/run_cpu.sh does it)")
    assert all(r.ok for r in check_all(site, sim.specs()))
    caller = Path(site, "sglang", "srt", "speculative", "eagle_utils.py").read_text()
    assert all(s in caller for s in sim.SIM_CALLER_MUST_READ)


def test_apply_overlay_with_rates_and_undo():
    pytest.importorskip("sglang")
    from sglang.srt.speculative import spec_utils

    from sglang_patches.server.patches import catalog
    from sglang_patches.server.patches.marker import overlay_info

    assert catalog._applied_in_process == []
    try:
        applied = catalog.apply_overlay(OverlayConfig(simulate_acceptance=[0.8, 0.7, 0.6]))
        assert "simulate_acceptance" in {h.spec.feature for h in applied}
        info = overlay_info()["simulated_acceptance"]
        assert info["rates"] == [0.8, 0.7, 0.6] and "SIMULATED" in info["note"]
        assert info["expected_accept_length"] == pytest.approx(1 + 0.8 + 0.56 + 0.336)
        assert spec_utils.SIMULATE_ACC_LEN > 0
    finally:
        catalog.undo_overlay()
    assert spec_utils.SIMULATE_ACC_LEN <= 0 and overlay_info()["simulated_acceptance"] is None

# ---------------------------------------------------------------- through SGLang's own eagle_sample

def _greedy_chain_verify(predicts, accept_index, accept_token_num, candidates, retrieve_index,
                         retrieve_next_token, retrieve_next_sibling, target_predict, topk=-1):
    """Stand-in for sgl_kernel's verify_tree_greedy (a CUDA kernel; the CPU build of SGLang here has
    no kernel, so eagle_utils would leave the tensors untouched): greedy acceptance of a topk-1 chain."""
    bs, dt = candidates.shape
    for i in range(bs):
        a = 0
        while a + 1 < dt and int(candidates[i, a + 1]) == int(target_predict[i, a]):
            a += 1
        for j in range(a + 1):
            accept_index[i, j] = retrieve_index[i, j]
        for j in range(a):
            predicts[retrieve_index[i, j]] = candidates[i, j + 1]
        predicts[retrieve_index[i, a]] = target_predict[i, a]
        accept_token_num[i] = a
    return predicts, accept_index, accept_token_num


def _eagle_sample_inputs(bs, steps, seed=0):
    from types import SimpleNamespace

    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    dt, vocab = steps + 1, 64
    g = torch.Generator().manual_seed(seed)
    retrieve_next = torch.full((bs, dt), -1, dtype=torch.int64)
    retrieve_next[:, :-1] = torch.arange(1, dt)
    verify_input = SimpleNamespace(  # EagleVerifyInput's fields that eagle_sample reads (topk 1 chain)
        draft_token=torch.randint(0, vocab, (bs * dt,), generator=g), draft_token_num=dt, max_tree_depth=dt,
        retrieve_index=torch.arange(bs * dt).view(bs, dt), retrieve_next_token=retrieve_next,
        retrieve_next_sibling=torch.full((bs, dt), -1, dtype=torch.int64), tree_topk=1, draft_probs=None)
    sampling = SimpleNamespace(is_all_greedy=True, acc_additive_penalties=None, acc_scaling_penalties=None,
                               logit_bias=None, sampling_seed=None)
    batch = SimpleNamespace(device="cpu", forward_mode=ForwardMode.TARGET_VERIFY,  # ScheduleBatch stand-in
                            seq_lens=torch.full((bs,), 32), sampling_info=sampling)
    logits = SimpleNamespace(next_token_logits=torch.randn(bs * dt, vocab, generator=g))
    return verify_input, batch, logits


def _spec_server_args(root, topk=1, steps=3):
    import json

    from sglang.srt.server_args import ServerArgs

    from sglang_patches.offline.fixtures.specs import llama_target

    (root / "config.json").write_text(json.dumps(llama_target(hidden=64, layers=8, heads=4, kv_heads=2,
                                                              intermediate=96, vocab=128, max_pos=256)))
    return ServerArgs(model_path=str(root), speculative_algorithm="EAGLE", speculative_draft_model_path=str(root),
                      speculative_num_steps=steps, speculative_eagle_topk=topk,
                      speculative_num_draft_tokens=steps + 1 if topk == 1 else 8, device="cpu")


@pytest.fixture
def spec_context(tmp_path):
    """0.5.23: a real runtime context (get_spec() published) for the test's duration; 0.5.17: none
    (its eagle_sample reads no runtime context on the greedy path)."""
    from sglang.srt import runtime_context as rc

    if not hasattr(rc, "use_context"):
        yield None
        return
    with rc.use_context(rc.create_context(_spec_server_args(tmp_path), role="test")) as ctx:
        yield ctx


@needs_sglang("0.5.23", why="reads the topk through 0.5.23's get_spec() in a real context (create_context and "
                            "use_context do not exist in 0.5.17)")
def test_hook_refuses_a_tree_through_the_real_spec_context(sim_hooks, tmp_path):
    from sglang.srt import runtime_context as rc
    from sglang.srt.speculative import spec_utils

    from sglang_patches.server.hooks import REGISTRY

    sim = sim_hooks
    sim.validate()
    REGISTRY.apply(sim.specs())
    sim.enable([0.9, 0.5, 0.2])
    ai, pr, nc, cand, tp = _verify_state(4, 3)
    with rc.use_context(rc.create_context(_spec_server_args(tmp_path, topk=2), role="test")):
        assert rc.get_spec().speculative_eagle_topk == 2
        with pytest.raises(RuntimeError, match="server runs topk 2"):
            spec_utils.generate_simulated_accept_index(accept_index=ai, predict=pr, num_correct_drafts=nc,
                                                       candidates=cand, target_predict=tp, bs=4, spec_steps=3)


@pytest.mark.parametrize("mode", ["fixed", "real-draft-token"])
def test_through_eagle_sample_same_as_sglang_simulation(sim_hooks, spec_context, monkeypatch, mode):
    from sglang.srt.speculative import eagle_utils, spec_utils

    from sglang_patches.server.hooks import REGISTRY

    monkeypatch.setattr(eagle_utils, "verify_tree_greedy_func", _greedy_chain_verify)
    monkeypatch.setattr(spec_utils, "SIMULATE_ACC_TOKEN_MODE", mode)
    bs, steps = 6, 3
    stock = {}
    for n in (1, 3, 4):  # SGLang's own simulation: every request accepts n - 1 drafts
        monkeypatch.setattr(spec_utils, "SIMULATE_ACC_LEN", float(n))
        stock[n] = eagle_utils.eagle_sample(*_eagle_sample_inputs(bs, steps))
    monkeypatch.setattr(spec_utils, "SIMULATE_ACC_LEN", -1.0)
    real = eagle_utils.eagle_sample(*_eagle_sample_inputs(bs, steps))  # no simulation: the verify's own result
    sim = sim_hooks
    sim.validate()
    REGISTRY.apply(sim.specs())
    for n, want in stock.items():
        sim.enable([1.0] * (n - 1) + [0.0] * (steps - n + 1))
        got = eagle_utils.eagle_sample(*_eagle_sample_inputs(bs, steps))
        for w, h in zip(want, got):
            assert h.dtype == w.dtype and torch.equal(h, w), (n, mode, w, h)
    sim.enable([0.9, 0.6, 0.4])
    predict, accept_lens, accept_index = eagle_utils.eagle_sample(*_eagle_sample_inputs(bs, steps))
    drawn = ChainSampler([0.9, 0.6, 0.4], steps, "cpu", seed=0).draw(bs)
    assert torch.equal(accept_lens, drawn + 1) and len(set(accept_lens.tolist())) > 1
    assert torch.equal((accept_index >= 0).sum(dim=1).to(torch.int32), accept_lens)
    assert torch.equal(accept_index[:, 0], real[2][:, 0])  # each row still starts at the request's root
