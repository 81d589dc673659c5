"""timing.recorder.CycleRecorder: phase times, emission order, pool exhaustion, pending-age
fallbacks, flush, GPU and host gaps, no event allocation after construction, broken sinks.

There is no CUDA here, so `torch.cuda.Event` cannot be created: the recorder takes its event class
by injection (`event_factory`) and these tests inject the `FakeEvent` of tests/recorder_fakes.py, on
a fake GPU stream whose time and completion the test advances (see that module).
"""
from __future__ import annotations

import math

import pytest

from recorder_fakes import decode_cycle, make
from sglang_patches.server.timing.recorder import EVENT_SLOTS
from sglang_patches.vocab.schema import validate_record


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
