"""The adaptive benchmark's summary never compares cells of two `trained-8b` builds (a rebuild on a
fresh machine is another drafter): the ratio is left out and named, the goals stay unclaimed, and
ours meets the best fixed row of its own build."""
from __future__ import annotations

from test_adaptive_bench import full_cells, summarize


def test_no_ratio_across_trained_8b_builds():
    cells = full_cells({("ours", "ood", 1): 2.0})
    cells["ours_ood_bs1"]["fixture_build"] = "b2"  # measured on a rebuilt pair, the rest unrecorded
    s = summarize(cells)
    assert s["ours_vs_default_ood_bs1"] is None and s["ours_vs_plain_ood_bs1"] is None
    assert s["ours_vs_default_in_bs1"] == round(321 / 315, 4)  # one build (unrecorded) on both sides
    assert s["ratios_left_out_across_builds"][0] == "ours_ood_bs1 (b2) vs default_ood_bs1 (None)"
    assert s["goals"]["ours_ge_1.05x_default_ood_bs1"] is None  # not measured, never claimed
    assert s["ours_vs_best_fixed_ood_bs1"] is None and "not recorded" in s["fixture_builds"]
    cells["s2_ood_bs1"]["fixture_build"] = "b2"  # the grid's top (s3) is another build: ours meets s2
    assert summarize(cells)["ours_vs_best_fixed_ood_bs1"] == round(642 / 300, 4)
