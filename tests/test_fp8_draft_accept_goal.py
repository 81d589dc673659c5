"""benchmarks/fp8_draft_summary.py on CPU: the accept-length goal judges every count of both steps (the
greedy load's and bench_serving's at each concurrency), each under its own key. The case records are
hand-made (their GPU runs cannot happen here)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import fp8_draft_summary as fs  # noqa: E402
from fp8_summary_cases import trained_case as _trained  # noqa: E402


def test_accept_goal_takes_bench_servings_counts_too():
    """The greedy load within 2 % at both steps, bench_serving's prompts 8 % higher at steps 5: the
    goal is not met (its counts disagree), and each count has its own key."""
    cases = {"trained-8b:s3:stock": _trained(2.5, 330.0, 1500.0), "trained-8b:s3:triton_fp8": _trained(2.49, 330.0, 1500.0),
             "trained-8b:s5:stock": _trained(2.45, 345.0, 1700.0, bench_accept=2.40),
             "trained-8b:s5:triton_fp8": _trained(2.49, 412.0, 1830.0, bench_accept=2.60)}
    s = fs.summarize([("a.json", {"cases": cases})])
    assert s["accept_ratio_trained_8b_s5"] == pytest.approx(2.49 / 2.45, abs=1e-4)
    assert s["accept_ratio_bench_serving_bs1_trained_8b_s5"] == pytest.approx(2.60 / 2.40, abs=1e-4)
    assert s["accept_ratio_bench_serving_bs8_trained_8b_s3"] == pytest.approx(2.49 / 2.5, abs=1e-4)
    g = s["goals"]["accept_within_2pct_trained_8b_s3_s5"]
    assert len(g["values"]) == 6 and g["verdict"] == "not met"
    cases["trained-8b:s5:triton_fp8"] = _trained(2.49, 412.0, 1830.0, bench_accept=2.41)
    assert fs.summarize([("a.json", {"cases": cases})])["goals"]["accept_within_2pct_trained_8b_s3_s5"]["verdict"] == "met"


def test_two_builds_of_the_pair_are_not_paired():
    """Stock measured on one build, FP8 on another (two machines, two runs): the accept and e2e ratios of
    that steps value stay null and the summary names both ids; on one build they pair."""
    a = {"fixture_builds": {"trained-8b": "aaaa"}, "cases": {"trained-8b:s3:stock": _trained(2.5, 330.0, 1500.0)}}
    b = {"fixture_builds": {"trained-8b": "bbbb"}, "cases": {"trained-8b:s3:triton_fp8": _trained(2.4, 320.0, 1400.0)}}
    s = fs.summarize([("a.json", a), ("b.json", b)])
    assert s["accept_ratio_trained_8b_s3"] is None and s["e2e_ratio_bs1_trained_8b"] is None
    assert s["unpaired_builds"] == {"s3": {"stock": "aaaa", "triton_fp8": "bbbb"}}
    assert "two builds" in fs.table(s)
    del b["fixture_builds"]  # a run that did not record its build: not paired with one that did
    assert fs.summarize([("a.json", a), ("b.json", b)])["unpaired_builds"] == {"s3": {"stock": "aaaa", "triton_fp8": None}}
    b["fixture_builds"] = {"trained-8b": "aaaa"}
    s = fs.summarize([("a.json", a), ("b.json", b)])
    assert s["accept_ratio_trained_8b_s3"] == pytest.approx(2.4 / 2.5, abs=1e-4) and s["unpaired_builds"] == {}


def test_weight_only_fp8_acceptance_is_a_named_case_with_its_own_ratios():
    """trained-8b:s5:triton_fp8_wo runs only when named (`all` and the fixture's group leave it out); its
    accept ratios to stock get their own keys, on one build only, and the goal stays triton_fp8's."""
    assert "trained-8b:s5:triton_fp8_wo" not in fs.parse_case_list("all")
    assert "trained-8b:s5:triton_fp8_wo" not in fs.parse_case_list("trained-8b")
    assert fs.parse_case_list("trained-8b:s5:stock,trained-8b:s5:triton_fp8_wo")[1] == "trained-8b:s5:triton_fp8_wo"
    with pytest.raises(ValueError, match="unknown"):
        fs.parse_case_list("trained-8b:s4:triton_fp8_wo")
    cases = {"trained-8b:s5:stock": _trained(2.40, 345.0, 1700.0, bench_accept=2.30),
             "trained-8b:s5:triton_fp8": _trained(2.30, 350.0, 1710.0, bench_accept=2.20),
             "trained-8b:s5:triton_fp8_wo": _trained(2.38, 348.0, 1705.0, bench_accept=2.29)}
    s = fs.summarize([("a.json", {"cases": cases})])
    assert s["accept_ratio_wo_trained_8b_s5"] == pytest.approx(2.38 / 2.40, abs=1e-4)
    assert s["accept_ratio_wo_bench_serving_bs1_trained_8b_s5"] == pytest.approx(2.29 / 2.30, abs=1e-4)
    assert s["accept_ratio_trained_8b_s5"] == pytest.approx(2.30 / 2.40, abs=1e-4)  # the goal's own ratio
    two = [("a.json", {"fixture_builds": {"trained-8b": "aaaa"}, "cases": {"trained-8b:s5:stock": cases["trained-8b:s5:stock"]}}),
           ("b.json", {"fixture_builds": {"trained-8b": "bbbb"},
                       "cases": {"trained-8b:s5:triton_fp8_wo": cases["trained-8b:s5:triton_fp8_wo"]}})]
    assert "accept_ratio_wo_trained_8b_s5" not in fs.summarize(two)
