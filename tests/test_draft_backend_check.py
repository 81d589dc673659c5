"""The verdict of benchmarks/draft_backend_check.py (triton vs stock, and stock vs stock as the noise
floor) on hand-made per-backend results; the servers themselves need the GPU."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import draft_backend_check as check  # noqa: E402


def _bs(accept, draft, hashes):
    return {"accept_length_sglang": accept, "draft_ms_p50": draft, "extend_ms_p50": 0.5, "text_hashes": hashes}


def test_verdict_compares_triton_and_a_second_stock_run():
    res = {"sglang": {"bs1": _bs(2.5, 0.50, list("abcd")), "bs8": _bs(2.57, 0.53, list("abcd"))},
           "triton": {"bs1": _bs(2.5, 0.49, list("abcd")), "bs8": _bs(2.504, 0.545, list("abxy")),
                      "backend_on_line": "triton draft backend on", "fallback_or_error": []},
           "sglang_2": {"bs1": _bs(2.5, 0.50, list("abcd")), "bs8": _bs(2.52, 0.53, list("abcz"))}}
    v = check.verdicts(res, ["bs1", "bs8"])
    assert v["triton_active"] is True
    assert v["bs1"]["accept_rel"] == 0 and v["bs1"]["accept_ok"] and v["bs1"]["identical_outputs"] == 1.0
    assert v["bs1"]["draft_ms_p50_ratio"] == pytest.approx(0.98)
    assert v["bs8"]["accept_rel"] == pytest.approx(2.504 / 2.57 - 1) and not v["bs8"]["accept_ok"]
    assert v["bs8"]["identical_outputs"] == 0.5
    assert v["bs8"]["stock_accept_rel"] == pytest.approx(2.52 / 2.57 - 1)
    assert v["bs8"]["stock_identical_outputs"] == 0.75


def test_verdict_without_repeat_or_with_fallback():
    res = {"sglang": {"bs1": _bs(2.0, 0.5, ["a"])},
           "triton": {"bs1": _bs(2.1, 0.5, None), "backend_on_line": "triton draft backend on",
                      "fallback_or_error": ["draft-backend triton: falling back"]}}
    v = check.verdicts(res, ["bs1", "bs8"])
    assert v["triton_active"] is False                      # a fallback is not the triton path
    assert "bs8" not in v and not v["bs1"]["accept_ok"]     # +5 % > 2 %
    assert v["bs1"]["identical_outputs"] is None and "stock_accept_rel" not in v["bs1"]
