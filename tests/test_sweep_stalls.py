"""Prefill stalls per sweep row (offline/sweep/stalls.py): prefills of at least 4x the configuration's
median and 250 ms, counted within each row's own measurement. The first test reads the H200 weak
MoE sweep of 2026-12-01 (its timing logs trimmed to the prefill records)."""
from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from advisor_logs import write_records
from sglang_patches.offline.sweep import results as res
from sglang_patches.offline.sweep import table
from sglang_patches.offline.sweep.stalls import prefill_stalls, with_stalls
from sglang_patches.vocab.schema import make_record

REPO = Path(__file__).resolve().parent.parent
WEAK = REPO / "benchmarks" / "results" / "2026-12-01-moe" / "sweep-weak"


def test_the_h200_sweep_shows_where_compilation_stalled():
    """s1, the first speculative server after the baseline, stalled in 5 of its 10 bs-1 prefills
    (90 % of that row's time, hence its 0.98x end to end against 1.00x steady); s5 never did."""
    rows = res.read_rows(WEAK)
    got = with_stalls(rows, WEAK)
    s1 = got[("s1_k1_n2", 1)]
    assert s1["stalls"] == 5 and s1["prefills"] == 10 and s1["stall_ms_max"] == pytest.approx(1602.5, abs=0.1)
    assert got[("s5_k1_n6", 1)]["stalls"] == 0 and got[("s5_k1_n6", 8)]["stalls"] == 0
    assert ("baseline", 1) not in got   # --patches none: no timing log
    assert "| s1_k1_n2 | 1 | 10 | 93 | 5 | 1602 |" in (WEAK / "summary.md").read_text()


def prefill(t, ms):
    return make_record(cycle=0, t=t, rank=0, kind="prefill", bs=1, steps=3, topk=1, draft_tokens=4, accepted=[],
                       draft_ms=None, verify_ms=None, extend_ms=1.0, cycle_ms=ms, host_gap_ms=None)


def test_stalls_count_inside_the_window_against_the_whole_logs_median(tmp_path):
    log = write_records(tmp_path / "s.jsonl", [prefill(100.0 + i, ms) for i, ms in
                                               enumerate([90, 95, 100, 1200, 105, 380, 99, 2000])])
    # window t 100-104: 90, 95, 100, 1200, 105; the log's median is 102.5, so a stall is >= 410 ms
    assert prefill_stalls(str(log), 100.0, 104.0) == {
        "prefills": 5, "prefill_ms_p50_log": pytest.approx(102.5), "stalls": 1, "stall_ms_max": pytest.approx(1200),
        "stall_s_total": pytest.approx(1.2)}
    assert prefill_stalls(str(log), 105.0, 107.0)["stalls"] == 1   # 380 ms is under 4x the median: no stall
    short = write_records(tmp_path / "short.jsonl", [prefill(100.0, 90), prefill(101.0, 2000)])
    assert prefill_stalls(str(short), 0, 1e12) is None   # two prefills give no median to compare with


def test_rows_without_a_usable_date_or_log_get_nothing(tmp_path):
    out = tmp_path / "w"
    shutil.copytree(WEAK, out)
    rows = [r for r in res.read_rows(out) if r["config"] == "s1_k1_n2"]
    naive = [{**r, "date": r["date"].replace("+00:00", "")} for r in rows]
    assert with_stalls(naive, out) == {}                     # no time zone: cannot meet the log's epoch clock
    assert with_stalls([{**rows[0], "measure_s": None}], out) == {}
    (out / "timing" / "s1_k1_n2.jsonl").write_text("{not json\n" * 3)
    assert with_stalls(rows, out) == {}                      # a log with no valid record: no figures, no error
    table.write_report(out, out=io.StringIO())
    assert "## Prefill stalls" in (out / "summary.md").read_text()   # the other configurations still report


def test_a_sweep_without_stalls_has_no_section(tmp_path):
    out = tmp_path / "w"
    shutil.copytree(WEAK, out)
    shutil.rmtree(out / "timing")
    table.write_report(out, out=io.StringIO())
    assert "## Prefill stalls" not in (out / "summary.md").read_text()
