"""Steady decode per sweep row: SGLang's own 'Decode batch' lines at #running-req = bs, beside the
end-to-end tok/s (offline/decode_log.py, offline/sweep/runner.py steady_fields, offline/sweep/table.py, the MoE
summary). The first test reads real H200 server logs (the weak MoE sweep of 2026-12-01, trimmed
to the scheduler's batch lines) against the overlay's own CUDA-event cycle times of the same rows."""
from __future__ import annotations

import datetime
import io
import json
import shutil
import statistics
import sys
from pathlib import Path

import pytest

from sglang_patches.offline.sweep import results as res
from sglang_patches.offline.sweep import table
from sglang_patches.whatif.grid import expand_grid
from sglang_patches.offline.sweep.runner import RunOptions, run_configs
from sglang_patches.offline.sweep.synthetic import STEADY_OVER_E2E, SyntheticGPU, true_tok_s
from sglang_patches.offline.decode_log import steady_cycles, steady_tok_s

REPO = Path(__file__).resolve().parent.parent
WEAK = REPO / "benchmarks" / "results" / "2026-12-01-moe" / "sweep-weak"


def spec_line(n, acc, tput):
    return (f"[2026-12-01 14:12:02] Decode batch, #running-req: {n}, #token: 54, token usage: 0.00, "
            f"accept len: {acc:.2f}, accept rate: 0.20, cuda graph: True, gen throughput (token/s): {tput:.2f}, "
            "#queue-req: 0\n")


def test_log_cycles_agree_with_the_cuda_event_timer_on_the_h200():
    """Two independent clocks of one run: SGLang's wall-clock throughput per 40-cycle window
    (divided back into cycles with its accept len) and the overlay's CUDA-event cycle p50. On the
    H200 they agree within 1.2 %; 4 % allows for the windows' few samples."""
    rows = {(r["config"], r["batch_size"]): r for r in res.read_rows(WEAK) if r["config"] != "baseline"}
    compared = 0
    for (config, bs), row in rows.items():
        windows = steady_cycles(str(WEAK / "logs" / f"{config}.log"), allow_spec=True).get(bs, [])
        if len(windows) < 2:
            continue
        log_ms = statistics.median(ms for ms, _ in windows)
        assert log_ms == pytest.approx(row["phases_p50_ms"]["cycle"], rel=0.04), (config, bs)
        compared += 1
    assert compared >= 5   # 4 at bs 1, 2 at bs 8 (s2 and s5 had fewer than 2 windows there)


def test_steady_tok_s_is_mean_accept_over_median_cycle(tmp_path):
    """Cycles of 5 ms at bs 2 with accept lengths 2 and 3 (tok/s 800 and 1200): 2 x 2.5 x 1000 / 5
    = 1000 tok/s, not the median tok/s of the windows; the first line opens no window."""
    log = tmp_path / "s.log"
    log.write_text(spec_line(2, 9.0, 1.0) + "".join(spec_line(2, a, 2 * a * 200.0) for a in (2, 3, 2, 3)))
    got = steady_tok_s(str(log), 2)
    assert got == {"steady_tok_s": pytest.approx(1000.0), "steady_windows": 4, "steady_cycle_ms": pytest.approx(5.0)}
    assert steady_tok_s(str(log), 8) == {"steady_tok_s": None, "steady_windows": 0, "steady_cycle_ms": None}


def _opts(out: Path, bss=(8, 1)) -> RunOptions:
    (out / "logs").mkdir(parents=True, exist_ok=True)
    return RunOptions(out_dir=str(out), model_flags=["--model-path", "/m/t"],
                      spec_flags=["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/m/d"],
                      server_flags=[], batch_sizes=list(bss), prompts=["a", "b"], max_new_tokens=32, repeats=3,
                      timeout=5, meta={"command": "test", "gpu": "fake"})


def test_runner_records_steady_decode_per_row_and_the_report_shows_it(tmp_path):
    """Each ok row carries its server log's steady reading at its own batch size (the fake servers
    log SGLang-format lines at 1.25 x their end-to-end rate, windows whose accept len swings, and
    a slow tail at #running-req 1 after each bs-8 batch). bs 8 runs first here: only the log
    written since the row began may count, or the bs-1 rows would read the tails (a quarter of the rate)."""
    plan = expand_grid([1, 3], [1], [4])
    world = SyntheticGPU(noise=0.0)
    run_configs(plan.configs, _opts(tmp_path), server_cls=world.server_cls, run_batch=world.run_batch,
                http=world.http, out=io.StringIO())
    rows = {(r["config"], r["batch_size"]): r for r in res.read_rows(tmp_path)}
    for (config, bs), row in rows.items():
        cfg = next(c for c in plan.configs if c is not None and c.name == config) if config != "baseline" else None
        assert row["steady_tok_s"] == pytest.approx(STEADY_OVER_E2E * true_tok_s(cfg, bs), rel=1e-3), (config, bs)
        assert row["steady_windows"] >= 2 and row["tok_s"] == pytest.approx(true_tok_s(cfg, bs))
    out = io.StringIO()
    table.write_report(tmp_path, out=out)
    md = (tmp_path / "summary.md").read_text()
    assert "| steady tok/s | steady x baseline |" in md
    assert "bs 1, steady decode: best" in out.getvalue()


def test_backfill_counts_only_windows_stamped_within_the_rows_measurement(tmp_path):
    """One server log holds every batch size's run; a bs-8 batch's tail at #running-req 1 comes
    after the bs-1 row ended and must not count for it (the rows carry their end time and length)."""
    out = tmp_path / "sw"
    (out / "logs").mkdir(parents=True)
    def stamp(sec, n, tput):
        return (f"[2026-12-01 14:16:{sec:02d}] Decode batch, #running-req: {n}, #token: 9, token usage: 0.00, "
                f"cuda graph: True, gen throughput (token/s): {tput:.2f}, #queue-req: 0\n")
    (out / "logs" / "baseline.log").write_text(
        "".join(stamp(s, 1, 200.0) for s in (20, 21, 22, 23))          # the bs-1 row: 14:16:20-24
        + "".join(stamp(s, 8, 1600.0) for s in (30, 31, 32))         # the bs-8 row
        + "".join(stamp(s, 1, 50.0) for s in (33, 34, 35, 36, 37)))  # its tail: 4 slow windows at 1
    end = datetime.datetime(2026, 12, 1, 14, 16, 24, tzinfo=datetime.timezone.utc).isoformat()
    row = {"config": "baseline", "spec": None, "batch_size": 1, "status": "ok", "tok_s": 150.0, "date": end,
           "measure_s": 5.0, "log_path": "/gone/logs/baseline.log"}
    got = table.with_steady([row], out)[0]
    assert got["steady_tok_s"] == pytest.approx(200.0) and got["steady_windows"] == 3
    assert "steady_tok_s" not in table.with_steady([{**row, "measure_s": None}], out)[0]   # cannot bound: none


def test_a_malformed_number_or_an_unreadable_path_never_stops_a_sweep(tmp_path):
    from sglang_patches.offline.sweep.runner import steady_fields

    log = tmp_path / "s.log"
    log.write_text(spec_line(1, 2.0, 300.0) + spec_line(1, 2.0, 300.0).replace("accept len: 2.00", "accept len: .")
                   + spec_line(1, 2.0, 300.0) + spec_line(1, 2.0, 300.0))
    assert steady_fields(str(log), 1)["steady_windows"] == 1   # the '.' line opens and closes no window
    assert steady_fields(str(tmp_path / "missing.log"), 1)["steady_tok_s"] is None
    row = {"config": "baseline", "spec": None, "batch_size": 1, "status": "ok", "tok_s": 1.0,
           "date": "2026-12-01T14:16:24+00:00", "measure_s": 5.0, "log_path": "/" + "x" * 300 + "/b.log"}
    assert table.with_steady([row], tmp_path) == [row]   # a path too long to stat: no traceback


def test_old_rows_get_steady_decode_from_a_copied_folders_logs(tmp_path):
    """Rows written before the runner recorded it: the report reads DIR/logs/<name> when the row's
    own log_path (on the GPU machine) is gone; without any log the row stays as it is."""
    shutil.copytree(WEAK, tmp_path / "w")
    rows = res.read_rows(tmp_path / "w")
    assert all("steady_tok_s" not in r and not Path(r["log_path"]).exists() for r in rows)
    got = {(r["config"], r["batch_size"]): r for r in table.with_steady(rows, tmp_path / "w")}
    assert got["baseline", 1]["steady_tok_s"] == pytest.approx(257.1, abs=0.1)   # 3.89 ms steps on the H200
    assert got["baseline", 1]["tok_s"] == pytest.approx(156.1, abs=0.1)         # end to end: prefill included
    assert got["s5_k1_n6", 8]["steady_tok_s"] is None and got["s5_k1_n6", 8]["steady_windows"] == 1
    shutil.rmtree(tmp_path / "w" / "logs")
    assert all("steady_tok_s" not in r for r in table.with_steady(rows, tmp_path / "w"))


def test_a_negative_steady_figure_is_not_a_row():
    row = {"config": "baseline", "spec": None, "batch_size": 1, "status": "ok", "tok_s": 1.0}
    assert "steady_tok_s" in res.row_problem({**row, "steady_tok_s": -1.0})
    assert "steady_windows" in res.row_problem({**row, "steady_windows": 1.5})
    assert res.row_problem({**row, "steady_tok_s": None, "steady_windows": 0}) is None


def test_moe_summary_reports_the_steady_best_beside_the_end_to_end_one():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import moe_summary

    t = moe_summary.sweep_table(table.with_steady(
        [r for r in res.latest_rows(res.read_rows(WEAK)).values() if r["status"] == "ok"], WEAK))
    assert moe_summary.best_config(t, 1)["config"] == "s2_k1_n3"          # end to end: 1.57x
    steady = moe_summary.best_config(t, 1, steady=True)
    assert steady["config"] == "s3_k1_n4" and steady["speedup"] == pytest.approx(1.14, abs=0.01)
    assert moe_summary.best_config(t, 8, steady=True)["configs_with_reading"] == [2, 4]
    assert t["8"]["s5_k1_n6"]["steady_speedup"] is None                  # one window: no figure
    summary = json.loads((WEAK.parent / "summary.json").read_text())
    assert summary["best_config_weak_bs1_steady"]["config"] == "s3_k1_n4"


def test_opposite_readings_of_one_batch_size_say_which_to_act_on():
    """End to end says speculate, steady decode says not (the weak MoE sweep's batch 8): one line names both and
    says the steady one is a long-running server's, and how complete it is; agreeing readings get no line."""
    def row(config, tok_s, steady):
        return {"config": config, "batch_size": 8, "status": "ok", "tok_s": tok_s, "steady_tok_s": steady}
    rows = [row("baseline", 930.6, 1595.6), row("s5_k1_n6", 1034.3, None), row("s3_k1_n4", 1000.0, 1468.6)]
    [line] = table.disagreement_lines(rows)
    assert line.startswith("bs 8: the two readings disagree (s5_k1_n6 1.11x end to end, s3_k1_n4 0.92x steady)")
    assert line.endswith("act on it once it covers more than 1 of 2 configurations (a larger --max-new-tokens)")
    rows[1]["steady_tok_s"] = 1400.0
    assert table.disagreement_lines(rows)[0].endswith("the steady reading, act on it")
    rows[0]["steady_tok_s"] = 1000.0  # steady agrees now: speculation wins both ways
    assert table.disagreement_lines(rows) == []
