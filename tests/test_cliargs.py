"""The one-line argparse errors of every command (sglang_patches.cliargs.OneLineParser), run as a
user runs them: the subcommand named once, and a value that starts with '-' explained."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run(*argv):
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("argv,expected", [
    (["sglang_patches", "report"], "sglang-patches: error: report: the following arguments are required: FILE"),
    (["sglang_patches", "advise"], "sglang-patches: error: advise: the following arguments are required: LOG"),
])
def test_program_named_once(argv, expected):
    p = run(*argv)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [p.stderr.strip()]
    assert p.stderr.startswith(expected), p.stderr
    assert p.stderr.count("sglang-patches report:") + p.stderr.count("sglang-patches advise:") == 0


def test_a_value_starting_with_dash_gets_the_equals_form():
    p = run("sglang_patches.launch", "--patches", "-checks", "--model-path", "m")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "launch: argument --patches: expected one argument" in p.stderr
    assert "--patches=VALUE" in p.stderr


def test_a_log_after_a_list_flag_is_told_to_go_first(tmp_path):
    log = tmp_path / "cycles.jsonl"
    log.write_text("")
    p = run("sglang_patches", "advise", "--adaptive-config", str(tmp_path / "a.json"), "--cuda-graph-bs-decode", "1", "8",
            str(log))
    assert p.returncode == 2 and "Traceback" not in p.stderr and not (tmp_path / "a.json").exists()
    assert f"{log} is a file: give it before --cuda-graph-bs-decode, whose list takes every value after it" in p.stderr
    p = run("sglang_patches", "advise", "--cuda-graph-bs-decode", "1", "x8")  # not a file: no such hint
    assert p.returncode == 2 and "invalid int value: 'x8'" in p.stderr and "is a file" not in p.stderr
    p = run("sglang_patches", "advise", "--max-steps", str(log))  # one value, left out: not a list's hint
    assert p.returncode == 2 and "invalid int value" in p.stderr and "is a file" not in p.stderr


def test_no_dash_hint_when_the_value_is_simply_missing():
    p = run("sglang_patches.launch", "--patches")
    assert p.returncode == 2 and "expected one argument" in p.stderr and "=VALUE" not in p.stderr


def test_dash_hint_names_the_long_flag_when_a_short_alias_was_used():
    """In-process with a parser like ours that has a short alias (argparse names it `-p/--patches`)."""
    from sglang_patches.cliargs import OneLineParser
    from sglang_patches.errors import UserError

    ap = OneLineParser(prog="sglang-patches demo")
    ap.add_argument("-p", "--patches")
    with pytest.raises(UserError, match="goes as --patches=VALUE"):
        ap.parse_args(["-p", "-checks"])


def test_a_typod_flag_gets_the_nearest_real_one():
    p = run("sglang_patches", "advise", "x.jsonl", "--baseline-stepms", "3", "--jsn")
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [p.stderr.strip()], p.stderr
    assert "--baseline-stepms: did you mean --baseline-step-ms?" in p.stderr
    assert "--jsn: did you mean --json?" in p.stderr
    p = run("sglang_patches", "fixtures", "build", "x", "--out", "d", "--forse")  # a subcommand's own flag
    assert p.returncode == 2 and "--forse: did you mean --force?" in p.stderr, p.stderr
    assert "(see `sglang-patches fixtures build --help`)" in p.stderr
    p = run("sglang_patches", "report", "x.jsonl", "--zzz")  # nothing near: no guess
    assert p.returncode == 2 and "unrecognized arguments: --zzz" in p.stderr and "did you mean" not in p.stderr


def test_the_launcher_names_a_typod_overlay_flag_before_sglang_sees_it():
    """`--draft-backnd` would reach SGLang's parser as an unknown flag; the launcher reads the installed
    SGLang's own parser, finds it is not SGLang's, and names the overlay flag it is near."""
    p = run("sglang_patches.launch", "--model-path", "m", "--draft-backnd", "triton")
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [p.stderr.strip()], p.stderr
    assert "--draft-backnd is neither an SGLang flag nor the overlay's; did you mean --draft-backend?" in p.stderr


def test_a_near_miss_that_is_an_sglang_flag_passes_on(monkeypatch):
    """No flag of the installed SGLang lies that near an overlay flag today; one that did (here added
    to the real parser) must reach SGLang, as must its abbreviation."""
    import argparse
    import difflib

    from sglang_patches import compat
    from sglang_patches.cliargs import OneLineParser
    from sglang_patches.errors import UserError
    from sglang_patches.launch_args import add_overlay_args, refuse_overlay_typo

    ours = OneLineParser(add_help=False, allow_abbrev=False)
    add_overlay_args(ours)
    real = compat.current().SERVER_ARGS.resolve()
    sglang = argparse.ArgumentParser(add_help=False)
    real(sglang)
    assert not [f for f in sglang._option_string_actions if f not in ours._option_string_actions
                and difflib.get_close_matches(f, list(ours._option_string_actions), 1, 0.85)]

    def with_near_flag(parser):
        real(parser)
        parser.add_argument("--draft-backendz")

    class Contact:
        def resolve(self):
            return with_near_flag

    class Current:
        SERVER_ARGS = Contact()

    monkeypatch.setattr(compat, "current", lambda: Current)
    refuse_overlay_typo(ours, ["--model-path", "m", "--draft-backendz", "x"])
    refuse_overlay_typo(ours, ["--draft-backendz=x"])
    with pytest.raises(UserError, match="--draft-backnd is neither"):
        refuse_overlay_typo(ours, ["--draft-backnd", "x"])
