"""The drop-in launcher's checks before anything changes or starts: preflight on hub ids found in the
local Hugging Face cache (as `sglang-patches preflight` resolves them), one warning line when it
cannot run, and every check (the GPU included) before a fixture cache is built or repaired. In
process, against the real SGLang 0.5.17 flag handling; no server is started (no GPU here)."""
from __future__ import annotations

import pytest
from conftest import sglang_under_test

from sglang_patches import launch
from sglang_patches.offline.fixtures import fixture_cache_dir, fixture_paths

from preflight_models import llama  # noqa: F401 (a fixture)
from test_preflight_input import cache_model


def _cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


pytestmark = pytest.mark.skipif(_cuda(), reason="a GPU is visible: the launcher would start a real server")


def run(argv, capsys):
    try:
        code = launch.main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_hub_ids_in_the_cache_are_preflighted(tmp_path, llama, monkeypatch, capsys):
    cache = tmp_path / "hub"
    cache_model(cache, "meta-llama/Llama-3.1-8B-Instruct", llama[0])
    cache_model(cache, "acme/EAGLE3-Llama-3.1-8B", llama[1])
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    code, _, err = run(["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--speculative-draft-model-path",
                        "acme/EAGLE3-Llama-3.1-8B", "--speculative-algorithm", "EAGLE"], capsys)
    assert code == 1 and "ERROR   SP001" in err and "Traceback" not in err
    assert err.strip().splitlines()[-1] == ("sglang-patches: error: preflight found problems (above); fix them or "
                                            "pass --allow-hidden-state-mismatch")


def test_a_pair_preflight_cannot_read_is_said_in_one_line(tmp_path, llama, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    code, _, err = run(["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--speculative-draft-model-path",
                        str(llama[1]), "--speculative-algorithm", "EAGLE3"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err
    skipped = [ln for ln in lines if "preflight not run" in ln]
    assert len(skipped) == 1 and skipped[0].startswith("sglang-patches: warning: preflight not run: target model "
                                                       "'meta-llama/Llama-3.1-8B-Instruct' is not a local directory "
                                                       "and not in the Hugging Face cache")
    assert lines[-1].startswith("sglang-patches: error: no CUDA GPU is visible")  # then the GPU check refuses
    code, _, err = run(["--model-path", str(llama[0]), "--speculative-algorithm", "EAGLE3"], capsys)
    assert "sglang-patches: warning: preflight not run: no --speculative-draft-model-path" in err
    code, _, err = run(["--model-path", str(llama[0]), "--speculative-algorithm", "NGRAM"], capsys)
    assert "preflight not run" not in err  # no drafter checkpoint to check
    assert code == 2 and err.strip().splitlines()[-1].startswith("sglang-patches: error: no CUDA GPU is visible")


def test_the_fixture_cache_is_not_touched_when_the_run_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SGLANG_PATCHES_CACHE", str(tmp_path / "cache"))
    paths = fixture_paths("tiny")
    assert paths.root == fixture_cache_dir() / "tiny" and not paths.root.exists()  # nothing built to say where
    paths.root.mkdir(parents=True)
    (paths.root / "fixture.json").write_text("{")  # damaged: it would be rebuilt
    code, _, err = run(["--fixture", "tiny"], capsys)
    assert code == 2 and err.strip().startswith("sglang-patches: error: no CUDA GPU is visible")
    assert sorted(p.name for p in paths.root.iterdir()) == ["fixture.json"]
    assert (paths.root / "fixture.json").read_text() == "{"
    # the fixture's own flags are checked before the build too: a draft TP that cannot work is refused first
    code, _, err = run(["--fixture", "tiny", "--draft-tp-size", "3"], capsys)
    assert code == 2 and "no CUDA GPU" not in err and (paths.root / "fixture.json").read_text() == "{"
    # and with the checks passed (a GPU faked), the launcher does repair it (and sets its environment:
    # recorded here so that it is restored after the test)
    from sglang_patches.vocab.overlay_config import ENV_VAR, SERVER_PID_ENV
    for name in (ENV_VAR, SERVER_PID_ENV):
        monkeypatch.setenv(name, "")
    # MOCKED: the GPU check (no GPU here), serve (it would start SGLang) and preflight (not what is tested)
    monkeypatch.setattr(launch, "check_gpu", lambda argv: None)
    monkeypatch.setattr(launch, "serve", lambda argv, exit_on_collapse=False, features=(), said=(): 0)
    monkeypatch.setattr(launch, "preflight_or_die", lambda argv, allow: None)
    code, _, err = run(["--fixture", "tiny"], capsys)
    assert code == 0 and "sglang-patches: fixture tiny: --model-path" in err
    assert (paths.root / "fixture.json").read_text() != "{"


def test_a_dummy_weight_drafter_is_named_before_start(llama, capsys):
    code, _, err = run(["--model-path", str(llama[0]), "--speculative-draft-model-path", str(llama[1]),
                        "--speculative-algorithm", "EAGLE3", "--load-format", "dummy"], capsys)
    warned = [ln for ln in err.splitlines() if "preflight SP010" in ln]
    assert len(warned) == 1 and warned[0].startswith("sglang-patches: warning: preflight SP010: the drafter is "
                                                     "loaded with dummy (random) weights")
    assert code == 2 and err.strip().splitlines()[-1].startswith("sglang-patches: error: no CUDA GPU")


def _yaml(tmp_path, lines):
    path = tmp_path / "serve.yaml"
    path.write_text("".join(f"{key}: {value}\n" for key, value in lines.items()))
    return str(path)


def test_preflight_reads_the_pair_from_a_config_file(tmp_path, llama, capsys):
    """The algorithm and both paths only in SGLang's --config file: preflight runs on them (as on
    the same flags given on the command line, test_hub_ids_in_the_cache_are_preflighted)."""
    config = _yaml(tmp_path, {"model-path": llama[0], "speculative-draft-model-path": llama[1],
                              "speculative-algorithm": "EAGLE"})
    code, _, err = run(["--config", config], capsys)
    assert code == 1 and "ERROR   SP001" in err and "Traceback" not in err
    # a command-line flag wins over the file's (argparse keeps the last): EAGLE3 fits this drafter
    code, _, err = run(["--config", config, "--speculative-algorithm", "EAGLE3"], capsys)
    assert code == 2 and "SP001" not in err and "no CUDA GPU is visible" in err


def test_a_fixture_keeps_the_model_path_of_a_config_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SGLANG_PATCHES_CACHE", str(tmp_path / "cache"))
    from sglang_patches.vocab.overlay_config import ENV_VAR, SERVER_PID_ENV
    for name in (ENV_VAR, SERVER_PID_ENV):
        monkeypatch.setenv(name, "")  # the launcher sets them: restored after the test
    served, checked = [], []
    # MOCKED: the GPU check (no GPU here), serve (it would start SGLang) and preflight (they record argv)
    monkeypatch.setattr(launch, "check_gpu", lambda argv: None)
    monkeypatch.setattr(launch, "serve", lambda argv, exit_on_collapse=False, features=(), said=(): served.append(argv) or 0)
    monkeypatch.setattr(launch, "preflight_or_die", lambda argv, allow: checked.append(argv))
    config = _yaml(tmp_path, {"model-path": "/custom/target"})
    code, _, err = run(["--fixture", "tiny", "--config", config], capsys)
    filled = [ln for ln in err.splitlines() if ln.startswith("sglang-patches: fixture tiny:")]
    assert code == 0 and len(filled) == 1 and "--model-path" not in filled[0], err
    assert "--speculative-draft-model-path" in filled[0]
    # SGLang gets the command as written plus the fixture's flags; preflight sees the file's model path
    assert served[0][:2] == ["--config", config] and "--model-path" not in served[0]
    assert launch._flag_value(checked[0], "--model-path") == "/custom/target"


@pytest.mark.parametrize("flags, refused_on", [
    (["--fixture", "nope"], ("0.5.17", "0.5.23")),  # no such fixture
    (["--pp-size", "2"], ("0.5.23",)),  # the timing feature cannot follow pipeline parallelism there yet
])
def test_print_patches_runs_the_launchers_checks_first(capsys, flags, refused_on):
    """--print-patches lists what the launcher would install; a command the launcher refuses is refused
    here too, in its one line, instead of a listing."""
    from sglang_patches import launch

    try:
        code = launch.main(["--print-patches", *flags])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    if sglang_under_test() in refused_on:
        assert code == 2 and out.out == "" and len(out.err.strip().splitlines()) == 1, out.err
    else:
        assert code == 0 and "hooks in features" in out.out
