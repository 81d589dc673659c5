"""draft_tp, the parts every SGLang version shares: whether to build the drafter on K (plan_k), the
draft groups, the state of an active drafter, the target's vocab shards re-sharded for K, and the
per-cycle tree broadcast.

`patch_0517` and `patch_0523` wire these into each version's plumbing; the SGLang objects used here
(`init_model_parallel_group`, `get_world_group`) take their targets from the compat file of the
installed version. GroupCoordinator.broadcast / all_gather / device_group are used on the target's
TP group captured at init, never through the current (possibly narrowed) group.
"""
from __future__ import annotations

import dataclasses
import logging
import os

from sglang_patches import compat
from sglang_patches.server.draft_tp import layout

logger = logging.getLogger("sglang_patches")

SYNC_ENV = "SGLANG_PATCHES_DRAFT_TP_SYNC"
SYNC_MODES = ("broadcast", "check", "off")


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


STATE: DraftTPState | None = None  # one EagleDraftWorker per scheduler process


def activate(state: DraftTPState | None) -> None:
    """Make `state` the one the tree broadcast reads (None: the broadcast hook does nothing)."""
    global STATE
    STATE = state


def configured_k() -> int:
    from sglang_patches.vocab.overlay_config import OverlayConfig

    cfg = OverlayConfig.from_env()
    return int(cfg.draft_tp_size) if cfg is not None and cfg.draft_tp_size else 1


def sync_mode() -> str:
    mode = os.environ.get(SYNC_ENV, "broadcast").strip().lower() or "broadcast"
    if mode not in SYNC_MODES:
        raise RuntimeError(f"sglang_patches draft_tp: {SYNC_ENV}={mode!r}; choose one of {', '.join(SYNC_MODES)}")
    return mode


def create_draft_group(k: int, tp_size: int):
    """Collective: every rank of the world must call this, at the same point, with the same K
    (torch.distributed.new_group is collective over the whole world, also for groups a rank is
    not in; init_model_parallel_group loops over all group_ranks)."""
    import torch.distributed as dist

    c = compat.current()
    world = c.GET_WORLD_GROUP.resolve()()
    groups = layout.draft_groups(world.world_size, k, tp_size)
    group = c.INIT_MODEL_PARALLEL_GROUP.resolve()(
        groups, world.local_rank, dist.get_backend(world.device_group),
        use_custom_allreduce=None if k > 1 else False, group_name="sglang_patches_draft_tp")
    return group, layout.membership(world.rank_in_group, world.world_size, k, tp_size)


def plan_k(server_args, k: int, par, sizes, *, dp_attention: bool) -> bool:
    """Whether the drafter is built on groups of K (False: SGLang's stock drafter, logged why); raises
    on a setup draft_tp does not support. `par` is get_parallel() read in target scope (tp_size and
    attn_tp_size are the target's); `sizes` holds pp_size, moe_ep_size and attn_cp_size, and
    `dp_attention` says whether dp-attention is on, each read where the version keeps it (0.5.17: the
    ParallelSizes handed to EagleDraftWorker and server_args; 0.5.23: get_parallel())."""
    tp = par.tp_size
    algo = (server_args.speculative_algorithm or "").upper()
    if dp_attention:
        if k == par.attn_tp_size:
            logger.info("sglang_patches draft_tp: dp-attention already runs the drafter on the attention-TP "
                        "group of size %d = --draft-tp-size; nothing to do", k)
            return False
        raise RuntimeError(f"sglang_patches draft_tp: --draft-tp-size {k} with --enable-dp-attention "
                           f"(attention TP {par.attn_tp_size}) is not supported")
    err = layout.validation_error(k, tp, algo, pp_size=sizes.pp_size)
    if err:
        raise RuntimeError(f"sglang_patches draft_tp: {err}")
    if compat.current().TP_STATE_PATCHED.resolve():
        raise RuntimeError("sglang_patches draft_tp: the TP group is already patched when the draft worker is "
                           "built; another draft-TP mechanism is active")
    if sizes.moe_ep_size != 1 or sizes.attn_cp_size != 1:
        raise RuntimeError("sglang_patches draft_tp: expert/context parallel targets are not supported")
    if k == tp:
        logger.info("sglang_patches draft_tp: --draft-tp-size %d = target TP; stock drafter", k)
        return False
    return True


# ---------------------------------------------------------------- embedding / lm_head for K

def what_draft_takes(worker) -> tuple[bool, bool]:
    """(embedding, lm_head) that EagleDraftWorker.init_lm_head hands to the drafter; the same rule
    in 0.5.17 (eagle_worker_v2.py:272-307) and 0.5.23 (:336-379): EAGLE3 takes the embedding only,
    both when it loads its lm_head from the target, none when its hidden size differs from the
    target's (LlamaForCausalLM.set_embed returns early); EAGLE takes both."""
    model = worker.draft_runner.model
    if not worker.speculative_algorithm.is_eagle3():
        return True, True
    if getattr(model, "load_lm_head_from_target", False):
        return True, True
    cfg = getattr(model, "config", None)
    if cfg is not None and hasattr(cfg, "target_hidden_size") and cfg.target_hidden_size != cfg.hidden_size:
        return False, False
    return True, False


def full_for_k(module, weight, st: DraftTPState, what: str):
    """The target's vocab-parallel `weight` (this rank's shard of `module`) all-gathered over the
    target TP group, padding stripped, re-padded and cut for this rank's place in its K group."""
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


def embed_and_head_for_k(worker, st: DraftTPState, embed, head, embed_module, head_module):
    """(embed, head) as the TP-K drafter needs them, from the target's TP-N shards `embed` / `head`
    of `embed_module` / `head_module`; what the drafter does not take is passed through."""
    if hasattr(worker.draft_runner.model, "set_lm_head_from_target"):
        raise RuntimeError("sglang_patches draft_tp: this drafter shares the target's lm_head module "
                           "(set_lm_head_from_target), which is vocab-sharded at the target TP; not supported")
    if st.k > 1 and worker.hot_token_id is not None:
        raise RuntimeError("sglang_patches draft_tp: --speculative-token-map needs --draft-tp-size 1")
    need_embed, need_head = what_draft_takes(worker)
    new_embed = full_for_k(embed_module, embed, st, "embedding") if need_embed else embed
    if need_head:
        new_head = new_embed if head is embed else full_for_k(head_module, head, st, "lm_head")
    else:
        new_head = head
    return new_embed, new_head


# ---------------------------------------------------------------- tree broadcast

def _flat_buffer(st: DraftTPState, dtype, device, n: int):
    """The first n elements of this state's packing buffer for (dtype, device), allocated once and
    grown (doubling) only when a larger tree arrives, so the per-cycle broadcast allocates nothing."""
    import torch

    buf = st.sync_buffers.get((dtype, device))
    if buf is None or buf.numel() < n:
        buf = torch.empty(max(n, 2 * buf.numel() if buf is not None else n), dtype=dtype, device=device)
        st.sync_buffers[(dtype, device)] = buf
    return buf[:n]


def _tree_tensors(args, kwargs):
    """parent_list, top_scores_index, draft_tokens, draft_probs of build_eagle_verify_input
    (positions 2-5 after batch, draft_input in 0.5.17 and 0.5.23)."""
    names = ("parent_list", "top_scores_index", "draft_tokens", "draft_probs")
    out = []
    for i, name in enumerate(names):
        t = kwargs[name] if name in kwargs else (args[2 + i] if len(args) > 2 + i else None)
        if t is not None and t.numel() > 0:
            out.append(t)
    return out


def sync_tree(*args, **kwargs):
    """Before build_eagle_verify_input: every target TP rank takes rank 0's draft tree, in place."""
    st = STATE
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
        st.target_group.broadcast(flat, src=0)  # in place, the target group's device group
        offset = 0
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset:offset + n].view(t.shape))
            offset += n
