"""draft_tp for sglang 0.5.17: run the EAGLE drafter on groups of K ranks while the target runs at TP N.

Every SGLang object used here is a contact point declared in compat/v0_5_17.py (the names in
capitals below are those contacts). What ran on a GPU: docs/status.md.

How (file:line are sglang 0.5.17, site-packages/sglang/srt/):
1. `EagleDraftWorker.__init__` (around): before the draft `TpModelWorker` is built
   (speculative/eagle_worker_v2.py:165-172), every rank creates ALL draft groups in the same order
   (`init_model_parallel_group`, distributed/parallel_state.py:1827; new_group is collective,
   :311-382), then the original __init__ runs under `small_group_context(g)` with
   `ps.tp_size/tp_rank/attn_tp_*` = K / rank-in-group. The draft ModelRunner skips
   `_init_parallel_groups` (distributed/bootstrap.py:75) and records `get_tp_group()` and
   `get_parallel().attn_tp_group` (:114-116), i.e. the small group, as its `tp_group`.
2. `small_group_context(g)` = `spec_utils.draft_tp_context(g)` (spec_utils.py:673, which is
   `patch_tensor_parallel_group`, parallel_state.py:2646: swaps `_TP` only) + `_ATTN_TP` swapped +
   `get_parallel().override(tp_*, attn_tp_*, tp_group, attn_tp_group)` (runtime_context.py:156).
   It replaces the instance attribute `draft_tp_context` (eagle_worker_v2.py:179, empty_context
   without dp-attention), which every draft phase already enters: init_attention_backends (:219),
   init_cuda_graphs / graph capture (:228), draft prefill-extend (:1126), draft (:1168), draft
   decode-extend (:1189), adaptive state (:1077).
3. `EagleDraftWorker.alloc_memory_pool` (around): the draft KV pool is sized with
   `get_parallel().attn_tp_size` (model_executor/pool_configurator.py:197/274), outside any draft
   context in stock code (scheduler.py:956), so it runs under the small group too.
4. `EagleDraftWorker.init_lm_head` (around): the target's vocab-parallel embedding (and lm_head when
   the drafter takes it) is all-gathered once over the target TP group, the padding stripped, and
   re-sharded for K (replicas.embed_and_head_for_k); the memory is logged.
5. `build_eagle_verify_input` (before; eagle_worker_common.py:316, imported by name into
   eagle_worker_v2.py so rebind=True): `parent_list`, `top_scores_index`, `draft_tokens` (and
   `draft_probs`) are broadcast in place from target-TP rank 0, so every rank verifies rank 0's tree.
   SGLANG_PATCHES_DRAFT_TP_SYNC=check instead all-gathers and raises on any difference (debug:
   syncs the host every cycle); =off trusts the replicas.
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging

from sglang_patches import compat
from sglang_patches.server.draft_tp import layout, replicas
from sglang_patches.server.draft_tp.replicas import DraftTPState, configured_k, create_draft_group, sync_mode
from sglang_patches.server.hooks import REGISTRY, HookSpec

logger = logging.getLogger("sglang_patches")

FEATURE = "draft_tp"
OVERRIDE_FIELDS = ("tp_size", "tp_rank", "attn_tp_size", "attn_tp_rank", "tp_group", "attn_tp_group")


def _check_runtime_preconditions() -> None:
    """The globals and fields small_group_context swaps must still exist (hooks and calls are
    checked by the registry and `patches --contacts`)."""
    c = compat.current()
    missing = []
    for contact in (c.TP_GLOBAL, c.ATTN_TP_GLOBAL, c.TP_STATE_PATCHED, c.PARALLEL_FIELDS):
        if not hasattr(contact.owner(), contact.name):
            missing.append(contact.target)
    fields = c.PARALLEL_FIELDS.resolve() if not missing else ()
    missing += [f"{c.PARALLEL_FIELDS.target} lacks {f}" for f in OVERRIDE_FIELDS if f not in fields]
    if missing:
        raise RuntimeError(f"sglang_patches draft_tp: sglang internals moved ({', '.join(missing)}); "
                           "run `sglang-patches patches --contacts`")


# ---------------------------------------------------------------- the small-group context

@contextlib.contextmanager
def small_group_context(group):
    """Run drafter code with `group` as the TP and attention-TP group (see module docstring, 2.)."""
    c = compat.current()
    if c.TP_STATE_PATCHED.resolve() and c.TP_GLOBAL.resolve() is group:  # re-entered (a phase inside init)
        yield
        return
    fields = dict(tp_size=group.world_size, tp_rank=group.rank_in_group, attn_tp_size=group.world_size,
                  attn_tp_rank=group.rank_in_group, tp_group=group, attn_tp_group=group)
    with c.DRAFT_TP_CONTEXT_FN.resolve()(group):  # asserts not nested (parallel_state.py:2656)
        saved_attn = c.ATTN_TP_GLOBAL.resolve()
        c.ATTN_TP_GLOBAL.set(group)  # attn_tp_all_reduce & co read it directly (layers/dp_attention.py:956)
        try:
            with c.GET_PARALLEL.resolve()().override(**fields):
                yield
        finally:
            c.ATTN_TP_GLOBAL.set(saved_attn)


def _plan(server_args, ps, k: int):
    """None = leave the stock drafter alone; else (tp_size, world_rank, world_size). Raises on
    unsupported setups (replicas.plan_k; the sizes from `ps`, dp-attention from server_args)."""
    par = compat.current().GET_PARALLEL.resolve()()
    if not replicas.plan_k(server_args, k, par, ps, dp_attention=getattr(server_args, "enable_dp_attention", False)):
        return None
    return par.tp_size, par.world_rank, par.world_size


# ---------------------------------------------------------------- hooks

def _init_around(original, self, *args, **kwargs):
    bound = inspect.signature(original).bind(self, *args, **kwargs)
    server_args, ps = bound.arguments["server_args"], bound.arguments["ps"]
    k = configured_k()
    _check_runtime_preconditions()
    plan = _plan(server_args, ps, k)
    if plan is None:
        return original(*bound.args, **bound.kwargs)
    tp, rank, world = plan
    group, member = create_draft_group(k, tp)
    r = group.rank_in_group
    bound.arguments["ps"] = dataclasses.replace(ps, tp_size=k, tp_rank=r, attn_tp_size=k, attn_tp_rank=r)
    with small_group_context(group):
        original(*bound.args, **bound.kwargs)
    if not hasattr(self, "draft_tp_context"):
        raise RuntimeError("sglang_patches draft_tp: EagleDraftWorker has no draft_tp_context; "
                           "run `sglang-patches patches --contacts`")
    swap_in_small_group(self, ps)
    target_group = bound.arguments["target_worker"].model_runner.tp_group
    self._sgp_draft_tp = st = DraftTPState(k, tp, rank, member, group, target_group, sync_mode())
    replicas.activate(st)
    logger.warning("sglang_patches draft_tp: rank %d: %s; tree sync=%s", rank,
                   layout.describe(rank, world, k, tp), st.sync)


def swap_in_small_group(worker, target_ps) -> None:
    """After the drafter was built with K: give the worker back the target's ParallelSizes and make
    every draft phase enter small_group_context (module docstring, 2.); both recorded for undo."""
    c = compat.current()
    stored_ps, stored_context = worker.ps, worker.draft_tp_context
    worker.ps = target_ps
    worker.draft_tp_context = small_group_context
    REGISTRY.record_change(c.DRAFT_WORKER_PS, lambda: setattr(worker, "ps", stored_ps))
    REGISTRY.record_change(c.DRAFT_TP_CONTEXT_ATTR, lambda: setattr(worker, "draft_tp_context", stored_context))


def _alloc_around(original, self, *args, **kwargs):
    st = getattr(self, "_sgp_draft_tp", None)
    if st is None:
        return original(self, *args, **kwargs)
    with small_group_context(st.group):  # KV pool heads per rank = total / K
        return original(self, *args, **kwargs)


def _init_lm_head_around(original, self, *args, **kwargs):
    st = getattr(self, "_sgp_draft_tp", None)
    if st is None:
        return original(self, *args, **kwargs)
    target = self.target_worker.model_runner.model
    embed, head = target.get_embed_and_head()
    new_embed, new_head = replicas.embed_and_head_for_k(self, st, embed, head, target.model.embed_tokens,
                                                        target.lm_head)
    target.get_embed_and_head = lambda: (new_embed, new_head)  # instance attribute, removed below
    try:
        return original(self, *args, **kwargs)
    finally:
        del target.get_embed_and_head


def specs() -> list[HookSpec]:
    c = compat.current()
    return [
        c.DRAFT_WORKER_INIT.hook("around", _init_around),
        c.ALLOC_MEMORY_POOL.hook("around", _alloc_around),
        c.INIT_LM_HEAD.hook("around", _init_lm_head_around),
        c.BUILD_EAGLE_VERIFY_INPUT.hook("before", replicas.sync_tree, rebind=True),
    ]
