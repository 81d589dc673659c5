"""sglang-patches advise: truncation exactness, the cost model, recorded sweeps, bad input."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

import advisor_logs as al
from sglang_patches import cli
from sglang_patches.errors import UserError
from sglang_patches.whatif import advisor as adv
from sglang_patches.whatif.advisor_records import observation_from_records, observation_from_summary
from sglang_patches.vocab.logread import read_records

REPO = Path(__file__).resolve().parents[1]


def run_advise(capsys, *args):
    """In-process CLI run: (exit code, stdout, stderr)."""
    try:
        code = cli.main(["advise", *map(str, args)])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_one_line_error(code, err, *needles):
    assert code == 2, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("sglang-patches: error:")]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], lines[0]


def observe(path, config=None):
    recs, _ = read_records([path])
    return observation_from_records(recs, str(path), config)


# ---------------------------------------------------------------- acceptance

@pytest.mark.parametrize("bs,steps,rates", [(1, 5, [0.8, 0.7, 0.6, 0.5, 0.4]),
                                           (7, 4, [0.55, 0.9, 0.3]),      # odd batch, rising then falling
                                           (3, 2, [0.999])])               # near-full acceptance
def test_truncation_is_exact_against_the_generator(tmp_path, bs, steps, rates):
    runs = al.chain_log(tmp_path / "log.jsonl", steps, rates, request_cycles=3001, bs=bs, seed=bs)
    obs = observe(tmp_path / "log.jsonl")
    assert obs.request_cycles == len(runs)
    for s in range(1, steps + 1):
        truth = 1 + sum(min(L, s) for L in runs) / len(runs)   # from the generator's full run lengths
        assert obs.accept_length(s) == pytest.approx(truth, rel=1e-12, abs=1e-12)
    rows = adv.predict(obs, range(1, steps + 3))
    assert [r.extrapolated for r in rows] == [s > steps for s in range(1, steps + 3)]
    assert [r.logged for r in rows] == [s == steps for s in range(1, steps + 3)]


def test_extrapolation_follows_a_constant_rate_chain(tmp_path):
    runs = al.chain_log(tmp_path / "log.jsonl", 3, [0.7], request_cycles=20000, seed=3)
    obs = observe(tmp_path / "log.jsonl")
    for s in (5, 7):
        truth = 1 + sum(min(L, s) for L in runs) / len(runs)
        assert obs.accept_length(s) == pytest.approx(truth, rel=0.02)


# ---------------------------------------------------------------- costs

def test_draft_scales_with_forwards_and_verify_is_held(tmp_path):
    recs = al.records_from_accepted([2, 0, 4, 1] * 50, bs=4, steps=5, draft_ms=2.0, verify_ms=6.0, extend_ms=0.5,
                                    cycle_ms=9.0, gap_ms=1.0)
    obs = observation_from_records(recs)
    rows = {r.steps: r for r in adv.predict(obs, [1, 2, 5, 6])}
    for s, r in rows.items():
        (b,) = r.by_bs
        assert b["draft_ms"] == pytest.approx(2.0 * (s - 1) / 4)   # s - 1 drafter forwards
        assert b["verify_ms"] == 6.0 and b["extend_ms"] == 0.5 and b["gap_ms"] == 1.0
        assert r.period_ms == pytest.approx(9.0 + 1.0 + 2.0 * (s - 1) / 4 - 2.0)
        assert r.tok_s == pytest.approx(4 * r.accept_length * 1000 / r.period_ms)
        assert r.break_even_step_ms == pytest.approx(r.period_ms / r.accept_length)


def test_steps_one_log_estimates_a_forward_from_the_extend(tmp_path):
    recs = al.records_from_accepted([1, 0, 1] * 30, bs=1, steps=1, draft_ms=0.1, verify_ms=3.0, extend_ms=0.4)
    rows = adv.predict(observation_from_records(recs), [1, 3])
    assert rows[1].by_bs[0]["draft_ms"] == pytest.approx(0.1 + 2 * 0.4)
    assert rows[1].extrapolated


def test_batch_mix_is_weighted_by_cycles_and_baseline_gives_ratios():
    recs = (al.records_from_accepted([1] * 30, bs=1, steps=2, verify_ms=4.0, cycle_ms=5.0, gap_ms=0.0)
            + al.records_from_accepted([1] * 30, bs=3, steps=2, verify_ms=7.0, cycle_ms=8.0, gap_ms=0.0))
    obs = observation_from_records(recs)
    assert [(c.bs, c.cycles) for c in obs.costs] == [(1, 30), (3, 10)]
    (row,) = adv.predict(obs, [2], baseline_ms={1: 2.0, 3: 3.0})
    assert row.tok_s == pytest.approx((30 * 1 * 2 + 10 * 3 * 2) * 1000 / (30 * 5.0 + 10 * 8.0))
    base_tok = (30 * 1 + 10 * 3) * 1000 / (30 * 2.0 + 10 * 3.0)
    assert row.ratio == pytest.approx(row.tok_s / base_tok)
    assert row.break_even_accept == pytest.approx((30 * 5.0 + 10 * 8.0) / (30 * 2.0 + 10 * 3.0))


def test_no_speculation_recommended_when_the_baseline_wins():
    # accept length 2 at a 6 ms cycle against a 2 ms plain step: every chain loses
    recs = al.records_from_accepted([1] * 100, bs=1, steps=3, verify_ms=5.0, cycle_ms=6.0)
    advice = adv.advise(observation_from_records(recs), baseline_ms={1: 2.0})
    d = advice.to_dict()
    assert not advice.speculate and d["recommended"] is None and d["verdict"] == "no_speculation"
    head = advice.verdict_lines()
    assert head[1].startswith("don't speculate: the best chain s1_k1_n2 is predicted at 0.")
    assert next(ln for ln in advice.lines("s3_k1_n4")[len(head):]
                if not ln.startswith(("plain decode step used", "levers:"))).startswith("recommended: no speculation")
    assert not d["drafter_accepts_nothing"] and not d["baseline_contradictions"]


def test_server_summary_gives_the_same_acceptance(tmp_path):
    from sglang_patches.vocab.stats import summarize

    runs = al.chain_log(tmp_path / "log.jsonl", 4, [0.6], request_cycles=500, bs=2)
    recs, _ = read_records([tmp_path / "log.jsonl"])
    obs = observation_from_summary(summarize(recs), 4, 1, 5)
    assert obs.accept_length(2) == pytest.approx(1 + sum(min(L, 2) for L in runs) / len(runs))
    assert observation_from_summary(summarize(recs), 2, 1, 3) is None  # a longer histogram: mixed


# ---------------------------------------------------------------- recorded sweeps (H200 rows)

@pytest.mark.parametrize("bs", [1, 32])
def test_advise_on_recorded_8b_sweep_gives_a_table(tmp_path, capsys, bs):
    log = al.log_from_sweep_row(al.sweep_row(al.SWEEP_8B, "s5_k1_n6", bs), tmp_path / "s5.jsonl")
    code, out, err = run_advise(capsys, log, "--calibration", al.SWEEP_8B)
    assert code == 0, err
    for s in range(1, 8):
        assert f"s{s}_k1_n{s + 1}" in out
    assert "extrapolated" in out and "recommended: s3_k1_n4" in out
    code, out, _ = run_advise(capsys, log, "--calibration", al.SWEEP_8B, "--json")
    rows = {r["config"]: r for r in json.loads(out)["advice"]["rows"]}
    for name in ("s2_k1_n3", "s3_k1_n4"):   # predicted from the s5 row vs measured in their own servers
        measured = al.sweep_row(al.SWEEP_8B, name, bs)
        assert rows[name]["accept_length"] == pytest.approx(measured["accept_length"], rel=0.02)
        assert rows[name]["tok_s"] == pytest.approx(measured["tok_s"], rel=0.10)


def test_advise_on_recorded_trained_grid_runs_low_by_a_few_percent(tmp_path):
    """Real text (trained fixture, no simulated acceptance): truncating the s5 run underestimates the
    accept length the s1-s3 servers measured, by 3-6 % at every batch size (benchmarks/results/README.md:
    a shorter chain starts more of its cycles inside easy spans). Bounded here so a change shows."""
    for bs in (1, 8, 32):
        obs = observe(al.log_from_sweep_row(al.sweep_row(al.SWEEP_TRAINED, "s5_k1_n6", bs), tmp_path / f"{bs}.jsonl"))
        for s in (1, 2, 3):
            measured = al.sweep_row(al.SWEEP_TRAINED, f"s{s}_k1_n{s + 1}", bs)["accept_length"]
            assert -0.07 < obs.accept_length(s) / measured - 1 < 0.0


# ---------------------------------------------------------------- baselines and calibration

def test_baseline_log_from_sglang_decode_lines(tmp_path, capsys):
    log = al.write_records(tmp_path / "s3.jsonl", al.records_from_accepted([2, 1, 3, 0] * 40, bs=1, steps=3))
    base = tmp_path / "server.log"
    base.write_text("[2026-11-29 10:00:00] Decode batch, #running-req: 1, #token: 90, token usage: 0.00, "
                    "cuda graph: True, gen throughput (token/s): 200.00, #queue-req: 0,\n" * 3)
    code, out, err = run_advise(capsys, log, "--baseline-log", base, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["baseline"]["step_ms"] == {"1": pytest.approx(5.0)}
    assert d["advice"]["best"]["ratio_to_no_spec"] is not None
    spec = tmp_path / "spec.log"
    spec.write_text("[2026-11-29 10:00:00] Decode batch, #running-req: 1, #token: 90, token usage: 0.00, "
                    "accept len: 2.10, accept rate: 0.40, cuda graph: True, gen throughput (token/s): 300.00, #queue-req: 0,\n")
    assert_one_line_error(*run_advise(capsys, log, "--baseline-log", spec)[::2], "ran speculation")
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    assert_one_line_error(*run_advise(capsys, log, "--baseline-log", empty)[::2], "no steady 'Decode batch")


def test_calibration_of_another_model_is_refused(tmp_path, capsys):
    log = al.log_from_sweep_row(al.sweep_row(al.SWEEP_TRAINED, "s5_k1_n6", 1), tmp_path / "s5.jsonl")
    assert_one_line_error(*run_advise(capsys, log, "--calibration", al.SWEEP_8B)[::2], "not this log's model")
    assert_one_line_error(*run_advise(capsys, log, "--calibration", tmp_path)[::2], "no results.jsonl")
    assert_one_line_error(*run_advise(capsys, log, "--calibration", log)[::2], "not a directory")


# ---------------------------------------------------------------- bad input

def test_no_decode_cycles(tmp_path, capsys):
    from sglang_patches.vocab.schema import make_record

    recs = [make_record(cycle=i, t=1.0 + i, rank=0, kind="prefill", bs=1, steps=3, topk=1, draft_tokens=4,
                        accepted=[], draft_ms=None, verify_ms=None, extend_ms=0.3, cycle_ms=2.0, host_gap_ms=None)
            for i in range(3)]
    log = al.write_records(tmp_path / "p.jsonl", recs)
    assert_one_line_error(*run_advise(capsys, log)[::2], "no decode cycles", "nothing can be predicted")


def test_mixed_configurations(tmp_path, capsys):
    recs = (al.records_from_accepted([1, 2] * 20, bs=2, steps=3)
            + al.records_from_accepted([4, 0] * 20, bs=2, steps=5, start_cycle=20))
    log = al.write_records(tmp_path / "m.jsonl", recs)
    assert_one_line_error(*run_advise(capsys, log)[::2], "mixes configurations", "s3_k1_n4", "s5_k1_n6", "--config")
    code, out, err = run_advise(capsys, log, "--config", "s5_k1_n6")
    assert code == 0 and "s5_k1_n6" in out, err
    assert_one_line_error(*run_advise(capsys, log, "--config", "s9_k1_n10")[::2], "not in")


def test_topk_above_one(tmp_path, capsys):
    log = al.write_records(tmp_path / "t.jsonl",
                           al.records_from_accepted([1, 2, 0] * 20, bs=3, steps=3, topk=4, draft_tokens=8))
    assert_one_line_error(*run_advise(capsys, log)[::2], "topk 4", "cannot be derived", "accept length 2.00")


def test_accepted_beyond_steps_and_bad_flags(tmp_path, capsys):
    recs = al.records_from_accepted([1, 2] * 10, bs=2, steps=3)
    recs[3]["accepted"] = [4, 0]  # passes the reader (<= draft tokens 4), beyond the 3 steps
    log = al.write_records(tmp_path / "c.jsonl", recs)
    assert_one_line_error(*run_advise(capsys, log)[::2], "more drafts than the 3 steps")
    good = al.write_records(tmp_path / "g.jsonl", al.records_from_accepted([1, 2] * 10, bs=2, steps=3))
    assert_one_line_error(*run_advise(capsys, good, "--baseline-step-ms", "0")[::2], "--baseline-step-ms")
    assert_one_line_error(*run_advise(capsys, good, "--max-steps", "0")[::2], "--max-steps")
    assert_one_line_error(*run_advise(capsys, tmp_path / "missing.jsonl")[::2], "no such file")


def test_cli_subprocess_one_line_error(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "sglang_patches", "advise", str(tmp_path / "empty.jsonl")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("sglang-patches: error:") == 1 and "empty" in proc.stderr


def test_report_ends_with_the_advice(tmp_path, capsys):
    from sglang_patches.offline import report

    log = al.log_from_sweep_row(al.sweep_row(al.SWEEP_8B, "s5_k1_n6", 1), tmp_path / "s5.jsonl")
    assert report.main([str(log)]) == 0
    tail = capsys.readouterr().out.strip().splitlines()[-5:]
    assert tail[0].startswith("advice: plain decode baselines, truest first: --baseline-log SERVER.log")
    assert tail[2] == "without one the chain below is only the best of the chains"
    assert tail[3].startswith("best chain: s3_k1_n4") and tail[4].startswith("basis: ")
    topk = al.write_records(tmp_path / "t.jsonl", al.records_from_accepted([1, 2] * 20, bs=2, steps=3, topk=2,
                                                                            draft_tokens=6))
    assert report.main([str(topk)]) == 0   # the report still works; the advice says why there is none
    tail = capsys.readouterr().out.strip().splitlines()[-2:]
    assert tail[0].startswith("advice: none:") and "topk 2" in tail[0] and "--help" in tail[1]


def test_steps_list_limits_rows_and_recommendation(tmp_path, capsys):
    log = al.log_from_sweep_row(al.sweep_row(al.SWEEP_8B, "s5_k1_n6", 1), tmp_path / "s5.jsonl")
    code, out, err = run_advise(capsys, log, "--steps", "5,1,2", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert [r["steps"] for r in d["advice"]["rows"]] == [1, 2, 5]
    tok = {r["config"]: r["tok_s"] for r in d["advice"]["rows"]}
    assert max(tok, key=tok.get) == "s2_k1_n3"               # s3 (the overall best) is not offered
    # s2 beats the logged s5 by less than the margin the model can tell apart: s5 is kept
    assert tok["s2_k1_n3"] < tok["s5_k1_n6"] * (1 + adv.CHANGE_MARGIN)
    assert d["advice"]["recommended"] == "s5_k1_n6"
    assert_one_line_error(*run_advise(capsys, log, "--steps", "0,2")[::2], "--steps")
    assert_one_line_error(*run_advise(capsys, log, "--steps", "a")[::2], "--steps")


def test_span_replay_sees_what_truncation_cannot(tmp_path):
    """Text with long easy spans (a Markov chain of draftable / hard tokens): truncating the steps-5
    log's cycles underestimates shorter chains, which start more cycles inside easy spans; the
    span replay of the batch-1 sequences follows the chains that were actually run."""
    truth = al.token_model_log(tmp_path / "t.jsonl", 5)
    obs = observe(tmp_path / "t.jsonl")
    assert obs.accept_length_replay(5) == pytest.approx(obs.accept_length(5), rel=1e-12)  # logged: both exact
    for s in (1, 2, 3):
        trunc, replay = obs.accept_length(s) / truth[s] - 1, obs.accept_length_replay(s) / truth[s] - 1
        assert trunc < -0.03            # the bias the GPU sweep showed on the trained fixture
        assert abs(replay) < 0.01
    iid = al.token_model_log(tmp_path / "iid.jsonl", 5, p_stay_easy=0.7, p_leave_hard=0.7)
    obs = observe(tmp_path / "iid.jsonl")   # no autocorrelation: both agree with the truth
    for s in (1, 2, 3):
        assert obs.accept_length(s) == pytest.approx(iid[s], rel=0.015)
        assert obs.accept_length_replay(s) == pytest.approx(iid[s], rel=0.015)


def test_span_replay_needs_batch_one_sequences(tmp_path):
    recs = al.records_from_accepted([1, 2, 0, 3] * 30, bs=4, steps=3)
    assert observation_from_records(recs).accept_length_replay(2) is None


def test_simulated_records_get_no_replay_and_a_note(tmp_path, capsys):
    recs = [dict(r, simulated=True) for r in al.records_from_accepted([1, 3, 0, 2] * 40, bs=1, steps=3)]
    log = al.write_records(tmp_path / "sim.jsonl", recs)
    code, out, err = run_advise(capsys, log, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["observation"]["simulated"] and not d["observation"]["replay"]
    assert all(r["accept_length_replay"] is None for r in d["advice"]["rows"])
    assert any("simulated" in n and "shorter chains are truncated, never replayed from the requests' spans" in n
               for n in d["notes"])


def test_batch_one_logs_predict_with_the_replay_and_show_the_truncation(tmp_path, capsys):
    """On a batch-1 log of real acceptance the rows for fewer steps are the span replay (closer to
    the measured runs on the H200), with the truncation beside it; above the logged steps the
    extrapolation stays; a log at batch > 1 keeps the truncation."""
    truth = al.token_model_log(tmp_path / "t.jsonl", 5)
    code, out, err = run_advise(capsys, tmp_path / "t.jsonl", "--json")
    assert code == 0, err
    rows = {r["steps"]: r for r in json.loads(out)["advice"]["rows"]}
    for s in (1, 2, 3, 4):
        r = rows[s]
        assert r["accept_basis"] == "replayed" and r["accept_length"] == r["accept_length_replay"]
        assert abs(r["accept_length"] / truth[s] - 1) < abs(r["accept_length_truncated"] / truth[s] - 1)
    assert rows[5]["accept_basis"] == "logged" and rows[6]["accept_basis"] == "extrapolated"
    assert rows[6]["accept_length"] == rows[6]["accept_length_truncated"]
    code, out, err = run_advise(capsys, tmp_path / "t.jsonl")
    header = next(line for line in out.splitlines() if line.strip().startswith("config"))
    assert "trunc acc" in header and "replayed" in out and "span replay of the logged requests" in out
    recs = al.records_from_accepted([1, 5, 0, 3, 5, 5, 2] * 40, bs=4, steps=5)
    code, out, err = run_advise(capsys, al.write_records(tmp_path / "b4.jsonl", recs), "--json")
    rows = json.loads(out)["advice"]["rows"]
    assert all(r["accept_basis"] in ("truncated", "logged", "extrapolated") for r in rows)
    assert all(r["accept_length"] == r["accept_length_truncated"] for r in rows)


def test_an_extrapolated_row_is_named_never_recommended():
    """Beyond the logged steps the accept length is the last rate repeating, a guess (on the H200 steps
    7 priced +5.2 % from a steps-5 log ran 14 % slower): however large its predicted gain, the
    recommendation is the best logged-or-shorter chain, and the line names the extrapolated one with
    the run that would price it."""
    def best_for(rate, verify_ms):
        rng = random.Random(0)
        acc = []
        for _ in range(400):
            a = 0
            while a < 3 and rng.random() < rate:
                a += 1
            acc.append(a)
        obs = observation_from_records(al.records_from_accepted(acc, bs=4, steps=3, draft_ms=0.2,
                                                                verify_ms=verify_ms, extend_ms=0.1))
        a = adv.advise(obs, [1, 2, 3, 4, 5])
        raw = max(a.rows, key=lambda r: r.tok_s)
        return a, raw
    for rate in (0.5, 0.95):  # a small predicted gain, and long chains that keep paying
        a, raw = best_for(rate, 6.0)
        assert raw.extrapolated and a.passed_over is raw  # the case it tests: the fastest row is a guess
        assert not a.best.extrapolated and a.best.tok_s == max(r.tok_s for r in a.rows if not r.extrapolated)
        line = next(ln for ln in a.lines(a.logged.label) if ln.startswith("best chain"))
        assert f"{raw.label}, extrapolated beyond the logged steps, is predicted" in line
        asked = f"log a run at steps {raw.steps} to price it" in line
        assert asked == (raw.tok_s >= a.best.tok_s * (1 + adv.CHANGE_MARGIN))  # else: within the model's error
    assert raw.tok_s > a.best.tok_s * 1.1  # at 0.95 the guess is far ahead, and still not recommended

def test_prefill_share_of_the_log_is_noted(tmp_path, capsys):
    """The rows are steady decode; when prefill takes a real share of the logged GPU time (short
    requests, a high request rate), advise says the end-to-end gains will be smaller."""
    from sglang_patches.vocab.schema import make_record

    def prefill(ms):
        return make_record(cycle=0, t=1.7e9, rank=0, kind="prefill", bs=1, steps=3, topk=1, draft_tokens=4,
                           accepted=[], draft_ms=None, verify_ms=None, extend_ms=0.3, cycle_ms=ms, host_gap_ms=None)

    decode = al.records_from_accepted([2, 1, 3, 0] * 10, bs=1, steps=3, cycle_ms=6.0, gap_ms=0.0)  # 240 ms
    for ms, noted in ((60.0, True), (6.0, False)):   # 20 % and 2.4 % of the GPU time
        log = al.write_records(tmp_path / f"p{ms:g}.jsonl", [prefill(ms)] + decode)
        code, out, err = run_advise(capsys, log, "--json")
        assert code == 0, err
        d = json.loads(out)
        assert d["observation"]["prefill_gpu_share"] == pytest.approx(ms / (ms + 240.0))
        assert any(n.startswith(f"prefill took {100 * ms / (ms + 240.0):.0f} %") for n in d["notes"]) is noted


def test_a_gain_inside_the_models_error_keeps_the_logged_chain(tmp_path, capsys):
    log = al.log_from_sweep_row(al.sweep_row(al.SWEEP_8B, "s5_k1_n6", 1), tmp_path / "s5.jsonl")
    _, out, _ = run_advise(capsys, log, "--steps", "5,1,2", "--baseline-step-ms", "20")
    first = next(ln for ln in out.splitlines() if ln.startswith("recommended:"))
    assert first.startswith("recommended: s5_k1_n6 (--speculative-num-steps 5 --speculative-eagle-topk 1 "
                            "--speculative-num-draft-tokens 6)")
    assert "the logged chain (s2_k1_n3 is predicted" in first and "less than the 3 % the model can tell apart" in first
    # a margin the model can tell apart moves the recommendation: without s5 offered at all, s2 wins
    _, out, _ = run_advise(capsys, log, "--steps", "1,2", "--baseline-step-ms", "20")
    first = next(ln for ln in out.splitlines() if ln.startswith("recommended:"))
    assert first.startswith("recommended: s2_k1_n3") and "keep the logged chain" not in first


def test_one_baseline_step_for_several_batch_sizes_is_said(tmp_path, capsys):
    recs = al.records_from_accepted([2] * 100, bs=1, steps=3) + al.records_from_accepted(
        [1] * 400, bs=8, steps=3, start_cycle=100)
    log = al.write_records(tmp_path / "two.jsonl", recs)
    _, out, _ = run_advise(capsys, log, "--baseline-step-ms", "5")
    assert "note: --baseline-step-ms 5 is the plain decode step at every logged batch size (1, 8)" in out
    one = al.write_records(tmp_path / "one.jsonl", al.records_from_accepted([2] * 100, bs=1, steps=3))
    _, out, _ = run_advise(capsys, one, "--baseline-step-ms", "5")
    assert "at every logged batch size" not in out
