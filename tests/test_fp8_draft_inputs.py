"""The fp8-input variants of benchmarks/fp8_draft_bench.py (which drafter modules take fp8 activations under
--draft-weights fp8): the by-name cases triton_fp8_gu (gate_up alone, the default) and triton_fp8_a8lm
(gate_up and the lm_head, the earlier default), their server environment, the proof that each ran what it
names, and the summary's view that reads an earlier run's triton_fp8 as the variant its load line names.
Case records are hand-made (tests/fp8_summary_cases.py): the GPU runs that write real ones cannot happen
on CPU. The server is the test's stand-in for the same reason."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fp8_summary_cases import trained_case

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fp8_draft_bench as bench  # noqa: E402
import fp8_draft_summary as fs  # noqa: E402

LINE = ("[2026] INFO sglang_patches: triton draft backend on LlamaForCausalLMEagle3 (torch.bfloat16): {}; fp8 weights on 6 "
        "modules: 528.0 MiB -> 264.2 MiB read per draft step of <= 64 rows (x)")
GU = "; fp8 activations (w8a8) at 2..64 rows on 1 modules (mlp.gate_up_proj), bf16 activations on the others"
BOTH = "; fp8 activations (w8a8) at 2..64 rows on 2 modules (mlp.gate_up_proj, lm_head), bf16 activations on the others"


def test_variants_run_only_when_named():
    every = fs.parse_case_list("all")
    for config in ("triton_fp8_gu", "triton_fp8_a8lm"):
        assert not any(c.endswith(":" + config) for c in every)
        assert not any(c.endswith(":" + config) for c in fs.parse_case_list("llama3-8b") + fs.parse_case_list("trained-8b"))
        named = [f"llama3-8b:{config}", f"kimi-k2-shape:{config}", f"trained-8b:s3:{config}", f"trained-8b:s5:{config}"]
        assert fs.parse_case_list(",".join(named)) == named
        assert fs.case_flags(named[0], 3)[:4] == ["--draft-backend", "triton", "--draft-weights", "fp8"]
    assert fs.CASE_ENV["triton_fp8_gu"] == {"SGLANG_PATCHES_FP8_INPUTS": "gate_up"}
    assert fs.CASE_ENV["triton_fp8_a8lm"] == {"SGLANG_PATCHES_FP8_INPUTS": "gate_up,lm_head"}


@pytest.mark.parametrize("config, tail, active", [
    ("triton_fp8_gu", GU, True), ("triton_fp8_gu", BOTH, False), ("triton_fp8_gu", "", False),
    ("triton_fp8_a8lm", BOTH, True), ("triton_fp8_a8lm", GU, False),
    ("triton_fp8", GU, True), ("triton_fp8", BOTH, True),  # the default's proof names FP8 weights only
])
def test_backend_proof_checks_the_fp8_input_modules(config, tail, active):
    got = fs.backend_proof(LINE + tail, config, {})
    assert got["active"] is active, got["active_why"]
    if not active:
        assert "fp8-activation modules" in got["active_why"] and config in got["active_why"]


def test_the_knob_values_are_what_the_server_accepts():
    from sglang_patches.server.draft_backend import fp8_weights

    for config, env in fs.CASE_ENV.items():
        mods = fp8_weights.fp8_input_modules(env)
        assert {m.split(".")[-1].replace("_proj", "") for m in mods} == fs.VARIANT_W8A8[config]
    assert fs.DEFAULT_W8A8 == {m.split(".")[-1].replace("_proj", "") for m in fp8_weights.DEFAULT_FP8_INPUTS}


def _case(accept, tail, build="b1", t=1.0):
    c = trained_case(accept, 300.0, 1800.0, t=t)
    return {**c, "backend_on_line": LINE + tail, "launcher_fp8": {"w8a8_modules": "x" if tail else None}}


def _run(cases, build="b1"):
    return {"fixture_builds": {"trained-8b": build}, "cases": cases}


def test_summary_reads_an_earlier_default_as_its_variant_and_the_gate_up_case_as_the_default():
    stock = trained_case(2.0, 300.0, 1800.0)
    earlier = _run({"trained-8b:s5:stock": stock, "trained-8b:s5:triton_fp8": _case(1.95, BOTH)})
    today = _run({"trained-8b:s5:triton_fp8_gu": _case(2.02, GU, t=2.0)})
    s = fs.summarize([("a.json", earlier), ("b.json", today)])
    assert s["default_view"] == {"trained-8b:s5:triton_fp8_a8lm": "trained-8b:s5:triton_fp8",
                                 "trained-8b:s5:triton_fp8": "trained-8b:s5:triton_fp8_gu"}
    assert s["accept_ratio_trained_8b_s5"] == 1.01 and s["accept_ratio_gu_trained_8b_s5"] == 1.01
    assert s["accept_ratio_a8lm_trained_8b_s5"] == 0.975
    assert set(s["cases"]) == {"trained-8b:s5:stock", "trained-8b:s5:triton_fp8_a8lm", "trained-8b:s5:triton_fp8",
                               "trained-8b:s5:triton_fp8_gu"}
    assert s["cases"]["trained-8b:s5:triton_fp8_a8lm"]["recorded_as"] == "trained-8b:s5:triton_fp8"
    assert s["cases"]["trained-8b:s5:triton_fp8"]["recorded_as"] == "trained-8b:s5:triton_fp8_gu"


def test_two_runs_of_triton_fp8_under_two_defaults_are_two_cases():
    """Relabelled per run before the merge: the later run's triton_fp8 does not replace the earlier
    default's as a duplicate of one name."""
    stock = trained_case(2.0, 300.0, 1800.0)
    s = fs.summarize([("a.json", _run({"trained-8b:s5:stock": stock, "trained-8b:s5:triton_fp8": _case(1.95, BOTH)})),
                      ("b.json", _run({"trained-8b:s5:triton_fp8": _case(2.02, GU, t=2.0)}))])
    assert s["accept_ratio_trained_8b_s5"] == 1.01 and s["accept_ratio_a8lm_trained_8b_s5"] == 0.975
    assert s["merged"]["duplicates"] == {}


def test_a_line_without_fp8_activations_is_weight_only_and_an_unknown_set_is_left_out():
    lm_only = BOTH.replace("2 modules (mlp.gate_up_proj, lm_head)", "1 modules (lm_head)")
    runs = [("a.json", _run({"trained-8b:s5:stock": trained_case(2.0, 300.0, 1800.0),
                             "trained-8b:s5:triton_fp8": {**_case(1.98, ""), "launcher_fp8": {"w8a8_modules": None}},
                             "trained-8b:s3:triton_fp8": _case(1.9, lm_only),
                             "trained-8b:s3:stock": trained_case(2.0, 300.0, 1800.0)}))]
    s = fs.summarize(runs)
    assert s["accept_ratio_wo_trained_8b_s5"] == 0.99 and s["accept_ratio_trained_8b_s5"] is None
    assert s["default_view_dropped"] == {"a.json": {"trained-8b:s3:triton_fp8": "its fp8-input modules are no "
                                                                                 "configuration of today's"}}


def test_an_earlier_default_beside_its_own_variant_in_one_run_is_left_out_and_said():
    runs = [("a.json", _run({"trained-8b:s5:triton_fp8": _case(1.95, BOTH),
                             "trained-8b:s5:triton_fp8_a8lm": _case(1.96, BOTH)}))]
    s = fs.summarize(runs)
    assert s["default_view_dropped"]["a.json"] == {"trained-8b:s5:triton_fp8": "its run also recorded "
                                                                                "trained-8b:s5:triton_fp8_a8lm"}
    assert "trained-8b:s5:triton_fp8" not in s["cases"]


def test_the_bench_refuses_an_inherited_fp8_inputs_knob(monkeypatch, capsys):
    monkeypatch.setenv("SGLANG_PATCHES_FP8_INPUTS", "gate_up,lm_head")
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(["--out", "/tmp/unused-fp8", "--cases", "llama3-8b:triton_fp8"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "unset it and name the variant cases instead" in err and err.count("\n") == 1


def test_a_default_case_of_the_current_default_stays_and_a_variant_on_another_build_is_not_paired():
    runs = [("a.json", _run({"trained-8b:s5:stock": trained_case(2.0, 300.0, 1800.0),
                             "trained-8b:s5:triton_fp8": _case(1.98, GU)})),
            ("b.json", _run({"trained-8b:s5:triton_fp8_a8lm": _case(1.9, BOTH)}, build="b2"))]
    s = fs.summarize(runs)
    assert s["default_view"] == {}
    assert s["accept_ratio_trained_8b_s5"] == 0.99
    assert "accept_ratio_a8lm_trained_8b_s5" not in s  # two builds: not compared


def test_run_case_gives_the_variant_its_environment(tmp_path, monkeypatch):
    seen = {}

    class Server:  # stands in for sglang_patches.offline.sweep.server.Server (a real one needs the GPU)
        def __init__(self, args, *, port, log_path, env=None):
            seen["env"], self.cmd, self.log_path = env, ["python", "-m", "sglang_patches.launch", *args], log_path

        def start(self):
            raise RuntimeError("no GPU here")

        def stop(self):
            pass

    import sglang_patches.offline.sweep.server as server_mod

    monkeypatch.setattr(server_mod, "Server", Server)
    fx = type("Fx", (), {"draft": str(tmp_path), "model_flags": lambda self: ["--model-path", "m"]})()
    (tmp_path / "config.json").write_text('{"hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2, '
                                          '"vocab_size": 32, "num_hidden_layers": 1}')
    args = bench.parse_args(["--out", str(tmp_path / "out"), "--cases", "trained-8b:s5:triton_fp8_gu"])
    rec = bench.run_case(args, "trained-8b:s5:triton_fp8_gu", fx, 30001, {"copy_bandwidth": {}}, tmp_path / "d.json")
    assert seen["env"] == {"SGLANG_PATCHES_FP8_INPUTS": "gate_up"}
    assert rec["server_cmd"].startswith("SGLANG_PATCHES_FP8_INPUTS=gate_up python -m sglang_patches.launch")
    assert rec["error"].startswith("RuntimeError: no GPU here")


def _timing(bs1, bs8, tail=None):
    """A dummy-fixture case: draft p50 at bs 1 and 8; a triton case carries its load line (`tail`)."""
    c = {"error": None, "active": True, "t_end": 1.0, "bs": {"1": {"draft_ms_p50": bs1}, "8": {"draft_ms_p50": bs8}}}
    return c if tail is None else {**c, "backend_on_line": LINE + tail, "launcher_fp8": {"w8a8_modules": "x"}}


def test_the_earlier_default_gives_the_default_s_batch_1_figures_alone():
    """At one row both defaults run the same GEMV kernels: an earlier default's bs-1 draft time serves as
    the default's where no default case ran, its bs-8 time does not (there the lm_head's inputs differ)."""
    run = _run({"kimi-k2-shape:stock": _timing(0.96, 0.99), "kimi-k2-shape:sglang_fp8": _timing(0.69, 0.71),
                "kimi-k2-shape:triton_fp8": _timing(0.56, 0.71, BOTH)})
    s = fs.summarize([("a.json", run)])
    assert s["default_view"]["kimi-k2-shape:triton_fp8"] == "kimi-k2-shape:triton_fp8 (bs 1 only)"
    assert s["draft_speedup_bs1_kimi_k2_shape"] == round(0.96 / 0.56, 4)
    assert s["draft_speedup_vs_sglang_fp8_bs1_kimi_k2_shape"] == round(0.69 / 0.56, 4)
    assert s["draft_speedup_bs8_kimi_k2_shape"] is None  # not the same kernels at 8 rows
    today = _run({"kimi-k2-shape:triton_fp8": _timing(0.55, 0.70, GU)})  # a default case ran: it is used
    s = fs.summarize([("a.json", run), ("b.json", today)])
    assert s["draft_speedup_bs1_kimi_k2_shape"] == round(0.96 / 0.55, 4)
    assert s["draft_speedup_bs8_kimi_k2_shape"] == round(0.99 / 0.70, 4)
