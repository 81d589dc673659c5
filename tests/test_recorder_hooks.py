"""The timing hook functions (server/timing/hooks.py, server/timing/step_hooks.py) with a CycleRecorder wired in,
around the real SGLang 0.5.17 ForwardMode and GenerationBatchResult (both import on CPU).

The recorder runs on the fake CUDA events of tests/recorder_fakes.py (no CUDA here). Workers,
batches and requests are SimpleNamespace stand-ins: real ones need a GPU and a loaded model, and the
hooks read only the attributes the stand-ins carry. The step_timing target is validated against
the real 0.5.17 TpModelWorker.forward_batch_generation.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from recorder_fakes import make
from sglang_patches.server.timing import hooks as timing_hooks
from sglang_patches.server.timing import runtime
from sglang_patches.server.timing.recorder import EVENT_SLOTS
from sglang_patches.vocab.schema import validate_record


# ---------------------------------------------------------------- timing hook functions

@pytest.fixture(scope="module")
def sgl():
    """The real SGLang enum and result dataclass (both import on CPU; shared: ~10 s import)."""
    from sglang.srt.managers.utils import GenerationBatchResult
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    return SimpleNamespace(ForwardMode=ForwardMode, GenerationBatchResult=GenerationBatchResult)


@pytest.fixture
def wired(monkeypatch):
    rec, stream, clock, out = make()
    monkeypatch.setattr(runtime, "get_or_create_recorder", lambda worker: rec)
    monkeypatch.setattr(runtime, "active", lambda: rec)
    monkeypatch.setattr(timing_hooks, "_is_capturing", lambda: False)
    return rec, stream, out


def worker():
    # Constructing a real EAGLEWorkerV2 needs a GPU and a loaded model; the hooks read only these.
    return SimpleNamespace(speculative_num_steps=3, topk=1, speculative_num_draft_tokens=4)


def batch(mode, reqs=3, extend_in_batch=False):
    # Minimal ScheduleBatch stand-in with the real ForwardMode (a real batch needs a model/GPU pool).
    return SimpleNamespace(forward_mode=mode, is_extend_in_batch=extend_in_batch, reqs=list(range(reqs)))


def _spec_fn(suffix):
    [spec] = [s for s in timing_hooks.specs() if s.target.endswith(suffix)]
    return spec.fn


def test_forward_decode_begins_and_ends_cycle(sgl, wired):
    rec, stream, out = wired
    seen = {}

    def original(self, b):
        seen["current"] = rec.current
        stream.t += 5.0
        return sgl.GenerationBatchResult()

    result = timing_hooks.forward_batch_generation(original, worker(), batch(sgl.ForwardMode.DECODE))
    slot = seen["current"]
    assert slot is not None and slot.kind == "decode" and slot.bs == 3
    assert (slot.steps, slot.topk, slot.draft_tokens) == (3, 1, 4)
    assert getattr(result, timing_hooks.RESULT_ATTR) is slot
    assert rec.current is None and list(rec._pending) == [slot]
    assert rec.drain() == 0  # waits for its accepted counts


def test_forward_idle_and_capturing_untouched(sgl, wired, monkeypatch):
    rec, stream, out = wired
    calls = []

    def original(self, b, *args, **kwargs):
        calls.append((args, kwargs, rec.current))
        return sgl.GenerationBatchResult()

    r = timing_hooks.forward_batch_generation(original, worker(), batch(sgl.ForwardMode.IDLE), 7, k=1)
    assert calls == [((7,), {"k": 1}, None)]
    assert not hasattr(r, timing_hooks.RESULT_ATTR) and not rec._pending and rec.emitted == 0
    monkeypatch.setattr(timing_hooks, "_is_capturing", lambda: True)
    timing_hooks.forward_batch_generation(original, worker(), batch(sgl.ForwardMode.DECODE))
    assert calls[-1][2] is None and not rec._pending


@pytest.mark.parametrize("mode,extend_in_batch", [("EXTEND", False), ("DECODE", True), ("MIXED", False)])
def test_forward_extend_is_prefill(sgl, wired, mode, extend_in_batch):
    rec, stream, out = wired

    def original(self, b):
        rec.phase("extend", True)
        stream.t += 4.0
        rec.phase("extend", False)
        return sgl.GenerationBatchResult()

    r = timing_hooks.forward_batch_generation(original, worker(),
                                              batch(getattr(sgl.ForwardMode, mode), 2, extend_in_batch))
    assert not hasattr(r, timing_hooks.RESULT_ATTR)
    assert rec.drain() == 1
    assert out[0]["kind"] == "prefill" and out[0]["bs"] == 2 and out[0]["extend_ms"] == 4.0


def test_forward_exception_still_ends_cycle(sgl, wired):
    rec, stream, out = wired

    def original(self, b):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        timing_hooks.forward_batch_generation(original, worker(), batch(sgl.ForwardMode.DECODE))
    assert rec.current is None and len(rec._pending) == 1


def test_phase_wrappers_only_inside_a_cycle(sgl, wired):
    rec, stream, out = wired
    draft = _spec_fn("EagleDraftWorker.draft")
    verify = _spec_fn("EAGLEWorkerV2.verify")
    extend = _spec_fn("EagleDraftWorker._draft_extend_for_decode")

    def run(ms):
        def original(self, b, *rest):
            stream.t += ms
            return ms
        return original

    w, b = worker(), batch(sgl.ForwardMode.DECODE)
    assert draft(run(1.0), w, b) == 1.0  # no current cycle: just calls through
    assert rec._free[0].recorded == [False] * len(EVENT_SLOTS)

    def cycle(self, bb):
        draft(run(2.0), self, bb)
        verify(run(6.0), self, bb)
        extend(run(1.5), self, bb, "batch_result")
        return sgl.GenerationBatchResult()

    result = timing_hooks.forward_batch_generation(cycle, w, b)
    slot = getattr(result, timing_hooks.RESULT_ATTR)
    assert slot.recorded == [True] * len(EVENT_SLOTS)
    rec.set_accepted(slot, [1, 2, 0])
    assert rec.drain() == 1
    assert (out[0]["draft_ms"], out[0]["verify_ms"], out[0]["extend_ms"], out[0]["cycle_ms"]) == (2.0, 6.0, 1.5, 9.5)


def test_phase_wrapper_records_end_on_exception(sgl, wired):
    rec, stream, out = wired
    verify = _spec_fn("EAGLEWorkerV2.verify")
    slot = rec.begin("decode", 1, 3, 1, 4)

    def original(self, b):
        raise ValueError("verify failed")

    with pytest.raises(ValueError):
        verify(original, worker(), batch(sgl.ForwardMode.DECODE))
    assert slot.recorded[4] and slot.recorded[5]


def _req(finished=False, retracted=False, rid="r"):
    # Stand-in for sglang's Req (a real one needs a tokenizer and sampling params); the hook reads
    # the two things SGLang's own _resolve_spec_v2_tokens checks before counting a verify, and rid.
    return SimpleNamespace(is_retracted=retracted, finished=lambda: finished, rid=rid)


def test_resolve_spec_v2_tokens_sets_accepted_of_live_requests_and_drains(sgl, wired):
    rec, stream, out = wired
    around = _spec_fn("SchedulerBatchResultProcessor._resolve_spec_v2_tokens")
    assert around is timing_hooks.resolve_spec_v2_tokens

    def original(self, b):
        stream.t += 3.0
        return sgl.GenerationBatchResult()

    result = timing_hooks.forward_batch_generation(original, worker(), batch(sgl.ForwardMode.DECODE))
    calls = []

    def resolve(self, res, b):
        # what SGLang's _resolve_spec_v2_tokens sets; finish states change only after it returns
        res.num_correct_drafts_per_req_cpu = [2, 0, 1]
        calls.append(1)
        return [[1], [2], [3]]

    reqs = SimpleNamespace(reqs=[_req(rid="a1"), _req(finished=True, rid="b2"), _req(rid="c3")])
    assert around(resolve, object(), result, reqs) == [[1], [2], [3]]
    assert calls == [1]
    assert len(out) == 1 and out[0]["accepted"] == [2, 1] and out[0]["stale"] == 1
    assert out[0]["req"] == [hash("a1") & 0xFFFFFFFF, hash("c3") & 0xFFFFFFFF]  # the live ones, in order
    assert out[0]["cycle_ms"] == 3.0
    assert not hasattr(result, timing_hooks.RESULT_ATTR)  # popped: a result is never counted twice
    around(lambda self, r, b: None, object(), result, SimpleNamespace(reqs=[]))
    assert len(out) == 1


def test_resolve_without_usable_rids_still_records_the_counts(sgl, wired):
    """A Req without a hashable rid (another SGLang) must not break serving: no tags, same counts."""
    rec, stream, out = wired
    around = _spec_fn("SchedulerBatchResultProcessor._resolve_spec_v2_tokens")
    for case in ("unhashable", "missing"):
        result = timing_hooks.forward_batch_generation(lambda self, b: sgl.GenerationBatchResult(), worker(),
                                                       batch(sgl.ForwardMode.DECODE))

        def resolve(self, res, b):
            res.num_correct_drafts_per_req_cpu = [3, 1]
        reqs = [_req(rid=["unhashable"]), _req(rid="y")]
        if case == "missing":
            del reqs[0].rid
        around(resolve, object(), result, SimpleNamespace(reqs=reqs))
        assert out[-1]["accepted"] == [3, 1] and "req" not in out[-1], case


def test_resolve_without_recorder_passes_through(sgl, monkeypatch):
    monkeypatch.setattr(runtime, "active", lambda: None)
    result = sgl.GenerationBatchResult(num_correct_drafts_per_req_cpu=[1])
    setattr(result, timing_hooks.RESULT_ATTR, "slot")
    assert timing_hooks.resolve_spec_v2_tokens(lambda self, r, b: "x", object(), result, None) == "x"
    assert getattr(result, timing_hooks.RESULT_ATTR) == "slot"


# ---------------------------------------------------------------- step_timing (no-speculation steps)

def plain_worker(algorithm=None):
    # A real TpModelWorker needs a GPU and a model; the hook reads only server_args.speculative_algorithm.
    return SimpleNamespace(server_args=SimpleNamespace(speculative_algorithm=algorithm))


def test_step_timing_records_each_no_spec_step(sgl, wired):
    from sglang_patches.server.timing import step_hooks

    rec, stream, out = wired

    def original(self, b, *args, **kwargs):
        assert rec.current is not None
        stream.t += 4.25
        return sgl.GenerationBatchResult()

    step_hooks.forward_step(original, plain_worker(), batch(sgl.ForwardMode.DECODE, reqs=16))
    stream.t += 0.5
    step_hooks.forward_step(original, plain_worker(), batch(sgl.ForwardMode.EXTEND, reqs=2))
    rec.drain()  # the second step's record waits for the next step (or the exit flush)
    rec.flush()
    assert [(r["kind"], r["bs"], r["cycle_ms"]) for r in out] == [("decode", 16, 4.25), ("prefill", 2, 4.25)]
    r = validate_record(out[0])
    assert (r["steps"], r["topk"], r["draft_tokens"], r["accepted"]) == (0, 0, 0, [])
    assert r["verify_ms"] is None and r["draft_ms"] is None and out[1]["gpu_gap_ms"] == 0.5


def test_step_timing_leaves_verify_spec_idle_and_capture_alone(sgl, wired, monkeypatch):
    from sglang_patches.server.timing import step_hooks

    rec, stream, out = wired
    calls = []

    def original(self, b=None, *args, **kwargs):
        calls.append((b, args, kwargs, rec.current))
        return sgl.GenerationBatchResult()

    step_hooks.forward_step(original, plain_worker(), None, forward_batch="fb", is_verify=True)
    step_hooks.forward_step(original, plain_worker("EAGLE3"), batch(sgl.ForwardMode.DECODE))
    step_hooks.forward_step(original, plain_worker(), batch(sgl.ForwardMode.IDLE))
    monkeypatch.setattr(timing_hooks, "_is_capturing", lambda: True)
    step_hooks.forward_step(original, plain_worker(), batch(sgl.ForwardMode.DECODE))
    assert len(calls) == 4 and all(c[3] is None for c in calls) and not rec._pending
    assert calls[0][2] == {"forward_batch": "fb", "is_verify": True}


def test_step_timing_target_and_signature_in_sglang():
    from sglang_patches.server.hooks import REGISTRY
    from sglang_patches.vocab.overlay_config import FEATURES, OPTIONAL_FEATURES, parse_patch_list
    from sglang_patches.server.patches.catalog import specs_for
    from sglang_patches.server.timing import step_hooks

    assert "step_timing" in OPTIONAL_FEATURES and "step_timing" not in FEATURES
    assert "step_timing" not in parse_patch_list("all") and "step_timing" in parse_patch_list("all,step_timing")
    [spec] = specs_for(["step_timing"])
    assert spec.target == step_hooks.STEP_TARGET
    REGISTRY.validate([spec])  # the real 0.5.17 TpModelWorker.forward_batch_generation
