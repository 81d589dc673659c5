"""The Kimi-K2 family on the CPU side of preflight and the launcher: Kimi-K2.5's multimodal wrapper
checked like its text model, aux ids past the target's layers refused, the MLA head refused by the
Llama-only draft features (--draft-backend triton, --draft-weights fp8) in one line naming the
drafter and the fix, before anything is built or spawned. Configs only: no SGLang import."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_patches.offline.fixtures.specs import get_spec
from sglang_patches.offline.preflight import run_preflight

REPO = Path(__file__).resolve().parents[1]


def _write(root: Path, name: str, cfg: dict) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return d


@pytest.fixture
def pair(tmp_path):
    t, mla, llama = (get_spec("kimi-k2-mla-mlahead").target, get_spec("kimi-k2-mla-mlahead").draft,
                     get_spec("kimi-k2-mla").draft)
    return {"target": _write(tmp_path, "target", t), "mla": _write(tmp_path, "mla", mla),
            "llama": _write(tmp_path, "llama", llama), "root": tmp_path, "t": t, "mla_cfg": mla}


def _wrapper(text: dict) -> dict:
    """Kimi-K2.5's published layout: the DeepseekV3 text model under text_config."""
    return {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
            "text_config": dict(text), "vision_config": {"model_type": "moonvit"}, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize("head", ["llama", "mla"])
def test_kimi_k25_wrapper_is_checked_like_the_text_model(pair, head):
    wrapped = _write(pair["root"], "wrapped", _wrapper(pair["t"]))
    for algo in ("EAGLE3", "EAGLE"):
        bare = run_preflight(str(pair["target"]), str(pair[head]), algo, load_format="dummy")
        wrap = run_preflight(str(wrapped), str(pair[head]), algo, load_format="dummy")
        assert wrap.target.hidden_size == 7168 and wrap.target.num_hidden_layers == 8
        assert wrap.target.text_config_key == "text_config"
        strip = lambda r: [(f.code, f.severity, f.message.replace(str(wrapped), "T").replace(
            "KimiK25ForConditionalGeneration", "X").replace(str(pair["target"]), "T").replace(
            "DeepseekV3ForCausalLM", "X")) for f in r.findings]
        assert strip(wrap) == strip(bare), (algo, wrap.format_text())
        assert wrap.ok is bare.ok is (algo == "EAGLE3")
    bug = run_preflight(str(wrapped), str(pair[head]), "EAGLE", load_format="dummy")
    assert "SGLang's default layers [2, 4, 5]" in next(f.message for f in bug.errors if f.code == "SP001")


@pytest.mark.parametrize("ids,captured", [([1, 29, 57], [2, 30, 58]), ([2, 30, 58], [2, 30, 58])])
def test_aux_ids_past_the_target_are_refused_naming_the_layers(pair, ids, captured):
    """A head trained on the 61-layer Kimi-K2 (ids as its eagle_config lists them) on the 8-layer target:
    SGLang's DeepSeek rule shifts ids starting at 1 and keeps the others, either way past layer 7."""
    cfg = dict(pair["mla_cfg"], eagle_config={"eagle_aux_hidden_state_layer_ids": ids})
    head = _write(pair["root"], "far", cfg)
    res = run_preflight(str(pair["target"]), str(head), "EAGLE3", load_format="dummy")
    assert not res.ok and res.exit_code == 1
    sp005 = [f for f in res.errors if f.code == "SP005"]
    assert sp005, res.format_text()
    msg = sp005[0].message
    shifted = ids[0] == 1
    assert f"input of layers {captured} ({'each id + 1' if shifted else 'each id as given'} for DeepseekV3" in msg, msg
    assert f"layers 0..7, so layers {', '.join(str(c) for c in captured if c > 7)} are never captured" in msg, msg
    assert "eagle_config.eagle_aux_hidden_state_layer_ids" in sp005[0].fix and "trained for this target" in sp005[0].fix
    assert sp005[0].fix.endswith(f"(ids up to {6 if shifted else 7} here)")


def test_mla_head_counts_top_level_aux_ids(pair):
    """kimi_k25_eagle3 sizes fc from eagle_config's ids, else the top-level list; the target reads only
    eagle_config's (SGLang's default 3 layers here): two top-level ids give fc 2 x 7168 against 3 states."""
    cfg = dict(pair["mla_cfg"], eagle_aux_hidden_state_layer_ids=[2, 4])
    head = _write(pair["root"], "top", cfg)
    res = run_preflight(str(pair["target"]), str(head), "EAGLE3", load_format="dummy")
    assert not res.ok
    codes = {f.code for f in res.findings}
    assert "SP003" in codes and "SP005" in codes, res.format_text()
    assert any("14336" in f.message for f in res.errors if f.code == "SP003"), res.format_text()


def _launch(args, cache):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SGLANG_PATCHES_CACHE": str(cache),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("SGLANG_PATCHES_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "sglang_patches.launch", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)


@pytest.mark.parametrize("flags,named", [
    (["--draft-backend", "triton"], "drop --draft-backend triton "),
    (["--draft-weights", "fp8"], "drop --draft-weights fp8 "),
    (["--draft-backend", "triton", "--draft-weights", "fp8"], "drop --draft-backend triton and --draft-weights fp8 "),
    (["--draft-backend", "triton", "--draft-weights", "fp8-weight-only"],
     "drop --draft-backend triton and --draft-weights fp8-weight-only "),
])
def test_launcher_refuses_the_mla_head_for_llama_only_draft_features(pair, tmp_path, flags, named):
    cache = tmp_path / "cache"
    for source in (["--fixture", "kimi-k2-mla-mlahead"],
                   ["--model-path", str(pair["target"]), "--speculative-algorithm", "EAGLE3",
                    "--speculative-draft-model-path", str(pair["mla"])]):
        before = sorted(p.name for p in pair["root"].rglob("*"))
        r = _launch(source + flags, cache)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1, r.stderr
        assert "Eagle3DeepseekV2ForCausalLM, an MLA EAGLE-3 head" in lines[0] and named in lines[0], lines[0]
        assert "LlamaForCausalLMEagle3 drafters only" in lines[0] and "Traceback" not in r.stderr
        assert not cache.exists(), "nothing built"  # the fixture's drafter is read from its spec
        assert sorted(p.name for p in pair["root"].rglob("*")) == before


def test_launcher_does_not_refuse_the_llama_head_or_the_stock_backend(pair, tmp_path):
    """The Llama head passes this check (it then meets the GPU check on this CPU machine); the MLA head
    without the Llama-only features is not refused by it."""
    for args in (["--fixture", "kimi-k2-mla", "--draft-backend", "triton", "--draft-weights", "fp8"],
                 ["--fixture", "kimi-k2-mla-mlahead"]):
        r = _launch(args, tmp_path / "cache")
        assert r.returncode == 2 and "MLA EAGLE-3 head" not in r.stderr and "no CUDA GPU" in r.stderr, r.stderr


def test_a_kimi_fixture_served_dummy_is_told_a_fix_for_its_shape(pair):
    """SP010 on the DeepSeek-V3-shaped target: the trained fixtures are Llama-shaped, so the fix names the user's
    own pair and simulated acceptance, not `--fixture trained-8b`."""
    res = run_preflight(str(pair["target"]), str(pair["llama"]), "EAGLE3", load_format="dummy")
    [sp010] = [f for f in res.findings if f.code == "SP010"] or [None]
    assert sp010 is not None, res.format_text()
    assert "trained-8b" not in sp010.fix and "--simulate-acceptance 0.8,0.7,0.6" in sp010.fix, sp010.fix

