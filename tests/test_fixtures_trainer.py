"""The `trained` fixture's trainer at tiny sizes on CPU, and its checkpoints against real SGLang."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from sglang_patches.offline.fixtures import build_fixture  # noqa: E402
from sglang_patches.offline.fixtures.specs import eagle3_drafter, llama_target  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# 7 layers: the smallest L whose default capture ids [2, L//2, L-3] are distinct.
TINY_TARGET = dict(hidden_size=64, num_hidden_layers=7, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=128)
TINY_OVERRIDES = dict(target_config=TINY_TARGET, target_steps=12, target_batch=4, target_seq=32, target_lr=3e-3,
                      gen_sequences=8, gen_batch=8, gen_prompt=8, gen_new=8, draft_steps=12, draft_batch=4,
                      eval_prompts=3, eval_prompt_tokens=16, eval_new=6, corpus_bytes=200_000)


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory):
    old = os.environ.get("SGLANG_PATCHES_CACHE")
    os.environ["SGLANG_PATCHES_CACHE"] = str(tmp_path_factory.mktemp("sgp_cache"))
    torch.set_num_threads(min(4, os.cpu_count() or 1))
    yield
    if old is None:
        os.environ.pop("SGLANG_PATCHES_CACHE", None)
    else:
        os.environ["SGLANG_PATCHES_CACHE"] = old


def _tiny_cfg(vocab=8192):
    return llama_target(**{"hidden": 64, "layers": 7, "heads": 4, "kv_heads": 2, "intermediate": 128,
                           "vocab": vocab, "max_pos": 512, "rope_theta": 10000.0})


@pytest.fixture(scope="module")
def corpus():
    from sglang_patches.offline.fixtures.corpus import tokenize_corpus
    from sglang_patches.offline.fixtures.tokenizer import get_tokenizer_dir
    return tokenize_corpus(get_tokenizer_dir() / "tokenizer.json", byte_budget=200_000)


@pytest.fixture(scope="module")
def trained_tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("trained") / "fx"
    fx = build_fixture("trained", out, device="cpu", seed=0, max_seconds=120, train_overrides=TINY_OVERRIDES)
    return fx


def _train_target(corpus, seed, steps):
    from sglang_patches.offline.fixtures.train_target import make_target, train_target
    model = make_target(_tiny_cfg(), "cpu", seed=seed)
    rep = train_target(model, corpus, steps=steps, batch_size=4, seq_len=32, lr=3e-3, seed=seed, max_seconds=300,
                       log_every=1, log=lambda *_: None)
    return model, rep


def test_target_loss_decreases_and_is_seeded(corpus):
    _, a = _train_target(corpus, seed=0, steps=25)
    assert a["steps"] == 25 and not a["truncated_by_time"]
    assert sum(a["loss_log"][-5:]) / 5 < a["loss_log"][0] - 0.5
    _, b = _train_target(corpus, seed=0, steps=2)
    _, c = _train_target(corpus, seed=1, steps=2)
    assert b["first_loss"] == a["first_loss"]
    assert c["first_loss"] != a["first_loss"]


def test_drafter_loss_decreases(corpus):
    from sglang_patches.offline.fixtures.train_drafter import Eagle3Drafter, train_drafter
    from sglang_patches.offline.fixtures.train_target import sample_windows, set_seed
    target, _ = _train_target(corpus, seed=0, steps=30)
    set_seed(3)
    drafter = Eagle3Drafter(eagle3_drafter(_tiny_cfg()))
    gen = torch.Generator().manual_seed(0)
    fixed = sample_windows(corpus, 4, 24, gen)
    rep = train_drafter(drafter, target, lambda step: fixed, steps=30, ttt_steps=3, lr=3e-3, max_seconds=300,
                        log_every=1, log=lambda *_: None)
    losses = [r["loss"] for r in rep["log"]]
    assert rep["steps"] == 30 and rep["capture_layers"] == [2, 3, 4]
    assert losses[-1] < losses[0] * 0.7


def test_ttt_attention_is_causal_and_chain_only():
    from sglang_patches.offline.fixtures.train_drafter import Eagle3Drafter
    cfg = eagle3_drafter(_tiny_cfg(vocab=64))
    torch.manual_seed(0)
    d = Eagle3Drafter(cfg).eval()
    B, T, H, K = 2, 10, cfg["hidden_size"], 3
    aux = torch.randn(B, T, 3 * H)
    tokens = torch.randint(0, 64, (B, T + K - 1))
    embed = torch.randn(64, H)
    with torch.no_grad():
        base = d.forward_ttt(aux, tokens, embed, K)
        aux2, tok2 = aux.clone(), tokens.clone()
        aux2[:, 6:] = torch.randn(B, T - 6, 3 * H)  # roots > 5 changed
        tok2[:, 6 + K:] = torch.randint(0, 64, tok2[:, 6 + K:].shape)  # tokens only roots > 5 see
        pert = d.forward_ttt(aux2, tok2, embed, K)
    assert [tuple(x.shape) for x in base] == [(B, T, 64)] * K
    for k in range(K):  # roots 0..5 never see later roots' features or tokens
        torch.testing.assert_close(base[k][:, :6], pert[k][:, :6])
        assert not torch.allclose(base[k][:, 7:], pert[k][:, 7:])


def test_trained_fixture_on_cpu(trained_tiny):
    fx = trained_tiny
    assert fx.load_format == "auto" and fx.algorithm == "EAGLE3"
    rep = json.loads((fx.root / "train_report.json").read_text())
    for key in ("seed", "device", "total_seconds", "target", "drafter", "eval", "generation"):
        assert key in rep
    assert rep["seed"] == 0 and rep["device"] == "cpu"
    assert rep["target"]["steps"] == 12 and rep["drafter"]["steps"] == 12
    assert rep["eval"]["accept_len_est"] is not None and 1.0 <= rep["eval"]["accept_len_est"] <= 4.0
    from safetensors.torch import load_file
    sd = load_file(str(fx.draft / "model.safetensors"))
    assert "fc.weight" in sd and not any("embed_tokens" in k for k in sd) and "d2t" not in sd
    assert all(v.dtype == torch.bfloat16 for v in sd.values())
    from transformers import AutoConfig, AutoTokenizer, LlamaForCausalLM
    cfg = AutoConfig.from_pretrained(str(fx.target))
    model = LlamaForCausalLM.from_pretrained(str(fx.target))  # the HF target checkpoint loads cleanly
    assert model.config.num_hidden_layers == 7 and cfg.vocab_size % 64 == 0
    tok = AutoTokenizer.from_pretrained(str(fx.draft))
    assert tok.decode(tok("x = 1\n")["input_ids"], skip_special_tokens=True) == "x = 1\n"


def test_trained_same_seed_same_tokenizer_and_first_loss(trained_tiny, tmp_path):
    fx2 = build_fixture("trained", tmp_path / "again", device="cpu", seed=0, max_seconds=120,
                        train_overrides={**TINY_OVERRIDES, "target_steps": 2, "draft_steps": 2})
    a = (trained_tiny.target / "tokenizer.json").read_bytes()
    assert a == (fx2.target / "tokenizer.json").read_bytes() == (fx2.draft / "tokenizer.json").read_bytes()
    r1 = json.loads((trained_tiny.root / "train_report.json").read_text())
    r2 = json.loads((fx2.root / "train_report.json").read_text())
    assert r1["target"]["first_loss"] == r2["target"]["first_loss"]
    assert r1["corpus_tokens"] == r2["corpus_tokens"]


def test_trained_rebuild_is_the_same_pair_and_another_seed_is_not(trained_tiny, tmp_path):
    """Fixed work under deterministic kernels: the same seed and overrides give the same weight
    bytes, so the same build id (what lets two machines' builds pair); another seed another id."""
    from sglang_patches.offline.fixtures import base_build_id
    env_before = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    again = build_fixture("trained", tmp_path / "again", device="cpu", seed=0, max_seconds=120,
                          train_overrides=TINY_OVERRIDES)
    other = build_fixture("trained", tmp_path / "other", device="cpu", seed=1, max_seconds=120,
                          train_overrides=TINY_OVERRIDES)
    for part in ("target", "draft"):
        assert (again.root / part / "model.safetensors").read_bytes() == \
            (trained_tiny.root / part / "model.safetensors").read_bytes()
    first = base_build_id(trained_tiny.root)
    assert first is not None and len(first) == 16
    assert base_build_id(again.root) == first != base_build_id(other.root)
    stamp = json.loads((again.root / "fixture.json").read_text())
    assert stamp["build_id"] == first and json.loads((again.root / "train_report.json").read_text())["fixed_work"]
    assert os.environ.get("CUBLAS_WORKSPACE_CONFIG") == env_before and not torch.are_deterministic_algorithms_enabled()


def test_a_slow_first_step_changes_no_weight(trained_tiny, tmp_path, monkeypatch):
    """The clock never shapes the weights: the target's clock jumps 30 s after its first step (a CUDA
    start-up, a busy host), inside the cap, and the bytes are the same. (A schedule that read the
    clock would have jumped most of the way down its cosine at step 2.)"""
    import time as real_time
    from types import SimpleNamespace

    import sglang_patches.offline.fixtures.train_target as train_target
    from sglang_patches.offline.fixtures import base_build_id
    calls = [0]

    def stalled():  # call 1: the loop's start, call 2: step 1; from step 2 on, 30 s later
        calls[0] += 1
        return real_time.time() + (30.0 if calls[0] > 2 else 0.0)
    monkeypatch.setattr(train_target, "time", SimpleNamespace(time=stalled))
    slow = build_fixture("trained", tmp_path / "slow", device="cpu", seed=0, max_seconds=120,
                         train_overrides=TINY_OVERRIDES)
    rep = json.loads((slow.root / "train_report.json").read_text())
    assert rep["target"]["seconds"] >= 30 and rep["fixed_work"]  # the stall was seen, and cut nothing short
    assert base_build_id(slow.root) == base_build_id(trained_tiny.root)


def test_an_op_without_a_deterministic_kernel_is_named_once(tmp_path, monkeypatch):
    """torch warns (warn_only) each time such an op runs, every training step: the report names it,
    and it is shown once after the build, not once per step."""
    import warnings

    import sglang_patches.offline.fixtures.train_target as train_target
    real = train_target.sample_windows

    def warned(*a, **k):
        warnings.warn("scatter_add_cuda_kernel does not have a deterministic implementation", UserWarning)
        return real(*a, **k)
    monkeypatch.setattr(train_target, "sample_windows", warned)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        fx = build_fixture("trained", tmp_path / "w", device="cpu", seed=0, max_seconds=120,
                           train_overrides={**TINY_OVERRIDES, "target_steps": 4, "draft_steps": 2})
    rep = json.loads((fx.root / "train_report.json").read_text())
    assert rep["nondeterministic_ops"] == ["scatter_add_cuda_kernel does not have a deterministic implementation"]
    assert sum("scatter_add_cuda_kernel" in str(w.message) for w in shown) == 1


def test_the_build_trains_attention_in_the_math_backend(tmp_path, monkeypatch):
    """The fused SDPA backends' backwards (flash, memory-efficient, cuDNN) are not deterministic under
    warn_only: during the build only the math backend is enabled, and the flags are restored after."""
    import sglang_patches.offline.fixtures.train_target as train_target
    real, seen = train_target.sample_windows, []
    flags = (torch.backends.cuda.flash_sdp_enabled, torch.backends.cuda.mem_efficient_sdp_enabled,
             torch.backends.cuda.cudnn_sdp_enabled, torch.backends.cuda.math_sdp_enabled)
    before = [f() for f in flags]

    def watched(*a, **k):
        seen.append([f() for f in flags])
        return real(*a, **k)
    monkeypatch.setattr(train_target, "sample_windows", watched)
    build_fixture("trained", tmp_path / "m", device="cpu", seed=0, max_seconds=120,
                  train_overrides={**TINY_OVERRIDES, "target_steps": 2, "draft_steps": 1})
    assert seen and all(s == [False, False, False, True] for s in seen)
    assert [f() for f in flags] == before == [True, True, True, True]


# Runs in a subprocess: it initialises a 1-rank gloo process group and SGLang's runtime context.
from sglang_cpu import SGLANG_CPU_PRELUDE  # noqa: E402
_SGLANG_CHECK = r"""
import json, os, sys
import torch
from safetensors.torch import load_file
""" + SGLANG_CPU_PRELUDE + r"""
from sglang.srt.server_args import ServerArgs
tgt_dir, drf_dir = sys.argv[1], sys.argv[2]
cpu_world(ServerArgs(model_path=tgt_dir, speculative_algorithm="EAGLE3", speculative_draft_model_path=drf_dir,
                     device="cpu"))
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.models.llama import LlamaForCausalLM
from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3
out = {}
for kind, path, cls, draft in (("draft", drf_dir, LlamaForCausalLMEagle3, True), ("target", tgt_dir, LlamaForCausalLM, False)):
    mc = ModelConfig(path, trust_remote_code=False, is_draft_model=draft, speculative_algorithm="EAGLE3")
    with torch.device("cpu"):
        m = cls(mc.hf_config).to(torch.bfloat16)
    for p in m.parameters():
        p.data.fill_(float("nan"))
    ckpt = load_file(os.path.join(path, "model.safetensors"))
    m.load_weights(list(ckpt.items()))
    params = dict(m.named_parameters())
    out[kind] = {
        "params": {n: list(p.shape) for n, p in params.items()},
        "unloaded": [n for n, p in params.items() if torch.isnan(p.float()).any()],
        "load_lm_head_from_target": getattr(m, "load_lm_head_from_target", None),
        "hot_token_id": None if getattr(m, "hot_token_id", None) is None else "set",
    }
    if draft:
        L = "model.layers.0."
        c = lambda k: ckpt[k].float()
        exp = {
            L + "self_attn.qkv_proj.weight": torch.cat([c("midlayer.self_attn.q_proj.weight"), c("midlayer.self_attn.k_proj.weight"), c("midlayer.self_attn.v_proj.weight")]),
            L + "mlp.gate_up_proj.weight": torch.cat([c("midlayer.mlp.gate_proj.weight"), c("midlayer.mlp.up_proj.weight")]),
            L + "mlp.down_proj.weight": c("midlayer.mlp.down_proj.weight"),
            L + "hidden_norm.weight": c("midlayer.hidden_norm.weight"),
            "model.fc.weight": c("fc.weight"), "model.norm.weight": c("norm.weight"), "lm_head.weight": c("lm_head.weight"),
        }
        out["draft"]["mismatch"] = [k for k, v in exp.items() if not torch.equal(params[k].float(), v)]
print("RESULT" + json.dumps(out))
"""


def test_checkpoints_load_into_real_sglang_models(trained_tiny):
    """Construct SGLang's own LlamaForCausalLMEagle3 / LlamaForCausalLM on CPU (1-rank gloo group),
    fill every parameter with NaN, run their real `load_weights` on our safetensors, and require
    that every parameter except the drafter's embed_tokens (shared from the target at runtime) was
    overwritten with the right values."""
    pytest.importorskip("sglang")
    fx = trained_tiny
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-c", _SGLANG_CHECK, str(fx.target), str(fx.draft)], capture_output=True,
                       text=True, env=env, timeout=300)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
    assert r.returncode == 0 and line, r.stderr[-3000:]
    res = json.loads(line[0][len("RESULT"):])
    d, t = res["draft"], res["target"]
    H, V = TINY_TARGET["hidden_size"], 8192
    assert d["unloaded"] == ["model.embed_tokens.weight"]  # set_embed() shares the target's at runtime
    assert d["mismatch"] == []
    assert d["params"]["model.fc.weight"] == [H, 3 * H]
    assert d["params"]["model.layers.0.self_attn.qkv_proj.weight"][1] == 2 * H  # concat[embeds, hidden]
    assert d["params"]["lm_head.weight"] == [V, H]
    assert d["load_lm_head_from_target"] is False and d["hot_token_id"] is None  # own head, full vocab
    assert t["unloaded"] == []
