"""Dummy fixtures, tokenizer, cache and CLI of `sglang_patches.offline.fixtures` (CPU only)."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import shutil
from pathlib import Path

import pytest

from sglang_patches.errors import UserError
from sglang_patches.offline.fixtures import CATALOGUE, STAMP, build_fixture, ensure_fixture, fixture_cache_dir, load_fixture
from sglang_patches.offline.fixtures.corpus import EVAL_PROMPTS, is_held_out, load_eval_prompts
from sglang_patches.offline.fixtures.specs import BOS_ID, EOS_ID, capture_layers, get_spec

REPO = Path(__file__).resolve().parents[1]
DUMMY = [n for n, s in CATALOGUE.items() if not s.trained]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(scope="session")
def cache_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("sgp_cache")
    old = os.environ.get("SGLANG_PATCHES_CACHE")
    os.environ["SGLANG_PATCHES_CACHE"] = str(root)
    os.environ.update(OFFLINE)
    yield root
    if old is None:
        os.environ.pop("SGLANG_PATCHES_CACHE", None)
    else:
        os.environ["SGLANG_PATCHES_CACHE"] = old


@pytest.fixture(scope="session")
def built(cache_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("fixtures")
    return {n: build_fixture(n, out / n) for n in DUMMY}


def _env(cache_root=None):
    env = {**os.environ, **OFFLINE, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if cache_root is not None:
        env["SGLANG_PATCHES_CACHE"] = str(cache_root)
    return env


def _cli(args, cache_root=None):
    return subprocess.run([sys.executable, "-m", "sglang_patches", "fixtures", *args], capture_output=True,
                          text=True, env=_env(cache_root), cwd=REPO, timeout=300)


def test_qwen3_moe_shape_matches_sglang_capture_and_passes_preflight(built):
    """The capture ids come from the real Qwen3MoeForCausalLM.set_eagle3_layers_to_capture (run on a
    stand-in `self`: the model itself cannot be built without a GPU), and the preflight passes with
    the drafter's fc as SGLang builds it (Linear(3 x 2048, 2048))."""
    pytest.importorskip("sglang")
    from types import SimpleNamespace

    from sglang.srt.models.qwen3_moe import Qwen3MoeForCausalLM
    from sglang_patches.offline.preflight import run_preflight

    seen = []
    me = SimpleNamespace(pp_group=SimpleNamespace(is_last_rank=True),
                         config=SimpleNamespace(num_hidden_layers=48),
                         model=SimpleNamespace(set_eagle3_layers_to_capture=seen.append))
    Qwen3MoeForCausalLM.set_eagle3_layers_to_capture(me, None)
    assert me.capture_aux_hidden_states is True
    assert seen == [capture_layers(48)] and len(set(seen[0])) == 3
    fx = built["qwen3-moe-shape"]
    res = run_preflight(str(fx.target), str(fx.draft), "EAGLE3", steps=3, topk=1, draft_tokens=4)
    assert res.ok, res.format_text()
    assert res.target.hidden_size == 2048 and res.draft.hidden_size == 2048


def test_kimi_k2_mla_pairs_pass_preflight(built):
    from sglang_patches.offline.preflight import run_preflight

    for name in ("kimi-k2-mla", "kimi-k2-mla-mlahead"):
        fx = built[name]
        res = run_preflight(str(fx.target), str(fx.draft), "EAGLE3", steps=3, topk=1, draft_tokens=4,
                            load_format="dummy")
        assert res.ok and not [f for f in res.findings if f.code != "SP010"], res.format_text()
        bug = run_preflight(str(fx.target), str(fx.draft), "EAGLE", load_format="dummy")
        sp001 = [f for f in bug.errors if f.code == "SP001"]
        assert sp001 and "SGLang's default layers [2, 4, 5]" in sp001[0].message and "21504" in sp001[0].message


_CONFIG_CLASS = {"llama": "LlamaConfig", "qwen3_moe": "Qwen3MoeConfig", "deepseek_v3": "DeepseekV3Config"}


@pytest.mark.parametrize("name", DUMMY)
def test_dummy_fixture_configs_load_with_transformers(built, name):
    import transformers
    from transformers import AutoConfig, LlamaConfig

    fx, spec = built[name], get_spec(name)
    assert fx.load_format == "dummy" and fx.algorithm == "EAGLE3"
    assert fx.default_spec_args == {"speculative_num_steps": 3, "speculative_eagle_topk": 1,
                                    "speculative_num_draft_tokens": 4}
    for d, want in ((fx.target, spec.target), (fx.draft, spec.draft)):
        cfg = AutoConfig.from_pretrained(str(d))
        assert isinstance(cfg, getattr(transformers, _CONFIG_CLASS[want["model_type"]]))
        for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                    "num_key_value_heads", "vocab_size", "tie_word_embeddings", "max_position_embeddings",
                    "q_lora_rank", "kv_lora_rank", "n_routed_experts", "routed_scaling_factor", "topk_method"):
            if key in want:
                assert getattr(cfg, key) == want[key], (name, d.name, key)
        assert cfg.architectures == want["architectures"]
        assert str(cfg.dtype).endswith("bfloat16")
    if spec.draft["model_type"] == "llama":
        assert LlamaConfig.from_pretrained(str(fx.draft)).hidden_size == spec.draft["hidden_size"]
    assert AutoConfig.from_pretrained(str(fx.draft)).draft_vocab_size == spec.draft["draft_vocab_size"]
    stamp = json.loads((fx.root / STAMP).read_text())
    assert stamp["complete"] and stamp["name"] == name
    assert load_fixture(fx.root) == fx


@pytest.mark.parametrize("name", DUMMY)
def test_dummy_fixture_tokenizer_round_trip(built, name):
    from transformers import AutoTokenizer

    for d in (built[name].target, built[name].draft):
        tok = AutoTokenizer.from_pretrained(str(d))
        text = "def f(x):\n    return {'a': x ** 2}  # héllo ✓\n"
        ids = tok(text)["input_ids"]
        assert ids[0] == BOS_ID == tok.bos_token_id and tok.eos_token_id == EOS_ID
        assert tok.decode(ids, skip_special_tokens=True) == text
        assert len(tok) <= get_spec(name).target["vocab_size"]
        tok.decode([5, 120000])  # ids beyond the tokenizer (dummy weights emit them) must not raise
        assert tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                       add_generation_prompt=True).startswith("<|begin_of_text|>")


def test_sglang_config_and_tokenizer_loading(built):
    pytest.importorskip("sglang")
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.utils.hf_transformers_utils import get_config, get_tokenizer

    for name, fx in built.items():
        spec = get_spec(name)
        tgt = ModelConfig(str(fx.target), trust_remote_code=False, speculative_algorithm="EAGLE3")
        drf = ModelConfig(str(fx.draft), trust_remote_code=False, is_draft_model=True,
                          speculative_algorithm="EAGLE3", context_length=tgt.context_len)
        assert tgt.hf_config.architectures == spec.target["architectures"]
        assert drf.hf_config.architectures == spec.draft["architectures"]
        assert tgt.num_hidden_layers == spec.target["num_hidden_layers"] and drf.num_hidden_layers == 1
        assert tgt.vocab_size == spec.target["vocab_size"] and str(tgt.dtype) == "torch.bfloat16"
        assert tgt.context_len == spec.target["max_position_embeddings"]
        c = get_config(str(fx.draft), trust_remote_code=False)
        assert c.draft_vocab_size == spec.draft["draft_vocab_size"] and c.target_hidden_size == spec.target["hidden_size"]
        tok = get_tokenizer(str(fx.target))
        assert tok.decode(tok.encode("import os\n"), skip_special_tokens=True) == "import os\n"


def test_engine_kwargs_and_flags(built):
    fx = built["tiny"]
    kw = fx.engine_kwargs(speculative_num_steps=5)
    assert kw["model_path"] == str(fx.target) and kw["speculative_draft_model_path"] == str(fx.draft)
    assert kw["speculative_algorithm"] == "EAGLE3" and kw["load_format"] == "dummy"
    assert kw["speculative_num_steps"] == 5
    flags = fx.cli_flags()
    assert flags[flags.index("--load-format") + 1] == "dummy"
    assert "--speculative-draft-model-path" in flags
    pytest.importorskip("sglang")
    from sglang.srt.server_args import ServerArgs
    import argparse
    p = argparse.ArgumentParser()
    ServerArgs.add_cli_args(p)
    ns = p.parse_args(flags)
    assert ns.speculative_algorithm == "EAGLE3" and ns.speculative_eagle_topk == 1


def test_out_dir_rules(cache_root, tmp_path):
    out = tmp_path / "fx"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(UserError) as e:
        build_fixture("tiny", out)
    assert e.value.code == 2 and "--force" in str(e.value)
    assert (out / "keep.txt").read_text() == "mine"
    fx = build_fixture("tiny", out, force=True)
    assert (out / "keep.txt").read_text() == "mine" and (fx.target / "config.json").is_file()
    (out / "target" / "stale.bin").write_text("x")
    build_fixture("tiny", out, force=True)  # --force replaces what a build owns
    assert not (out / "target" / "stale.bin").exists() and (out / "keep.txt").exists()
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(UserError):
        build_fixture("tiny", f, force=True)
    with pytest.raises(UserError) as e:
        build_fixture("nope", tmp_path / "n")
    assert "tiny" in str(e.value) and e.value.code == 2


def test_ensure_fixture_reuses_and_rebuilds_incomplete(cache_root):
    assert fixture_cache_dir() == cache_root / "fixtures"
    fx = ensure_fixture("tiny")
    assert fx.root == cache_root / "fixtures" / "tiny"
    stamp = fx.root / STAMP
    mtime = stamp.stat().st_mtime_ns
    assert ensure_fixture("tiny").root == fx.root and stamp.stat().st_mtime_ns == mtime  # reused
    stamp.unlink()  # an interrupted build has no stamp
    (fx.target / "config.json").unlink()
    fx2 = ensure_fixture("tiny")
    assert stamp.is_file() and (fx2.target / "config.json").is_file()
    data = json.loads(stamp.read_text())
    data["spec_hash"] = "stale"
    stamp.write_text(json.dumps(data))
    ensure_fixture("tiny")
    assert json.loads(stamp.read_text())["spec_hash"] != "stale"


def test_cache_dir_default(monkeypatch):
    monkeypatch.delenv("SGLANG_PATCHES_CACHE", raising=False)
    assert fixture_cache_dir() == Path.home() / ".cache" / "sglang_patches" / "fixtures"


_TRAIN_TOK = """
import hashlib, sys
from sglang_patches.offline.fixtures.tokenizer import train_tokenizer
d = train_tokenizer(sys.argv[1], vocab_size=1024, byte_budget=400_000)
print(hashlib.sha256((d / "tokenizer.json").read_bytes()).hexdigest())
"""


def test_tokenizer_deterministic_across_processes(tmp_path):
    digests = []
    for i in range(2):
        r = subprocess.run([sys.executable, "-c", _TRAIN_TOK, str(tmp_path / f"t{i}")], capture_output=True,
                           text=True, env=_env(), timeout=120)
        assert r.returncode == 0, r.stderr
        digests.append(r.stdout.strip())
    assert digests[0] == digests[1]
    assert (tmp_path / "t0" / "tokenizer_config.json").read_bytes() == (tmp_path / "t1" / "tokenizer_config.json").read_bytes()


def test_eval_prompts_shipped_and_held_out():
    assert EVAL_PROMPTS.stat().st_size < 40_000
    prompts = load_eval_prompts()
    assert len(prompts) == 64
    for p in prompts:
        assert is_held_out(p["source"]), p["source"]
        assert 200 <= len(p["prompt"]) <= 400


def _one_line_error(r):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    err = r.stderr.strip()
    assert "Traceback" not in r.stderr and len(err.splitlines()) == 1, r.stderr
    assert err.startswith("sglang-patches: error:")
    return err


def test_cli_bad_inputs(cache_root, tmp_path):
    err = _one_line_error(_cli(["build", "llama3-70b", "--out", str(tmp_path / "a")], cache_root))
    assert "llama3-8b" in err and "tiny" in err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    err = _one_line_error(_cli(["build", "tiny", "--out", str(busy)], cache_root))
    assert "--force" in err and (busy / "x").exists()
    import torch
    if not torch.cuda.is_available():
        err = _one_line_error(_cli(["build", "trained", "--out", str(tmp_path / "t")], cache_root))
        assert "CUDA GPU" in err and not (tmp_path / "t").exists()
        err = _one_line_error(_cli(["build", "trained-8b", "--out", str(tmp_path / "t8")], cache_root))
        assert "trained-8b fixture needs a CUDA GPU" in err and not (tmp_path / "t8").exists()


def test_cli_list_build_help(cache_root, tmp_path):
    r = _cli(["list"], cache_root)
    assert r.returncode == 0 and all(n in r.stdout for n in CATALOGUE)
    r = _cli(["--help"], cache_root)
    assert r.returncode == 0 and "load-format dummy" in r.stdout
    r = _cli(["build", "--help"], cache_root)
    assert r.returncode == 0 and "--force" in r.stdout and "--max-seconds" in r.stdout
    r = _cli(["build", "tiny", "--out", str(tmp_path / "t")], cache_root)
    assert r.returncode == 0, r.stderr
    assert "--speculative-algorithm EAGLE3" in r.stdout and "--load-format dummy" in r.stdout
    r = _cli(["build", "tiny", "--out", str(tmp_path / "t"), "--force", "--json"], cache_root)
    assert r.returncode == 0 and json.loads(r.stdout)["target"] == str(tmp_path / "t" / "target")


def test_an_inflated_fixture_is_rebuilt_when_its_base_was(tmp_path, monkeypatch):
    """trained-8b records which build of `trained` it was inflated from; a cached trained-8b whose
    cached `trained` is another build since (a rebuild) is stale, else comparisons between the two
    would mix builds. Without a cached base it is kept. (The builds themselves need a GPU: stubbed.)"""
    import sglang_patches.offline.fixtures as fixtures
    from sglang_patches.offline.fixtures import base_build_id, get_spec, spec_hash, stamp_key
    from sglang_patches.offline.fixtures.trained import DEFAULT_MAX_SECONDS

    monkeypatch.setenv("SGLANG_PATCHES_CACHE", str(tmp_path))
    builds = []
    monkeypatch.setattr(fixtures, "build_fixture", lambda name, root, **kw: builds.append(name) or "rebuilt")

    def fake(name, info, build_id=None):
        root = fixture_cache_dir() / name
        for part in ("target", "draft"):
            (root / part).mkdir(parents=True, exist_ok=True)
            (root / part / "config.json").write_text("{}")
        spec = get_spec(name)
        (root / STAMP).write_text(json.dumps({"name": name, "complete": True, "info": info, **stamp_key(spec, 0, DEFAULT_MAX_SECONDS, None),
                                              **({"build_id": build_id} if build_id else {}),
                                              "spec_hash": spec_hash(spec, stamp_key(spec, 0, DEFAULT_MAX_SECONDS, None))}))
        return root

    base = fake("trained", {"report": "build 1"})
    fake("trained-8b", {"base_build": base_build_id(base)})
    assert ensure_fixture("trained-8b").root.name == "trained-8b" and builds == []
    fake("trained", {"report": "build 2"})                 # trained rebuilt since
    assert ensure_fixture("trained-8b") == "rebuilt" and builds == ["trained-8b"]
    shutil.rmtree(base)                                    # no base to compare with: kept
    assert ensure_fixture("trained-8b").root.name == "trained-8b" and builds == ["trained-8b"]
    # A stamp with a build_id (a hash of the weights): a rebuild that trained the same weights, as a
    # fixed-work build on another machine does, is the same build; other weights are another.
    base = fake("trained", {"report": "machine A"}, build_id="0123abcd0123abcd")
    fake("trained-8b", {"base_build": base_build_id(base)})
    assert base_build_id(base) == "0123abcd0123abcd"
    fake("trained", {"report": "machine B, same weights"}, build_id="0123abcd0123abcd")
    assert ensure_fixture("trained-8b").root.name == "trained-8b" and builds == ["trained-8b"]
    fake("trained", {"report": "machine C"}, build_id="ffff0000ffff0000")
    assert ensure_fixture("trained-8b") == "rebuilt" and builds == ["trained-8b", "trained-8b"]
