"""SP012: the two model paths in the wrong places. A target that is a draft head is an error (the paths
look swapped); a drafter that is a whole model as deep as the target is a warning; a DeepSeek-style
checkpoint with MTP layers serving as its own drafter, and a one-layer EAGLE head, are neither."""
from __future__ import annotations

import subprocess
import sys

from sglang_patches.offline.preflight import run_preflight

from preflight_models import KIMI_K2, LLAMA_8B, REPO, codes, llama, make_dir, only, target_cfg  # noqa: F401


def test_swapped_paths_are_an_error_named_first(llama):
    t, d = llama
    result = run_preflight(d, t, None)
    assert not result.ok and codes(result)[0] == "SP012"
    f = only(result, "SP012")
    assert f.severity == "error"
    assert "is a speculative draft head (architecture LlamaForCausalLMEagle3, 1 layer(s))" in f.message
    assert f.fix.endswith("(the two look swapped)")
    assert codes(run_preflight(t, d, None)) == []  # the right order: nothing


def test_the_target_as_its_own_drafter_is_a_warning(llama):
    t, _ = llama
    f = only(run_preflight(t, t, None), "SP012")
    assert f.severity == "warning" and "is a whole model (LlamaForCausalLM, 32 layers, as many as the target)" in f.message


def test_mtp_checkpoints_and_one_layer_heads_are_left_alone(tmp_path, llama):
    t, _ = llama
    kimi = make_dir(tmp_path, "kimi", {**KIMI_K2, "num_nextn_predict_layers": 1})
    assert "SP012" not in codes(run_preflight(kimi, kimi, "NEXTN"))
    eagle1 = make_dir(tmp_path, "eagle1", target_cfg("LlamaForCausalLM", 4096, 1, 128256))
    assert "SP012" not in codes(run_preflight(t, eagle1, "EAGLE"))
    half = make_dir(tmp_path, "half", target_cfg("LlamaForCausalLM", 4096, 16, 128256))
    assert "SP012" not in codes(run_preflight(t, half, "EAGLE"))  # a smaller model: not for this rule


def test_the_cli_exits_1_on_swapped_paths(llama):
    t, d = llama
    proc = subprocess.run([sys.executable, "-m", "sglang_patches", "preflight", "--model-path", str(d),
                           "--speculative-draft-model-path", str(t)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1 and "SP012" in proc.stdout and "Traceback" not in proc.stderr
