"""draft_tp for sglang 0.5.17: run the EAGLE drafter on groups of K ranks while the target runs at TP N.

Every SGLang object used here is a contact point declared in compat/v0_5_17.py (the names in
capitals below are those contacts). What ran on a GPU: the README's status table.

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
   re-sharded for K (layout.gather_plan/reshard); the memory is logged.
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
import os

from sglang_patches import compat
from sglang_patches.draft_tp import layout
from sglang_patches.hooks import REGISTRY, HookSpec

logger = logging.getLogger("sglang_patches")

FEATURE = "draft_tp"
SYNC_ENV = "SGLANG_PATCHES_DRAFT_TP_SYNC"
SYNC_MODES = ("broadcast", "check", "off")
OVERRIDE_FIELDS = ("tp_size", "tp_rank", "attn_tp_size", "attn_tp_rank", "tp_group", "attn_tp_group")


@dataclasses.dataclass
class DraftTPState:
    k: int
    tp_size: int
    rank: int
    membership: layout.Membership
    group: object          # GroupCoordinator of this rank's draft group
    target_group: object   # the target's TP GroupCoordinator (broadcast / gather)
    sync: str
    # (dtype, device) -> flat buffer the tree is packed into for the broadcast; grown, never per cycle
    sync_buffers: dict = dataclasses.field(default_factory=dict)


def _flat_buffer(st: DraftTPState, dtype, device, n: int):
    """The first n elements of this state's packing buffer for (dtype, device), allocated once and
    grown (doubling) only when a larger tree arrives, so the per-cycle broadcast allocates nothing."""
    import torch

    buf = st.sync_buffers.get((dtype, device))
    if buf is None or buf.numel() < n:
        buf = torch.empty(max(n, 2 * buf.numel() if buf is not None else n), dtype=dtype, device=device)
        st.sync_buffers[(dtype, device)] = buf
    return buf[:n]


_STATE: DraftTPState | None = None  # one EagleDraftWorker per scheduler process


def configured_k() -> int:
    from sglang_patches.overlay_config import OverlayConfig

    cfg = OverlayConfig.from_env()
    return int(cfg.draft_tp_size) if cfg is not None and cfg.draft_tp_size else 1


def sync_mode() -> str:
    mode = os.environ.get(SYNC_ENV, "broadcast").strip().lower() or "broadcast"
    if mode not in SYNC_MODES:
        raise RuntimeError(f"sglang_patches draft_tp: {SYNC_ENV}={mode!r}; choose one of {', '.join(SYNC_MODES)}")
    return mode


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


def create_draft_group(k: int, tp_size: int):
    """Collective: every rank of the world must call this, at the same point, with the same K."""
    import torch.distributed as dist

    c = compat.current()
    world = c.GET_WORLD_GROUP.resolve()()
    groups = layout.draft_groups(world.world_size, k, tp_size)
    group = c.INIT_MODEL_PARALLEL_GROUP.resolve()(
        groups, world.local_rank, dist.get_backend(world.device_group),
        use_custom_allreduce=None if k > 1 else False, group_name="sglang_patches_draft_tp")
    return group, layout.membership(world.rank_in_group, world.world_size, k, tp_size)


def _plan(server_args, ps, k: int):
    """None = leave the stock drafter alone; else (tp_size, world_rank). Raises on unsupported setups."""
    c = compat.current()
    par = c.GET_PARALLEL.resolve()()
    tp = par.tp_size
    algo = (server_args.speculative_algorithm or "").upper()
    if getattr(server_args, "enable_dp_attention", False):
        if k == par.attn_tp_size:
            logger.info("sglang_patches draft_tp: dp-attention already runs the drafter on the attention-TP "
                        "group of size %d = --draft-tp-size; nothing to do", k)
            return None
        raise RuntimeError(f"sglang_patches draft_tp: --draft-tp-size {k} with --enable-dp-attention "
                           f"(attention TP {par.attn_tp_size}) is not supported")
    err = layout.validation_error(k, tp, algo, pp_size=ps.pp_size)
    if err:
        raise RuntimeError(f"sglang_patches draft_tp: {err}")
    if c.TP_STATE_PATCHED.resolve():
        raise RuntimeError("sglang_patches draft_tp: the TP group is already patched when the draft worker is "
                           "built; another draft-TP mechanism is active")
    if ps.moe_ep_size != 1 or ps.attn_cp_size != 1:
        raise RuntimeError("sglang_patches draft_tp: expert/context parallel targets are not supported")
    if k == tp:
        logger.info("sglang_patches draft_tp: --draft-tp-size %d = target TP; stock drafter", k)
        return None
    return tp, par.world_rank, par.world_size


# ---------------------------------------------------------------- hooks

def _init_around(original, self, *args, **kwargs):
    global _STATE
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
    self._sgp_draft_tp = _STATE = DraftTPState(k, tp, rank, member, group, target_group, sync_mode())
    logger.warning("sglang_patches draft_tp: rank %d: %s; tree sync=%s", rank,
                   layout.describe(rank, world, k, tp), _STATE.sync)


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


def _what_draft_takes(worker) -> tuple[bool, bool]:
    """(embedding, lm_head) the 0.5.17 init_lm_head hands to the drafter (eagle_worker_v2.py:272-307)."""
    model = worker.draft_runner.model
    if not worker.speculative_algorithm.is_eagle3():
        return True, True
    if getattr(model, "load_lm_head_from_target", False):
        return True, True
    cfg = getattr(model, "config", None)
    if cfg is not None and hasattr(cfg, "target_hidden_size") and cfg.target_hidden_size != cfg.hidden_size:
        return False, False  # set_embed returns early (models/llama.py:866-872)
    return True, False


def _full_for_k(module, weight, st: DraftTPState, what: str):
    import torch
    import torch.distributed as dist

    if getattr(module, "num_added_embeddings", 0):
        raise RuntimeError(f"sglang_patches draft_tp: target {what} has added (LoRA) vocab; not supported")
    tp = st.target_group.world_size
    plan = layout.gather_plan(tuple(weight.shape), tp, module.org_vocab_size, k=st.k,
                              rank_in_group=st.membership.rank_in_group, padding=module.padding_size,
                              cpu=weight.device.type == "cpu")
    out = torch.empty(plan.full_shape, dtype=weight.dtype, device=weight.device)
    dist.all_gather_into_tensor(out, weight.data.contiguous(), group=st.target_group.device_group)
    kept = layout.reshard(out, plan)
    size = weight.element_size()
    logger.info("sglang_patches draft_tp: rank %d: full target %s for the drafter: %s -> %s, +%s per rank "
                "(all-gather buffer %s)", st.rank, what, tuple(weight.shape), tuple(kept.shape),
                layout.fmt_bytes(plan.extra_bytes(size)), layout.fmt_bytes(plan.gathered_bytes(size)))
    return torch.nn.Parameter(kept, requires_grad=False)


def _init_lm_head_around(original, self, *args, **kwargs):
    st = getattr(self, "_sgp_draft_tp", None)
    if st is None:
        return original(self, *args, **kwargs)
    if hasattr(self.draft_runner.model, "set_lm_head_from_target"):
        raise RuntimeError("sglang_patches draft_tp: this drafter shares the target's lm_head module "
                           "(set_lm_head_from_target), which is vocab-sharded at the target TP; not supported")
    if st.k > 1 and self.hot_token_id is not None:
        raise RuntimeError("sglang_patches draft_tp: --speculative-token-map needs --draft-tp-size 1")
    target = self.target_worker.model_runner.model
    embed, head = target.get_embed_and_head()
    need_embed, need_head = _what_draft_takes(self)
    new_embed = _full_for_k(target.model.embed_tokens, embed, st, "embedding") if need_embed else embed
    if need_head:
        new_head = new_embed if head is embed else _full_for_k(target.lm_head, head, st, "lm_head")
    else:
        new_head = head
    target.get_embed_and_head = lambda: (new_embed, new_head)  # instance attribute, removed below
    try:
        return original(self, *args, **kwargs)
    finally:
        del target.get_embed_and_head


def _tree_tensors(args, kwargs):
    names = ("parent_list", "top_scores_index", "draft_tokens", "draft_probs")
    out = []
    for i, name in enumerate(names):
        t = kwargs[name] if name in kwargs else (args[2 + i] if len(args) > 2 + i else None)
        if t is not None and t.numel() > 0:
            out.append(t)
    return out


def _sync_tree(*args, **kwargs):
    st = _STATE
    if st is None or st.sync == "off" or st.target_group.world_size == 1:
        return
    import torch

    by_dtype: dict = {}
    for t in _tree_tensors(args, kwargs):
        by_dtype.setdefault(t.dtype, []).append(t)
    for dtype, tensors in by_dtype.items():
        if st.sync == "check":  # debug mode: allocates and syncs the host, by design
            flat = torch.cat([t.reshape(-1) for t in tensors])
            rows = st.target_group.all_gather(flat.unsqueeze(0), dim=0)
            bad = (rows != rows[:1]).any(dim=1)
            if bool(bad.any()):  # host sync: debug mode only
                raise RuntimeError(f"sglang_patches draft_tp: draft trees differ across target TP ranks "
                                   f"{bad.nonzero().flatten().tolist()} ({dtype}); use the default sync=broadcast")
            continue
        flat = _flat_buffer(st, dtype, tensors[0].device, sum(t.numel() for t in tensors))
        torch.cat([t.reshape(-1) for t in tensors], out=flat)  # one kernel into the preallocated buffer
        st.target_group.broadcast(flat, src=0)  # parallel_state.py:1399, in place, device group
        offset = 0
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset:offset + n].view(t.shape))
            offset += n


def specs() -> list[HookSpec]:
    c = compat.current()
    return [
        c.DRAFT_WORKER_INIT.hook("around", _init_around),
        c.ALLOC_MEMORY_POOL.hook("around", _alloc_around),
        c.INIT_LM_HEAD.hook("around", _init_lm_head_around),
        c.BUILD_EAGLE_VERIFY_INPUT.hook("before", _sync_tree, rebind=True),
    ]
