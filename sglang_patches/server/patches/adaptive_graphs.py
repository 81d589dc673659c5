"""The `adaptive_graphs` feature: CUDA graphs for every candidate's draft-extend under
`--speculative-adaptive` on SGLang 0.5.17 (the launcher adds it to `all` under that flag).

SGLang's adaptive server starts at --speculative-num-steps S (one of the candidates) and builds, for
each other candidate s, a runtime state inside an override of the runtime config store (speculative_num_steps
= s, speculative_num_draft_tokens = s + 1 at topk 1; `EAGLEWorkerV2.build_adaptive_runtime_state`).
0.5.17's draft-extend graph runner sizes its capture from `resolve_num_tokens_per_req(phase=
"draft_extend", server_args=...)`, which reads `server_args.speculative_num_draft_tokens`: S + 1,
whatever the override says. The state's graphs are then captured S + 1 tokens per request wide, its
batches are s + 1 wide, `can_run_graph` refuses them, and every draft-extend of that state runs
eagerly (one launch per kernel of the drafter layer, not one graph replay). What that costs:
benchmarks/results/2026-12-03-adaptive-graphs/.

This wraps that function and rebinds its by-name copies, the draft-extend runner's among them (compat
ADAPTIVE_EXTEND_WIDTH): for phase "draft_extend" it returns `get_spec().speculative_num_draft_tokens`,
the store's value: the candidate's inside the override, else the server's own at startup, where every
such capture happens (a fixed-steps server captures what it captured before; `apply_runtime_state`
later writes the active state's value into the store, read by no capture). Other phases go to
SGLang's function.
0.5.23 reads the store itself (compat ADAPTIVE_SWAPPED_EXTEND_GRAPHS): there the feature installs
nothing. Runs at graph capture only, never per cycle.
"""
from __future__ import annotations

import logging

from sglang_patches import compat
from sglang_patches.server.hooks import HookSpec

logger = logging.getLogger("sglang_patches")
# what `sglang-patches patches` says where the feature installs nothing
NOTHING_TO_DO = "nothing to do on this SGLang: it captures each adaptive candidate's draft-extend graphs at its own width"


def draft_extend_width(original, *args, **kwargs):
    if kwargs.get("phase") != "draft_extend":  # SGLang's callers pass keywords only
        return original(*args, **kwargs)
    width = getattr(compat.current().ADAPTIVE_GET_SPEC.resolve()(), "speculative_num_draft_tokens", None)
    return width if isinstance(width, int) and width > 0 else original(*args, **kwargs)


def specs() -> list[HookSpec]:
    contact = getattr(compat.current(), "ADAPTIVE_EXTEND_WIDTH", None)
    if contact is None:
        logger.info("sglang_patches: adaptive_graphs: %s", NOTHING_TO_DO)
        return []
    return [contact.hook("around", draft_extend_width, rebind=True,
                         note="draft-extend graphs at each adaptive candidate's width")]
