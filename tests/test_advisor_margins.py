"""The advisor's rules on hand-made predictions: an extrapolated chain is named, never recommended;
another chain than the logged one must beat it by CHANGE_MARGIN; neither may hide the
answer to "speculate at all?", and `advise --adaptive-config` still takes the chains near the
predicted fastest. The cost model's rows are REPLACED by fixed tok/s (advisor.predict is patched):
what is tested is the choice among them, not the predictions."""
from __future__ import annotations

import pytest

from sglang_patches.offline.adaptive_config import choose
from sglang_patches.whatif import advisor as adv
from sglang_patches.whatif.advisor_observation import Observation


def row(steps, tok_s, logged_steps=4, ratio=None):
    return adv.Row(steps, steps + 1, 2.0, 5.0, tok_s, tok_s, extrapolated=steps > logged_steps,
                   logged=steps == logged_steps, ratio=ratio, break_even_step_ms=4.0)


def advice(monkeypatch, tok: dict, base=None, logged_steps=4):
    """tok: steps -> tok/s; base: plain decode tok/s (ratio = tok/s / base), None without a baseline."""
    rows = [row(s, t, logged_steps, None if base is None else t / base) for s, t in sorted(tok.items())]
    monkeypatch.setattr(adv, "predict", lambda *a, **k: rows)
    obs = Observation(logged_steps, 1, logged_steps + 1, [10, 10, 10, 10, 10])  # accepts: no no-accept verdict
    return adv.advise(obs, sorted(tok), {1: 1.0} if base is not None else None)


def first_line(a):
    return next(ln for ln in a.lines("s4_k1_n5") if ln.startswith(("recommended", "best chain")))


def test_a_gain_within_the_margin_keeps_the_logged_chain(monkeypatch):
    a = advice(monkeypatch, {2: 102.9, 3: 101.0, 4: 100.0, 5: 97.5}, base=50.0)
    assert a.best.steps == 4 and a.kept_over.steps == 2
    assert a.to_dict()["kept_logged_over"] == "s2_k1_n3" and a.to_dict()["recommended"] == "s4_k1_n5"
    assert "s2_k1_n3 is predicted 2.9 % faster" in first_line(a)
    a = advice(monkeypatch, {2: 104.0, 4: 100.0}, base=50.0)  # beyond the margin: the faster chain
    assert a.best.steps == 2 and a.kept_over is None


def test_adaptive_candidates_are_near_the_predicted_fastest(monkeypatch):
    a = advice(monkeypatch, {2: 102.9, 3: 101.0, 4: 100.0, 5: 97.5}, base=50.0)
    cands, why = choose(a, None)
    assert cands == [2, 3, 4]  # 5 is 5.2 % below the fastest (s2), outside NEAR
    assert why.startswith("best s2_k1_n3 103 tok/s")


def test_the_extrapolated_gain_is_said_against_the_recommended_chain(monkeypatch):
    # s5 (extrapolated) +2.9 % over s3, the best known; s3 +1 % over the logged s4: s4 is kept, and the
    # guess is said against the chain recommended
    a = advice(monkeypatch, {3: 101.0, 4: 100.0, 5: 103.9}, base=50.0)
    assert a.passed_over.steps == 5 and a.kept_over.steps == 3 and a.best.steps == 4
    line = first_line(a)
    assert "s5_k1_n6, extrapolated beyond the logged steps, is predicted 3.9 % faster than s4_k1_n5" in line
    assert "log a run at steps 5 to price it" in line  # 3.9 % over the recommended chain: past the model's error


@pytest.mark.parametrize("tok,base,speculate,best", [
    ({2: 82.0, 3: 80.0, 4: 79.0}, 100.0, False, 2),   # no chain wins: the best chain is named as it is
    ({2: 101.5, 4: 99.5}, 100.0, True, 2),             # the margin would turn "speculate" into a loss
])
def test_the_margin_never_decides_whether_to_speculate(monkeypatch, tok, base, speculate, best):
    a = advice(monkeypatch, tok, base=base)
    assert a.speculate is speculate and a.best.steps == best and a.kept_over is None


def test_without_a_baseline_the_margin_applies(monkeypatch):
    a = advice(monkeypatch, {2: 101.0, 4: 100.0})
    assert a.speculate is None and a.best.steps == 4 and a.kept_over.steps == 2
    assert first_line(a).startswith("best chain: s4_k1_n5")


def test_an_extrapolated_fastest_chain_is_named_also_where_plain_decode_wins(monkeypatch):
    """s6 (extrapolated) 1.10x plain; every logged-range chain below plain: the adaptive entry is [0]
    (nothing past the logged steps is written) and the line names s6 and the log that would price it."""
    a = advice(monkeypatch, {3: 90.0, 4: 98.0, 6: 110.0}, base=100.0)
    assert a.passed_over.steps == 6 and a.best.steps == 4 and a.speculate is False  # the case it tests
    assert ("s6_k1_n7, extrapolated beyond the logged steps, is predicted 12.2 % faster than s4_k1_n5, 1.10x plain "
            "decode: log a run at steps 6 to price it" in first_line(a))
    cands, why = choose(a, 100.0)
    assert cands == [0]
    assert why.startswith("plain decode 100 tok/s beats the best chain s4_k1_n5")
    assert "s6_k1_n7 predicted +12.2 % but extrapolated beyond the logged steps, not written" in why
    assert "started at steps 6 to price it" in why


def test_a_guess_no_run_could_act_on_asks_for_none(monkeypatch):
    """Extrapolated rows the recommendation would not follow: below plain decode where plain decode is
    the answer, or within the model's error of the recommended chain; neither asks for a run."""
    a = advice(monkeypatch, {3: 88.0, 4: 90.0, 6: 95.0}, base=100.0)  # s6 0.95x plain: no speculation stands
    assert a.passed_over.steps == 6 and "s6" not in first_line(a)
    cands, why = choose(a, 100.0)
    assert cands == [0] and "s6" not in why
    a = advice(monkeypatch, {3: 90.0, 4: 100.0, 6: 101.0}, base=50.0)  # +1 %: inside the model's error
    line = first_line(a)
    assert "s6_k1_n7, extrapolated beyond the logged steps, is predicted 1.0 % faster" in line
    assert "within the model's error" in line and "log a run" not in line
    cands, why = choose(a, 50.0)
    assert cands == [4] and "not written" not in why and "s6 left out: extrapolated" in why
