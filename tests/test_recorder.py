"""timing.recorder.CycleRecorder and the timing hook functions (timing/hooks.py).

There is no CUDA here, so `torch.cuda.Event` cannot be created: the recorder takes its event class
by injection (`event_factory`) and these tests inject `FakeEvent`. A fake GPU stream stands in for
the device: `record()` stamps the stream's current time (ms, advanced by the test), `query()` is
True once the stream has executed past that stamp (`done_until`, set by the test), and
`elapsed_time()` is the difference of two stamps, like the real event API.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from sglang_patches.timing import hooks as timing_hooks
from sglang_patches.timing import runtime
from sglang_patches.timing.recorder import EVENT_SLOTS, CycleRecorder
from sglang_patches.timing.schema import validate_record


class FakeStream:
    def __init__(self):
        self.t = 0.0               # GPU-stream time in ms at the next record()
        self.done_until = math.inf  # events stamped at or before this are complete
        self.created = 0
        self.queries = 0
        self.elapsed_calls = 0


class FakeEvent:
    """Stand-in for torch.cuda.Event(enable_timing=True): no CUDA on this machine."""

    def __init__(self, stream: FakeStream):
        self.stream = stream
        self.stamp = None
        stream.created += 1

    def record(self):
        self.stamp = self.stream.t

    def query(self):
        self.stream.queries += 1
        return self.stamp is not None and self.stamp <= self.stream.done_until

    def elapsed_time(self, end):
        self.stream.elapsed_calls += 1
        assert self.stamp is not None and end.stamp is not None
        return end.stamp - self.stamp


class HostClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def make(pool_size=8, **kw):
    stream, clock, out = FakeStream(), HostClock(), []
    rec = CycleRecorder(lambda: FakeEvent(stream), rank=kw.pop("rank", 0), sinks=[out.append],
                        pool_size=pool_size, clock=clock, wall=lambda: 1.7e9 + clock.now, **kw)
    return rec, stream, clock, out


def decode_cycle(rec, stream, draft=2.0, verify=6.0, extend=1.5, pre=0.5, post=0.25, bs=4, kind="decode"):
    """One cycle on the fake stream: pre | draft | verify | extend | post (ms)."""
    slot = rec.begin(kind, bs, 3, 1, 4)
    stream.t += pre
    for name, ms in (("draft", draft), ("verify", verify), ("extend", extend)):
        if ms is None:
            continue
        rec.phase(name, True)
        stream.t += ms
        rec.phase(name, False)
    stream.t += post
    rec.end(slot)
    return slot


# ---------------------------------------------------------------- recorder

def test_phases_elapsed_and_record_fields():
    rec, stream, clock, out = make(rank=3)
    slot = decode_cycle(rec, stream)
    rec.set_accepted(slot, [3, 0, 2, 1])
    assert rec.drain() == 1
    [r] = out
    validate_record(r)
    assert r["kind"] == "decode" and r["rank"] == 3 and r["cycle"] == 0
    assert (r["bs"], r["steps"], r["topk"], r["draft_tokens"]) == (4, 3, 1, 4)
    assert r["accepted"] == [3, 0, 2, 1]
    assert (r["draft_ms"], r["verify_ms"], r["extend_ms"]) == (2.0, 6.0, 1.5)
    assert r["cycle_ms"] == 10.25
    assert r["t"] == pytest.approx(1.7e9 + 100.0)
    assert r["host_gap_ms"] is None and r["gpu_gap_ms"] is None  # first cycle
    assert rec.emitted == 1


def test_decode_waits_for_accepted_prefill_does_not():
    rec, stream, clock, out = make()
    d = decode_cycle(rec, stream)
    assert rec.drain() == 0 and out == []
    rec.set_accepted(d, [1])
    assert rec.drain() == 1
    p = decode_cycle(rec, stream, draft=None, verify=None, extend=3.0, kind="prefill")
    assert p is not None
    assert rec.drain() == 1
    assert out[1]["kind"] == "prefill" and out[1]["accepted"] == []
    assert out[1]["draft_ms"] is None and out[1]["verify_ms"] is None and out[1]["extend_ms"] == 3.0


def test_emission_is_in_cycle_order():
    rec, stream, clock, out = make()
    a = decode_cycle(rec, stream, draft=1.0)
    decode_cycle(rec, stream, draft=None, verify=None, extend=2.0, kind="prefill")  # ready at once
    c = decode_cycle(rec, stream, draft=3.0)
    rec.set_accepted(c, [2])
    assert rec.drain() == 0  # the head (a) is not ready: nothing overtakes it
    rec.set_accepted(a, [0])
    assert rec.drain() == 3
    assert [(r["cycle"], r["kind"], r["accepted"]) for r in out] == [
        (0, "decode", [0]), (1, "prefill", []), (2, "decode", [2])]
    assert [r["draft_ms"] for r in out] == [1.0, None, 3.0]


def test_incomplete_event_blocks_emission_not_the_call():
    rec, stream, clock, out = make()
    slot = decode_cycle(rec, stream)
    rec.set_accepted(slot, [1, 1])
    stream.done_until = stream.t - 0.1  # the GPU has not reached the cycle's end event yet
    for _ in range(5):
        assert rec.drain() == 0  # returns at once: query() only, never elapsed_time()/sync
    assert out == [] and stream.elapsed_calls == 0 and stream.queries == 5
    stream.done_until = math.inf
    assert rec.drain() == 1 and out[0]["accepted"] == [1, 1]


def test_pool_exhaustion_skips_and_never_raises():
    rec, stream, clock, out = make(pool_size=2)
    a = decode_cycle(rec, stream)
    decode_cycle(rec, stream)
    assert rec.begin("decode", 1, 3, 1, 4) is None  # both slots wait for accepted counts
    assert rec.skipped_no_slot == 1 and rec.current is None
    rec.phase("draft", True)  # no current cycle: no-ops
    rec.phase("draft", False)
    rec.end(None)
    rec.set_accepted(None, [1])
    assert decode_cycle(rec, stream) is None and rec.skipped_no_slot == 2
    rec.set_accepted(a, [1])
    slot = rec.begin("decode", 1, 3, 1, 4)  # begin drains first: a's slot comes back
    assert slot is not None and len(out) == 1 and rec.skipped_no_slot == 2


def test_max_pending_age_fallbacks():
    rec, stream, clock, out = make(max_pending_age=3)
    decode_cycle(rec, stream)  # its result never reaches the result processor
    assert [rec.drain() for _ in range(3)] == [0, 0, 0]
    assert rec.drain() == 1 and out[0]["accepted"] == []

    rec2, stream2, _, out2 = make(max_pending_age=2)
    s = decode_cycle(rec2, stream2)
    rec2.set_accepted(s, [1])
    stream2.done_until = -1.0  # end event never completes
    assert [rec2.drain() for _ in range(8)] == [0] * 8
    assert rec2.dropped_incomplete == 0
    assert rec2.drain() == 0 and rec2.dropped_incomplete == 1 and out2 == []
    assert len(rec2._free) == 8  # the slot went back to the pool


def test_flush_waits_then_emits_everything():
    rec, stream, clock, out = make()
    a = decode_cycle(rec, stream)
    decode_cycle(rec, stream)
    rec.set_accepted(a, [2])
    stream.done_until = -1.0
    calls = []

    def wait():
        calls.append(stream.queries)
        stream.done_until = math.inf  # what torch.cuda.synchronize() guarantees

    assert rec.flush(wait=wait) == 2
    assert calls == [0]  # waited before reading any event
    assert [r["accepted"] for r in out] == [[2], []]
    assert rec.flush() == 0


def test_gpu_gap_and_host_gap():
    rec, stream, clock, out = make()
    a = decode_cycle(rec, stream)                 # GPU 0 .. 10.25
    clock.now += 0.0025                           # host: 2.5 ms between end() and the next begin()
    stream.t += 0.75                              # GPU idle 0.75 ms
    b = decode_cycle(rec, stream)
    clock.now += 0.001
    c = decode_cycle(rec, stream)                 # back to back on the GPU
    for s in (a, b, c):
        rec.set_accepted(s, [0])
    assert rec.drain() == 3
    assert [r["gpu_gap_ms"] for r in out] == [None, 0.75, 0.0]
    assert [r["host_gap_ms"] for r in out] == [None, 2.5, 1.0]


def test_gpu_gap_unknown_when_previous_slot_was_reused():
    rec, stream, clock, out = make(pool_size=1)
    for _ in range(3):
        s = decode_cycle(rec, stream)
        rec.set_accepted(s, [0])
        assert rec.drain() == 1
    # the single slot's events were re-recorded: the previous cycle's end is gone
    assert [r["gpu_gap_ms"] for r in out] == [None, None, None]


def test_no_event_allocation_after_construction():
    rec, stream, clock, out = make(pool_size=4)
    assert stream.created == 4 * len(EVENT_SLOTS)
    for i in range(50):
        s = decode_cycle(rec, stream)
        if i % 3:
            rec.set_accepted(s, [i % 4])
        rec.drain()
    rec.flush()
    assert stream.created == 4 * len(EVENT_SLOTS)
    assert rec.emitted + rec.skipped_no_slot == 50 and rec.emitted > 0


def test_broken_sink_is_removed_and_serving_continues():
    rec, stream, clock, out = make()

    def broken(_rec):
        raise OSError("disk full")

    rec.sinks.insert(0, broken)
    for _ in range(2):
        s = decode_cycle(rec, stream)
        rec.set_accepted(s, [1])
        rec.drain()
    assert broken not in rec.sinks and rec.emitted == 2
    assert out and out[-1]["cycle"] == 1


def test_sinks_after_a_broken_one_still_get_the_record():
    rec, stream, clock, out = make()
    rec.sinks.insert(0, lambda r: 1 / 0)
    s = decode_cycle(rec, stream)
    rec.set_accepted(s, [1])
    rec.drain()
    assert [r["cycle"] for r in out] == [0]


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
    from sglang_patches.timing import step_hooks

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
    from sglang_patches.timing import step_hooks

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
    from sglang_patches.hooks import REGISTRY
    from sglang_patches.overlay_config import FEATURES, OPTIONAL_FEATURES, parse_patch_list
    from sglang_patches.patches.catalog import specs_for
    from sglang_patches.timing import step_hooks

    assert "step_timing" in OPTIONAL_FEATURES and "step_timing" not in FEATURES
    assert "step_timing" not in parse_patch_list("all") and "step_timing" in parse_patch_list("all,step_timing")
    [spec] = specs_for(["step_timing"])
    assert spec.target == step_hooks.STEP_TARGET
    REGISTRY.validate([spec])  # the real 0.5.17 TpModelWorker.forward_batch_generation
# ---------------------------------------------------------------- timing state

def test_timing_state_getter_and_non_recording_rank():
    from sglang_patches.overlay_config import OverlayConfig
    from sglang_patches.patches import marker

    state = runtime.configure(OverlayConfig(timing_all_ranks=False))
    assert runtime.get_timing_state() is state and state.recorder is None and not state.decided
    rank1 = SimpleNamespace(ps=SimpleNamespace(tp_rank=1), tp_rank=1)
    assert runtime.get_or_create_recorder(rank1) is None  # only TP rank 0 records by default
    assert state.decided and state.rank == 1 and runtime.active() is None
    # decided once per process: a later call (even from a rank-0-looking worker) creates nothing
    assert runtime.get_or_create_recorder(SimpleNamespace(tp_rank=0)) is None
    info = marker.overlay_info()
    assert info["tp_rank"] == 1 and info["spec_timing"] is None
    assert runtime.reset_stats() is False  # nothing records here
    assert runtime.configure(OverlayConfig()) is not state  # a fresh state per configure()


@pytest.mark.parametrize("env,config_rates,expected", [
    ({"SGLANG_SIMULATE_ACC_LEN": "3.3"}, None, True),    # SGLang's own simulation
    ({"SGLANG_SIMULATE_ACC_LEN": "-1"}, None, False),    # SGLang's default: off
    ({}, (0.8, 0.7), True),                               # ours
    ({}, None, False),
])
def test_records_are_marked_simulated_under_either_simulation(monkeypatch, env, config_rates, expected):
    """get_or_create_recorder marks every record `simulated` when acceptance is pinned by SGLang's
    SGLANG_SIMULATE_ACC_LEN as well as by --simulate-acceptance (before, only the latter). torch's
    CUDA device query and events are replaced (no GPU here); the recorder and its sinks are real."""
    import torch

    from sglang_patches.overlay_config import OverlayConfig

    monkeypatch.delenv("SGLANG_SIMULATE_ACC_LEN", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    stream = FakeStream()
    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing=True: FakeEvent(stream))
    monkeypatch.setattr(runtime.atexit, "register", lambda fn: fn)  # its exit flush syncs CUDA
    cfg = OverlayConfig(simulate_acceptance=config_rates) if config_rates else OverlayConfig()
    runtime.configure(cfg)
    worker = SimpleNamespace(tp_rank=0, server_args=SimpleNamespace(enable_metrics=False))
    rec = runtime.get_or_create_recorder(worker)
    got = []
    rec.sinks.append(got.append)
    slot = rec.begin("decode", 1, 3, 1, 4)
    rec.end(slot)
    rec.set_accepted(slot, [2])
    rec.flush(wait=lambda: None)
    assert got and all(r["simulated"] is expected for r in got)
    runtime.configure(OverlayConfig())
