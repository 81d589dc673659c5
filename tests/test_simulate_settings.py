"""Simulated acceptance, the settings and what the user sees:
- bad rates and settings are refused in one line before anything starts (the rates parser, the
  settings check, a timing log without per-position data, the launcher, OverlayConfig, the engine),
  and rates read from a real log are cut to the server's steps;
- the timing records, the recorder, the endpoint and `report` say "simulated"."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_patches.errors import UserError
from sglang_patches.vocab.overlay_config import OverlayConfig
from sglang_patches.server.simulate import checks
from sglang_patches.vocab import rates as R
from sglang_patches.vocab.schema import make_record

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- refusals before anything starts

@pytest.mark.parametrize("text,word", [("", "empty"), ("0.8,,0.7", "empty entry"), ("nan", "finite"),
                                       ("0.8,1.2", "outside [0, 1]"), ("-0.1", "outside [0, 1]"),
                                       ("abc", "not a number"), ("inf", "finite")])
def test_bad_rates_refused(text, word):
    with pytest.raises(UserError, match=word.replace("[", r"\[").replace("]", r"\]")) as e:
        R.parse_rates(text)
    assert e.value.code == 2 and "\n" not in str(e.value)


def test_settings_refused():
    ok = dict(algorithm="EAGLE3", steps="3", topk="1", env={})
    assert checks.resolve("0.8,0.7", None, **ok)[0] == [0.8, 0.7, 0.0]
    assert checks.resolve(None, None, **ok) is None
    cases = [(dict(ok, steps="2"), "0.8,0.7,0.6", "more|only 2"),
             (dict(ok, topk="2"), "0.8", "chains"),
             (dict(ok, topk=None), "0.8", "--speculative-eagle-topk 1"),
             (dict(ok, steps=None), "0.8", "--speculative-num-steps"),
             (dict(ok, algorithm=None), "0.8", "EAGLE3"),
             (dict(ok, algorithm="NGRAM"), "0.8", "EAGLE3"),
             (dict(ok, env={"SGLANG_SIMULATE_ACC_LEN": "3.3"}), "0.8", "unset SGLANG_SIMULATE_ACC_LEN")]
    for kw, text, word in cases:
        with pytest.raises(UserError, match=word) as e:
            checks.resolve(text, None, **kw)
        assert "\n" not in str(e.value)
    with pytest.raises(UserError, match="both"):
        checks.resolve("0.8", "x.jsonl", **ok)


def _log(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _rec(accepted, kind="decode", steps=3, simulated=False, cycle=0):
    return make_record(cycle=cycle, t=1.7e9 + cycle, rank=0, kind=kind, bs=len(accepted), steps=steps, topk=1,
                       draft_tokens=steps + 1, accepted=accepted, draft_ms=1.0, verify_ms=2.0, extend_ms=0.5,
                       cycle_ms=4.0, host_gap_ms=0.1, simulated=simulated)


def test_rates_from_a_real_log(tmp_path):
    # 10 request-cycles: a >= 1 in 8, a >= 2 in 6 of those, a >= 3 in 3 of those
    acc = [0, 0, 1, 1, 2, 2, 2, 3, 3, 3]
    log = _log(tmp_path / "c.jsonl", [_rec(acc[:4], cycle=0), _rec([], kind="prefill", cycle=1),
                                      _rec(acc[4:], cycle=2)])
    rates, info = R.rates_from_log(str(log))
    assert rates == [0.8, 0.75, 0.5] and info["request_cycles"] == 10 and info["denominators"] == [10, 8, 6]
    got, _ = checks.resolve(None, str(log), algorithm="EAGLE3", steps="2", topk="1", env={})
    assert got == [0.8, 0.75]  # a log's rates are cut to the server's steps


def test_logs_without_per_position_data_refused(tmp_path):
    for name, recs, word in (("prefill.jsonl", [_rec([], kind="prefill")], "no decode cycle"),
                             ("empty_acc.jsonl", [_rec([])], "no decode cycle"),
                             ("sim.jsonl", [_rec([1, 2], simulated=True)], "simulated")):
        with pytest.raises(UserError, match=word) as e:
            R.rates_from_log(str(_log(tmp_path / name, recs)))
        assert "\n" not in str(e.value)
    with pytest.raises(UserError, match="no such file"):
        R.rates_from_log(str(tmp_path / "missing.jsonl"))


def test_launcher_refuses_in_one_line_before_starting(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "SGLANG_PATCHES_CACHE": str(tmp_path / "c"),
           "PYTHONPATH": str(REPO)}
    for extra, word in ((["--simulate-acceptance", "0.8,nan"], "finite"),
                        (["--simulate-acceptance", "0.9,0.8,0.7,0.6"], "drafts only 3"),
                        (["--simulate-acceptance", "0.8", "--speculative-eagle-topk", "2",
                          "--speculative-num-draft-tokens", "4"], "chains"),
                        (["--simulate-acceptance-from", str(_log(tmp_path / "p.jsonl", [_rec([], kind="prefill")]))],
                         "no decode cycle")):
        r = subprocess.run([sys.executable, "-m", "sglang_patches.launch", "--fixture", "tiny", *extra],
                           capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
        lines = [ln for ln in r.stderr.splitlines() if not ln.startswith("sglang-patches: fixture")]
        assert r.returncode == 2 and len(lines) == 1 and word in lines[0], (extra, r.stderr)
        assert "Traceback" not in r.stderr


def test_overlay_config_round_trip_and_refusals():
    cfg = OverlayConfig(simulate_acceptance=[0.8, 0.7])
    assert OverlayConfig.from_json(cfg.to_env()).simulate_acceptance == [0.8, 0.7]
    assert OverlayConfig.from_json(OverlayConfig().to_env()).simulate_acceptance is None
    for bad, word in (([0.8, float("nan")], "finite"), ([], "non-empty"), ([1.5], "outside")):
        with pytest.raises(UserError, match=word):
            OverlayConfig.from_json(json.dumps({"simulate_acceptance": bad}))
    with pytest.raises(UserError, match="marker"):
        OverlayConfig.from_json(json.dumps({"simulate_acceptance": [0.5], "patches": ["timing"]}))


def test_engine_checks_simulation_against_its_kwargs():
    pytest.importorskip("sglang")
    from sglang_patches.engine import _checked_simulation

    ok = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1}
    cfg = _checked_simulation(OverlayConfig(simulate_acceptance=[0.8, 0.5]), ok)
    assert cfg.simulate_acceptance == [0.8, 0.5, 0.0]
    for bad, word in (({**ok, "speculative_eagle_topk": 4}, "chains"), ({**ok, "speculative_num_steps": 1}, "only 1"),
                      ({"model_path": "x"}, "EAGLE3")):
        with pytest.raises(UserError, match=word):
            _checked_simulation(OverlayConfig(simulate_acceptance=[0.8, 0.5]), bad)


# ---------------------------------------------------------------- impossible to mistake

def test_records_and_endpoint_say_simulated():
    from sglang_patches.server.timing.endpoint import collect_from_states
    from sglang_patches.server.timing.recorder import CycleRecorder

    assert _rec([1], simulated=True)["simulated"] is True and _rec([1])["simulated"] is False
    assert CycleRecorder(lambda: None, pool_size=1, simulated=True).simulated is True
    states = [{"sglang_patches": {"spec_timing": {"x": 1}, "simulated_acceptance": {"rates": [0.5]}}}]
    assert collect_from_states(states)["simulated_acceptance"] == {"rates": [0.5]}
    assert "simulated_acceptance" not in collect_from_states([{"sglang_patches": {"spec_timing": {}}}])


def test_report_says_simulated(tmp_path):
    log = _log(tmp_path / "sim.jsonl", [_rec([1, 2], simulated=True, cycle=c) for c in range(3)])
    real = _log(tmp_path / "real.jsonl", [_rec([1, 2], cycle=c) for c in range(3)])
    for path, want in ((log, True), (real, False)):
        r = subprocess.run([sys.executable, "-m", "sglang_patches", "report", str(path)], capture_output=True,
                           text=True, cwd=REPO, timeout=120)
        assert r.returncode == 0, r.stderr
        assert ("SIMULATED ACCEPTANCE" in r.stdout) is want

