"""patches.hidden_state_checks and the shared rule set (vocab/hidden_state.py): the rules, the load-time check and the runtime width checks.

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

from sglang_patches.vocab.overlay_config import ENV_VAR, OverlayConfig
from sglang_patches.server.patches import hidden_state_checks as hsc
from sglang_patches.server.patches.hidden_state_checks import HiddenStateMismatch
from sglang_patches.vocab.hidden_state import HiddenStateNumbers, hidden_state_findings


def numbers(**kw):
    base = dict(algorithm="EAGLE3", drafter="LlamaForCausalLMEagle3", drafter_eagle3=True,
                eagle3_evidence=("architecture LlamaForCausalLMEagle3",), fc_in=12288, fc_out=4096,
                draft_hidden=4096, target_hidden=4096, hidden_in=4096, drafter_aux=3, aux_capture=True,
                captured=3, layers_desc="SGLang's default layers [2, 16, 29]", layer_ids_given=False,
                drafter_config="d/config.json")
    base.update(kw)
    return HiddenStateNumbers(**base)


def found(**kw):
    return [(f.code, f.message, f.fix) for f in hidden_state_findings(numbers(**kw))]


# ---------------------------------------------------------------- the shared rule set

def test_consistent_eagle3_pair():
    assert found() == []
    assert found(algorithm="EAGLE", drafter="LlamaForCausalLMEagle", drafter_eagle3=False, eagle3_evidence=(),
                 fc_in=8192, aux_capture=False, captured=0) == []  # an EAGLE-2 head (fc 2H -> H) run as EAGLE


def test_eagle3_drafter_run_as_eagle():
    [(code, msg, fix)] = found(algorithm="EAGLE", fc_in=21504, fc_out=7168, draft_hidden=7168, target_hidden=7168,
                               hidden_in=7168, aux_capture=False, captured=0, layers_desc="layers [1, 29, 57]")
    assert code == "SP001" and fix == "--speculative-algorithm EAGLE3"
    assert msg.startswith("drafter fc expects 21504 = 3 x 7168 from layers [1, 29, 57]; "
                          "--speculative-algorithm EAGLE feeds final-layer states of width 7168")


def test_wrong_number_of_captured_layers():
    [(code, msg, fix)] = found(captured=2)
    assert code == "SP003" and "fc input width 12288 != target hidden 4096 x 2 aux layers" in msg
    assert fix == "use a drafter trained for this target (hidden_size 4096, 2 aux layers)"
    [(_, _, fix)] = found(fc_in=8192, drafter_aux=2)  # a 2-layer drafter without its layer ids listed
    assert "eagle_aux_hidden_state_layer_ids with 2 layer ids" in fix and "d/config.json" in fix


def test_observed_width_at_runtime():
    [(code, msg, _)] = found(observed_width=4096, observed_at="decode draft-extend")
    assert code == "SP003" and msg == ("drafter fc input width 12288 != width 4096 of the hidden states "
                                       "entering decode draft-extend")
    assert found(observed_width=12288, observed_at="decode draft-extend") == []


def test_fc_out_mismatch():
    [(code, msg, _)] = found(fc_out=2048)
    assert code == "SP004" and "output width 2048 != drafter hidden_size 4096" in msg


def test_plain_drafter_with_eagle3():
    [(code, msg, fix)] = found(drafter="LlamaForCausalLM", drafter_eagle3=False, eagle3_evidence=(), fc_in=None,
                               fc_out=None)
    assert code == "SP002" and "12288 = 3 x 4096" in msg and fix.startswith("--speculative-algorithm EAGLE ")


def test_fc_but_no_aux_capture():
    [(code, msg, _)] = found(aux_capture=False, captured=0)
    assert code == "SP005" and "captures no aux hidden states" in msg


def test_preflight_and_load_time_give_the_same_findings(tmp_path, algo, no_config):
    """One pair, checked by preflight from its files and by the load-time check from (stand-ins of)
    the loaded modules: the same codes, fixes and, for the width rules, the same messages."""
    from preflight_models import LLAMA_8B, eagle3_cfg, eagle3_tensors, make_dir

    from sglang_patches.offline.preflight import run_preflight

    t = make_dir(tmp_path, "t", LLAMA_8B)
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 128256, ids=[1, 15]),
                 eagle3_tensors(4096, 12288, 32000, 128256, fc_out=2048))
    pre = [f for f in run_preflight(t, d, "EAGLE3").findings if f.code in ("SP003", "SP004")]
    w = draft_worker(algo, "EAGLE3", target_hidden=4096, fc=(12288, 2048), draft_hidden=4096,
                     capture=True, layers=(2, 16), ids=[1, 15])
    live = hsc.hidden_state_findings(hsc.load_time_numbers(w))
    strip = lambda fs: [(f.code, f.message, f.fix.replace(f"{d}/config.json", "the drafter's config.json"))
                        for f in fs if not f.message.startswith("checkpoint fc.weight")]  # preflight-only
    assert [f.code for f in live] == ["SP003", "SP004"]
    assert strip(pre) == strip(live)


# ---------------------------------------------------------------- load-time check

@pytest.fixture(scope="module")
def algo():
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    return SpeculativeAlgorithm


def draft_worker(algo, algorithm="EAGLE", *, target_hidden=7168, fc=(21504, 7168), draft_hidden=7168,
                 capture=False, layers=(), text_config=False, drafter_class="LlamaForCausalLMEagle3", ids=None,
                 target_layers=32):
    """Stand-in for EagleDraftWorker (the real one needs a GPU and loaded models to construct); the
    drafter object carries the name of SGLang's drafter class, which is what the check reads."""
    inner = SimpleNamespace()
    if fc is not None:
        inner.fc = torch.nn.Linear(*fc, bias=False, device="meta")
    dcfg = SimpleNamespace(hidden_size=draft_hidden)
    if ids is not None:
        dcfg.eagle_config = {"eagle_aux_hidden_state_layer_ids": list(ids)}
    draft_model = type(drafter_class, (SimpleNamespace,), {})(model=inner, config=dcfg)
    tcfg = SimpleNamespace(hidden_size=target_hidden, num_hidden_layers=target_layers)
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
    assert w.__dict__[hsc._NUMBERS].fc_in == 12288
    w = draft_worker(algo, "EAGLE3", target_hidden=4096, fc=(12288, 4096), draft_hidden=4096,
                     capture=True, layers=(2, 16, 29), text_config=True)
    assert hsc.load_time_check(w) is None
    w = draft_worker(algo, "EAGLE3", target_hidden=4096, fc=(12288, 4096), draft_hidden=4096,
                     capture=True, layers=(2, 16))
    with pytest.raises(HiddenStateMismatch, match="SP003 .*4096 x 2 aux layers .* = 8192"):
        hsc.load_time_check(w)


def test_allow_mismatch_turns_it_into_a_warning(algo, monkeypatch, caplog):
    monkeypatch.setenv(ENV_VAR, OverlayConfig(allow_hidden_state_mismatch=True).to_env())
    w = draft_worker(algo)
    with caplog.at_level(logging.WARNING, logger="sglang_patches.checks"):
        hsc.load_time_check(w)
    assert any("HIDDEN-STATE MISMATCH" in r.getMessage() and "21504" in r.getMessage() for r in caplog.records)
    assert w.__dict__[hsc._NUMBERS] is None
    hsc.prefill_runtime_check(w, None, torch.zeros(4, 7168))  # allowed: no runtime stop either


def test_patched_real_init_attention_backends_raises_before_sglang_runs(algo, no_config):
    from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker

    from sglang_patches.server.hooks import HookRegistry

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
    with pytest.raises(HiddenStateMismatch, match="SP003 drafter fc input width 12288 != width 4096 .* decode draft-extend"):
        hsc.decode_runtime_check(checked, None, decode_result(torch.zeros(3, 4096)))
    hsc.decode_runtime_check(checked, None, decode_result(torch.zeros(3, 12288)))
    hsc.decode_runtime_check(checked, None, decode_result(torch.zeros(0, 4096)))
    hsc.decode_runtime_check(checked, None, decode_result(None))


def test_runtime_check_is_off_before_load_time_check(algo):
    w = draft_worker(algo)  # load_time_check never ran: no expected width recorded
    hsc.prefill_runtime_check(w, None, torch.zeros(2, 5))
