"""The comparison arithmetic of benchmarks/trained_8b_check.py (the servers need a GPU; these
functions take what SGLang's /generate returned, written out by hand here)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import trained_8b_check as chk  # noqa: E402


def tf(top1, token_lp):
    return {"top1": top1, "top1_lp": [None] * len(top1), "token_lp": token_lp}


def test_teacher_forced_agreement_counts_positions_and_skips_the_first():
    a = [tf([None, 5, 7, 9], [None, -0.1, -0.5, -1.0]), tf([None, 1], [None, -2.0])]
    b = [tf([None, 5, 8, 9], [None, -0.2, -0.5, -1.4]), tf([None, 1], [None, -2.0])]
    r = chk.tf_compare(a, b)
    assert r["positions"] == 4 and r["top1_agreement"] == pytest.approx(3 / 4)
    assert r["token_logprob_abs_diff_max"] == pytest.approx(0.4)
    assert r["token_logprob_abs_diff_mean"] == pytest.approx((0.1 + 0.0 + 0.4 + 0.0) / 4)


def test_teacher_forced_refuses_misaligned_results():
    with pytest.raises(ValueError, match="same input_ids"):
        chk.tf_compare([tf([None, 1, 2], [None, 0, 0])], [tf([None, 1], [None, 0])])


def test_identical_fraction_counts_the_longer_output_and_first_divergence():
    a = [{"ids": [1, 2, 3, 4]}, {"ids": [1, 2]}]
    b = [{"ids": [1, 2, 9, 4]}, {"ids": [1, 2, 3]}]
    r = chk.identical_fraction(a, b)
    assert r["token_identical_fraction"] == pytest.approx((3 + 2) / (4 + 3))
    assert r["requests_identical"] == 0 and r["median_first_divergence"] == 2
