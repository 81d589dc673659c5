"""benchmarks/harness/bench_serving.py: SGLang's bench_serving CLI run many times in one client process.

The process protocol runs for real (a child process, its pipes, kills and restarts) with a stand-in
CLI, since bench_serving itself needs a server; SGLang's real `cli_main` is checked to be the one the
client loads and to take the benchmark's argv (its run stopped at run_benchmark).
"""
from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from harness import bench_serving as bc  # noqa: E402

STANDIN = '''
import os, sys, time
def cli():
    a = sys.argv[1:]
    print("client says", a)  # bench_serving prints its table to stdout: it must not reach the answers
    if a[0] == "ok":
        with open(a[1], "a") as fh:
            fh.write('{"output_throughput": 100.0, "pid": %d}\\n' % os.getpid())
    elif a[0] == "exit":
        sys.exit(int(a[1]))
    elif a[0] == "raise":
        raise ValueError("no server")
    elif a[0] == "sleep":
        time.sleep(float(a[1]))
    elif a[0] == "die":
        os._exit(3)
'''


@pytest.fixture
def client(tmp_path, monkeypatch):
    (tmp_path / "standin_cli.py").write_text(STANDIN)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{__import__('os').environ.get('PYTHONPATH', '')}")
    c = bc.PersistentClient(cli="standin_cli:cli", stderr_path=str(tmp_path / "client.stderr")).start()
    yield c
    c.stop()


def pid_of(path: Path) -> int:
    return json.loads(path.read_text().splitlines()[-1])["pid"]


def test_runs_share_one_process_and_keep_answers_clean(client, tmp_path):
    res = tmp_path / "res.jsonl"
    assert client.run(["ok", str(res)], tmp_path / "a.log", timeout=60)[0] == 0
    first = pid_of(res)
    assert client.run(["ok", str(res)], tmp_path / "b.log", timeout=60)[0] == 0
    assert pid_of(res) == first == client.proc.pid
    assert "client says ['ok'" in (tmp_path / "b.log").read_text()


def test_exit_status_and_exceptions_are_the_runs_own(client, tmp_path):
    assert client.run(["exit", "2"], tmp_path / "a.log", timeout=60)[0] == 2
    assert client.run(["raise"], tmp_path / "b.log", timeout=60)[0] == 1
    assert "ValueError: no server" in (tmp_path / "b.log").read_text()
    pid = client.proc.pid
    assert client.run(["ok", str(tmp_path / "r")], tmp_path / "c.log", timeout=60)[0] == 0
    assert client.proc.pid == pid  # a failed run does not cost the process


def test_a_run_past_its_timeout_is_killed_and_the_next_restarts(client, tmp_path):
    client.run(["ok", str(tmp_path / "r")], tmp_path / "a.log", timeout=60)
    old = client.proc
    with pytest.raises(TimeoutError, match="killed"):
        client.run(["sleep", "60"], tmp_path / "b.log", timeout=2)
    assert old.poll() is not None and client.proc is None
    assert client.run(["ok", str(tmp_path / "r")], tmp_path / "c.log", timeout=60)[0] == 0
    assert pid_of(tmp_path / "r") != old.pid


def test_a_process_that_dies_mid_run_is_an_error_then_restarted(client, tmp_path):
    client.run(["ok", str(tmp_path / "r")], tmp_path / "a.log", timeout=60)
    with pytest.raises(RuntimeError, match="exited"):
        client.run(["die"], tmp_path / "b.log", timeout=60)
    assert client.run(["ok", str(tmp_path / "r")], tmp_path / "c.log", timeout=60)[0] == 0


def test_a_client_that_cannot_start_falls_back_to_a_subprocess(tmp_path, monkeypatch):
    c = bc.PersistentClient(cli="no_such_module_here:cli", stderr_path=str(tmp_path / "err")).start()
    ran = []
    monkeypatch.setattr(bc.subprocess, "run", lambda cmd, **kw: ran.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0, "table", ""))
    cmd = [sys.executable, "-m", "sglang.bench_serving", "--num-prompts", "8"]
    r = bc.run_bench_serving(c, cmd, tmp_path / "a.log", timeout=60)
    assert r["how"] == "subprocess" and ran == [cmd] and c.unusable
    assert "No module named 'no_such_module_here'" in (tmp_path / "err").read_text()
    assert bc.run_bench_serving(c, cmd, tmp_path / "b.log", timeout=60)["how"] == "subprocess"
    assert (tmp_path / "b.log").read_text() == "table"


def test_the_client_loads_sglangs_own_cli_and_passes_the_argv(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=None))  # not in the CPU venv
    import sglang.bench_serving as shim
    from sglang.benchmark import serving

    cli = bc.load_cli(bc.DEFAULT_CLI)
    assert cli is shim.cli_main is serving.cli_main  # what `python -m sglang.bench_serving` runs
    got = []
    monkeypatch.setattr(serving, "run_benchmark", lambda a: got.append(a))
    argv = ["--backend", "sglang", "--port", "30041", "--dataset-name", "sharegpt", "--dataset-path", "x.json",
            "--num-prompts", "64", "--sharegpt-output-len", "256", "--max-concurrency", "8", "--disable-tqdm"]
    assert bc.run_one(cli, argv, str(tmp_path / "a.log")) == 0
    assert (got[0].num_prompts, got[0].max_concurrency, got[0].port) == (64, 8, 30041)
    assert bc.run_one(cli, ["--no-such-flag"], str(tmp_path / "b.log")) == 2  # argparse's own exit
    assert "unrecognized arguments" in (tmp_path / "b.log").read_text()
