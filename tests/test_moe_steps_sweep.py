"""The pure parts of benchmarks/moe_steps_sweep.py on CPU: the profiles' accept lengths, the sweep and
rate-check command lines (parsed by the real sweep / SGLang 0.5.17 parsers), realised vs requested
rates, and summary.json from runs' folders (rows written with the sweep's own results module)."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import moe_steps_sweep as mss  # noqa: E402
from sglang_patches.offline.fixtures import FixturePaths  # noqa: E402
from sglang_patches.vocab.rates import accept_length  # noqa: E402
from sglang_patches.server.simulate.sampler import ChainSampler  # noqa: E402
from sglang_patches.offline.sweep import results as res  # noqa: E402
from sglang_patches.vocab.schema import make_record  # noqa: E402


def test_profiles_give_the_issue_accept_lengths_and_decay():
    for name, want in mss.TARGET_ACCEPT_3_1_4.items():
        rates = mss.PROFILES[name]
        assert abs(accept_length(rates[:3]) - want) < 0.05, (name, accept_length(rates[:3]))
        assert all(a > b for a, b in zip(rates, rates[1:])) and len(rates) == max(mss.STEPS)


def test_sweep_command_is_a_valid_sweep_invocation(tmp_path):
    from sglang_patches.offline.sweep.cli import build_parser

    cmd = mss.sweep_command("weak", str(tmp_path / "s"), resume=True)
    assert cmd[1:4] == ["-m", "sglang_patches", "sweep"]
    ns = build_parser().parse_args(cmd[4:])
    assert ns.fixture == "qwen3-moe-shape" and ns.steps == "1,2,3,5" and ns.topk == "1"
    assert ns.batch_sizes == "1,8" and ns.resume and ns.simulate_acceptance == "0.52,0.42,0.35,0.3,0.25"
    assert ns.extra_server_args == "--disable-prefill-cuda-graph"
    with pytest.raises(Exception, match="profile"):
        mss.profile_rates("medium")


def test_rate_check_flags_parse_with_sglang_and_the_launcher():
    pytest.importorskip("sglang")
    from sglang.srt.server_args import ServerArgs

    from sglang_patches.launch_args import split_overlay_args

    paths = FixturePaths("qwen3-moe-shape", Path("/fx"), Path("/fx/t"), Path("/fx/d"), "dummy")
    flags = mss.rate_check_flags(paths, mss.PROFILES["strong"], 3, 64, "/x/c.jsonl")
    ns, rest = split_overlay_args(flags)
    assert ns.simulate_acceptance == "0.91,0.86,0.8" and ns.timing_log == "/x/c.jsonl"
    p = argparse.ArgumentParser()
    ServerArgs.add_cli_args(p)
    sg = p.parse_args(rest)
    assert sg.speculative_num_steps == 3 and sg.speculative_num_draft_tokens == 4 and sg.speculative_eagle_topk == 1
    assert sg.cuda_graph_bs_decode == [1, 64] and sg.max_running_requests == 64
    assert not sg.disable_overlap_schedule
    _, rest = split_overlay_args(mss.rate_check_flags(paths, mss.PROFILES["weak"], 5, 64, "/x/c.jsonl", overlap=False))
    assert p.parse_args(rest).disable_overlap_schedule


def _decode(accepted, cycle=0, simulated=True):
    return make_record(cycle=cycle, t=1.7e9 + cycle, rank=0, kind="decode", bs=len(accepted), steps=3, topk=1,
                       draft_tokens=4, accepted=accepted, draft_ms=1.0, verify_ms=5.0, extend_ms=0.5,
                       cycle_ms=7.0, host_gap_ms=0.1, simulated=simulated)


def test_realised_rates_from_sampled_records_match_within_tolerance():
    rates = [0.8, 0.7, 0.6]
    s = ChainSampler(rates, 3, "cpu", seed=99)
    recs = [_decode(s.draw(64).tolist(), cycle=c) for c in range(400)]  # 25,600 request-cycles
    out = mss.realised_rates(recs, rates)
    assert out["request_cycles"] == 25600 and out["every_record_flagged_simulated"]
    assert out["within_tolerance"] and out["max_abs_error"] < mss.TOLERANCE
    assert [p["reached"] for p in out["positions"]][0] == 25600
    wrong = mss.realised_rates(recs, [0.8, 0.7, 0.5])  # a sampler drawing other rates fails the check
    assert not wrong["within_tolerance"] and wrong["max_abs_error"] > 0.05
    few = mss.realised_rates(recs[:10], rates)   # 640 < 2000 request-cycles: never "within"
    assert not few["within_tolerance"] and not mss.enough_samples(few, 0.005)
    # 25,600 request-cycles: position 2 reached ~14,300 times, se(0.6) ~0.0041 <= 0.005
    assert mss.enough_samples(out, 0.005) and not mss.enough_samples(out, 0.003)


def _row(cfg, bs, tok_s, steps=None, verify_share=None, accept=None):
    return {"schema": 1, "config": cfg, "batch_size": bs, "status": "ok", "tok_s": tok_s,
            "spec": None if steps is None else {"steps": steps, "topk": 1, "draft_tokens": steps + 1},
            "accept_length": accept, "phase_shares": None if steps is None else
            {"draft": 0.1, "verify": verify_share, "extend": 0.05, "cycle": 1.0},
            "phases_p50_ms": None if steps is None else {"verify": 6.6, "cycle": 8.0}, "cond_rates": None}


def test_summarize_best_configs_pattern_and_rate_check(tmp_path):
    run = tmp_path / "run"
    for name, toks in (("strong", {1: 150.0, 2: 170.0, 3: 180.0, 5: 160.0}),
                       ("weak", {1: 100.0, 2: 95.0, 3: 90.0, 5: 80.0})):
        d = run / f"sweep-{name}"
        d.mkdir(parents=True)
        res.append_row(d, _row("baseline", 1, 100.0))
        for s, t in toks.items():
            res.append_row(d, _row(f"s{s}_k1_n{s + 1}", 1, t, steps=s, verify_share=0.9, accept=1.5))
        res.append_row(d, {**_row("s5_k1_n6", 8, 0.0, steps=5), "status": "failed", "reason": "OOM"})
    (run / "rates-strong.json").write_text(json.dumps({"request_cycles": 24000, "max_abs_error": 0.006,
                                                       "within_tolerance": True}))
    vc = tmp_path / "vc"
    vc.mkdir()
    (vc / "summary.json").write_text(json.dumps({"verify_over_step_moe": {"1": {"4": 1.55}},
                                                 "verify_over_step_dense": {"1": {"4": 1.05}}}))
    s = mss.summarize([str(run)], [str(vc)])
    assert s["best_config_strong_bs1"]["config"] == "s3_k1_n4" and s["best_config_strong_bs1"]["speedup"] == 1.8
    assert s["best_config_weak_bs1"]["config"] == "s1_k1_n2" and s["best_config_weak_bs1"]["speedup"] == 1.0
    assert s["best_config_weak_bs8"] is None and s["verify_bound_pattern_strong_bs8"] is None
    pat = s["verify_bound_pattern_weak_bs1"]
    assert pat["fewer_steps_better"] and pat["verify_dominates"] and pat["best_steps"] == 1
    assert not s["verify_bound_pattern_strong_bs1"]["fewer_steps_better"]
    assert s["rate_max_abs_error"] == 0.006 and s["verify_over_step_moe"] == {"1": {"4": 1.55}}
    assert s["profiles"]["strong"]["accept_length_at_3_1_4"] == pytest.approx(3.32, abs=0.01)
    text = mss.format_summary(s)
    assert "s3_k1_n4" in text and "x1.80" in text and "weak bs 8" in text
    empty = mss.summarize([str(tmp_path / "nothing")], None)
    assert empty["rate_max_abs_error"] is None and empty["best_config_strong_bs1"] is None
    # one verify_cost folder per fixture (two GPUs side by side): tables joined; the same table twice refused
    moe_only, dense_only = tmp_path / "vm", tmp_path / "vd"
    for d, moe, dense in ((moe_only, {"1": {"2": 1.4}}, None), (dense_only, None, {"1": {"2": 1.1}})):
        d.mkdir()
        (d / "summary.json").write_text(json.dumps({"verify_over_step_moe": moe, "verify_over_step_dense": dense}))
    both = mss.summarize([str(run)], [str(moe_only), str(dense_only)])
    assert both["verify_over_step_moe"] == {"1": {"2": 1.4}} and both["verify_over_step_dense"] == {"1": {"2": 1.1}}
    with pytest.raises(Exception, match="measured in two folders"):
        mss.summarize([str(run)], [str(moe_only), str(moe_only)])
    t6 = tmp_path / "v6"  # a second call that measured other draft-token counts of the same fixture
    t6.mkdir()
    (t6 / "summary.json").write_text(json.dumps({"verify_over_step_moe": {"1": {"2": None, "6": 1.7}}}))
    joined = mss.summarize([str(run)], [str(moe_only), str(t6)])["verify_over_step_moe"]
    assert joined == {"1": {"2": 1.4, "6": 1.7}}


def test_cli_refusals_one_line(tmp_path):
    def run(*a):
        return subprocess.run([sys.executable, str(REPO / "benchmarks" / "moe_steps_sweep.py"), *a],
                              capture_output=True, text=True, cwd=REPO, timeout=120)
    r = run("summarize", "--runs", str(tmp_path / "none"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "no such directory" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "r").mkdir()
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "summary.json").write_text("{}")
    r = run("summarize", "--runs", str(tmp_path / "r"), "--out", str(tmp_path / "v"), "--verify-cost", str(tmp_path / "v"))
    assert r.returncode == 2 and "is an input" in r.stderr and (tmp_path / "v" / "summary.json").read_text() == "{}"
    into_run = run("summarize", "--runs", str(tmp_path / "r"), "--out", str(tmp_path / "r"))  # reads no summary.json
    assert into_run.returncode == 0 and (tmp_path / "r" / "summary.json").is_file()
    r = run("summarize", "--runs", str(tmp_path / "r"), "--out", str(tmp_path / "o"), "--verify-cost", str(tmp_path))
    assert r.returncode == 2 and "no summary.json" in r.stderr
    r = run("rates", "--out", str(tmp_path / "x"), "--target-se", "0.5")
    assert r.returncode == 2 and "--target-se" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    ok = run("summarize", "--runs", str(tmp_path / "r"), "--out", str(tmp_path / "o"))
    assert ok.returncode == 0 and json.loads((tmp_path / "o" / "summary.json").read_text())["rate_max_abs_error"] is None
    again = run("summarize", "--runs", str(tmp_path / "r"), "--out", str(tmp_path / "o"))
    assert again.returncode == 2 and "--force" in again.stderr and "--update" in again.stderr
    (tmp_path / "o" / "summary.json").write_text("[1, 2]")   # hand-edited into something else
    r = run("summarize", "--runs", str(tmp_path / "r"), "--out", str(tmp_path / "o"), "--update")
    assert r.returncode == 2 and "not a summary object" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert (tmp_path / "o" / "summary.json").read_text() == "[1, 2]"
    (tmp_path / "o" / "summary.json").write_text(json.dumps({   # odd pieces show as '-', no traceback
        "profiles": {"strong": {"sweep": {"1": {"s1_k1_n2": {"steps": 1, "tok_s": 9.0}, "x": None}}}},
        "rate_check": {"strong": {"max_abs_error": 0.01}, "weak": "n/a"},
        "verify_cell_source": {"verify_over_step_moe": ["a"]}}))
    (tmp_path / "vc").mkdir()
    (tmp_path / "vc" / "summary.json").write_text(json.dumps({"verify_over_step_moe": {"1": {"2": 1.5}, "4": None}}))
    r = run("summarize", "--runs", str(tmp_path / "r"), "--out", str(tmp_path / "o"), "--update",
            "--verify-cost", str(tmp_path / "vc"))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "s1_k1_n2" in r.stdout and "rate check strong: - request-cycles" in r.stdout
    folded = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert folded["verify_cell_source"]["verify_over_step_moe"] == {"1": {"2": str(tmp_path / "vc")}}


def test_update_keeps_earlier_results_and_notes():
    old = {"notes": ["n"], "rate_max_abs_error": 0.018, "best_config_strong_bs1": {"config": "s5_k1_n6"},
           "best_config_weak_bs1": None, "rate_check": {"strong": {"max_abs_error": 0.018, "request_cycles": 2156}},
           "profiles": {"strong": {"rates": [0.91], "sweep": {"1": {}}}, "weak": {"rates": [0.52]}}}
    new = {"rate_max_abs_error": 0.006, "best_config_strong_bs1": None, "best_config_weak_bs1": {"config": "s1_k1_n2"},
           "rate_check": {"weak": {"max_abs_error": 0.006}, "strong": {"max_abs_error": 0.004, "request_cycles": 18000}},
           "profiles": {"strong": {"rates": [0.91]}, "weak": {"rates": [0.52], "sweep": {"1": {"x": 1}}}}}
    u = mss.update_summary(old, new)
    assert u["notes"] == ["n"] and u["best_config_strong_bs1"] == {"config": "s5_k1_n6"}
    assert u["best_config_weak_bs1"] == {"config": "s1_k1_n2"}
    assert u["rate_check"]["strong"]["request_cycles"] == 18000 and u["rate_max_abs_error"] == 0.006
    assert u["profiles"]["strong"]["sweep"] == {"1": {}} and u["profiles"]["weak"]["sweep"] == {"1": {"x": 1}}


def test_update_merges_verify_tables_cell_by_cell():
    # a later verify_cost.py run of other draft tokens must add its cells, not drop the earlier ones
    old = {"verify_over_step_moe": {"1": {"2": None, "4": 1.9, "8": 1.91}, "4": {"4": 0.34}},
           "verify_cost_dirs": {"verify_over_step_moe": ["a"]}}
    new = {"verify_over_step_moe": {"1": {"2": 1.66, "4": None}, "4": {"2": 1.15, "4": 1.12}, "16": {"2": 1.08}},
           "verify_over_step_dense": None, "verify_cost_dirs": {"verify_over_step_moe": ["b"]}}
    u = mss.update_summary(old, new)
    assert u["verify_over_step_moe"] == {"1": {"2": 1.66, "4": 1.9, "8": 1.91}, "4": {"4": 1.12, "2": 1.15},
                                         "16": {"2": 1.08}}
    assert u["verify_cost_dirs"] == {"verify_over_step_moe": ["a", "b"]}
    assert "verify_over_step_dense" not in u
    # odd earlier summaries (hand-edited) do not crash the fold
    odd = {"verify_over_step_moe": {"1": None, "4": {"4": 0.3}}, "verify_cost_dirs": {"verify_over_step_moe": None}}
    u = mss.update_summary(odd, {"verify_over_step_moe": {"1": {"2": 1.6}, "16": None},
                                 "verify_cost_dirs": {"verify_over_step_moe": "b", "verify_over_step_dense": ["c"]}})
    assert u["verify_over_step_moe"] == {"1": {"2": 1.6}, "4": {"4": 0.3}}
    assert u["verify_cost_dirs"] == {"verify_over_step_moe": [], "verify_over_step_dense": ["c"]}


def test_summarize_records_which_folder_measured_each_cell(tmp_path):
    for name, t in (("a", "2"), ("b", "6")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(
            {"verify_over_step_moe": {"1": {t: 1.5, "4": None}}, "verify_over_step_dense": None}))
    s = mss.summarize([], [str(tmp_path / "a"), str(tmp_path / "b")])
    assert s["verify_over_step_moe"] == {"1": {"2": 1.5, "4": None, "6": 1.5}}
    assert s["verify_cell_source"]["verify_over_step_moe"] == {"1": {"2": str(tmp_path / "a"), "6": str(tmp_path / "b")}}
    later = mss.update_summary(s, {"verify_over_step_moe": {"1": {"4": 1.7}},
                                   "verify_cell_source": {"verify_over_step_moe": {"1": {"4": "c"}}}})
    assert later["verify_cell_source"]["verify_over_step_moe"]["1"] == {"2": str(tmp_path / "a"),
                                                                       "6": str(tmp_path / "b"), "4": "c"}


@pytest.mark.parametrize("name", ["x1_moe_verify_cost.txt", "x1_moe_verify_cost_b.txt", "x2_moe_verify_cost.txt",
                                  "x2_moe_steps_sweep.txt", "x1_moe_steps_strong.txt", "x1_moe_steps_weak.txt",
                                  "x1_moe_rates.txt", "x2_moe_weak_rates.txt", "x1_t8b_build_vc6.txt"])
def test_moe_plan_files_parse(name, tmp_path):
    """Every command of the MoE plan files parses with its script's own parser (a typo costs a GPU call)."""
    import shlex

    import run_parallel
    import verify_cost

    lines = (REPO / "benchmarks" / "gpu_plans" / name).read_text().splitlines()
    jobs = [run_parallel.parse_job(lines[i + 1]) for i, ln in enumerate(lines) if ln == "--job"]
    assert jobs and all(ln.startswith("--deadline=") for ln in lines[:1])
    assert float(lines[0].split("=")[1]) <= 560  # leaves the bounded run time to pack the results
    gpus = [g for job in jobs for g in job["gpus"].split(",")]
    assert len(gpus) == len(set(gpus))  # jobs never share a GPU
    ports = []
    for job in jobs:
        for cmd in job["cmds"]:
            argv = shlex.split(cmd.replace("{out}", str(tmp_path / job["name"])))
            if argv[:2] == ["python", "benchmarks/verify_cost.py"]:
                args = verify_cost.parse_args(argv[2:])
                ports.append(args.port)
                assert args.deadline < float(lines[0].split("=")[1])
            elif argv[:2] == ["python", "benchmarks/moe_steps_sweep.py"]:
                mss.parse_args(argv[2:])
            elif argv[:2] == ["python", "-c"]:   # a fixture build before the measurement
                assert argv[2].startswith("from sglang_patches.offline.fixtures import ensure_fixture"), cmd
            else:
                assert argv[:3] == ["python", "-m", "pytest"] and "tests/test_simulate.py" in argv, cmd
    assert len(ports) == len(set(ports))  # side-by-side jobs must not share a port
