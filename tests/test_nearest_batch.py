"""The nearest logged batch size, the one rule behind every borrowed plain decode baseline
(advise's --baseline-log / --calibration table, --adaptive-config's buckets, the log's own steps-0 cycles)."""
import pytest

from sglang_patches.offline.adaptive_config import _baseline_for
from sglang_patches.whatif.advisor_observation import BsCost, Observation, nearest_batch, nearest_steps


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


def test_nearest_steps_names_what_was_borrowed():
    steps, note = nearest_steps({1: 4.0, 8: 6.0}, [1, 2, 6])
    assert steps == {1: 4.0, 2: 4.0, 6: 6.0}
    assert note == ("batch 2 borrows batch 1's plain step (4.00 ms; none logged at 2), "
                    "batch 6 borrows batch 8's plain step (6.00 ms; none logged at 6): a guess")
    assert nearest_steps({1: 4.0, 8: 6.0}, [8, 1]) == ({8: 6.0, 1: 4.0}, "")


def test_the_logs_own_plain_cycles_borrow_by_the_same_rule():
    obs = _obs([1, 6], {1: (30, 4.0), 4: (20, 5.0), 9: (20, 7.0)})
    assert obs.plain_baseline() == {1: 4.0, 6: 5.0}
    assert obs.plain_borrowed() == "batch 6 borrows batch 4's plain step (5.00 ms; none logged at 6): a guess"
    assert _obs([1], {1: (30, 4.0)}).plain_borrowed() == ""
    none = _obs([1, 6])
    assert none.plain_baseline() is None and none.plain_borrowed() == ""


def test_the_adaptive_buckets_borrow_by_the_same_rule():
    obs = _obs([2, 6, 12])
    out, src, note = _baseline_for(obs, {4: 5.0, 9: 7.0}, None, {})
    assert (out, src) == ({2: 5.0, 6: 5.0, 12: 7.0}, "given baseline")
    assert note == ("batch 2 borrows batch 4's plain step (5.00 ms; none logged at 2), "
                    "batch 6 borrows batch 4's plain step (5.00 ms; none logged at 6), "
                    "batch 12 borrows batch 9's plain step (7.00 ms; none logged at 12): a guess")
    out, src, note = _baseline_for(obs, None, None, {6: 5.5})
    assert out == {2: 5.5, 6: 5.5, 12: 5.5} and src == "the log's own plain decode cycles (steps 0)"
    assert _baseline_for(obs, None, None, {}) == (None, "", "")
