"""Simulated acceptance (issue 16 item 2) on CPU, against the real SGLang 0.5.17 modules:
- the chain sampler draws the requested conditional rates (statistical test, fixed seed, tolerance
  from the sample size);
- the override writes exactly the tensors SGLang's own `generate_simulated_accept_index` writes
  (same batch-wide length: identical; per-request lengths: identical to SGLang's function applied
  row by row), in both token modes;
- the hook goes through the registry with the real 0.5.17 signature, switches SGLang's branch on
  and off exactly, and refuses a changed caller or a user-set SGLANG_SIMULATE_ACC_LEN;
- bad rates and settings are refused in one line before anything starts;
- the marker, the endpoint, OverlayConfig and the timing records say "simulated".
The CUDA test (no host synchronization) runs only where a GPU is present."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sglang_patches.errors import PatchTargetError, UserError
from sglang_patches.overlay_config import OverlayConfig
from sglang_patches.simulate import checks, rates as R
from sglang_patches.simulate.sampler import ChainSampler
from sglang_patches.timing.schema import make_record

REPO = Path(__file__).resolve().parents[1]


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

def _verify_state(bs, steps, seed=0):
    """Tensors as eagle_sample hands them to the simulation (topk 1 chain: dt = steps + 1)."""
    g = torch.Generator().manual_seed(seed)
    dt = steps + 1
    accept_index = torch.full((bs, dt), -1, dtype=torch.int32)
    accept_index[:, 0] = torch.arange(bs, dtype=torch.int32) * dt   # the root of each request's chain
    predict = torch.randint(0, 32000, (bs * dt,), generator=g, dtype=torch.int32)
    candidates = torch.randint(0, 32000, (bs, dt), generator=g, dtype=torch.int64)
    target_predict = torch.randint(0, 32000, (bs, dt), generator=g, dtype=torch.int64)
    num_correct_drafts = torch.full((bs,), 7, dtype=torch.int32)
    return accept_index, predict, num_correct_drafts, candidates, target_predict


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

    from sglang_patches.simulate import sglang_hooks as sim

    params = tuple(inspect.signature(_sglang_sim()).parameters)
    assert params == sim.SIM_FUNCTION_PARAMS


# ---------------------------------------------------------------- the hook in a process

@pytest.fixture
def sim_hooks():
    pytest.importorskip("sglang")
    from sglang.srt.speculative import spec_utils

    from sglang_patches.hooks import REGISTRY
    from sglang_patches.simulate import sglang_hooks as sim

    original_fn, original_switch = spec_utils.generate_simulated_accept_index, spec_utils.SIMULATE_ACC_LEN
    yield sim
    sim.disable()
    REGISTRY.undo([h for h in REGISTRY.applied if h.spec.feature == "simulate_acceptance"])
    assert spec_utils.generate_simulated_accept_index is original_fn
    assert spec_utils.SIMULATE_ACC_LEN == original_switch


def test_hook_switches_sglang_branch_and_draws_per_request(sim_hooks):
    from sglang.srt.speculative import spec_utils

    from sglang_patches.hooks import REGISTRY, is_patched

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

    from sglang_patches.hooks import REGISTRY
    from sglang_patches.simulate import sglang_hooks as sim

    REGISTRY.validate(sim.specs())  # the real 0.5.17 function has every declared parameter
    changed = [replace(s, params=s.params + ("draft_probs",)) for s in sim.specs()]
    with pytest.raises(PatchTargetError, match="changed in sglang"):
        REGISTRY.validate(changed)


def test_hook_target_resolves_in_0523_sources():
    import os

    from sglang_patches.simulate import sglang_hooks as sim
    from sglang_patches.static_targets import check_all

    site = os.environ.get("SGP_SGLANG_0523_SITE", str(REPO / ".venv-test" / "sglang-0523"))
    if not os.path.isdir(os.path.join(site, "sglang")):
        pytest.skip("sglang 0.5.23 sources not unpacked (tests/run_cpu.sh does it)")
    assert all(r.ok for r in check_all(site, sim.specs()))
    caller = Path(site, "sglang", "srt", "speculative", "eagle_utils.py").read_text()
    assert all(s in caller for s in sim.SIM_CALLER_MUST_READ)


def test_apply_overlay_with_rates_and_undo():
    pytest.importorskip("sglang")
    from sglang.srt.speculative import spec_utils

    from sglang_patches.patches import catalog
    from sglang_patches.patches.marker import overlay_info

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


# ---------------------------------------------------------------- refusals before anything starts

@pytest.mark.parametrize("text,word", [("", "empty"), ("0.8,,0.7", "empty entry"), ("nan", "finite"),
                                       ("0.8,1.2", "outside [0, 1]"), ("-0.1", "outside [0, 1]"),
                                       ("abc", "not a number"), ("inf", "finite")])
def test_bad_rates_refused(text, word):
    with pytest.raises(UserError, match=word.replace("[", r"\[").replace("]", r"\]")) as e:
        R.parse_rates(text)
    assert e.value.code == 2 and "\n" not in str(e.value)


def test_settings_refused():
    ok = dict(algorithm="EAGLE3", steps="3", topk="1", env={})
    assert checks.resolve("0.8,0.7", None, **ok)[0] == [0.8, 0.7, 0.0]
    assert checks.resolve(None, None, **ok) is None
    cases = [(dict(ok, steps="2"), "0.8,0.7,0.6", "more|only 2"),
             (dict(ok, topk="2"), "0.8", "chains"),
             (dict(ok, topk=None), "0.8", "--speculative-eagle-topk 1"),
             (dict(ok, steps=None), "0.8", "--speculative-num-steps"),
             (dict(ok, algorithm=None), "0.8", "EAGLE3"),
             (dict(ok, algorithm="NGRAM"), "0.8", "EAGLE3"),
             (dict(ok, env={"SGLANG_SIMULATE_ACC_LEN": "3.3"}), "0.8", "unset SGLANG_SIMULATE_ACC_LEN")]
    for kw, text, word in cases:
        with pytest.raises(UserError, match=word) as e:
            checks.resolve(text, None, **kw)
        assert "\n" not in str(e.value)
    with pytest.raises(UserError, match="both"):
        checks.resolve("0.8", "x.jsonl", **ok)


def _log(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _rec(accepted, kind="decode", steps=3, simulated=False, cycle=0):
    return make_record(cycle=cycle, t=1.7e9 + cycle, rank=0, kind=kind, bs=len(accepted), steps=steps, topk=1,
                       draft_tokens=steps + 1, accepted=accepted, draft_ms=1.0, verify_ms=2.0, extend_ms=0.5,
                       cycle_ms=4.0, host_gap_ms=0.1, simulated=simulated)


def test_rates_from_a_real_log(tmp_path):
    # 10 request-cycles: a >= 1 in 8, a >= 2 in 6 of those, a >= 3 in 3 of those
    acc = [0, 0, 1, 1, 2, 2, 2, 3, 3, 3]
    log = _log(tmp_path / "c.jsonl", [_rec(acc[:4], cycle=0), _rec([], kind="prefill", cycle=1),
                                      _rec(acc[4:], cycle=2)])
    rates, info = R.rates_from_log(str(log))
    assert rates == [0.8, 0.75, 0.5] and info["request_cycles"] == 10 and info["denominators"] == [10, 8, 6]
    got, _ = checks.resolve(None, str(log), algorithm="EAGLE3", steps="2", topk="1", env={})
    assert got == [0.8, 0.75]  # a log's rates are cut to the server's steps


def test_logs_without_per_position_data_refused(tmp_path):
    for name, recs, word in (("prefill.jsonl", [_rec([], kind="prefill")], "no decode cycle"),
                             ("empty_acc.jsonl", [_rec([])], "no decode cycle"),
                             ("sim.jsonl", [_rec([1, 2], simulated=True)], "simulated")):
        with pytest.raises(UserError, match=word) as e:
            R.rates_from_log(str(_log(tmp_path / name, recs)))
        assert "\n" not in str(e.value)
    with pytest.raises(UserError, match="no such file"):
        R.rates_from_log(str(tmp_path / "missing.jsonl"))


def test_launcher_refuses_in_one_line_before_starting(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "SGLANG_PATCHES_CACHE": str(tmp_path / "c"),
           "PYTHONPATH": str(REPO)}
    for extra, word in ((["--simulate-acceptance", "0.8,nan"], "finite"),
                        (["--simulate-acceptance", "0.9,0.8,0.7,0.6"], "drafts only 3"),
                        (["--simulate-acceptance", "0.8", "--speculative-eagle-topk", "2",
                          "--speculative-num-draft-tokens", "4"], "chains"),
                        (["--simulate-acceptance-from", str(_log(tmp_path / "p.jsonl", [_rec([], kind="prefill")]))],
                         "no decode cycle")):
        r = subprocess.run([sys.executable, "-m", "sglang_patches.launch", "--fixture", "tiny", *extra],
                           capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
        lines = [ln for ln in r.stderr.splitlines() if not ln.startswith("sglang_patches: fixture")]
        assert r.returncode == 2 and len(lines) == 1 and word in lines[0], (extra, r.stderr)
        assert "Traceback" not in r.stderr


def test_overlay_config_round_trip_and_refusals():
    cfg = OverlayConfig(simulate_acceptance=[0.8, 0.7])
    assert OverlayConfig.from_json(cfg.to_env()).simulate_acceptance == [0.8, 0.7]
    assert OverlayConfig.from_json(OverlayConfig().to_env()).simulate_acceptance is None
    for bad, word in (([0.8, float("nan")], "finite"), ([], "non-empty"), ([1.5], "outside")):
        with pytest.raises(UserError, match=word):
            OverlayConfig.from_json(json.dumps({"simulate_acceptance": bad}))
    with pytest.raises(UserError, match="marker"):
        OverlayConfig.from_json(json.dumps({"simulate_acceptance": [0.5], "patches": ["timing"]}))


# ---------------------------------------------------------------- impossible to mistake

def test_records_and_endpoint_say_simulated():
    from sglang_patches.timing.endpoint import collect_from_states
    from sglang_patches.timing.recorder import CycleRecorder

    assert _rec([1], simulated=True)["simulated"] is True and _rec([1])["simulated"] is False
    assert CycleRecorder(lambda: None, pool_size=1, simulated=True).simulated is True
    states = [{"sglang_patches": {"spec_timing": {"x": 1}, "simulated_acceptance": {"rates": [0.5]}}}]
    assert collect_from_states(states)["simulated_acceptance"] == {"rates": [0.5]}
    assert "simulated_acceptance" not in collect_from_states([{"sglang_patches": {"spec_timing": {}}}])


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


def test_report_says_simulated(tmp_path):
    log = _log(tmp_path / "sim.jsonl", [_rec([1, 2], simulated=True, cycle=c) for c in range(3)])
    real = _log(tmp_path / "real.jsonl", [_rec([1, 2], cycle=c) for c in range(3)])
    for path, want in ((log, True), (real, False)):
        r = subprocess.run([sys.executable, "-m", "sglang_patches", "report", str(path)], capture_output=True,
                           text=True, cwd=REPO, timeout=120)
        assert r.returncode == 0, r.stderr
        assert ("SIMULATED ACCEPTANCE" in r.stdout) is want


def test_engine_checks_simulation_against_its_kwargs():
    pytest.importorskip("sglang")
    from sglang_patches.engine import _checked_simulation

    ok = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1}
    cfg = _checked_simulation(OverlayConfig(simulate_acceptance=[0.8, 0.5]), ok)
    assert cfg.simulate_acceptance == [0.8, 0.5, 0.0]
    for bad, word in (({**ok, "speculative_eagle_topk": 4}, "chains"), ({**ok, "speculative_num_steps": 1}, "only 1"),
                      ({"model_path": "x"}, "EAGLE3")):
        with pytest.raises(UserError, match=word):
            _checked_simulation(OverlayConfig(simulate_acceptance=[0.8, 0.5]), bad)


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


@pytest.mark.parametrize("mode", ["fixed", "real-draft-token"])
def test_through_eagle_sample_same_as_sglang_simulation(sim_hooks, monkeypatch, mode):
    from sglang.srt.speculative import eagle_utils, spec_utils

    from sglang_patches.hooks import REGISTRY

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
