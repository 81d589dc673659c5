"""Which target layers SGLang captures for an EAGLE-3 drafter, per target model class.

One pure function shared by preflight (from config.json) and the in-server checks (from the loaded
target's class name), so both name the same layers. SGLang 0.5.17 and 0.5.23 agree:
- `set_eagle3_layers_to_capture(None)`, every class: `[2, L // 2, L - 3]`;
- given ids (the drafter's `eagle_config.eagle_aux_hidden_state_layer_ids`), Llama-style classes
  (models/llama.py, qwen3_moe.py, ...): `id + 1` for each;
- DeepSeek-style classes (models/deepseek_v2.py: DeepseekV2/V3/V32ForCausalLM, and the classes that
  delegate to them or copy the rule: KimiK25ForConditionalGeneration, Glm4MoeLiteForCausalLM): ids
  starting at 1 are shifted by one, any other list is taken as is.
The model's forward captures the input of layer i when `i in layers_to_capture` and i < L, so a
repeated index or one >= L yields fewer states than the drafter's fc expects.
"""
from __future__ import annotations

from typing import Iterable

DEFAULT_AUX_LAYERS = 3
# Class-name prefixes of the targets whose given ids follow the DeepSeek rule.
DEEPSEEK_RULE_PREFIXES = ("Deepseek", "KimiK25", "Glm4MoeLite")


def deepseek_rule(architectures: Iterable[str]) -> bool:
    return any(a.startswith(DEEPSEEK_RULE_PREFIXES) for a in architectures)


def default_capture(num_layers: int) -> list[int]:
    return [2, num_layers // 2, num_layers - 3]


def capture_indices(architectures: Iterable[str], num_layers: int, ids) -> list[int]:
    """SGLang's `layers_to_capture` for a target of these classes and `num_layers` layers, given the
    drafter's aux layer ids (None: SGLang's default)."""
    if ids is None:
        return default_capture(num_layers)
    ids = list(ids)
    if deepseek_rule(architectures) and not (ids and ids[0] == 1):
        return ids
    return [i + 1 for i in ids]


def distinct_captured(architectures: Iterable[str], num_layers: int, ids) -> int:
    """How many states the target sends: distinct capture indices inside 0..L-1."""
    return len({c for c in capture_indices(architectures, num_layers, ids) if 0 <= c < num_layers})
