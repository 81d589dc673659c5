"""`sglang-patches` behaves as command-line tools do: `--version`, a missing subcommand is a usage
error (exit 2, usage on stderr), a closed pipe (`| head`) is no error and no traceback, and
`patches` does not pass on SGLang's import-time warnings. Subprocesses of the real entry point."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import advisor_logs as al
from sglang_patches import __version__

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent / "sglang-patches"


def run(*args, stdout=subprocess.PIPE, timeout=120):
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([str(BIN), *map(str, args)], stdout=stdout, stderr=subprocess.PIPE, text=True,
                          env=env, cwd=REPO, timeout=timeout)


def test_version_flag_is_fast_and_plain():
    r = run("--version")
    assert r.returncode == 0 and r.stdout == f"sglang-patches {__version__}\n" and r.stderr == ""
    assert run("-V").stdout == r.stdout


def test_a_missing_subcommand_is_a_usage_error():
    bare = run()
    assert bare.returncode == 2 and bare.stdout == ""
    assert bare.stderr.startswith("usage: sglang-patches <subcommand>")
    assert bare.stderr.strip().splitlines()[-1] == "sglang-patches: error: a subcommand is required"
    fx = run("fixtures")
    assert fx.returncode == 2 and fx.stdout == "" and "Traceback" not in fx.stderr
    assert fx.stderr.startswith("usage: sglang-patches fixtures")
    assert fx.stderr.strip().splitlines()[-1].startswith("sglang-patches: error: fixtures: a subcommand is required")
    assert run("--help").returncode == 0 and run("fixtures", "--help").returncode == 0


@pytest.fixture
def log(tmp_path):
    return al.write_records(tmp_path / "t.jsonl", al.records_from_accepted([2, 1, 0, 3] * 200, bs=2, steps=3))


@pytest.mark.parametrize("args", [("report", "{log}"), ("advise", "{log}", "--json"), ("fixtures", "list"),
                                  ("preflight", "--help")])
def test_a_closed_pipe_is_no_error(args, log):
    r_fd, w_fd = os.pipe()
    os.close(r_fd)  # the reader is gone before the first write, as after `| head -0`
    try:
        r = run(*[a.format(log=log) for a in args], stdout=w_fd)
    finally:
        os.close(w_fd)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_patches_is_quiet_about_sglangs_import_warnings():
    r = run("patches", timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("sglang ")
    assert r.stderr == "", r.stderr  # SGLang's "Triton is not supported", AWQ/GGUF and CUDA-arch lines


@pytest.mark.parametrize("flags, says", [
    (["--speculative-num-steps", "3"], "--speculative-num-steps is SGLang's server flag: here --steps LIST"),
    (["--speculative-eagle-topk", "1"], "--speculative-eagle-topk is SGLang's server flag: advise prices topk-1"),
    (["--speculative-adaptive-config", "a.json"], "--speculative-adaptive-config is SGLang's server flag: "
                                                  "--adaptive-config OUT.json writes one"),
])
def test_sglangs_own_flags_on_advise_name_advises(tmp_path, flags, says):
    """A user of SGLang reaches for its spellings: the one line names what advise takes instead."""
    log = tmp_path / "c.jsonl"
    al.chain_log(log, 3, [0.7, 0.6, 0.5], 200)
    assert run("advise", log).returncode == 0
    r = run("advise", log, *flags)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    [line] = r.stderr.strip().splitlines()
    assert says in line and line.startswith("sglang-patches: error: advise: unrecognized arguments")
