"""benchmarks/harness/pairing.py: the A/B order, paired ratios and their bootstrap interval, on numbers whose
answers are known by hand."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from harness.pairing import alternating, bootstrap_ci, median_ratio, paired  # noqa: E402


def test_the_order_alternates_each_repeat():
    assert list(alternating(3, "a", "b")) == [(0, "a"), (0, "b"), (1, "b"), (1, "a"), (2, "a"), (2, "b")]
    assert list(alternating(0, "a", "b")) == []


def test_paired_ratios_their_median_and_interval():
    on, off = [99.0, 101.0, 98.0, 100.0, 97.0], [100.0, 100.0, 100.0, 100.0, 100.0]
    p = paired(on, off)
    assert p["paired_ratios"] == pytest.approx([0.99, 1.01, 0.98, 1.0, 0.97])
    assert p["paired_ratio_median"] == pytest.approx(0.99)
    lo, hi = p["paired_ratio_ci95"]
    assert 0.97 <= lo <= 0.99 <= hi <= 1.01  # the interval holds the median, inside the ratios' range


def test_identical_runs_give_a_point_interval_and_noisy_ones_a_wide_one():
    assert bootstrap_ci(lambda xs: sorted(xs)[len(xs) // 2], [2.0] * 7) == (2.0, 2.0)
    lo, hi = bootstrap_ci(median_ratio, [90.0, 110.0, 95.0, 105.0, 100.0], [100.0] * 5)
    assert lo < 1.0 < hi and hi - lo > 0.05


def test_unpaired_runs_are_refused():
    with pytest.raises(ValueError, match="as many A as B values"):
        paired([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="at least one"):
        paired([], [])


def test_the_overhead_run_pairs_on_and_off_in_alternating_order(monkeypatch):
    """timing_overhead.overhead() through the pairing: the run order and each repeat's ON/OFF ratio (the servers
    stand in for real ones, which CI cannot start: only their URLs are read)."""
    import timing_overhead as to

    calls = []
    tok_s = {"on": iter([99.0, 98.0, 101.0]), "off": iter([100.0, 100.0, 100.0])}

    def fake_run_batch(url, prompts, bs, max_new_tokens, num_requests=None):
        calls.append((url, num_requests))
        side = "on" if url == "on" else "off"
        rate = 100.0 if num_requests is None else next(tok_s[side])  # a warm-up run has no num_requests
        return {"tok_s": rate, "wall_s": 0.5, "accept_length": 3.0}

    monkeypatch.setattr(to, "run_batch", fake_run_batch)
    on, off = type("S", (), {"url": "on"})(), type("S", (), {"url": "off"})()
    rows = to.overhead(on, off, [2], repeats=3, max_new_tokens=16, requests_per_run=2)
    assert [u for u, n in calls if n is not None] == ["on", "off", "off", "on", "on", "off"]
    assert rows[2]["paired_ratios"] == pytest.approx([0.99, 0.98, 1.01])
    assert rows[2]["paired_ratio_median"] == pytest.approx(0.99) and rows[2]["requests_per_repeat"] == 4
