"""sglang_patches.vocab.stats: exact derived values on hand-made records."""
from __future__ import annotations

import pytest

from sglang_patches.vocab.schema import make_record
from sglang_patches.vocab.stats import SERIES, WindowStats, format_summary_line, percentile, summarize


def rec(cycle=0, t=0.0, kind="decode", accepted=(3, 0, 2, 1), steps=3, draft=2.0, verify=6.0,
        extend=2.0, cycle_ms=10.0, host_gap=1.0, rank=0, gpu_gap=None):
    return make_record(cycle=cycle, t=t, rank=rank, kind=kind, bs=len(accepted), steps=steps,
                       topk=1, draft_tokens=steps + 1, accepted=list(accepted), draft_ms=draft,
                       verify_ms=verify, extend_ms=extend, cycle_ms=cycle_ms, host_gap_ms=host_gap,
                       gpu_gap_ms=gpu_gap)


def test_accept_length_and_conditional_position_rates():
    s = summarize([rec()])
    assert s["request_cycles"] == 4
    assert s["accept_length"] == pytest.approx(2.5)
    assert s["pos_counts"] == [3, 2, 1]
    assert s["pos_rates"] == pytest.approx([0.75, 0.5, 0.25])
    assert s["accepted_hist"] == [1, 1, 1, 1]


def test_acceptance_accumulates_over_cycles_and_positions_follow_steps():
    # steps=4 but nobody reached position 3: it is still reported, with rate 0
    s = summarize([rec(accepted=[0, 0], steps=4), rec(accepted=[4, 1], steps=4)])
    assert s["accept_length"] == pytest.approx((1 + 1 + 5 + 2) / 4)
    assert s["pos_counts"] == [2, 1, 1, 1]
    assert s["pos_rates"] == pytest.approx([0.5, 0.25, 0.25, 0.25])
    assert s["accepted_hist"] == [2, 1, 0, 0, 1]


def test_percentile_linear_interpolation():
    vals = list(range(1, 101))
    assert percentile(vals, 50) == pytest.approx(50.5)
    assert percentile(vals, 90) == pytest.approx(90.1)
    assert percentile(vals, 99) == pytest.approx(99.01)
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_phase_percentiles_means_and_shares():
    ws = WindowStats()
    for i in range(1, 101):
        ws.add(rec(cycle=i, t=float(i), draft=float(i), verify=6.0, extend=2.0, cycle_ms=100.0,
                   host_gap=None if i == 1 else 1.0))
    s = ws.summary()
    d = s["phases"]["draft"]
    assert (d["p50"], d["p90"], d["p99"]) == pytest.approx((50.5, 90.1, 99.01))
    assert d["mean"] == pytest.approx(50.5)
    assert d["share"] == pytest.approx(50.5 / 100)
    assert s["phases"]["verify"]["share"] == pytest.approx(0.06)
    assert s["phases"]["extend"]["share"] == pytest.approx(0.02)
    assert s["phases"]["cycle"]["share"] == pytest.approx(1.0)
    hg = s["phases"]["host_gap"]
    assert hg["n"] == 99 and hg["mean"] == pytest.approx(1.0)
    assert hg["share"] == pytest.approx(99 / 10000)  # null first gap counts as 0
    assert set(s["phases"]) == set(SERIES)


def test_shares_leave_out_slow_cycles_and_count_them():
    # 150 steady cycles (draft 1.3 of 6.5 ms) and 4 warm-up ones of 210 ms that are nearly all draft: a share over
    # every cycle would put the draft at 46 %, while the steady cycle spends 20 % in it
    steady = [rec(cycle=i, draft=1.3, verify=4.4, extend=0.8, cycle_ms=6.5) for i in range(150)]
    slow = [rec(cycle=150 + i, draft=203.0, verify=6.0, extend=1.0, cycle_ms=210.0) for i in range(4)]
    s = summarize(slow[:2] + steady + slow[2:])
    assert s["phases"]["draft"]["share"] == pytest.approx(0.2)
    assert s["phases"]["verify"]["share"] == pytest.approx(4.4 / 6.5)
    assert s["phases"]["draft"]["share_all"] == pytest.approx((150 * 1.3 + 4 * 203) / (150 * 6.5 + 4 * 210))
    assert s["slow_cycles"]["n"] == 4 and s["slow_cycles"]["ms"] == pytest.approx(840.0)
    # the cut sits at 3x the median cycle, to one log bin: a cycle at 2.5x the median stays in
    s = summarize(steady + [rec(draft=10.0, cycle_ms=16.25)])
    assert s["slow_cycles"]["n"] == 0
    assert s["phases"]["draft"]["share"] == s["phases"]["draft"]["share_all"]


def test_gap_shares_leave_out_idle_waits_and_count_them():
    # 100 cycles of 6.5 ms with a 0.02 ms GPU gap, and two waits for traffic (680 and 104 ms) before steady
    # cycles: over every gap the GPU would read as idle a third of the time, while a cycle waits 0.3 %
    steady = [rec(cycle=i, cycle_ms=6.5, host_gap=2.9, gpu_gap=0.02) for i in range(100)]
    waits = [rec(cycle=100, cycle_ms=6.5, host_gap=681.0, gpu_gap=680.0),
             rec(cycle=101, cycle_ms=6.5, host_gap=105.0, gpu_gap=104.0)]
    s = summarize(steady[:50] + waits + steady[50:])
    assert s["phases"]["gpu_gap"]["share"] == pytest.approx(100 * 0.02 / (102 * 6.5))
    assert s["phases"]["host_gap"]["share"] == pytest.approx(100 * 2.9 / (102 * 6.5))
    assert s["phases"]["gpu_gap"]["share_all"] == pytest.approx((2.0 + 784.0) / (102 * 6.5))
    assert s["idle_waits"]["n"] == 2 and s["idle_waits"]["ms"] == pytest.approx(784.0)
    assert s["phases"]["draft"]["share"] == pytest.approx(2.0 / 6.5)  # the cycles themselves stay in
    assert s["phases"]["gpu_gap"]["p99"] > 100  # the percentiles keep every gap
    # a gap is a wait only above both 20 ms and 3 of its cycles: 19 ms gaps of host-bound 5 ms cycles, and
    # 60 ms gaps of a 30 ms cycle, are per-cycle overhead and stay in
    assert summarize([rec(cycle_ms=5.0, gpu_gap=19.0)] * 3)["idle_waits"]["n"] == 0
    assert summarize([rec(cycle_ms=30.0, gpu_gap=60.0)] * 3)["idle_waits"]["n"] == 0
    # without a GPU gap the host gap decides; a record without a cycle time or a gap is no wait
    assert summarize([rec(cycle_ms=5.0, host_gap=300.0)])["idle_waits"]["n"] == 1
    assert summarize([rec(cycle_ms=None, gpu_gap=300.0), rec(gpu_gap=None, host_gap=None)])["idle_waits"]["n"] == 0
    # with prefills counted (report --kind all): a wait for a request comes before a prefill, long itself, so
    # any gap over 20 ms there is a wait; a 100 ms gap before a 40 ms prefill among 6 ms decode cycles
    recs = [rec(cycle=i, cycle_ms=6.0, host_gap=0.5, gpu_gap=0.05) for i in range(50)]
    recs.insert(25, rec(kind="prefill", cycle_ms=40.0, host_gap=101.0, gpu_gap=100.0))
    both = summarize(recs, kinds=("decode", "prefill"))
    assert both["idle_waits"]["n"] == 1
    assert both["phases"]["gpu_gap"]["share"] == pytest.approx(50 * 0.05 / (50 * 6.0 + 40.0))
    # a wait before a slow cycle (the first cycle after the server's warm-up pause) leaves with that cycle:
    # the shares already leave it out, so it is counted once, as a slow cycle, not again as an idle wait
    recs = [rec(cycle=i, cycle_ms=6.0, host_gap=0.5, gpu_gap=0.05) for i in range(50)]
    recs.insert(0, rec(cycle_ms=100.0, host_gap=501.0, gpu_gap=500.0))  # a wait (500 > 3 x 100) and a slow cycle
    recs.insert(30, rec(cycle_ms=6.0, host_gap=81.0, gpu_gap=80.0))
    once = summarize(recs)
    assert once["slow_cycles"]["n"] == 1 and once["idle_waits"]["n"] == 1
    assert once["idle_waits"]["ms"] == pytest.approx(80.0)
    assert once["phases"]["gpu_gap"]["share"] == pytest.approx(50 * 0.05 / (51 * 6.0))  # the slow one and the waits out


def test_idle_waits_in_a_gpu_servers_log():
    """The rule read back from a real log (H100, SGLang 0.5.17, the Kimi-K2 family target with the Llama head,
    requests at concurrency 1 and 8, batches 1, 4 and 8 on the GPU), values pinned: four decode cycles waited over
    20 ms and 3 of their own cycle (98.9, 91.5, 70.6, 71.4 ms); two more came after long gaps but are slow cycles
    themselves (the first, 1.26 s, and 447 ms as batch 8 began), under 3 of their cycle, so no wait. Left out,
    the waits take the GPU gap from 41 % of cycle time to 2.7 %."""
    import json
    import lzma
    from pathlib import Path

    log = (Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "2026-12-06-kimi-family"
           / "llama_head" / "cycles.jsonl.xz")
    with lzma.open(log, "rt") as f:
        s = summarize([json.loads(line) for line in f if line.strip()])
    assert s["slow_cycles"]["n"] == 2
    assert s["idle_waits"]["n"] == 4 and s["idle_waits"]["ms"] == pytest.approx(332.4, abs=0.2)
    assert s["phases"]["gpu_gap"]["share_all"] == pytest.approx(0.413, abs=0.001)
    assert s["phases"]["gpu_gap"]["share"] == pytest.approx(0.027, abs=0.001)


def test_each_batch_size_is_held_against_its_own_median():
    # bs-64 cycles of 20 ms beside bs-1 cycles of 6 ms are traffic, not warm-up: nothing is slow
    small = [rec(cycle=i, accepted=(1,), draft=1.0, verify=4.0, extend=0.5, cycle_ms=6.0) for i in range(60)]
    big = [rec(cycle=60 + i, accepted=(1,) * 64, draft=2.0, verify=16.0, extend=1.0, cycle_ms=20.0) for i in range(40)]
    s = summarize(small + big)
    assert s["slow_cycles"]["n"] == 0
    assert s["phases"]["verify"]["share"] == pytest.approx((60 * 4.0 + 40 * 16.0) / (60 * 6.0 + 40 * 20.0))
    # a warm-up cycle at either size is still cut against its own batch size's median
    s = summarize(small + big + [rec(accepted=(1,) * 64, draft=300.0, cycle_ms=310.0)])
    assert s["slow_cycles"]["n"] == 1 and s["slow_cycles"]["ms"] == pytest.approx(310.0)
    # zero-ms cycles (a clock that did not run) leave no cut at all: nothing is called slow against 0
    assert summarize([rec(cycle_ms=0.0)] * 5 + [rec(cycle_ms=8.0)])["slow_cycles"]["n"] == 0


def test_shares_without_cycle_times_are_none_and_nothing_is_slow():
    s = summarize([rec(cycle_ms=None)])
    assert s["phases"]["draft"]["share"] is None and s["slow_cycles"]["n"] == 0


def test_throughput_and_cycle_rate():
    # 4 cycles, 10 ms each, 0.5 s apart; each produces 10 tokens over 4 requests
    s = summarize([rec(cycle=i, t=100.0 + 0.5 * i) for i in range(4)])
    assert s["window"] == {"first_t": 100.0, "last_t": 101.5, "seconds": pytest.approx(1.5)}
    assert s["cycles_per_s"] == pytest.approx(3 / 1.5)
    assert s["tok_s_per_request"] == pytest.approx(2.5 / 0.010)
    assert s["tok_s_batch"] == pytest.approx(40 / 0.040)
    assert s["mean_bs"] == pytest.approx(4.0)


def test_cycle_time_by_batch_size_largest_first():
    # the drain of a 4-request run: 3 cycles at bs 4 (10 ms), then bs 2 (8 ms) and bs 1 (6 ms, twice)
    recs = [rec(cycle=i, accepted=(1, 1, 1, 1)) for i in range(3)]
    recs += [rec(cycle=3, accepted=(1, 1), cycle_ms=8.0), rec(cycle=4, accepted=(1,), cycle_ms=6.0),
             rec(cycle=5, accepted=(1,), cycle_ms=6.0), rec(cycle=6, accepted=(2,), cycle_ms=None)]
    s = summarize(recs)
    assert list(s["cycle_time_by_bs"]) == ["4", "1", "2"]  # a record without cycle_ms adds no time
    assert s["cycle_time_by_bs"] == pytest.approx({"4": 30 / 50, "1": 12 / 50, "2": 8 / 50})
    assert summarize([])["cycle_time_by_bs"] == {}


def test_cycle_time_by_batch_size_leaves_out_slow_cycles_as_the_shares_do():
    # a batch-16 run of 96 cycles at 13.5 ms after one 1 s warm-up cycle at batch 1 and five steady ones:
    # counted, the warm-up read as 44 % of the time at batch 1; left out (as from the phase shares) it is not
    recs = [rec(cycle=0, accepted=(1,), cycle_ms=1050.0)]
    recs += [rec(cycle=1 + i, accepted=(1,), cycle_ms=6.0) for i in range(5)]
    recs += [rec(cycle=6 + i, accepted=(1,) * 16, cycle_ms=13.5) for i in range(96)]
    s = summarize(recs)
    assert s["slow_cycles"]["n"] == 1 and s["slow_cycles"]["ms"] == pytest.approx(1050.0)
    steady = 96 * 13.5 + 5 * 6.0
    assert s["cycle_time_by_bs"] == pytest.approx({"16": 96 * 13.5 / steady, "1": 30 / steady})
    # a batch size's slow cycles are judged against its own median: a lone cycle is its own median, counted
    lone = summarize([rec(cycle=0, accepted=(1,), cycle_ms=900.0)] + recs[6:])
    assert lone["slow_cycles"]["n"] == 0 and lone["cycle_time_by_bs"]["1"] == pytest.approx(900 / (900 + 96 * 13.5))


def test_prefill_counted_but_excluded_by_default():
    recs = [rec(cycle=0, kind="prefill", accepted=[], draft=None, verify=None, extend=5.0,
                cycle_ms=50.0, host_gap=None),
            rec(cycle=1, t=1.0), rec(cycle=2, t=2.0)]
    s = summarize(recs)
    assert s["cycles"] == {"decode": 2, "prefill": 1, "counted": 2, "in_ring": 2}
    assert s["phases"]["cycle"]["mean"] == pytest.approx(10.0)
    assert s["window"]["first_t"] == 1.0
    both = summarize(recs, kinds=("decode", "prefill"))
    assert both["cycles"]["counted"] == 3
    assert both["phases"]["cycle"]["mean"] == pytest.approx(70 / 3)
    assert both["phases"]["draft"]["n"] == 2            # null phase skipped in percentiles/mean
    assert both["phases"]["draft"]["share"] == pytest.approx(4 / 70)  # ... and counts 0 in share
    assert both["accept_length"] == pytest.approx(2.5)  # prefill has no accepted entries
    only_prefill = summarize(recs, kinds=("prefill",))
    assert only_prefill["pos_rates"] == [] and only_prefill["accept_length"] is None


def test_ring_bounds_percentiles_but_counters_cover_window():
    ws = WindowStats(ring=10)
    for i in range(100):
        ws.add(rec(cycle=i, t=float(i), draft=float(i), accepted=[i % 2]))
    s = ws.summary()
    assert len(ws._rings["draft"]) == 10 and s["cycles"]["in_ring"] == 10
    assert s["phases"]["draft"]["p50"] == pytest.approx(94.5)   # last 10: 90..99
    assert s["phases"]["draft"]["mean"] == pytest.approx(49.5)  # whole window
    assert s["request_cycles"] == 100 and s["pos_counts"][0] == 50


def test_reset_and_empty_summary():
    ws = WindowStats()
    ws.add(rec())
    ws.reset()
    s = ws.summary()
    assert s["cycles"]["counted"] == 0 and s["accept_length"] is None
    assert s["phases"]["draft"]["p50"] is None and s["cycles_per_s"] is None
    assert s["tok_s_per_request"] is None and s["pos_rates"] == []
    line = format_summary_line(s)
    assert line.startswith("spec timing: 0 cycles - cyc/s")


def test_format_summary_line():
    s = summarize([rec(cycle=i, t=i * 0.5, gpu_gap=None if i == 0 else 0.125) for i in range(5)])
    # gpu-gap share: 4 x 0.125 ms over 5 x 10 ms of cycles = 1%
    assert format_summary_line(s) == ("spec timing: 5 cycles 2.0 cyc/s | of cycle: draft 20% verify 60% "
                                      "extend 20% | between cycles, vs cycle (overlapping): host gap 10% gpu gap 1% "
                                      "| accept len 2.50 | pos acc 0.75 0.50 0.25")


def test_format_summary_line_without_gpu_gap_shows_dash():
    s = summarize([rec(cycle=i, t=i * 0.5) for i in range(3)])
    assert "host gap 10% gpu gap - |" in format_summary_line(s)


def test_gpu_gap_series_like_host_gap():
    ws = WindowStats()
    for i in range(1, 101):
        ws.add(rec(cycle=i, t=float(i), cycle_ms=100.0, gpu_gap=None if i == 1 else float(i)))
    g = ws.summary()["phases"]["gpu_gap"]
    vals = [float(i) for i in range(2, 101)]
    assert g["n"] == 99
    assert g["p50"] == pytest.approx(percentile(vals, 50))
    assert g["p90"] == pytest.approx(percentile(vals, 90))
    assert g["p99"] == pytest.approx(percentile(vals, 99))
    assert g["mean"] == pytest.approx(sum(vals) / 99)
    assert g["share"] == pytest.approx(sum(vals) / 10000)  # null first gap counts as 0


def test_gpu_gap_absent_field_is_skipped():
    # logs written before gpu_gap_ms existed have no such key at all
    old = rec(cycle=0)
    del old["gpu_gap_ms"]
    s = summarize([old, rec(cycle=1, t=1.0, gpu_gap=0.5), rec(cycle=2, t=2.0, gpu_gap=None)])
    g = s["phases"]["gpu_gap"]
    assert g["n"] == 1 and g["p50"] == 0.5 and g["mean"] == 0.5
    assert g["share"] == pytest.approx(0.5 / 30)
    none = summarize([old])["phases"]["gpu_gap"]
    assert none["n"] == 0 and none["mean"] is None and none["p50"] is None and none["share"] is None


def test_report_table_has_gpu_gap_rows():
    from sglang_patches.offline import report

    summary = summarize([rec(cycle=i, t=float(i), gpu_gap=0.5) for i in range(4)])
    result = {"ranks": {"0": {**summary, "skipped_lines": 0}}}
    rows = dict(report.table_rows(result))
    assert rows["gpu_gap ms p50/p90/p99"] == ["0.50 / 0.50 / 0.50"]
    assert rows["gpu gap vs cycle"] == ["5.0%"]
    assert rows["host gap vs cycle"] == ["10.0%"]
    assert rows["other in-cycle time"] == ["0.0%"]  # draft 2 + verify 6 + extend 2 of a 10 ms cycle


def test_bad_arguments():
    with pytest.raises(ValueError):
        WindowStats(ring=0)
    with pytest.raises(ValueError):
        WindowStats(kinds=("bogus",))
