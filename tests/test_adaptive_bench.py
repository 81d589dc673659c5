"""benchmarks/adaptive_summary.py (the pure parts of benchmarks/adaptive_bench.py) on CPU.

SGLang's own adaptive machinery runs for real here: its config loader, `AdaptiveSpeculativeParams`
routing and `AdaptiveController` switching. The only stand-in is the worker the controller drives
(its runtime states are GPU attention backends and CUDA graphs): it keeps the steps and writes the
same 'Switch adaptive runtime state' line as EAGLEWorkerV2.apply_runtime_state (checked against
SGLang's source below). Records are then written the right way (steps read after the switch) and
the wrong way (read before it), and the check must tell them apart.
"""
from __future__ import annotations

import inspect
import json
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import adaptive_report  # noqa: E402
import adaptive_summary as asum  # noqa: E402
import adaptive_configs as acfg  # noqa: E402
import adaptive_log_checks as achk  # noqa: E402

from sglang.srt.speculative import eagle_worker_v2  # noqa: E402
from adaptive_controller import controller_for  # noqa: E402
from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- config handling against SGLang

@pytest.mark.parametrize("cfg", [None, {"1": {"candidate_steps": [2, 5]}, "4": {"candidate_steps": [0, 1]},
                                        "16": {"candidate_steps": [0]}}])
def test_routing_agrees_with_sglang(tmp_path, cfg):
    path = None
    if cfg is not None:
        path = str(tmp_path / "c.json")
        Path(path).write_text(json.dumps(cfg))
    loaded = acfg.load_adaptive_config(path)
    params = AdaptiveSpeculativeParams(initial_steps=acfg.initial_steps(loaded), cfg_path=path)
    params.set_cuda_graph_bs(list(acfg.GRAPH_BS))
    for bs in range(1, 20):
        assert acfg.candidates_for_bs(loaded, bs) == params._route(bs).candidate_steps, bs


def test_initial_steps_is_the_largest_positive_candidate():
    # SGLang sizes its shared logits buffer from the starting steps: start at the largest candidate
    assert acfg.initial_steps(acfg.load_adaptive_config(None)) == 7
    assert acfg.initial_steps({"1": {"candidate_steps": [0, 2, 5]}, "8": {"candidate_steps": [0]}}) == 5
    with pytest.raises(ValueError, match="no positive candidate"):
        acfg.initial_steps({"1": {"candidate_steps": [0]}})


def test_sglang_loader_refuses_a_bad_config(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({"1": {"candidate_steps": []}}))
    with pytest.raises(ValueError):
        acfg.load_adaptive_config(str(p))


# ---------------------------------------------------------------- steps check on SGLang's controller

class StubWorker:
    """What AdaptiveController needs of EAGLEWorkerV2, without the GPU runtime states."""

    def __init__(self, steps: int, log: list[str]):
        self.speculative_num_steps = steps
        self.speculative_num_draft_tokens = steps + 1
        self.log = log

    def build_adaptive_runtime_state(self, speculative_num_steps, speculative_num_draft_tokens, cuda_graph_bs=None):
        return type("State", (), {"speculative_num_steps": speculative_num_steps,
                                  "speculative_num_draft_tokens": speculative_num_draft_tokens})()

    def apply_runtime_state(self, state) -> None:
        if self.speculative_num_steps == state.speculative_num_steps:
            return
        self.log.append("[2026-12-01 20:00:00] Switch adaptive runtime state: "
                        f"steps {self.speculative_num_steps} -> {state.speculative_num_steps}, "
                        f"draft_tokens {self.speculative_num_draft_tokens} -> {state.speculative_num_draft_tokens}")
        self.speculative_num_steps = state.speculative_num_steps
        self.speculative_num_draft_tokens = state.speculative_num_draft_tokens


def test_stub_writes_sglangs_switch_line():
    src = inspect.getsource(eagle_worker_v2.EAGLEWorkerV2.apply_runtime_state)
    assert '"Switch adaptive runtime state: "' in src
    assert 'f"steps {self.speculative_num_steps} -> {state.speculative_num_steps}, "' in src


def simulate(cfg_path=None, cycles=600, seed=0):
    """Cycles under SGLang's real controller: batch sizes move between buckets, acceptance between
    easy and hard text. Returns (records read after the switch, records read before it, log text)."""
    rng = random.Random(seed)
    log: list[str] = []
    cfg = acfg.load_adaptive_config(cfg_path)
    worker = StubWorker(acfg.initial_steps(cfg), log)
    ctl = controller_for(worker, cfg_path)
    for s in ctl.candidate_steps:
        ctl.register(worker.build_adaptive_runtime_state(s, s + 1))
    ctl.init_states(list(acfg.GRAPH_BS))
    right, wrong = [], []
    for i in range(cycles):
        bs = (1, 1, 8, 3, 6)[(i // 40) % 5]
        rate = 0.9 if (i // 120) % 2 == 0 else 0.2
        before = worker.speculative_num_steps
        ctl.activate_step_by_batch(bs)
        ran = worker.speculative_num_steps
        accepted = []
        for _ in range(bs):
            k = 0
            while k < ran and rng.random() < rate:
                k += 1
            accepted.append(k)
        base = {"schema": "sglang_patches.spec_timing", "kind": "decode", "rank": 0, "cycle": i, "t": 100.0 + i,
                "bs": bs, "accepted": accepted, "verify_ms": 5.0, "extend_ms": 1.0, "cycle_ms": 7.5}
        right.append({**base, "steps": ran, "draft_tokens": ran + 1, "draft_ms": 0.3 * ran if ran else None})
        wrong.append({**base, "steps": before, "draft_tokens": before + 1, "draft_ms": 0.3 * before if before else None})
        ctl.on_verify_complete(accepted, bs)
    return right, wrong, "\n".join(log), cfg


def test_steps_check_passes_records_of_what_ran():
    right, _, text, cfg = simulate()
    chk = achk.steps_check(right, cfg, text)
    assert chk["sglang_switches"] >= 5  # the run really switches
    assert len(chk["steps_seen"]) >= 2
    assert chk["fraction"] == 1.0 and chk["problems"] == {}
    assert chk["switch_path_consistent"] is True


def test_steps_check_catches_steps_read_before_the_switch():
    _, wrong, text, cfg = simulate()
    chk = achk.steps_check(wrong, cfg, text)
    assert chk["fraction"] < 1.0
    assert chk["problems"]


def test_steps_check_per_record_rules():
    cfg = acfg.load_adaptive_config(None)
    ok = {"bs": 8, "steps": 3, "draft_tokens": 4, "draft_ms": 1.0, "accepted": [3, 0]}
    assert achk.record_problem(ok, acfg.candidates_for_bs(cfg, 8)) is None
    assert achk.record_problem({**ok, "steps": 7, "draft_tokens": 8}, [0, 1, 3]) == "steps not a candidate of its bucket"
    assert achk.record_problem({**ok, "steps": 1, "draft_tokens": 2}, [0, 1, 3]) == "accepted > steps"
    assert achk.record_problem({**ok, "steps": 0, "accepted": [0]}, [0, 1, 3]).startswith("draft phase")
    assert achk.record_problem({**ok, "draft_ms": None}, [0, 1, 3]).startswith("draft phase")
    assert achk.record_problem({**ok, "draft_tokens": 6}, [0, 1, 3]) == "draft_tokens != steps + 1"
    assert achk.record_problem({"steps": 0, "draft_ms": None, "accepted": [0, 0], "draft_tokens": 1}, [0]) is None
    plain = {"steps": 0, "draft_ms": None, "accepted": [0], "draft_tokens": 1, "plain": True}
    assert achk.record_problem(plain, [0, 1]) is None
    assert achk.record_problem({**plain, "plain": False}, [0, 1]) == "plain flag disagrees with steps"
    assert achk.record_problem({**ok, "plain": True}, [0, 1, 3]) == "plain flag disagrees with steps"


def test_switch_path_must_follow_sglangs_log():
    cfg = {"1": {"candidate_steps": [1, 3]}}
    recs = [{"bs": 1, "steps": s, "draft_tokens": s + 1, "draft_ms": 1.0, "accepted": [0]} for s in (3, 3, 1, 1, 3)]
    log = ("Switch adaptive runtime state: steps 3 -> 1, draft_tokens 4 -> 2\n"
           "Switch adaptive runtime state: steps 1 -> 3, draft_tokens 2 -> 4\n")
    assert achk.steps_check(recs, cfg, log)["switch_path_consistent"] is True
    assert achk.steps_check(recs, cfg, log.splitlines()[0])["switch_path_consistent"] is False
    assert achk.steps_check(recs[:2], cfg, "")["switch_path_consistent"] is True
    # the last verify switched and no cycle followed (0.5.23 on an H100): still SGLang's path
    assert achk.steps_check(recs[:4], cfg, log)["switch_path_consistent"] is True
    assert achk.steps_check(recs[2:4], cfg, log)["switch_path_consistent"] is True  # warm-up switches before
    assert achk.steps_check([{**recs[0], "steps": 7}], cfg, log)["switch_path_consistent"] is False
    # stuck: the records stayed at 3 while SGLang went on switching (3 -> 1 -> 3 -> 1 -> 7)
    stuck = "".join(f"Switch adaptive runtime state: steps {a} -> {b}, draft_tokens {a + 1} -> {b + 1}\n"
                    for a, b in ((3, 1), (1, 3), (3, 1), (1, 7)))
    assert achk.switch_states(stuck) == [3, 1, 3, 1, 7]
    assert achk.steps_check(recs[:2], cfg, stuck)["switch_path_consistent"] is False
    assert achk.steps_check(recs[:2], cfg, stuck.rsplit("Switch", 2)[0])["switch_path_consistent"] is True  # [3, 1, 3]
    assert achk.steps_check([], cfg, log)["switch_path_consistent"] is False
    assert achk.switch_states(log) == [3, 1, 3]


# ---------------------------------------------------------------- records against SGLang's counters

def test_counts_check():
    recs = [{"accepted": [1, 2], "draft_ms": 1.0, "verify_ms": 4.0, "extend_ms": 1.0, "cycle_ms": 6.5},
            {"accepted": [0], "draft_ms": None, "verify_ms": 4.0, "extend_ms": 1.0, "cycle_ms": 5.5}]
    good = achk.counts_check(recs, [{"spec_verify_ct": 2}, {"spec_verify_ct": 1}])
    assert good["records_equal_verify_ct"] is True and good["phases_within_cycle_fraction"] == 1.0
    assert achk.counts_check(recs, [{"spec_verify_ct": 2}])["records_equal_verify_ct"] is False
    over = achk.counts_check([{**recs[0], "cycle_ms": 5.0}], [{"spec_verify_ct": 2}])
    assert over["phases_within_cycle_fraction"] == 0.0


def test_decode_records_reads_leniently_and_in_cycle_order():
    lines = [json.dumps({"schema": "sglang_patches.spec_timing", "kind": "decode", "rank": 0, "cycle": c, "t": t,
                         "steps": 1, "accepted": [5]}) for c, t in ((2, 12.0), (1, 11.0), (0, 1.0))]
    lines += ["not json", json.dumps({"schema": "sglang_patches.spec_timing", "kind": "prefill", "rank": 0,
                                      "cycle": 3, "t": 13.0})]
    recs = achk.decode_records(lines, t_from=10.0)
    assert [r["cycle"] for r in recs] == [1, 2]  # accepted > steps kept: the check must see it


# ---------------------------------------------------------------- cells, resume, windows

def cell(row, pset, bs, tps, n=8, log="t.jsonl", t0=0.0):
    return {"row": row, "set": pset, "bs": bs, "num_prompts": n, "output_len": 256, "timing_log": log,
            "t0": t0, "t1": t0 + 10, "result": {"output_throughput": tps, "completed": n}}


def test_load_cells_keeps_only_usable_matching_cells(tmp_path):
    d = tmp_path / "cells"
    d.mkdir()
    (d / "plain_in_bs1.json").write_text(json.dumps(cell("plain", "in", 1, 200.0)))
    (d / "plain_in_bs8.json").write_text(json.dumps(cell("plain", "in", 8, 900.0, n=4)))  # other prompt count
    (d / "s2_in_bs1.json").write_text(json.dumps(cell("s2", "in", 1, 0.0)))  # no throughput
    (d / "s3_in_bs1.json").write_text("{truncated")
    got = asum.load_cells(tmp_path, {1: 8, 8: 16}, 256)
    assert sorted(got) == ["plain_in_bs1"]
    assert asum.missing_cells("plain", got) == [("plain", "in", 8), ("plain", "ood", 1), ("plain", "ood", 8)]
    assert asum.missing_cells("ours_ood", got) == [("ours", "ood", 1), ("ours", "ood", 8)]
    assert asum.load_cells(tmp_path, {1: 8, 8: 16}, 128) == {}


def test_set_window_and_cut():
    cells = {asum.cell_name("s5", "in", 1): cell("s5", "in", 1, 1.0, t0=100.0),
             asum.cell_name("s5", "in", 8): cell("s5", "in", 8, 1.0, t0=120.0)}
    assert asum.set_window(cells, "s5", "in") == (100.0, 130.0)
    assert asum.set_window(cells, "s5", "ood") is None
    cells[asum.cell_name("s5", "in", 8)]["timing_log"] = "other.jsonl"  # a restarted server: another log
    assert asum.set_window(cells, "s5", "in") is None
    lines = [json.dumps({"t": t}) for t in (99.0, 100.0, 115.0, 130.0, 131.0)] + ["torn"]
    assert [json.loads(x)["t"] for x in achk.records_in_window(lines, (100.0, 130.0))] == [100.0, 115.0, 130.0]


def test_parse_bench_result_takes_the_last_line():
    text = json.dumps({"output_throughput": 1.0, "completed": 1}) + "\n" + json.dumps(
        {"output_throughput": 250.5, "completed": 8, "accept_length": 2.1, "extra": 1}) + "\n"
    r = asum.parse_bench_result(text)
    assert r["output_throughput"] == 250.5 and r["accept_length"] == 2.1 and "extra" not in r
    with pytest.raises(ValueError):
        asum.parse_bench_result("\n")


def test_parse_case_list():
    assert asum.parse_case_list("s5, plain") == ["s5", "plain"]
    for bad in ("s6", "", "plain,plain"):
        with pytest.raises(ValueError):
            asum.parse_case_list(bad)


def test_bench_servings_sharegpt_loader_reads_our_files(tmp_path, monkeypatch):
    """SGLang's own loader on a file written the way the benchmark writes it. Its package imports
    the hub `datasets` library (not installed here, and unused by this loader): an empty stand-in."""
    import types

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=None))
    from sglang.benchmark.datasets.sharegpt import sample_sharegpt_requests

    class Tok:
        bos_token = None

        def encode(self, text):
            return text.split()

    prompts = [f"def f{i}(x):\n    return x + {i}" for i in range(10)]
    path = tmp_path / "set.json"
    path.write_text(json.dumps(asum.sharegpt_conversations(prompts, "t")))
    rows = sample_sharegpt_requests(str(path), 6, Tok(), fixed_output_len=256)
    assert len(rows) == 6 and all(r.output_len == 256 for r in rows)
    assert {r.prompt for r in rows} <= set(prompts)


# ---------------------------------------------------------------- summary and goals

def full_cells(ours_scale: dict | None = None) -> dict:
    base = {"plain": 200.0, "s1": 250.0, "s2": 300.0, "s3": 320.0, "s4": 316.0, "s5": 310.0, "default": 315.0, "ours": 321.0}
    cells = {}
    for row, tps in base.items():
        for pset in asum.SETS:
            for bs in asum.CONCURRENCY:
                v = tps * (ours_scale or {}).get((row, pset, bs), 1.0)
                cells[asum.cell_name(row, pset, bs)] = cell(row, pset, bs, v)
    return cells


def summarize(cells):
    return asum.summarize(cells, configs={}, steps_checks={}, counts_checks={}, meta={"gpu": "x"})


def test_goals_and_ratios():
    s = summarize(full_cells({("ours", "ood", 1): 330.0 / 321.0}))
    assert s["ours_vs_default_in_bs1"] == round(321 / 315, 4)
    assert s["ours_vs_best_fixed_in_bs8"] == round(321 / 320, 4)
    assert s["best_fixed"]["in_bs1"]["row"] == "s3"
    assert s["ours_vs_default_ood_bs1"] == round(330 / 315, 4)
    g = s["goals"]
    assert g["ours_ge_0.99x_default_every_cell"] is True
    assert g["ours_ge_0.98x_best_fixed_every_cell"] is True
    assert g["ours_ge_1.05x_default_ood_bs1"] is False  # 1.048: just short, never rounded up
    assert g["records_steps_match_all"] is None


def test_goal_false_when_a_cell_misses_and_null_when_unmeasured():
    s = summarize(full_cells({("ours", "in", 8): 0.9}))
    assert s["goals"]["ours_ge_0.99x_default_every_cell"] is False
    cells = full_cells()
    del cells["default_ood_bs8"]
    assert summarize(cells)["goals"]["ours_ge_0.99x_default_every_cell"] is None
    assert "default_ood_bs8" in summarize(cells)["cells_missing"]
    del cells["s2_in_bs1"]  # grid incomplete: ours above what was measured is not shown
    assert summarize(cells)["goals"]["ours_ge_0.98x_best_fixed_every_cell"] is None
    cells["ours_in_bs1"]["result"]["output_throughput"] = 100.0  # but a miss is a miss
    assert summarize(cells)["goals"]["ours_ge_0.98x_best_fixed_every_cell"] is False


def test_records_fraction_pools_the_adaptive_starts_and_table_prints():
    right, wrong, text, cfg = simulate(cycles=200)
    checks = {"default_a": achk.steps_check(right, cfg, text), "ours_b": achk.steps_check(wrong, cfg, text)}
    s = asum.summarize(full_cells(), configs={}, steps_checks=checks, counts_checks={}, meta={})
    n_ok = checks["default_a"]["records_ok"] + checks["ours_b"]["records_ok"]
    assert s["records_steps_match_records"] == 400
    assert s["records_steps_match_fraction"] == round(n_ok / 400, 6) < 1.0
    assert s["goals"]["records_steps_match_all"] is False
    out = adaptive_report.table(s)
    assert "ours_vs_default" in out and "records_steps_match_fraction" in out


# ---------------------------------------------------------------- the out-of-distribution prompt set

def test_ood_prompt_set():
    from sglang_patches.offline.sweep.prompts import EVAL_PROMPTS, load_prompts

    path = REPO / "benchmarks" / "data" / "ood_python.jsonl"
    ood = load_prompts(path)
    assert len(ood) >= 64 and len(set(ood)) == len(ood)
    assert path.stat().st_size < 64 * 1024
    assert not set(ood) & set(load_prompts(EVAL_PROMPTS))
    domains = [json.loads(x)["domain"] for x in path.read_text().splitlines()]
    assert len(set(domains)) == len(domains)


def test_data_ood_set_is_the_generators_output_and_unlike_the_stdlib(tmp_path):
    """ood_data_python.jsonl is what make_ood_data_python.py writes (deterministic), every kind
    present, no prompt shared with the stdlib prompts; the prompts end inside a data literal."""
    import runpy

    from sglang_patches.offline.sweep.prompts import EVAL_PROMPTS, load_prompts

    path = REPO / "benchmarks" / "data" / "ood_data_python.jsonl"
    gen = runpy.run_path(str(REPO / "benchmarks" / "data" / "make_ood_data_python.py"))
    before = path.read_bytes()
    gen["OUT"] = tmp_path / "again.jsonl"
    gen["main"].__globals__["OUT"] = gen["OUT"]
    gen["main"]()
    assert gen["OUT"].read_bytes() == before
    rows = [json.loads(x) for x in before.decode().splitlines()]
    assert len(rows) == 64 and len({r["prompt"] for r in rows}) == 64 and len(before) < 64 * 1024
    assert {r["domain"] for r in rows} == {k.__name__.replace("_", "-") for k in gen["KINDS"]}
    assert not {r["prompt"] for r in rows} & set(load_prompts(EVAL_PROMPTS))
    assert all(r["prompt"].rstrip()[-1] in "\"([b" for r in rows)  # open literal: the target continues data


def test_an_out_keeps_its_ood_set(tmp_path, monkeypatch):
    import adaptive_prompts as ap

    monkeypatch.setattr(ap, "_PINNED", [ap.OOD_PROMPTS])  # the module's state, restored after the test
    data = REPO / "benchmarks" / "data"
    assert ap.pin_ood_prompts(tmp_path, None) is None and ap.ood_prompts() == data / "ood_python.jsonl"
    assert ap.repo_rel(ap.ood_prompts()) == "benchmarks/data/ood_python.jsonl"
    refused = ap.pin_ood_prompts(tmp_path, str(data / "ood_data_python.jsonl"))
    assert refused and "measured the ood set" in refused and "use another --out" in refused
    other = tmp_path / "other"
    other.mkdir()
    assert ap.pin_ood_prompts(other, str(data / "ood_data_python.jsonl")) is None
    assert ap.ood_prompts() == data / "ood_data_python.jsonl"
    assert ap.pin_ood_prompts(other, None) is None and ap.ood_prompts() == data / "ood_data_python.jsonl"  # resumed
    assert "no such file" in ap.pin_ood_prompts(tmp_path / "x", str(tmp_path / "nope.jsonl"))
    # an --out measured before sets were pinned holds cells of the default set only
    old = tmp_path / "old"
    (old / "cells").mkdir(parents=True)
    (old / "cells" / "s5_ood_bs1.json").write_text("{}")
    assert "measured the ood set benchmarks/data/ood_python.jsonl" in ap.pin_ood_prompts(
        old, str(data / "ood_data_python.jsonl"))
    # a pinned set that is gone: said, with the fix
    gone = tmp_path / "gone"
    gone.mkdir()
    (gone / "ood_prompts.txt").write_text(str(tmp_path / "deleted.jsonl") + "\n")
    assert ap.pin_ood_prompts(gone, None) == (f"{gone / 'ood_prompts.txt'} names {tmp_path / 'deleted.jsonl'}, "
                                              "which no longer exists; restore it or use another --out")


def test_a_wrong_ood_set_is_one_line_and_creates_nothing(tmp_path):
    import subprocess

    out = tmp_path / "run"
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "adaptive_bench.py"), "--out", str(out),
                        "--ood-prompts", str(tmp_path / "nope.jsonl"), "--summary-only"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [f"--ood-prompts {tmp_path / 'nope.jsonl'}: no such file"]
    assert not out.exists()
