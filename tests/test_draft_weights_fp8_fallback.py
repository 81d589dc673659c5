"""--draft-weights fp8 on a GPU without FP8 (compute capability < 8.9): refused in one line, exit 2,
nothing changed (the check runs before any fixture build or cache repair); with
--draft-backend-fallback one warning line and the triton backend with bf16 drafter weights.

MOCKS (no GPU on this machine): torch.cuda's device answers. get_device_capability is the one under
test; is_available and device_count make a GPU visible (without them capability_problem, and the
launcher's GPU check, see no CUDA and never ask for the capability) and get_device_name names it.
The launcher path that would start SGLang (launch.serve) is replaced where a test runs main() to its
end, and says so.
"""
from __future__ import annotations

import hashlib

import pytest
from bad_input_corpus import pair

from sglang_patches.errors import UserError

torch = pytest.importorskip("torch")


@pytest.fixture
def gpu(monkeypatch):
    """MOCK: one visible CUDA GPU of the capability set by the test (see the module docstring)."""
    state = {"cap": (8, 6), "asked": 0}

    def cap(i=None):
        state["asked"] += 1
        return state["cap"]

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_capability", cap)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: "GPU-A10")
    return state


def _config(argv):
    from sglang_patches.launch_args import overlay_config, split_overlay_args

    ns, rest = split_overlay_args(argv)
    return ns, overlay_config(ns), rest


FP8 = ["--draft-backend", "triton", "--draft-weights", "fp8"]


def test_pre_fp8_gpu_is_refused_without_the_fallback(gpu, capsys):
    from sglang_patches.server.draft_backend.launch_check import check_weights

    _, cfg, rest = _config(FP8)
    with pytest.raises(UserError) as err:
        check_weights(cfg, rest, fallback=False)
    text = str(err.value)
    assert gpu["asked"] >= 1
    assert "GPU 0 (GPU-A10) is 8.6" in text and "compute capability >= 8.9" in text and "\n" not in text
    assert "--draft-weights bf16" in text and "--draft-backend-fallback" in text
    assert capsys.readouterr().err == ""


def test_pre_fp8_gpu_with_the_fallback_runs_bf16_weights_on_the_triton_backend(gpu, capsys):
    from sglang_patches.server.draft_backend.launch_check import check_weights, resolve

    ns, cfg, rest = _config(FP8 + ["--draft-backend-fallback"])
    got = check_weights(cfg, rest, fallback=ns.draft_backend_fallback)
    assert got.draft_weights == "bf16" and got.draft_backend == "triton" and "triton_draft" in got.patches
    assert got == type(cfg)(**{**cfg.__dict__, "draft_weights": "bf16"})  # nothing else changed
    assert cfg.draft_weights == "fp8"  # a new config: the parsed one is not mutated
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sglang-patches: warning: ") and "is 8.6" in lines[0]
    assert "bf16 drafter weights (--draft-backend-fallback)" in lines[0]
    # resolve (the later triton check) on the returned config: no second warning, weights stay bf16
    assert check_weights(got, rest, fallback=True) is got and capsys.readouterr().err == ""
    assert resolve(got, rest, fallback=True).draft_weights == "bf16"


@pytest.mark.parametrize("cap", [(8, 9), (9, 0)])
def test_fp8_gpu_keeps_fp8_with_or_without_the_fallback(gpu, capsys, cap):
    from sglang_patches.server.draft_backend.launch_check import check_weights

    gpu["cap"] = cap
    for fallback in (False, True):
        _, cfg, rest = _config(FP8 + (["--draft-backend-fallback"] if fallback else []))
        assert check_weights(cfg, rest, fallback=fallback) is cfg
    assert gpu["asked"] >= 2 and capsys.readouterr().err == ""


def test_contradicting_flags_are_refused_even_with_the_fallback(gpu):
    from sglang_patches.server.draft_backend.launch_check import check_weights

    _, cfg, rest = _config(FP8 + ["--draft-backend-fallback", "--speculative-draft-model-quantization", "fp8"])
    with pytest.raises(UserError, match="both quantise the drafter"):
        check_weights(cfg, rest, fallback=True)


def _snapshot(root):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


def test_launcher_refuses_before_repairing_a_fixture_cache(gpu, tmp_path, monkeypatch, capsys):
    """launch.main with --fixture tiny and a damaged cached fixture (it would be rebuilt): the
    capability refusal comes first and the cache is unchanged."""
    from sglang_patches import launch

    monkeypatch.setenv("SGLANG_PATCHES_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "cache" / "fixtures" / "tiny"
    (root / "target").mkdir(parents=True)
    (root / "fixture.json").write_text("{")
    before = _snapshot(tmp_path)
    with pytest.raises(SystemExit) as exc:
        launch.main(["--fixture", "tiny"] + FP8)
    assert exc.value.code == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "error:" in lines[0] and "is 8.6" in lines[0], lines
    assert _snapshot(tmp_path) == before


def test_launcher_with_the_fallback_starts_with_bf16_weights(gpu, tmp_path, monkeypatch, capsys):
    """launch.main to its end; launch.serve (it would start SGLang) is REPLACED by a recorder of the
    overlay config the server processes would read."""
    import os

    from sglang_patches import launch
    from sglang_patches.vocab.overlay_config import ENV_VAR, OverlayConfig

    pair(tmp_path)
    monkeypatch.delenv(ENV_VAR, raising=False)
    seen = {}
    monkeypatch.setattr(launch, "serve", lambda argv, exit_on_collapse=False, features=(), said=(): seen.update(
        config=OverlayConfig.from_json(os.environ[ENV_VAR]), said=list(said)) or 0)
    argv = ["--model-path", str(tmp_path / "target"), "--speculative-draft-model-path", str(tmp_path / "draft"),
            "--speculative-algorithm", "EAGLE3", "--skip-preflight", "--draft-backend-fallback"] + FP8
    assert launch.main(argv) == 0
    cfg = seen["config"]
    assert cfg.draft_weights == "bf16" and cfg.draft_backend == "triton" and "triton_draft" in cfg.patches
    warnings = [ln for ln in seen["said"] if "drafter weights" in ln]  # serve() prints them after its GPU check
    assert len(warnings) == 1 and warnings[0].startswith("warning: ") and "is 8.6" in warnings[0], warnings
