"""Header-only safetensors reading: single file, index-sharded, glob, and every malformed case."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from sglang_patches.errors import UserError
from sglang_patches.offline.preflight.safetensors_header import SafetensorsHeaderError, TensorInfo, checkpoint_files, find_tensor, read_checkpoint_headers, read_header

from preflight_models import write_st  # noqa: E402  (one hand-written safetensors writer for the tests)


def write_raw(path: Path, header_bytes: bytes, length: int | None = None, extra: bytes = b"") -> Path:
    path.write_bytes(struct.pack("<Q", len(header_bytes) if length is None else length) + header_bytes + extra)
    return path


def test_single_file_header(tmp_path):
    f = write_st(tmp_path / "model.safetensors", {"fc.weight": ("BF16", [4096, 12288]), "d2t": ("I64", [32000])})
    tensors = read_header(f)
    assert tensors == {"fc.weight": TensorInfo("BF16", (4096, 12288)), "d2t": TensorInfo("I64", (32000,))}
    dtype, shape = tensors["fc.weight"]  # plain (dtype, shape) tuple
    assert (dtype, shape) == ("BF16", (4096, 12288))
    assert read_checkpoint_headers(tmp_path) == tensors


def test_real_safetensors_package_compat(tmp_path):
    np = pytest.importorskip("numpy")
    st = pytest.importorskip("safetensors.numpy")
    st.save_file({"model.fc.weight": np.zeros((8, 24), dtype=np.float16), "d2t": np.zeros((5,), dtype=np.int64)},
                 str(tmp_path / "model.safetensors"))
    tensors = read_checkpoint_headers(tmp_path)
    assert tensors["model.fc.weight"] == ("F16", (8, 24))
    assert tensors["d2t"] == ("I64", (5,))
    assert find_tensor(tensors, "fc.weight") == ("model.fc.weight", ("F16", (8, 24)))


def test_sharded_with_index(tmp_path):
    write_st(tmp_path / "model-00001-of-00002.safetensors", {"lm_head.weight": ("BF16", [32000, 4096])})
    write_st(tmp_path / "model-00002-of-00002.safetensors", {"model.fc.weight": ("BF16", [4096, 12288])})
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": {
        "lm_head.weight": "model-00001-of-00002.safetensors",
        "model.fc.weight": "model-00002-of-00002.safetensors"}}))
    assert [p.name for p in checkpoint_files(tmp_path)] == ["model-00001-of-00002.safetensors",
                                                           "model-00002-of-00002.safetensors"]
    tensors = read_checkpoint_headers(tmp_path)
    assert set(tensors) == {"lm_head.weight", "model.fc.weight"}
    assert find_tensor(tensors, "fc.weight")[1].shape == (4096, 12288)


def test_glob_without_index_and_empty_dir(tmp_path):
    assert checkpoint_files(tmp_path) == [] and read_checkpoint_headers(tmp_path) == {}
    write_st(tmp_path / "a.safetensors", {"x": ("F32", [2])})
    write_st(tmp_path / "b.safetensors", {"y": ("F32", [3])})
    assert read_checkpoint_headers(tmp_path) == {"x": ("F32", (2,)), "y": ("F32", (3,))}


def test_model_safetensors_preferred_over_glob(tmp_path):
    write_st(tmp_path / "model.safetensors", {"x": ("F32", [2])})
    write_st(tmp_path / "other.safetensors", {"y": ("F32", [3])})
    assert list(read_checkpoint_headers(tmp_path)) == ["x"]


def test_find_tensor_prefers_shortest_and_exact_suffix():
    t = {"model.layers.0.mlp.fc.weight": TensorInfo("F32", (1,)), "model.fc.weight": TensorInfo("F32", (2,)),
         "fc1.weight": TensorInfo("F32", (3,))}
    assert find_tensor(t, "fc.weight")[0] == "model.fc.weight"
    assert find_tensor({"fc1.weight": TensorInfo("F32", (3,))}, "fc.weight") is None


@pytest.mark.parametrize("make, reason", [
    (lambda p: write_raw(p, b"", length=0), "corrupt safetensors header"),
    (lambda p: write_raw(p, b"{}", length=2**40), "corrupt safetensors header"),
    (lambda p: write_raw(p, b"not json at all!"), "corrupt safetensors header"),
    (lambda p: write_raw(p, b"\xff\xfe\xfd\xfc"), "corrupt safetensors header"),
    (lambda p: write_raw(p, b"[1, 2, 3]"), "not an object"),
    (lambda p: write_raw(p, json.dumps({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}).encode()),
     "has shape"),
    (lambda p: write_raw(p, json.dumps({"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}).encode()),
     "data_offsets"),
    (lambda p: write_raw(p, json.dumps({"x": {"shape": [1], "data_offsets": [0, 4]}}).encode()), "no dtype"),
    (lambda p: write_raw(p, json.dumps({"x": 3}).encode()), "not an object"),
])
def test_corrupt_header(tmp_path, make, reason):
    f = make(tmp_path / "model.safetensors")
    with pytest.raises(SafetensorsHeaderError) as exc:
        read_header(f)
    assert reason in str(exc.value) and "\n" not in str(exc.value)
    assert isinstance(exc.value, UserError) and exc.value.code == 2


@pytest.mark.parametrize("make", [
    lambda p: p.write_bytes(b"\x10\x00\x00"),  # shorter than the 8-byte length
    lambda p: write_raw(p, b'{"x": {}}', length=4096),  # header cut off
    lambda p: write_st(p, {"fc.weight": ("BF16", [4096, 12288])}, data=False),  # data cut off
])
def test_truncated_file(tmp_path, make):
    f = tmp_path / "model.safetensors"
    make(f)
    with pytest.raises(SafetensorsHeaderError, match="truncated"):
        read_header(f)


def test_index_naming_missing_shards(tmp_path):
    write_st(tmp_path / "model-00001-of-00003.safetensors", {"x": ("F32", [1])})
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "x": "model-00001-of-00003.safetensors", "y": "model-00002-of-00003.safetensors",
        "z": "model-00003-of-00003.safetensors"}}))
    with pytest.raises(SafetensorsHeaderError, match=r"2 missing shard file\(s\): model-00002-of-00003"):
        read_checkpoint_headers(tmp_path)


def test_index_tensor_not_in_shard_and_duplicates(tmp_path):
    write_st(tmp_path / "s1.safetensors", {"x": ("F32", [1])})
    write_st(tmp_path / "s2.safetensors", {"x": ("F32", [1])})
    idx = tmp_path / "model.safetensors.index.json"
    idx.write_text(json.dumps({"weight_map": {"x": "s1.safetensors", "y": "s1.safetensors"}}))
    with pytest.raises(SafetensorsHeaderError, match="not found in their shard"):
        read_checkpoint_headers(tmp_path)
    idx.write_text(json.dumps({"weight_map": {"x": "s1.safetensors", "w": "s2.safetensors"}}))
    with pytest.raises(SafetensorsHeaderError, match="also in"):
        read_checkpoint_headers(tmp_path)


@pytest.mark.parametrize("text, reason", [("{not json", "not valid JSON"), ('{"metadata": {}}', "no weight_map"),
                                          ('{"weight_map": {"x": 1}}', "must map")])
def test_bad_index(tmp_path, text, reason):
    (tmp_path / "model.safetensors.index.json").write_text(text)
    with pytest.raises(SafetensorsHeaderError, match=reason):
        read_checkpoint_headers(tmp_path)


def test_unreadable_file(tmp_path):
    f = tmp_path / "model.safetensors"
    f.mkdir()  # a directory named like the file: open() fails even as root
    with pytest.raises(SafetensorsHeaderError, match="cannot read"):
        read_header(f)
