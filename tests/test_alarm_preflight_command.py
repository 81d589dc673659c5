"""The accept-collapse alarm's preflight line is filled from the server's real ServerArgs (target and
draft model paths, algorithm) and the configuration it saw, and runs as printed: the printed command
is split and executed as is, with the installed `sglang-patches` on PATH. Placeholders remain only
when the server's paths are unknown, and the line then says so."""
from __future__ import annotations

import logging
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import advisor_logs as al
from preflight_models import LLAMA_8B, REPO, eagle3_cfg, eagle3_tensors, make_dir
from sglang_patches.server.timing import accept_alarm, runtime
from sglang_patches.vocab.overlay_config import OverlayConfig
from sglang_patches.vocab.stats import WindowStats

COMMAND = re.compile(r"`(sglang-patches preflight [^`]+)`")


@pytest.fixture
def pair(tmp_path):
    """Llama-3.1-8B-shaped target and EAGLE-3 drafter (headers only), in a folder with a space."""
    root = tmp_path / "my models"
    root.mkdir()
    t = make_dir(root, "llama", LLAMA_8B)
    d = make_dir(root, "llama-eagle3", eagle3_cfg(4096, 128256), eagle3_tensors(4096, 12288, 32000, 128256))
    return t, d


def server_args(target, draft, algorithm):
    from sglang.srt.server_args import ServerArgs

    return ServerArgs(model_path=str(target), speculative_draft_model_path=str(draft), speculative_algorithm=algorithm,
                      speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4, device="cpu")


def fire(sa, monkeypatch, caplog):
    monkeypatch.delenv(accept_alarm.SIMULATE_ENV, raising=False)
    alarm = accept_alarm.build(OverlayConfig(accept_collapse_window=8), rank=0, metrics=False, server_args=sa)
    with caplog.at_level(logging.WARNING, logger="sglang_patches.server.timing"):
        for rec in al.records_from_accepted([0] * 8, bs=1, steps=3):
            alarm(rec)
    assert alarm.fired == 1
    assert alarm.message in caplog.text  # the WARNING the operator reads
    found = COMMAND.findall(alarm.message)
    assert len(found) == 1, alarm.message
    return alarm, found[0]


def run_printed(cmd: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    return subprocess.run(shlex.split(cmd), capture_output=True, text=True, env=env, cwd=REPO, timeout=120)


def test_the_printed_command_runs_and_passes_a_good_pair(pair, monkeypatch, caplog):
    t, d = pair
    sa = server_args(t, d, "EAGLE3")
    alarm, cmd = fire(sa, monkeypatch, caplog)
    assert sa.model_path in shlex.split(cmd) and sa.speculative_draft_model_path in shlex.split(cmd)
    assert "TARGET" not in cmd and "DRAFT" not in cmd and "not known here" not in alarm.message
    assert alarm.state()["check"] == cmd
    r = run_printed(cmd)
    assert r.returncode == 0, (cmd, r.stdout, r.stderr)
    assert r.stdout.splitlines()[-1] == "compatible: 0 error(s), 0 warning(s)", r.stdout
    assert f"algorithm {sa.speculative_algorithm}, steps 3, topk 1, draft tokens 4" in r.stdout


def test_the_printed_command_finds_the_eagle3_drafter_served_as_eagle(pair, monkeypatch, caplog):
    """The cause preflight can see: an EAGLE-3 drafter with --speculative-algorithm EAGLE (SGLang's
    ServerArgs accepts it); the printed line, run as is, says so and exits 1."""
    t, d = pair
    sa = server_args(t, d, "EAGLE")
    _, cmd = fire(sa, monkeypatch, caplog)
    assert shlex.split(cmd)[shlex.split(cmd).index("--speculative-algorithm") + 1] == sa.speculative_algorithm
    r = run_printed(cmd)
    assert r.returncode == 1, (cmd, r.stdout, r.stderr)
    assert "ERROR   SP001" in r.stdout and r.stdout.splitlines()[-1].startswith("NOT compatible: 1 error(s)")


def test_unknown_paths_leave_placeholders_and_the_line_says_so(monkeypatch, caplog):
    _, cmd = fire(None, monkeypatch, caplog)
    assert "--model-path TARGET --speculative-draft-model-path DRAFT" in cmd
    alarm, cmd = fire(SimpleNamespace(model_path="/m/t", speculative_draft_model_path=None,
                                      speculative_algorithm="EAGLE3"), monkeypatch, caplog)
    assert "--model-path /m/t --speculative-draft-model-path DRAFT" in cmd
    assert ("DRAFT stands for the --speculative-draft-model-path the server was started with, not known here"
            in alarm.message)


def test_spec_timing_advice_names_the_same_command(pair, monkeypatch, caplog):
    t, d = pair
    alarm, cmd = fire(server_args(t, d, "EAGLE3"), monkeypatch, caplog)
    stats = WindowStats()
    for rec in al.records_from_accepted([0] * 8, bs=1, steps=3):
        stats.add(rec)
    # snapshot() reads only these counters of the recorder (a CycleRecorder needs CUDA events)
    rec = SimpleNamespace(rank=0, emitted=8, skipped_no_slot=0, dropped_incomplete=0, shape_checked=0,
                          shape_mismatch=0)
    monkeypatch.setattr(runtime, "_STATE", runtime.TimingState(recorder=rec, stats=stats, alarm=alarm))
    adv = runtime.snapshot()["advice"]
    assert adv["verdict"] == "drafter_accepts_nothing"
    assert adv["lines"][2] == f"check them: {cmd}"
