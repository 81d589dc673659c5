"""`--verify-cost` held against the log: the log's own verify over the plain step given, beside the measured ratio
at the logged draft tokens. Within 1.25x nothing is said; beyond it a note; beyond 1.5x a warning that advise and
report advise, report and --adaptive-config print right after the verdict (an INT4 target's log priced with the bf16 fixture's plain steps read
1.26x where the measurement says 2.33x). And report's figure title names the batch size that held the GPU time."""
from __future__ import annotations

import json

import pytest

import advisor_logs as al
from test_advisor import run_advise
from sglang_patches import cli
from sglang_patches.offline.report_advice import figure_title
from sglang_patches.whatif.advisor_records import ObservationBuilder


def _files(tmp_path, ratio_t4: float):
    log = al.write_records(tmp_path / "t.jsonl", al.records_from_accepted(
        [3, 1, 2, 3, 0, 1, 3, 2] * 40, bs=1, steps=3, draft_ms=1.0, verify_ms=5.0, extend_ms=0.6, cycle_ms=6.6,
        gap_ms=0.1))  # verify 5.0 over the 2.4 ms plain step given: 2.08x at 4 draft tokens
    vc = tmp_path / f"vc{ratio_t4}.json"
    vc.write_text(json.dumps({"verify_over_step_by_fixture": {"f": {"1": {"2": 1.0, "4": ratio_t4, "8": 3.6}}},
                              "routing": "uniform"}))
    return log, vc


@pytest.mark.parametrize("ratio_t4,said", [(2.2, None), (1.6, "note"), (1.0, "warning")])
def test_how_far_off_decides_what_is_said(tmp_path, capsys, ratio_t4, said):
    log, vc = _files(tmp_path, ratio_t4)
    code, out, err = run_advise(capsys, log, "--baseline-step-ms", "2.4", "--verify-cost", vc)
    assert code == 0, err
    lines = out.splitlines()
    warned = [i for i, ln in enumerate(lines) if ln.startswith("warning: batch 1: the log's verify is 2.08x")]
    noted = [ln for ln in lines if ln.startswith("note: --verify-cost: the log's verify over its plain step")]
    assert (said, len(warned), len(noted)) in ((None, 0, 0), ("note", 0, 1), ("warning", 1, 0))
    if said == "warning":
        assert lines[warned[0]] == ("warning: batch 1: the log's verify is 2.08x the plain step given, --verify-cost's "
                                    "1.00x: one is not this server's") and len(lines[warned[0]]) <= 120
        assert lines[warned[0] - 1].startswith("plain decode step used:")  # right after the verdict
        # and what to do, among the notes: measure this model's, give this server's plain steps
        [todo] = [ln for ln in lines if ln.startswith("note: --verify-cost: its growth over draft tokens")]
        assert "python benchmarks/verify_cost.py --model TARGET_DIR --draft DRAFT_DIR" in todo
        assert cli.main(["report", str(log), "--baseline-step-ms", "2.4", "--verify-cost", str(vc)]) == 0
        report = capsys.readouterr().out.splitlines()
        assert lines[warned[0]] in report[:4]  # report leads with it too
        code, out, err = run_advise(capsys, log, "--baseline-step-ms", "2.4", "--verify-cost", vc,
                                    "--adaptive-config", tmp_path / "a.json")
        assert code == 0, err
        adaptive = out.splitlines()
        assert lines[warned[0]] in adaptive and adaptive.index(lines[warned[0]]) < 6  # so does --adaptive-config
        # the verdict itself stays the one every answer gives (at most four lines): the warning follows it
        verdicts = []
        for argv in (["advise", str(log)], ["report", str(log)]):
            assert cli.main([*argv, "--baseline-step-ms", "2.4", "--verify-cost", str(vc), "--json"]) == 0
            doc = json.loads(capsys.readouterr().out)
            verdicts.append(doc["advice"]["verdict_lines"])
        assert verdicts[0] == verdicts[1] and len(verdicts[0]) <= 4
        assert not any(ln.startswith("warning: ") for ln in verdicts[0])


def test_the_title_names_the_batch_size_that_held_the_gpu_time():
    b = ObservationBuilder()
    for r in al.records_from_accepted([2] * 8, bs=1, steps=3):
        b.add(r)
    summary = {"cycle_time_by_bs": {"16": 0.84, "1": 0.05, "2": 0.04, "8": 0.04, "15": 0.03}}
    assert figure_title(b, summary, "decode") == ("s3_k1_n4 at batch 16: 84 % of the GPU time, the rest at 1-15 "
                                                  "(decode cycles)")
    assert figure_title(b, {"cycle_time_by_bs": {"1": 0.6, "8": 0.4}}, "decode") == "s3_k1_n4 at batch 1, 8 (decode cycles)"
