"""patches.hidden_state_checks: diagnose(), the load-time check and the runtime width checks.

A real EagleDraftWorker needs a GPU (and loaded models) to construct, so the checks run on minimal
stand-in objects shaped like the real ones: draft_runner.model.model.fc is a real torch.nn.Linear
(on the "meta" device: real shape, no memory), the target model has config.hidden_size,
capture_aux_hidden_states and model.layers_to_capture, and speculative_algorithm is the REAL
SpeculativeAlgorithm enum from SGLang. Runtime results use SGLang's real result dataclasses.
"""
from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch

from sglang_patches.overlay_config import ENV_VAR, OverlayConfig
from sglang_patches.patches import hidden_state_checks as hsc
from sglang_patches.patches.hidden_state_checks import HiddenStateMismatch, diagnose


def d(**kw):
    base = dict(algorithm="EAGLE3", has_fc=True, fc_in=12288, fc_out=4096, draft_hidden=4096,
                target_hidden=4096, capture_aux=True, captured_layers=[2, 16, 29])
    base.update(kw)
    return diagnose(**base)


# ---------------------------------------------------------------- diagnose

def test_eagle3_drafter_run_as_eagle():
    msg = d(algorithm="EAGLE", fc_in=21504, fc_out=7168, draft_hidden=7168, target_hidden=7168,
            capture_aux=False, captured_layers=[])
    assert "21504" in msg and "7168" in msg and "--speculative-algorithm EAGLE3" in msg


def test_consistent_eagle3_pair():
    assert d() is None


def test_wrong_number_of_captured_layers():
    msg = d(captured_layers=[2, 16])
    assert "12288" in msg and "2 x 4096 = 8192" in msg and "[2, 16]" in msg
    assert d(captured_layers=[1, 2, 3, 4]) is not None


def test_fc_out_mismatch():
    msg = d(fc_out=2048)
    assert "2048" in msg and "4096" in msg and "inconsistent" in msg


def test_no_fc():
    msg = d(has_fc=False, fc_in=None, fc_out=None)
    assert "EAGLE3" in msg and "no fc" in msg
    assert d(algorithm="EAGLE", has_fc=False, fc_in=None, fc_out=None, capture_aux=False,
             captured_layers=[]) is None  # a plain EAGLE head run as EAGLE is fine


def test_fc_but_no_aux_capture():
    msg = d(capture_aux=False, captured_layers=None)
    assert "captures no auxiliary hidden states" in msg


# ---------------------------------------------------------------- load-time check

@pytest.fixture(scope="module")
def algo():
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    return SpeculativeAlgorithm


def draft_worker(algo, algorithm="EAGLE", *, target_hidden=7168, fc=(21504, 7168), draft_hidden=7168,
                 capture=False, layers=(), text_config=False):
    """Stand-in for EagleDraftWorker (the real one needs a GPU to construct)."""
    inner = SimpleNamespace()
    if fc is not None:
        inner.fc = torch.nn.Linear(*fc, bias=False, device="meta")
    draft_model = SimpleNamespace(model=inner, config=SimpleNamespace(hidden_size=draft_hidden))
    tcfg = SimpleNamespace(hidden_size=target_hidden)
    if text_config:  # multimodal targets keep the LM's sizes in config.text_config
        tcfg = SimpleNamespace(text_config=tcfg, hidden_size=1)
    target_model = SimpleNamespace(config=tcfg, capture_aux_hidden_states=capture,
                                   model=SimpleNamespace(layers_to_capture=list(layers)))
    return SimpleNamespace(draft_runner=SimpleNamespace(model=draft_model),
                           target_worker=SimpleNamespace(model_runner=SimpleNamespace(model=target_model)),
                           speculative_algorithm=algo.from_string(algorithm))


@pytest.fixture
def no_config(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)


def test_load_time_check_raises_with_numbers(algo, no_config):
    w = draft_worker(algo)
    with pytest.raises(HiddenStateMismatch) as info:
        hsc.load_time_check(w)
    msg = str(info.value)
    assert "HIDDEN-STATE MISMATCH" in msg and "21504" in msg and "7168" in msg
    assert "--speculative-algorithm EAGLE3" in msg


def test_load_time_check_passes_with_eagle3(algo, no_config):
    w = draft_worker(algo, "EAGLE3", target_hidden=4096, fc=(12288, 4096), draft_hidden=4096,
                     capture=True, layers=(2, 16, 29))
    assert hsc.load_time_check(w) is None
    assert w.__dict__[hsc._FC_IN] == 12288
    w = draft_worker(algo, "EAGLE3", target_hidden=4096, fc=(12288, 4096), draft_hidden=4096,
                     capture=True, layers=(2, 16, 29), text_config=True)
    assert hsc.load_time_check(w) is None
    w = draft_worker(algo, "EAGLE3", target_hidden=4096, fc=(12288, 4096), draft_hidden=4096,
                     capture=True, layers=(2, 16))
    with pytest.raises(HiddenStateMismatch, match="2 x 4096 = 8192"):
        hsc.load_time_check(w)


def test_allow_mismatch_turns_it_into_a_warning(algo, monkeypatch, caplog):
    monkeypatch.setenv(ENV_VAR, OverlayConfig(allow_hidden_state_mismatch=True).to_env())
    w = draft_worker(algo)
    with caplog.at_level(logging.WARNING, logger="sglang_patches.checks"):
        hsc.load_time_check(w)
    assert any("HIDDEN-STATE MISMATCH" in r.getMessage() and "21504" in r.getMessage() for r in caplog.records)
    assert w.__dict__[hsc._FC_IN] is None
    hsc.prefill_runtime_check(w, None, torch.zeros(4, 7168))  # allowed: no runtime stop either


def test_patched_real_init_attention_backends_raises_before_sglang_runs(algo, no_config):
    from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker

    from sglang_patches.hooks import HookRegistry

    reg = HookRegistry()
    [load_spec] = [s for s in hsc.specs() if s.target.endswith("init_attention_backends")]
    original = EagleDraftWorker.__dict__["init_attention_backends"]
    reg.apply([load_spec])
    try:
        with pytest.raises(HiddenStateMismatch, match="21504"):
            EagleDraftWorker.init_attention_backends(draft_worker(algo))
    finally:
        reg.undo()
    assert EagleDraftWorker.__dict__["init_attention_backends"] is original


# ---------------------------------------------------------------- runtime checks

@pytest.fixture
def checked(algo, no_config):
    w = draft_worker(algo, "EAGLE3", target_hidden=4096, fc=(12288, 4096), draft_hidden=4096,
                     capture=True, layers=(2, 16, 29))
    hsc.load_time_check(w)
    return w


def decode_result(hidden):
    from sglang.srt.layers.logits_processor import LogitsProcessorOutput
    from sglang.srt.managers.utils import GenerationBatchResult

    return GenerationBatchResult(logits_output=LogitsProcessorOutput(next_token_logits=None, hidden_states=hidden))


def test_prefill_runtime_check(checked):
    with pytest.raises(HiddenStateMismatch) as info:
        hsc.prefill_runtime_check(checked, None, torch.empty(7, 4096, device="meta"))
    assert "12288" in str(info.value) and "4096" in str(info.value) and "prefill" in str(info.value)
    hsc.prefill_runtime_check(checked, None, torch.empty(7, 12288, device="meta"))
    hsc.prefill_runtime_check(checked, None, torch.zeros(0, 4096))  # no rows: nothing to check
    hsc.prefill_runtime_check(checked, None, None)


def test_decode_runtime_check(checked):
    with pytest.raises(HiddenStateMismatch, match="decode draft-extend.*12288.*width 4096"):
        hsc.decode_runtime_check(checked, None, decode_result(torch.zeros(3, 4096)))
    hsc.decode_runtime_check(checked, None, decode_result(torch.zeros(3, 12288)))
    hsc.decode_runtime_check(checked, None, decode_result(torch.zeros(0, 4096)))
    hsc.decode_runtime_check(checked, None, decode_result(None))


def test_runtime_check_is_off_before_load_time_check(algo):
    w = draft_worker(algo)  # load_time_check never ran: no expected width recorded
    hsc.prefill_runtime_check(w, None, torch.zeros(2, 5))
