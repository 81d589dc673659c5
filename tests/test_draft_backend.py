"""--draft-backend selection: overlay flags and config, launcher refusals / fallback, the feature
builder and the version check (the AST fingerprints each compat file pins, checked against the
installed SGLang and against the sources of 0.5.17 and 0.5.23 whichever is on the path). The
forward numerics are in tests/test_draft_backend_model.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from sglang_patches import compat

from sglang_patches.server import draft_backend
import sglang_patches.compat.contacts  # noqa: F401 - compat.contacts.module_file
from sglang_patches.compat import v0_5_17, v0_5_23
from sglang_patches.server.draft_backend import forward
from sglang_patches.server.draft_backend import launch_check
from sglang_patches.errors import PatchTargetError, UserError
from sglang_patches.launch_args import overlay_config, split_overlay_args
from sglang_patches.vocab.overlay_config import ENV_VAR, FEATURES, OPTIONAL_FEATURES, OverlayConfig, parse_patch_list

REPO = Path(__file__).resolve().parents[1]
SITE_0523 = os.environ.get("SGP_SGLANG_0523_SITE", str(REPO / ".venv-test" / "sglang-0523"))
SITE_0517 = sysconfig.get_paths()["purelib"]  # the test venv's own sglang (0.5.17), also under 0.5.23


def _cfg(argv):
    ns, rest = split_overlay_args(argv)
    return ns, rest, overlay_config(ns)


def _drafter(tmp_path, name="drafter", **over):
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "torch_dtype": "bfloat16", "hidden_size": 64}
    cfg.update(over)
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


# ---------------------------------------------------------------- flags and config

def test_flags_select_the_feature_never_by_default():
    assert "triton_draft" in OPTIONAL_FEATURES and "triton_draft" not in FEATURES
    assert "triton_draft" not in parse_patch_list("all")
    _, rest, cfg = _cfg(["--model-path", "m", "--tp", "2"])
    assert cfg.draft_backend == "sglang" and "triton_draft" not in cfg.patches and rest == ["--model-path", "m", "--tp", "2"]
    ns, rest, cfg = _cfg(["--draft-backend", "triton", "--model-path", "m", "--draft-backend-fallback"])
    assert rest == ["--model-path", "m"] and ns.draft_backend_fallback
    assert cfg.draft_backend == "triton" and cfg.patches == FEATURES + ("triton_draft",) and cfg.draft_backend_fallback
    _, _, cfg = _cfg(["--patches", "none", "--draft-backend=triton"])
    assert cfg.patches == ("triton_draft",)
    _, _, cfg = _cfg(["--patches", "all,triton_draft"])  # the feature and the flag are one switch
    assert cfg.draft_backend == "triton"
    with pytest.raises(UserError, match="invalid choice: 'cuda'"):  # one line, no usage dump
        split_overlay_args(["--draft-backend", "cuda"])


def test_overlay_config_round_trip_and_validation():
    cfg = OverlayConfig(patches=("timing", "triton_draft"), draft_backend="triton", draft_backend_fallback=True)
    assert OverlayConfig.from_json(cfg.to_env()) == cfg
    assert OverlayConfig().draft_backend == "sglang" and OverlayConfig().draft_backend_fallback is False
    with pytest.raises(UserError, match="draft_backend"):
        OverlayConfig.from_json('{"draft_backend": "cuda"}')


# ---------------------------------------------------------------- launcher checks (pure)

@pytest.mark.parametrize("cfg,flag,want", [
    ({"torch_dtype": "bfloat16"}, None, "bfloat16"), ({"dtype": "float16"}, "auto", "float16"),
    ({"torch_dtype": "float32"}, None, "float16"), ({}, None, "float16"),
    ({"torch_dtype": "bfloat16"}, "float32", "float32"), ({"torch_dtype": "float32"}, "half", "float16"),
])
def test_effective_dtype_follows_sglang(cfg, flag, want):
    assert launch_check.effective_dtype(cfg, flag) == want


def test_problem(tmp_path):
    good = _drafter(tmp_path)
    base = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", good]
    assert launch_check.problem(base) is None
    assert "needs --speculative-algorithm EAGLE3" in launch_check.problem(base[2:])
    assert "would run in float32" in launch_check.problem(base + ["--dtype", "float32"])
    assert "torch.compile" in launch_check.problem(base + ["--enable-torch-compile"])
    assert "deterministic" in launch_check.problem(base + ["--enable-deterministic-inference"])
    eagle1 = _drafter(tmp_path, "eagle1", architectures=["LlamaForCausalLMEagle"])
    msg = launch_check.problem(["--speculative-algorithm", "EAGLE3", "--speculative-draft-model", eagle1])
    assert "supports LlamaForCausalLMEagle3 drafters only" in msg and "LlamaForCausalLMEagle" in msg
    hub = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "org/some-hub-id"]
    assert launch_check.problem(hub) is None  # decided in the server (prepare.check_model)


def test_resolve_refuses_or_falls_back(tmp_path, capsys):
    bad = _drafter(tmp_path, architectures=["Qwen2ForCausalLMEagle3"])
    argv = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", bad]
    cfg = OverlayConfig(patches=FEATURES + ("triton_draft",), draft_backend="triton")
    with pytest.raises(UserError, match="--draft-backend-fallback") as ei:
        launch_check.resolve(cfg, argv, fallback=False)
    assert ei.value.code == 2 and "\n" not in str(ei.value)
    out = launch_check.resolve(cfg, argv, fallback=True)
    assert out.draft_backend == "sglang" and out.patches == FEATURES
    assert "falling back to --draft-backend sglang" in capsys.readouterr().err
    sg = OverlayConfig()
    assert launch_check.resolve(sg, argv, fallback=False) is sg


# ---------------------------------------------------------------- the launcher itself

def _env():
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop(ENV_VAR, None)
    return env


def test_launcher_refuses_unsupported_architecture_one_line(tmp_path):
    bad = _drafter(tmp_path, architectures=["LlamaForCausalLM"])
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "sglang_patches.launch", "--model-path", "org/target",
                        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", bad,
                        "--draft-backend", "triton", "--device", "cpu"],
                       capture_output=True, text=True, env=_env(), cwd=REPO, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sglang-patches: error: --draft-backend triton supports "
                                                   "LlamaForCausalLMEagle3 drafters only"), r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert time.monotonic() - t0 < 30, "refused before spawning anything"


def _main_until_serve(monkeypatch, argv):
    from sglang_patches import launch

    seen = {}

    def fake_serve(sglang_argv, exit_on_collapse=False, features=(), said=()):
        seen["argv"], seen["exit_on_collapse"] = sglang_argv, exit_on_collapse
        seen["config"] = OverlayConfig.from_json(os.environ[ENV_VAR])
        return 0

    monkeypatch.setattr(launch, "serve", fake_serve)
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert launch.main(argv) == 0
    return seen


def test_launcher_fallback_warns_and_starts_with_sglang_backend(tmp_path, monkeypatch, capsys):
    bad = _drafter(tmp_path, torch_dtype="float32")
    argv = ["--model-path", "org/target", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", bad,
            "--dtype", "float32", "--draft-backend", "triton", "--draft-backend-fallback"]
    seen = _main_until_serve(monkeypatch, argv)
    err = capsys.readouterr().err
    assert "would run in float32" in err and "falling back to --draft-backend sglang" in err
    assert seen["config"].draft_backend == "sglang" and "triton_draft" not in seen["config"].patches
    assert "--draft-backend" not in " ".join(seen["argv"])  # overlay flags never reach SGLang


def test_launcher_supported_drafter_enables_feature(tmp_path, monkeypatch, capsys):
    good = _drafter(tmp_path)
    seen = _main_until_serve(monkeypatch, ["--model-path", "org/target", "--speculative-algorithm", "EAGLE3",
                                           "--speculative-draft-model-path", good, "--draft-backend", "triton"])
    assert seen["config"].draft_backend == "triton" and "triton_draft" in seen["config"].patches
    err = capsys.readouterr().err  # a supported drafter: nothing about the draft backend to warn about
    assert "draft-backend" not in err and "falling back" not in err and "triton" not in err, err
    assert seen["exit_on_collapse"] is False  # the alarm's default action is warn


def test_launcher_passes_on_accept_collapse_exit_to_serve(tmp_path, monkeypatch):
    """serve() refuses several tokenizer workers (whose uvicorn supervisor swallows the stop
    signal) only when it knows the alarm may stop the server."""
    seen = _main_until_serve(monkeypatch, ["--model-path", "org/target", "--speculative-algorithm", "EAGLE3",
                                           "--speculative-draft-model-path", _drafter(tmp_path),
                                           "--on-accept-collapse", "exit"])
    assert seen["exit_on_collapse"] is True and seen["config"].on_accept_collapse == "exit"


def test_print_patches_lists_the_four_hooks(capsys):
    from sglang_patches import launch

    assert launch.main(["--print-patches", "--patches", "none", "--draft-backend", "triton"]) == 0
    out = capsys.readouterr().out
    assert "4 hooks in features: triton_draft" in out
    c = compat.current()
    for ct in (c.PREPARE_DRAFTER, c.EAGLE3_LAYER_FORWARD, c.EAGLE3_MODEL_FORWARD, c.LLAMA_MLP_FORWARD):
        assert ct.target in out


# ---------------------------------------------------------------- version safety

def test_fingerprints_match_installed_sglang():
    """Whichever SGLang is installed (0.5.17, or 0.5.23 first on the path), its compat file's pins hold."""
    pytest.importorskip("sglang")
    assert draft_backend.moved_targets() == [] and draft_backend.refusal() is None
    c = compat.current()
    assert [s.target for s in draft_backend.specs()] == [ct.target for ct in (
        c.PREPARE_DRAFTER, c.EAGLE3_LAYER_FORWARD, c.EAGLE3_MODEL_FORWARD, c.LLAMA_MLP_FORWARD)]


def _site(site, version):
    from sglang_patches.compat.static_targets import sglang_version_at

    if not os.path.isdir(os.path.join(site, "sglang")) or sglang_version_at(site) != version:
        pytest.skip(f"sglang {version} sources not at {site} (tests/run_cpu.sh installs them)")
    return site


@pytest.mark.parametrize("version,site,c", [("0.5.17", SITE_0517, v0_5_17), ("0.5.23", SITE_0523, v0_5_23)])
def test_each_version_against_its_compat_file(version, site, c):
    results, reason = draft_backend.static_check(_site(site, version), c=c)
    assert [r.ok for r in results] == [True] * 4, results
    assert reason is None and draft_backend.moved_targets(site, c) == []
    bad = [(ct.target, ct.check_static(site)) for ct in c.contacts()
           if ct.feature == "triton_draft" and not ct.check_static(site)[0]]
    assert bad == []  # every triton_draft contact of the file, the 0.5.23 pass-through reads included


def test_0523_llama_mlp_forward_is_refused_by_the_0517_pins():
    """What the 0.5.23 pins exist for: 0.5.23's rewritten LlamaMLP.forward (dual_gemm,
    activation_quant) fails the 0.5.17 fingerprint, and 0.5.17's fails 0.5.23's, so neither file's
    re-implementation can run on the other version's source."""
    site23, site17 = _site(SITE_0523, "0.5.23"), _site(SITE_0517, "0.5.17")
    assert draft_backend.moved_targets(site23, v0_5_17) == [v0_5_17.LLAMA_MLP_FORWARD.target]
    assert draft_backend.moved_targets(site17, v0_5_23) == [v0_5_23.LLAMA_MLP_FORWARD.target]
    reason = draft_backend.refusal(site23, "0.5.23", v0_5_17)
    assert "sglang_patches/compat/v0_5_17.py" in reason
    assert "sglang 0.5.23 LlamaMLP.forward (llama.py) changed" in reason and "\n" not in reason


def test_each_pin_selects_the_reimplementation_of_that_source():
    for c in (v0_5_17, v0_5_23):
        assert draft_backend.unimplemented(c) == []
    mlp = {c: [s.fn for s in draft_backend.hook_specs(c) if s.target == c.LLAMA_MLP_FORWARD.target] for c in
           (v0_5_17, v0_5_23)}
    assert mlp == {v0_5_17: [forward.mlp_forward_0517], v0_5_23: [forward.mlp_forward_0523]}
    # the layer and model forwards are the same source in both versions, so the same hooks
    assert v0_5_17.EAGLE3_LAYER_FINGERPRINT.expected == v0_5_23.EAGLE3_LAYER_FINGERPRINT.expected
    assert v0_5_17.EAGLE3_MODEL_FINGERPRINT.expected == v0_5_23.EAGLE3_MODEL_FINGERPRINT.expected


def test_pin_without_reimplementation_refuses_or_falls_back(monkeypatch, caplog):
    """A compat file that pins a new LlamaMLP.forward hash nobody re-implemented: refused, not the
    nearest forward run against a source it was not written for."""
    pytest.importorskip("sglang")
    c = compat.current()
    monkeypatch.setitem(forward.FORWARDS, "mlp", {})
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(PatchTargetError, match=r"no re-implementation of the LlamaMLP.forward \(llama.py\)") as ei:
        draft_backend.specs()
    assert c.__name__.replace(".", "/") + ".py" in str(ei.value)
    monkeypatch.setenv(ENV_VAR, OverlayConfig(draft_backend="triton", draft_backend_fallback=True).to_env())
    assert draft_backend.specs() == []
    assert "falling back to the sglang draft backend" in caplog.text


def test_fingerprint_ignores_python_version_fields(tmp_path):
    """The GPU machine runs Python 3.12 (FunctionDef gains `type_params`), CI 3.11: same source, same hash."""
    import ast

    src = tmp_path / "m.py"
    src.write_text("class A:\n    def forward(self, x):\n        return x + 1  # comment\n")
    before = draft_backend.fingerprint(str(src), "A.forward")
    node = ast.parse(src.read_text()).body[0].body[0]
    node._fields = tuple(node._fields) + ("type_params",)  # what Python 3.12's FunctionDef carries
    node.type_params = []
    assert draft_backend._canonical(node) == draft_backend._canonical(ast.parse(src.read_text()).body[0].body[0])
    src.write_text("class A:\n\n    def forward(self, x):\n        # moved and commented\n        return x + 1\n")
    assert draft_backend.fingerprint(str(src), "A.forward") == before  # positions and comments do not count
    src.write_text("class A:\n    def forward(self, x):\n        return x + 2\n")
    assert draft_backend.fingerprint(str(src), "A.forward") != before


def test_fingerprints_same_under_other_pythons():
    """Where pyenv has other Pythons (as on the dev machine), the 0.5.17 fingerprints must not move."""
    import shutil
    import subprocess

    pytest.importorskip("sglang")
    code = ("import importlib.util,sys; s=importlib.util.spec_from_file_location('m', sys.argv[1]); "
            "m=importlib.util.module_from_spec(s); s.loader.exec_module(m); "
            "print(m.fingerprint(sys.argv[2], 'LlamaMLP.forward'))")
    helper = os.path.join(os.path.dirname(draft_backend.__file__), "fingerprint.py")
    mlp = compat.current().LLAMA_MLP_FINGERPRINT
    mlp_file = compat.contacts.module_file(compat.installed_site(), mlp.module)
    ran = 0
    for exe in ("python3.10", "python3.12", "python3.13"):
        path = shutil.which(exe)
        if not path:
            continue
        env = {**os.environ, "PYENV_VERSION": {"python3.10": "3.10.13", "python3.12": "3.12.1",
                                                 "python3.13": "3.13.0"}[exe]}
        out = subprocess.run([path, "-c", code, helper, mlp_file], capture_output=True, text=True, env=env)
        if out.returncode != 0:
            continue  # a pyenv shim without that version installed
        assert out.stdout.strip() == mlp.expected, exe
        ran += 1
    if not ran:
        pytest.skip("no other Python version on this machine")


def test_builder_refuses_moved_target_or_falls_back(monkeypatch, caplog):
    pytest.importorskip("sglang")
    import dataclasses

    c = compat.current()
    monkeypatch.setattr(c, "LLAMA_MLP_FINGERPRINT", dataclasses.replace(c.LLAMA_MLP_FINGERPRINT, expected="0" * 16))
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(PatchTargetError, match=r"LlamaMLP.forward \(llama.py\) changed"):
        draft_backend.specs()
    monkeypatch.setenv(ENV_VAR, OverlayConfig(draft_backend="triton", draft_backend_fallback=True).to_env())
    assert draft_backend.specs() == []
    assert "falling back to the sglang draft backend" in caplog.text
