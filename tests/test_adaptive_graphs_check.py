"""benchmarks/adaptive_graphs_check.py on CPU: what it reads from /spec_timing is what the server's own
endpoint builds (the real runtime snapshot of recorded cycles, through endpoint.collect_from_states),
and bad flags get one line, exit 2, with nothing written. CUDA events are the fakes of
tests/recorder_fakes.py (no GPU here)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from adaptive_controller import real_controller

from recorder_fakes import FakeEvent, FakeStream

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import adaptive_graphs_check as agc  # noqa: E402


def test_the_steps_4_window_is_read_from_the_endpoints_answer(monkeypatch, tmp_path):
    import torch

    from sglang_patches.server.timing import runtime
    from sglang_patches.server.timing.endpoint import collect_from_states
    from sglang_patches.server.patches.marker import overlay_info
    from sglang_patches.vocab.overlay_config import OverlayConfig

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    stream = FakeStream()
    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing=True: FakeEvent(stream))
    monkeypatch.setattr(runtime.atexit, "register", lambda fn: fn)
    runtime.configure(OverlayConfig())
    worker = SimpleNamespace(tp_rank=0, server_args=SimpleNamespace(enable_metrics=False), speculative_num_steps=5)
    worker.adaptive_controller = real_controller(worker, [4, 5], tmp_path)  # SGLang's own, on a stand-in worker
    try:
        rec = runtime.get_or_create_recorder(worker)
        for steps, acc, ms in ((5, [2], 7.0), (4, [1], 6.0), (4, [3], 6.0), (4, [0], 6.0)):
            slot = rec.begin("decode", 1, 5, 1, 6)
            stream.t += ms
            rec.shape(slot, steps, steps + 1)
            rec.end(slot)
            rec.set_accepted(slot, acc)
        rec.flush(wait=lambda: None)
        answer = collect_from_states([{"sglang_patches": overlay_info()}])
        w = agc.window(agc.summary_of(answer), 4)
    finally:
        runtime.configure(OverlayConfig())
    assert w["cycles"] == 3 and w["share_of_window"] == pytest.approx(0.75)
    assert w["cycle_ms_p50"] == pytest.approx(6.0) and w["accept_length"] == pytest.approx(7 / 3)  # (1 + 3 + 0) accepted + one token each
    assert agc.window(agc.summary_of(answer), 3)["cycles"] == 0  # no such window: not measured
    assert agc.window(agc.summary_of({"error": "overlay not active"}), 4)["cycles"] == 0


@pytest.mark.parametrize("flags, says", [(["--cases", "s9"], "--cases: unknown"),
                                         (["--requests", "0"], "--requests"),
                                         (["--case", "adaptive"], "unrecognized arguments: --case"),
                                         (["--fixture", "nope"], "unknown fixture 'nope'")])
def test_bad_flags_one_line_exit_2_nothing_written(tmp_path, flags, says):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "adaptive_graphs_check.py"), "--out", str(out), *flags],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()


def test_the_run_records_the_fixtures_build_before_any_server(tmp_path):
    """A server that never fits the deadline still leaves the run JSON with the fixture's build id
    (the dummy fixture is built on CPU in seconds), and the run exits 1: nothing was measured."""
    out = tmp_path / "out"
    env = {**os.environ, "SGLANG_PATCHES_CACHE": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "adaptive_graphs_check.py"), "--out", str(out),
                        "--fixture", "llama3-8b", "--deadline", "1"], capture_output=True, text=True, timeout=300,
                       cwd=REPO, env=env)
    assert r.returncode == 1, r.stderr
    run = json.loads((out / "adaptive_graphs_check.json").read_text())
    from sglang_patches.offline.fixtures import base_build_id

    root = Path(env["SGLANG_PATCHES_CACHE"]) / "fixtures" / "llama3-8b"
    assert run["fixture_build"]["build_id"] == base_build_id(root) is not None
    assert all(v.startswith("not started") for v in run["outcomes"].values()) and not run["cases"]


def test_only_the_adaptive_graphs_case_serves_the_feature(tmp_path):
    """The launcher adds adaptive_graphs to all under --speculative-adaptive: the stock adaptive case must
    opt out, or the check would time the feature against itself."""
    from sglang_patches.launch_args import overlay_config, split_overlay_args, with_adaptive_graphs

    served = {}
    for case in agc.CASES:
        ns, rest = split_overlay_args(agc.case_flags(case, tmp_path / "c.json"))
        served[case] = "adaptive_graphs" in with_adaptive_graphs(overlay_config(ns), ns.patches, rest).patches
    assert served == {"fixed_s4": False, "adaptive": False, "adaptive_graphs": True}
