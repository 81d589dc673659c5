"""Make the CUDA-only torchvision wheel importable beside a CPU torch.

The only torchvision for torch 2.13 ships a CUDA `_C.so` that cannot load next to CPU torch;
two unguarded `register_fake("torchvision::nms" / "qnms")` decorators then raise at import.
SGLang imports `torchvision.io` at top level, so we guard those two decorators. Idempotent.
"""
import importlib.util
import pathlib
import re
import sys

spec = importlib.util.find_spec("torchvision")
if spec is None or not spec.submodule_search_locations:
    sys.exit("fix_torchvision_cpu: torchvision is not installed")
path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "_meta_registrations.py"
src = path.read_text()
guard = "# sglang_patches: guarded for CPU torch"
if guard in src:
    sys.exit(0)
new, n = re.subn(
    r'^@torch\.library\.register_fake\("torchvision::(nms|qnms)"\)$',
    lambda m: f'@(torch.library.register_fake("torchvision::{m.group(1)}") '
              f'if torchvision.extension._has_ops() else (lambda f: f))  {guard}',
    src, flags=re.M)
if n == 0:
    print(f"fix_torchvision_cpu: no unguarded nms registrations in {path}; nothing to do")
    sys.exit(0)
if "import torchvision" not in new:
    new = "import torchvision\n" + new
path.write_text(new)
print(f"fix_torchvision_cpu: guarded {n} registrations in {path}")
