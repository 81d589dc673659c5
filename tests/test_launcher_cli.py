"""The drop-in launcher, the `sglang-patches` CLI, OverlayConfig and
the supported-version check; subprocesses run the real entry points against the real SGLang under test (0.5.17 and 0.5.23 runs)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import sglang_under_test

from sglang_patches import plugin, versions
from sglang_patches.errors import UserError
from sglang_patches.server.hooks import REGISTRY
from sglang_patches.launch_args import GROUP_TITLE, overlay_config, split_overlay_args
from sglang_patches.vocab.overlay_config import ENV_VAR, OverlayConfig
from sglang_patches.versions import ALLOW_ENV, check_sglang_version

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _env(**extra):
    env = {**os.environ, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for k in (ENV_VAR, plugin.ENABLE_ENV, ALLOW_ENV):
        env.pop(k, None)
    env.update(extra)
    return env


def _popen(*args):
    return subprocess.Popen(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), cwd=REPO)


# `python -m sglang_patches.launch --help` as __main__ runs it, with stdout watched: at the first flush
# after the overlay's flags are written, is SGLang's server stack (server_args, torch) imported yet?
HELP_PROBE = r"""
import json, sys, warnings
from sglang_patches import launch

seen = {}
class Watch:
    def __init__(self, out):
        self.out = out
    def write(self, text):
        seen.setdefault("overlay_written", "--timing-log" in text)
        return self.out.write(text)
    def flush(self):
        if seen.get("overlay_written") and "at_flush" not in seen:
            seen["at_flush"] = sorted(m for m in ("sglang.srt.server_args", "torch") if m in sys.modules)
        self.out.flush()
sys.stdout = Watch(sys.stdout)
filters = list(warnings.filters)
code = launch.main(["--help"])
seen["filters_restored"] = warnings.filters == filters
print("PROBE " + json.dumps(seen), file=sys.stderr)
raise SystemExit(code)
"""


@pytest.fixture(scope="module")
def cli_runs():
    """Start the slow (SGLang-importing) subprocesses together, collect them once."""
    py = sys.executable
    procs = {
        "help": _popen(py, "-c", HELP_PROBE),
        "print_patches": _popen(py, "-m", "sglang_patches.launch", "--print-patches"),
        "patches": _popen(py, "-m", "sglang_patches", "patches"),
        "version": _popen(str(BIN / "sglang-patches"), "version", "--json"),
        "version_text": _popen(str(BIN / "sglang-patches"), "version"),
        "bogus": _popen(py, "-m", "sglang_patches", "bogus"),
    }
    out = {}
    for name, p in procs.items():
        stdout, stderr = p.communicate(timeout=180)
        out[name] = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
    return out


# ---------------------------------------------------------------- argument splitting

def test_split_overlay_args_keeps_sglang_flags_in_order():
    argv = ["--model-path", "/m", "--patches", "timing,marker", "--tp", "2",
            "--timing-log=/tmp/c.jsonl", "--cuda-graph-bs", "1", "2", "4", "--speculative-algorithm", "EAGLE3",
            "--allow-hidden-state-mismatch", "--port=30000", "--timing-summary-interval", "7",
            "--enable-metrics"]
    ns, rest = split_overlay_args(argv)
    assert rest == ["--model-path", "/m", "--tp", "2", "--cuda-graph-bs", "1", "2", "4",
                    "--speculative-algorithm", "EAGLE3", "--port=30000", "--enable-metrics"]
    # no abbreviations of ours: --timing-log-max is not --timing-log-max-mb, nor SGLang's: a typo, named
    with pytest.raises(UserError, match="--timing-log-max is neither an SGLang flag nor the overlay's; did you mean "
                                        "--timing-log-max-mb"):
        split_overlay_args(["--model-path", "/m", "--timing-log-max", "3"])
    assert ns.patches == "timing,marker" and ns.timing_log == "/tmp/c.jsonl"
    assert ns.allow_hidden_state_mismatch is True and ns.timing_summary_interval == 7
    assert ns.print_patches is False and ns.fixture is None
    cfg = overlay_config(ns)
    assert cfg.patches == ("timing", "marker") and cfg.timing_log == "/tmp/c.jsonl"
    assert cfg.allow_hidden_state_mismatch and cfg.timing_summary_interval == 7


def test_split_without_overlay_flags_is_identity():
    argv = ["--model-path", "x", "--speculative-num-steps", "3"]
    ns, rest = split_overlay_args(argv)
    assert rest == argv
    assert overlay_config(ns) == OverlayConfig()


# ---------------------------------------------------------------- entry points (subprocess)

def test_launch_help_shows_sglang_and_overlay_flags(cli_runs):
    r = cli_runs["help"]
    assert r.returncode == 0, r.stderr
    assert "--speculative-algorithm" in r.stdout and "--model-path" in r.stdout
    assert GROUP_TITLE in r.stdout
    for flag in ("--patches", "--print-patches", "--timing-log", "--allow-hidden-state-mismatch"):
        assert flag in r.stdout


def test_launch_help_prints_the_overlay_flags_before_importing_sglang(cli_runs):
    """The overlay's flags come first and are flushed before SGLang's server_args (and torch, seconds
    of imports) is loaded; SGLang's flags follow. The import's Triton no-GPU warning is silenced only
    around it (the warning filters are as before), so stderr holds nothing of it."""
    r = cli_runs["help"]
    assert r.returncode == 0, r.stderr
    probe = json.loads(r.stderr.split("PROBE ", 1)[1])
    assert probe == {"overlay_written": True, "at_flush": [], "filters_restored": True}, probe
    lines = r.stdout.splitlines()
    where = [lines.index(ln) for ln in (GROUP_TITLE + ":", "SGLang's flags (passed through unchanged):")]
    where += [next(i for i, ln in enumerate(lines) if ln.startswith("  --model-path "))]
    assert where == sorted(where), where
    assert "Triton is not supported" not in r.stderr and "Warning" not in r.stderr, r.stderr


def _hook_lines(text):
    return [ln for ln in text.splitlines() if ln.startswith("  ") and ":" in ln and "sglang.srt." in ln]


def test_print_patches_and_patches_subcommand(cli_runs):
    for name in ("print_patches", "patches"):
        r = cli_runs[name]
        assert r.returncode == 0, r.stderr
        first = r.stdout.splitlines()[0]
        if sglang_under_test() == "0.5.17":
            assert first == "sglang 0.5.17"
        else:  # accepted with the warning that it was verified on CPU only
            assert first.startswith("sglang 0.5.23  (warning: sglang 0.5.23 was verified on CPU on its real classes")
        assert len(_hook_lines(r.stdout)) == 11
        assert "11 hooks in features: marker, timing, checks" in r.stdout
    assert _hook_lines(cli_runs["print_patches"].stdout) == _hook_lines(cli_runs["patches"].stdout)


def test_print_patches_respects_patches_flag(capsys):
    from sglang_patches import launch

    assert launch.main(["--print-patches", "--patches", "all,-timing"]) == 0
    out = capsys.readouterr().out
    assert len(_hook_lines(out)) == 5 and "5 hooks in features: marker, checks" in out
    assert REGISTRY.applied == []  # listing patches nothing


def test_version_subcommand(cli_runs):
    r = cli_runs["version"]
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["sglang_patches"] == "0.1.0" and info["sglang"] == sglang_under_test()
    assert info["torch"] and info["gpus"] == []
    # the support status, in the words of docs/status.md's version table (tests/test_readme.py pins the table)
    status = info["status"]
    assert status == versions.status_of(sglang_under_test())
    assert status == {"0.5.17": "ran on a GPU",
                      "0.5.23": "verified on CPU on its real classes; GPU: timing, checks, plugin, FP8 draft, "
                                "adaptive steps (started below the largest candidate, advise's config served), overhead, "
                                "profile, step_timing; not yet draft TP"}[sglang_under_test()]
    text = cli_runs["version_text"]
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[2:4] == [f"sglang          {sglang_under_test()}", f"  support       {status} (this SGLang version with sglang_patches; docs/status.md)"]
    table = (REPO / "docs" / "status.md").read_text(encoding="utf-8")
    assert f"| {sglang_under_test()} | {status} |" in table


def test_unknown_subcommand_one_line_no_traceback(cli_runs):
    r = cli_runs["bogus"]
    assert r.returncode == 2
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sglang-patches: error: unknown subcommand 'bogus'")


@pytest.fixture(scope="module")
def fixture_pair(tmp_path_factory):
    from sglang_patches.offline.fixtures import build_fixture

    root = tmp_path_factory.mktemp("fx")
    return build_fixture("tiny", root / "tiny")


def test_launcher_preflight_refuses_eagle_with_eagle3_drafter(fixture_pair):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "sglang_patches.launch",
                        "--model-path", str(fixture_pair.target),
                        "--speculative-draft-model-path", str(fixture_pair.draft),
                        "--speculative-algorithm", "EAGLE", "--device", "cpu"],
                       capture_output=True, text=True, env=_env(), cwd=REPO, timeout=120)
    elapsed = time.monotonic() - t0
    assert r.returncode == 1, r.stderr
    assert "SP001" in r.stderr and "--speculative-algorithm EAGLE3" in r.stderr
    assert "Traceback" not in r.stderr
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("sglang-patches: error:")] == [
        "sglang-patches: error: preflight found problems (above); fix them or pass --allow-hidden-state-mismatch"]
    assert elapsed < 60, f"preflight refusal took {elapsed:.1f}s: was a server started?"


# ---------------------------------------------------------------- supported versions

def test_check_sglang_version(monkeypatch):
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    assert check_sglang_version("0.5.17") is None  # the only version that ran on a GPU
    warning = check_sglang_version("0.5.23")  # its own compat file, verified on CPU: accepted with a warning
    assert "verified on CPU on its real classes" in warning and "compat/v0_5_23.py" in warning
    assert "GPU: timing, checks, plugin, FP8 draft, adaptive steps (started below the largest " in warning
    for between in ("0.5.18", "0.5.19", "0.5.22.post2"):  # no file of its own: the nearest lower one
        warning = check_sglang_version(between)
        assert f"sglang {between} was not tested" in warning and "sglang_patches/compat/v0_5_17.py" in warning
        assert "nearest lower" in warning
    for bad in ("0.4.0", "0.5.16", "0.5.24", "0.6.0", "1.0"):
        with pytest.raises(UserError, match=f"sglang {bad} has no compat file") as info:
            check_sglang_version(bad)
        text = str(info.value)
        assert ALLOW_ENV in text and info.value.code == 2 and "\n" not in text
        assert "0.5.17 (ran on a GPU), 0.5.23 (verified on CPU on its real classes)" in text
    monkeypatch.setenv(ALLOW_ENV, "1")
    warning = check_sglang_version("0.4.0")
    assert "unsupported" in warning and ALLOW_ENV in warning
    warning = check_sglang_version("0.6.0")  # above the newest: the newest file is tried
    assert "unsupported" in warning and "compat/v0_5_23.py" in warning


def test_one_version_parser():
    from sglang_patches import compat
    from sglang_patches.server.draft_tp import refusal_for

    p = compat.parse_version
    assert p("0.5.17") == p("0.5.17.post1") == p("0.5.17rc1") == p("v0.5.17") == (0, 5, 17)
    assert p("0.6") == (0, 6, 0) and p("1") == (1, 0, 0)
    assert p("not installed") is None and p("") is None and p("dev") is None
    # the version check and the draft_tp gate read versions the same way
    assert check_sglang_version("0.5.17.post1") is not None  # in range, but not the GPU-run 0.5.17 itself
    assert refusal_for("0.5.22.post3") is None and refusal_for("0.5.23rc1") is None  # both compat files serve draft_tp
    assert compat.for_version("0.5.20").__name__.endswith("v0_5_17")
    assert compat.resolve("0.5.20")[1] is False and compat.resolve("0.5.17.post1") == (compat.for_version("0.5.17"), True)
    assert compat.for_version("0.5.23rc1").__name__.endswith("v0_5_23")


# ---------------------------------------------------------------- SGLang plugin

def test_overlay_config_round_trip(monkeypatch):
    cfg = OverlayConfig(patches=("timing", "checks"), timing_log="/x/c.jsonl", timing_log_max_mb=1.5,
                        timing_log_backups=5, timing_all_ranks=True, timing_summary_interval=0,
                        timing_ring_size=64, allow_hidden_state_mismatch=True)
    text = cfg.to_env()
    assert json.loads(text)["patches"] == ["timing", "checks"]
    assert OverlayConfig.from_json(text) == cfg
    assert OverlayConfig.from_json(OverlayConfig().to_env()) == OverlayConfig()
    assert OverlayConfig.from_json('{"timing_log": "a"}') == OverlayConfig(timing_log="a")
    monkeypatch.setenv(ENV_VAR, text)
    assert OverlayConfig.from_env() == cfg
    monkeypatch.setenv(ENV_VAR, "")
    assert OverlayConfig.from_env() is None
    monkeypatch.delenv(ENV_VAR)
    assert OverlayConfig.from_env() is None


def test_overlay_config_errors(monkeypatch):
    with pytest.raises(UserError, match=f"{ENV_VAR} is not valid JSON"):
        OverlayConfig.from_json("{patches: all")
    with pytest.raises(UserError, match=r"unknown keys \['bogus'\]"):
        OverlayConfig.from_json('{"bogus": 1, "timing_log": null}')
    monkeypatch.setenv(ENV_VAR, "not json")
    with pytest.raises(UserError):
        OverlayConfig.from_env()


@pytest.mark.parametrize("text", ['5', 'null', '{"patches": ["bogus"]}', '{"patches": "timing"}'])
def test_overlay_config_rejects_malformed_values(text):
    with pytest.raises(UserError):
        cfg = OverlayConfig.from_json(text)
        from sglang_patches.server.patches.catalog import specs_for

        specs_for(cfg.patches)  # what every scheduler process does with it


def test_an_existing_timing_log_is_continued_and_said(tmp_path, capsys):
    from sglang_patches.launch import check_timing_log

    log = tmp_path / "cycles.jsonl"
    assert check_timing_log(str(log), []) is None  # a new file: nothing to say
    log.write_text('{"kind": "decode"}\n')
    assert check_timing_log(str(log), []).startswith(f"--timing-log {log} exists (0.0 MB); new cycles are appended")
    assert log.read_text() == '{"kind": "decode"}\n' and capsys.readouterr().err == ""  # said later, writes nothing
