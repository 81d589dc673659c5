"""benchmarks/serve_checks.py on CPU: bad input is refused before any server starts (one line, exit 2,
nothing written), and --summary folds a figure's part files into the summary keys its results README names,
null where a part did not run."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run(*args):
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / "serve_checks.py"), *args], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=120)


def test_an_unknown_part_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    r = run("--out", str(out), "--parts", "timing,warp")
    err = r.stderr.strip()
    assert r.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "unknown part warp" in err and "timing, flagbug, plugin, fp8" in err
    assert not out.exists()


def test_summary_wants_existing_folders(tmp_path):
    r = run("--summary", "kimi-family", "--out", str(tmp_path))
    err = r.stderr.strip()
    assert r.returncode == 2 and len(err.splitlines()) == 1 and "LLAMA_DIR,MLA_DIR" in err, err
    r = run("--summary", "kimi-family", "--out", f"{tmp_path},{tmp_path},{tmp_path}")  # not pairs
    assert r.returncode == 2 and "LLAMA_DIR,MLA_DIR" in r.stderr, r.stderr


def _part(folder: Path, name: str, data: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(data))


def test_kimi_summary_reads_each_head_and_leaves_what_did_not_run_null(tmp_path):
    llama, mla = tmp_path / "llama", tmp_path / "mla"
    _part(llama, "timing", {"records_equal_spec_verify_ct": True, "c1": {"phases_share_of_cycle_p50": 0.998}})
    _part(llama, "flagbug", {"refused_preflight": True, "caught_in_server": True})
    _part(mla, "timing", {"records_equal_spec_verify_ct": False, "c1": {"phases_share_of_cycle_p50": 0.97}})
    _part(mla, "flagbug", {"refused_preflight": False, "caught_in_server": True})
    r = run("--summary", "kimi-family", "--out", f"{llama},{mla}")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["records_equal_spec_verify_ct_llama_head"] is True and s["records_equal_spec_verify_ct_mla_head"] is False
    assert (s["phase_share_p50_llama_head"], s["phase_share_p50_mla_head"]) == (0.998, 0.97)
    assert s["flag_bug_refused_preflight"] is False  # one head not refused: not refused
    assert s["fp8_draft_speedup_bs1_llama_head"] is None and s["verify_over_decode_bs1_T4"] is None


def test_a_later_run_fills_only_what_the_earlier_left_null_and_says_which_run(tmp_path):
    first, later = [tmp_path / "a" / h for h in ("llama", "mla")], [tmp_path / "b" / h for h in ("llama", "mla")]
    _part(first[0], "timing", {"records_equal_spec_verify_ct": True, "c1": {"phases_share_of_cycle_p50": 0.998}})
    _part(first[0], "versions", {"versions": {"sglang": "0.5.17"}})
    _part(later[0], "timing", {"records_equal_spec_verify_ct": False, "c1": {"phases_share_of_cycle_p50": 0.5}})
    _part(later[0], "fp8", {"draft_speedup_c1": 1.88})
    _part(later[0], "versions", {"versions": {"sglang": "0.5.23"}})
    _part(later[1], "timing", {"records_equal_spec_verify_ct": True, "c1": {"phases_share_of_cycle_p50": 0.97}})
    _part(later[0], "verify_cost", {"verify_over_step_by_fixture": {"kimi-k2-mla": {"16": {"8": 3.1}}},
                                     "moe": {"kimi-k2-mla": {"expected_distinct_experts_per_layer_bs1": {"4": 15.0}}}})
    first[1].mkdir(parents=True)
    r = run("--summary", "kimi-family", "--out", ",".join(map(str, first + later)))
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["phase_share_p50_llama_head"] == 0.998 and s["records_equal_spec_verify_ct_llama_head"] is True
    assert s["fp8_draft_speedup_bs1_llama_head"] == 1.88 and s["phase_share_p50_mla_head"] == 0.97
    assert s["verify_over_decode_bs16_T8"] == 3.1 and s["verify_over_decode_bs1_T8"] is None
    assert s["distinct_experts_per_layer_bs1_T4"] is None  # an expected value is not a measurement
    assert s["key_runs"]["phase_share_p50_llama_head"] == f"{first[0]},{first[1]} (sglang 0.5.17)"
    assert s["key_runs"]["fp8_draft_speedup_bs1_llama_head"] == f"{later[0]},{later[1]} (sglang 0.5.23)"
    assert "distinct_experts_per_layer_bs1_T1" not in s["key_runs"]
    # the recorder's counts (moe_expert_spread.py's summary) are measurements: they land, with their routing
    _part(later[0], "expert_spread", {"routing": "uniform", "rows": [{"tokens": 1, "distinct_mean": 8.0},
                                                                       {"tokens": 4, "distinct_mean": 14.9},
                                                                       {"tokens": 8, "error": "not started"}]})
    s = json.loads(run("--summary", "kimi-family", "--out", ",".join(map(str, first + later))).stdout)
    assert (s["distinct_experts_per_layer_bs1_T1"], s["distinct_experts_per_layer_bs1_T4"]) == (8.0, 14.9)
    assert s["distinct_experts_per_layer_bs1_T8"] is None and s["distinct_experts_routing"] == "uniform"


def test_0523_summary_has_every_key_the_figure_names(tmp_path):
    _part(tmp_path, "timing", {"ok": True, "records_equal_spec_verify_ct": True, "c1": {"phases_share_of_cycle_p50": 1.0}})
    r = run("--summary", "sglang-0523", "--out", str(tmp_path))
    s = json.loads(r.stdout)
    assert s["main_job_ok"] is True and s["flag_bug_caught_in_server"] is None
    for key in ("fp8_accept_ratio_trained_8b_s3", "adaptive_records_steps_match_fraction", "overhead_ratio_bs1",
                "overhead_ratio_bs16", "plain_tok_s_0523_over_0517_c1", "eagle3_s3_tok_s_0523_over_0517_c1"):
        assert key in s


def _bench_export(folder, version, build, tok_s, steps_records=0):
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps({
        "sglang_version": version, "fixture_builds": [build] if build else [], "tok_s": tok_s,
        "records_steps_match_fraction": 1.0 if steps_records else None, "records_steps_match_records": steps_records}))


def test_0523_summary_pairs_the_two_versions_on_one_build_only(tmp_path):
    cells = {"plain_in_bs1": 170.0, "plain_in_bs8": 1300.0, "s3_in_bs1": 240.0, "s3_in_bs8": 1500.0}
    _bench_export(tmp_path / "p17", "0.5.17", "b1", cells)
    _bench_export(tmp_path / "p23", "0.5.23", "b1", {**cells, "plain_in_bs1": 187.0, "s3_in_bs8": None},
                  steps_records=50)
    s = json.loads(run("--summary", "sglang-0523", "--out", f"{tmp_path / 'p17'},{tmp_path / 'p23'}").stdout)
    assert s["plain_tok_s_0523_over_0517_c1"] == 1.1 and s["eagle3_s3_tok_s_0523_over_0517_c1"] == 1.0
    assert s["plain_tok_s_0523_over_0517_c8"] == 1.0
    assert s["eagle3_s3_tok_s_0523_over_0517_c8"] is None  # a cell one side did not measure
    assert s["adaptive_records_steps_match_fraction"] == 1.0  # only the 0.5.23 export had adaptive records
    (tmp_path / "p23" / "summary.json").unlink()
    _bench_export(tmp_path / "q23", "0.5.23", "b2", cells, steps_records=50)  # another trained-8b build
    s = json.loads(run("--summary", "sglang-0523", "--out", f"{tmp_path / 'p17'},{tmp_path / 'q23'}").stdout)
    assert s["plain_tok_s_0523_over_0517_c1"] is None and "one and the same build" in s["pair_left_out"]
    assert s["adaptive_records_steps_match_fraction"] == 1.0  # a 0.5.23 measure of its own, not a ratio
    _bench_export(tmp_path / "n17", "0.5.17", None, cells)  # builds unknown on both sides: no ratio either
    _bench_export(tmp_path / "n23", "0.5.23", None, cells)
    s = json.loads(run("--summary", "sglang-0523", "--out", f"{tmp_path / 'n17'},{tmp_path / 'n23'}").stdout)
    assert s["plain_tok_s_0523_over_0517_c1"] is None and "pair_left_out" in s


def test_the_counters_pass_reads_the_records_of_its_window(tmp_path, monkeypatch):
    """No server: `generate` is replaced by one that writes the decode records a server would (two cycles
    per request, each with its request-cycle) and answers with SGLang's meta_info counters."""
    import time

    sys.path.insert(0, str(REPO / "benchmarks"))
    import timing_log_check as tlc

    import sglang_patches.offline.sweep.load as load

    log = tmp_path / "cycles.jsonl"
    log.write_text(json.dumps({"schema": "sglang_patches.spec_timing", "kind": "decode", "rank": 0, "t": 1.0,
                               "cycle": 0, "accepted": [3], "draft_ms": 9.0}) + "\n")  # before the window
    cycle = iter(range(1, 100))

    def generate(url, prompt, max_new):
        with log.open("a") as fh:
            for ms in (1.0, 3.0):
                fh.write(json.dumps({"schema": "sglang_patches.spec_timing", "kind": "decode", "rank": 0,
                                     "t": time.time(), "cycle": next(cycle), "accepted": [1], "draft_ms": ms,
                                     "verify_ms": 2 * ms, "extend_ms": 0.5, "cycle_ms": 3 * ms + 1}) + "\n")
        return {"spec_verify_ct": 2, "spec_accept_length": 2.0 if prompt == "a" else 3.0}

    monkeypatch.setattr(load, "generate", generate)
    monkeypatch.setattr(tlc, "FLUSH_WAIT_S", 0.0)
    c = tlc.counters_pass("http://x", str(log), ["a", "b"], n=2, in_flight=1)
    assert c["records_equal_verify_ct"] and c["record_request_cycles"] == c["spec_verify_ct_sum"] == 4
    assert (c["draft_ms_p50"], c["verify_ms_p50"], c["cycle_ms_p50"]) == (2.0, 4.0, 7.0)  # the old record left out
    assert c["accept_length_mean"] == 2.5 and c["phases_within_cycle_fraction"] == 1.0


KIMI = REPO / "benchmarks" / "results" / "2026-12-06-kimi-family" / "llama_head"


def test_the_advise_part_refuses_a_missing_or_odd_verify_cost_before_any_server(tmp_path):
    out = tmp_path / "out"
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    for extra, said in (([], "needs --verify-cost SUMMARY:FIXTURE"),
                        (["--verify-cost", f"{bad}:kimi-k2-mla"], "not a verify_cost.py summary.json"),
                        (["--verify-cost", f"{KIMI / 'verify_cost.json'}:llama3-8b"], "no fixture 'llama3-8b'"),
                        (["--verify-cost", f"{KIMI / 'verify_cost.json'}:kimi-k2-mla", "--advise-concurrency", "0"],
                         "give 1 or more")):
        r = run("--out", str(out), "--parts", "advise", *extra)
        err = r.stderr.strip()
        assert r.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err and said in err, err
    assert not out.exists()


def test_advise_both_ways_prices_against_every_measured_plain_step_and_prices_verify_both_ways(tmp_path, monkeypatch):
    """The part's CPU half on the Kimi family run's own files: its timing log (bs 1 and 8, simulated acceptance)
    and the verify / plain step ratios measured on that target. Batch 1 takes its measured step, batch 8 one
    interpolated between batch 4 and 16 (5.92 ms); at these batch sizes the measured ratios keep the logged chain."""
    import lzma

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from serve_checks import advise_both_ways

    log = tmp_path / "cycles.jsonl"
    log.write_bytes(lzma.decompress((KIMI / "cycles.jsonl.xz").read_bytes()))
    vc = f"{KIMI / 'verify_cost.json'}:kimi-k2-mla"
    res = advise_both_ways(log, vc)
    assert res["baseline_steps_ms"] == {"1": 4.0905, "4": 5.7508, "16": 6.2631}  # the summary's three plain rows
    assert res["flat"]["rc"] == 0 and res["verify_cost"]["rc"] == 0
    used = next(ln for ln in res["flat"]["lines"] if ln.startswith("plain decode step used"))
    # batch 3-7 (1-4 cycles each, the batch ramping from 1 to 8) are left out of the costs
    assert used == "plain decode step used: batch 1: 4.09 ms (measured), batch 8: 5.92 ms (interpolated between batch 4 and 16)"
    assert res["flat"]["recommended"] == res["verify_cost"]["recommended"] == "s3_k1_n4"
    assert res["recommendation_changed"] is False
    flat, priced = res["flat"]["x_plain"], res["verify_cost"]["x_plain"]
    assert flat["s3_k1_n4"] == priced["s3_k1_n4"]  # the logged chain's verify is measured, not priced
    assert priced["s1_k1_n2"] > flat["s1_k1_n2"]  # a shorter verify reads fewer experts: cheaper than held flat


def test_the_advise_server_routes_experts_as_the_verify_cost_summary_did(tmp_path, monkeypatch):
    """The part's server is replaced by one that records how it was started and fails its start (no GPU here):
    the environment it was given is SGLang's uniform-routing switch for a summary measured under uniform
    routing, and nothing for one measured with the model's router."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import serve_checks

    from sglang_patches.compat import current

    started = []

    class NoGpuServer:
        def __init__(self, flags, port, log_path, env=None):
            started.append(env or {})
            self.cmd = ["launch", *flags]

        def start(self):
            raise RuntimeError("no GPU here")

        def stop(self):
            pass

    monkeypatch.setattr("sglang_patches.offline.sweep.server.Server", NoGpuServer)
    model = tmp_path / "vc.json"
    model.write_text(json.dumps({**json.loads((KIMI / "verify_cost.json").read_text()), "routing": "model"}))
    for spec in (f"{KIMI / 'verify_cost.json'}:kimi-k2-mla", f"{model}:kimi-k2-mla"):
        args = argparse.Namespace(fixture="kimi-k2-mla", extra_flags=[], simulate_acceptance=None, port=30000,
                                  advise_concurrency=4, verify_cost=spec)
        res = serve_checks.advise(args, tmp_path / spec[-20:].replace(":", "_").replace("/", "_"), 300)
        assert "no GPU here" in res["error"]
    assert started == [{current().UNIFORM_EXPERTS_ENV.name: "1"}, {}]


def test_advise_both_ways_says_nothing_changed_when_advise_could_not_answer(tmp_path, monkeypatch):
    """An empty log: advise refuses it on both sides; the part writes that down and does not call the
    recommendation changed."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from serve_checks import advise_both_ways

    log = tmp_path / "cycles.jsonl"
    log.write_text("")
    res = advise_both_ways(log, f"{KIMI / 'verify_cost.json'}:kimi-k2-mla")
    assert res["flat"]["rc"] not in (0, None) and res["verify_cost"]["rc"] not in (0, None)
    assert res["recommendation_changed"] is None and res["flat"]["lines"]


def test_a_summary_without_ratio_cells_is_refused_before_any_server(tmp_path):
    vc = json.loads((KIMI / "verify_cost.json").read_text())
    vc["verify_over_step_by_fixture"] = {}  # plain steps kept, the ratios advise prices verify by gone
    path = tmp_path / "vc.json"
    path.write_text(json.dumps(vc))
    r = run("--out", str(tmp_path / "out"), "--parts", "advise", "--verify-cost", f"{path}:kimi-k2-mla")
    err = r.stderr.strip()
    assert r.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def test_0523_summary_takes_the_overhead_pair_of_a_0523_server_only(tmp_path):
    """timing_overhead.json as benchmarks/timing_overhead.py writes it (the fields read here)."""
    run_file = {"env": {"sglang": "0.5.23"},
                "overhead": {"1": {"paired_ratio_median": 0.99518, "paired_ratio_ci95": [0.98500, 1.03586]},
                             "16": {"paired_ratio_median": 0.99079}},
                "steady_decode": {"16": {"ratio": 0.95857}},
                "profile": {"1": {"complete": True, "exit_code": 0}, "16": {"complete": False, "exit_code": 3}}}
    _part(tmp_path / "oh", "timing_overhead", run_file)
    s = json.loads(run("--summary", "sglang-0523", "--out", str(tmp_path / "oh")).stdout)
    assert (s["overhead_ratio_bs1"], s["overhead_ratio_ci95_bs1"]) == (0.9952, [0.985, 1.0359])
    assert s["overhead_ratio_bs16"] == 0.9908 and s["overhead_ratio_ci95_bs16"] is None
    assert s["steady_cycle_off_over_on_bs16"] == 0.9586 and s["steady_cycle_off_over_on_bs1"] is None
    assert s["profile_ok"] is False  # one batch size's profile did not complete
    assert s["key_runs"]["overhead_ratio_bs1"] == f"{tmp_path / 'oh'} (sglang 0.5.23)"
    _part(tmp_path / "old", "timing_overhead", {**run_file, "env": {"sglang": "0.5.17"}})
    s = json.loads(run("--summary", "sglang-0523", "--out", str(tmp_path / "old")).stdout)
    assert s["overhead_ratio_bs1"] is None and s["profile_ok"] is None  # another version's pair is not this figure


def test_the_overhead_pair_keys_each_version_and_says_whether_one_gpu_ran_both(tmp_path):
    def pair(version, gpu, median):
        return {"env": {"sglang": version, "gpus": [gpu]}, "overhead": {"16": {"paired_ratio_median": median,
                                                                             "paired_ratio_ci95": [0.98, 1.01]}},
                "steady_decode": {"1": {"ratio": 0.99}}, "profile": {"1": {"complete": True, "exit_code": 0}}}
    _part(tmp_path / "a", "timing_overhead", pair("0.5.23", "NVIDIA H200", 1.00114))
    _part(tmp_path / "b", "timing_overhead", pair("0.5.17", "NVIDIA H200", 1.00271))
    s = json.loads(run("--summary", "overhead-pair", "--out", f"{tmp_path / 'a'},{tmp_path / 'b'}").stdout)
    assert (s["overhead_ratio_bs16_0517"], s["overhead_ratio_bs16_0523"]) == (1.0027, 1.0011)  # by version, any order
    assert s["overhead_ratio_ci95_bs16_0523"] == [0.98, 1.01] and s["overhead_ratio_bs1_0523"] is None
    assert s["steady_cycle_off_over_on_bs1_0517"] == 0.99 and s["profile_ok_0523"] is True
    assert s["gpu"] == "NVIDIA H200" and s["same_gpu"] is True
    _part(tmp_path / "c", "timing_overhead", pair("0.5.17", "NVIDIA H100 80GB HBM3", 0.99))
    s = json.loads(run("--summary", "overhead-pair", "--out", f"{tmp_path / 'a'},{tmp_path / 'c'}").stdout)
    assert s["same_gpu"] is False and s["gpu"] is None  # two machines: no pair
    assert s["key_runs"]["overhead_ratio_bs16_0523"] == f"{tmp_path / 'a'} (sglang 0.5.23)"
    s = json.loads(run("--summary", "overhead-pair", "--out", str(tmp_path / "a")).stdout)
    assert s["overhead_ratio_bs16_0517"] is None and s["same_gpu"] is False


def test_a_runs_version_is_read_from_run_metas_header_and_from_older_files(tmp_path):
    new, old = tmp_path / "new", tmp_path / "old"
    _part(new, "versions", {"command": "python serve_checks.py", "env": {"sglang": "0.5.23"}})  # run_meta's header
    _part(old, "versions", {"versions": {"sglang": "0.5.17"}})  # written before it
    for folder in (new, old):
        _part(folder, "timing", {"ok": True})
    s = json.loads(run("--summary", "sglang-0523", "--out", f"{new},{old}").stdout)
    assert s["key_runs"]["main_job_ok"] == f"{new} (sglang 0.5.23)"
    s = json.loads(run("--summary", "sglang-0523", "--out", f"{old},{new}").stdout)
    assert s["key_runs"]["main_job_ok"] == f"{old} (sglang 0.5.17)"


def test_the_recorded_gpu_folders_fold_into_their_keys():
    """The folders the figures' READMEs name, as they came back from the GPU machine: fp8_draft_bench's two
    run files (one build, two calls) and their merged summary, verify_cost's summary (step_timing), and the
    Kimi heads' timing parts run without simulated acceptance (the alarm) beside simulated ones (no alarm)."""
    res = REPO / "benchmarks" / "results"
    r = run("--summary", "sglang-0523", "--out", ",".join(str(res / "2026-12-06-sglang-0523-gpu" / f)
                                                          for f in ("fp8-accept", "step-timing")))
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    runs = [json.loads(p.read_text()) for p in sorted((res / "2026-12-06-sglang-0523-gpu" / "fp8-accept").glob("fp8_draft_run_*.json"))]
    assert {r_["fixture_builds"]["trained-8b"] for r_ in runs} == {"726f3aeac6c7f7e3"}  # one build: the ratio pairs
    stock, fp8 = (next(c for r_ in runs for k, c in r_["cases"].items() if k.endswith(cfg)) for cfg in (":stock", ":triton_fp8"))
    want = fp8["accept"]["accept_length_sglang"] / stock["accept"]["accept_length_sglang"]
    assert s["fp8_accept_ratio_trained_8b_s3"] == round(want, 4) and 0.98 < want < 1.0
    assert s["key_runs"]["fp8_accept_ratio_trained_8b_s3"].endswith("fp8-accept (sglang 0.5.23)")
    assert s["step_timing_ok"] is True and abs(s["step_timing_over_wall_bs1"] - 1) < 0.02
    kimi = res / "2026-12-06-kimi-family"
    r = run("--summary", "kimi-family", "--out", f"{kimi / 'llama_head'},{kimi / 'mla_head'},"
                                                 f"{kimi / 'alarm' / 'llama_head'},{kimi / 'alarm' / 'mla_head'}")
    s = json.loads(r.stdout)
    assert s["alarm_fired_llama_head"] is True and s["alarm_fired_mla_head"] is True
    assert "alarm" in s["key_runs"]["alarm_fired_mla_head"]  # the simulated runs before it say nothing either way


def test_the_adaptive_part_serves_what_advise_printed(tmp_path):
    """The adaptive part's second server takes its flags from `advise --adaptive-config --json` run for real
    on a log of mixed batch sizes: the start advise printed (its largest candidate), without repeating
    --speculative-adaptive (the part adds it), and nothing when advise writes no file."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from serve_checks_adaptive import adaptive_config
    from test_adaptive_config import records_from_accepted, two_bucket_log, write_records

    cfg = tmp_path / "advised.json"
    flags, info = adaptive_config(two_bucket_log(tmp_path / "a.jsonl"), cfg)
    assert info["rc"] == 0 and cfg.exists(), info
    written = json.loads(cfg.read_text())
    top = max(s for k, e in written.items() if k != "sglang_patches" for s in e["candidate_steps"])
    assert flags[:2] == ["--speculative-adaptive-config", str(cfg.resolve())] and "--speculative-adaptive" not in flags
    assert flags[flags.index("--speculative-num-steps") + 1] == str(top)
    dead = write_records(tmp_path / "dead.jsonl", records_from_accepted([0] * 400, 1, 3, draft_ms=1.0, verify_ms=6.0))
    flags, info = adaptive_config(dead, tmp_path / "none.json")
    assert flags is None and info["rc"] == 1 and "accepts nothing" in info["lines"][0]


def test_the_committed_summaries_are_what_the_folders_fold_into(tmp_path):
    """Both figures' summary.json against --summary over the folders their READMEs name (keys added by hand
    from files --summary does not read, smoke_* and int4_*, left out); then the adaptive part's switch path
    read again from its returned files, and a copy whose SGLang went on switching after the records stopped."""
    import shutil

    res = REPO / "benchmarks" / "results"
    d = res / "2026-12-06-sglang-0523-gpu"
    names = "run-3,run-4,pair-0.5.17,pair-0.5.23,overhead,fp8-accept,step-timing,step-timing-bs16,adaptive-start"
    kimi = res / "2026-12-06-kimi-family"
    pairs = "llama_head,mla_head,sglang-0523/llama_head,sglang-0523/mla_head,alarm/llama_head,alarm/mla_head"
    for folder, figure, sub in ((d, "sglang-0523", names), (kimi, "kimi-family", pairs)):
        r = run("--summary", figure, "--out", ",".join(str(folder / f) for f in sub.split(",")))
        assert r.returncode == 0, r.stderr
        got, committed = json.loads(r.stdout), json.loads((folder / "summary.json").read_text())
        by_hand = {k for k in committed if k.startswith(("smoke_", "int4_", "flag_bug_caught_in_server_int4",
                                                          "phase_share_p50_int4", "records_equal_spec_verify_ct_int4"))}
        assert {k: v for k, v in committed.items() if k not in by_hand and k != "key_runs"} == \
               {k: v for k, v in got.items() if k != "key_runs"}
    s = json.loads(run("--summary", "sglang-0523", "--out", str(d / "adaptive-start")).stdout)
    assert s["adaptive_started_below_largest"] is True and s["adaptive_part_switch_path_consistent"] is True
    assert s["adaptive_advised_config_served"] is True
    plain = [r for r in json.loads((d / "step-timing-bs16" / "summary.json").read_text())["rows"] if r.get("step_ms")]
    bs16 = json.loads(run("--summary", "sglang-0523", "--out", str(d / "step-timing-bs16")).stdout)
    assert bs16["step_timing_over_wall_bs16"] == round(plain[0]["step_ms"] / plain[0]["step_wall_ms"], 4)
    stuck = tmp_path / "adaptive-start"
    shutil.copytree(d / "adaptive-start", stuck)
    with open(stuck / "server-switches.txt", "a") as f:
        f.write("[2026-12-06 21:59:59] Switch adaptive runtime state: steps 5 -> 7, draft_tokens 6 -> 8\n")
    assert json.loads(run("--summary", "sglang-0523", "--out", str(stuck)).stdout)[
        "adaptive_part_switch_path_consistent"] is False
