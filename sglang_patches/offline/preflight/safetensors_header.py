"""Read safetensors *headers* only: tensor names, dtypes and shapes, never tensor data.

File layout (https://github.com/huggingface/safetensors#format): 8 bytes little-endian u64 `N`, then
`N` bytes of UTF-8 JSON `{name: {"dtype": str, "shape": [int], "data_offsets": [begin, end]}, ...,
"__metadata__": {...}}`, then the data buffer. We read 8 + N bytes and `stat()` the file so that a
truncated download is caught without reading the data.

A checkpoint directory is resolved in this order: `model.safetensors.index.json` (its `weight_map`
names the shards), then `model.safetensors`, then every `*.safetensors` in the directory.
"""
from __future__ import annotations

from typing import NoReturn

import json
import os
import struct
from pathlib import Path
from typing import NamedTuple

from sglang_patches.errors import UserError

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
# The reference implementation refuses headers above 100 MB; so do we (it also bounds our read).
MAX_HEADER_BYTES = 100_000_000
# Bits per element of every dtype the safetensors format (0.8) defines; any other name is refused,
# as the `safetensors` library refuses it.
DTYPE_BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
              "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
              "I32": 32, "U32": 32, "F32": 32, "F64": 64, "I64": 64, "U64": 64, "C64": 64}
# Tensors preflight reads the shape of: (name suffix, rank). A zero or missing dimension is refused.
CHECKED_SHAPES = (("fc.weight", 2), ("lm_head.weight", 2), ("embed_tokens.weight", 2), ("d2t", 1), ("t2d", 1))


class TensorInfo(NamedTuple):
    """`(dtype, shape)` of one tensor, as written in the header (e.g. `("BF16", (4096, 12288))`)."""

    dtype: str
    shape: tuple[int, ...]


class SafetensorsHeaderError(UserError):
    """A safetensors file or index is unusable: corrupt header, truncated file, missing shard.

    The message is one line naming the file and the reason; it exits 2 through the CLI.
    """


def _fail(path: Path | str, reason: str) -> NoReturn:  # noqa: F821
    raise SafetensorsHeaderError(f"{path}: {reason}")


def read_header(path: str | os.PathLike) -> dict[str, TensorInfo]:
    """Return `{tensor_name: TensorInfo(dtype, shape)}` for one `.safetensors` file."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                _fail(path, f"truncated safetensors file ({size} bytes, shorter than the 8-byte header length)")
            (n,) = struct.unpack("<Q", head)
            if n == 0 or n > MAX_HEADER_BYTES:
                _fail(path, f"corrupt safetensors header (header length field is {n} bytes)")
            if 8 + n > size:
                _fail(path, f"truncated safetensors file (header says {n} bytes of JSON, file has {size} bytes)")
            raw = fh.read(n)
    except OSError as err:
        _fail(path, f"cannot read safetensors file ({err.strerror or err})")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        _fail(path, f"corrupt safetensors header (not valid UTF-8 JSON: {str(err).splitlines()[0]})")
    except RecursionError:
        _fail(path, "corrupt safetensors header (JSON nested too deeply)")
    if not isinstance(header, dict):
        _fail(path, f"corrupt safetensors header (JSON is a {type(header).__name__}, not an object)")

    tensors: dict[str, TensorInfo] = {}
    data_end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict):
            _fail(path, f"corrupt safetensors header (entry {name!r} is not an object)")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if not isinstance(dtype, str):
            _fail(path, f"corrupt safetensors header (tensor {name!r} has no dtype)")
        if dtype not in DTYPE_BITS:
            _fail(path, f"corrupt safetensors header (tensor {name!r} has unknown dtype {dtype[:40]!r}; the "
                        "safetensors library refuses it too)")
        if not isinstance(shape, list) or not all(_is_nonneg_int(d) for d in shape):
            _fail(path, f"corrupt safetensors header (tensor {name!r} has shape {shape!r})")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(map(_is_nonneg_int, offsets))
                or offsets[0] > offsets[1]):
            _fail(path, f"corrupt safetensors header (tensor {name!r} has data_offsets {offsets!r})")
        numel = 1
        for d in shape:
            numel *= d
        if numel * DTYPE_BITS[dtype] != (offsets[1] - offsets[0]) * 8:
            _fail(path, f"corrupt safetensors header (tensor {name!r}: {dtype} {shape} needs "
                        f"{numel * DTYPE_BITS[dtype] / 8:g} bytes, data_offsets give {offsets[1] - offsets[0]})")
        check_shape(path, name, shape)
        tensors[name] = TensorInfo(dtype, tuple(shape))
        data_end = max(data_end, offsets[1])
    if 8 + n + data_end > size:
        _fail(path, f"truncated safetensors file (tensors need {8 + n + data_end} bytes, file has {size}; "
                    "re-download it)")
    return tensors


def check_shape(path, name: str, shape: list[int], error: type[UserError] = SafetensorsHeaderError) -> None:
    """Refuse a checked tensor (CHECKED_SHAPES) of the wrong rank or with a zero dimension."""
    for suffix, rank in CHECKED_SHAPES:
        if (name == suffix or name.endswith("." + suffix)) and (len(shape) != rank or 0 in shape):
            raise error(f"{path}: tensor {name!r} has shape {shape}; expected {rank} non-zero dimension(s) "
                        "(a damaged or wrongly exported checkpoint)")


def _is_nonneg_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def checkpoint_files(directory: str | os.PathLike) -> list[Path]:
    """The safetensors files that make up the checkpoint in `directory` (empty if it has none).

    With an index, every shard it names must exist; a missing one raises SafetensorsHeaderError.
    """
    directory = Path(directory)
    index = directory / INDEX_NAME
    if index.is_file():
        return [directory / shard for shard in sorted(set(read_index(index).values()))]
    if (directory / SINGLE_NAME).is_file():
        return [directory / SINGLE_NAME]
    try:
        return sorted(p for p in directory.glob("*.safetensors") if p.is_file())
    except OSError as err:
        _fail(directory, f"cannot list directory ({err.strerror or err})")


def read_index(index: Path) -> dict[str, str]:
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
    except OSError as err:
        _fail(index, f"cannot read index ({err.strerror or err})")
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        _fail(index, f"index is not valid JSON ({str(err).splitlines()[0]})")
    except RecursionError:
        _fail(index, "index is nested too deeply to be a weights index")
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        _fail(index, "index has no weight_map object")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()):
        _fail(index, "index weight_map must map tensor names to shard file names")
    missing = sorted({v for v in weight_map.values() if not (index.parent / v).is_file()})
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        _fail(index, f"index names {len(missing)} missing shard file(s): {shown}; re-download the checkpoint")
    return weight_map


def merge_shards(shards, read, index: Path, weight_map: dict | None, fail=None) -> dict[str, TensorInfo]:
    """`read(shard)` of every shard merged into one {name: TensorInfo}; a tensor in two shards, or listed in
    `weight_map` (the index's, None without one) but in no shard, is an error (`fail(path, reason)`, this
    module's by default). The safetensors and the torch .bin readers share it."""
    fail = fail or _fail
    merged: dict[str, TensorInfo] = {}
    owner: dict[str, Path] = {}
    for shard in shards:
        for name, info in read(shard).items():
            if name in merged:
                fail(shard, f"tensor {name!r} is also in {owner[name].name}")
            merged[name], owner[name] = info, shard
    if weight_map is not None:
        absent = [name for name in weight_map if name not in merged]
        if absent:
            fail(index, f"index lists {len(absent)} tensor(s) not found in their shard, e.g. "
                        f"{absent[0]!r} in {weight_map[absent[0]]}")
    return merged


def read_checkpoint_headers(directory: str | os.PathLike) -> dict[str, TensorInfo]:
    """Merge the headers of every shard of the checkpoint in `directory`.

    Returns `{}` when the directory has no safetensors files (e.g. only `pytorch_model.bin`).
    A tensor listed in the index but absent from its shard, or present in two shards, is an error.
    """
    directory = Path(directory)
    index = directory / INDEX_NAME
    weight_map = read_index(index) if index.is_file() else None
    return merge_shards(checkpoint_files(directory), read_header, index, weight_map)


def find_tensor(tensors: dict[str, TensorInfo], suffix: str) -> tuple[str, TensorInfo] | None:
    """Find `suffix` (e.g. `fc.weight`) exactly or under a prefix (`model.fc.weight`); shortest wins."""
    hits = sorted((n for n in tensors if n == suffix or n.endswith("." + suffix)), key=len)
    return (hits[0], tensors[hits[0]]) if hits else None
