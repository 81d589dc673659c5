"""SP012: the two model paths in the wrong places. A target that is a draft head is an error (the paths
look swapped); under EAGLE / EAGLE3 a drafter that is a whole model at least as deep as the target is a
warning. A checkpoint that is its own drafter (MTP: the same path, or MTP keys at the top level or in a
nested text config), a one-layer EAGLE head, a vision-language model whose name starts with Eagle, and a
STANDALONE drafter are none of these."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from sglang_patches.offline.preflight import run_preflight

from preflight_models import KIMI_K2, REPO, codes, llama, make_dir, only, target_cfg  # noqa: F401


def test_swapped_paths_are_an_error_named_first(llama):
    t, d = llama
    result = run_preflight(d, t, None)
    assert not result.ok and codes(result)[0] == "SP012"
    f = only(result, "SP012")
    assert f.severity == "error"
    assert "is a speculative draft head (architecture LlamaForCausalLMEagle3, 1 layer(s))" in f.message
    assert f.fix.startswith("the two look swapped: the full model goes in --model-path")  # leads the verdict line
    assert codes(result) == ["SP012"]  # alone: every other rule would compare the wrong files
    assert codes(run_preflight(t, d, None)) == []  # the right order: nothing


def test_a_copy_of_the_target_as_drafter_is_a_warning(tmp_path, llama):
    t, _ = llama
    copy = shutil.copytree(t, tmp_path / "copy")
    f = only(run_preflight(t, copy, "EAGLE"), "SP012")
    assert f.severity == "warning" and "is a whole model (LlamaForCausalLM, 32 layers, as many as the target)" in f.message
    head = make_dir(tmp_path, "eagle1", target_cfg("LlamaForCausalLM", 4096, 1, 128256))  # an EAGLE-1 head...
    f = only(run_preflight(head, copy, "EAGLE"), "SP012")  # ...passed as the target: the drafter is deeper
    assert "more than the target's 1" in f.message and f.fix.endswith("(are --model-path and the drafter swapped?)")


@pytest.mark.parametrize("extra", [{"num_nextn_predict_layers": 1}, {"text_config": {"mtp_num_hidden_layers": 1}},
                                   {"language_config": {"num_nextn_predict_layers": 1}}])
def test_mtp_checkpoints_are_left_alone(tmp_path, llama, extra):
    t, _ = llama
    mtp = make_dir(tmp_path, "mtp", target_cfg("LlamaForCausalLM", 4096, 32, 128256, **extra))
    assert "SP012" not in codes(run_preflight(t, mtp, "EAGLE"))


def test_self_drafting_heads_and_other_algorithms_are_left_alone(tmp_path, llama):
    t, _ = llama
    kimi = make_dir(tmp_path, "kimi", KIMI_K2)  # its config without MTP keys, as SGLang sets some itself
    assert "SP012" not in codes(run_preflight(kimi, kimi, "EAGLE"))  # the same checkpoint: its own drafter
    assert "SP012" not in codes(run_preflight(kimi, kimi, "NEXTN"))
    assert "SP012" not in codes(run_preflight(t, shutil.copytree(t, tmp_path / "copy"), "STANDALONE"))
    eagle1 = make_dir(tmp_path, "eagle1", target_cfg("LlamaForCausalLM", 4096, 1, 128256))
    assert "SP012" not in codes(run_preflight(t, eagle1, "EAGLE"))
    half = make_dir(tmp_path, "half", target_cfg("LlamaForCausalLM", 4096, 16, 128256))
    assert "SP012" not in codes(run_preflight(t, half, "EAGLE"))  # a smaller model: not for this rule
    vlm = make_dir(tmp_path, "vlm", target_cfg("Eagle2_5_VLForConditionalGeneration", 4096, 28, 128256))
    assert "SP012" not in codes(run_preflight(vlm, eagle1, "EAGLE"))  # a 28-layer model named Eagle...: no head


def test_the_cli_exits_1_on_swapped_paths(llama):
    t, d = llama
    proc = subprocess.run([sys.executable, "-m", "sglang_patches", "preflight", "--model-path", str(d),
                           "--speculative-draft-model-path", str(t)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1 and "SP012" in proc.stdout and "Traceback" not in proc.stderr
