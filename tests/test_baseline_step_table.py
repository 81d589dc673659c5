"""--baseline-step-ms BS:MS,...: plain decode steps measured at some batch sizes (as verify_cost.py's
summary holds them), priced for the logged batch sizes by whatif/baseline_price.py's rule in `advise`,
`report` and `advise --adaptive-config`; one step for every batch size still works as before; bad input
is one line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor_logs as al
from sglang_patches import cli
from sglang_patches.offline.advise_inputs import StepTable, baseline_step_arg
from sglang_patches.whatif.baseline_price import contradiction_line, one_step, plain_steps_line, price


def run(capsys, *args) -> tuple[int, str, str]:
    try:
        code = cli.main([*map(str, args)])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def mixed_log(tmp_path):
    """Steps-3 chains at batch 1 and batch 8 (verify 5 ms and 9 ms)."""
    one = al.records_from_accepted([3, 2, 0, 1] * 60, bs=1, steps=3, verify_ms=5.0)
    eight = al.records_from_accepted([3, 2, 0, 1] * 60, bs=8, steps=3, verify_ms=9.0, start_cycle=len(one))
    return al.write_records(tmp_path / "mixed.jsonl", one + eight)


def test_the_flag_reads_one_step_or_batch_ms_pairs():
    assert baseline_step_arg("4.5") == 4.5 and not isinstance(baseline_step_arg("4.5"), StepTable)
    table = baseline_step_arg("16:6.2631,1:4.09,4:5.75")
    assert table == {1: 4.09, 4: 5.75, 16: 6.2631} and str(table) == "1:4.09,4:5.75,16:6.2631"


@pytest.mark.parametrize("text", ["1:4,1:5", "0:4", "1:-2", "1:nan", "a:4", "1:", "1:4,,4:5", "1:4;4:5"])
def test_a_bad_table_is_one_line_naming_the_form(capsys, tmp_path, text):
    code, out, err = run(capsys, "advise", mixed_log(tmp_path), "--baseline-step-ms", text)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "batch:ms pairs" in err and "1:4.09,4:5.75,16:6.26" in err, err


def test_advise_prices_each_logged_batch_size_from_the_table(capsys, tmp_path):
    log = mixed_log(tmp_path)
    code, out, _ = run(capsys, "advise", log, "--baseline-step-ms", "1:4.0,16:6.0", "--json")
    d = json.loads(out)
    assert code == 0 and d["baseline"]["source"] == "--baseline-step-ms 1:4,16:6"
    assert d["baseline"]["step_ms"] == {"1": 4.0, "8": pytest.approx(4.0 + 2.0 * 7 / 15)}
    # one step for every batch size prices batch 8 at 4.0 too: a higher ratio than the table's
    _, flat_out, _ = run(capsys, "advise", log, "--baseline-step-ms", "4.0", "--json")
    flat = json.loads(flat_out)["advice"]["rows"]
    table = d["advice"]["rows"]
    logged = next(r for r in table if r["config"] == "s3_k1_n4")
    logged_flat = next(r for r in flat if r["config"] == "s3_k1_n4")
    assert logged["ratio_to_no_spec"] > logged_flat["ratio_to_no_spec"]


def test_outside_the_table_a_batch_size_is_refused_and_said(capsys, tmp_path):
    code, out, _ = run(capsys, "advise", mixed_log(tmp_path), "--baseline-step-ms", "1:4.0,4:5.0")
    used = [ln for ln in out.splitlines() if ln.startswith("plain decode step used: ")]
    assert code == 0 and used == ["plain decode step used: batch 1: 4.00 ms (measured), batch 8: none (refused: the "
                                  "baseline was measured at batch 1-4 only, give a plain step measured at batch 8 "
                                  "(--baseline-step-ms BS:MS, or a plain server's log: several runs' logs can be concatenated into one file))"]


def test_report_and_the_adaptive_config_take_the_table_and_name_it(capsys, tmp_path):
    log = mixed_log(tmp_path)
    _, adv, _ = run(capsys, "advise", log, "--baseline-step-ms", "1:4.0,16:6.0")
    code, rep, _ = run(capsys, "report", log, "--baseline-step-ms", "1:4.0,16:6.0")
    head = adv.splitlines()[:2]
    assert code == 0 and rep.splitlines()[:2] == head
    assert "--baseline-step-ms 1:4,16:6" in rep  # the advise command report names answers the same
    code, ac, _ = run(capsys, "advise", log, "--baseline-step-ms", "1:4.0,16:6.0", "--adaptive-config",
                      tmp_path / "a.json")
    assert code == 0 and ac.splitlines()[:2] == head
    buckets = {b["bucket"]: b for b in json.loads((tmp_path / "a.json").read_text())["sglang_patches"]["buckets"]}
    assert buckets[1]["baseline"] == buckets[8]["baseline"] == "--baseline-step-ms 1:4,16:6"
    assert buckets[8]["plain_tok_s"] == pytest.approx(8 * 1000 / (4.0 + 2.0 * 7 / 15), rel=1e-3)  # 4.93 ms: between 1 and 16
    assert buckets[1]["plain_tok_s"] == pytest.approx(1000 / 4.0, rel=1e-3)


def test_the_tables_text_form_keeps_every_digit_given(capsys, tmp_path):
    _, out, _ = run(capsys, "report", mixed_log(tmp_path), "--baseline-step-ms", "1:4.0912345,16:6.2631")
    assert "--baseline-step-ms 1:4.0912345,16:6.2631" in out


def test_several_measured_and_interpolated_steps_share_one_entry_each():
    _, used = price({1: 4.09, 4: 5.75, 16: 6.26}, [1, 3, 4, 5, 6, 8, 16])
    line = plain_steps_line(used)
    assert line == ("plain decode step used: batch 1: 4.09, 4: 5.75, 16: 6.26 ms (measured), batch 3, 5-6, 8: "
                    "5.20-5.92 ms (interpolated)")
    assert len(line) <= 120
    _, used = price({1: 4.09, 4: 5.75, 16: 6.26}, [2, 3, 4])  # in batch order: the interpolated ones first here
    assert plain_steps_line(used) == ("plain decode step used: batch 2-3: 4.64-5.20 ms (interpolated), "
                                      "batch 4: 5.75 ms (measured)")
    _, used = price({4: 5.0, 8: 6.0}, [1, 2, 6, 32])  # the refusals of one measured range share one entry
    assert plain_steps_line(used) == (
        "plain decode step used: batch 1-2, 32: none (refused: the baseline was measured at batch 4-8 only, give a "
        "plain step measured at batch 1-2, 32 (--baseline-step-ms BS:MS, or a plain server's log: several runs' logs "
        "can be concatenated into one file)), "
        "batch 6: 5.50 ms (interpolated between batch 4 and 8)")
    assert plain_steps_line([]) == "plain decode step used: none"
    _, used = one_step(5.0, [1, 8])  # one step for all: as before
    assert plain_steps_line(used) == "plain decode step used: batch 1, 8: 5.00 ms (--baseline-step-ms, given for every batch size)"


def test_contradictions_at_several_batch_sizes_are_one_warning_line():
    found = [{"bs": 3, "baseline_ms": 5.2, "verify_ms": 4.79, "gap_ms": 0.02},
             {"bs": 8, "baseline_ms": 5.92, "verify_ms": 5.87, "gap_ms": 0.02}]
    line = contradiction_line(found)
    assert line.startswith("warning: the baseline contradicts the log: at batch 3, 8 its plain decode step (5.20, "
                           "5.92 ms) is slower than the logged verify plus the gap between cycles (4.81, 5.89 ms)")
    assert "\n" not in line and "expert routing" in line
    assert contradiction_line(found[:1]).startswith("warning: the baseline contradicts the log: a plain decode step "
                                                    "of 5.20 ms at batch 3")


def test_a_batch_given_twice_is_named(capsys, tmp_path):
    code, _, err = run(capsys, "advise", mixed_log(tmp_path), "--baseline-step-ms", "1:4.09,4:5.75,4:5.8")
    assert code == 2 and "batch 4 given twice" in err and len(err.strip().splitlines()) == 1


def test_a_verify_cost_measurement_offers_its_plain_steps_when_no_baseline_is_given(capsys, tmp_path):
    """verify_cost.py's summary of the Kimi family target (its three plain rows) and a log without a baseline."""
    summary = (Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "2026-12-06-kimi-family" / "llama_head"
               / "verify_cost.json")
    code, out, _ = run(capsys, "advise", mixed_log(tmp_path), "--verify-cost", f"{summary}:kimi-k2-mla")
    offer = [ln for ln in out.splitlines() if "plain decode steps too" in ln]
    assert code == 0 and offer == ["note: the --verify-cost measurement has plain decode steps too; if it is this model "
                                   "on this GPU, give them: --baseline-step-ms 1:4.09045,4:5.75085,16:6.2631"]
    code, out, _ = run(capsys, "advise", mixed_log(tmp_path), "--verify-cost", f"{summary}:kimi-k2-mla",
                       "--baseline-step-ms", "1:4.09045,4:5.75085,16:6.2631")
    assert code == 0 and "plain decode steps too" not in out  # a baseline given: nothing to offer
    code, _, err = run(capsys, "advise", mixed_log(tmp_path), "--verify-cost", str(summary.parent))
    assert code == 2 and "a directory; give the summary.json in it" in err


def test_a_step_that_falls_as_the_batch_grows_is_questioned(capsys, tmp_path):
    _, out, _ = run(capsys, "advise", mixed_log(tmp_path), "--baseline-step-ms", "1:4.09,4:3.0,16:6.26")
    said = [ln for ln in out.splitlines() if "check the pairs" in ln]
    assert said == ["note: --baseline-step-ms: the step at batch 4 (3.00 ms) is under batch 1's (4.09 ms), but a plain "
                    "decode step grows with the batch (it adds attention and KV reads); check the pairs"]
    _, out, _ = run(capsys, "advise", mixed_log(tmp_path), "--baseline-step-ms", "1:4.09,4:5.75,16:6.26")
    assert "check the pairs" not in out

