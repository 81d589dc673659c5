"""tests/conftest.py: with SGP_REQUIRE_SGLANG=1 a run without an importable sglang fails at once."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _pytest(tmp_path, require: str, broken: bool):
    env = {**os.environ, "SGP_REQUIRE_SGLANG": require}
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
