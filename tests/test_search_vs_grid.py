"""benchmarks/search_vs_grid.py: a live search's pick against a measured grid, by the grid's own
tok/s of both, on the recorded trained grid (benchmarks/results/2026-11-29-sweep-trained-grid)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "benchmarks" / "results" / "2026-11-29-sweep-trained-grid" / "grid"
sys.path.insert(0, str(ROOT / "benchmarks"))

import search_vs_grid as svg  # noqa: E402


def grid_rows():
    return [json.loads(line) for line in (GRID / "results.jsonl").read_text().splitlines() if line.strip()]


def grid_tok(config, bs):
    return next(r["tok_s"] for r in grid_rows() if r["config"] == config and r["batch_size"] == bs)


def live_search(tmp_path, configs, own_tok=None):
    """A search directory holding the grid's rows of `configs` (what a live search would have
    measured), with the search's own tok/s replaced where `own_tok` says (another run's noise)."""
    d = tmp_path / "search"
    d.mkdir()
    rows = [dict(r) for r in grid_rows() if r["config"] in configs]
    for r in rows:
        r["tok_s"] = (own_tok or {}).get((r["config"], r["batch_size"]), r["tok_s"])
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "search.json").write_text(json.dumps({"measured_speculative": len(configs) - 1, "grid_speculative": 15,
                                               "budget": 5}))
    return d


def test_the_pick_is_scored_by_the_grid_measurement_of_both(tmp_path):
    # the search's own run measured s3_k1_n4 fastest at bs 1 (noise: 700 tok/s), the grid measured
    # it at 618.8 and s5_k2_n8 at 635.0: the speculative ratio is the grid's 618.8 / 635.0
    d = live_search(tmp_path, {"baseline", "s3_k1_n4", "s1_k1_n2", "s2_k1_n3"}, {("s3_k1_n4", 1): 700.0})
    out = svg.compare(str(d), str(GRID))
    spec = {r["batch_size"]: r for r in out["search_vs_grid"] if r["kind"] == "speculative"}
    assert spec[1]["search_pick"] == "s3_k1_n4" and spec[1]["grid_best"] == "s5_k2_n8"
    assert spec[1]["ratio"] == pytest.approx(grid_tok("s3_k1_n4", 1) / grid_tok("s5_k2_n8", 1))
    assert spec[1]["within_3pct"] is True          # 0.974
    assert spec[8]["ratio"] == pytest.approx(grid_tok("s3_k1_n4", 8) / grid_tok("s5_k2_n8", 8))
    assert spec[32]["ratio"] < 0.97 and spec[32]["within_3pct"] is False   # s1_k1_n2 9050.9 vs 9346.5
    assert out["search_pick_ratio"] == {1: 1.0, 8: 1.0, 32: 1.0}          # the baseline wins every bs
    assert out["search_configs_measured"] == 3 and out["search_rows_not_in_grid"] == []


def test_summary_keys_are_written_and_the_rest_kept(tmp_path):
    d = live_search(tmp_path, {"baseline", "s5_k2_n8"})
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"speedup_bs1": 1.63, "search_pick_ratio_bs1": None, "search_pick_ratio_bs4": 0.9}))
    assert svg.main(["--search", str(d), "--grid", str(GRID), "--summary", str(summary)]) == 0
    s = json.loads(summary.read_text())
    assert s["speedup_bs1"] == 1.63 and s["search_pick_ratio_bs1"] == 1.0 and s["search_pick_ratio_bs8"] == 1.0
    assert s["search_grid_speculative"] == 15 and len(s["search_vs_grid"]) == 6
    assert s["search_pick_ratio_bs4"] is None      # not in this comparison: no stale figure stays


@pytest.mark.parametrize("case", ["no_search_dir", "no_search_json", "bad_summary", "missing_summary", "empty_grid",
                                  "summary_is_search_json", "summary_is_grid_results", "list_summary", "list_search"])
def test_bad_input_is_one_line_and_changes_nothing(tmp_path, capsys, case):
    d = live_search(tmp_path, {"baseline", "s5_k2_n8"})
    grid, summary = GRID, tmp_path / "summary.json"
    summary.write_text("{}")
    args = ["--search", str(d), "--grid", str(grid), "--summary", str(summary)]
    if case == "no_search_dir":
        args[1] = str(tmp_path / "nope")
    elif case == "no_search_json":
        (d / "search.json").unlink()
    elif case == "bad_summary":
        summary.write_text("{not json")
    elif case == "missing_summary":
        args[5] = str(tmp_path / "absent.json")
    elif case == "empty_grid":
        (tmp_path / "grid").mkdir()
        args[3] = str(tmp_path / "grid")
    elif case == "summary_is_search_json":
        summary = d / "search.json"
        args[5] = str(summary)
    elif case == "summary_is_grid_results":
        grid = tmp_path / "grid"
        grid.mkdir()
        (grid / "results.jsonl").write_text((GRID / "results.jsonl").read_text().splitlines()[0] + "\n")
        summary = grid / "results.jsonl"
        args[3], args[5] = str(grid), str(summary)
    elif case == "list_summary":
        summary.write_text("[]")
    elif case == "list_search":
        (d / "search.json").write_text("[]")
    before = summary.read_text()
    with pytest.raises(SystemExit) as exc:
        svg.main(args)
    err = capsys.readouterr().err.strip()
    assert exc.value.code != 0 and err.startswith("search_vs_grid: error: ") and "\n" not in err
    assert summary.read_text() == before
