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
from sglang_patches.preflight import run_preflight
from sglang_patches.preflight import cli as pf_cli
from sglang_patches.preflight import model_info

REPO = Path(__file__).resolve().parents[1]
DTYPE_BYTES = {"BF16": 2, "I64": 8, "BOOL": 1, "F32": 4}


# ---------------------------------------------------------------- checkpoint writers

def write_st(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, (dtype, shape) in tensors.items():
        n = DTYPE_BYTES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        fh.truncate(8 + len(raw) + off)  # sparse zero fill: no disk used


def make_dir(root: Path, name: str, config: dict | None, tensors: dict | None = None) -> Path:
    d = root / name
    d.mkdir()
    if config is not None:
        (d / "config.json").write_text(json.dumps(config))
    if tensors:
        write_st(d / "model.safetensors", tensors)
    return d


def target_cfg(arch: str, hidden: int, layers: int, vocab: int, **extra) -> dict:
    return {"architectures": [arch], "hidden_size": hidden, "num_hidden_layers": layers, "vocab_size": vocab,
            "model_type": "llama", **extra}


LLAMA_8B = target_cfg("LlamaForCausalLM", 4096, 32, 128256)
KIMI_K2 = target_cfg("DeepseekV3ForCausalLM", 7168, 61, 163840, model_type="kimi_k2")
QWEN3_8B = target_cfg("Qwen3ForCausalLM", 4096, 36, 151936, model_type="qwen3")
KIMI_K25 = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
            "text_config": {"hidden_size": 7168, "num_hidden_layers": 61, "vocab_size": 163840}}


def eagle3_cfg(hidden: int, vocab: int, draft_vocab: int | None = 32000, ids=None, **extra) -> dict:
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": hidden,
           "num_hidden_layers": 1, "vocab_size": vocab, "tie_word_embeddings": False, **extra}
    if draft_vocab is not None:
        cfg["draft_vocab_size"] = draft_vocab
    if ids is not None:
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": ids, "use_aux_hidden_state": True}
    return cfg


def eagle3_tensors(hidden: int, fc_in: int, draft_vocab: int, vocab: int, *, d2t: bool = True,
                   prefix: str = "", fc_out: int | None = None) -> dict:
    t = {f"{prefix}fc.weight": ("BF16", [fc_out or hidden, fc_in]),
         "lm_head.weight": ("BF16", [draft_vocab, hidden]),
         f"{prefix}midlayer.hidden_norm.weight": ("BF16", [hidden]),
         f"{prefix}norm.weight": ("BF16", [hidden])}
    if d2t:
        t.update({"d2t": ("I64", [draft_vocab]), "t2d": ("BOOL", [vocab])})
    return t


@pytest.fixture
def llama(tmp_path):
    """Llama-3.1-8B + its EAGLE-3 head (fc [4096, 12288], draft vocab 32000 with d2t)."""
    t = make_dir(tmp_path, "llama", LLAMA_8B)
    d = make_dir(tmp_path, "llama-eagle3", eagle3_cfg(4096, 128256),
                 eagle3_tensors(4096, 12288, 32000, 128256))
    return t, d


@pytest.fixture
def kimi(tmp_path):
    """Kimi-K2 (hidden 7168, 61 layers) + an EAGLE-3 drafter on aux layers [1, 29, 57]."""
    t = make_dir(tmp_path, "kimi", KIMI_K2)
    d = make_dir(tmp_path, "kimi-eagle3", eagle3_cfg(7168, 163840, ids=[1, 29, 57]),
                 eagle3_tensors(7168, 21504, 32000, 163840, prefix="model."))
    return t, d


def codes(result) -> list[str]:
    return [f.code for f in result.findings]


def only(result, code):
    found = [f for f in result.findings if f.code == code]
    assert found, f"{code} not in {result.findings}"
    return found[0]


# ---------------------------------------------------------------- compatible pairs

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
    (5, 4, 8, None), (3, 4, 16, None), (3, 1, 4, None), (None, None, None, None),
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


# ---------------------------------------------------------------- SP009, sharding

def test_sp009_no_safetensors(tmp_path):
    t = make_dir(tmp_path, "llama", LLAMA_8B)
    d = make_dir(tmp_path, "d", eagle3_cfg(4096, 128256))
    (d / "pytorch_model.bin").write_bytes(b"")
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

def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "sglang_patches", "preflight", *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def assert_exit2(proc: subprocess.CompletedProcess, needle: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sglang-patches: error: "), proc.stderr
    assert needle in lines[0] and "Traceback" not in proc.stderr


def flags(t, d, algo="EAGLE3"):
    return ["--model-path", str(t), "--speculative-draft-model-path", str(d), "--speculative-algorithm", algo]


def test_cli_missing_dir(tmp_path, llama):
    assert_exit2(run_cli(*flags(tmp_path / "nope", llama[1])), "does not exist")


def test_cli_non_json_config(tmp_path, llama):
    d = make_dir(tmp_path, "bad", None)
    (d / "config.json").write_text("{hidden_size: 4096")
    assert_exit2(run_cli(*flags(llama[0], d)), "is not valid JSON")


def test_cli_corrupt_header(tmp_path, llama):
    (llama[1] / "model.safetensors").write_bytes(struct.pack("<Q", 9) + b"garbage!!")
    assert_exit2(run_cli(*flags(*llama)), "corrupt safetensors header")


def test_cli_truncated_and_missing_shard(tmp_path, llama):
    f = llama[1] / "model.safetensors"
    with open(f, "r+b") as fh:
        fh.truncate(f.stat().st_size // 2)
    assert_exit2(run_cli(*flags(*llama)), "truncated")
    (llama[1] / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"fc.weight": "x.safetensors"}}))
    assert_exit2(run_cli(*flags(*llama)), "missing shard")


def test_cli_unknown_flag_and_algorithm(llama):
    assert_exit2(run_cli(*flags(*llama), "--frobnicate"), "unrecognized arguments: --frobnicate")
    assert_exit2(run_cli(*flags(*llama, algo="MEDUSA")), "unknown --speculative-algorithm")
    assert_exit2(run_cli("--model-path", str(llama[0])), "required")
    assert_exit2(run_cli(*flags(*llama), "--speculative-num-steps", "five"), "invalid int value")


@pytest.mark.parametrize("config, needle", [
    ({"num_hidden_layers": 32}, "lacks hidden_size"),
    ({"hidden_size": 4096}, "lacks num_hidden_layers"),
    ({"hidden_size": "4096", "num_hidden_layers": 32}, "must be a positive integer"),
    ([1, 2], "must hold a JSON object"),
    ({"hidden_size": 4096, "num_hidden_layers": 1, "eagle_config": {"eagle_aux_hidden_state_layer_ids": "1,2"}},
     "list of integer layer ids"),
    ({"text_config": {"num_hidden_layers": 61}}, "lacks hidden_size"),
])
def test_config_lacking_fields(tmp_path, llama, config, needle):
    d = make_dir(tmp_path, "bad", None)
    (d / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError) as exc:
        run_preflight(llama[0], d, "EAGLE3")
    assert needle in str(exc.value) and exc.value.code == 2 and "\n" not in str(exc.value)


def test_missing_config_and_not_a_dir(tmp_path, llama):
    d = make_dir(tmp_path, "empty", None)
    with pytest.raises(UserError, match="has no config.json"):
        run_preflight(d, llama[1], "EAGLE3")
    with pytest.raises(UserError, match="is not a directory"):
        run_preflight(llama[0], llama[1] / "model.safetensors", "EAGLE3")
    with pytest.raises(UserError, match="hf download org/model"):
        run_preflight("org/model", llama[1], "EAGLE3")


def test_unreadable_directory(tmp_path, llama, monkeypatch):
    d = llama[1]
    if os.geteuid() != 0:
        d.chmod(0)
        try:
            assert_exit2(run_cli(*flags(llama[0], d)), "not readable")
        finally:
            d.chmod(0o755)
    else:  # root reads everything; simulate the permission check
        real = os.access
        monkeypatch.setattr(model_info.os, "access", lambda p, m: False if Path(p) == d else real(p, m))
        with pytest.raises(UserError, match="not readable"):
            run_preflight(llama[0], d, "EAGLE3")
    (d / "config.json").unlink()
    (d / "config.json").mkdir()
    assert_exit2(run_cli(*flags(llama[0], d)), "is a directory")


# ---------------------------------------------------------------- CLI behaviour

def test_cli_ok_and_problems_exit_codes(kimi):
    ok = run_cli(*flags(*kimi), "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                 "--speculative-num-draft-tokens", "4")
    assert ok.returncode == 0 and "compatible: 0 error(s)" in ok.stdout and ok.stderr == ""
    bad = run_cli("--model-path", str(kimi[0]), "--speculative-draft-model", str(kimi[1]),
                  "--speculative-algorithm", "EAGLE")
    assert bad.returncode == 1 and bad.stderr == ""
    assert "ERROR   SP001  drafter fc expects 21504 = 3 x 7168 from layers [1, 29, 57]" in bad.stdout
    assert "fix: --speculative-algorithm EAGLE3" in bad.stdout


def test_cli_json_in_process(kimi, capsys):
    assert pf_cli.main(flags(*kimi, algo="EAGLE") + ["--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["exit_code"] == 1
    assert data["findings"][0]["code"] == "SP001" and data["draft"]["fc_shape"] == [7168, 21504]
    assert data["draft"]["aux_layer_ids"] == [1, 29, 57]


def test_cli_help_explains_exit_codes(capsys):
    assert pf_cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "exit codes" in out and "unusable input" in out and "--speculative-draft-model" in out
    for code in ("SP001", "SP008"):
        assert code in out


def test_cli_in_process_unknown_flag_raises_user_error():
    with pytest.raises(UserError, match="unrecognized arguments"):
        pf_cli.main(["--bogus"])


def test_no_torch_no_sglang_and_no_writes(kimi):
    before = {p: p.stat().st_mtime_ns for root in kimi for p in [root, *root.iterdir()]}
    code = ("import sys; from sglang_patches.preflight import run_preflight; "
            f"r = run_preflight({str(kimi[0])!r}, {str(kimi[1])!r}, 'EAGLE'); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'sglang', 'transformers')]; "
            "assert not bad, bad; assert not r.ok; print('clean')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "clean" in proc.stdout, proc.stderr
    after = {p: p.stat().st_mtime_ns for root in kimi for p in [root, *root.iterdir()]}
    assert before == after
