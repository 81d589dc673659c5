"""The names `--draft-backend triton` is known by: its feature, the backends, the drafter architecture and
dtypes it serves, and the attribute that marks a drafter module in its `__dict__` (prepare.py sets it, the
forward hooks in forward.py read it)."""
from __future__ import annotations

FEATURE = "triton_draft"
BACKENDS = ("sglang", "triton")
ARCHITECTURE = "LlamaForCausalLMEagle3"
DTYPES = ("bfloat16", "float16")
FLAG = "_sglang_patches_triton_draft"
