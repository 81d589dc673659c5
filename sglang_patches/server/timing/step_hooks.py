"""The opt-in `step_timing` feature: CUDA-event GPU time of each no-speculation forward step.

The denominator of "verify costs X decode steps": a server without speculative decoding runs
`TpModelWorker.forward_batch_generation(batch)` once per step; this wraps that call (around) with the
same recorder as the EAGLE cycle timer, so the step lands in `--timing-log` as a record with
kind "decode" (or "prefill"), steps = topk = draft_tokens = 0, accepted [] and only `cycle_ms` set:
the GPU time of the step's work on the worker's stream (the forward; with the overlap scheduler
SGLang may run the sampling of a step after the call, outside this span).

Not recorded: calls with a speculative algorithm configured (the EAGLE worker calls the same method
for its verify and is timed by the `timing` feature), `forward_batch=` calls (no ScheduleBatch),
idle batches and CUDA-graph capture. The record is ready at once (no accepted counts to wait for);
it is emitted, without blocking, once its end event has completed (checked at the next step).
"""
from __future__ import annotations

from sglang_patches import compat
from sglang_patches.server.hooks import HookSpec
from sglang_patches.server.timing import hooks as timing_hooks
from sglang_patches.server.timing import runtime
from sglang_patches.server.timing.nvtx_ranges import pop_range, push_range

# The SGLang contact point (compat/v0_5_17.py, section step_timing).
_STEP = compat.current().STEP_FORWARD
STEP_TARGET, STEP_PARAMS = _STEP.target, _STEP.params


def _speculative(worker) -> bool:
    algo = getattr(getattr(worker, "server_args", None), "speculative_algorithm", None)
    return algo not in (None, "", "NONE", "none")


def forward_step(original, self, batch=None, *args, **kwargs):
    if (batch is None or kwargs.get("is_verify") or _speculative(self) or batch.forward_mode.is_idle()
            or timing_hooks._is_capturing()):
        return original(self, batch, *args, **kwargs)
    rec = runtime.get_or_create_recorder(self)
    if rec is None:
        return original(self, batch, *args, **kwargs)
    mode = batch.forward_mode
    kind = "prefill" if (mode.is_extend() or getattr(batch, "is_extend_in_batch", False)) else "decode"
    rec.drain()
    slot = rec.begin(kind, len(batch.reqs), 0, 0, 0)
    push_range("step." + kind)
    try:
        return original(self, batch, *args, **kwargs)
    finally:
        pop_range()
        rec.end(slot)
        rec.set_accepted(slot, [])


def specs() -> list[HookSpec]:
    return [HookSpec(STEP_TARGET, "around", forward_step, params=STEP_PARAMS, feature="step_timing",
                     note="GPU ms per no-speculation step (opt-in)")]
