"""draft_tp: run the EAGLE/EAGLE-3 drafter at a smaller tensor-parallel size K than the target's N
(`--draft-tp-size K`; K = 1: a replicated single-GPU drafter on every rank, no per-step collectives).

Opt-in only (not in the default feature set): the launcher enables it when `--draft-tp-size` is
given. Implemented against sglang 0.5.17's draft TP plumbing (`patch_0517`); the compat file says
from which SGLang version on the feature is refused (`FEATURE_REFUSED_FROM`: 0.5.23 replaced that
plumbing). `layout` holds the pure group / weight-shape logic. What ran on a GPU: the README's
status table.
"""
from __future__ import annotations

from sglang_patches import compat
from sglang_patches.errors import PatchTargetError

FEATURE = "draft_tp"


def refusal_for(version: str) -> str | None:
    """Why this SGLang cannot run draft_tp, or None (targets are still checked by the registry)."""
    if version == "not installed":
        return "sglang is not installed"
    why = compat.feature_refusal(FEATURE, version)
    if why is None:
        return None
    return (f"the draft_tp feature (--draft-tp-size) cannot run on sglang {version}: {why}; "
            "drop --draft-tp-size or use sglang 0.5.17")


def specs():
    from sglang_patches.hooks import installed_sglang_version

    reason = refusal_for(installed_sglang_version())
    if reason:
        raise PatchTargetError(reason)
    from sglang_patches.draft_tp import patch_0517

    return patch_0517.specs()
