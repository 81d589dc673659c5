"""tests/conftest.py: with SGP_REQUIRE_SGLANG=1 a run without an importable sglang, or with another
sglang than the version under test (SGP_SGLANG_UNDER_TEST), fails at once; needs_sglang skips
with a reason naming the versions."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _pytest(tmp_path, require: str, broken: bool, under_test: str | None = None, only_venv: bool = False):
    env = {**os.environ, "SGP_REQUIRE_SGLANG": require}
    if under_test is not None:
        env["SGP_SGLANG_UNDER_TEST"] = under_test
    if only_venv:  # the venv's own sglang (0.5.17), no other folder first on the path
        env.pop("PYTHONPATH", None)
    if broken:  # a `sglang` package first on the path that cannot be imported
        (tmp_path / "sglang").mkdir(exist_ok=True)
        (tmp_path / "sglang" / "__init__.py").write_text("raise ImportError('broken sglang for the test')\n")
        env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(REPO / "tests" / "test_packaging.py")],
                          capture_output=True, text=True, env=env, timeout=120, cwd=REPO)


def test_required_sglang_missing_fails_the_session(tmp_path):
    r = _pytest(tmp_path, "1", broken=True)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "SGP_REQUIRE_SGLANG=1 but sglang cannot be imported" in r.stdout + r.stderr
    assert "passed" not in r.stdout


def test_not_required_runs_without_sglang(tmp_path):
    r = _pytest(tmp_path, "0", broken=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_required_version_is_the_one_under_test(tmp_path):
    # the venv's own sglang is 0.5.17: a run for 0.5.23 without its folder first on the path stops
    r = _pytest(tmp_path, "1", broken=False, under_test="0.5.23", only_venv=True)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "sglang 0.5.17 is importable, the run is for 0.5.23" in r.stdout + r.stderr
    assert "run_cpu.sh --sglang 0.5.23" in r.stdout + r.stderr and "passed" not in r.stdout
    r = _pytest(tmp_path, "1", broken=False, under_test="0.5.17", only_venv=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_needs_sglang_names_versions_and_why(monkeypatch):
    import pytest

    from conftest import needs_sglang, sglang_under_test

    monkeypatch.setenv("SGP_SGLANG_UNDER_TEST", "0.5.23")
    assert sglang_under_test() == "0.5.23"
    mark = needs_sglang("0.5.17", why="reads 0.5.17's ps argument")
    assert mark.args == (True,) and mark.kwargs["reason"] == (
        "sglang 0.5.17 only, not 0.5.23: reads 0.5.17's ps argument")
    assert needs_sglang("0.5.17", "0.5.23", why="x").args == (False,)
    with pytest.raises(ValueError):
        needs_sglang("0.5.17", why="")
