"""Preflight on drafters that ship `pytorch_model.bin` (one file, or shards with an index): the same
shape checks as safetensors, from the pickle parsed for shapes only. The .bin files are written by
the real `torch.save` on CPU (small widths, so each file is a few KB); a pickle that calls anything
but torch's tensor rebuilding is refused and never run.
"""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import zipfile
from collections import OrderedDict

import pytest
import torch

from sglang_patches.offline.preflight import TorchCheckpointError, run_preflight
from sglang_patches.offline.preflight.torch_bin_header import read_bin_header

from preflight_models import REPO, codes, eagle3_cfg, make_dir, only, target_cfg, write_st

H, LAYERS, VOCAB, DRAFT_VOCAB = 64, 8, 1000, 100
TARGET = target_cfg("LlamaForCausalLM", H, LAYERS, VOCAB)


def head_state(aux: int, *, d2t: int = DRAFT_VOCAB) -> "OrderedDict[str, torch.Tensor]":
    """An EAGLE-3 head's state dict as a trainer saves it (an nn.Module's, with its _metadata)."""
    m = torch.nn.Module()
    m.fc = torch.nn.Linear(H * aux, H, bias=False)
    m.lm_head = torch.nn.Linear(H, DRAFT_VOCAB, bias=False)
    m.norm = torch.nn.LayerNorm(H)
    sd = m.to(torch.bfloat16).state_dict()
    sd["d2t"] = torch.zeros(d2t, dtype=torch.int64)
    sd["t2d"] = torch.zeros(VOCAB, dtype=torch.bool)
    return sd


def bin_head(root, name: str, aux: int = 3, **kw):
    d = make_dir(root, name, eagle3_cfg(H, VOCAB, DRAFT_VOCAB))
    torch.save(head_state(aux, **kw), d / "pytorch_model.bin")
    return d


def st_twin(root, name: str, sd) -> os.PathLike:
    """The same head as safetensors (header only), for comparing findings."""
    dt = {torch.bfloat16: "BF16", torch.int64: "I64", torch.bool: "BOOL", torch.float32: "F32"}
    return make_dir(root, name, eagle3_cfg(H, VOCAB, DRAFT_VOCAB),
                    {k: (dt[v.dtype], list(v.shape)) for k, v in sd.items()})


def messages(result, path) -> list[tuple[str, str, str]]:
    return [(f.code, f.message.replace(str(path), "D"), f.fix.replace(str(path), "D")) for f in result.findings]


def run_cli(*args, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sglang_patches", "preflight", *map(str, args)], cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------- the shapes, as with safetensors

def test_a_bin_head_built_for_three_aux_layers_passes(tmp_path):
    t = make_dir(tmp_path, "t", TARGET)
    d = bin_head(tmp_path, "d3")
    r = run_preflight(t, d, "EAGLE3")
    assert r.ok and codes(r) == [] and r.fc_shape == (H, 3 * H), r.findings
    assert r.to_dict()["draft"]["bin_files"] == 1 and r.safetensors_files == 0
    assert only(run_preflight(t, d, "EAGLE"), "SP001")  # the mix-up is now seen from the fc weight too


def test_a_bin_head_built_for_two_aux_layers_fails_like_safetensors(tmp_path):
    t = make_dir(tmp_path, "t", TARGET)
    d = bin_head(tmp_path, "d2", aux=2)
    r = run_preflight(t, d, "EAGLE3")
    assert not r.ok and codes(r) == ["SP003", "SP003"], r.findings
    assert f"fc input width {2 * H} != target hidden {H} x 3 aux layers" in r.findings[1].message
    twin = st_twin(tmp_path, "st", head_state(2))
    assert messages(r, d) == messages(run_preflight(t, twin, "EAGLE3"), twin)


def test_a_bin_head_with_a_wrong_d2t_is_named(tmp_path):
    t = make_dir(tmp_path, "t", TARGET)
    d = bin_head(tmp_path, "dv", d2t=50)
    f = only(run_preflight(t, d, "EAGLE3"), "SP007")
    assert f"d2t has shape [50], expected [{DRAFT_VOCAB}] (draft_vocab_size)" in f.message


@pytest.mark.parametrize("aux, ok", [(3, True), (2, False)])
def test_sharded_bin_with_an_index(tmp_path, aux, ok):
    t = make_dir(tmp_path, "t", TARGET)
    d = make_dir(tmp_path, "d", eagle3_cfg(H, VOCAB, DRAFT_VOCAB))
    sd = head_state(aux)
    names = list(sd)
    shards = {"pytorch_model-00001-of-00002.bin": names[:1], "pytorch_model-00002-of-00002.bin": names[1:]}
    for shard, keys in shards.items():
        torch.save({k: sd[k] for k in keys}, d / shard)
    (d / "pytorch_model.bin.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {k: s for s, ks in shards.items() for k in ks}}))
    (d / "training_args.bin").write_bytes(b"not weights")  # SGLang skips it; so does preflight
    r = run_preflight(t, d, "EAGLE3")
    assert r.ok is ok and r.to_dict()["draft"]["bin_files"] == 2 and r.fc_shape == (H, aux * H), r.findings
    assert ("SP003" in codes(r)) is not ok
    os.remove(d / "pytorch_model-00002-of-00002.bin")
    with pytest.raises(Exception, match="index names 1 missing shard file"):
        run_preflight(t, d, "EAGLE3")


def test_safetensors_win_over_a_bin_beside_them(tmp_path):
    t = make_dir(tmp_path, "t", TARGET)
    d = st_twin(tmp_path, "d", head_state(3))
    torch.save(head_state(2), d / "pytorch_model.bin")  # SGLang loads the safetensors and never this
    r = run_preflight(t, d, "EAGLE3")
    assert r.ok and r.fc_shape == (H, 3 * H) and r.to_dict()["draft"]["bin_files"] == 0


def test_a_tensor_past_its_storage_is_a_damaged_file(tmp_path):
    d = bin_head(tmp_path, "d")
    raw = {}
    with zipfile.ZipFile(d / "pytorch_model.bin") as zf:
        for info in zf.infolist():
            raw[info.filename] = zf.read(info)
    fc_data = next(n for n in raw if n.endswith("/data/0"))
    raw[fc_data] = raw[fc_data][:10]  # the fc storage cut short
    with zipfile.ZipFile(d / "pytorch_model.bin", "w", zipfile.ZIP_STORED) as zf:
        for name, data in raw.items():
            zf.writestr(name, data)
    with pytest.raises(TorchCheckpointError, match=r"tensor 'fc.weight': storage data/0 has 10 bytes of \d+; "
                                                   "re-download it"):
        read_bin_header(d / "pytorch_model.bin")


# ---------------------------------------------------------------- SP009 only without readable weights

def test_sp009_without_any_weight_file_and_for_the_legacy_format(tmp_path):
    t = make_dir(tmp_path, "t", TARGET)
    d = make_dir(tmp_path, "none", eagle3_cfg(H, VOCAB, DRAFT_VOCAB))
    f = only(run_preflight(t, d, "EAGLE3"), "SP009")
    assert "has no .safetensors or .bin weight files" in f.message
    (d / "training_args.bin").write_bytes(b"x")  # not weights: still none
    assert codes(run_preflight(t, d, "EAGLE3")) == ["SP009"]
    legacy = make_dir(tmp_path, "legacy", eagle3_cfg(H, VOCAB, DRAFT_VOCAB))
    torch.save(head_state(2), legacy / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    r = run_preflight(t, legacy, "EAGLE3")
    assert r.ok and codes(r) == ["SP009"]
    assert "pytorch_model.bin is in torch's legacy (non-zip, before 1.6) format" in r.findings[0].message
    assert "re-save it with torch.save" in r.findings[0].fix
    # dummy drafter weights: no file is read, as with safetensors
    r = run_preflight(t, bin_head(tmp_path, "dummy", aux=2), "EAGLE3", load_format="dummy")
    assert codes(r) == ["SP010"] and "its 1 .bin file(s) are not read" in r.notes[0]


@pytest.mark.parametrize("content, needle", [
    (b"", "not a PyTorch checkpoint (neither torch.save's zip nor its legacy format; empty); re-download it"),
    (b"<html>rate limited</html>", "not a PyTorch checkpoint (neither torch.save's zip nor its legacy format; "
                                   "damaged, or another kind of file); re-download it"),
])
def test_a_damaged_bin_is_one_line(tmp_path, content, needle):
    t = make_dir(tmp_path, "t", TARGET)
    d = make_dir(tmp_path, "d", eagle3_cfg(H, VOCAB, DRAFT_VOCAB))
    (d / "pytorch_model.bin").write_bytes(content)
    r = run_cli("--model-path", t, "--speculative-draft-model-path", d, "--speculative-algorithm", "EAGLE3")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [f"sglang-patches: error: {d / 'pytorch_model.bin'}: {needle}"]


def test_a_truncated_bin_is_one_line(tmp_path):
    d = bin_head(tmp_path, "d")
    data = (d / "pytorch_model.bin").read_bytes()
    (d / "pytorch_model.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(TorchCheckpointError, match="re-download it"):
        read_bin_header(d / "pytorch_model.bin")


# ---------------------------------------------------------------- a pickle that would run code

class _Touch:
    """Pickles as a call of os.system: what a booby-trapped checkpoint does on torch.load(weights_only=False)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def malicious_bin(path, marker, protocol: int = 2) -> None:
    """A torch.save-shaped zip whose data.pkl calls os.system while a tensor entry looks normal."""
    state = {"fc.weight": _Touch(marker)}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", pickle.dumps(state, protocol=protocol))
        zf.writestr("archive/version", "3\n")


@pytest.mark.parametrize("protocol", [2, 4])
def test_a_pickle_that_would_run_code_is_refused_and_never_run(tmp_path, monkeypatch, protocol):
    t = make_dir(tmp_path, "t", TARGET)
    d = make_dir(tmp_path, "d", eagle3_cfg(H, VOCAB, DRAFT_VOCAB))
    malicious_bin(d / "pytorch_model.bin", "pwned", protocol)  # `touch pwned` in the reader's directory
    live, here = tmp_path / "live", tmp_path / "here"
    live.mkdir(), here.mkdir()
    # the trap is live: a plain unpickler of this very data.pkl runs it (in a child, in another directory)
    with zipfile.ZipFile(d / "pytorch_model.bin") as zf:
        payload = zf.read("archive/data.pkl")
    subprocess.run([sys.executable, "-c", "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"],
                   input=payload, cwd=live, check=True, timeout=60)
    assert (live / "pwned").exists()
    before = (d / "pytorch_model.bin").read_bytes()
    r = run_cli("--model-path", t, "--speculative-draft-model-path", d, "--speculative-algorithm", "EAGLE3", cwd=here)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines == [f"sglang-patches: error: {d / 'pytorch_model.bin'}: its pickle references {os.system.__module__}"
                     ".system, refusing to load it (never executed); get the drafter as safetensors from a source "
                     "you trust"], lines
    assert not (here / "pwned").exists() and (d / "pytorch_model.bin").read_bytes() == before
    monkeypatch.chdir(here)
    with pytest.raises(TorchCheckpointError, match=r"references (__builtin__|builtins)\.eval, refusing"):
        evil = tmp_path / "eval.bin"
        with zipfile.ZipFile(evil, "w") as zf:  # GLOBAL builtins.eval, then REDUCE on ("open('pwned', 'w')",)
            zf.writestr("archive/data.pkl", pickle.dumps(_Eval("open('pwned', 'w')"), protocol=protocol))
        read_bin_header(evil)
    assert not list(here.iterdir())


class _Eval:
    def __init__(self, src):
        self.src = src

    def __reduce__(self):
        return eval, (self.src,)
