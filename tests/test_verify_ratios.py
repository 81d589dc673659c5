"""`advise --verify-cost`: verify priced by a measured verify / plain step ratio over draft tokens
(sglang_patches/whatif/verify_ratios.py), read from benchmarks/verify_cost.py's recorded summary.json
(benchmarks/results/2026-12-01-moe/verify-cost-t48, an H200 run) and from written ones; the advisor's
rows against hand-computed prices; bad input in one line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor_logs as al
from test_advisor import run_advise as _run  # the in-process CLI run advise's tests use
from sglang_patches.errors import UserError
from sglang_patches.whatif import advisor as adv
from sglang_patches.whatif.advisor_records import observation_from_records
from sglang_patches.whatif.verify_ratios import VerifyRatios, load_verify_ratios

REPO = Path(__file__).resolve().parents[1]
RECORDED = REPO / "benchmarks" / "results" / "2026-12-01-moe" / "verify-cost-t48" / "summary.json"


def _summary(path: Path, tables: dict, routing: str | None = "uniform") -> Path:
    path.write_text(json.dumps({"verify_over_step_by_fixture": tables, "routing": routing}))
    return path


def test_the_recorded_run_loads_per_fixture_and_interpolates():
    with pytest.raises(UserError, match="several measured fixtures .*llama3-8b, qwen3-moe-shape.*:FIXTURE"):
        load_verify_ratios(str(RECORDED))
    moe = load_verify_ratios(f"{RECORDED}:qwen3-moe-shape")
    recorded = json.loads(RECORDED.read_text())["verify_over_step_by_fixture"]["qwen3-moe-shape"]
    assert moe.ratio(1, 4) == recorded["1"]["4"] and moe.ratio(16, 8) == recorded["16"]["8"]
    assert moe.ratio(1, 6) == pytest.approx((recorded["1"]["4"] + recorded["1"]["8"]) / 2)
    assert moe.ratio(1, 2) == recorded["1"]["4"]   # held below the smallest measured count (verify's fixed part)
    slope = (recorded["1"]["8"] - recorded["1"]["4"]) / 4
    assert moe.ratio(1, 10) == pytest.approx(recorded["1"]["8"] + 2 * slope)        # the last slope goes on
    assert moe.batch_for(2) == 1 and moe.batch_for(3) == 4 and moe.batch_for(64) == 16 and moe.batch_for(6) == 4
    with pytest.raises(UserError, match="no fixture 'nope' in .*summary.json; it has llama3-8b, qwen3-moe-shape"):
        load_verify_ratios(f"{RECORDED}:nope")


@pytest.mark.parametrize("content,needle", [("{", "not JSON"), ('{"rows": []}', "no verify_over_step_by_fixture"),
                                            ('{"verify_over_step_by_fixture": {"f": {"1": {"4": null}}}}',
                                             "no measured fixtures"),
                                            ('{"verify_over_step_by_fixture": {"f": {"bs1": {"4": 2.0}}}}',
                                             "not a positive ratio at positive integer keys"),
                                            ('{"verify_over_step_by_fixture": {"f": {"0": {"4": 2.0}}}}',
                                             "not a positive ratio"),
                                            ('{"verify_over_step_by_fixture": {"f": {"1": {"4": "2.0"}}}}',
                                             "not a positive ratio"),
                                            ('{"verify_over_step_by_fixture": {"f": {"1": {"4": true}}}}',
                                             "not a positive ratio"),
                                            ('{"verify_over_step_by_fixture": {"f": [1, 2]}}', "no measured")])
def test_files_that_are_not_a_measurement_are_refused(tmp_path, content, needle):
    """Refused in one line (UserError), never a traceback."""
    p = tmp_path / "s.json"
    p.write_text(content)
    with pytest.raises(UserError, match=needle):
        load_verify_ratios(str(p))
    with pytest.raises(UserError, match="no such file"):
        load_verify_ratios(str(tmp_path / "missing.json"))


def test_advisor_prices_verify_by_the_ratio_and_keeps_its_draft_scaling():
    """A steps-3 log (T = 4) at verify 6 ms; measured r(2) = 1.5, r(4) = 2.0, r(8) = 4.0 at batch 1: steps 1
    (T 2) gets 6 x 1.5 / 2, steps 5 (T 6) 6 x 3 / 2; the draft keeps (s - 1) / (S - 1), the extend stays."""
    recs = al.records_from_accepted([2, 0, 3, 1] * 50, bs=1, steps=3, draft_ms=2.0, verify_ms=6.0, extend_ms=0.5,
                                    cycle_ms=8.5, gap_ms=0.2)
    obs = observation_from_records(recs)
    vr = VerifyRatios({1: {2: 1.5, 4: 2.0, 8: 4.0}}, "test")
    flat = {r.steps: r for r in adv.predict(obs, [1, 3, 5])}
    rows = {r.steps: r for r in adv.predict(obs, [1, 3, 5], calibration=vr)}
    for s, want in ((1, 6.0 * 1.5 / 2.0), (3, 6.0), (5, 6.0 * 3.0 / 2.0)):
        (b,) = rows[s].by_bs
        assert b["verify_ms"] == pytest.approx(want)
        assert b["draft_ms"] == pytest.approx(flat[s].by_bs[0]["draft_ms"]) and b["extend_ms"] == 0.5
        assert rows[s].period_ms == pytest.approx(flat[s].period_ms + want - 6.0)
    advice = adv.advise(obs, [1, 2, 3], calibration=vr)
    assert advice.verify_model == "verify ratios"
    assert "verify by the measured verify / plain step ratio over draft tokens" in " ".join(advice.lines("s3_k1_n4"))


def test_an_moe_verify_changes_the_recommendation(tmp_path, capsys):
    """A steps-3 log where verify holds constant favours the logged chain; with verify growing as an MoE's
    does (1.0 at one token, 2.2 at four) a shorter chain wins. The CLI says which cost it used."""
    log = al.write_records(tmp_path / "t.jsonl", al.records_from_accepted(
        [3, 1, 2, 3, 0, 1, 3, 2] * 40, bs=1, steps=3, draft_ms=1.0, verify_ms=5.0, extend_ms=0.6, cycle_ms=6.6,
        gap_ms=0.1))
    summary = _summary(tmp_path / "vc.json", {"kimi-k2-mla": {"1": {"2": 1.5, "4": 2.2, "8": 3.6}}})
    code, flat, _ = _run(capsys, log, "--baseline-step-ms", "2.4", "--json")
    code2, moe, _ = _run(capsys, log, "--baseline-step-ms", "2.4", "--json", "--verify-cost", summary)
    assert code == code2 == 0
    flat, moe = json.loads(flat), json.loads(moe)
    assert flat["advice"]["recommended"] == "s3_k1_n4" and flat["advice"]["verify_cost"] == "constant"
    assert flat["advice"]["extrapolated_passed_over"]  # held constant, a longer chain looks faster still
    assert moe["advice"]["recommended"] == "s2_k1_n3" and moe["advice"]["verify_cost"] == "verify ratios"
    assert not moe["advice"]["extrapolated_passed_over"]
    assert moe["calibration"]["kind"] == "verify ratios" and moe["calibration"]["batch_sizes"] == [1]
    assert any("verify / plain step measured in" in n and "kimi-k2-mla, uniform routing" in n for n in moe["notes"])


def test_the_adaptive_config_prices_verify_as_advise_does(tmp_path, capsys):
    """--adaptive-config with --verify-cost: the bucket's chains priced by the same ratios as advise's table, so
    both name the same chain (s2 here, where held-constant verify names s3)."""
    log = al.write_records(tmp_path / "t.jsonl", al.records_from_accepted(
        [3, 1, 2, 3, 0, 1, 3, 2] * 40, bs=1, steps=3, draft_ms=1.0, verify_ms=5.0, extend_ms=0.6, cycle_ms=6.6,
        gap_ms=0.1))
    summary = _summary(tmp_path / "vc.json", {"kimi-k2-mla": {"1": {"2": 1.5, "4": 2.2, "8": 3.6}}})
    tables = {}
    for name, extra in (("flat", []), ("moe", ["--verify-cost", str(summary)])):
        code, out, err = _run(capsys, log, "--baseline-step-ms", "2.4", "--json", *extra)
        assert code == 0, err
        advise_rows = {r["steps"]: r["tok_s"] for r in json.loads(out)["advice"]["rows"]}
        code, out, err = _run(capsys, log, "--baseline-step-ms", "2.4", "--json", *extra,
                              "--adaptive-config", tmp_path / f"{name}.json")
        assert code == 0, err
        bucket = json.loads(out)["config"]["sglang_patches"]["buckets"][0]
        tables[name] = {int(k): v for k, v in bucket["predicted_tok_s"].items()}
        assert tables[name] == {k: pytest.approx(advise_rows[k], abs=0.06) for k in tables[name]}
    assert tables["moe"][2] > tables["moe"][3] and tables["flat"][3] > tables["flat"][2]  # the order turns
    notes = json.loads(out)["notes"]
    assert any("kimi-k2-mla, uniform routing" in n for n in notes)
    # a bucket priced from ratios measured at other draft tokens says so, as advise's notes do
    outside = _summary(tmp_path / "vc6.json", {"kimi-k2-mla": {"1": {"6": 2.5, "8": 3.6}}})
    code, out, err = _run(capsys, log, "--baseline-step-ms", "2.4", "--json", "--verify-cost", outside,
                          "--adaptive-config", tmp_path / "outside.json")
    assert code == 0, err
    why = json.loads(out)["config"]["sglang_patches"]["buckets"][0]["why"]
    assert "verify priced: batch 1: the logged 4 draft tokens lie outside the measured 6-8" in why


def test_bad_combinations_are_one_line(tmp_path, capsys):
    log = al.write_records(tmp_path / "t.jsonl", al.records_from_accepted([1, 2] * 40, bs=1, steps=3))
    summary = _summary(tmp_path / "vc.json", {"f": {"1": {"4": 2.0}}})
    for extra in ([], ["--adaptive-config", tmp_path / "a.json"]):  # the same refusal with the config file
        code, _, err = _run(capsys, log, "--verify-cost", summary, "--calibration", tmp_path, *extra)
        assert code == 2 and "Traceback" not in err and "give one" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "a.json").exists()
    for extra in ([], ["--adaptive-config", tmp_path / "a.json"]):  # a missing summary: one line with the file too
        code, _, err = _run(capsys, log, "--verify-cost", tmp_path / "none.json", *extra)
        assert code == 2 and "no such file" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "a.json").exists()


def test_a_path_with_a_colon_and_a_fixture_after_the_last_one(tmp_path):
    d = tmp_path / "run:2"
    d.mkdir()
    summary = _summary(d / "s.json", {"a": {"1": {"4": 2.0}}, "b": {"1": {"4": 3.0}}})
    assert load_verify_ratios(f"{summary}:b").ratio(1, 4) == 3.0
    one = _summary(d / "one.json", {"a": {"1": {"4": 2.0}}})
    vr = load_verify_ratios(str(one))   # the whole path is the file: no fixture split off
    assert vr.ratio(1, 4) == 2.0 and vr.ratio(1, 8) == 2.0 and vr.ratio(1, 2) == 2.0  # one count: held both ways


def test_a_measurement_far_from_the_logs_own_verify_is_named_and_its_experts_said(tmp_path, capsys):
    """The log's verify / plain step at its draft tokens against the measured ratio: within 1.25x no word;
    beyond, one note naming both (the measurement is likely another model or routing), a warning beyond 1.5x
    (tests/test_verify_cost_mismatch.py). The measured
    fixture's expert count is said beside the ratios (fewer experts: less growth than the served model's)."""
    log = al.write_records(tmp_path / "t.jsonl", al.records_from_accepted(
        [3, 1, 2, 3, 0, 1, 3, 2] * 40, bs=1, steps=3, draft_ms=1.0, verify_ms=5.0, extend_ms=0.6, cycle_ms=6.6,
        gap_ms=0.1))
    summary = tmp_path / "vc.json"
    summary.write_text(json.dumps({"verify_over_step_by_fixture": {"kimi-k2-mla": {"1": {"2": 1.5, "4": 2.2, "8": 3.6}}},
                                   "routing": "uniform", "moe": {"kimi-k2-mla": {"experts": 16, "top_k": 8}}}))
    near = json.loads(_run(capsys, log, "--baseline-step-ms", "2.4", "--json", "--verify-cost", summary)[1])["notes"]
    far = json.loads(_run(capsys, log, "--baseline-step-ms", "4.9", "--json", "--verify-cost", summary)[1])["notes"]
    assert not any(n.startswith("--verify-cost: the log's verify") for n in near)  # 5.0 / 2.4 = 2.08 vs 2.2
    said = [n for n in far if n.startswith("warning: batch 1: the log's verify")]  # over 1.5x off: a warning
    assert said == ["warning: batch 1: the log's verify is 1.02x the plain step given, --verify-cost's 2.20x: "
                    "one is not this server's"]
    assert any("16 experts top 8: a model with more grows more with draft tokens" in n for n in near)


KIMI = REPO / "benchmarks" / "results" / "2026-12-06-kimi-family" / "llama_head"


def test_runs_of_one_fixture_join_with_commas(tmp_path):
    """The 384-expert INT4 measurement ran as two calls (T 4, then T 8 and 2): joined, every cell of both,
    the second run's over the first run's plain step (its own was within 1 %): verify ms / one baseline."""
    t4, t82 = KIMI / "verify_cost_384_t4.json", KIMI / "verify_cost_384_t8_t2.json"
    vr = load_verify_ratios(f"{t4},{t82}")
    ms = {(r["bs"], r["draft_tokens"]): r["verify_ms"]
          for f in (t4, t82) for r in json.loads(f.read_text())["rows"] if r.get("verify_ms")}
    step = {r["bs"]: r["step_ms"] for r in json.loads(t4.read_text())["rows"] if r.get("step_ms")}
    assert step == {1: pytest.approx(2.73385), 16: pytest.approx(8.1744)}  # the first file's plain steps
    assert vr.table == {bs: {t: pytest.approx(ms[bs, t] / step[bs], abs=1e-4) for t in (2, 4, 8)} for bs in (1, 16)}
    assert vr.table[16][2] == pytest.approx(17.7318 / 8.1744, abs=1e-4) != 2.1527  # not the second run's own 2.15
    assert vr.plain_steps == load_verify_ratios(str(t4)).plain_steps and str(t82) in vr.source
    assert load_verify_ratios(f"{t82},{t4}:kimi-k25-384-int4").plain_steps[1] == pytest.approx(2.72965)
    with pytest.raises(UserError, match="measured kimi-k2-mla .*; join runs of one fixture"):  # 16 experts
        load_verify_ratios(f"{t4},{KIMI / 'verify_cost.json'}")
    other = json.loads(t82.read_text())
    for r in other["rows"]:
        r["step_ms"] = r["step_ms"] * 1.3 if r.get("step_ms") else r.get("step_ms")
    far = tmp_path / "far.json"
    far.write_text(json.dumps(other))
    with pytest.raises(UserError, match="plain step at batch 1 3.55 ms in .*far.json, 2.73 in .*t4.json: another"):
        load_verify_ratios(f"{t4},{far}")
    only16 = json.loads(t4.read_text())
    only16["rows"] = [r for r in only16["rows"] if r["bs"] == 16]
    only16["verify_over_step_by_fixture"]["kimi-k25-384-int4"].pop("1")
    (tmp_path / "b16.json").write_text(json.dumps(only16))  # batch 1's step comes from the file that measured it
    with pytest.raises(UserError, match="plain step at batch 1 3.55 ms in .*far.json, 2.73 in .*t8_t2.json: another"):
        load_verify_ratios(f"{tmp_path / 'b16.json'},{t82},{far}")
    with pytest.raises(UserError, match="the fixture goes after the last file: A.json,B.json:FIXTURE"):
        load_verify_ratios(f"{t4}:kimi-k25-384-int4,{t82}")
    with pytest.raises(UserError, match="an empty file name in the list"):
        load_verify_ratios(f"{t4},")


def test_one_measured_count_says_it_prices_nothing_and_a_join_says_its_baseline(tmp_path):
    """A summary with one draft-token count gives no growth over draft tokens: the note says every chain keeps the
    logged verify (as without --verify-cost) and how to measure the slope; a joined one says its ratios share the
    first file's plain step."""
    t4, t82 = KIMI / "verify_cost_384_t4.json", KIMI / "verify_cost_384_t8_t2.json"
    one = load_verify_ratios(str(t4))
    assert one.table == {1: {4: 1.7458}, 16: {4: 2.7555}}
    assert one.verify_delta_ms(16, 14.0, 3, 7) == 0.0 and one.verify_delta_ms(1, 5.0, 3, 1) == 0.0
    assert "one draft-token count per batch size, so every chain keeps the logged verify" in one.describe()
    assert "--draft-tokens 2,4,8" in one.describe() and "joined" not in one.describe()
    both = load_verify_ratios(f"{t4},{t82}")
    assert "joined: each verify over the first file's plain step" in both.describe()
    assert "one draft-token count" not in both.describe()
    with pytest.raises(UserError, match=r"--verify-cost .*t4.json,.*t8_t2.json:wrongfix: no fixture 'wrongfix' in .*t4.json"):
        load_verify_ratios(f"{t4},{t82}:wrongfix")
