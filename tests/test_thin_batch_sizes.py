"""What advise leaves out of a log, and says: a batch size seen in fewer than MIN_BS_CYCLES decode cycles (the
batch ramping between the sizes the traffic holds), kept only when nothing else is left (rebuilt from a GPU log's
shape: 97 cycles at batch 16 and single cycles at batch 2, 4, 8 with 80-110 ms GPU gaps, a prefill between);
cycles after every request finished; first-use prefills."""
from __future__ import annotations

import json

import pytest

import advisor_logs as al
from test_advisor import run_advise
from sglang_patches.whatif import advisor as adv
from sglang_patches.whatif.advisor_observation import MIN_BS_CYCLES
from sglang_patches.whatif.advisor_records import observation_from_records


def _log(ramp_gap_ms: float = 100.0, steady: int = 97):
    steady_recs = al.records_from_accepted([3, 2, 1, 0] * (steady * 16 // 4), bs=16, steps=3, verify_ms=9.6, gap_ms=0.1)
    ramp, start = [], len(steady_recs)
    for bs in (2, 4, 8):
        ramp += al.records_from_accepted([3] * bs, bs=bs, steps=3, verify_ms=6.0, gap_ms=ramp_gap_ms, start_cycle=start)
        start += 1
    return ramp + steady_recs


def test_the_ramps_few_cycles_do_not_price_the_answer():
    obs = observation_from_records(_log())
    assert [c.bs for c in obs.costs] == [16] and obs.thin_bs == [(2, 1), (4, 1), (8, 1)]
    note = obs.thin_note()
    assert note.startswith(f"batch 2, 4, 8: 3 decode cycles in all, under {MIN_BS_CYCLES} at each") and "batch 16" in note
    steady_only = observation_from_records(_log()[-97 * 16:])
    plain = {16: 6.26}
    ratio = adv.advise(obs, baseline_ms=plain).best.ratio
    assert ratio == pytest.approx(adv.advise(steady_only, baseline_ms=plain).best.ratio, rel=1e-6)
    assert ratio > 1.3  # the steady batch-16 answer, whatever the ramp's 100 ms gaps


def test_a_log_of_only_thin_batch_sizes_keeps_them_all():
    recs = al.records_from_accepted([2] * 6, bs=2, steps=3) + \
        al.records_from_accepted([2] * 4, bs=4, steps=3, start_cycle=3)
    obs = observation_from_records(recs)
    assert [c.bs for c in obs.costs] == [2, 4] and obs.thin_bs == [] and obs.thin_note() == ""


def test_advise_says_which_batch_sizes_it_left_out(tmp_path, capsys):
    from sglang_patches import cli

    log = al.write_records(tmp_path / "ramp.jsonl", _log())
    assert cli.main(["advise", str(log), "--baseline-step-ms", "16:6.26"]) == 0
    out = capsys.readouterr().out
    assert "note: batch 2, 4, 8: 3 decode cycles in all" in out and "refused" not in out
    assert "batch sizes 16 (97) (left out: 3 of the batch filling or draining (sizes held < 5 cycles))" in out


def test_advise_counts_the_cycles_report_counts(tmp_path, capsys):
    # a batch whose every request finished still logs a decode cycle, with nothing accepted: report counts it,
    # advise leaves it out of the acceptance and costs; its log line names them so the totals agree
    from sglang_patches import cli

    recs = _log()
    last = recs[-1]
    recs += [dict(last, cycle=last["cycle"] + 1 + i, t=last["t"] + 0.01 * (i + 1), accepted=[]) for i in range(2)]
    log = al.write_records(tmp_path / "finished.jsonl", recs)
    assert cli.main(["advise", str(log), "--baseline-step-ms", "16:6.26"]) == 0
    out = capsys.readouterr().out
    assert "97 decode cycles" in out and "(left out: 3 of the batch filling or draining (sizes held < 5 cycles), 2 whose every request had already finished, no token kept)" in out
    assert cli.main(["report", str(log), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ranks"]["0"]["cycles"]["decode"] == 97 + 3 + 2


def test_first_use_prefills_are_told_apart_from_traffic(tmp_path, capsys):
    """A prefill 10x the median one is a kernel compiled or a graph captured at first use (a GPU log's first
    prefills took 0.8-3.3 s, its others 17-40 ms): counted apart, left out of prefill's share."""
    from sglang_patches.vocab.schema import make_record

    def prefill(i, ms):
        return make_record(cycle=i, t=1.7e9 + i, rank=0, kind="prefill", bs=1, steps=3, topk=1, draft_tokens=4,
                           accepted=[], draft_ms=None, verify_ms=None, extend_ms=0.3, cycle_ms=ms, host_gap_ms=None)

    decode = al.records_from_accepted([2, 1, 3, 0] * 50, bs=1, steps=3, cycle_ms=6.0, gap_ms=0.0)  # 1200 ms
    prefills = [prefill(0, 2500.0), prefill(1, 30.0), prefill(2, 900.0), prefill(3, 20.0), prefill(4, 40.0),
                prefill(5, 30.0)]
    log = al.write_records(tmp_path / "warm.jsonl", prefills + decode)
    code, out, err = run_advise(capsys, log, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["observation"]["slow_prefill_records"] == 2
    assert d["observation"]["prefill_gpu_share"] == pytest.approx(120.0 / (120.0 + 1200.0))
    slow = [n for n in d["notes"] if n.startswith("2 prefill(s) took 3.4 s in all, each over 10x the median")]
    assert len(slow) == 1 and slow[0].endswith(f"(with them {100 * 3520 / (3520 + 1200):.0f} %)")
    assert any(n.startswith("prefill took 9 % of this log's GPU time (4 prefill records, 30.0 ms each") for n in d["notes"])
