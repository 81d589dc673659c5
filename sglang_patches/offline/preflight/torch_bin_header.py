"""Read tensor names, dtypes and shapes from a PyTorch checkpoint (`pytorch_model.bin`, or `.bin`
shards named by `pytorch_model.bin.index.json`) without loading tensor data and without running
anything from the file.

`torch.save` writes a zip: `<prefix>/data.pkl` (the pickled state dict) beside one entry per
storage, `<prefix>/data/<key>` (raw bytes). The pickle rebuilds each tensor by calling
`torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)` (v3 adds a dtype, for dtypes
with no typed storage class) on a storage it gets through `persistent_load(("storage", <torch
XStorage class>, key, location, numel))`. Here `data.pkl` is read by a `pickle.Unpickler` whose
`find_class` resolves only those names (the rebuild functions, the storage classes, torch dtypes,
`collections.OrderedDict`), each to a local function or marker that records the dtype and shape;
any other name (`os.system`, `builtins.eval`, ...) refuses the file before a single call is made.
No torch import; the storages are only checked to exist and to be long enough (a truncated download).

A pickle needs a callable to do anything, and every callable it can reach is in ALLOWED below.
Torch's legacy (pre-1.6, non-zip) format is not read: the shapes are then left unchecked (SP009).

Which files: the index's shards when `pytorch_model.bin.index.json` exists, else every `*.bin` but
the trainer's (SGLang's `filter_files_not_needed_for_inference`), as SGLang loads them when a
drafter has no safetensors.
"""
from __future__ import annotations

import io
import os
import pickle
import zipfile
from pathlib import Path
from typing import NamedTuple, NoReturn

from sglang_patches.errors import UserError
from sglang_patches.offline.preflight.safetensors_header import (DTYPE_BITS, TensorInfo, check_shape, merge_shards,
                                                                  read_index)

BIN_INDEX = "pytorch_model.bin.index.json"
NOT_WEIGHTS = ("training_args.bin", "optimizer.bin")  # SGLang leaves these out (weight_utils.py)
MAX_PICKLE_BYTES = 256 << 20  # a state dict's pickle is a few KB per tensor
SAFE_FIX = "get the drafter as safetensors from a source you trust"


class TorchCheckpointError(UserError):
    """A .bin that cannot be read for shapes (damaged), or whose pickle reaches for anything but
    tensor rebuilding (refused, never run). One line naming the file; exit 2 through the CLI."""


class LegacyFormat(Exception):
    """A .bin in torch's legacy non-zip format: readable by torch, not parsed here (SP009 says so)."""


def _fail(path, reason: str) -> NoReturn:
    raise TorchCheckpointError(f"{path}: {reason}")


# ---------------------------------------------------------------- the names a state dict's pickle uses

class _DType(NamedTuple):
    """A storage class or torch dtype, resolved to its safetensors dtype name (None: untyped bytes)."""

    code: str | None


class _Storage(NamedTuple):
    dtype: str | None  # None: an UntypedStorage, numel in bytes
    key: str
    numel: int


class _Tensor(NamedTuple):
    dtype: str
    shape: tuple[int, ...]
    storage: _Storage
    offset: int
    stride: tuple[int, ...]


class _StateDict(dict):
    """Stands in for collections.OrderedDict (a state dict; its `_metadata` attribute lands in __dict__)."""


STORAGE_DTYPES = {"Float": "F32", "Double": "F64", "Half": "F16", "BFloat16": "BF16", "Long": "I64",
                  "Int": "I32", "Short": "I16", "Char": "I8", "Byte": "U8", "Bool": "BOOL", "ComplexFloat": "C64"}
TORCH_DTYPES = {"float32": "F32", "float": "F32", "float64": "F64", "double": "F64", "float16": "F16",
                "half": "F16", "bfloat16": "BF16", "int64": "I64", "long": "I64", "int32": "I32", "int": "I32",
                "int16": "I16", "short": "I16", "int8": "I8", "uint8": "U8", "uint16": "U16", "uint32": "U32",
                "uint64": "U64", "bool": "BOOL", "complex64": "C64", "float8_e4m3fn": "F8_E4M3",
                "float8_e5m2": "F8_E5M2", "float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2fnuz": "F8_E5M2FNUZ",
                "float8_e8m0fnu": "F8_E8M0"}


def _ints(x, what: str) -> tuple[int, ...]:
    if not isinstance(x, tuple) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in x):
        raise ValueError(f"tensor {what} {x!r} is not a tuple of integers >= 0")
    return x


def _rebuild_tensor(storage, offset, size, stride, requires_grad=False, hooks=None, metadata=None, *, dtype=None):
    if not isinstance(storage, _Storage):
        raise ValueError("a tensor without a storage")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ValueError(f"tensor storage offset {offset!r}")
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if len(size) != len(stride):
        raise ValueError(f"tensor size {size} and stride {stride} differ in rank")
    code = dtype.code if isinstance(dtype, _DType) else storage.dtype
    if code is None:
        raise ValueError("an untyped storage with no dtype")
    return _Tensor(code, size, storage, offset, stride)


def _rebuild_tensor_v3(storage, offset, size, stride, requires_grad, hooks, dtype, metadata=None):
    if not isinstance(dtype, _DType):
        raise ValueError(f"tensor dtype {dtype!r}")
    return _rebuild_tensor(storage, offset, size, stride, dtype=dtype)


def _rebuild_parameter(data, requires_grad=False, hooks=None, state=None):
    return data


ALLOWED = {("collections", "OrderedDict"): _StateDict,
           ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
           ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
           ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
           ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
           ("torch", "UntypedStorage"): _DType(None), ("torch.storage", "UntypedStorage"): _DType(None),
           **{("torch", f"{k}Storage"): _DType(v) for k, v in STORAGE_DTYPES.items()},
           **{("torch", k): _DType(v) for k, v in TORCH_DTYPES.items()}}


class _Refused(Exception):
    pass


class _ShapeUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        hit = ALLOWED.get((module, name))
        if hit is None:
            raise _Refused(f"{module}.{name}"[:120])
        return hit

    def persistent_load(self, pid):
        # torch.serialization's persistent id: ("storage", storage class, key, location, numel)
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _DType)
                and isinstance(pid[2], str) and isinstance(pid[4], int) and not isinstance(pid[4], bool)
                and pid[4] >= 0):
            raise ValueError(f"persistent id {str(pid)[:80]} is not a torch storage")
        return _Storage(pid[1].code, pid[2], pid[4])


# ---------------------------------------------------------------- one file

def read_bin_header(path: str | os.PathLike) -> dict[str, TensorInfo]:
    """`{tensor_name: TensorInfo(dtype, shape)}` of one torch.save zip file; LegacyFormat for the
    old non-zip format, TorchCheckpointError for a damaged file or a pickle that is refused."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
        if not zipfile.is_zipfile(path):
            if head[:1] == b"\x80":  # a pickle PROTO opcode first: torch's legacy serialization
                raise LegacyFormat(f"{path.name} is in torch's legacy (non-zip, before 1.6) format, which preflight "
                                   "does not parse")
            _fail(path, "not a PyTorch checkpoint (neither torch.save's zip nor its legacy format; "
                        f"{'empty' if not head else 'damaged, or another kind of file'}); re-download it")
        with zipfile.ZipFile(path) as zf:
            infos = {i.filename: i for i in zf.infolist()}
            pkls = [n for n in infos if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(pkls) != 1:
                _fail(path, f"a zip with {len(pkls)} data.pkl entries, not one torch.save checkpoint; re-download it")
            prefix = pkls[0][: -len("data.pkl")]
            if infos[pkls[0]].file_size > MAX_PICKLE_BYTES:
                _fail(path, f"its data.pkl is {infos[pkls[0]].file_size} bytes, far more than a state dict's pickle")
            raw = zf.read(pkls[0])
    except (OSError, zipfile.BadZipFile, EOFError) as err:
        _fail(path, f"cannot read the checkpoint ({getattr(err, 'strerror', None) or err}); re-download it")
    try:
        obj = _ShapeUnpickler(io.BytesIO(raw)).load()
    except _Refused as err:
        _fail(path, f"its pickle references {err}, refusing to load it (never executed); {SAFE_FIX}")
    except RecursionError:
        _fail(path, "its pickle is nested too deeply to be a state dict; re-download it")
    except Exception as err:  # noqa: BLE001 - any unpickling failure of our own stand-ins: a damaged file
        _fail(path, f"its pickle is not a readable state dict ({type(err).__name__}: {str(err)[:100]}); "
                    "re-download it")
    if not isinstance(obj, dict):
        _fail(path, f"its pickle holds a {type(obj).__name__}, not a state dict of tensors")
    tensors: dict[str, TensorInfo] = {}
    for name, t in obj.items():
        if not isinstance(t, _Tensor):
            continue  # SGLang's loader yields every item; only tensors have shapes to check
        if not isinstance(name, str):
            _fail(path, f"tensor key {name!r} is not a string")
        _check_storage(path, prefix, infos, name, t)
        check_shape(path, name, list(t.shape), TorchCheckpointError)
        tensors[name] = TensorInfo(t.dtype, t.shape)
    return tensors


def _check_storage(path: Path, prefix: str, infos: dict, name: str, t: _Tensor) -> None:
    """The tensor's bytes lie inside its storage, and the storage's zip entry holds them all."""
    st = t.storage
    item = DTYPE_BITS.get(t.dtype, 8) // 8 or 1
    entry = infos.get(f"{prefix}data/{st.key}")
    have = st.numel * (1 if st.dtype is None else DTYPE_BITS.get(st.dtype, 8) // 8 or 1)
    if entry is None:
        _fail(path, f"tensor {name!r}: its storage data/{st.key} is missing from the zip; re-download it")
    if entry.file_size < have:
        _fail(path, f"tensor {name!r}: storage data/{st.key} has {entry.file_size} bytes of {have}; re-download it")
    extent = 0 if 0 in t.shape else 1 + sum((d - 1) * s for d, s in zip(t.shape, t.stride))
    if (t.offset + extent) * item > have:
        _fail(path, f"tensor {name!r} {list(t.shape)} reaches past its storage's {have} bytes; re-download it")


# ---------------------------------------------------------------- a checkpoint directory

def bin_files(directory: str | os.PathLike) -> list[Path]:
    """The .bin files SGLang loads from `directory` when it has no safetensors (empty: none)."""
    directory = Path(directory)
    index = directory / BIN_INDEX
    if index.is_file():
        return [directory / shard for shard in sorted(set(read_index(index).values()))]
    try:
        return sorted(p for p in directory.glob("*.bin") if p.is_file() and p.name not in NOT_WEIGHTS)
    except OSError as err:
        _fail(directory, f"cannot list directory ({err.strerror or err})")


def read_bin_checkpoint(directory: str | os.PathLike) -> tuple[dict[str, TensorInfo] | None, str | None]:
    """(merged tensors of every .bin of `directory`, None) or, with a legacy-format file among them,
    (None, why the shapes were not read)."""
    directory = Path(directory)
    index = directory / BIN_INDEX
    weight_map = read_index(index) if index.is_file() else None
    try:
        return merge_shards(bin_files(directory), read_bin_header, index, weight_map, _fail), None
    except LegacyFormat as why:
        return None, str(why)
