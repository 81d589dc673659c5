"""The timing patches: CUDA events + NVTX around each EAGLE-3 cycle phase (see recorder.py).

Wrapped (never graph-captured; they only replay graphs):
  EAGLEWorkerV2.forward_batch_generation     whole cycle (decode) / prefill + prefill draft-extend
  EagleDraftWorker.draft                     draft phase
  EAGLEWorkerV2.verify                       verify phase
  EagleDraftWorker._draft_extend_for_decode  draft-extend phase
  EagleDraftWorker._draft_extend_for_prefill draft-extend of a prefill batch
  SchedulerBatchResultProcessor._resolve_spec_v2_tokens (around) accepted counts, drain
"""
from __future__ import annotations

from sglang_patches.hooks import HookSpec
from sglang_patches.timing import runtime
from sglang_patches.timing.nvtx_ranges import pop_range, push_range

W2 = "sglang.srt.speculative.eagle_worker_v2"
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
        rec.end(slot)
    if slot is not None and kind == "decode":
        setattr(result, RESULT_ATTR, slot)
    return result


def _phase(name: str, nvtx_name: str):
    def around(original, *args, **kwargs):
        rec = runtime.active()
        if rec is None or rec.current is None:
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
    """
    rec = runtime.active()
    if rec is None:
        return original(self, result, batch, *args, **kwargs)
    live = [not (req.is_retracted or req.finished()) for req in batch.reqs]
    ret = original(self, result, batch, *args, **kwargs)
    slot = result.__dict__.pop(RESULT_ATTR, None)
    if slot is not None:
        counts = getattr(result, "num_correct_drafts_per_req_cpu", None) or []
        rec.set_accepted(slot, [c for c, ok in zip(counts, live) if ok], stale=live.count(False))
    rec.drain()
    return ret


def specs() -> list[HookSpec]:
    f = "timing"
    return [
        HookSpec(f"{W2}:EAGLEWorkerV2.forward_batch_generation", "around", forward_batch_generation,
                 params=("self", "batch"), feature=f),
        HookSpec(f"{W2}:EagleDraftWorker.draft", "around", _phase("draft", "spec.draft"),
                 params=("self", "batch"), feature=f),
        HookSpec(f"{W2}:EAGLEWorkerV2.verify", "around", _phase("verify", "spec.verify"),
                 params=("self", "batch"), feature=f),
        HookSpec(f"{W2}:EagleDraftWorker._draft_extend_for_decode", "around",
                 _phase("extend", "spec.draft_extend"), params=("self", "batch", "batch_result"), feature=f),
        HookSpec(f"{W2}:EagleDraftWorker._draft_extend_for_prefill", "around",
                 _phase("extend", "spec.draft_extend_prefill"), params=("self", "batch", "target_hidden_states"),
                 feature=f),
        HookSpec("sglang.srt.managers.scheduler_components.batch_result_processor:"
                 "SchedulerBatchResultProcessor._resolve_spec_v2_tokens", "around", resolve_spec_v2_tokens,
                 params=("self", "result", "batch"), feature=f),
    ]
