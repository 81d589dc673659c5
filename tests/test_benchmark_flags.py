"""Bad input to the benchmark scripts this project runs on the GPU machine is refused before any
server starts (these tests need no GPU: the refusal comes first): one line, non-zero exit, no
traceback, nothing written."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run(script, *args):
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / script), *args], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=120)


@pytest.mark.parametrize("args, why", [(["--requests-per-run", "0"], "not an integer >= 1"),
                                       (["--requests-per-run", "x"], "invalid int value"),
                                       (["--repeats", "-2"], "not an integer >= 1"),
                                       (["--batch-sizes"], "expected one argument")])
def test_timing_overhead_refuses_bad_flags(tmp_path, args, why):
    out = tmp_path / "out"
    r = run("timing_overhead.py", "--out", str(out), *args)
    err = r.stderr.strip()
    assert r.returncode != 0 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("timing_overhead: error: ") and why in err
    assert not out.exists()


def test_search_vs_grid_refuses_a_missing_flag(tmp_path):
    r = run("search_vs_grid.py", "--search", str(tmp_path))
    err = r.stderr.strip()
    assert r.returncode != 0 and len(err.splitlines()) == 1 and err.startswith("search_vs_grid: error: ")
    assert "--grid" in err
