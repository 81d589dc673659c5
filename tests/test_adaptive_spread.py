"""benchmarks/adaptive_spread.py: one configuration's cells on two servers (two adaptive_bench --out
folders), paired by name; the ratios are computed here by hand."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "adaptive_spread.py"


def cell(tok_s, accept, build="b1", n=8, row="s5", t0=None):
    return {"row": row, "set": "in", "bs": 1, "num_prompts": n, "output_len": 256, "fixture_build": build,
            "t0": tok_s if t0 is None else t0, "t1": (tok_s if t0 is None else t0) + 10,
            "result": {"output_throughput": tok_s, "completed": n, "accept_length": accept}}


def folder(root: Path, cells: dict) -> Path:
    (root / "cells").mkdir(parents=True)
    for name, c in cells.items():
        (root / "cells" / f"{name}.json").write_text(json.dumps(c))
    return root


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60)


def test_cells_of_one_build_are_paired_and_the_rest_named(tmp_path):
    a = folder(tmp_path / "a", {"s5_in_bs1": cell(400.0, 3.0), "s5_in_bs8": cell(2000.0, 2.5),
                                "s5_ood_bs1": cell(380.0, 2.6), "s3_in_bs1": cell(370.0, 2.4)})
    b = folder(tmp_path / "b", {"s5_in_bs1": cell(420.0, 2.9), "s5_in_bs8": cell(1900.0, 2.5),
                                "s5_ood_bs1": cell(380.0, 2.6, build="b2")})
    dst = tmp_path / "spread.json"
    r = run(a, b, "--out", dst)
    assert r.returncode == 0, r.stderr
    got = {p["cell"]: p for p in json.loads(dst.read_text())["pairs"]}
    assert sorted(got) == ["s5_in_bs1", "s5_in_bs8"]
    assert got["s5_in_bs1"]["tok_s_ratio"] == 1.05 and got["s5_in_bs1"]["accept_ratio"] == round(2.9 / 3.0, 4)
    assert got["s5_in_bs8"]["tok_s_ratio"] == 0.95
    assert "s5_ood_bs1: fixture_build differ (b1 vs b2)" in r.stderr and "s3_in_bs1: only in A" in r.stderr
    assert "largest tok/s spread: s5_in_bs8 0.950x over 2 paired cells" in r.stdout  # 0.95x is wider than 1.05x


def test_what_is_not_two_measurements_of_one_configuration_is_left_out(tmp_path):
    a = folder(tmp_path / "a", {"s5_in_bs1": cell(400.0, 3.0, build=None), "s3_in_bs1": cell(370.0, 2.4),
                                "ours_in_bs1": cell(390.0, 2.9, row="ours"), "s4_in_bs1": cell(380.0, 2.5),
                                "s2_in_bs1": cell(300.0, 2.0)})
    b = folder(tmp_path / "b", {"s5_in_bs1": cell(410.0, 3.0, build=None), "s3_in_bs1": cell(375.0, 2.4, t0=370.0),
                                "ours_in_bs1": cell(395.0, 2.9, row="ours"), "s4_in_bs1": cell(390.0, 2.5)})
    (b / "cells" / "s2_in_bs1.json").write_text("{broken")
    for root, steps in ((a, [5]), (b, [4, 5])):  # each folder's advise wrote its own config
        (root / "configs").mkdir()
        (root / "configs" / "ours_in.json").write_text(json.dumps({"1": {"candidate_steps": steps}, "sglang_patches": {}}))
    r = run(a, b)
    assert r.returncode == 0, r.stderr
    assert "s5_in_bs1: no fixture_build recorded" in r.stderr
    assert "s3_in_bs1: the same measurement in both" in r.stderr
    assert "ours_in_bs1: ours ran another adaptive config in each folder" in r.stderr
    assert "s2_in_bs1: unreadable in B" in r.stderr
    assert "s4_in_bs1" in r.stdout and "over 1 paired cells" in r.stdout


def test_refusals_are_one_line(tmp_path):
    a = folder(tmp_path / "a", {"s5_in_bs1": cell(400.0, 3.0)})
    r = run(a, a)
    assert r.returncode == 2 and r.stderr.strip().endswith("given twice; pass two folders")
    r = run(a, tmp_path / "empty")
    assert r.returncode == 2 and "no usable cells" in r.stderr and "Traceback" not in r.stderr
    b = folder(tmp_path / "b", {"s5_in_bs1": cell(410.0, 3.0)})
    r = run(a, b, "--out", a / "cells" / "x.json")
    assert r.returncode == 2 and "inside a folder it reads" in r.stderr and not (a / "cells" / "x.json").exists()
    c = folder(tmp_path / "c", {"s5_in_bs1": cell(410.0, 3.0, n=24)})
    r = run(a, c)
    assert r.returncode == 2 and "num_prompts differ (8 vs 24)" in r.stderr and "no cell measured in both" in r.stderr
    r = run(a, b, "--out", tmp_path / "no" / "x.json")
    assert r.returncode == 2 and r.stderr.strip().endswith("its folder does not exist") and "Traceback" not in r.stderr
