"""The profiler cross-check's arithmetic on synthetic Kineto-style traces (a real trace needs a GPU)."""
import gzip
import json

from sglang_patches.offline.trace_compare import compare, gpu_intervals, union_length


def _write(tmp_path, events, gz=False, name="t.json"):
    path = tmp_path / (name + (".gz" if gz else ""))
    data = json.dumps({"traceEvents": events})
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(data)
    else:
        path.write_text(data)
    return str(path)


def test_union_merges_overlaps_and_keeps_gaps():
    assert union_length([(0, 10), (5, 15), (20, 30)]) == 25
    assert union_length([(20, 30), (0, 10)]) == 20
    assert union_length([(0, 10), (2, 3)]) == 10
    assert union_length([]) == 0


def test_only_gpu_activity_counts(tmp_path):
    events = [{"ph": "X", "cat": "kernel", "ts": 0, "dur": 1000},
              {"ph": "X", "cat": "gpu_memcpy", "ts": 1000, "dur": 500},
              {"ph": "X", "cat": "cuda_runtime", "ts": 0, "dur": 9000},   # host side: ignored
              {"ph": "i", "cat": "kernel", "ts": 5000},                      # not a complete event
              {"ph": "X", "cat": "kernel", "ts": 3000, "dur": 1000}]
    path = _write(tmp_path, events, gz=True)
    from sglang_patches.offline.trace_compare import load_trace

    assert gpu_intervals(load_trace(path)) == [(0.0, 1000.0), (1000.0, 1500.0), (3000.0, 4000.0)]
    res = compare([path], timer_cycle_ms_total=2.5)
    assert res["busy_ms"] == 2.5 and res["span_ms"] == 4.0 and res["ok"]
    bad = compare([path], timer_cycle_ms_total=3.0)
    assert not bad["ok"] and abs(bad["busy_over_timer"] - 2.5 / 3.0) < 1e-9


def test_several_rank_traces_and_empty(tmp_path):
    a = _write(tmp_path, [{"ph": "X", "cat": "kernel", "ts": 0, "dur": 2000}], name="a.json")
    b = _write(tmp_path, [{"ph": "X", "cat": "kernel", "ts": 1000, "dur": 2000}], name="b.json")
    assert compare([a, b], 3.0)["busy_ms"] == 3.0
    empty = _write(tmp_path, [], name="e.json")
    res = compare([empty], 1.0)
    assert not res["ok"] and res["events"] == 0


def test_alignment_by_kineto_base_time():
    from sglang_patches.offline.trace_compare import timer_ms_in_window, trace_window_unix

    trace = {"baseTimeNanoseconds": 1_700_000_000 * 10**9,
             "traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1_000_000, "dur": 10},
                             {"ph": "X", "cat": "kernel", "ts": 3_000_000, "dur": 10}]}
    lo, hi = trace_window_unix(trace)
    assert abs(lo - 1_700_000_001.0) < 1e-6 and abs(hi - 1_700_000_003.00001) < 1e-6
    recs = [{"kind": "decode", "t": 1_700_000_000.5, "cycle_ms": 5.0},   # before the window
            {"kind": "decode", "t": 1_700_000_001.5, "cycle_ms": 6.0},
            {"kind": "prefill", "t": 1_700_000_002.0, "cycle_ms": 9.0},  # not a decode cycle
            {"kind": "decode", "t": 1_700_000_002.5, "cycle_ms": 7.0}]
    assert timer_ms_in_window(recs, (lo, hi)) == (13.0, 2)
    assert trace_window_unix({"traceEvents": []}) is None
