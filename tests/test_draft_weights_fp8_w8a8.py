"""--draft-weights fp8's per-module kernel choice, and fp8-weight-only, on SGLang's real EAGLE-3 drafter
modules on CPU (Triton interpreter; the same tiny bf16 drafter as test_draft_weights_fp8.py).

Checked: under `fp8` gate_up (by default; gate_up and the lm_head with SGLANG_PATCHES_FP8_INPUTS=gate_up,lm_head)
runs fp8_w8a8_linear at 2..MAX_M rows (the call reaches that
kernel, the output matches fp8_w8a8_linear_ref within the kernel tests' bf16 bound and is further from
the weight-only reference, the shared x8 buffer holds torch's per-token quantization of the input
afterwards) and fp8_linear at 1 row (matching fp8_linear_ref); qkv, o, down, fc (and by default the
lm_head) run fp8_linear;
the x8 / xs buffers are allocated once in install (same data_ptr across calls, one pair for the
modules of one K) and a call allocates only its output; under `fp8-weight-only` every module runs
fp8_linear. The kernels are not mocked: each is wrapped only to record that it was called.
"""
from __future__ import annotations

import pytest

from sglang_patches.errors import UserError

pytest.importorskip("torch")
pytest.importorskip("triton")

from test_draft_backend_model import _write_configs, run_result_script  # noqa: E402
from test_draft_weights_fp8 import _SCRIPT as _FP8_SCRIPT  # noqa: E402

# the other test's script up to its checks: imports, the 1-rank world, build(), ours(), rel()
_PRELUDE = _FP8_SCRIPT[:_FP8_SCRIPT.index('res = {"sglang"')]
_SCRIPT = _PRELUDE + r"""
from sglang_patches.kernels.fp8_w8a8_linear import fp8_w8a8_linear_ref, quantize_fp8_per_token_ref
from sglang_patches.server.draft_backend.fp8_weights import describe

def run(weights, inputs=None):
    import os
    if inputs is None:
        os.environ.pop("SGLANG_PATCHES_FP8_INPUTS", None)
    else:
        os.environ["SGLANG_PATCHES_FP8_INPUTS"] = inputs
    d = build("norms")
    H = d.config.hidden_size
    summary = prepare.prepare_drafter(d, weights, strict=True)
    fp8s = {n: d.get_submodule(n).quant_method.fp8 for n in ours(d)}
    fp8s["model.fc"] = d.model.__dict__[FLAG].fc8
    calls = []
    for n, f in fp8s.items():
        for attr in ("_linear", "_w8a8"):
            if getattr(f, attr) is not None:
                setattr(f, attr, lambda *a, _r=getattr(f, attr), _k=attr, **k: (calls.append(_k), _r(*a, **k))[1])
    out = {"summary": {k: v for k, v in summary["fp8"].items()}, "modules": {}}
    out["line"] = describe(summary["fp8"], summary["fp8"]["refused"], summary["fp8"]["notes"])
    for n, f in fp8s.items():
        mod = None if n == "model.fc" else d.get_submodule(n)
        rec = {"x8_ptr": None if f.x8 is None else f.x8.data_ptr(), "x8_shape": None if f.x8 is None else list(f.x8.shape),
               "xs_ptr": None if f.xs is None else f.xs.data_ptr(), "k": f.k, "by_m": {}}
        for m in (1, 2, 7, MAX_M):
            x = torch.randn(m, f.k, generator=torch.Generator().manual_seed(m)).to(torch.bfloat16)
            calls.clear()
            allocs = []
            real_empty = torch.empty
            torch.empty = lambda *a, **k: (allocs.append(1), real_empty(*a, **k))[1]
            try:
                with torch.inference_mode():
                    if n == "model.fc":
                        y = f(x, d.model.fc.bias)
                    elif n.startswith("lm_head"):
                        y = d.logits_processor._compute_lm_head(x, mod, None)
                    else:
                        y = mod(x)[0]
            finally:
                torch.empty = real_empty
            wo, aa = fp8_linear_ref(x, f.w8, f.scale), fp8_w8a8_linear_ref(x, f.w8, f.scale)
            r = {"calls": list(calls), "allocs": len(allocs), "err_wo": rel(y, wo), "err_w8a8": rel(y, aa),
                 "abs_w8a8": float((y.float() - aa.float()).abs().max()), "max_ref": float(aa.float().abs().max())}
            if f.x8 is not None and m >= 2:
                q8, qs = quantize_fp8_per_token_ref(x)
                r["x8_is_input"] = bool(torch.equal(f.x8[:m].float(), q8.float()) and torch.equal(f.xs[:m], qs))
            r["x8_ptr_after"] = None if f.x8 is None else f.x8.data_ptr()
            rec["by_m"][str(m)] = r
        out["modules"][n] = rec
    REGISTRY.undo()
    return out

def bad_knob(weights="fp8", value="lm_hed"):  # refused in the server too (plugin, Engine), before any change
    import os
    os.environ["SGLANG_PATCHES_FP8_INPUTS"] = value
    d = build("norms")
    try:
        prepare.prepare_drafter(d, weights, strict=False)
        return {"raised": None}
    except Exception as err:
        return {"raised": type(err).__name__, "msg": str(err), "marked": prepare.marked_modules(d),
                "methods": sorted({type(m.quant_method).__name__ for m in d.modules() if hasattr(m, "quant_method")})}
    finally:
        os.environ.pop("SGLANG_PATCHES_FP8_INPUTS")

res = {"max_m": MAX_M, "fp8": run("fp8"), "both": run("fp8", "gate_up,lm_head"), "wo": run("fp8-weight-only"),
       "bad_knob": bad_knob(), "wo_knob": bad_knob("fp8-weight-only", "gate_up")}
print("RESULT" + json.dumps(res))
"""


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    pytest.importorskip("sglang")
    root = tmp_path_factory.mktemp("draft_fp8_w8a8")
    _write_configs(root)
    return run_result_script(_SCRIPT, root)


# the measured choice (fp8_weights.DEFAULT_FP8_INPUTS, and W8A8_MODULES under the environment knob),
# spelled out independently here
W8A8 = {"fp8": lambda n: n.endswith("mlp.gate_up_proj"),
        "both": lambda n: n.endswith("mlp.gate_up_proj") or n.startswith("lm_head")}
EXPECT = {"fp8": ["model.layers.0.mlp.gate_up_proj", "model.layers.1.mlp.gate_up_proj"],
          "both": ["lm_head", "model.layers.0.mlp.gate_up_proj", "model.layers.1.mlp.gate_up_proj"]}


EPS_BF16 = 2.0 ** -7
REF_TOL = 1e-2  # weight-only modules vs fp8_linear_ref (test_draft_weights_fp8.py)


@pytest.mark.parametrize("mode", ["fp8", "both"])
def test_fp8_input_modules_run_fp8_activations_from_two_rows(result, mode):
    mods, is_w8a8 = result[mode]["modules"], W8A8[mode]
    assert sorted(n for n in mods if is_w8a8(n)) == EXPECT[mode]
    assert sorted(n for n, rec in mods.items() if rec["x8_ptr"] is not None) == EXPECT[mode]
    for n, rec in mods.items():
        if not is_w8a8(n):
            continue
        for m, r in rec["by_m"].items():
            if m == "1":
                assert r["calls"] == ["_linear"], (n, r)  # fp8_linear's GEMV path
                assert r["err_wo"] <= REF_TOL, (n, r)
                continue
            assert r["calls"] == ["_w8a8"], (n, m, r)
            # the kernel tests' bound: 2 bf16 ulps of the output's max (tests/test_kernel_fp8_w8a8.py)
            assert r["abs_w8a8"] <= 2 * EPS_BF16 * r["max_ref"] + 1e-6, (n, m, r)
            assert r["err_wo"] > r["err_w8a8"], (n, m, "activation rounding must show against weight-only")
            assert r["x8_is_input"] is True, (n, m)


@pytest.mark.parametrize("mode", ["fp8", "both"])
def test_other_modules_keep_fp8_linear(result, mode):
    for n, rec in result[mode]["modules"].items():
        if W8A8[mode](n):
            continue
        assert rec["x8_ptr"] is None, n
        for m, r in rec["by_m"].items():
            assert r["calls"] == ["_linear"], (n, m, r)
            assert r["err_wo"] <= REF_TOL, (n, m, r)


@pytest.mark.parametrize("mode", ["fp8", "both"])
def test_activation_buffers_are_allocated_once_and_shared_per_k(result, mode):
    mods = result[mode]["modules"]
    w8a8 = {n: rec for n, rec in mods.items() if W8A8[mode](n)}
    assert len({rec["k"] for rec in w8a8.values()}) == 1  # gate_up and lm_head both read the hidden size
    assert len({rec["x8_ptr"] for rec in w8a8.values()}) == 1 and len({rec["xs_ptr"] for rec in w8a8.values()}) == 1
    for n, rec in w8a8.items():
        assert rec["x8_shape"] == [result["max_m"], rec["k"]], n
        for m, r in rec["by_m"].items():
            assert r["x8_ptr_after"] == rec["x8_ptr"], (n, m)
            assert r["allocs"] == 1, (n, m, r)  # the output only: x8, xs and the workspace are install's
    summary = result[mode]["summary"]
    assert sorted(summary["w8a8"]) == sorted(w8a8)
    k = next(iter(w8a8.values()))["k"]
    assert summary["act_bytes"] == result["max_m"] * k + 4 * result["max_m"]


def test_weight_only_runs_fp8_linear_everywhere(result):
    mods = result["wo"]["modules"]
    assert len(mods) == len(result["fp8"]["modules"])
    for n, rec in mods.items():
        assert rec["x8_ptr"] is None, n
        for m, r in rec["by_m"].items():
            assert r["calls"] == ["_linear"], (n, m, r)
            assert r["err_wo"] <= REF_TOL, (n, m, r)
    assert result["wo"]["summary"]["w8a8"] == [] and result["wo"]["summary"]["act_bytes"] == 0


def test_load_line_says_which_modules_run_fp8_activations(result):
    line = result["fp8"]["line"]
    assert f"fp8 activations (w8a8) at 2..{result['max_m']} rows on 2 modules (mlp.gate_up_proj x2)," in line
    assert "\n" not in line
    both = f"fp8 activations (w8a8) at 2..{result['max_m']} rows on 3 modules (mlp.gate_up_proj x2, lm_head)"
    assert both in result["both"]["line"]
    assert "bf16 activations on every module (--draft-weights fp8-weight-only)" in result["wo"]["line"]


# ---------------------------------------------------------------- workspace, config and launcher

def test_workspace_covers_the_w8a8_path_at_every_m():
    torch = pytest.importorskip("torch")
    from sglang_patches.kernels import fp8_linear as k
    from sglang_patches.kernels.fp8_w8a8_linear import fp8_w8a8_linear
    from sglang_patches.server.draft_backend import fp8_weights

    shapes = list(k._TUNED) + [(n // tp, kk) for n, kk in k._TUNED for tp in (2, 4, 8)]
    for n, kk in shapes:
        f = fp8_weights.Fp8Weights.__new__(fp8_weights.Fp8Weights)
        f.n, f.k, f.max_m, f._w8a8 = n, kk, k.MAX_M, fp8_w8a8_linear
        got = f.workspace_numel()
        for m in range(2, k.MAX_M + 1):  # the w8a8 launcher's split: the MMA config's, by the public config
            assert got >= k.fp8_linear_workspace_numel(m, n, k.fp8_linear_config(m, n, kk)["split_k"]), (n, kk, m)
    # a split-K shape run through the kernel with exactly that workspace: accepted, and correct
    from sglang_patches.kernels.fp8_w8a8_linear import fp8_w8a8_linear_ref

    lin = torch.nn.Linear(4096, 256, bias=False).to(torch.bfloat16)
    f = fp8_weights.Fp8Weights(lin.weight, w8a8=True)
    assert k.fp8_linear_config(5, 256, 4096)["split_k"] > 1
    ws = torch.empty(f.workspace_numel(), dtype=torch.float32)
    x = torch.randn(5, 4096, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    y = fp8_w8a8_linear(x, f.w8, f.scale, workspace=ws)
    ref = fp8_w8a8_linear_ref(x, f.w8, f.scale)
    assert float((y.float() - ref.float()).abs().max()) <= 2 * EPS_BF16 * float(ref.float().abs().max()) + 1e-6


def test_help_explains_the_difference():
    import argparse

    from sglang_patches.launch_args import add_overlay_args

    p = argparse.ArgumentParser()
    add_overlay_args(p)
    (act,) = [a for a in p._actions if a.dest == "draft_weights"]
    assert tuple(act.choices) == ("bf16", "fp8", "fp8-weight-only")
    assert ("fp8 also quantises the activations per token for gate_up at 2..64 rows (native fp8 MMA; the lm_head "
            "keeps bf16 inputs, which hold acceptance), fp8-weight-only keeps bf16 activations in every module") in act.help
    assert "fp8-weight-only" in p.format_help()


@pytest.mark.parametrize("argv, expect", [
    (["--speculative-draft-model-quantization", "fp8"], "both quantise the drafter"),
    (["--quantization", "fp8"], "add --speculative-draft-model-quantization unquant"),
    (["--device", "cpu"], "needs a CUDA GPU"),
])
def test_launcher_checks_weight_only_like_fp8_and_names_it(argv, expect):
    """fp8-weight-only is refused where fp8 is (test_draft_weights_fp8.py), and the line says
    fp8-weight-only (the user's own flag), not fp8."""
    from sglang_patches.launch_args import overlay_config, split_overlay_args
    from sglang_patches.server.draft_backend.launch_check import check_weights

    cfg = overlay_config(split_overlay_args(["--draft-weights", "fp8-weight-only", "--draft-backend", "triton"])[0])
    with pytest.raises(UserError, match=expect) as exc:
        check_weights(cfg, argv)
    assert "--draft-weights fp8-weight-only" in str(exc.value) and "--draft-weights fp8 " not in str(exc.value)


@pytest.mark.parametrize("value", ["lm_hed", "", "gate_up,qkv"])
def test_launcher_refuses_an_unknown_fp8_inputs_value_in_one_line(monkeypatch, value):
    """The benchmark A/B's SGLANG_PATCHES_FP8_INPUTS is checked before anything starts (the server reads
    it again at install): one line naming the variable and the accepted names."""
    from sglang_patches.launch_args import overlay_config, split_overlay_args
    from sglang_patches.server.draft_backend.launch_check import check_weights

    monkeypatch.setenv("SGLANG_PATCHES_FP8_INPUTS", value)
    cfg = overlay_config(split_overlay_args(["--draft-weights", "fp8", "--draft-backend", "triton"])[0])
    with pytest.raises(UserError, match="SGLANG_PATCHES_FP8_INPUTS=.*gate_up, lm_head") as exc:
        check_weights(cfg, [])
    assert "\n" not in str(exc.value)
    monkeypatch.setenv("SGLANG_PATCHES_FP8_INPUTS", "lm_head, gate_up")
    assert check_weights(cfg, []) is cfg  # accepted (no CUDA here: the GPU check has nothing to refuse)


def test_a_bad_knob_is_refused_in_the_server_before_anything_changes(result):
    got = result["bad_knob"]
    assert got["raised"] == "Fp8Unsupported" and got["marked"] == [], got
    assert got["msg"] == ("SGLANG_PATCHES_FP8_INPUTS='lm_hed': give a comma list among gate_up, lm_head, "
                          "or unset it for the default (gate_up); for none, --draft-weights fp8-weight-only")
    assert "Fp8DraftLinearMethod" not in got["methods"]


def test_the_knob_beside_weight_only_is_refused_in_the_server(result):
    """fp8-weight-only runs every module on bf16 inputs: the knob would be ignored without a word."""
    got = result["wo_knob"]
    assert got["raised"] == "Fp8Unsupported" and got["marked"] == [], got
    assert got["msg"].startswith("SGLANG_PATCHES_FP8_INPUTS='gate_up' applies to --draft-weights fp8 only")
    assert "Fp8DraftLinearMethod" not in got["methods"]


def test_launcher_refuses_the_knob_beside_weight_only(monkeypatch):
    from sglang_patches.launch_args import overlay_config, split_overlay_args
    from sglang_patches.server.draft_backend.launch_check import check_weights

    flags = ["--draft-weights", "fp8-weight-only", "--draft-backend", "triton"]
    cfg = overlay_config(split_overlay_args(flags)[0])
    assert check_weights(cfg, []) is cfg  # unset: accepted
    monkeypatch.setenv("SGLANG_PATCHES_FP8_INPUTS", "gate_up,lm_head")
    with pytest.raises(UserError, match="unset it, or use --draft-weights fp8$") as exc:
        check_weights(cfg, [])
    assert "\n" not in str(exc.value)


def test_fp8_input_modules_reads_the_knob_in_module_order():
    from sglang_patches.server.draft_backend import fp8_weights as f

    assert f.fp8_input_modules({}) == ("mlp.gate_up_proj",)
    assert f.fp8_input_modules({f.FP8_INPUTS_ENV: "lm_head,gate_up"}) == ("mlp.gate_up_proj", "lm_head")
    assert f.fp8_input_modules({f.FP8_INPUTS_ENV: "lm_head"}) == ("lm_head",)
    assert not f.runs_w8a8("lm_head") and f.runs_w8a8("model.layers.3.mlp.gate_up_proj")
    assert f.runs_w8a8("lm_head", "fp8", ("lm_head",)) and not f.runs_w8a8("lm_head", "fp8-weight-only", ("lm_head",))
