"""The plain decode step at each logged batch size (whatif/baseline_price.py), the one rule behind every
baseline (advise's and report's --baseline-log / --calibration table, --adaptive-config's buckets, the log's
own steps-0 cycles): measured, interpolated between two measured sizes, refused outside them; and
nearest_batch, which still picks a calibration's cost model by batch size."""
import pytest

from sglang_patches.offline.adaptive_config import _baseline_for
from sglang_patches.whatif.advisor_observation import BsCost, Observation, nearest_batch, nearest_steps
from sglang_patches.whatif.baseline_price import ONE_FILE


def _obs(batch_sizes, plain_steps=None) -> Observation:
    costs = [BsCost(bs, 10, 1.0, 2.0, 0.5, 3.5, 0.1) for bs in batch_sizes]
    return Observation(steps=3, topk=1, draft_tokens=4, hist=[1, 1, 1, 1], costs=costs,
                       plain_steps=dict(plain_steps or {}))


def test_an_exact_hit_is_its_own_size():
    assert nearest_batch({1: 5.0, 4: 6.0, 16: 9.0}, 4) == 4
    assert nearest_batch([16, 4, 1], 16) == 16


def test_below_the_smallest_and_above_the_largest_take_the_end():
    sizes = {4: 6.0, 8: 7.0, 32: 11.0}
    assert nearest_batch(sizes, 1) == 4
    assert nearest_batch(sizes, 3) == 4
    assert nearest_batch(sizes, 64) == 32
    assert nearest_batch(sizes, 1000) == 32


def test_the_scale_is_the_ratio_not_the_difference():
    # 3 is 2 from 1 and 5 from 8, but 8 / 3 < 3 / 1
    assert nearest_batch({1: 5.0, 8: 7.0}, 3) == 8
    assert nearest_batch({1: 5.0, 8: 7.0}, 2) == 1   # 2 / 1 < 8 / 2


@pytest.mark.parametrize("bs, below, above", [(4, 2, 8), (6, 4, 9), (12, 8, 18), (10, 1, 100), (7, 1, 49)])
def test_an_equal_ratio_goes_to_the_smaller_size(bs, below, above):
    # (6, 4, 9), (12, 8, 18) and (7, 1, 49): a float log ranks the larger one first by rounding
    assert below * above == bs * bs
    assert nearest_batch({below: 1.0, above: 2.0}, bs) == below
    assert nearest_batch({above: 2.0, below: 1.0}, bs) == below


def test_an_empty_table_or_a_size_below_1_is_refused():
    with pytest.raises(ValueError):
        nearest_batch({}, 4)
    with pytest.raises(ValueError):
        nearest_batch({0: 1.0, 4: 2.0}, 4)
    with pytest.raises(ValueError):
        nearest_batch({4: 2.0}, 0)


def test_nearest_steps_measures_interpolates_or_refuses():
    # 1 and 8 measured: 2 and 6 between them, interpolated linearly in the batch size; 16 above: refused
    steps, note = nearest_steps({1: 4.0, 8: 6.0}, [1, 2, 6, 16])
    assert steps == pytest.approx({1: 4.0, 2: 4.0 + 2.0 / 7, 6: 4.0 + 10.0 / 7})
    assert 16 not in steps
    assert note == ("batch 2: interpolated between batch 1 and 8 (4.29 ms); "
                    "batch 6: interpolated between batch 1 and 8 (5.43 ms); "
                    "batch 16: refused: the baseline was measured at batch 1-8 only, give a plain step "
                    f"measured at batch 16 ({ONE_FILE})")
    assert nearest_steps({1: 4.0, 8: 6.0}, [8, 1]) == ({8: 6.0, 1: 4.0}, "")
    # one measured size prices only itself: batch 1 from a batch-8 baseline is refused, never borrowed
    steps, note = nearest_steps({8: 5.0}, [1, 8])
    assert steps == {8: 5.0} and note == ("batch 1: refused: the baseline was measured at batch 8 only, give a plain "
                                           "step measured at batch 1 "
                                           f"({ONE_FILE})")


def test_every_priced_step_is_printed():
    from sglang_patches.whatif.advisor import plain_steps_line
    from sglang_patches.whatif.baseline_price import one_step, price

    _, used = price({1: 4.0, 8: 6.0}, [1, 4, 32])
    assert plain_steps_line(used) == (
        "plain decode step used: batch 1: 4.00 ms (measured), batch 4: 4.86 ms (interpolated between batch 1 and 8), "
        "batch 32: none (refused: the baseline was measured at batch 1-8 only, give a plain step measured at "
        f"batch 32 ({ONE_FILE}))")
    _, used = one_step(5.0, [1, 8])
    assert plain_steps_line(used) == ("plain decode step used: batch 1, 8: 5.00 ms (--baseline-step-ms, given for every "
                                      "batch size)")
    _, used = one_step(4.09, [1, 3, 4, 5, 6, 7, 8, 16])  # one price for every batch: one entry, runs joined
    assert plain_steps_line(used) == ("plain decode step used: batch 1, 3-8, 16: 4.09 ms (--baseline-step-ms, given for "
                                      "every batch size)")


def test_the_logs_own_plain_cycles_are_priced_by_the_same_rule():
    obs = _obs([1, 6, 12], {1: (30, 4.0), 4: (20, 5.0), 9: (20, 7.0)})
    assert obs.plain_baseline() == pytest.approx({1: 4.0, 6: 5.0 + 2.0 * 2 / 5})
    assert obs.plain_borrowed() == ("batch 6: interpolated between batch 4 and 9 (5.80 ms); "
                                    "batch 12: refused: the baseline was measured at batch 1-9 only, give a plain "
                                    "step measured at batch 12 "
                                    f"({ONE_FILE})")
    assert [u["how"] for u in obs.plain_used()] == ["measured", "interpolated between batch 4 and 9",
                                                    "refused: the baseline was measured at batch 1-9 only, "
                                                    "give a plain step measured at batch 12 "
                                                    f"({ONE_FILE})"]
    assert _obs([1], {1: (30, 4.0)}).plain_borrowed() == ""
    none = _obs([1, 6])
    assert none.plain_baseline() is None and none.plain_borrowed() == ""
    # steps-0 cycles at batch 8 only price nothing at batch 1: no baseline rather than batch 8's step
    assert _obs([1], {8: (30, 5.0)}).plain_baseline() is None


def test_the_adaptive_buckets_are_priced_by_the_same_rule():
    obs = _obs([2, 6, 12])
    out, src, note = _baseline_for(obs, {1: 4.0, 4: 5.0, 9: 7.0}, None, {})
    assert src == "given baseline" and out == pytest.approx({2: 4 + 1 / 3, 6: 5.8})
    assert note == ("batch 2: interpolated between batch 1 and 4 (4.33 ms); "
                    "batch 6: interpolated between batch 4 and 9 (5.80 ms); "
                    "batch 12: refused: the baseline was measured at batch 1-9 only, give a plain step "
                    f"measured at batch 12 ({ONE_FILE})")
    # every batch size of the bucket outside the baseline's: no baseline for it, and the refusal said
    out, src, note = _baseline_for(obs, {4: 5.0}, None, {})
    assert (out, src) == (None, "") and note.count("refused") == 3
    out, src, note = _baseline_for(obs, None, None, {6: 5.5})
    assert out == {6: 5.5} and src == "the log's own plain decode cycles (steps 0)"
    assert note.startswith("batch 2: refused: the baseline was measured at batch 6 only, give a plain step "
                           f"measured at batch 2 ({ONE_FILE})")
    assert _baseline_for(obs, None, None, {}) == (None, "", "")
