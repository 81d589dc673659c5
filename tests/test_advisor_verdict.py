"""The advisor's answer when there is nothing to gain or nothing to compare with: a drafter that
accepts nothing leads every answer (no chain recommended), a missing baseline is said first, a
baseline that contradicts the log is flagged, and the log's own steps-0 decode cycles are a
baseline."""
from __future__ import annotations

import json

import pytest

import advisor_logs as al
from sglang_patches import cli
from sglang_patches.whatif import advisor as adv
from sglang_patches.whatif.advisor_records import observation_from_records


def run_advise(capsys, *args):
    """In-process CLI run: (exit code, stdout, stderr)."""
    try:
        code = cli.main(["advise", *map(str, args)])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_drafter_that_accepts_nothing_leads_the_answer_with_or_without_a_baseline():
    recs = al.records_from_accepted([0] * 98 + [1] * 2, bs=1, steps=3, verify_ms=5.0, cycle_ms=6.0)
    obs = observation_from_records(recs)
    for baseline in (None, {1: 4.0}, {1: 20.0}):  # 20 ms: a baseline under which s1 would "gain"
        advice = adv.advise(obs, baseline_ms=baseline)
        d = advice.to_dict("s3_k1_n4")
        assert d["verdict"] == "drafter_accepts_nothing" and d["recommended"] is None and d["speculate"] is False
        lines = d["lines"]
        assert lines[0].startswith("the drafter accepts nothing: accept length 1.02 at steps 3")
        assert "cannot beat plain decode" in lines[0]
        assert "EAGLE-3 drafter served with --speculative-algorithm EAGLE" in lines[1]
        assert "dummy" in lines[1] and "quantised target" in lines[1]
        assert lines[2].startswith("check them: sglang-patches preflight --model-path TARGET")
        assert not any(ln.startswith("recommended:") for ln in lines)
    # at steps 1 a low accept length is no such sign; simulated acceptance is no drafter
    one = observation_from_records(al.records_from_accepted([0] * 100, bs=1, steps=1, verify_ms=5.0, cycle_ms=6.0))
    assert adv.advise(one).no_accept is None
    obs.simulated = True
    assert adv.advise(obs).no_accept is None


def test_without_a_baseline_the_first_line_says_it_cannot_tell():
    recs = al.records_from_accepted([2] * 100, bs=1, steps=3, verify_ms=5.0, cycle_ms=6.0)
    advice = adv.advise(observation_from_records(recs))
    head = advice.verdict_lines()  # the verdict leads; its last line says there is no baseline
    lines = advice.lines("s3_k1_n4")[len(head):]
    assert advice.speculate is None and advice.to_dict()["verdict"] == "unknown_without_baseline"
    assert head[-1].startswith("no plain decode baseline: ")
    assert lines[0].startswith("plain decode baselines, truest first:") and all(len(ln) <= 120 for ln in lines[:3])
    for how in ("--baseline-step-ms", "--baseline-log", "--calibration", "--speculative-adaptive", "steps-0",
                "timing log as a second LOG"):
        assert how in " ".join(lines[:3])
    assert lines[3].startswith("best chain: ") and not any(ln.startswith("recommended") for ln in lines)
    # the verdict holds the one number a user can compare a plain step with: the best chain's break-even
    be = lines[3].rsplit("takes > ", 1)[1].split(" ms")[0]
    assert head[-1] == (f"no plain decode baseline: {advice.best.label} pays only if a plain decode step takes > {be} ms; "
                        "give --baseline-log SERVER.log") and len(head[-1]) <= 120


def test_a_baseline_slower_than_the_logged_verify_is_flagged():
    recs = al.records_from_accepted([2] * 100, bs=1, steps=3, verify_ms=5.0, cycle_ms=6.0, gap_ms=0.2)
    obs = observation_from_records(recs)
    ok = adv.advise(obs, baseline_ms={1: 5.1})  # under verify + gap: plausible
    assert ok.contradictions == []
    bad = adv.advise(obs, baseline_ms={1: 9.0})
    assert bad.contradictions == [{"bs": 1, "baseline_ms": 9.0, "verify_ms": 5.0, "gap_ms": pytest.approx(0.2)}]
    line = bad.lines("s3_k1_n4")[len(bad.verdict_lines())]  # first after the verdict
    assert line.startswith("warning: the baseline contradicts the log: a plain decode step of 9.00 ms at batch 1")
    assert "slower than the logged verify (5.00 ms)" in line
    answer = next(ln for ln in bad.lines("s3_k1_n4") if ln.startswith("recommended"))
    assert "x plain decode (against a baseline the log contradicts: see the warning)" in answer
    assert "contradicts" not in next(ln for ln in ok.lines("s3_k1_n4") if ln.startswith("recommended"))


def test_steps_0_cycles_in_the_log_are_its_baseline(tmp_path, capsys):
    from sglang_patches.vocab.schema import make_record

    recs = al.records_from_accepted([2] * 100, bs=1, steps=3, verify_ms=5.0, cycle_ms=6.0, gap_ms=0.0)
    t0 = recs[-1]["t"]
    recs += [make_record(cycle=1000 + i, t=t0 + i, rank=0, kind="decode", bs=1, steps=0, topk=0, draft_tokens=0,
                         accepted=[], draft_ms=None, verify_ms=None, extend_ms=None, cycle_ms=4.0 + (i % 3) * 0.1,
                         host_gap_ms=0.1, gpu_gap_ms=0.0) for i in range(30)]
    obs = observation_from_records(recs)
    assert obs.plain_steps == {1: (30, pytest.approx(4.1))} and obs.plain_baseline() == {1: pytest.approx(4.1)}
    assert obs.accept_length(3) == pytest.approx(3.0)  # the plain steps are not chain cycles
    log = al.write_records(tmp_path / "mixed.jsonl", recs)
    code, out, _ = run_advise(capsys, log, "--json")
    assert code == 0
    d = json.loads(out)
    assert d["baseline"]["source"] == "the logs' 30 plain decode steps (steps 0)"
    assert d["advice"]["verdict"] == "speculate" and d["advice"]["best"]["ratio_to_no_spec"] is not None


def test_a_short_log_is_said_to_give_a_rough_answer_first_after_the_verdict():
    few = observation_from_records(al.records_from_accepted([2] * 40, bs=1, steps=3, verify_ms=5.0, cycle_ms=6.0))
    a = adv.advise(few, baseline_ms={1: 4.6})
    lines = [ln for ln in a.lines("s3_k1_n4")[len(a.verdict_lines()):]
             if not ln.startswith(("plain decode step used", "levers:"))]
    assert lines[0] == ("warning: the log has only 40 request-cycles of s3_k1_n4: its accept lengths, and so this "
                        "answer, are a rough guess; log a few hundred cycles of your traffic")
    assert lines[1].startswith("recommended:")
    enough = observation_from_records(al.records_from_accepted([2] * adv.FEW_CYCLES, bs=1, steps=3, verify_ms=5.0,
                                                               cycle_ms=6.0))
    assert not any("rough guess" in ln for ln in adv.advise(enough, baseline_ms={1: 4.6}).lines("s3_k1_n4"))


def test_a_log_across_adaptive_buckets_points_at_the_per_bucket_answer(tmp_path, capsys):
    one = al.records_from_accepted([3] * 150, bs=1, steps=3, verify_ms=5.0, cycle_ms=6.0)
    eight = al.records_from_accepted([0] * 160, bs=8, steps=3, verify_ms=9.0, cycle_ms=10.0, start_cycle=len(one))
    code, out, _ = run_advise(capsys, al.write_records(tmp_path / "both.jsonl", one + eight), "--json")
    assert code == 0 and [n for n in json.loads(out)["notes"] if "adaptive buckets" in n] == [
        "the log's batch sizes (1: 150, 8: 20 cycles) fall in SGLang's adaptive buckets 1, 8: this table pools them "
        "by cycle count; --adaptive-config OUT.json answers per bucket"]
    code, out, _ = run_advise(capsys, al.write_records(tmp_path / "one.jsonl", one), "--json")
    assert code == 0 and not [n for n in json.loads(out)["notes"] if "adaptive buckets" in n]


def test_simulated_acceptance_is_worded_by_its_figures():
    """Under simulated acceptance the verdict's word follows the figures: a low simulated accept length says
    low (not 'accepts well'), a high one keeps 'accepts well'; no drafter's causes follow either."""
    for accepted, word in (([0] * 60 + [1] * 30 + [2] * 10, "SIMULATED acceptance (rates set at launch) is low"),
                           ([0] * 99 + [1], "SIMULATED acceptance (rates set at launch) is low"),  # accept-nothing figures, simulated
                           ([3] * 80 + [1] * 20, "SIMULATED acceptance (rates set at launch) is high")):
        recs = al.records_from_accepted(accepted, bs=1, steps=3, verify_ms=5.0, cycle_ms=6.0, simulated=True)
        advice = adv.advise(observation_from_records(recs))
        head = advice.verdict_lines()
        assert head[0].startswith(word), head
        assert "accepts well" not in head[0] or word.endswith("accepts well"), head
        assert advice.low_accept is None and advice.no_accept is None
        assert not any("likely causes" in ln for ln in head)


def test_a_baseline_within_the_noise_of_the_logged_verify_is_no_contradiction():
    """5 % over verify + gap is within run-to-run noise of a median (or an interpolated step's error)."""
    recs = al.records_from_accepted([2] * 100, bs=1, steps=3, verify_ms=5.0, cycle_ms=6.0, gap_ms=0.2)
    obs = observation_from_records(recs)
    assert adv.advise(obs, baseline_ms={1: 5.4}).contradictions == []  # 5.2 ms + 3.8 %
    assert [c["bs"] for c in adv.advise(obs, baseline_ms={1: 5.5}).contradictions] == [1]  # + 5.8 %


def test_the_why_line_splits_the_ratio_into_tokens_and_plain_steps_and_the_levers_price_two_changes():
    # accept length 4 at steps 3; a 6.6 ms cycle (verify 5.0, draft 0.8, extend 0.4) against a 4.0 ms plain step:
    # the cycle is 1.65 plain steps, so 4 tokens give 4 / 1.65 = 2.42x
    recs = al.records_from_accepted([3] * 200, bs=1, steps=3, draft_ms=0.8, verify_ms=5.0, extend_ms=0.4,
                                    cycle_ms=6.6, gap_ms=0.0)
    a = adv.advise(observation_from_records(recs), baseline_ms={1: 4.0})
    head = a.verdict_lines()
    assert head[1] == "speculate: keep s3_k1_n4, predicted at 2.42x plain decode"
    assert head[2] == ("why 2.42x: a cycle yields 4.00 tokens in the time of 1.65 plain steps "
                       "(verify 1.25, draft 0.20, extend 0.10, other 0.10)")
    levers = next(ln for ln in a.lines("s3_k1_n4") if ln.startswith("levers:"))
    # 4.3 / 1.65 = 2.61; the draft 1.7x faster: 4 / (1.65 - 0.20 * (1 - 1 / 1.7)) = 2.55
    assert "accept length +0.3 -> 2.61x" in levers and "fp8, Llama heads) -> 2.55x" in levers
    # no baseline: no ratio to explain, no levers to price
    bare = adv.advise(observation_from_records(recs))
    assert not any(ln.startswith(("why ", "levers:")) for ln in bare.lines("s3_k1_n4"))
    # low acceptance fills the four lines with its causes: the why line gives way, the speculate line stays last
    low = al.records_from_accepted([0, 0, 1, 0] * 50, bs=1, steps=3, cycle_ms=6.6, gap_ms=0.0)
    lines = adv.advise(observation_from_records(low), baseline_ms={1: 4.0}).verdict_lines()
    assert lines[3].startswith(("speculate:", "don't speculate:")) and not any(ln.startswith("why ") for ln in lines)
    # simulated acceptance has no drafter to improve: the accept lever is left out
    sim = al.records_from_accepted([3] * 200, bs=1, steps=3, draft_ms=0.8, cycle_ms=6.6, gap_ms=0.0, simulated=True)
    levers = next(ln for ln in adv.advise(observation_from_records(sim), baseline_ms={1: 4.0}).lines("s3_k1_n4")
                  if ln.startswith("levers:"))
    assert "accept length" not in levers and "faster draft phase" in levers
    # a draft phase too small to move the figure is named so, not priced at the figure it already has
    tiny = al.records_from_accepted([3] * 200, bs=1, steps=3, draft_ms=0.02, verify_ms=5.0, extend_ms=0.4,
                                    cycle_ms=5.82, gap_ms=0.0)
    levers = next(ln for ln in adv.advise(observation_from_records(tiny), baseline_ms={1: 4.0}).lines("s3_k1_n4")
                  if ln.startswith("levers:"))
    assert "the draft phase is 0 % of the cycle: a faster one gains < 0.01x" in levers and "fp8" not in levers


def test_verdict_lines_stay_within_the_width_with_many_unpriced_batch_sizes_and_long_cycles():
    # five logged batch sizes, a baseline at batch 1 only: four unpriced, said as spans with their share
    recs = []
    for i, bs in enumerate((1, 2, 3, 4, 6)):
        recs += al.records_from_accepted([0, 1, 2, 3] * 40 * bs, bs=bs, steps=3, start_cycle=1000 * i)
    a = adv.advise(observation_from_records(recs), baseline_ms={1: 4.0})
    head = a.verdict_lines()
    assert head[1].endswith("; no baseline at batch 2-4, 6 (80 % of cycles)"), head[1]
    # a slow verify against a fast plain step: the cycle is over 10 plain steps, said with three figures
    slow = al.records_from_accepted([3] * 200, bs=1, steps=3, verify_ms=60.0, cycle_ms=66.0, gap_ms=0.5)
    why = adv.advise(observation_from_records(slow), baseline_ms={1: 4.0}).verdict_lines()[2]
    assert why.startswith("why 0.24x:") and "in the time of 16.6 plain steps (verify 15.0," in why, why
    for line in head + [why]:
        assert len(line) <= 120 and not line.endswith("..."), line
