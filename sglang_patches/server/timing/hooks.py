"""The timing patches: CUDA events + NVTX around each EAGLE-3 cycle phase (see recorder.py).

Wrapped (never graph-captured; they only replay graphs):
  EAGLEWorkerV2.forward_batch_generation     whole cycle (decode) / prefill + prefill draft-extend
  EagleDraftWorker.draft                     draft phase
  EAGLEWorkerV2.verify                       verify phase
  EagleDraftWorker._draft_extend_for_decode  draft-extend phase
  EagleDraftWorker._draft_extend_for_prefill draft-extend of a prefill batch
  SchedulerBatchResultProcessor._resolve_spec_v2_tokens (around) accepted counts, drain

Steps under `--speculative-adaptive`: SGLang's forward_batch_generation itself calls
`activate_step_by_batch(bs)`, which swaps the worker's `speculative_num_steps` /
`speculative_num_draft_tokens` before drafting (and the result processing may switch them again
after the cycle). So the cycle's shape is read from the worker right after the call returns,
before anything else runs on this thread: what ran, not what was set before. A decode cycle at
steps 0 drafted nothing (SGLang verifies a one-token tree: a plain decode step) and is marked
`plain`.
"""
from __future__ import annotations

from sglang_patches import compat
from sglang_patches.server.hooks import HookSpec
from sglang_patches.server.timing import runtime
from sglang_patches.server.timing.nvtx_ranges import pop_range, push_range
from sglang_patches.vocab.schema import REQ_TAG_MASK

RESULT_ATTR = "_sglang_patches_cycle"

_capturing = None


def _is_capturing() -> bool:
    global _capturing
    if _capturing is None:
        import torch

        _capturing = torch.cuda.is_current_stream_capturing
    return _capturing()


def forward_batch_generation(original, self, batch, *args, **kwargs):
    rec = runtime.get_or_create_recorder(self)
    mode = batch.forward_mode
    if rec is None or mode.is_idle() or _is_capturing():
        return original(self, batch, *args, **kwargs)
    kind = "prefill" if (mode.is_extend() or batch.is_extend_in_batch) else "decode"
    rec.drain()
    slot = rec.begin(kind, len(batch.reqs), self.speculative_num_steps, self.topk,
                     self.speculative_num_draft_tokens)
    push_range("spec.cycle" if kind == "decode" else "spec.prefill")
    try:
        result = original(self, batch, *args, **kwargs)
    finally:
        pop_range()
        steps = self.speculative_num_steps  # after the call: what this cycle ran with
        rec.shape(slot, steps, self.speculative_num_draft_tokens, plain=kind == "decode" and steps == 0)
        rec.end(slot)
    if slot is not None and kind == "decode":
        setattr(result, RESULT_ATTR, slot)
    return result


def verify(original, self, batch, *args, **kwargs):
    """Around EAGLEWorkerV2.verify: the verify phase, and the shape of the tree it verifies (the
    verify input SGLang built this cycle: its spec_steps / draft_token_num), a second reading of
    what ran that the recorder compares with the worker's attributes after the cycle."""
    rec = runtime.active()
    if rec is not None and rec.current is not None:
        vi = getattr(batch, "spec_info", None)
        rec.verified_shape(getattr(vi, "spec_steps", None), getattr(vi, "draft_token_num", None))
    return _verify_phase(original, self, batch, *args, **kwargs)


def _phase(name: str, nvtx_name: str):
    def around(original, *args, **kwargs):
        rec = runtime.active()
        # with_topology=True: 0.5.23's pipeline-parallel tail draft of the NEXT cycle, run inside
        # this cycle's forward after its draft-extend; timing it would overwrite this cycle's draft
        if rec is None or rec.current is None or kwargs.get("with_topology"):
            return original(*args, **kwargs)
        push_range(nvtx_name)
        rec.phase(name, True)
        try:
            return original(*args, **kwargs)
        finally:
            rec.phase(name, False)
            pop_range()

    around.__name__ = f"time_{name}"
    return around


def resolve_spec_v2_tokens(original, self, result, batch, *args, **kwargs):
    """Around SGLang's per-cycle result processing: accepted counts of the live requests.

    Requests already finished or retracted when the result arrives (with the overlap scheduler the
    cycle after a request's last token is launched before SGLang knows it finished) get no
    `spec_verify_ct` in SGLang; the record lists them as `stale` and leaves them out of `accepted`.
    Each live request's 32-bit tag (`req`, schema.py) goes beside its count: a str's hash is
    cached on the object, so this is one list of ints per cycle.
    """
    rec = runtime.active()
    if rec is None:
        return original(self, result, batch, *args, **kwargs)
    live, tags = [], []  # one pass over the batch: this runs on the scheduler thread every cycle
    for req in batch.reqs:
        ok = not (req.is_retracted or req.finished())
        live.append(ok)
        if ok and tags is not None:
            try:
                tags.append(hash(req.rid) & REQ_TAG_MASK)
            except (TypeError, AttributeError):  # no hashable rid (not SGLang 0.5.17's str): no tags, counts still go
                tags = None
    ret = original(self, result, batch, *args, **kwargs)
    slot = result.__dict__.pop(RESULT_ATTR, None)
    if slot is not None:
        counts = getattr(result, "num_correct_drafts_per_req_cpu", None) or []
        accepted = [c for c, ok in zip(counts, live) if ok]
        rec.set_accepted(slot, accepted, stale=live.count(False), req=tags)
    rec.drain()
    return ret


_verify_phase = _phase("verify", "spec.verify")


def specs() -> list[HookSpec]:
    c = compat.current()
    return [
        c.FORWARD_BATCH_GENERATION.hook("around", forward_batch_generation),
        c.DRAFT.hook("around", _phase("draft", "spec.draft")),
        c.VERIFY.hook("around", verify),
        c.DRAFT_EXTEND_DECODE.hook("around", _phase("extend", "spec.draft_extend")),
        c.DRAFT_EXTEND_PREFILL.hook("around", _phase("extend", "spec.draft_extend_prefill")),
        c.RESOLVE_SPEC_V2_TOKENS.hook("around", resolve_spec_v2_tokens),
    ]
