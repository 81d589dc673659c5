"""sglang_patches: an overlay for SGLang EAGLE-3 speculative decoding.

Light to import: SGLang and torch load only when a feature needs them.
"""
from sglang_patches.versions import __version__

__all__ = ["__version__", "Engine"]


def __getattr__(name):
    if name == "Engine":
        from sglang_patches.engine import Engine

        return Engine
    raise AttributeError(name)
