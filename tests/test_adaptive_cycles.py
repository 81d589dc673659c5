"""benchmarks/adaptive_cycles.py: per-steps decode cycles of adaptive_bench cells, from logs written
through the server's own JsonlSink (tests/advisor_logs.py); the figures are computed here by hand."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sglang_patches.vocab.schema import make_record
from advisor_logs import write_records

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "adaptive_cycles.py"


def rec(i, t, steps, accepted, cycle_ms, kind="decode"):
    return make_record(cycle=i, t=t, rank=0, kind=kind, bs=len(accepted), steps=steps, topk=1,
                       draft_tokens=steps + 1, accepted=accepted, draft_ms=0.5 if steps else None,
                       verify_ms=cycle_ms - 1.0, extend_ms=0.3, cycle_ms=cycle_ms, host_gap_ms=None,
                       gpu_gap_ms=0.05, plain=steps == 0)


def make_out(tmp_path):
    out = tmp_path / "run"
    (out / "cells").mkdir(parents=True)
    log = write_records(out / "timing" / "ours_in_x.jsonl", [
        rec(0, 99.5, 5, [1], 6.0),            # before t0 + skip: the warm-up, left out
        rec(1, 101.0, 4, [1], 6.0), rec(2, 101.1, 4, [2], 8.0), rec(3, 101.2, 5, [4], 7.0),
        rec(4, 101.3, 4, [0, 1], 9.0),        # two requests in one cycle
        rec(5, 200.0, 4, [3], 6.0),           # after t1: another cell's
    ])
    cell = {"row": "ours", "set": "in", "bs": 1, "t0": 100.0, "t1": 150.0, "timing_log": "/elsewhere/ours_in_x.jsonl",
            "result": {"output_throughput": 300.0}}
    (out / "cells" / "ours_in_bs1.json").write_text(json.dumps(cell))
    (out / "cells" / "plain_in_bs1.json").write_text(json.dumps({**cell, "row": "plain", "timing_log": None}))
    return out, log


def test_cycles_grouped_by_the_steps_that_ran(tmp_path):
    out, _ = make_out(tmp_path)
    dst = tmp_path / "cycles.json"
    r = subprocess.run([sys.executable, str(SCRIPT), str(out), "--out", str(dst)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cells = json.loads(dst.read_text())["cells"]
    assert list(cells) == ["ours_in_bs1"]  # plain has no timing log
    s4, s5 = cells["ours_in_bs1"]["steps"]["4"], cells["ours_in_bs1"]["steps"]["5"]
    assert s4["cycles"] == 3 and s5["cycles"] == 1 and s4["share_of_cycles"] == 0.75
    assert s4["cycle_ms_p50"] == 8.0
    # tokens: (1+1) + (2+1) + (0+1 + 1+1) = 8 over 4 request-cycles; 23 ms of cycles
    assert s4["tokens_per_request_cycle"] == 2.0
    assert s4["tok_s_of_these_cycles"] == round(8000 / 23, 1)
    assert s5["tokens_per_request_cycle"] == 5.0


def test_an_empty_folder_and_an_output_inside_the_cells_are_refused(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "no cells" in r.stderr and "Traceback" not in r.stderr
    out, _ = make_out(tmp_path)
    r = subprocess.run([sys.executable, str(SCRIPT), str(out), "--out", str(out / "cells" / "x.json")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "inside the cells or timing folder" in r.stderr
    assert sorted(p.name for p in (out / "cells").iterdir()) == ["ours_in_bs1.json", "plain_in_bs1.json"]


def test_an_output_that_is_a_timing_log_it_reads_is_refused(tmp_path):
    out, log = make_out(tmp_path)
    elsewhere = tmp_path / "logs"
    elsewhere.mkdir()
    other = elsewhere / "ours_in_x.jsonl"
    other.write_bytes(log.read_bytes())
    cell = json.loads((out / "cells" / "ours_in_bs1.json").read_text())
    (out / "cells" / "ours_in_bs1.json").write_text(json.dumps({**cell, "timing_log": str(other)}))
    before = other.read_bytes()
    r = subprocess.run([sys.executable, str(SCRIPT), str(out), "--out", str(other)], capture_output=True, text=True)
    assert r.returncode == 2 and "a timing log it reads" in r.stderr and "Traceback" not in r.stderr
    assert other.read_bytes() == before
    r = subprocess.run([sys.executable, str(SCRIPT), str(out), "--out", str(log)], capture_output=True, text=True)
    assert r.returncode == 2 and log.read_bytes() == before  # OUT/timing itself


def test_a_broken_cell_is_named_and_left_out(tmp_path):
    out, _ = make_out(tmp_path)
    (out / "cells" / "s5_in_bs1.json").write_text("{truncated")
    (out / "cells" / "s3_in_bs1.json").write_text(json.dumps({"row": "s3", "timing_log": "x.jsonl"}))  # no t0
    r = subprocess.run([sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True)
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert "s5_in_bs1.json: not a complete cell" in r.stderr and "s3_in_bs1.json: not a complete cell" in r.stderr
    assert "ours_in_bs1" in r.stdout


def test_truncation_check_puts_a_longer_chain_cut_short_beside_the_shorter_ones_own(tmp_path):
    out = tmp_path / "run"
    (out / "cells").mkdir(parents=True)
    logs = {"s5": [rec(0, 101.0, 5, [5], 7.0), rec(1, 101.1, 5, [0, 2], 8.0)],   # cut to 3: 4, 1, 3
            "s3": [rec(0, 101.0, 3, [3], 6.0), rec(1, 101.1, 3, [1], 6.0)],      # own: 4, 2
            "ours": [rec(0, 101.0, 5, [5], 7.0)]}                                 # adaptive: not a fixed row
    for row, recs in logs.items():
        log = write_records(out / "timing" / f"{row}.jsonl", recs)
        cell = {"row": row, "set": "ood", "bs": 1, "t0": 100.0, "t1": 150.0, "timing_log": str(log),
                "result": {"output_throughput": 300.0}}
        (out / "cells" / f"{row}_ood_bs1.json").write_text(json.dumps(cell))
    dst = tmp_path / "cycles.json"
    r = subprocess.run([sys.executable, str(SCRIPT), str(out), "--out", str(dst)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    (t,) = json.loads(dst.read_text())["truncation_check"]
    assert (t["longer"], t["shorter"], t["set"], t["bs"]) == ("s5", "s3", "ood", 1)
    assert t["truncated"] == round(8 / 3, 3) and t["shorter_own"] == 3.0 and t["ratio"] == round(8 / 9, 3)
    assert "s5 cut to s3" in r.stdout
