"""benchmarks/harness/files.run_meta: the header of every results file a figure is published from (the exact
command, the UTC date, SGLang / torch / CUDA / GPU as sglang_patches.versions reads them), one function the
scripts share instead of one copy each."""
from __future__ import annotations

import datetime
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_header_names_the_command_date_and_versions(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from harness import files as run_files

    monkeypatch.setattr(sys, "argv", ["benchmarks/verify_cost.py", "--out", "a b", "--extra", "--x 1"])
    meta = run_files.run_meta()
    assert shlex.split(meta["command"]) == [sys.executable, "benchmarks/verify_cost.py", "--out", "a b", "--extra", "--x 1"]
    when = datetime.datetime.fromisoformat(meta["date"])
    assert when.utcoffset() == datetime.timedelta(0)
    assert abs((datetime.datetime.now(datetime.timezone.utc) - when).total_seconds()) < 60
    from sglang_patches.versions import collect

    assert meta["env"]["sglang"] == collect()["sglang"] and "torch" in meta["env"] and "gpus" in meta["env"]


def test_versions_that_cannot_be_read_are_said_and_the_header_still_written(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from harness import files as run_files

    import sglang_patches.versions as versions

    def broken():
        raise RuntimeError("no driver")

    monkeypatch.setattr(versions, "collect", broken)
    meta = run_files.run_meta()
    assert meta["env"] == {"error": "RuntimeError('no driver')"} and meta["command"] and meta["date"]


def test_the_scripts_that_write_a_header_take_it_from_run_meta():
    """Each script imports cleanly beside harness/files.py (a missing or circular import fails here); that it calls
    run_meta() for its header, and no longer its own versions.collect(), is read from its text."""
    for script in ("timing_overhead", "verify_cost", "moe_expert_spread", "single_request_check", "trained_8b_check",
                   "draft_backend_check", "profiler_crosscheck", "trained_pair_demo", "adaptive_graphs_check",
                   "draft_tp_bench", "draft_tp_x2", "advisor_check", "serve_checks", "adaptive_bench_summary", "fp8_draft_bench",
                   "bench_draft_kernels"):
        text = (REPO / "benchmarks" / f"{script}.py").read_text()
        # fp8_draft_bench reads the versions in the child process that owns the GPU and hands them to run_meta
        own = 1 if script == "fp8_draft_bench" else 0
        assert "run_meta(" in text and text.count("versions import collect") == own, script
        r = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, 'benchmarks'); import {script}"],
                           cwd=REPO, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (script, r.stderr[-500:])
