"""benchmarks/run_parallel.py: jobs run side by side, a job's commands in order, wait-for, the deadline."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import run_parallel  # noqa: E402


def test_parse_job_and_errors():
    job = run_parallel.parse_job("a|2,3|echo 1 ;; echo 2")
    assert job == {"name": "a", "gpus": "2,3", "cmds": ["echo 1", "echo 2"]}
    for bad in ("a|0", "|0|echo", "a|x|echo", "a|0|  "):
        with pytest.raises(SystemExit, match="run_parallel"):
            run_parallel.parse_job(bad)


def test_lanes_overlap_wait_for_and_gpus(tmp_path):
    out = tmp_path / "r"
    flag = tmp_path / "flag"
    t0 = time.time()
    rc = run_parallel.main(["--out", str(out), "--deadline", "30",
                         "--job", f"a|1|sleep 1; touch {flag} ;; echo a-done $CUDA_VISIBLE_DEVICES",
                         "--job", f"b|0,2|wait-for {flag} ;; echo b-done $CUDA_VISIBLE_DEVICES ;; exit 3"])
    wall = time.time() - t0
    rows = json.loads((out / "jobs.json").read_text())["rows"]
    assert rc == 1  # one command failed
    assert [r["status"] for r in rows if r["job"] == "b"] == ["ok", "ok", "failed"]
    assert "a-done 1" in (out / "logs" / "a.log").read_text()
    assert "b-done 0,2" in (out / "logs" / "b.log").read_text()
    assert wall < 10


def test_deadline_stops_and_skips(tmp_path):
    out = tmp_path / "r"
    t0 = time.time()
    rc = run_parallel.main(["--out", str(out), "--deadline", "2",
                         "--job", "a||sleep 60 ;; echo never", "--job", "b||wait-for /nonexistent/x"])
    rows = {(r["job"], r["cmd"]): r for r in json.loads((out / "jobs.json").read_text())["rows"]}
    assert rc == 1 and time.time() - t0 < 30
    assert rows[("a", "sleep 60")]["status"] == "stopped at deadline"
    assert rows[("a", "echo never")]["status"] == "not started (deadline)"
    assert rows[("b", "wait-for /nonexistent/x")]["status"] == "timed out"
