"""draft_tp: run the EAGLE/EAGLE-3 drafter at a smaller tensor-parallel size K than the target's N
(`--draft-tp-size K`; K = 1: a replicated single-GPU drafter on every rank, no per-step collectives).

Opt-in only (not in the default feature set): the launcher enables it when `--draft-tp-size` is
given. One patch module per SGLang plumbing, picked by the compat file that serves the installed
SGLang (`PATCHES`): `patch_0517` re-groups the drafter itself (0.5.17 passes a ParallelSizes to the
draft worker), `patch_0523` supplies a DraftParallelLayout to 0.5.23's own draft-placement path.
`replicas` holds what both share (groups, vocab re-sharding, the tree broadcast), `layout` the pure
group / weight-shape logic. A compat file can still refuse the feature from some version on
(`FEATURE_REFUSED_FROM`). What ran on a GPU: docs/status.md.
"""
from __future__ import annotations

from sglang_patches import compat
from sglang_patches.errors import PatchTargetError

FEATURE = "draft_tp"
PATCHES = {"v0_5_17": "patch_0517", "v0_5_23": "patch_0523"}  # compat file -> patch module


def refusal_for(version: str) -> str | None:
    """Why this SGLang cannot run draft_tp, or None (targets are still checked by the registry)."""
    if version == "not installed":
        return "sglang is not installed"
    why = compat.feature_refusal(FEATURE, version)
    if why is None:
        return None
    return (f"the draft_tp feature (--draft-tp-size) cannot run on sglang {version}: {why}; "
            "drop --draft-tp-size or use sglang 0.5.17 or 0.5.23")


def specs():
    reason = refusal_for(compat.current_version())  # the pinned version under a static check of another
    if reason:
        raise PatchTargetError(reason)
    return patch_module().specs()


def patch_module(compat_file=None):
    """The patch module for `compat_file` (default: the one serving the installed SGLang)."""
    import importlib

    mod = compat_file if compat_file is not None else compat.current()
    name = mod.__name__.rsplit(".", 1)[-1]
    if name not in PATCHES:
        raise PatchTargetError(f"the draft_tp feature has no patch for {mod.__name__}; "
                               "drop --draft-tp-size")
    return importlib.import_module(f"sglang_patches.server.draft_tp.{PATCHES[name]}")
