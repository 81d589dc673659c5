"""A hidden-state mismatch at model load under the drop-in launcher: one line, exit 4 (deliberate_stop).

The process tree is real: a launcher process runs `launch.serve` (SGLang's launch_server MOCKED: it needs
a GPU; in its place a function that spawns a scheduler process with multiprocessing spawn, as SGLang does,
and waits for it), the launcher's real handler and SGLang's real kill_process_tree. The scheduler runs the
REAL load-time check (hidden_state_checks.load_time_check) on a stand-in EagleDraftWorker (a real one
needs a GPU and loaded models): an EAGLE-3 head, fc 21504 -> 7168 on the "meta" device, served with
SGLang's real SpeculativeAlgorithm EAGLE, which is finding SP001.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from sglang_patches.server import deliberate_stop
from sglang_patches.server.patches import hidden_state_checks as hsc
from sglang_patches.vocab.overlay_config import ENV_VAR, SERVER_PID_ENV, STOP_REASON_ENV

REPO = str(Path(__file__).resolve().parents[1])

WORKER = r'''
def sp001_worker():
    """A stand-in EagleDraftWorker: an EAGLE-3 head (fc 3 x 7168 -> 7168) served as EAGLE."""
    from types import SimpleNamespace

    import torch
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    head = type("LlamaForCausalLMEagle3", (SimpleNamespace,), {})(
        model=SimpleNamespace(fc=torch.nn.Linear(21504, 7168, bias=False, device="meta")),
        config=SimpleNamespace(hidden_size=7168))
    target = SimpleNamespace(config=SimpleNamespace(hidden_size=7168, num_hidden_layers=32),
                             capture_aux_hidden_states=False, model=SimpleNamespace(layers_to_capture=[]))
    return SimpleNamespace(draft_runner=SimpleNamespace(model=head),
                           target_worker=SimpleNamespace(model_runner=SimpleNamespace(model=target)),
                           speculative_algorithm=SpeculativeAlgorithm.from_string("EAGLE"))


def run_check():
    from sglang_patches.server.patches.hidden_state_checks import load_time_check

    try:
        load_time_check(sp001_worker())
    except Exception as err:  # what SGLang's run_scheduler_process would catch: its crash path follows
        print("raised", type(err).__name__, flush=True)
'''

LAUNCHER = WORKER + r'''
import multiprocessing as mp
import os
import sys
import time
from types import SimpleNamespace


def scheduler(depth):
    """A scheduler process; at depth 2 below a process in between, as SGLang's data-parallel controller."""
    if depth > 1:
        ctl = mp.get_context("spawn").Process(target=scheduler, args=(depth - 1,))
        ctl.start()
        ctl.join()
        return
    run_check()


def launch_server(server_args, run_scheduler_process_func):
    """MOCKED SGLang launch_server: spawn the scheduler (none at depth 0) and wait for it."""
    depth = int(sys.argv[1])
    if depth == 0:
        print(os.getpid(), flush=True)
        time.sleep(60)
    else:
        proc = mp.get_context("spawn").Process(target=scheduler, args=(depth,))
        proc.start()
        print(proc.pid, flush=True)
        proc.join(90)
    print("not stopped", flush=True)


if __name__ == "__main__":
    import logging

    from sglang.srt.utils.common import kill_process_tree

    logging.basicConfig(level=logging.INFO)  # as SGLang's configure_logger in the launcher (default log level)

    from sglang_patches import compat, launch
    from sglang_patches.server.timing import endpoint
    from sglang_patches.vocab.overlay_config import SERVER_PID_ENV

    def contact(fn):
        return SimpleNamespace(resolve=lambda: fn)

    compat.current = lambda: SimpleNamespace(  # SGLang's real kill_process_tree; the rest needs a GPU server
        LOAD_PLUGINS=contact(lambda: None), HTTP_APP=contact(object()), LAUNCH_SERVER=contact(launch_server),
        PREPARE_SERVER_ARGS=contact(lambda argv: SimpleNamespace(encoder_only=False, tokenizer_worker_num=1)),
        KILL_PROCESS_TREE=contact(kill_process_tree))
    launch.check_gpu = lambda argv: None
    endpoint.install_routes = lambda app: None
    os.environ[SERVER_PID_ENV] = str(os.getpid())  # as launch.main does
    sys.exit(launch.serve(["--model-path", "m"]))
'''


def _env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in (ENV_VAR, SERVER_PID_ENV, STOP_REASON_ENV)}
    env["PYTHONPATH"] = REPO + os.pathsep + os.environ.get("PYTHONPATH", "")
    env["TMPDIR"] = str(tmp_path / "tmp")  # where the launcher makes its private folder: checked to be gone
    (tmp_path / "tmp").mkdir()
    return env


def _gone(pid: int, within: float = 10.0) -> bool:
    """SIGKILL is delivered asynchronously (0.5.17's kill_process_tree does not wait): give it a moment."""
    deadline = time.time() + within
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:  # killed, not (yet) reaped
                return True
        except psutil.NoSuchProcess:
            return True
        if time.time() > deadline:
            return False
        time.sleep(0.1)


def _start(tmp_path, depth: int):
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER)
    return subprocess.Popen([sys.executable, str(script), str(depth)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(tmp_path))


def _kill(*pids):
    for pid in pids:
        try:
            if pid:
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize("depth", [1, 2], ids=["scheduler", "below-dp-controller"])
def test_mismatch_at_load_ends_the_launcher_with_one_line_and_exit_4(tmp_path, depth):
    proc = _start(tmp_path, depth)
    child = None
    try:
        child = int(proc.stdout.readline())
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == deliberate_stop.EXIT_MISMATCH == 4, (out, err)
        lines = err.splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("sglang-patches: error: HIDDEN-STATE MISMATCH: SP001 drafter fc expects 21504 "
                                   "= 3 x 7168"), err
        assert lines[0].endswith("fix: --speculative-algorithm EAGLE3"), err
        assert "Traceback" not in err and out == ""  # not raised, nor waited out
        assert _gone(child)
        assert list((tmp_path / "tmp").iterdir()) == []  # the reason's folder removed
    finally:
        _kill(proc.pid, child)


def test_the_signal_without_a_reason_still_says_what_stopped_it(tmp_path):
    """The launcher's handler when the reason file is missing: one fixed line naming preflight, exit 4."""
    proc = _start(tmp_path, 0)
    try:
        int(proc.stdout.readline())  # launch_server is running: the handler is in place
        t0 = time.time()
        os.kill(proc.pid, deliberate_stop.MISMATCH_SIGNAL)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 4 and time.time() - t0 < 10
        assert err == f"sglang-patches: error: {deliberate_stop.NO_REASON}\n" and out == ""
        assert list((tmp_path / "tmp").iterdir()) == []
    finally:
        _kill(proc.pid)


ANCESTOR = WORKER + r'''
import multiprocessing as mp
import os
import signal
import sys


def scheduler():
    from sglang_patches.server import deliberate_stop

    deliberate_stop.MISMATCH_WAIT_S = 1.0  # the launcher below ignores the signal: do not wait the full time
    run_check()


if __name__ == "__main__":
    from sglang_patches.vocab.overlay_config import SERVER_PID_ENV, STOP_REASON_ENV

    got = []
    signal.signal(signal.SIGUSR2, lambda *a: got.append("signalled"))  # a launcher that never kills the tree
    os.environ[SERVER_PID_ENV] = str(os.getpid())
    os.environ[STOP_REASON_ENV] = sys.argv[1]
    proc = mp.get_context("spawn").Process(target=scheduler)
    proc.start()
    proc.join(120)
    print(*got, "exit", proc.exitcode, flush=True)
'''


@pytest.mark.parametrize("where", ["written", "unwritable"])
def test_a_launcher_that_does_not_stop_it_leaves_the_raise(tmp_path, where):
    """Signalled but not killed within MISMATCH_WAIT_S: the check raises (SGLang's path still stops the
    server). A reason file that cannot be written: no signal, the check raises at once."""
    script = tmp_path / "ancestor.py"
    script.write_text(ANCESTOR)
    reason = tmp_path / ("reason" if where == "written" else "missing-folder/reason")
    proc = subprocess.run([sys.executable, str(script), str(reason)], capture_output=True, text=True,
                          env=_env(tmp_path), timeout=180)
    signalled = "signalled " if where == "written" else ""
    assert proc.stdout == f"raised HiddenStateMismatch\n{signalled}exit 0\n", proc.stdout + proc.stderr
    if where == "written":
        text = reason.read_text()
        assert text.startswith("HIDDEN-STATE MISMATCH: SP001 ") and "\n" not in text
    else:
        assert not reason.parent.exists()


@pytest.fixture
def no_launcher(monkeypatch):
    for name in (ENV_VAR, SERVER_PID_ENV, STOP_REASON_ENV):
        monkeypatch.delenv(name, raising=False)


def _sp001_worker():
    namespace = {}
    exec(compile(WORKER, "worker", "exec"), namespace)  # the same stand-in the child processes use
    return namespace["sp001_worker"]()


def test_without_a_launcher_the_check_raises(no_launcher, monkeypatch, tmp_path):
    """Plain `sglang serve` with the plugin, Engine, tests: no STOP_REASON_ENV, or a launcher pid that is
    not an ancestor (stale, reused): nothing is written or signalled; HiddenStateMismatch as before."""
    monkeypatch.setattr(deliberate_stop, "wait_to_be_stopped", lambda seconds=None: pytest.fail("waited"))
    with pytest.raises(hsc.HiddenStateMismatch) as info:
        hsc.load_time_check(_sp001_worker())
    assert str(info.value).startswith("sglang_patches: HIDDEN-STATE MISMATCH: SP001 ")
    # a pid in the environment that is no ancestor: a process whose default SIGUSR2 action would end it
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        monkeypatch.setenv(SERVER_PID_ENV, str(other.pid))
        monkeypatch.setenv(STOP_REASON_ENV, str(tmp_path / "reason"))
        with pytest.raises(hsc.HiddenStateMismatch):
            hsc.load_time_check(_sp001_worker())
        time.sleep(0.5)
        assert other.poll() is None and not (tmp_path / "reason").exists()
    finally:
        other.kill()
        other.wait()


def test_serve_sets_the_mismatch_stop_up_for_the_launch_only(no_launcher, monkeypatch):
    """launch.serve (SGLang's entry points MOCKED: they need a GPU): while SGLang's launch_server runs,
    MISMATCH_SIGNAL has the launcher's handler and STOP_REASON_ENV names a file in a private folder
    (inherited by the schedulers it spawns); afterwards handler, variable and folder are put back."""
    from sglang_patches import compat, launch
    from sglang_patches.server.timing import endpoint

    seen = {}

    def contact(fn):
        return SimpleNamespace(resolve=lambda: fn)

    def launch_server(server_args, run_scheduler_process_func):
        path = os.environ[STOP_REASON_ENV]
        seen.update(handler=signal.getsignal(deliberate_stop.MISMATCH_SIGNAL), path=path,
                    mode=os.stat(os.path.dirname(path)).st_mode & 0o777, exists=os.path.exists(path))

    fake = SimpleNamespace(
        LOAD_PLUGINS=contact(lambda: None), HTTP_APP=contact(object()), LAUNCH_SERVER=contact(launch_server),
        PREPARE_SERVER_ARGS=contact(lambda argv: SimpleNamespace(encoder_only=False, tokenizer_worker_num=1)),
        KILL_PROCESS_TREE=contact(lambda pid, include_parent=True: None))
    monkeypatch.setattr(launch, "check_gpu", lambda argv: None)
    monkeypatch.setattr(compat, "current", lambda: fake)
    monkeypatch.setattr(endpoint, "install_routes", lambda app: None)
    before = {s: signal.getsignal(s) for s in (deliberate_stop.STOP_SIGNAL, deliberate_stop.MISMATCH_SIGNAL)}
    try:
        assert launch.serve(["--model-path", "m"]) == 0
        assert getattr(seen["handler"], "__module__", None) == "sglang_patches.server.deliberate_stop"
        assert seen["mode"] == 0o700 and not seen["exists"]  # nothing there until a scheduler writes it
        assert signal.getsignal(deliberate_stop.MISMATCH_SIGNAL) is before[deliberate_stop.MISMATCH_SIGNAL]
        assert STOP_REASON_ENV not in os.environ and not os.path.exists(os.path.dirname(seen["path"]))
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
