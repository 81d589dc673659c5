"""Timing under SGLang's --speculative-adaptive: records carry the steps that ran, plain steps-0
cycles are marked, the alarm keeps one window per steps value, /spec_timing splits by steps.

The first test runs SGLang's real EAGLEWorkerV2 and AdaptiveController of the SGLang under test
(tests/run_cpu.sh runs this file on 0.5.17 and on 0.5.23) with the GPU kernels of the three
phases, graph capture and CUDA events stubbed: see tests/adaptive_worker.py for exactly what is
real and what is not. The other tests feed records to the real alarm, recorder and runtime sinks.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from adaptive_controller import real_controller

from recorder_fakes import FakeEvent, FakeStream, make
from sglang_patches.server.timing import runtime
from sglang_patches.server.timing.accept_alarm import AcceptCollapseAlarm
from sglang_patches.vocab.schema import RecordError, make_record, validate_record


@pytest.fixture(scope="module")
def adaptive_run(tmp_path_factory):
    pytest.importorskip("sglang")
    from adaptive_worker import SCRIPT
    from test_draft_backend_model import _write_configs, run_result_script

    root = tmp_path_factory.mktemp("adaptive")
    _write_configs(root)
    runs = {}
    for mode in ("sync", "overlap"):
        runs[mode] = run_result_script(SCRIPT.replace("sys.argv[2]", repr(mode)), root)
    return runs


def _first(seen, bs, after):
    return next(i for i, s in enumerate(seen) if s["bs"] == bs and i > after)


@pytest.mark.parametrize("mode", ["sync", "overlap"])
def test_records_carry_the_steps_that_ran_on_the_real_adaptive_worker(adaptive_run, mode):
    res = adaptive_run[mode]
    seen, records = res["seen"], res["records"]
    assert len(records) == len(seen) == 132
    # the recorder's own check against each cycle's verify input (what /spec_timing reports on a GPU)
    assert (res["shape_checked"], res["shape_mismatch"]) == (132, 0)
    for i, (truth, r) in enumerate(zip(seen, records)):
        assert r["cycle"] == i + 1 and r["bs"] == truth["bs"]  # cycle 0 is the prefill
        assert (r["steps"], r["draft_tokens"]) == (truth["steps"], truth["draft_tokens"]), (i, truth, r)
        assert r["plain"] is (truth["steps"] == 0)
        assert (r["draft_ms"] is None) is (truth["steps"] == 0) and truth.get("draft_steps", 0) == truth["steps"]
        assert r["verify_ms"] is not None and r["extend_ms"] is not None and truth["extended"]
        assert len(r["accepted"]) == truth["bs"] and max(r["accepted"]) <= truth["steps"]
        validate_record(r)
    # the bucket switches of SGLang's default config (bs 12 -> 40 -> 70 -> 2): the steps set before
    # the call is not what ran, so a recorder reading it there would have mislabelled these cycles
    at40, at70 = _first(seen, 40, 0), _first(seen, 70, 0)
    at2 = _first(seen, 2, at70)
    assert (seen[at40]["steps"], seen[at70]["steps"], seen[at2]["steps"]) == (1, 0, 3)
    assert seen[at70]["before"] == 1 and seen[at2]["before"] == 0
    assert sum(s["before"] != s["steps"] for s in seen) >= 3
    # ... and the EMA's own switches: up to 7 where everything is accepted (bs 2), down to the
    # plain steps-0 cycles where nothing is (bs 12), and its probe back up from 0
    ran = [s["steps"] for s in seen]
    assert 7 in ran[at2:at2 + 40] and ran[at2 - 1] == 0
    plain_at_12 = [i for i, s in enumerate(seen) if s["bs"] == 12 and s["steps"] == 0]
    assert plain_at_12 and any(ran[i + 1] == 1 for i in plain_at_12 if i + 1 < len(ran) and seen[i + 1]["bs"] == 12)
    assert set(ran) >= {0, 1, 3, 7} and set(ran) <= set(res["candidates"])


@pytest.mark.parametrize("mode", ["sync", "overlap"])
def test_prefill_is_one_timed_cycle(adaptive_run, mode):
    """0.5.23 moved the prefill into _forward_prefill_batch (and hands kv_loc_plan to the prefill
    draft-extend): still one prefill record, its draft-extend timed, before the decode cycles."""
    pre = adaptive_run[mode]["prefill"]
    r = validate_record(pre["record"])
    assert (r["cycle"], r["kind"], r["bs"], r["accepted"], r["plain"]) == (0, "prefill", 3, [], False)
    assert r["extend_ms"] == 2.0 and r["cycle_ms"] == 10.0 and r["draft_ms"] is None and r["verify_ms"] is None
    assert pre["next_draft_input"] == "next draft input"
    if adaptive_run[mode]["version"] == "0.5.23":
        assert pre["truth"]["prefill_extend_kwargs"] == ["kv_loc_plan"]
        assert "pp_proxy_tensors" in pre["truth"]["target_kwargs"]


# ---------------------------------------------------------------- records

def _rec(steps, accepted, plain=None, v=None, cycle=0, topk=1):
    r = make_record(cycle=cycle, t=1.7e9 + cycle, rank=0, kind="decode", bs=len(accepted), steps=steps, topk=topk,
                    draft_tokens=steps + 1, accepted=accepted, draft_ms=None if steps == 0 else 1.0,
                    verify_ms=5.0, extend_ms=1.0, cycle_ms=7.0, host_gap_ms=None,
                    plain=steps == 0 if plain is None else plain)
    if v is not None:
        r["v"] = v
    return r


def test_schema_reads_v1_and_v2_and_checks_plain_cycles():
    assert validate_record(_rec(0, [0, 0]))["plain"] is True
    old = _rec(3, [1, 2], v=1)
    del old["plain"]
    assert validate_record(old) is old  # v1 logs stay readable
    with pytest.raises(RecordError, match="steps 0"):
        validate_record(_rec(3, [1], plain=True))
    with pytest.raises(RecordError, match="must all be 0"):
        validate_record({**_rec(0, [0, 1]), "draft_tokens": 1})
    with pytest.raises(RecordError, match="version 3"):
        validate_record(_rec(3, [1], v=3))
    with pytest.raises(RecordError, match="type"):
        validate_record({**_rec(0, [0]), "plain": 1})


def test_recorder_writes_the_shape_set_after_the_call():
    rec, stream, clock, out = make()
    slot = rec.begin("decode", 2, 3, 1, 4)  # what the worker had before SGLang switched it
    stream.t += 5.0
    rec.shape(slot, 0, 1, plain=True)
    rec.end(slot)
    rec.set_accepted(slot, [0, 0])
    slot = rec.begin("decode", 2, 0, 1, 1)
    rec.shape(slot, 7, 8)
    rec.end(slot)
    rec.set_accepted(slot, [7, 2])
    rec.flush()
    assert [(r["steps"], r["draft_tokens"], r["plain"]) for r in out] == [(0, 1, True), (7, 8, False)]
    assert all(validate_record(r) for r in out)
    assert stream.created == 8 * 8  # events allocated once with the pool, whatever the steps
    assert (rec.shape_checked, rec.shape_mismatch) == (0, 0)  # no verify input seen: nothing compared


def test_recorder_counts_a_shape_that_disagrees_with_the_verify_input():
    rec, stream, clock, out = make()
    for verified, ran in (((3, 4), (3, 4)), ((0, 1), (0, 1)), ((1, 2), (3, 4))):
        slot = rec.begin("decode", 1, 3, 1, 4)
        rec.verified_shape(*verified)
        rec.shape(slot, *ran, plain=ran[0] == 0)
        rec.end(slot)
    assert (rec.shape_checked, rec.shape_mismatch) == (3, 1)


# ---------------------------------------------------------------- the alarm: one window per steps value

def test_switch_up_after_plain_cycles_is_no_collapse_under_exit():
    stops = []
    alarm = AcceptCollapseAlarm(window=8, action="exit", stop=stops.append)
    for i in range(20):  # SGLang at steps 0 (plain decode): accept length 1 by construction
        alarm(_rec(0, [0] * 4, cycle=i))
    for i in range(4):  # steps 1 with nothing accepted: its window, alarm off at steps 1
        alarm(_rec(1, [0] * 4, cycle=20 + i))
    for i in range(20):  # switch up to 3 with a healthy drafter
        alarm(_rec(3, [2, 1, 3, 0], cycle=24 + i))
        assert not stops and not alarm.collapsed
    st = alarm.state()
    assert st["status"] == "ok" and st["steps"] == 3 and st["plain_cycles"] == 20
    assert st["by_steps"]["3"]["rolling_accept_length"] == 2.5 and st["by_steps"]["1"]["threshold"] is None
    assert st["by_steps"]["1"]["rolling_accept_length"] == 1.0 and "0" not in st["by_steps"]


def test_a_mixed_window_would_have_fired_and_a_real_collapse_still_does():
    # steps 2 with 0 accepted (accept length 1.0, below 1.1) then a switch to steps 3 at 1.25:
    # a window of both would read (1.0 * 4 + 1.25 * 4) / 8 = 1.125 ... then fall as steps 2 refills
    stops = []
    alarm = AcceptCollapseAlarm(window=8, action="exit", stop=stops.append)
    for i in range(7):  # not a full window of steps 2 yet
        alarm(_rec(2, [0, 0], cycle=i))
    for i in range(8):
        alarm(_rec(3, [1, 0, 0, 0], cycle=10 + i))  # steps 3: accept length 1.25 >= 1.1
    assert not stops
    alarm(_rec(2, [0, 0], cycle=30))  # steps 2's own window is now full at 1.0: a real collapse
    assert len(stops) == 1 and "at steps 2" in stops[0]
    assert alarm.collapsed and alarm.state()["by_steps"]["3"]["collapsed"] is False
    for i in range(8):
        alarm(_rec(2, [2, 2], cycle=40 + i))
    assert not alarm.collapsed and len(stops) == 1


# ---------------------------------------------------------------- /spec_timing split by steps

def test_spec_timing_splits_by_steps_and_keeps_plain_cycles_out_of_acceptance(monkeypatch, tmp_path):
    import torch

    from sglang_patches.vocab.overlay_config import OverlayConfig

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    stream = FakeStream()
    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing=True: FakeEvent(stream))
    monkeypatch.setattr(runtime.atexit, "register", lambda fn: fn)  # its exit flush syncs CUDA
    runtime.configure(OverlayConfig())
    worker = SimpleNamespace(tp_rank=0, server_args=SimpleNamespace(enable_metrics=False), speculative_num_steps=3)
    worker.adaptive_controller = real_controller(worker, [0, 1, 3], tmp_path)  # SGLang's own, on a stand-in worker
    try:
        rec = runtime.get_or_create_recorder(worker)
        assert sorted(runtime.get_timing_state().by_steps) == [0, 1, 3]
        for steps, acc in ((0, [0, 0]), (3, [3, 1]), (0, [0, 0]), (1, [1, 0])):
            slot = rec.begin("decode", 2, 3, 1, 4)
            stream.t += 4.0
            rec.shape(slot, steps, steps + 1, plain=steps == 0)
            rec.end(slot)
            rec.set_accepted(slot, acc)
        rec.flush(wait=lambda: None)
        snap = runtime.snapshot()
        assert snap["cycles"]["counted"] == 2 and snap["accept_length"] == 2.25  # drafting cycles only
        by = snap["by_steps"]
        assert sorted(by) == ["0", "1", "3"] and by["0"]["plain"] and not by["3"]["plain"]
        assert by["0"]["cycles"]["counted"] == 2 and by["0"]["accept_length"] == 1.0
        assert by["3"]["accept_length"] == 3.0 and by["1"]["accept_length"] == 1.5
        assert runtime.reset_stats() and runtime.snapshot()["by_steps"] == {}
    finally:
        runtime.configure(OverlayConfig())
