"""offline/first_use.py and the launcher's note: a target whose INT4 experts run SGLang's WNA16 MoE kernel is
named before the start when SGLang's JIT cache lacks that kernel (its first forward then compiles it: 233 s
on an H100, the server silent). The detection is held against SGLang's real compressed-tensors config (both
versions): what it calls INT4 MoE is what SGLang serves with CompressedTensorsWNA16MoE. The cache layouts are
each version's own (the 0.5.17 name is a module the GPU run compiled)."""
from __future__ import annotations

import copy
import json

import pytest

from sglang_patches import compat
from sglang_patches.offline import first_use
from sglang_patches.offline.fixtures.specs import get_spec

INT4 = get_spec("kimi-k2-mla-int4").target
BF16 = get_spec("kimi-k2-mla").target
FP8_CT = dict(BF16, quantization_config={  # compressed-tensors FP8 experts: SGLang's FP8 MoE method, no WNA16
    "quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
    "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel",
                                                               "symmetric": True, "dynamic": False},
                            "input_activations": {"num_bits": 8, "type": "float", "strategy": "token",
                                                  "symmetric": True, "dynamic": True}}}})
W4A8 = copy.deepcopy(INT4)  # the same weights with 8-bit activations: not the WNA16 method
W4A8["quantization_config"]["config_groups"]["group_0"]["input_activations"] = {
    "num_bits": 8, "type": "int", "strategy": "token", "symmetric": True, "dynamic": True}
DENSE_INT4 = {k: v for k, v in INT4.items() if k != "n_routed_experts"}  # no experts: no MoE kernel
DENSE_INT4["architectures"] = ["LlamaForCausalLM"]


@pytest.mark.parametrize("config,expected", [(INT4, True), (BF16, False), (FP8_CT, False), (DENSE_INT4, False),
                                             (W4A8, False),
                                             ({"architectures": ["KimiK25ForConditionalGeneration"],
                                               "text_config": INT4}, True)])
def test_int4_moe_is_what_sglang_serves_with_its_wna16_moe_method(config, expected):
    assert first_use.int4_moe(config) is expected
    text = config.get("text_config", config)
    if "quantization_config" not in text or "n_routed_experts" not in text:
        return
    torch = pytest.importorskip("torch")
    ct = pytest.importorskip("sglang.srt.layers.quantization.compressed_tensors.compressed_tensors")
    scheme = ct.CompressedTensorsConfig.from_config(copy.deepcopy(text["quantization_config"])).get_moe_scheme(
        torch.nn.Linear(2, 2), "model.layers.1.mlp.experts")
    assert (type(scheme).__name__ == "CompressedTensorsWNA16MoE") is expected


def _cached(tmp_path, version_file, relative):
    (tmp_path / relative).parent.mkdir(parents=True)
    (tmp_path / relative).write_bytes(b"")
    return first_use.compiled(first_use.WNA16_MOE_MODULE, version_file.JIT_CACHE, {version_file.JIT_CACHE[0]: str(tmp_path)})


def test_the_cache_layout_of_each_version(tmp_path):
    from sglang_patches.compat import v0_5_17, v0_5_23

    name = "sgl_kernel_jit_moe_wna16_marlin_bf16_t_false_false_c52b0190dd8e317a"
    built_0517 = f"{name}__arch_9.0a__tvmffi_0.1.11/{name}.so"
    assert _cached(tmp_path / "a", v0_5_17, built_0517)
    assert not _cached(tmp_path / "b", v0_5_17, f"{name}__arch_9.0a__tvmffi_0.1.11/lock")  # a compile cut short
    assert not _cached(tmp_path / "c", v0_5_17, "sgl_kernel_jit_fused_rope_false_64__arch_9.0a__tvmffi_0.1.11/x.so")
    assert _cached(tmp_path / "d", v0_5_23, f"sm90/{name}/build-1a2b/deps-3c4d/{name}.so")
    assert not _cached(tmp_path / "e", v0_5_23, f"sm90/{name}/build-1a2b/.staging-5e6f/{name}.so")  # in progress
    assert not _cached(tmp_path / "f", v0_5_23, built_0517)  # 0.5.23 keeps a target folder above the module
    assert not first_use.compiled("moe_wna16_marlin", v0_5_17.JIT_CACHE, {"TVM_FFI_CACHE_DIR": str(tmp_path / "none")})


def test_the_note_names_the_wait_and_the_cache_and_goes_once_compiled(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(INT4))
    cache = compat.current().JIT_CACHE
    env = {cache[0]: str(tmp_path / "jit")}
    line = first_use.note(str(model), cache, env)
    assert line.startswith("the target's INT4 experts run SGLang's WNA16 MoE kernel, which SGLang compiles at the "
                           "first forward (233 s on an H100") and f"{tmp_path / 'jit'} ({cache[0]})" in line
    built = tmp_path / "jit" / cache[2].format(module="moe_wna16_marlin").replace("*", "x")
    built.parent.mkdir(parents=True)
    built.write_bytes(b"")
    assert first_use.note(str(model), cache, env) is None
    (model / "config.json").write_text(json.dumps(BF16))
    assert first_use.note(str(model), cache, {}) is None
    (model / "config.json").write_text("{not json")
    assert first_use.note(str(model), cache, {}) is None and first_use.note(None, cache) is None


def test_the_launcher_says_it_before_the_start(tmp_path, monkeypatch, capsys):
    from sglang_patches import launch

    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(INT4))
    monkeypatch.setenv(compat.current().JIT_CACHE[0], str(tmp_path / "jit"))
    # MOCKED: the GPU check and the start itself (no GPU here); the flags are a plain server's (no preflight)
    monkeypatch.setattr(launch, "check_gpu", lambda argv: None)
    seen = []
    monkeypatch.setattr(launch, "serve", lambda argv, exit_on_collapse=False, features=(), said=(): seen.extend(said) or 0)
    assert launch.main(["--model-path", str(model)]) == 0
    assert [s for s in seen if s.startswith("note: the target's INT4 experts")], seen
    seen.clear()
    assert launch.main(["--model-path", str(model), "--moe-runner-backend", "triton"]) == 0  # no Marlin kernel
    assert not [s for s in seen if "INT4" in s]
    (model / "config.json").write_text(json.dumps(BF16))
    assert launch.main(["--model-path", str(model)]) == 0 and not [s for s in seen if "INT4" in s]
