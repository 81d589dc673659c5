"""What SGLang will compile at the server's first forward, said before it starts.

SGLang builds some kernels with nvcc the first time a forward needs them and caches the result (the
compat file's JIT_CACHE: where, and the module's name pattern). The INT4 W4A16 MoE path that Kimi-K2.5's
published checkpoint takes (compressed-tensors, 4-bit integer weights on the routed experts) runs
`moe_wna16_marlin`, whose compile took 233 s on an H100, one CPU core busy, while the server printed
nothing and answered nothing: a user reads a hang. The launcher says so first when the cache lacks it.
Reads config.json only (JSON, never a pickle); any problem reading it means no note.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from sglang_patches.offline.preflight.model_info import NESTED_TEXT_KEYS

WNA16_MOE_MODULE = "moe_wna16_marlin"
EXPERT_KEYS = ("n_routed_experts", "num_experts", "num_local_experts")


def int4_moe(config: dict) -> bool:
    """True for a mixture-of-experts config whose quantization_config is compressed-tensors with 4-bit
    integer weights: SGLang serves those experts with its WNA16 MoE method. A multimodal wrapper's
    text model (Kimi-K2.5's text_config) counts."""
    parts = [config] + [config[k] for k in NESTED_TEXT_KEYS if isinstance(config.get(k), dict)]
    experts = any(isinstance(p.get(k), int) and p[k] > 0 for p in parts for k in EXPERT_KEYS)
    quant = next((p["quantization_config"] for p in parts if isinstance(p.get("quantization_config"), dict)), None)
    if not experts or quant is None or quant.get("quant_method") != "compressed-tensors":
        return False
    groups = quant.get("config_groups") if isinstance(quant.get("config_groups"), dict) else {}
    # W4A16: 4-bit integer weights, activations left as they are (a W4A8 scheme takes another method)
    return any(isinstance(g, dict) and isinstance(g.get("weights"), dict) and g["weights"].get("num_bits") == 4
               and g["weights"].get("type", "int") == "int" and g.get("input_activations") is None
               for g in groups.values())


def compiled(module: str, jit_cache: tuple[str, str, str], environ=os.environ) -> bool:
    """Whether SGLang's JIT cache holds `module` already (a build of any argument set)."""
    var, default, pattern = jit_cache
    root = Path(environ.get(var) or default).expanduser()
    try:
        return any(root.glob(pattern.format(module=module)))
    except OSError:
        return False


def note(model_dir: str | None, jit_cache: tuple[str, str, str] | None, environ=os.environ) -> str | None:
    """The launcher's one line for a target whose first forward compiles an uncached kernel, else None."""
    if not model_dir or jit_cache is None:
        return None
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict) or not int4_moe(config) or compiled(WNA16_MOE_MODULE, jit_cache, environ):
        return None
    var, default, _ = jit_cache
    return (f"the target's INT4 experts run SGLang's WNA16 MoE kernel, which SGLang compiles at the first forward "
            f"(233 s on an H100; the server is silent meanwhile), once per machine: it is cached in "
            f"{environ.get(var) or default} ({var})")
