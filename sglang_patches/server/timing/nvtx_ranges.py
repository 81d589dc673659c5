"""NVTX push/pop for the `spec.*` ranges: the `nvtx` package if present, else torch.cuda.nvtx.

Without a profiler attached these are no-ops costing well under a microsecond.
"""
from __future__ import annotations

try:
    import nvtx as _nvtx

    _DOMAIN = _nvtx.get_domain("sglang_patches")

    def push_range(name: str) -> None:
        _nvtx.push_range(name, domain="sglang_patches")

    def pop_range() -> None:
        _nvtx.pop_range(domain="sglang_patches")

except Exception:  # noqa: BLE001 - nvtx missing or broken
    try:
        import torch.cuda.nvtx as _tnvtx

        def push_range(name: str) -> None:
            _tnvtx.range_push(name)

        def pop_range() -> None:
            _tnvtx.range_pop()

    except Exception:  # noqa: BLE001
        def push_range(name: str) -> None:
            return None

        def pop_range() -> None:
            return None
