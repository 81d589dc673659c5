"""The set replay (offline/adaptive_sets.py) against ground truth: a text of known per-position
acceptability, run through for real by each candidate set with SGLang's REAL AdaptiveStepSlot of the
version under test deciding the steps, each cycle starting where the last one ended.

The truth is the generator's: a chain accepts its next draft with the probability of the text position
it lands on, so a shorter chain crosses the text in more cycles and each set meets the spans as it
would on a GPU. advise only sees what a steps-5 server would log of the same text (its accepted drafts per
cycle) and picks a pair, or none, with best_pair; that pick is then checked against the truth. The cycle
costs are a steps-s period of 5.9 + d x (s - 1) ms (draft forwards of d ms each), the advisor's model.
The simulator is benchmarks/adaptive_sets_sim.py, whose full grid is recorded in
benchmarks/results/2026-12-05-adaptive-sets-sim.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sglang_patches.offline.adaptive_sets import best_pair

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from adaptive_sets_sim import HYST_1, run, text  # noqa: E402  (the simulator: text, and a server run over it)


CASES = [  # (easy span, dead span, easy rate, dead rate, ms per drafter forward)
    (300, 250, 0.92, 0.05, 0.5), (80, 60, 0.92, 0.05, 0.5), (300, 60, 0.75, 0.05, 0.5),
    (300, 250, 0.92, 0.35, 0.5), (80, 250, 0.92, 0.05, 0.15), (20, 10, 0.92, 0.05, 0.5),
]


@pytest.mark.parametrize("easy_len,dead_len,easy,dead,draft_ms", CASES)
def test_a_pair_picked_from_a_steps_5_log_beats_every_fixed_chain_for_real(easy_len, dead_len, easy, dead, draft_ms):
    probs = text(20000, easy_len, dead_len, easy, dead, seed=easy_len + dead_len)
    periods = {s: {1: 5.9 + draft_ms * (s - 1)} for s in range(1, 8)}
    _, log5 = run(probs, [5], draft_ms, seed=1)
    pair = best_pair({"steps": 5, "accepted": log5}, HYST_1, periods, [1, 2, 3, 4, 5])
    fixed = max(run(probs, [s], draft_ms)[0] for s in range(1, 6))
    if pair is None:
        return
    truth = run(probs, pair["candidate_steps"], draft_ms)[0]
    assert truth > fixed, (pair, truth, fixed)


def test_bursty_text_gets_pairs_that_pay_and_steady_text_none():
    gains = []
    for easy_len, dead_len, easy, dead, draft_ms in CASES:
        probs = text(20000, easy_len, dead_len, easy, dead, seed=easy_len + dead_len)
        periods = {s: {1: 5.9 + draft_ms * (s - 1)} for s in range(1, 8)}
        pair = best_pair({"steps": 5, "accepted": run(probs, [5], draft_ms, seed=1)[1]}, HYST_1, periods, [1, 2, 3, 4, 5])
        if pair is not None:
            fixed = max(run(probs, [s], draft_ms)[0] for s in range(1, 6))
            gains.append(run(probs, pair["candidate_steps"], draft_ms)[0] / fixed - 1)
        # the same mean acceptance at every position: nothing to switch on
        mean = (easy * easy_len + dead * dead_len) / (easy_len + dead_len)
        steady = run([mean] * 20000, [5], draft_ms, seed=1)[1]
        assert best_pair({"steps": 5, "accepted": steady}, HYST_1, periods, [1, 2, 3, 4, 5]) is None
    assert len(gains) >= 4 and max(gains) > 0.05  # most bursty texts get a pair, and one pays > 5 % for real


def test_the_simulator_refuses_an_existing_out(tmp_path, capsys):
    from adaptive_sets_sim import main

    out = tmp_path / "summary.json"
    out.write_text("{}")
    assert main(["--out", str(out)]) == 2 and out.read_text() == "{}"
    assert "already exists" in capsys.readouterr().err


def test_the_simulator_refuses_an_out_in_a_missing_folder(tmp_path, capsys):
    from adaptive_sets_sim import main

    assert main(["--out", str(tmp_path / "nodir" / "summary.json")]) == 2
    assert "does not exist; create it first" in capsys.readouterr().err and not (tmp_path / "nodir").exists()
