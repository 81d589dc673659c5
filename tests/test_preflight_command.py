"""Preflight on what a new user types: a mistyped local path (named as a missing directory, never as a
missing download), a pasted `python -m sglang_patches.launch --fixture NAME ...` command (the
fixture's pair from the fixture cache, as the launcher fills it; the launcher's other flags named as
overlay flags), and dummy drafter weights (SP009 and the checkpoint-shape checks stay quiet: SGLang
reads no weight file then). Fixtures are built for real into a tmp fixture cache (dummy pairs: no
weights, no torch)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from sglang_patches import launch
from sglang_patches.errors import UserError
from sglang_patches.offline.fixtures import build_fixture, fixture_paths
from sglang_patches.offline.preflight import CODES, run_preflight
from sglang_patches.offline.preflight import cli as pf_cli

from preflight_models import REPO, codes, eagle3_cfg, eagle3_tensors, llama, make_dir, only  # noqa: F401


def run_cli(*args: str, cwd=REPO, **env) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=str(REPO), **env)
    return subprocess.run([sys.executable, "-m", "sglang_patches", "preflight", *args],
                          cwd=cwd, env=e, capture_output=True, text=True, timeout=120)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sglang-patches: error: "), proc.stderr
    return lines[0]


@pytest.fixture
def fx_cache(tmp_path, monkeypatch):
    """An empty fixture cache of this test's own (never the user's)."""
    monkeypatch.setenv("SGLANG_PATCHES_CACHE", str(tmp_path / "sgp"))
    return tmp_path / "sgp"


# ---------------------------------------------------------------- a mistyped local path

def test_mistyped_local_path_is_a_missing_directory_not_a_download(tmp_path, llama):
    (tmp_path / "l8b").mkdir()
    hub = str(tmp_path / "empty-hub")
    line = one_error_line(run_cli("--model-path", str(llama[0]), "--speculative-draft-model-path", "l8b/nope",
                                  cwd=tmp_path, HF_HUB_CACHE=hub))
    assert line == ("sglang-patches: error: drafter model path 'l8b/nope': no such directory (nope does not exist "
                    "in l8b/, its nearest existing parent); check the path")
    # the same id with no local l8b/ is a hub id: today's message, with the download it needs
    line = one_error_line(run_cli("--model-path", str(llama[0]), "--speculative-draft-model-path", "l8b/nope",
                                  cwd=llama[0], HF_HUB_CACHE=hub))
    assert "not a local directory and not in the Hugging Face cache" in line and "`hf download l8b/nope '*.json'" in line


@pytest.mark.parametrize("typed, says", [
    ("./l8b/drfat", "drfat does not exist in l8b/, its nearest existing parent"),
    ("./nope", "nope does not exist in the current directory"),
    ("../gone/draft", "gone/draft does not exist in ../"),
    ("l8b/target/config.json/x", "(l8b/target/config.json is a file, not a directory)"),
    ("~/no-such-model-dir", "a quoted `~` is not expanded, here or by SGLang"),
])
def test_local_looking_paths_name_what_is_missing(tmp_path, monkeypatch, llama, typed, says):
    (tmp_path / "l8b" / "target").mkdir(parents=True)
    (tmp_path / "l8b" / "target" / "config.json").write_text("{}")
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work" if typed.startswith("../") else tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    with pytest.raises(UserError) as err:
        run_preflight(llama[0], typed, "EAGLE3")
    msg = str(err.value)
    assert msg.startswith(f"drafter model path {typed!r}: no such directory") and says in msg, msg
    assert "hf download" not in msg and err.value.code == 2


def test_absolute_path_names_its_nearest_parent(tmp_path, llama):
    with pytest.raises(UserError, match=re.escape(f"no/such does not exist in {tmp_path.as_posix()}/, its nearest")):
        run_preflight(tmp_path / "no" / "such", llama[1], "EAGLE3")


# ---------------------------------------------------------------- a pasted launcher command

LAUNCH = ["python", "-m", "sglang_patches.launch"]


def test_fixture_not_built_says_how_to_build_it(fx_cache):
    line = one_error_line(run_cli(*LAUNCH, "--fixture", "llama3-8b", "--timing-log", "t.jsonl",
                                  SGLANG_PATCHES_CACHE=str(fx_cache)))
    root = fx_cache / "fixtures" / "llama3-8b"
    assert line == (f"sglang-patches: error: --fixture llama3-8b: not built in the fixture cache ({root}); build it "
                    f"(seconds, no GPU) with `sglang-patches fixtures build llama3-8b --out {root}` (the launcher "
                    "also builds it on first use), then run preflight again")
    line = one_error_line(run_cli(*LAUNCH, "--fixture", "trained", SGLANG_PATCHES_CACHE=str(fx_cache)))
    assert "build it on a CUDA GPU machine (it trains the pair)" in line
    assert "unknown fixture 'nope'; choose one of: llama3-8b" in one_error_line(run_cli("--fixture", "nope"))


def test_fixture_is_checked_as_the_launcher_fills_it(fx_cache, capsys):
    root = fixture_paths("llama3-8b").root
    build_fixture("llama3-8b", root)
    rest = ["--tp-size", "1"]
    filled = launch.apply_fixture("llama3-8b", rest)  # what the launcher adds to the same command
    capsys.readouterr()  # apply_fixture names the flags on stderr
    assert pf_cli.main([*LAUNCH, "--fixture", "llama3-8b", "--timing-log", "t.jsonl", "--patches", "all,-checks",
                        *rest, "--json"]) == 0
    cap = capsys.readouterr()
    assert cap.err.splitlines() == [
        f"sglang-patches: note: fixture llama3-8b (from the fixture cache): {' '.join(filled)}",
        "sglang-patches: note: ignored overlay flags preflight does not need: --timing-log, --patches; "
        "ignored SGLang (or unknown) flags preflight does not need: --tp-size"]
    import json
    data = json.loads(cap.out)
    assert (data["target"]["path"], data["draft"]["path"]) == (str(root / "target"), str(root / "draft"))
    assert data["algorithm"] == "EAGLE3" and data["speculative_num_steps"] == 3
    # the fixture's dummy weights: SP010 says so, and SP009 stays quiet on its weightless drafter
    assert [f["code"] for f in data["findings"]] == ["SP010"]
    # a flag given in the command wins over the fixture's, as in the launcher
    assert pf_cli.main([*LAUNCH, "--fixture", "llama3-8b", "--speculative-algorithm", "EAGLE"]) == 1
    assert "ERROR   SP001" in capsys.readouterr().out


def test_overlay_flags_are_named_as_overlay_flags(fx_cache):
    line = one_error_line(run_cli(*LAUNCH, "--timing-log", "t.jsonl", "--draft-backend", "triton", "--tp-size", "2"))
    assert line.endswith("required: --model-path, --speculative-draft-model-path (ignored as overlay flags preflight "
                         "does not need: --timing-log, --draft-backend; as SGLang (or unknown) flags preflight does not need: "
                         "--tp-size) (see `sglang-patches preflight --help`)"), line
    # a value the launcher refuses is refused in its one line
    assert "invalid choice: 'cuda'" in one_error_line(run_cli(*LAUNCH, "--draft-backend", "cuda"))
    assert "--fixture" in one_error_line(run_cli(*LAUNCH, "--fixture"))
    # and a value the launcher's overlay settings refuse, in the launcher's own words
    from sglang_patches.launch_args import overlay_config, split_overlay_args

    for flags in (["--patches", "bogus"], ["--accept-collapse-window", "0"], ["--draft-weights", "fp8"]):
        with pytest.raises(UserError) as launcher:
            overlay_config(split_overlay_args(flags)[0])
        assert one_error_line(run_cli(*LAUNCH, *flags)) == f"sglang-patches: error: {launcher.value}", flags


def test_fixture_check_imports_no_torch_or_sglang(fx_cache):
    build_fixture("llama3-8b", fixture_paths("llama3-8b").root)
    code = ("import sys; from sglang_patches.offline.preflight.cli import main; "
            "rc = main(['--fixture', 'llama3-8b']); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'sglang', 'transformers')]; "
            "assert not bad, bad; assert rc == 0, rc; print('clean')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO), SGLANG_PATCHES_CACHE=str(fx_cache)))
    assert proc.returncode == 0 and "clean" in proc.stdout, proc.stderr


# ---------------------------------------------------------------- dummy drafter weights

def test_sp009_quiet_only_when_the_drafter_weights_are_dummy(tmp_path, llama):
    weightless = make_dir(tmp_path, "weightless", eagle3_cfg(4096, 128256))
    assert "SP009" in codes(run_preflight(llama[0], weightless, "EAGLE3"))
    assert "SP009" not in codes(run_preflight(llama[0], weightless, "EAGLE3", load_format="dummy"))
    assert "SP009" not in codes(run_preflight(llama[0], weightless, "EAGLE3", draft_load_format="DUMMY"))
    # the drafter's own format wins over --load-format: real weights are read, so SP009 is back
    assert "SP009" in codes(run_preflight(llama[0], weightless, "EAGLE3", load_format="dummy", draft_load_format="auto"))


def test_pasted_serve_command_with_dummy_load(tmp_path, llama):
    weightless = make_dir(tmp_path, "weightless", eagle3_cfg(4096, 128256))
    serve = ["python3", "-m", "sglang.launch_server", "--model-path", str(llama[0]),
             "--speculative-draft-model-path", str(weightless), "--speculative-algorithm", "EAGLE3"]
    assert "WARNING SP009" in run_cli(*serve).stdout
    out = run_cli(*serve, "--load-format", "dummy").stdout
    assert "SP009" not in out and "WARNING SP010" in out


def test_checkpoint_shape_checks_quiet_under_dummy_load(tmp_path, llama):
    """A checkpoint whose lm_head disagrees with config.json: SGLang's weight loading fails on it, but
    under dummy load it builds lm_head from config.json and reads no file (nor does preflight)."""
    bad = make_dir(tmp_path, "bad-head", eagle3_cfg(4096, 128256), eagle3_tensors(4096, 12288, 64000, 128256))
    real = run_preflight(llama[0], bad, "EAGLE3")
    said = " | ".join(f.message for f in real.findings if f.code == "SP007")
    assert "lm_head.weight has 64000 rows" in said and "d2t has shape [64000]" in said and not real.ok
    dummy = run_preflight(llama[0], bad, "EAGLE3", load_format="dummy")
    assert dummy.ok and codes(dummy) == ["SP010"] and dummy.fc_shape is None
    assert any("1 safetensors file(s) are not read" in n for n in dummy.notes)
    # the config-only checks still run: a drafter for another target width is refused under dummy too
    wide = make_dir(tmp_path, "wide", eagle3_cfg(5120, 128256))
    assert "SP006" in codes(run_preflight(llama[0], wide, "EAGLE3", load_format="dummy"))


# ---------------------------------------------------------------- the docs name every code

def test_readme_and_troubleshooting_name_every_code():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    span = re.search(r"`preflight` \((SP\d{3})-(SP\d{3})\)", readme)
    assert span and span.groups() == (min(CODES), max(CODES)), span
    table = (REPO / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    assert re.findall(r"^\| (SP\d{3}) \|", table, re.M) == list(CODES)


def test_a_pasted_command_with_a_config_file_is_checked_on_the_files_paths(tmp_path, llama):
    """`sglang serve --config serve.yaml` with the model paths only in the YAML (as SGLang reads it):
    preflight checks that pair, and a YAML boolean (not a flag preflight reads) does not get in the way."""
    weightless = make_dir(tmp_path, "weightless", eagle3_cfg(4096, 128256))
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(f"model-path: {llama[0]}\nspeculative-draft-model-path: {weightless}\n"
                   "speculative-algorithm: EAGLE3\nenable-metrics: true\ntrust-remote-code: false\n")
    r = run_cli("sglang", "serve", "--config", str(cfg), "--port", "30000")
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
    assert "WARNING SP009" in r.stdout  # the YAML's drafter (no weights) was the one checked
    assert "--enable-metrics" in r.stderr and "--port" in r.stderr  # named as ignored SGLang flags
    (tmp_path / "bad.yaml").write_text("- a list\n")
    line = one_error_line(run_cli("sglang", "serve", "--config", str(tmp_path / "bad.yaml")))
    assert "bad.yaml" in line


def test_a_dummy_fixture_is_checked_as_the_launcher_serves_it(fx_cache):
    build_fixture("tiny", fx_cache / "tiny")
    pair = ["--model-path", str(fx_cache / "tiny" / "target"), "--speculative-draft-model-path",
            str(fx_cache / "tiny" / "draft"), "--speculative-algorithm", "EAGLE3"]
    r = run_cli(*pair)
    assert "are the dummy-weight fixture tiny: checked as --load-format dummy" in r.stderr
    assert "WARNING SP010" in r.stdout and "SP009" not in r.stdout
    assert "the drafter is the dummy-weight fixture tiny, served with random weights" in r.stdout
    assert "fix: for real acceptance serve a trained fixture (--fixture trained or trained-8b)" in r.stdout
    assert "drop --load-format dummy" not in r.stdout  # the user passed none: the launcher does, for a fixture
    r = run_cli(*pair, "--load-format", "auto")  # what the user says wins: a real load looks for weights
    assert "dummy-weight fixture" not in r.stderr and "WARNING SP009" in r.stdout and "SP010" not in r.stdout
