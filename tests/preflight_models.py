"""Checkpoint/config builders shared by the preflight tests (shapes of public models)."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8, "BOOL": 1}


# ---------------------------------------------------------------- checkpoint writers

def write_st(path: Path, tensors: dict[str, tuple[str, list[int]]], *, data: bool = True) -> Path:
    """Write a safetensors file by hand; the data region is a sparse zero fill (or left off)."""
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
        if data:
            fh.truncate(8 + len(raw) + off)  # sparse zero fill: no disk used
    return path


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

