"""sglang_patches/offline/adaptive_slot.py: the copy of SGLang's per-bucket step rule against the REAL
AdaptiveStepSlot of the SGLang under test (tests/run_cpu.sh runs this file on 0.5.17 and 0.5.23): the
same feeds, every decision compared; then replay's truncation, and advise's line built from it."""
from __future__ import annotations

import re
import json
import random

import pytest

from sglang_patches.offline.adaptive_slot import SlotRule, replay
from test_adaptive_config import _runs

CONFIGS = [
    {"candidate_steps": [1, 3, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25},
    {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0},
    {"candidate_steps": [0]},
    {"candidate_steps": [4, 5]},
    {"candidate_steps": [2, 3, 4, 5], "up_hysteresis": 0.3, "down_hysteresis": -0.4, "ema_alpha": 0.5,
     "update_interval": 2, "warmup_batches": 3},
    {"candidate_steps": [1, 2, 6], "ceiling_coeff": 1.5, "warmup_batches": 0, "update_interval": 1},
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: str(c["candidate_steps"]))
@pytest.mark.parametrize("initial", [0, 3, 5, 7])
def test_the_copy_decides_as_sglangs_slot(cfg, initial):
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveStepSlot

    rng = random.Random(hash((tuple(cfg["candidate_steps"]), initial)) & 0xFFFF)
    real, ours = AdaptiveStepSlot(initial_steps=initial, cfg=dict(cfg)), SlotRule(initial, cfg)
    assert ours.current == real.current_steps
    moves = 0
    for i in range(3000):
        p = 0.9 if (i // 300) % 2 else 0.2  # acceptance regimes that push the slot both ways
        n = rng.choice([1, 1, 4, 8])
        feed = _runs(n, p, real.current_steps, rng.random())
        if rng.random() < 0.01:
            feed = []  # every request stale: SGLang passes nothing
        before = real.current_steps
        real.update(list(feed))
        ours.update(list(feed))
        moves += real.current_steps != before
        assert (ours.current, ours.batches) == (real.current_steps, real._batch_count), i
        assert ours.ema == pytest.approx(real.ema_accept_len, abs=1e-12), i
    if len(cfg["candidate_steps"]) > 1:
        assert moves > 0  # the feed exercised the decisions


def test_replay_truncates_the_logged_acceptance():
    # logged at steps 5: a request accepting 4 accepts min(4, s) at steps s
    cycles = [[4]] * 200
    stay = replay({"candidate_steps": [3, 5]}, cycles, 5, 5)
    assert stay["share"] == {5: 1.0} and stay["cycles"] == 200  # EMA stays 4 > 3 - 0.5 - 0.25: no step down
    low = replay({"candidate_steps": [3, 5]}, [[1]] * 200, 5, 5)
    assert low["share"][3] > 0.9  # EMA -> 1 <= 3 - 0.5 - 0.25: down to 3 after the warm-up
    above = replay({"candidate_steps": [5, 7]}, [[5]] * 200, 5, 5)
    assert above["share"].get(7, 0) > 0.5 and above["above_logged"] == above["share"][7]


def test_advise_prints_and_records_what_sglangs_slot_would_run(tmp_path, capsys):
    from test_adaptive_config import run

    cfg, _ = run(tmp_path)
    text = capsys.readouterr().out
    for info in cfg["sglang_patches"]["buckets"][:2]:
        r = info["sglang_slot_replay"]
        assert r["cycles"] == sum(info["batch_sizes"].values())
        assert set(map(int, r["share"])) <= set(info["candidate_steps"])
        assert abs(sum(r["share"].values()) - 1.0) < 0.01
    # each bucket's replay starts where SGLang's slot does: at the server's start chain (5 here) when
    # it is a candidate, else at the middle candidate (AdaptiveStepSlot's own rule)
    starts = []
    for info in cfg["sglang_patches"]["buckets"][:2]:
        c = info["candidate_steps"]
        first = 5 if 5 in c else c[len(c) // 2]
        line = next(ln for ln in text.splitlines() if re.match(rf"bucket {info['bucket']} \(batch [^)]+\): ", ln))
        why = "" if first == 5 else (" (its only candidate; the server starts at s5)" if len(c) == 1 else
                                     " (its middle candidate: the server's start, s5, is not one)")
        assert f"SGLang's slot on these cycles, started at steps {first}{why}: " in line, line
        starts.append(first)
    assert starts[0] == 5 and starts[1] != 5  # the log has both cases (else this test shows less)
    json.dumps(cfg)  # the file holds it as JSON
