"""draft_tp for sglang 0.5.23: the EAGLE drafter on groups of K ranks, through 0.5.23's own plumbing.

0.5.23 already places a drafter on a group of its own: `EagleDraftWorker.__init__` asks
`resolve_draft_parallel_layout` (speculative/draft_parallel.py:53) for a `DraftParallelLayout`
(configs/draft_parallel.py:23) once, in target scope (eagle_worker_v2.py:207), stores it as
`self.parallel_layout`, and every draft phase enters `draft_tp_context(layout)` (spec_utils.py:830)
= `patch_tensor_parallel_group(layout.tp_group, owns_attention=True)` (parallel_state.py:3115), which
narrows tp_* / attn_* (attn-dp, attn-cp, moe widths to one) of `get_parallel()`, where 0.5.23 reads
every group from (get_tp_group / get_attn_tp_group / attn_tp_all_reduce). Stock 0.5.23 resolves a
group only under dp-attention (the attention-TP group); otherwise tp_group=None, the target's TP.

The overlay supplies its layout through that path (every SGLang object here is a contact point of
compat/v0_5_23.py, the names in capitals):
1. `EagleDraftWorker.__init__` (around): in target scope, every rank creates ALL draft groups in the
   same order (collective; replicas.create_draft_group), then the original __init__ runs while
   `resolve_draft_parallel_layout` (around, rebind: imported by name) answers
   `DraftParallelLayout(tp_group=<K-rank group>, attn_tp_size=K)`. SGLang then builds the draft
   TpModelWorker, and later enters init_attention_backends, init_cuda_graphs, draft, both
   draft-extends and the adaptive states, under its own draft_tp_context(parallel_layout). The
   scheduler passes the same layout to the target's pool (EAGLEWorkerV2.draft_parallel_layout,
   scheduler.py:1091), so the shared KV budget prices the draft at K heads per rank.
2. `EagleDraftWorker.alloc_memory_pool` (around): the draft KV pool is sized with
   `get_parallel().attn_tp_size` (mem_cache/kv_cache_configurator.py:902) and the scheduler calls it
   outside any draft scope (scheduler.py:1104), so it runs inside draft_tp_context(parallel_layout).
3. `EagleDraftWorker._resolve_shared_embed_and_head` (around; init_lm_head:339 calls it): the target's
   TP-N vocab shards it returns are all-gathered over the target TP group, stripped and re-sharded for
   K (replicas.embed_and_head_for_k).
4. `build_eagle_verify_input` (before, rebind; eagle_worker_common.py:377, called at the end of
   draft(), eagle_worker_v2.py:717): the draft tree is broadcast from target-TP rank 0
   (replicas.sync_tree; SGLANG_PATCHES_DRAFT_TP_SYNC as in 0.5.17).
What ran on a GPU: docs/status.md (0.5.23: verified on CPU on its real classes; draft TP not yet run on a GPU).
"""
from __future__ import annotations

import inspect
import logging

from sglang_patches import compat
from sglang_patches.server.draft_tp import layout, replicas
from sglang_patches.server.draft_tp.replicas import DraftTPState
from sglang_patches.server.hooks import HookSpec

logger = logging.getLogger("sglang_patches")

FEATURE = "draft_tp"

# The layout the resolver answers while EagleDraftWorker.__init__ runs (set and cleared by
# _init_around on the scheduler thread; None: the resolver is SGLang's own).
_PENDING = None


def _plan(server_args, k: int):
    """None = leave the stock drafter alone; else (tp_size, world_rank, world_size). Raises on
    unsupported setups (replicas.plan_k, everything read from get_parallel() in target scope, before
    any draft_tp_context)."""
    par = compat.current().GET_PARALLEL.resolve()()
    if not replicas.plan_k(server_args, k, par, par, dp_attention=par.attn_dp_enabled):
        return None
    return par.tp_size, par.world_group.rank_in_group, par.world_group.world_size


# ---------------------------------------------------------------- hooks

def _init_around(original, self, *args, **kwargs):
    global _PENDING
    bound = inspect.signature(original).bind(self, *args, **kwargs)
    k = replicas.configured_k()
    plan = _plan(bound.arguments["server_args"], k)
    if plan is None:
        return original(*bound.args, **bound.kwargs)
    tp, rank, world = plan
    c = compat.current()
    target_group = c.GET_PARALLEL.resolve()().tp_group  # target scope: the target's TP group
    group, member = replicas.create_draft_group(k, tp)
    ours = c.DRAFT_PARALLEL_LAYOUT.resolve()(tp_group=group, attn_tp_size=group.world_size)
    _PENDING = ours
    try:
        original(*bound.args, **bound.kwargs)
    finally:
        _PENDING = None
    if getattr(self, c.WORKER_PARALLEL_LAYOUT.name, None) is not ours:
        raise RuntimeError("sglang_patches draft_tp: EagleDraftWorker did not keep the layout "
                           "resolve_draft_parallel_layout returned; run `sglang-patches patches --contacts`")
    self._sgp_draft_tp = st = DraftTPState(k, tp, rank, member, group, target_group, replicas.sync_mode())
    replicas.activate(st)
    logger.warning("sglang_patches draft_tp: rank %d: %s; tree sync=%s", rank,
                   layout.describe(rank, world, k, tp), st.sync)


def _resolve_layout_around(original, *args, **kwargs):
    """SGLang's resolver, except while an EagleDraftWorker with --draft-tp-size is being built."""
    if _PENDING is None:
        return original(*args, **kwargs)
    return _PENDING


def _alloc_around(original, self, *args, **kwargs):
    if getattr(self, "_sgp_draft_tp", None) is None:
        return original(self, *args, **kwargs)
    with compat.current().DRAFT_TP_CONTEXT_FN.resolve()(self.parallel_layout):  # KV heads per rank = total / K
        return original(self, *args, **kwargs)


def _embed_and_head_around(original, self, *args, **kwargs):
    embed, head = original(self, *args, **kwargs)
    st = getattr(self, "_sgp_draft_tp", None)
    if st is None:
        return embed, head
    target = self.target_worker.model_runner.model
    embed_module = getattr(getattr(target, "model", None), "embed_tokens", None)
    head_module = getattr(target, "lm_head", None)
    if (embed_module is None or embed is not embed_module.weight
            or (head is not None and (head_module is None or head is not head_module.weight))):
        raise RuntimeError("sglang_patches draft_tp: the shared embedding / lm_head are not the target's "
                           "embed_tokens / lm_head weights (pipeline parallel or a model-specific share); "
                           "not supported")
    return replicas.embed_and_head_for_k(self, st, embed, head, embed_module, head_module)


def specs() -> list[HookSpec]:
    c = compat.current()
    return [
        c.DRAFT_WORKER_INIT.hook("around", _init_around),
        c.RESOLVE_DRAFT_LAYOUT.hook("around", _resolve_layout_around, rebind=True),
        c.ALLOC_MEMORY_POOL.hook("around", _alloc_around),
        c.RESOLVE_SHARED_EMBED_AND_HEAD.hook("around", _embed_and_head_around),
        c.BUILD_EAGLE_VERIFY_INPUT.hook("before", replicas.sync_tree, rebind=True),
    ]
