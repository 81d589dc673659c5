"""The adaptive benchmark's --temperature: sampled traffic, the regime where a drafter's greedy guesses
meet a target that samples. Pinned per --out like the ood set (a resumed run cannot mix temperatures),
passed to SGLang's own bench_serving as its --temperature (parsed here by bench_serving's real CLI) and to
the warm-up, recorded in every cell and the summary. The servers and the client's run are the flow
tests' stand-ins (tests/test_adaptive_bench_flow.py): a real one needs the GPU."""
from __future__ import annotations

import json
import shlex
import sys
import types

import pytest

from test_adaptive_bench_flow import FakeClient, ab, rig  # noqa: F401 - rig is the fixture used below

import adaptive_prompts as ap  # noqa: E402  (benchmarks/ is on the path once test_adaptive_bench_flow is imported)


def test_the_pin_keeps_one_temperature_per_out(tmp_path):
    out = tmp_path / "o"
    assert ap.pin_temperature(out, None) is None and ap.temperature() == 0.0 and ap.client_flags() == []
    assert ap.pin_temperature(out, 0.0) is None  # greedy again: the same pin
    hot = tmp_path / "hot"
    assert ap.pin_temperature(hot, 1.0) is None and ap.client_flags() == ["--temperature", "1.0"]
    assert ap.pin_temperature(hot, None) is None and ap.temperature() == 1.0  # resumed without the flag
    assert ap.pin_temperature(hot, 0.7) == f"--temperature 0.7: {hot} measured at temperature 1; use another --out for another temperature"
    assert ap.temperature() == 1.0 and (hot / "temperature.txt").read_text() == "1.0\n"


def test_cells_measured_before_the_pin_ran_greedy_and_bad_values_are_refused(tmp_path):
    old = tmp_path / "old"
    (old / "cells").mkdir(parents=True)
    (old / "cells" / "s5_in_bs1.json").write_text("{}")
    assert "measured at temperature 0" in ap.pin_temperature(old, 1.0)
    assert not (old / "temperature.txt").exists()
    for bad in (-0.5, float("nan"), float("inf")):
        assert ap.pin_temperature(tmp_path / "new", bad).endswith("give a number >= 0 (0: greedy decoding)")
    assert not (tmp_path / "new").exists()
    (old / "temperature.txt").write_text("warm\n")
    assert ap.pin_temperature(old, None) == f"{old / 'temperature.txt'} does not hold a number; restore it or use another --out"


def test_a_sampled_run_sends_the_temperature_to_bench_serving_and_the_warm_up(rig, monkeypatch, tmp_path):  # noqa: F811
    warm = []
    monkeypatch.setattr("sglang_patches.offline.sweep.load.run_batch", lambda *a, **k: warm.append(k) or {})
    s = rig("--deadline", "100000", "--cases", "plain,s5", "--temperature", "1.0")
    assert warm and all(k["temperature"] == 1.0 for k in warm)
    assert all(run[-2:] == ["--temperature", "1.0"] for run in FakeClient.runs) and FakeClient.runs
    cell = json.loads((tmp_path / "out" / "cells" / "s5_ood_bs1.json").read_text())
    assert cell["temperature"] == 1.0
    assert s["prompts"]["temperature"] == 1.0  # the summary's meta, beside the prompt sets

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=None))
    from sglang.benchmark import serving

    got = []
    monkeypatch.setattr(serving, "run_benchmark", lambda a: got.append(a))
    monkeypatch.setattr(sys, "argv", ["bench_serving", *shlex.split(cell["client_cmd"])[3:]])
    serving.cli_main()
    assert got[0].temperature == 1.0 and got[0].max_concurrency == 1


def test_a_resumed_run_at_another_temperature_is_refused_before_anything_starts(rig, monkeypatch, tmp_path, capsys):  # noqa: F811
    rig("--deadline", "100000", "--cases", "plain")
    monkeypatch.setattr(sys, "argv", ["adaptive_bench.py", "--out", str(tmp_path / "out"), "--cases", "s5",
                                      "--temperature", "1.0"])
    assert ab.main() == 2
    assert "measured at temperature 0; use another --out" in capsys.readouterr().err
    assert not (tmp_path / "out" / "cells" / "s5_in_bs1.json").exists()


def test_a_greedy_run_keeps_its_client_command(rig):  # noqa: F811
    rig("--deadline", "100000", "--cases", "plain")
    assert FakeClient.runs and not any("--temperature" in run for run in FakeClient.runs)


@pytest.mark.parametrize("value", ["-1", "nan"])
def test_a_bad_temperature_writes_nothing(rig, monkeypatch, tmp_path, capsys, value):  # noqa: F811
    monkeypatch.setattr(sys, "argv", ["adaptive_bench.py", "--out", str(tmp_path / "fresh"), "--temperature", value])
    assert ab.main() == 2
    assert "give a number >= 0" in capsys.readouterr().err and not (tmp_path / "fresh").exists()
