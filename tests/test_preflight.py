"""`sglang-patches preflight`: every rule firing and not firing, on configs shaped like public models.

Checkpoints are written into tmp dirs: config.json plus header-only safetensors with a sparse zero
data region (no real weights, no torch).
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_patches.errors import UserError
from sglang_patches.offline.preflight import run_preflight
from sglang_patches.offline.preflight import cli as pf_cli
from sglang_patches.offline.preflight import model_info

from preflight_models import (KIMI_K2, KIMI_K25, LLAMA_8B, QWEN3_8B, REPO, codes, eagle3_cfg,  # noqa: F401
                              eagle3_tensors, kimi, llama, make_dir, only,
                              target_cfg, write_st)


def test_llama_eagle3_compatible(llama):
    r = run_preflight(*llama, "EAGLE3", steps=5, topk=4, draft_tokens=8)
    assert r.ok and r.findings == [] and r.exit_code == 0
    assert r.fc_shape == (4096, 12288)
    assert "compatible: 0 error(s)" in r.format_text()
    assert json.loads(r.to_json())["ok"] is True


def test_kimi_eagle3_compatible(kimi):
    r = run_preflight(*kimi, "eagle3")  # case-insensitive like SGLang's from_string
    assert r.ok and r.findings == []


def test_kimi_k25_nested_text_config(tmp_path, kimi):
    t = make_dir(tmp_path, "kimi-k25", KIMI_K25)
    info = model_info.read_model_info(t)
    assert (info.hidden_size, info.num_hidden_layers, info.vocab_size, info.text_config_key) == \
        (7168, 61, 163840, "text_config")
    assert run_preflight(t, kimi[1], "EAGLE3").ok
    assert only(run_preflight(t, kimi[1], "EAGLE"), "SP001")


def test_kimi_k25_quantization_in_text_config_is_seen(tmp_path, kimi):
    """Kimi-K2.5's checkpoint keeps its INT4 quantization_config inside text_config (SGLang's KimiK25Config
    lifts it from there): the quantised-target warning names it, as for a top-level one."""
    quant = {"quant_method": "compressed-tensors"}
    t = make_dir(tmp_path, "kimi-k25-int4", {**KIMI_K25, "text_config": {**KIMI_K25["text_config"],
                                                                          "quantization_config": quant}})
    f = only(run_preflight(t, kimi[1], "EAGLE3"), "SP011")
    assert "(compressed-tensors, its config.json text_config.quantization_config)" in f.message
    assert "SP011" not in codes(run_preflight(t, kimi[1], "EAGLE3", quantization="unquant"))
    assert codes(run_preflight(make_dir(tmp_path, "bf16", KIMI_K25), kimi[1], "EAGLE3")) == []


def test_qwen3_eagle3_compatible_and_nextn_alias(tmp_path):
    t = make_dir(tmp_path, "qwen3", QWEN3_8B)
    d = make_dir(tmp_path, "qwen3-eagle3", eagle3_cfg(4096, 151936), eagle3_tensors(4096, 12288, 32000, 151936))
    assert run_preflight(t, d, "EAGLE3", 3, 1, 4).ok
    r = run_preflight(t, d, "NEXTN")
    assert codes(r) == ["SP001"] and "--speculative-algorithm NEXTN feeds" in r.findings[0].message


def test_explicit_three_layer_aux_list(tmp_path):
    t = make_dir(tmp_path, "qwen3", QWEN3_8B)
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 151936, ids=[2, 18, 33]), eagle3_tensors(4096, 12288, 32000, 151936))
    assert run_preflight(t, d, "EAGLE3").ok


def test_two_layer_aux_list(tmp_path):
    t = make_dir(tmp_path, "qwen3", QWEN3_8B)
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 151936, ids=[1, 17], num_aux_hidden_states=2),
                 eagle3_tensors(4096, 8192, 32000, 151936))
    assert run_preflight(t, d, "EAGLE3").ok
    r = run_preflight(t, d, "EAGLE")
    assert "drafter fc expects 8192 = 2 x 4096 from layers [1, 17]" in only(r, "SP001").message


# ---------------------------------------------------------------- SP001 / SP002

def test_sp001_kimi_exact_numbers(kimi):
    r = run_preflight(*kimi, "EAGLE")
    assert not r.ok and r.exit_code == 1 and codes(r) == ["SP001"]
    f = r.findings[0]
    assert f.severity == "error" and f.fix == "--speculative-algorithm EAGLE3"
    assert f.message.startswith("drafter fc expects 21504 = 3 x 7168 from layers [1, 29, 57]; "
                                "--speculative-algorithm EAGLE feeds final-layer states of width 7168")
    for s in ("21504", "7168", "[1, 29, 57]"):
        assert s in f.message


def test_sp001_llama_default_layers(llama):
    f = only(run_preflight(*llama, "EAGLE"), "SP001")
    assert "12288 = 3 x 4096 from SGLang's default layers [2, 16, 29]" in f.message


def test_sp001_fires_on_config_evidence_without_weights(tmp_path):
    t = make_dir(tmp_path, "llama", LLAMA_8B)
    d = make_dir(tmp_path, "d", {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
                                 "num_hidden_layers": 1, "vocab_size": 128256, "draft_vocab_size": 128256})
    r = run_preflight(t, d, "EAGLE")
    assert "SP001" in codes(r) and "SP009" in codes(r)
    assert "draft_vocab_size" in only(r, "SP001").message


def eagle2_dir(root, name="eagle2", arch="LlamaForCausalLMEagle", hidden=4096):
    return make_dir(root, name, {"architectures": [arch], "hidden_size": hidden, "num_hidden_layers": 1,
                                 "vocab_size": 128256},
                    {"fc.weight": ("BF16", [hidden, 2 * hidden]), "fc.bias": ("BF16", [hidden])})


def test_sp002_eagle3_with_eagle2_drafter(tmp_path):
    t = make_dir(tmp_path, "llama", LLAMA_8B)
    d = eagle2_dir(tmp_path)
    r = run_preflight(t, d, "EAGLE3")
    assert codes(r) == ["SP002"] and "12288 = 3 x 4096" in r.findings[0].message
    assert run_preflight(t, d, "EAGLE").ok  # EAGLE-2 head with EAGLE: fine, no SP001
    # An EAGLE-2 head published with a plain Llama architecture: fc [H, 2H] + bias is not EAGLE-3.
    d2 = eagle2_dir(tmp_path, "eagle2-plain", arch="LlamaForCausalLM")
    assert run_preflight(t, d2, "EAGLE").ok and codes(run_preflight(t, d2, "EAGLE3")) == ["SP002"]


def test_sp002_not_fired_for_eagle3_drafter(llama):
    assert "SP002" not in codes(run_preflight(*llama, "EAGLE3"))


# ---------------------------------------------------------------- SP003 / SP004

def test_sp003_fc_width_vs_config_and_target(tmp_path):
    t = make_dir(tmp_path, "llama", LLAMA_8B)
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 128256), eagle3_tensors(4096, 8192, 32000, 128256))
    r = run_preflight(t, d, "EAGLE3")
    msgs = [f.message for f in r.findings if f.code == "SP003"]
    assert len(msgs) == 2
    assert "input 8192" in msgs[0] and "12288 = 3 (SGLang's default of 3) x 4096" in msgs[0]
    assert "fc input width 8192 != target hidden 4096 x 3 aux layers" in msgs[1] and "= 12288" in msgs[1]


def test_sp003_two_aux_states_without_layer_ids(tmp_path):
    t = make_dir(tmp_path, "qwen3", QWEN3_8B)
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 151936, num_aux_hidden_states=2),
                 eagle3_tensors(4096, 8192, 32000, 151936))
    f = only(run_preflight(t, d, "EAGLE3"), "SP003")
    assert "8192 != target hidden 4096 x 3 aux layers (SGLang's default layers [2, 18, 33]) = 12288" in f.message
    assert "eagle_aux_hidden_state_layer_ids with 2 layer ids" in f.fix


def test_sp003_defers_to_sp005_for_an_aux_id_past_the_last_layer(tmp_path):
    # Kimi-K2 has layers 0..60; a head listing [2, 30, 61] with fc built for those three ids: the target
    # captures two. One finding (SP005, naming 61, with its fix), not SP003 counting two of three listed.
    t = make_dir(tmp_path, "kimi", KIMI_K2)
    d = make_dir(tmp_path, "d", eagle3_cfg(7168, 163840, ids=[2, 30, 61]),
                 eagle3_tensors(7168, 21504, 32000, 163840, prefix="model."))
    r = run_preflight(t, d, "EAGLE3")
    assert codes(r) == ["SP005"], r.findings
    f = r.findings[0]
    assert "(each id as given for DeepseekV3ForCausalLM); it has layers 0..60, so layer 61 is never" in f.message
    assert f.fix.startswith("use a drafter trained for this target, or fix eagle_config.eagle_aux_hidden_state_layer_ids")


def test_sp003_beside_sp005_names_the_width_the_listed_ids_leave(tmp_path):
    # fc built for four layers while three are listed, one out of range. This case keeps a width finding
    # on purpose: with 61 fixed to a valid id, three listed layers still cannot feed fc's four, so SP005's
    # fix alone leaves the pair broken. But the finding is fc's width against the listed count and the fix
    # is the config's list (four ids); it used to count the two captured layers and say "use a drafter
    # trained for this target (... 2 aux layers)", which blamed a drafter whose config is what is wrong.
    t = make_dir(tmp_path, "kimi", KIMI_K2)
    d = make_dir(tmp_path, "d", eagle3_cfg(7168, 163840, ids=[2, 30, 61], num_aux_hidden_states=4),
                 eagle3_tensors(7168, 28672, 32000, 163840, prefix="model."))
    r = run_preflight(t, d, "EAGLE3")
    width = [f for f in r.findings if f.code == "SP003"]
    assert [f.message for f in width] == [
        f"drafter fc input width 28672 = 4 x 7168, but eagle_config.eagle_aux_hidden_state_layer_ids in "
        f"{d}/config.json lists 3 layer ids: even with every id in range, fc would not match"], r.findings
    assert width[0].fix.startswith("list the 4 layer ids the drafter was trained on in eagle_config.")
    assert "SP005" in codes(r) and not any("drafter trained for this target (" in f.fix for f in width)


@pytest.mark.parametrize("ids, fc_layers", [([2, 4, 8, 9], 3), ([2, 8], 3)])
def test_sp003_beside_sp005_never_counts_the_captured_layers(tmp_path, ids, fc_layers):
    """An out-of-range id: SP005 gives the fix (the range, the config key); SP003 speaks only of the
    checkpoint's fc against the width config.json makes SGLang build, never of 'N aux layers' captured."""
    t = make_dir(tmp_path, "t", target_cfg("LlamaForCausalLM", 512, 8, 8192))
    d = make_dir(tmp_path, "d", eagle3_cfg(512, 8192, ids=ids), eagle3_tensors(512, 512 * fc_layers, 32000, 8192))
    r = run_preflight(t, d, "EAGLE3")
    sp005 = only(r, "SP005")
    assert "eagle_aux_hidden_state_layer_ids" in sp005.fix, sp005
    width = [f for f in r.findings if f.code == "SP003"]
    assert [f.message.split(" but ")[0] for f in width] == [f"checkpoint fc.weight is [512, {512 * fc_layers}] "
                                                            f"(input {512 * fc_layers})"], r.findings
    assert not any("aux layers" in f.message or "trained for this target" in f.fix for f in width), r.findings


def test_sp003_missing_fc_weight(tmp_path):
    t = make_dir(tmp_path, "llama", LLAMA_8B)
    tensors = eagle3_tensors(4096, 12288, 32000, 128256)
    del tensors["fc.weight"]
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 128256), tensors)
    assert "no fc.weight" in only(run_preflight(t, d, "EAGLE3"), "SP003").message


def test_sp004_fc_output_width(tmp_path):
    t = make_dir(tmp_path, "llama", LLAMA_8B)
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 128256), eagle3_tensors(4096, 12288, 32000, 128256, fc_out=2048))
    r = run_preflight(t, d, "EAGLE3")
    assert codes(r) == ["SP004"] and "output width 2048 != drafter hidden_size 4096" in r.findings[0].message


def test_sp003_sp004_quiet_on_good_pairs(llama, kimi):
    for pair in (llama, kimi):
        assert not {"SP003", "SP004"} & set(codes(run_preflight(*pair, "EAGLE3")))


# ---------------------------------------------------------------- SP005

@pytest.mark.parametrize("target, ids, fires", [
    (LLAMA_8B, [2, 16, 30], False),
    (LLAMA_8B, [2, 16, 31], True),   # SGLang captures the input of layer 32, which does not exist
    (LLAMA_8B, [2, 16, 40], True),
    (LLAMA_8B, [-1, 16, 29], True),
    (KIMI_K2, [1, 29, 57], False),
    (KIMI_K2, [1, 29, 61], True),
    (KIMI_K2, [0, 30, 60], False),   # DeepSeek targets keep ids as-is unless ids[0] == 1
    (LLAMA_8B, [2, 2, 29], True),
])
def test_sp005_layer_range(tmp_path, target, ids, fires):
    H, V = target["hidden_size"], target["vocab_size"]
    t = make_dir(tmp_path, "t", target)
    d = make_dir(tmp_path, "d", eagle3_cfg(H, V, ids=ids), eagle3_tensors(H, 3 * H, 32000, V))
    r = run_preflight(t, d, "EAGLE3")
    assert ("SP005" in codes(r)) is fires
    if fires:
        assert str(ids) in only(r, "SP005").message


def test_sp005_empty_and_disabled_and_toplevel(tmp_path):
    t = make_dir(tmp_path, "t", LLAMA_8B)
    tensors = eagle3_tensors(4096, 12288, 32000, 128256)
    d1 = make_dir(tmp_path, "d1", eagle3_cfg(4096, 128256, ids=[]), tensors)
    assert "empty" in only(run_preflight(t, d1, "EAGLE3"), "SP005").message
    cfg = eagle3_cfg(4096, 128256, ids=[1, 15, 28])
    cfg["eagle_config"]["use_aux_hidden_state"] = False
    d2 = make_dir(tmp_path, "d2", cfg, tensors)
    assert "use_aux_hidden_state is false" in only(run_preflight(t, d2, "EAGLE3"), "SP005").message
    d3 = make_dir(tmp_path, "d3", eagle3_cfg(4096, 128256, eagle_aux_hidden_state_layer_ids=[1, 15, 28]), tensors)
    r = run_preflight(t, d3, "EAGLE3")
    assert r.ok and only(r, "SP005").severity == "warning"


# ---------------------------------------------------------------- SP006

def test_sp006_target_hidden_size_mismatch(tmp_path):
    t = make_dir(tmp_path, "llama", LLAMA_8B)
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 128256, target_hidden_size=5120),
                 eagle3_tensors(4096, 15360, 32000, 128256))
    f = only(run_preflight(t, d, "EAGLE3"), "SP006")
    assert "5120 (its target_hidden_size)" in f.message and "hidden_size 4096" in f.message


def test_sp006_drafter_narrower_than_target_ok_with_target_hidden_size(tmp_path):
    t = make_dir(tmp_path, "kimi", KIMI_K2)
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 163840, ids=[1, 29, 57], target_hidden_size=7168),
                 eagle3_tensors(4096, 21504, 32000, 163840))
    assert run_preflight(t, d, "EAGLE3").ok


def test_sp006_without_target_hidden_size(tmp_path):
    t = make_dir(tmp_path, "kimi", KIMI_K2)
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 163840, ids=[1, 29, 57]), eagle3_tensors(4096, 12288, 32000, 163840))
    f = only(run_preflight(t, d, "EAGLE3"), "SP006")
    assert "set target_hidden_size: 7168" in f.fix


def test_sp006_eagle2_drafter(tmp_path):
    t = make_dir(tmp_path, "kimi", KIMI_K2)
    f = only(run_preflight(t, eagle2_dir(tmp_path), "EAGLE"), "SP006")
    assert "drafter hidden_size 4096 != target hidden_size 7168" in f.message


# ---------------------------------------------------------------- SP007

def test_sp007_reduced_vocab_without_d2t(tmp_path):
    t = make_dir(tmp_path, "llama", LLAMA_8B)
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 128256), eagle3_tensors(4096, 12288, 32000, 128256, d2t=False))
    r = run_preflight(t, d, "EAGLE3")
    assert codes(r) == ["SP007"] and "32000 < target vocab_size 128256" in r.findings[0].message


def test_sp007_d2t_wrong_length(tmp_path):
    t = make_dir(tmp_path, "llama", LLAMA_8B)
    tensors = eagle3_tensors(4096, 12288, 32000, 128256)
    tensors["d2t"] = ("I64", [16000])
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 128256), tensors)
    assert "d2t has shape [16000], expected [32000]" in only(run_preflight(t, d, "EAGLE3"), "SP007").message


def test_sp007_vocab_size_mismatch_and_lm_head(tmp_path):
    t = make_dir(tmp_path, "llama", LLAMA_8B)
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 151936), eagle3_tensors(4096, 12288, 32000, 151936))
    r = run_preflight(t, d, "EAGLE3")
    assert r.ok and only(r, "SP007").severity == "warning"  # larger drafter vocab
    t2 = make_dir(tmp_path, "qwen", QWEN3_8B)
    d2 = make_dir(tmp_path, "d2", eagle3_cfg(4096, 128256), eagle3_tensors(4096, 12288, 32000, 128256))
    f = only(run_preflight(t2, d2, "EAGLE3"), "SP007")
    assert f.severity == "error" and "128256 != target vocab_size 151936" in f.message
    tensors = eagle3_tensors(4096, 12288, 32000, 128256)
    tensors["lm_head.weight"] = ("BF16", [64000, 4096])
    d3 = make_dir(tmp_path, "d3", eagle3_cfg(4096, 128256), tensors)
    assert "64000 rows" in only(run_preflight(t, d3, "EAGLE3"), "SP007").message


def test_sp007_full_vocab_needs_no_d2t(tmp_path):
    t = make_dir(tmp_path, "llama", LLAMA_8B)
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 128256, draft_vocab=None),
                 eagle3_tensors(4096, 12288, 128256, 128256, d2t=False))
    assert run_preflight(t, d, "EAGLE3").ok


# ---------------------------------------------------------------- SP008

@pytest.mark.parametrize("steps, topk, tokens, expect", [
    (5, 4, 8, None), (3, 4, 16, None), (3, 1, 4, None), (None, None, None, None), (1, 2, 2, None),
    (2, 2, 2, "error"), (3, 2, 3, "error"), (3, 2, 4, None),
    (2, 4, 21, None), (2, 4, 22, "error"), (1, 4, 6, "error"),
    (3, 1, 8, "warning"), (0, 1, 1, "error"), (3, 0, 4, "error"), (3, 4, 0, "error"),
    (None, 4, None, "error"), (None, None, 8, "error"), (3, None, None, "error"),
])
def test_sp008_spec_params(llama, steps, topk, tokens, expect):
    r = run_preflight(*llama, "EAGLE3", steps=steps, topk=topk, draft_tokens=tokens)
    got = [f.severity for f in r.findings if f.code == "SP008"]
    assert (got[0] if got else None) == expect
    assert r.ok is (expect != "error")


def test_sp008_messages(llama):
    f = only(run_preflight(*llama, "EAGLE3", steps=2, topk=4, draft_tokens=22), "SP008")
    assert "only 20 candidates" in f.message and "--speculative-num-draft-tokens 21" in f.fix
    f = only(run_preflight(*llama, "EAGLE3", steps=3, topk=1, draft_tokens=8), "SP008")
    assert f.fix == "--speculative-num-draft-tokens 4"
    f = only(run_preflight(*llama, "EAGLE3", steps=3, topk=2, draft_tokens=2), "SP008")
    assert "< steps + 1 = 4" in f.message and f.fix.startswith("--speculative-num-draft-tokens 4 or more")


# ---------------------------------------------------------------- SP009, sharding

def test_sp009_no_weight_files(tmp_path):
    # (a .bin is read for its shapes: tests/test_preflight_bin.py)
    t = make_dir(tmp_path, "llama", LLAMA_8B)
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 128256))
    r = run_preflight(t, d, "EAGLE3")
    assert r.ok and codes(r) == ["SP009"]


def test_sharded_drafter_with_index(tmp_path):
    t = make_dir(tmp_path, "kimi", KIMI_K2)
    d = make_dir(tmp_path, "d", eagle3_cfg(7168, 163840, ids=[1, 29, 57]))
    tensors = eagle3_tensors(7168, 21504, 32000, 163840, prefix="model.")
    names = list(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:2], "model-00002-of-00002.safetensors": names[2:]}
    for shard, keys in shards.items():
        write_st(d / shard, {k: tensors[k] for k in keys})
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {k: s for s, ks in shards.items() for k in ks}}))
    r = run_preflight(t, d, "EAGLE3")
    assert r.ok and r.fc_shape == (7168, 21504) and r.safetensors_files == 2
    assert only(run_preflight(t, d, "EAGLE"), "SP001")


# ---------------------------------------------------------------- malformed input (exit 2)



def test_the_verdict_leads_and_stays_last(llama, tmp_path):
    """Answers first: the verdict and each finding's fix lead (at most 4 lines of at most 120 characters),
    the detail follows, and the verdict is repeated as the last line (scripts read it there)."""
    from dataclasses import replace

    from sglang_patches.vocab.findings import ERROR, WARNING, Finding

    r = run_preflight(*llama, "EAGLE", steps=3, topk=1, draft_tokens=4)
    lines = r.format_text().splitlines()
    assert lines[0] == lines[-1] == "NOT compatible: 1 error(s), 0 warning(s)", lines
    assert lines[1] == "SP001 error, fix: --speculative-algorithm EAGLE3" and lines[2] == ""
    assert lines[3].startswith("target : ")
    ok = run_preflight(*llama, "EAGLE3").format_text().splitlines()
    assert ok[0] == ok[-1] == "compatible: 0 error(s), 0 warning(s)" and ok[1] == ""
    # five findings: errors first, three lines of them at most, the rest counted; long fixes cut at 120
    many = replace(r, findings=[Finding("SP010", WARNING, "w", "x" * 300)]
                   + [Finding(f"SP00{i}", ERROR, "m", f"fix {i} " + "y" * 200) for i in range(1, 5)])
    head = many.format_text().splitlines()[:5]
    assert head[0] == "NOT compatible: 4 error(s), 1 warning(s)"
    assert head[1].startswith("SP001 error, fix: fix 1 ") and head[2].startswith("SP002 error, fix: fix 2 ")
    assert head[3] == "and 3 more finding(s): see below" and head[4] == ""
    assert all(len(ln) <= 120 for ln in head)
