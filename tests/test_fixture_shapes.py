"""The fixture catalogue's shapes (no build): each target's and drafter's config.json widths, depth and
capture layers against the published models they stand in for."""
from __future__ import annotations

from sglang_patches.offline.fixtures import CATALOGUE
from sglang_patches.offline.fixtures.specs import capture_layers, fixture_capture, get_spec


def test_catalogue_capture_layers_distinct():
    # SGLang's capture loop uses `i in layers_to_capture`: duplicate ids give < 3 aux states -> fc crash.
    for name, spec in CATALOGUE.items():
        ids = fixture_capture(spec.target, spec.draft)
        assert len(set(ids)) == 3 and max(ids) < spec.target["num_hidden_layers"], name
        d = spec.draft
        assert d["architectures"] in (["LlamaForCausalLMEagle3"], ["Eagle3DeepseekV2ForCausalLM"]), name
        assert d["num_hidden_layers"] == 1
        assert d["target_hidden_size"] == spec.target["hidden_size"] == d["hidden_size"]
        assert d["tie_word_embeddings"] is False and d["draft_vocab_size"] <= d["vocab_size"]
        assert spec.target["torch_dtype"] == d["torch_dtype"] == "bfloat16"


def test_llama3_8b_shape():
    t = get_spec("llama3-8b").target
    assert (t["hidden_size"], t["intermediate_size"], t["num_hidden_layers"], t["num_attention_heads"],
            t["num_key_value_heads"], t["vocab_size"]) == (4096, 14336, 32, 32, 8, 128256)
    assert t["rope_theta"] == 500000.0 and t["rope_scaling"]["rope_type"] == "llama3"
    assert t["max_position_embeddings"] == 8192 and t["rms_norm_eps"] == 1e-5
    assert get_spec("llama3-8b").draft["draft_vocab_size"] == 32000
    one = get_spec("llama3-1b").target
    assert one["tie_word_embeddings"] is True and one["hidden_size"] == 2048 and one["num_hidden_layers"] == 16


def test_kimi_k2_shape():
    spec = get_spec("kimi-k2-shape")
    t, d = spec.target, spec.draft
    assert (t["hidden_size"], t["intermediate_size"], t["num_hidden_layers"], t["num_attention_heads"],
            t["num_key_value_heads"], t["head_dim"], t["vocab_size"]) == (7168, 18432, 8, 56, 8, 128, 163840)
    assert t["num_attention_heads"] * t["head_dim"] == t["hidden_size"]
    assert t["architectures"] == ["LlamaForCausalLM"] and t["rope_scaling"]["rope_type"] == "llama3"
    assert capture_layers(t["num_hidden_layers"]) == [2, 4, 5]
    assert d["hidden_size"] == d["target_hidden_size"] == 7168 and d["draft_vocab_size"] == 32000
    assert d["head_dim"] == 128 and d["num_attention_heads"] == 56 and d["num_key_value_heads"] == 8
    assert spec.load_format == "dummy" and not spec.trained
    for word in ("stand-in", "not MLA/MoE", "8 kv heads", "7168"):
        assert word in spec.description, word


def test_qwen3_moe_shape():
    spec = get_spec("qwen3-moe-shape")
    t, d = spec.target, spec.draft
    assert t["architectures"] == ["Qwen3MoeForCausalLM"] and t["model_type"] == "qwen3_moe"
    assert (t["hidden_size"], t["num_hidden_layers"], t["num_experts"], t["num_experts_per_tok"],
            t["moe_intermediate_size"], t["num_attention_heads"], t["num_key_value_heads"], t["head_dim"],
            t["vocab_size"]) == (2048, 48, 128, 8, 768, 32, 4, 128, 151936)
    # Every layer sparse (SGLang 0.5.17 builds only Qwen3MoeSparseMoeBlock); q width 4096 != hidden.
    assert t["decoder_sparse_step"] == 1 and t["mlp_only_layers"] == [] and t["norm_topk_prob"] is True
    assert capture_layers(48) == [2, 24, 45]
    assert d["architectures"] == ["LlamaForCausalLMEagle3"] and d["model_type"] == "llama"
    assert d["hidden_size"] == d["target_hidden_size"] == 2048 and d["draft_vocab_size"] == 32000
    assert d["head_dim"] == 128 and d["num_attention_heads"] == 32 and d["num_key_value_heads"] == 4
    assert not any(k in d for k in ("num_experts", "moe_intermediate_size", "num_experts_per_tok"))
    assert spec.load_format == "dummy" and not spec.trained


def test_kimi_k2_mla_pair_widths():
    """Kimi-K2's published widths (moonshotai/Kimi-K2-Instruct config.json), depth and experts cut."""
    a, b = get_spec("kimi-k2-mla"), get_spec("kimi-k2-mla-mlahead")
    t = a.target
    assert a.target == b.target and t["architectures"] == ["DeepseekV3ForCausalLM"] and t["model_type"] == "deepseek_v3"
    assert (t["hidden_size"], t["num_attention_heads"], t["q_lora_rank"], t["kv_lora_rank"], t["qk_rope_head_dim"],
            t["qk_nope_head_dim"], t["v_head_dim"]) == (7168, 64, 1536, 512, 64, 128, 128)
    assert (t["first_k_dense_replace"], t["intermediate_size"], t["moe_intermediate_size"], t["n_shared_experts"],
            t["num_experts_per_tok"], t["n_group"], t["topk_group"]) == (1, 18432, 2048, 1, 8, 1, 1)
    assert (t["scoring_func"], t["topk_method"], t["routed_scaling_factor"], t["vocab_size"]) == (
        "sigmoid", "noaux_tc", 2.827, 163840)
    assert t["rope_theta"] == 50000.0 and t["rope_scaling"]["type"] == "yarn" and t["rope_scaling"]["factor"] == 32.0
    assert (t["num_hidden_layers"], t["n_routed_experts"]) == (8, 16)  # the cut: 61 layers, 384 experts published
    for spec in (a, b):
        assert spec.load_format == "dummy" and fixture_capture(spec.target, spec.draft) == [2, 4, 5]
        for word in ("8 layers", "16 routed experts", "smaller share of the cycle", "larger fraction of the experts"):
            assert word in spec.description, (spec.name, word)
    la, ml = a.draft, b.draft
    assert la["architectures"] == ["LlamaForCausalLMEagle3"] and la["hidden_size"] == la["target_hidden_size"] == 7168
    assert la["draft_vocab_size"] == 32000 and not any(k in la for k in ("kv_lora_rank", "n_routed_experts"))
    assert ml["architectures"] == ["Eagle3DeepseekV2ForCausalLM"] and ml["num_hidden_layers"] == 1
    assert all(ml[k] == t[k] for k in ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
                                       "v_head_dim", "num_attention_heads", "rope_scaling", "rope_theta"))
    assert (ml["target_hidden_size"], ml["draft_vocab_size"], ml["intermediate_size"]) == (7168, 32000, 18432)
    assert "eagle_config" not in ml and "eagle_aux_hidden_state_layer_ids" not in ml  # SGLang's default 3 layers
