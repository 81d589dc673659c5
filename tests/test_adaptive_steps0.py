"""benchmarks/adaptive_steps0.py: the steps-0 cost of an adaptive server against a plain server's step,
from two unpacked adaptive_bench exports (records written through the server's own JsonlSink,
tests/advisor_logs.py; SGLang's 'Decode batch' lines for the plain server). Figures computed here by hand."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from advisor_logs import write_records
from test_adaptive_cycles import rec

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "adaptive_steps0.py"


def cell(row, pset, bs, tps, log=None, server_log=None, n=8):
    return {"row": row, "set": pset, "bs": bs, "t0": 100.0, "t1": 150.0, "num_prompts": n, "temperature": 1.0,
            "timing_log": log, "server_log": server_log, "fixture_build": "b1",
            "result": {"output_throughput": tps, "accept_length": None}}


def make_runs(tmp_path):
    a, z = tmp_path / "sampled", tmp_path / "zero"
    (a / "cells").mkdir(parents=True)
    (z / "cells").mkdir(parents=True)
    (a / "logs").mkdir()
    # a plain step of 5 ms at batch 1 (200 tok/s), recorded on the GPU machine under another path
    (a / "logs" / "plain_x.log").write_text("[2026-12-05 05:31:00] Decode batch, #running-req: 1, #token: 90, "
                                            "token usage: 0.00, cuda graph: True, gen throughput (token/s): 200.00, "
                                            "#queue-req: 0,\n" * 3)
    (a / "cells" / "plain_ood_bs1.json").write_text(json.dumps(cell("plain", "ood", 1, 200.0, server_log="/tmp/gone/logs/plain_x.log")))
    write_records(a / "timing" / "default_x.jsonl", [rec(1, 101.0, 0, [0], 6.0), rec(2, 101.1, 1, [1], 6.3),
                                                     rec(3, 101.2, 0, [0], 6.2), rec(4, 101.3, 1, [0], 6.1)])
    (a / "cells" / "default_ood_bs1.json").write_text(json.dumps(cell("default", "ood", 1, 190.0, log="/tmp/gone/timing/default_x.jsonl")))
    write_records(z / "timing" / "zero_x.jsonl", [rec(i, 101.0 + i / 10, 0, [0], 6.0 + (i % 2)) for i in range(5)])
    (z / "cells" / "zero_ood_bs1.json").write_text(json.dumps(cell("zero", "ood", 1, 160.0, log="/tmp/gone/timing/zero_x.jsonl", n=4)))
    return a, z


def test_steps0_cost_against_the_plain_step(tmp_path):
    a, z = make_runs(tmp_path)
    dst = tmp_path / "s.json"
    r = subprocess.run([sys.executable, str(SCRIPT), "--run", str(a), "--run", str(z), "--out", str(dst)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    s = json.loads(dst.read_text())
    assert s["plain_step_ms"] == {"1": 5.0}
    assert s["zero_vs_plain_ood_bs1"] == 0.8 and s["default_vs_plain_ood_bs1"] == 0.95
    # zero's cycles 6, 7, 6, 7, 6 ms: p50 6 over the 5 ms plain step
    assert s["steps0_over_plain_step"] == {"ood_bs1": 1.2}
    # default's steps-1 cycles 6.3 / 6.1 (p50 6.2) over its steps-0 cycles 6.0 / 6.2 (p50 6.1)
    assert s["steps1_over_steps0_cycle"] == {"ood_bs1": round(6.2 / 6.1, 4)}
    assert s["cells"]["zero_ood_bs1"]["num_prompts"] == 4 and s["fixture_builds"] == ["b1"]


def test_a_cell_given_twice_and_a_folder_without_cells_are_refused(tmp_path):
    a, _ = make_runs(tmp_path)
    r = subprocess.run([sys.executable, str(SCRIPT), "--run", str(a), "--run", str(a), "--out", str(tmp_path / "s.json")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "also in an earlier --run" in r.stderr and not (tmp_path / "s.json").exists()
    r = subprocess.run([sys.executable, str(SCRIPT), "--run", str(tmp_path), "--out", str(tmp_path / "s.json")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "no cells/ folder" in r.stderr
