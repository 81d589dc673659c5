"""The INT4 Kimi-K2 family fixture (`kimi-k2-mla-int4`) against SGLang's real compressed-tensors config
(both supported versions): the routed experts resolve to symmetric INT4 in groups of 32 with 16-bit
activations and SGLang's WNA16 MoE method; attention, the shared expert, the dense MLP layer and lm_head
stay unquantized; the fixture writes that config into the target's config.json, and `fixtures list` says so.

A `torch.nn.Linear` stands in for the layer objects: SGLang matches the config's `Linear` target by the
module's class name, and its real FusedMoE / parallel linear layers need a GPU process group."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sglang_patches.offline.fixtures.specs import get_spec

torch = pytest.importorskip("torch")
ct = pytest.importorskip("sglang.srt.layers.quantization.compressed_tensors.compressed_tensors")

QUANT = get_spec("kimi-k2-mla-int4").target["quantization_config"]


@pytest.fixture(scope="module")
def config():
    return ct.CompressedTensorsConfig.from_config(QUANT)


@pytest.mark.parametrize("name", ["model.layers.1.mlp.experts.0.gate_proj", "model.layers.7.mlp.experts.15.down_proj"])
def test_routed_experts_are_int4_w4a16_in_groups_of_32(config, name):
    scheme = config.get_scheme_dict(torch.nn.Linear(2, 2), name)
    w = scheme["weights"]
    assert (w.num_bits, w.group_size, w.symmetric, str(w.strategy).split(".")[-1].lower()) == (4, 32, True, "group")
    assert scheme["input_activations"] is None  # A16: activations stay bf16


@pytest.mark.parametrize("name", ["model.layers.1.self_attn.q_a_proj", "model.layers.1.self_attn.kv_b_proj",
                                  "model.layers.1.mlp.shared_experts.gate_up_proj",
                                  "model.layers.0.mlp.gate_up_proj", "model.layers.0.mlp.down_proj", "lm_head"])
def test_attention_shared_expert_dense_mlp_and_lm_head_stay_unquantized(config, name):
    assert config.get_scheme_dict(torch.nn.Linear(2, 2), name) is None


def test_sglang_serves_the_experts_with_its_wna16_moe_method(config):
    layer = torch.nn.Linear(2, 2)
    assert type(config.get_moe_scheme(layer, "model.layers.1.mlp.experts")).__name__ == "CompressedTensorsWNA16MoE"
    assert config.get_moe_scheme(layer, "model.layers.1.mlp.shared_experts") is None


def test_the_fixture_differs_from_kimi_k2_mla_by_the_quantization_config_only():
    int4, bf16 = get_spec("kimi-k2-mla-int4"), get_spec("kimi-k2-mla")
    assert {k: v for k, v in int4.target.items() if k != "quantization_config"} == bf16.target
    assert "quantization_config" not in bf16.target and int4.draft == bf16.draft
    out = subprocess.run([sys.executable, "-m", "sglang_patches", "fixtures", "list"], capture_output=True, text=True,
                         timeout=120)
    lines = out.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("kimi-k2-mla-int4 "))
    assert "target:" in lines[at + 1] and "experts W4A16 g32" in lines[at + 1]
    assert not any("W4A16" in ln for ln in lines[:at])  # the bf16 fixtures say nothing of it


def test_the_built_fixture_carries_the_config_sglang_reads(tmp_path, monkeypatch):
    monkeypatch.setenv("SGLANG_PATCHES_CACHE", str(tmp_path))
    from sglang_patches.offline.fixtures import ensure_fixture

    fx = ensure_fixture("kimi-k2-mla-int4")
    written = json.loads((fx.target / "config.json").read_text())
    assert written["quantization_config"] == QUANT and written["architectures"] == ["DeepseekV3ForCausalLM"]


def test_the_384_expert_target_is_kimi_k25_cut_in_depth_only_and_fits_one_80gb_gpu():
    """kimi-k25-384-int4: Kimi-K2's 384 experts top-8 with the same INT4 scheme, 7 layers (capture [2, 3, 4]);
    its weights, counted from its config (INT4 experts + bf16 group scales, bf16 rest) and the drafter's, come
    to about 66 GB: under the ~75 GB an 80 GB GPU gives SGLang at --mem-fraction-static 0.88."""
    from sglang_patches.offline.fixtures.specs import fixture_capture

    spec = get_spec("kimi-k25-384-int4")
    t, d = spec.target, spec.draft
    assert (t["n_routed_experts"], t["num_experts_per_tok"], t["num_hidden_layers"]) == (384, 8, 7)
    assert t["quantization_config"] == QUANT and fixture_capture(t, d) == [2, 3, 4]
    base = get_spec("kimi-k2-mla").target
    same = {k for k in base if base[k] == t.get(k)}
    assert set(base) - same == {"n_routed_experts", "num_hidden_layers"}  # only the cuts differ
    h, m, e = t["hidden_size"], t["moe_intermediate_size"], t["n_routed_experts"]
    moe_layers = t["num_hidden_layers"] - t["first_k_dense_replace"]
    expert_params = moe_layers * e * 3 * h * m
    target_gb = (expert_params * (0.5 + 2 / 32)                        # INT4 weights, one bf16 scale per 32
                 + 2 * (moe_layers * 3 * h * m                          # shared expert
                        + t["first_k_dense_replace"] * 3 * h * t["intermediate_size"]
                        + 2 * t["vocab_size"] * h)) / 1e9               # embedding and lm_head
    draft_gb = 2 * (3 * h * d["intermediate_size"] + 3 * h * h + 2 * h * h + d["draft_vocab_size"] * h) / 1e9
    assert 60 < target_gb + draft_gb < 70, (target_gb, draft_gb)
