"""benchmarks/fp8_draft_bench.py and fp8_draft_summary.py on CPU: the case plan, each case's server flags
(parsed by the launcher's overlay parser and SGLang's own ServerArgs parser), the draft-forward count read
from SGLang's EagleDraftWorker.draft_forward, weight bytes and roofline, backend proof, the merged summary
and its goals, refusal of bad arguments, and the run loop (the only stand-in: the SGLang server and the
load it serves, which need a GPU)."""
from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import needs_sglang
from fp8_summary_cases import trained_case as _trained

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import fp8_draft_bench as bench  # noqa: E402
import fp8_draft_summary as fs  # noqa: E402

from sglang_patches.launch_args import split_overlay_args  # noqa: E402
from sglang_patches.offline.fixtures import fixture_paths  # noqa: E402
from sglang_patches.offline.fixtures.specs import CATALOGUE  # noqa: E402
from sglang_patches.vocab.schema import make_record  # noqa: E402
from sglang_patches.vocab.stats import summarize as stats_summary  # noqa: E402

ONLY_0517 = needs_sglang("0.5.17", why="the benchmark drives the GPU machine's SGLang 0.5.17 (flags, draft_forward lines)")


# ---------------------------------------------------------------- plan

def test_case_plan_names_and_groups():
    every = fs.all_cases()
    assert len(every) == 14 and len(set(every)) == 14
    assert fs.parse_case_list("llama3-8b") == [f"llama3-8b:{c}" for c in ("stock", "sglang_fp8", "triton_bf16", "triton_fp8",
                                                                        "triton_fp8_wo")]
    assert fs.parse_case_list("trained-8b:s5:triton_fp8, kimi-k2-shape:stock") == [
        "trained-8b:s5:triton_fp8", "kimi-k2-shape:stock"]
    assert fs.parse_case_list("trained-8b") == ["trained-8b:s3:stock", "trained-8b:s3:triton_fp8",
                                                "trained-8b:s5:stock", "trained-8b:s5:triton_fp8"]
    assert fs.parse_case_list("all") == every
    assert fs.parse_case("trained-8b:s5:stock") == {"case": "trained-8b:s5:stock", "fixture": "trained-8b", "steps": 5,
                                                    "config": "stock", "kind": "trained"}


@pytest.mark.parametrize("text, why", [("llama3-8b:fp16", "unknown 'llama3-8b:fp16'"), ("tiny", "unknown 'tiny'"),
                                       ("llama3-8b,llama3-8b:stock", "twice"), (" , ", "empty"),
                                       ("trained-8b:s4:stock", "unknown")])
def test_case_list_refuses(text, why):
    with pytest.raises(ValueError, match=why):
        fs.parse_case_list(text)


def _args(*extra):
    return bench.parse_args(["--out", "/tmp/unused-fp8", *extra])


@ONLY_0517
@pytest.mark.parametrize("case", fs.all_cases())
def test_case_flags_parse_with_the_launcher_and_sglang(case):
    from sglang_patches import compat
    from sglang.srt.server_args import QUANTIZATION_CHOICES

    c = fs.parse_case(case)
    argv = bench.server_args(_args(), case, fixture_paths(c["fixture"]))
    ns, rest = split_overlay_args(argv)
    assert ns.draft_backend == ("triton" if c["config"].startswith("triton") else "sglang")
    if c["config"] in ("triton_fp8", "triton_fp8_wo"):
        if "--draft-weights" in rest:
            pytest.skip("the launcher has no --draft-weights yet (the FP8 drafter feature has not landed)")
        assert ns.draft_weights == {"triton_fp8": "fp8", "triton_fp8_wo": "fp8-weight-only"}[c["config"]]
    parser = argparse.ArgumentParser()
    compat.current().SERVER_ARGS.resolve()(parser)
    sa = parser.parse_args(rest)  # SGLang refuses any flag it does not know (SystemExit)
    steps = c["steps"] or 3
    assert (sa.speculative_num_steps, sa.speculative_eagle_topk, sa.speculative_num_draft_tokens) == (steps, 1, steps + 1)
    assert sa.speculative_draft_model_quantization == ("fp8" if c["config"] == "sglang_fp8" else None)
    assert "fp8" in QUANTIZATION_CHOICES
    assert sa.cuda_graph_max_bs_decode == (8 if c["kind"] == "trained" else 32)
    assert sa.attention_backend == "triton" and sa.speculative_algorithm == "EAGLE3"
    assert sa.load_format == sa.speculative_draft_load_format == CATALOGUE[c["fixture"]].load_format


@ONLY_0517
def test_cuda_graph_bs_option_captures_the_measured_sizes_only():
    from sglang_patches import compat

    rest = split_overlay_args(bench.server_args(_args("--cuda-graph-bs", "--batch-sizes", "8,1"), "llama3-8b:stock",
                                                fixture_paths("llama3-8b")))[1]
    parser = argparse.ArgumentParser()
    compat.current().SERVER_ARGS.resolve()(parser)
    assert parser.parse_args(rest).cuda_graph_bs_decode == [1, 8]


# ---------------------------------------------------------------- roofline

@ONLY_0517
def test_draft_forwards_per_phase_is_steps_minus_one_in_sglang():
    from sglang.srt.speculative import eagle_worker_v2

    lines = Path(eagle_worker_v2.__file__).read_text().splitlines()  # the lines the docstring cites
    assert "for i in range(self.speculative_num_steps):" in lines[607]
    assert "if i == self.speculative_num_steps - 1:" in lines[619] and lines[620].strip() == "break"
    assert "self.draft_runner.forward(forward_batch)" in lines[650]
    src = inspect.getsource(eagle_worker_v2.EagleDraftWorker.draft_forward)
    loop = src[src.index("for i in range(self.speculative_num_steps)"):]
    assert loop.index("if i == self.speculative_num_steps - 1:") < loop.index("self.draft_runner.forward(")
    assert [fs.draft_forwards_per_phase(s) for s in (1, 3, 5)] == [0, 2, 4]


@ONLY_0517
def test_eagle3_input_layer_qkv_reads_twice_the_hidden_width():
    from sglang.srt.models import llama_eagle3

    lines = Path(llama_eagle3.__file__).read_text().splitlines()  # the lines drafter_matrices cites
    assert "hidden_size = 2 * self.hidden_size if self.is_input_layer else self.hidden_size" in lines[55]
    assert "if hidden_states.shape[-1] != embeds.shape[-1]:" in lines[228]   # fc only on the target's 3H states
    assert "hidden_states = self.fc(hidden_states)" in "\n".join(lines[229:238])


def test_weight_bytes_of_the_fixture_drafters():
    d = CATALOGUE["llama3-8b"].draft
    params = 6144 * 8192 + 4096 * 4096 + 28672 * 4096 + 4096 * 14336 + 32000 * 4096
    bf16 = fs.drafter_weight_bytes(d, "bf16", 3)
    assert bf16["params"] == params == 374_341_632
    assert bf16["bytes_per_forward"] == 2 * params and bf16["bytes_per_draft_phase"] == 4 * params
    fp8 = fs.drafter_weight_bytes(d, "fp8", 5)
    rows = 6144 + 4096 + 28672 + 4096 + 32000
    assert fp8["bytes_per_forward"] == params + 4 * rows and fp8["bytes_per_draft_phase"] == 4 * (params + 4 * rows)
    sg = fs.drafter_weight_bytes(d, "sglang_fp8", 3)
    assert sg["matrices"]["lm_head"] == 2 * 32000 * 4096 and sg["matrices"]["down"] == 4096 * 14336 + 4 * 4096
    k = fs.drafter_weight_bytes(CATALOGUE["kimi-k2-shape"].draft, "bf16", 3)["matrices"]
    assert k["qkv"] == 2 * (56 + 16) * 128 * 2 * 7168 and k["o"] == 2 * 7168 * 56 * 128
    t = fs.drafter_weight_bytes(CATALOGUE["trained-8b"].draft, "bf16", 3)["matrices"]
    assert t["qkv"] == 2 * (64 + 32) * 64 * 8192 and t["lm_head"] == 2 * 8192 * 4096
    with pytest.raises(ValueError):
        fs.drafter_weight_bytes(d, "int4", 3)


def test_copy_bandwidth_and_roofline():
    bw = fs.copy_bandwidth(1 << 30, [0.0006, 0.0005, 0.0007])
    assert bw["bytes_per_s"] == pytest.approx(2 * (1 << 30) / 0.0006) and bw["repeats"] == 3
    assert fs.roofline_fraction(1.5e9, 0.5, 4e12) == pytest.approx(0.75)
    assert fs.roofline_fraction(1.5e9, None, 4e12) is None and fs.roofline_fraction(0, 0.5, 4e12) is None


# ---------------------------------------------------------------- proof and timer figures

FP8_PART = ("fp8 weights on 7 modules: 800.0 MiB -> 400.0 MiB read per draft step of <= 64 rows (400.0 MiB saved over "
            "all FP8 modules, fc included; the bf16 weights are kept for larger batches, +401.0 MiB GPU memory); "
            "SGLang's path for model.fc (is Foo)")
# the same part as the recorded 2026-12-01 runs logged it (before the per-step bytes left fc out)
FP8_PART_V0 = ("fp8 weights on 7 modules: 800.0 MiB -> 400.0 MiB read per draft forward of <= 64 rows (400.0 MiB saved; "
               "the bf16 weights are kept for larger batches, +400.0 MiB GPU memory); SGLang's path for model.fc (is Foo)")
ON_FP8 = ("[2026] INFO sglang_patches: triton draft backend on LlamaForCausalLMEagle3 (torch.bfloat16): {'modules': 6}; "
          + FP8_PART)
W8A8_PART = "; fp8 activations (w8a8) at 2..64 rows on 3 modules (mlp.gate_up_proj x2, lm_head), bf16 activations"
GU_PART = "; fp8 activations (w8a8) at 2..64 rows on 2 modules (mlp.gate_up_proj x2), bf16 activations"
ON_BF16 = "[2026] INFO sglang_patches: triton draft backend on LlamaForCausalLMEagle3 (torch.bfloat16): norms, silu"


@pytest.mark.parametrize("config, log, info, active", [
    ("triton_fp8", ON_FP8, {}, True), ("triton_fp8", ON_BF16, {}, False), ("triton_fp8", "", {}, False),
    ("triton_fp8", ON_FP8 + W8A8_PART, {}, True), ("triton_fp8_wo", ON_FP8, {}, True),
    ("triton_fp8_wo", ON_FP8 + W8A8_PART, {}, False), ("triton_fp8_wo", ON_BF16, {}, False),
    ("triton_bf16", ON_BF16, {}, True), ("triton_bf16", ON_FP8, {}, False),
    ("triton_bf16", ON_BF16 + "\nWARNING --draft-backend triton: x; falling back to the sglang draft backend", {}, False),
    ("stock", "", {"speculative_draft_model_quantization": None}, True), ("stock", ON_BF16, {}, False),
    ("sglang_fp8", "", {"speculative_draft_model_quantization": "fp8"}, True),
    ("sglang_fp8", "", {"speculative_draft_model_quantization": None}, False), ("sglang_fp8", "", None, False)])
def test_backend_proof(config, log, info, active):
    p = fs.backend_proof(log, config, info)
    assert p["active"] is active and (p["active_why"] is None) is active


def test_backend_proof_reads_the_launchers_fp8_figures():
    """FP8_PART is what the launcher's describe() logs at load."""
    from sglang_patches.server.draft_backend import fp8_weights

    assert fp8_weights.describe({"modules": 7, "bytes_bf16": 800 << 20, "bytes_fp8": 400 << 20,
                                 "step_bf16": 800 << 20, "step_fp8": 400 << 20, "workspace_bytes": 1 << 20,
                                 "saved_bytes": 400 << 20}, {"model.fc": "is Foo"}) == FP8_PART
    old = fs.backend_proof("x\n" + ON_FP8.replace(FP8_PART, FP8_PART_V0) + "\n", "triton_fp8", {})
    assert old["active"] and old["launcher_fp8"]["modules"] == 7 and old["launcher_fp8"]["per"] == "forward"
    p = fs.backend_proof("x\n" + ON_FP8 + "\n", "triton_fp8", {})
    assert p["launcher_fp8"] == {"modules": 7, "mib_bf16": 800.0, "mib_fp8": 400.0, "per": "step", "w8a8_modules": None,
                                 "sglang_path_for": "model.fc (is Foo)"}
    a8 = fs.backend_proof("x\n" + ON_FP8.replace("; SGLang's", W8A8_PART + " on the others; SGLang's") + "\n", "triton_fp8", {})
    assert a8["active"] and a8["launcher_fp8"]["w8a8_modules"] == "mlp.gate_up_proj x2, lm_head"
    warn = "WARNING sglang_patches: --draft-weights fp8: lm_head keep SGLang's bf16 path (--draft-backend-fallback)"
    assert not fs.backend_proof(ON_FP8 + "\n" + warn, "triton_fp8", {})["active"]


def test_phase_row_reads_the_overlays_summary():
    recs = [make_record(cycle=i, t=i * 0.01, rank=0, kind="decode", bs=1, steps=3, topk=1, draft_tokens=4,
                        accepted=[i % 3], draft_ms=0.4 + 0.01 * i, verify_ms=5.0, extend_ms=0.3, cycle_ms=6.0,
                        host_gap_ms=0.1) for i in range(9)]
    row = fs.phase_row(stats_summary(recs))
    assert row["draft_ms_p50"] == pytest.approx(0.44) and row["cycle_ms_mean"] == pytest.approx(6.0)
    assert row["accept_length_timer"] == pytest.approx(2.0) and row["timer_cycles"] == 9


# ---------------------------------------------------------------- summary

def _timing(config, bs_ms, t, error=None, active=True, bw=4e12):
    return {"kind": "timing", "config": config, "t_end": t, "error": error, "active": active, "server_cmd": f"cmd {config}",
            "bs": {bs: {"draft_ms_p50": ms} for bs, ms in bs_ms.items()}, "copy_bandwidth_bytes_per_s": bw,
            "drafter": {"bytes_per_draft_phase": 2_000_000_000}}


def test_summary_merges_runs_and_judges_goals():
    run1 = {"cases": {"llama3-8b:stock": _timing("stock", {"1": 1.0, "8": 1.2}, 1.0),
                      "llama3-8b:triton_fp8": _timing("triton_fp8", {"1": 0.9, "8": 1.0}, 2.0),
                      "llama3-8b:sglang_fp8": _timing("sglang_fp8", {"1": 0.8}, 3.0),
                      "trained-8b:s3:stock": _trained(2.5, 330.0, 1500.0),
                      "trained-8b:s3:triton_fp8": _trained(2.48, 400.0, 1600.0)}}
    run2 = {"cases": {"llama3-8b:triton_fp8": _timing("triton_fp8", {"1": 0.5, "8": 0.9}, 5.0),   # later: wins
                      "llama3-8b:stock": _timing("stock", {"1": 9.0}, 6.0, error="ServerError: x"),  # failed: loses
                      "kimi-k2-shape:stock": _timing("stock", {"1": 2.0}, 1.0),
                      "kimi-k2-shape:triton_fp8": _timing("triton_fp8", {"1": 1.0}, 1.0, active=False),
                      "trained-8b:s5:stock": _trained(3.0, 300.0, 1400.0),
                      "trained-8b:s5:triton_fp8": _trained(2.85, 310.0, 1450.0)}}
    s = fs.summarize([("a.json", run1), ("b.json", run2)])
    assert s["draft_speedup_bs1_llama3_8b"] == 2.0 and s["draft_speedup_bs8_llama3_8b"] == pytest.approx(1.3333, abs=1e-4)
    assert s["draft_speedup_vs_sglang_fp8_bs1"] == 1.6 and s["draft_speedup_vs_sglang_fp8_bs1_kimi_k2_shape"] is None
    assert s["draft_speedup_bs1_kimi_k2_shape"] is None                    # triton_fp8 not proven active
    assert s["draft_speedup_w8a8_vs_weight_only_bs8_llama3_8b"] is None    # no triton_fp8_wo in these runs
    assert "llama3-8b:triton_fp8_wo" in s["cases_missing"]
    assert s["accept_ratio_trained_8b_s3"] == pytest.approx(0.992) and s["accept_ratio_trained_8b_s5"] == 0.95
    assert s["e2e_ratio_bs1_trained_8b"] == pytest.approx(1.2121, abs=1e-4) and s["e2e_ratio_bs8_trained_8b_s5"] is not None
    assert s["roofline_fraction_bs1"] == pytest.approx(2e9 / 0.0005 / 4e12)
    assert s["merged"]["duplicates"]["llama3-8b:triton_fp8"] == {"used": "b.json", "dropped": ["a.json"]}
    assert s["merged"]["duplicates"]["llama3-8b:stock"] == {"used": "a.json", "dropped": ["b.json"]}
    g = s["goals"]
    assert g["draft_ge_1.5x_stock_bs1_both_fixtures"]["verdict"] == "not measured"    # kimi missing, 8B passes
    assert g["draft_ge_1.2x_stock_bs8_llama3_8b"]["verdict"] == "met"
    assert g["draft_ge_1.15x_sglang_fp8_bs1_llama3_8b"]["verdict"] == "met"
    assert g["draft_ge_1.15x_sglang_fp8_bs1_kimi_k2_shape"]["verdict"] == "not measured"
    assert g["accept_within_2pct_trained_8b_s3_s5"]["verdict"] == "not met"          # s5 -5 %
    assert "kimi-k2-shape:triton_fp8" in s["not_usable"] and "kimi-k2-shape:sglang_fp8" in s["cases_missing"]
    assert s["cases"]["llama3-8b:stock"]["server_cmd"] == "cmd stock"
    json.dumps(s)
    assert "goal draft_ge_1.2x_stock_bs8_llama3_8b: met" in fs.table(s)


def test_summary_uses_the_finished_parts_of_a_trained_case_that_failed_later():
    """The accept pass and the concurrency-1 cell finished, the concurrency-8 cell timed out: the first
    two give their ratios, the third stays null, and the case is listed as partial, not dropped."""
    late = _trained(2.45, 400.0, None) | {"error": "TimeoutExpired: bench_serving c8"}
    del late["e2e"]["8"]
    unproven = _trained(2.5, 330.0, 1500.0) | {"active": False}
    s = fs.summarize([("a.json", {"cases": {"trained-8b:s3:stock": _trained(2.5, 320.0, 1500.0),
                                            "trained-8b:s3:triton_fp8": late,
                                            "trained-8b:s5:stock": _trained(3.0, 300.0, 1400.0),
                                            "trained-8b:s5:triton_fp8": unproven}})])
    assert s["accept_ratio_trained_8b_s3"] == 0.98 and s["e2e_ratio_bs1_trained_8b"] == 1.25
    assert s["e2e_ratio_bs8_trained_8b"] is None and s["accept_ratio_trained_8b_s5"] is None
    assert s["partial"] == {"trained-8b:s3:triton_fp8": "TimeoutExpired: bench_serving c8"}
    assert "trained-8b:s5:triton_fp8" in s["not_usable"] and "trained-8b:s3:triton_fp8" not in s["not_usable"]
    assert "partial trained-8b:s3:triton_fp8" in fs.table(s)


def test_summary_of_nothing_is_all_null():
    s = fs.summarize([("a.json", {"cases": {}})])
    assert all(v["verdict"] == "not measured" for v in s["goals"].values())
    assert s["draft_speedup_bs1_llama3_8b"] is None and s["roofline_fraction_bs1"] is None and len(s["cases_missing"]) == 14


def test_summary_compares_fp8_activations_with_weight_only():
    s = fs.summarize([("a.json", {"cases": {"llama3-8b:triton_fp8": _timing("triton_fp8", {"8": 0.8, "32": 1.0}, 1.0),
                                            "llama3-8b:triton_fp8_wo": _timing("triton_fp8_wo", {"8": 1.0}, 1.0)}})])
    assert s["draft_speedup_w8a8_vs_weight_only_bs8_llama3_8b"] == 1.25 and s["draft_speedup_w8a8_vs_weight_only_bs32_llama3_8b"] is None
    assert "draft_speedup_w8a8_vs_weight_only_bs8_llama3_8b: 1.25" in fs.table(s)


def test_summary_cli_merges_folders(tmp_path):
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "fp8_draft_run_1.json").write_text(json.dumps({"cases": {"llama3-8b:stock": _timing("stock", {"1": 1.0}, 1)}}))
    (tmp_path / "r2.json").write_text(json.dumps({"cases": {"llama3-8b:triton_fp8": _timing("triton_fp8", {"1": 0.5}, 2)}}))
    assert fs.main([str(tmp_path / "r1"), str(tmp_path / "r2.json"), "--out", str(tmp_path / "s" / "summary.json")]) == 0
    assert json.loads((tmp_path / "s" / "summary.json").read_text())["draft_speedup_bs1_llama3_8b"] == 2.0


# ---------------------------------------------------------------- bad arguments

def _run(script, *args):
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / script), *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)


@pytest.mark.parametrize("args, why", [(["--cases", "llama3-8b:int4"], "unknown 'llama3-8b:int4'"),
                                       (["--cases", "kimi-k2-shape,kimi-k2-shape"], "twice"),
                                       (["--deadline", "0"], "positive number of seconds"),
                                       (["--deadline", "nan"], "positive number of seconds"),
                                       (["--batch-sizes", "1,x"], "distinct positive integers"),
                                       (["--steps", "0"], "integer >= 1"), (["--port", "80"], "integer >= 1024"),
                                       (["--bogus"], "unrecognized arguments")])
def test_bench_refuses_bad_args_in_one_line(tmp_path, args, why):
    out = tmp_path / "out"
    r = _run("fp8_draft_bench.py", "--out", str(out), *args)
    err = r.stderr.strip()
    assert r.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("fp8_draft_bench: error: ") and why in err
    assert not out.exists()


def test_bench_refuses_an_out_that_is_a_file(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    r = _run("fp8_draft_bench.py", "--out", str(f))
    assert r.returncode == 2 and "is not a folder" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_summary_refuses_a_missing_input(tmp_path):
    r = _run("fp8_draft_summary.py", str(tmp_path / "nope"), "--out", str(tmp_path / "s.json"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "fp8_draft_run_" in r.stderr
    assert not (tmp_path / "s.json").exists()


# ---------------------------------------------------------------- run loop (server stand-in)

class FakeServer:
    """Stands in for sglang_patches.offline.sweep.server.Server (a real one needs the GPU): writes a log as
    the launcher would, fails to start for triton_bf16."""
    seen: list = []

    def __init__(self, args, *, port, log_path, env=None):
        self.cmd, self.url, self.log_path, self.started_s = ["python", "-m", "sglang_patches.launch", *args], f"http://h:{port}", log_path, 1.0

    def start(self):
        FakeServer.seen.append(self.cmd)
        Path(self.log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(self.log_path).write_text(ON_FP8 + GU_PART + "\n" if "--draft-weights" in self.cmd else "")  # today's line
        return self

    def wait_ready(self, timeout):
        if self.cmd[self.cmd.index("--draft-backend") + 1] == "triton" and "--draft-weights" not in self.cmd:
            raise RuntimeError("server exited with code 1")
        return self

    def stop(self):
        pass


def test_run_exports_after_every_case_and_goes_on_after_a_failure(tmp_path, monkeypatch):
    import sglang_patches.offline.sweep.load as load
    import sglang_patches.offline.sweep.server as server

    monkeypatch.setenv("SGLANG_PATCHES_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(server, "Server", FakeServer)
    exported = []
    monkeypatch.setattr(load, "run_batch", lambda url, texts, bs, n, num_requests=None, offset=0, ignore_eos=True: {
        "tok_s": 100.0, "output_tokens": n * (num_requests or bs), "verify_ct": n * (num_requests or bs), "text_hashes": []})
    monkeypatch.setattr(bench, "reset_timing", lambda url: exported.append(sorted(
        json.loads(next((tmp_path / "exp").glob("fp8_draft_run_*.json")).read_text())["cases"])))
    monkeypatch.setattr(bench, "spec_timing", lambda url: {"phases": {"draft": {"p50": 0.5 if "30061" in url else 0.25}},
                                                           "accept_length": 1.0})
    monkeypatch.setattr(bench, "server_info", lambda url: {"speculative_draft_model_quantization": None})
    monkeypatch.setattr(bench, "measure_bandwidth", lambda n: {"env": {"sglang": "0.5.17", "gpus": ["H200"]},
                                                              "copy_bandwidth": {"bytes_per_s": 4e12}})
    monkeypatch.setattr(sys, "argv", ["fp8_draft_bench.py"])
    monkeypatch.setattr(bench, "T0", time.time())  # the deadline counts from the script's start, not the suite's import
    rc = bench.main(["--out", str(tmp_path / "out"), "--export", str(tmp_path / "exp"), "--deadline", "1000",
                     "--cases", "llama3-8b:stock,llama3-8b:triton_bf16,llama3-8b:triton_fp8", "--batch-sizes", "1,8"])
    assert rc == 0
    run = json.loads(next((tmp_path / "exp").glob("fp8_draft_run_*.json")).read_text())
    assert exported[0] == [] and exported[-1] == ["llama3-8b:stock", "llama3-8b:triton_bf16"]  # written before the next case
    assert run["cases"]["llama3-8b:triton_bf16"]["error"].startswith("RuntimeError") and "log_tail" in run["cases"]["llama3-8b:triton_bf16"]
    fp8 = run["cases"]["llama3-8b:triton_fp8"]
    assert fp8["active"] and fp8["backend_on_line"] == ON_FP8 + GU_PART and fp8["drafter"]["forwards_per_draft_phase"] == 2
    assert "--draft-weights fp8" in fp8["server_cmd"] and fp8["sglang_version"] == "0.5.17" and fp8["gpu"] == "H200"
    s = json.loads((tmp_path / "exp" / "summary.json").read_text())
    assert s["draft_speedup_bs1_llama3_8b"] == 2.0 and s["roofline_fraction_bs1"] is not None
    assert run["outcomes"]["llama3-8b:triton_bf16"].startswith("error: ")


def test_run_starts_no_server_past_the_deadline(tmp_path, monkeypatch):
    import sglang_patches.offline.sweep.server as server

    monkeypatch.setenv("SGLANG_PATCHES_CACHE", str(tmp_path / "cache"))
    FakeServer.seen = []
    monkeypatch.setattr(server, "Server", FakeServer)
    monkeypatch.setattr(bench, "measure_bandwidth", lambda n: {"env": {}, "copy_bandwidth": {"error": "no GPU"}})
    monkeypatch.setattr(bench, "T0", time.time())
    rc = bench.main(["--out", str(tmp_path / "out"), "--deadline", str(bench.START_S["llama3-8b"] + 20), "--cases", "llama3-8b"])
    run = json.loads(next((tmp_path / "out").glob("fp8_draft_run_*.json")).read_text())
    assert rc == 0 and FakeServer.seen == [] and run["cases"] == {}
    assert all(v.startswith("not started") for k, v in run["outcomes"].items() if k.startswith("llama3-8b:"))
