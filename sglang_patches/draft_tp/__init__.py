"""draft_tp: run the EAGLE/EAGLE-3 drafter at a smaller tensor-parallel size K than the target's N
(`--draft-tp-size K`; K = 1: a replicated single-GPU drafter on every rank, no per-step collectives).

GPU-verified at target TP2 with K = 1 only (token-identical greedy outputs to the stock drafter,
benchmarks/results/2026-11-29-s2-draft-tp-x2); K > 1 and TP4/TP8 not yet run. Opt-in only (not in the default feature set): the launcher enables it when
`--draft-tp-size` is given. Implemented for sglang 0.5.17 (`patch_0517`); sglang 0.5.23 replaced the
draft TP plumbing (`DraftParallelLayout`, `resolve_draft_parallel_layout`, EagleDraftWorker.__init__
without `ps`, `draft_tp_context(layout)`), so the builder refuses it with a clear error.
`layout` holds the pure group / weight-shape logic.
"""
from __future__ import annotations

from sglang_patches.errors import PatchTargetError

FEATURE = "draft_tp"
REFUSED_FROM = (0, 5, 23)
REFUSAL = ("the draft_tp feature (--draft-tp-size) is implemented for sglang 0.5.17 only; sglang {v} moved the "
           "draft TP plumbing (DraftParallelLayout / resolve_draft_parallel_layout, EagleDraftWorker.__init__ "
           "without ps, draft_tp_context(layout)); drop --draft-tp-size or use sglang 0.5.17")


def _version_tuple(version: str) -> tuple[int, ...]:
    out = []
    for part in version.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def refusal_for(version: str) -> str | None:
    """Why this SGLang cannot run draft_tp, or None (targets are still checked by the registry)."""
    if version == "not installed":
        return "sglang is not installed"
    if _version_tuple(version) >= REFUSED_FROM:
        return REFUSAL.format(v=version)
    return None


def specs():
    from sglang_patches.hooks import installed_sglang_version

    reason = refusal_for(installed_sglang_version())
    if reason:
        raise PatchTargetError(reason)
    from sglang_patches.draft_tp import patch_0517

    return patch_0517.specs()
