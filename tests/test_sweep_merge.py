"""Sweeps split over GPUs (--shard, --merge) and searches replayed on a measured grid (--replay).

As in test_sweep_runner, `sweep.synthetic.SyntheticGPU` plays the servers (no GPU here); sharding,
merging, the report and the search's decisions are the real code.
"""
from __future__ import annotations

import io
import json

import pytest

from sglang_patches.errors import UserError
from sglang_patches.offline.sweep import cli
from sglang_patches.offline.sweep import merge as mg
from sglang_patches.offline.sweep import results as res
from sglang_patches.offline.sweep import table
from sglang_patches.whatif.grid import config_name, expand_grid
from sglang_patches.offline.sweep.runner import RunOptions, run_configs
from sglang_patches.offline.sweep.synthetic import SyntheticGPU, true_tok_s

GRID = ([1, 2, 3, 5], [1, 2], [2, 4, 8])


def _shard_sweep(out, configs, world, bss=(1, 8), shard=None):
    cmd = "sglang-patches sweep --fixture trained" + (f" --shard {shard}" if shard else "")
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"target": "/m/t", "draft": "/m/d", "max_new_tokens": 32, "batch_sizes": list(bss),
                **({"shard": shard} if shard else {})}
    res.prepare_out_dir(out, resume=False, force=False, manifest=manifest)
    res.write_json(out / res.PLAN, expand_grid(*GRID).to_dict())
    opts = RunOptions(out_dir=str(out), model_flags=["--model-path", "/m/t"],
                      spec_flags=["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/m/d"],
                      server_flags=[], batch_sizes=list(bss), prompts=["a"], max_new_tokens=32, repeats=2,
                      timeout=5, meta={"command": cmd, "gpu": "fake"})
    run_configs(configs, opts, server_cls=world.server_cls, run_batch=world.run_batch, http=world.http,
                out=io.StringIO())
    if shard == "0/3":  # a per-cycle timing file only this shard has: --merge must copy it
        (out / "timing" / "x.jsonl").write_text("{}\n")


def test_parse_shard():
    assert mg.parse_shard(None) is None
    assert mg.parse_shard("2/3") == (2, 3)
    for bad in ("3/3", "-1/2", "1", "a/b", "0/0"):
        with pytest.raises(UserError, match="--shard"):
            mg.parse_shard(bad)


def test_shards_partition_the_plan_with_baseline_in_shard_0():
    plan = expand_grid(*GRID)
    parts = [mg.shard_configs(plan.configs, (i, 3)) for i in range(3)]
    names = [config_name(c) for p in parts for c in p]
    assert sorted(names) == sorted(config_name(c) for c in plan.configs) and len(names) == len(set(names))
    assert parts[0][0] is None and all(c is not None for c in parts[1] + parts[2])
    assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_merge_joins_shards_and_reports_the_true_best(tmp_path):
    plan = expand_grid(*GRID)
    world = SyntheticGPU(noise=0.0)
    dirs = []
    for i in range(3):
        d = tmp_path / f"shard{i}"
        _shard_sweep(d, mg.shard_configs(plan.configs, (i, 3)), world, shard=f"{i}/3")
        dirs.append(str(d))
    before = [(tmp_path / f"shard{i}" / res.RESULTS).read_text() for i in range(3)]
    assert cli.main(["--merge", *dirs, "--out", str(tmp_path / "all")]) == 0
    rows = res.read_rows(tmp_path / "all")
    assert len(rows) == len(plan.configs) * 2
    assert {r["shard_dir"] for r in rows} == set(dirs)
    assert before == [(tmp_path / f"shard{i}" / res.RESULTS).read_text() for i in range(3)]  # shards untouched
    manifest = json.loads((tmp_path / "all" / res.MANIFEST).read_text())
    assert "shard" not in manifest and manifest["merged_from"] == dirs
    assert (tmp_path / "all" / "timing" / "x.jsonl").exists() and (tmp_path / "all" / "summary.md").exists()
    md = (tmp_path / "all" / "summary.md").read_text()
    assert "- Commands (3; rows merged into one sweep):" in md and md.count("--shard ") == 3
    best = table.best_per_bs(rows)
    for bs in (1, 8):
        assert best[bs]["best"]["config"] == max(plan.speculative, key=lambda c: true_tok_s(c, bs)).name


def test_merge_refuses_mismatched_or_missing(tmp_path):
    world = SyntheticGPU(noise=0.0)
    plan = expand_grid(*GRID)
    _shard_sweep(tmp_path / "a", plan.configs[:2], world)
    _shard_sweep(tmp_path / "b", plan.configs[2:4], world)
    m = json.loads((tmp_path / "b" / res.MANIFEST).read_text())
    res.write_json(tmp_path / "b" / res.MANIFEST, {**m, "max_new_tokens": 64})
    with pytest.raises(UserError, match="other settings"):
        mg.merge([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "out"))
    with pytest.raises(UserError, match="no such directory"):
        mg.merge([str(tmp_path / "a"), str(tmp_path / "nope")], str(tmp_path / "out"))
    with pytest.raises(UserError, match="at least two"):
        mg.merge([str(tmp_path / "a")], str(tmp_path / "out"))
    assert not (tmp_path / "out" / res.RESULTS).exists()


def test_replayed_search_copies_only_what_it_asks_for(tmp_path):
    plan = expand_grid(*GRID)
    world = SyntheticGPU(noise=0.0)
    _shard_sweep(tmp_path / "grid", plan.configs, world)
    grid_rows = res.read_rows(tmp_path / "grid")
    argv = ["--fixture", "trained", "--steps", "1,2,3,5", "--topk", "1,2", "--draft-tokens", "2,4,8",
            "--batch-sizes", "1,8", "--search", "--replay", str(tmp_path / "grid"), "--out", str(tmp_path / "s")]
    assert cli.main(argv) == 0
    rows = res.read_rows(tmp_path / "s")
    search = json.loads((tmp_path / "s" / res.SEARCH).read_text())
    assert search["replayed_from"] == str(tmp_path / "grid")
    ran = {r["config"] for r in rows}
    assert ran == set(search["design"]) | set(search["chosen"])
    assert len(ran) < len(plan.configs)  # the point of the search: fewer runs than the grid
    by_key = {(r["config"], r["batch_size"]): r["tok_s"] for r in grid_rows}
    assert all(by_key[(r["config"], r["batch_size"])] == r["tok_s"] for r in rows)  # copied, not re-measured


def test_replay_notes_the_flags_it_does_not_apply(tmp_path, capsys):
    plan = expand_grid(*GRID)
    _shard_sweep(tmp_path / "grid", plan.configs, SyntheticGPU(noise=0.0))
    had = res.read_manifest(tmp_path / "grid")
    argv = ["--fixture", "trained", "--steps", "1,2,3,5", "--topk", "1,2", "--draft-tokens", "2,4,8",
            "--search", "--replay", str(tmp_path / "grid")]
    assert cli.main(argv + ["--batch-sizes", "1,8", "--max-new-tokens", str(had["max_new_tokens"]),
                            "--out", str(tmp_path / "same")]) == 0
    assert "not applied" not in capsys.readouterr().err  # the grid's own settings: nothing to say
    assert cli.main(argv + ["--batch-sizes", "1,8", "--max-new-tokens", str(had["max_new_tokens"] + 7),
                            "--out", str(tmp_path / "other")]) == 0
    err = capsys.readouterr().err
    assert f"--max-new-tokens {had['max_new_tokens'] + 7} (the grid ran {had['max_new_tokens']})" in err
    assert "--batch-sizes" not in err
    assert cli.main(argv + ["--out", str(tmp_path / "untyped")]) == 0  # defaults that differ were not given
    assert "not applied" not in capsys.readouterr().err
    assert cli.main(argv + ["--max-new", "9", "--out", str(tmp_path / "abbrev")]) == 0  # argparse's abbreviation
    assert "--max-new-tokens 9 (the grid ran" in capsys.readouterr().err


def test_replay_and_shard_misuse_is_one_line(tmp_path):
    with pytest.raises(UserError, match="needs --search"):
        cli.main(["--fixture", "trained", "--replay", str(tmp_path), "--out", str(tmp_path / "o")])
    with pytest.raises(UserError, match="cannot be combined"):
        cli.main(["--fixture", "trained", "--search", "--shard", "0/2", "--out", str(tmp_path / "o")])
    with pytest.raises(UserError, match="no sweep.json|no results.jsonl|no such directory"):
        cli.main(["--fixture", "trained", "--search", "--replay", str(tmp_path / "none"), "--out", str(tmp_path / "o")])


def test_replayed_search_is_compared_with_the_whole_grid(tmp_path):
    plan = expand_grid(*GRID)
    world = SyntheticGPU(noise=0.0)
    _shard_sweep(tmp_path / "grid", plan.configs, world)
    argv = ["--fixture", "trained", "--steps", "1,2,3,5", "--topk", "1,2", "--draft-tokens", "2,4,8",
            "--batch-sizes", "1,8", "--search", "--search-budget", "4", "--replay", str(tmp_path / "grid"),
            "--out", str(tmp_path / "s")]
    assert cli.main(argv) == 0
    search = json.loads((tmp_path / "s" / res.SEARCH).read_text())
    grid = res.latest_rows(res.read_rows(tmp_path / "grid")).values()
    assert {(v["batch_size"], v["kind"]) for v in search["versus_grid"]} == {(b, k) for b in (1, 8)
                                                                          for k in ("overall", "speculative")}
    for v in search["versus_grid"]:
        pool = [r for r in grid if r["batch_size"] == v["batch_size"] and (v["kind"] == "overall" or r["spec"])]
        best = max(pool, key=lambda r: r["tok_s"])
        assert v["grid_best"] == best["config"]
        picked = next(r for r in pool if r["config"] == v["search_pick"])
        assert v["ratio"] == pytest.approx(picked["tok_s"] / best["tok_s"])
        assert v["within_3pct"] == (v["ratio"] >= 0.97)
    outside = [r for r in grid if r["spec"] and r["config"] not in search["design"]]
    err = search["model_error_on_grid"]
    assert err["rows"] == len(outside) and 0 <= err["median_abs_error"] <= err["max_abs_error"]
    md = (tmp_path / "s" / "summary.md").read_text()
    assert "Against the whole grid" in md and "outside the design" in md


def test_versus_grid_flags_a_pick_more_than_3_percent_short():
    from sglang_patches.offline.sweep.search import versus_grid

    def row(name, tok, spec=True):
        return {"config": name, "batch_size": 1, "status": "ok", "tok_s": tok,
                "spec": {"steps": 1, "topk": 1, "draft_tokens": 2} if spec else None}

    grid = [row("baseline", 100.0, spec=False), row("a", 120.0), row("b", 150.0)]
    search = [row("baseline", 101.0, spec=False), row("a", 125.0)]  # its own measurements
    vs = {v["kind"]: v for v in versus_grid(search, grid)}
    assert vs["speculative"]["search_pick"] == "a" and vs["speculative"]["grid_best"] == "b"
    assert vs["speculative"]["ratio"] == pytest.approx(0.8) and not vs["speculative"]["within_3pct"]


def test_search_budget_below_one_is_one_line(tmp_path):
    with pytest.raises(UserError, match="--search-budget 0"):
        cli.main(["--fixture", "trained", "--search", "--search-budget", "0", "--out", str(tmp_path / "o")])
