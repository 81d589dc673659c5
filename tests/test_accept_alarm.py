"""timing.accept_alarm: the accept-collapse alarm on recorded runs, its actions, silence and wiring."""
from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

import advisor_logs as al
from sglang_patches.launch_args import overlay_config, split_overlay_args
from sglang_patches.vocab.overlay_config import OverlayConfig
from sglang_patches.errors import UserError
from sglang_patches.server.timing import accept_alarm, runtime
from sglang_patches.server.timing.accept_alarm import AcceptCollapseAlarm
from sglang_patches.vocab.logread import read_records
from sglang_patches.server.timing.recorder import CycleRecorder
from sglang_patches.vocab.stats import WindowStats


class Gauges:
    def __init__(self):
        self.calls = []

    def set(self, collapsed, rolling):
        self.calls.append((collapsed, rolling))


def feed(alarm, records):
    for r in records:
        alarm(r)
    return alarm


def collapse_records(n=300, bs=1):
    """The recorded dummy-weight 8B pair (backend_check_8b.json): accept length 1.0 by the timer,
    i.e. no draft ever accepted, at steps 3 / topk 1 / 4 draft tokens."""
    rec = json.loads(al.BACKEND_8B.read_text())["sglang"]["bs1"]
    assert rec["accept_length_timer"] == 1.0
    return al.records_from_accepted([0] * (n * bs), bs=bs, steps=3, draft_ms=rec["draft_ms_p50"],
                                    verify_ms=rec["verify_ms_p50"], extend_ms=rec["extend_ms_p50"])


# ---------------------------------------------------------------- recorded runs

@pytest.mark.parametrize("bs", [1, 16])
def test_fires_once_at_the_end_of_the_first_window_on_the_recorded_collapse(caplog, bs):
    stops, gauges = [], Gauges()
    alarm = AcceptCollapseAlarm(window=256, gauges=gauges, stop=stops.append)
    with caplog.at_level(logging.WARNING, logger="sglang_patches.server.timing"):
        feed(alarm, collapse_records(300, bs))
    warnings = [r for r in caplog.records if "ACCEPT LENGTH COLLAPSE" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert "likely causes" in warnings[0].getMessage() and "preflight" in warnings[0].getMessage()
    assert alarm.fired == 1 and alarm.fired_at_cycle == 256 and not stops
    st = alarm.state()
    assert st["status"] == "collapsed" and st["rolling_accept_length"] == 1.0 and st["threshold"] == 1.1
    assert (1, 1.0) in gauges.calls


def test_quiet_on_every_recorded_trained_and_8b_chain(tmp_path):
    """Every topk-1 row of the trained grid (accept 1.6-3.2) and of the 8B sweep, replayed."""
    n = 0
    for sweep in (al.SWEEP_TRAINED, al.SWEEP_8B):
        for row in al.sweep_rows(sweep):
            if not row.get("spec") or row["spec"]["topk"] != 1:
                continue
            # the 8B rows' acceptance was simulated; replayed here unmarked, so the alarm watches them
            path = al.log_from_sweep_row(row, tmp_path / f"{n}.jsonl", cycles=600, simulated=False)
            recs, _ = read_records([path])
            alarm = feed(AcceptCollapseAlarm(window=256, stop=pytest.fail), recs)
            assert alarm.fired == 0 and alarm.state()["status"] in ("ok", "off_at_steps_1"), row["config"]
            n += 1
    assert n >= 15


def test_exit_action_stops_once_and_rearms_after_recovery(caplog):
    stops = []
    alarm = AcceptCollapseAlarm(window=8, action="exit", stop=stops.append)
    feed(alarm, al.records_from_accepted([0] * 20, bs=1, steps=3))
    assert len(stops) == 1 and "ACCEPT LENGTH COLLAPSE" in stops[0] and "steps 3" in stops[0]
    assert "at decode cycle 8 since" in stops[0]
    with caplog.at_level(logging.WARNING, logger="sglang_patches.server.timing"):
        feed(alarm, al.records_from_accepted([2] * 8, bs=1, steps=3))
    assert not alarm.collapsed and "recovered" in caplog.text
    feed(alarm, al.records_from_accepted([0] * 8, bs=1, steps=3))
    assert len(stops) == 2 and alarm.fired == 2


def test_rolling_window_not_lifetime():
    alarm = AcceptCollapseAlarm(window=10, stop=pytest.fail)
    feed(alarm, al.records_from_accepted([3] * 100, bs=1, steps=3))   # a long good start
    stops = []
    alarm._stop = stops.append
    alarm.action = "exit"
    feed(alarm, al.records_from_accepted([0] * 10, bs=1, steps=3))    # then collapse
    assert len(stops) == 1 and alarm.fired_at_cycle == 110


def test_silent_while_acceptance_is_simulated(monkeypatch):
    monkeypatch.delenv(accept_alarm.SIMULATE_ENV, raising=False)
    assert not accept_alarm.simulated_acceptance(OverlayConfig())
    assert accept_alarm.simulated_acceptance(SimpleNamespace(simulate_acceptance=[0.9, 0.8]))
    assert not accept_alarm.simulated_acceptance(SimpleNamespace(simulate_acceptance=None))
    monkeypatch.setenv(accept_alarm.SIMULATE_ENV, "3.3")
    alarm = accept_alarm.build(OverlayConfig(), rank=0, metrics=False)
    alarm._stop = pytest.fail
    feed(alarm, collapse_records(300))
    assert alarm.fired == 0 and alarm.state()["status"] == "simulated"


def test_steps_one_is_off_by_default_and_explicit_threshold_applies():
    recs = al.records_from_accepted([0] * 40, bs=2, steps=1)
    alarm = feed(AcceptCollapseAlarm(window=16, stop=pytest.fail), recs)
    assert alarm.fired == 0 and alarm.state()["status"] == "off_at_steps_1"
    alarm = feed(AcceptCollapseAlarm(window=16, threshold=1.05), recs)
    assert alarm.fired == 1
    alarm = feed(AcceptCollapseAlarm(window=16, action="off", stop=pytest.fail), collapse_records(40))
    assert alarm.fired == 0 and alarm.state()["status"] == "off"
    assert alarm.config == (3, 1, 4)   # /spec_timing's advice still knows the configuration


def test_prefill_and_stale_only_cycles_do_not_count():
    alarm = AcceptCollapseAlarm(window=4, stop=pytest.fail)
    recs = al.records_from_accepted([0] * 3, bs=1, steps=3)
    pre = dict(recs[0], kind="prefill", accepted=[])
    stale = dict(recs[0], accepted=[], stale=1)
    feed(alarm, recs + [pre, stale] * 5)
    assert alarm.state()["cycles_in_window"] == 3 and alarm.state()["status"] == "warming_up"


def test_gauges_touched_on_changes_and_once_per_window_only():
    gauges = Gauges()
    alarm = AcceptCollapseAlarm(window=32, gauges=gauges)
    feed(alarm, al.records_from_accepted([2] * 32 * 10, bs=1, steps=3))
    assert len(gauges.calls) <= 1 + 10    # reset + once per window, not per cycle


def test_real_prometheus_gauges():
    from prometheus_client import REGISTRY

    alarm = accept_alarm.build(OverlayConfig(accept_collapse_window=4), rank=7, metrics=True)
    alarm._stop = lambda msg: None
    feed(alarm, collapse_records(4))
    assert REGISTRY.get_sample_value("sglang_patches:spec_accept_collapse", {"tp_rank": "7"}) == 1.0
    assert REGISTRY.get_sample_value("sglang_patches:spec_rolling_accept_length", {"tp_rank": "7"}) == 1.0


# ---------------------------------------------------------------- wiring

class _Event:
    """Stand-in for torch.cuda.Event (no CUDA here): always complete, 1 ms between records."""
    clock = 0.0

    def record(self):
        _Event.clock += 1.0
        self.t = _Event.clock

    def query(self):
        return True

    def elapsed_time(self, end):
        return end.t - self.t


def test_alarm_as_recorder_sink_and_in_spec_timing(monkeypatch):
    monkeypatch.delenv(accept_alarm.SIMULATE_ENV, raising=False)
    stats = WindowStats()
    alarm = AcceptCollapseAlarm(window=16, stop=pytest.fail)
    rec = CycleRecorder(_Event, sinks=[stats.add, alarm], pool_size=4)
    monkeypatch.setattr(runtime, "_STATE", runtime.TimingState(recorder=rec, stats=stats, alarm=alarm))
    for i in range(40):
        slot = rec.begin("decode", 2, 3, 1, 4)
        for ph in ("draft", "verify", "extend"):
            rec.phase(ph, True)
            rec.phase(ph, False)
        rec.end(slot)
        rec.set_accepted(slot, [0, 0])
        rec.drain()
    snap = runtime.snapshot()
    assert snap["accept_collapse"]["status"] == "collapsed" and alarm.fired_at_cycle == 16
    assert snap["advice"]["available"] and snap["advice"]["logged"] == "s3_k1_n4"
    # /spec_timing's advice leads with the verdict and recommends no chain (the drafts are all rejected)
    adv = snap["advice"]
    assert adv["verdict"] == "drafter_accepts_nothing" and adv["recommended"] is None
    assert adv["lines"][0].startswith("the drafter accepts nothing: accept length 1.00 at steps 3")
    assert adv["lines"][2].startswith("check them: sglang-patches preflight")
    runtime.reset_stats()
    assert runtime.snapshot()["accept_collapse"]["cycles_in_window"] == 0


def test_launcher_flags_and_config_validation():
    ns, rest = split_overlay_args(["--model-path", "m", "--accept-collapse-window", "64",
                                   "--accept-collapse-threshold", "1.3", "--on-accept-collapse", "exit"])
    cfg = overlay_config(ns)
    assert (cfg.accept_collapse_window, cfg.accept_collapse_threshold, cfg.on_accept_collapse) == (64, 1.3, "exit")
    assert rest == ["--model-path", "m"]
    assert OverlayConfig.from_json(cfg.to_env()) == cfg
    for flags, needle in ((["--accept-collapse-window", "0"], "--accept-collapse-window"),
                          (["--accept-collapse-threshold", "1.0"], "> 1")):
        with pytest.raises(UserError, match=needle):
            overlay_config(split_overlay_args(flags)[0])
    with pytest.raises(UserError, match="on_accept_collapse"):
        OverlayConfig.from_json(json.dumps({"on_accept_collapse": "panic"}))


PARENT = r"""
import multiprocessing as mp, os, signal, sys, time
got = []
signal.signal(signal.SIGQUIT, lambda *a: got.append("SIGQUIT"))
signal.signal(signal.SIGUSR1, lambda *a: got.append("SIGUSR1"))

def child():
    from sglang_patches.server.timing.accept_alarm import stop_server
    stop_server("collapse message for the test")

def grandchild():  # a scheduler under an intermediate process (SGLang's DP controller at --dp-size > 1)
    p = mp.get_context("spawn").Process(target=child)
    p.start(); p.join(60)

if __name__ == "__main__":
    other = None
    if sys.argv[1] == "launcher-pid":
        os.environ["SGLANG_PATCHES_SERVER_PID"] = str(os.getpid())
    elif sys.argv[1] == "stale-pid":  # a live process that is not an ancestor: must not be signalled
        import subprocess
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        os.environ["SGLANG_PATCHES_SERVER_PID"] = str(other.pid)
    else:
        os.environ.pop("SGLANG_PATCHES_SERVER_PID", None)
    p = mp.get_context("spawn").Process(target=grandchild if sys.argv[1] == "launcher-pid" else child)
    p.start(); p.join(60)
    deadline = time.time() + 10
    while not got and time.time() < deadline:
        time.sleep(0.05)
    alive = "" if other is None else (" other-alive" if other.poll() is None else " other-killed")
    if other is not None:
        other.kill()
    print((",".join(got) or "none") + alive, p.exitcode)
"""


@pytest.mark.parametrize("mode,signal_name", [("parent", "SIGQUIT"), ("launcher-pid", "SIGUSR1"),
                                              ("stale-pid", "SIGQUIT other-alive")])
def test_stop_server_signals_the_parent_like_sglangs_scheduler(tmp_path, mode, signal_name):
    """The real mechanism on CPU: a spawned child (as SGLang spawns schedulers) calls stop_server.
    Under the drop-in launcher (its pid in the environment, here two processes up) the launcher gets
    deliberate_stop.STOP_SIGNAL (SIGUSR1); otherwise the parent gets SIGQUIT, which SGLang's running
    server answers as a crash by killing the process tree. A pid in the environment that is not an
    ancestor (stale, reused) is ignored: that process gets nothing, the parent gets SIGQUIT."""
    import os
    import subprocess
    import sys

    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    repo = str(al.RESULTS.parents[1])
    env = {**os.environ, "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.split() == signal_name.split() + ["0"], proc.stdout + proc.stderr
    assert "collapse message for the test" in proc.stderr and "stopping the server" in proc.stderr


def test_silent_on_records_marked_simulated():
    recs = [dict(r, simulated=True) for r in collapse_records(300)]
    alarm = feed(AcceptCollapseAlarm(window=256, stop=pytest.fail), recs)
    assert alarm.fired == 0 and alarm.state()["status"] == "simulated"


def test_simulate_env_off_values_keep_the_alarm_on(monkeypatch):
    from sglang_patches.vocab.overlay_config import OverlayConfig
    from sglang_patches.server.timing import accept_alarm
    for off in ("-1", "0", "", "junk"):
        monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", off)
        assert not accept_alarm.simulated_acceptance(OverlayConfig()), off
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", "3.3")
    assert accept_alarm.simulated_acceptance(OverlayConfig())


LAUNCHER = r"""
import subprocess, sys, time
from sglang.srt.utils.common import kill_process_tree
from sglang_patches.server import deliberate_stop
deliberate_stop.install(kill_process_tree)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print(child.pid, flush=True)  # the handler is in place from here on
time.sleep(60)  # as the launcher serving HTTP: the signal arrives from a scheduler meanwhile
print("not stopped", flush=True)
"""


def test_deliberate_stop_kills_the_tree_at_once_and_exits_3(tmp_path):
    """The launcher's STOP_SIGNAL handler with SGLang's real kill_process_tree: the child process is
    gone, the launcher exits EXIT_STOPPED within seconds (SGLang's SIGQUIT crash path waits 60 s
    for CUDA coredumps by default)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil

    from sglang_patches.server import deliberate_stop

    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER)
    repo = str(al.RESULTS.parents[1])
    env = {**os.environ, "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    child = None
    try:
        child = int(proc.stdout.readline())
        t0 = time.time()
        os.kill(proc.pid, deliberate_stop.STOP_SIGNAL)
        assert proc.wait(30) == deliberate_stop.EXIT_STOPPED == 3
        assert time.time() - t0 < 10
        assert "not stopped" not in proc.stdout.read()
        try:
            assert psutil.Process(child).status() == psutil.STATUS_ZOMBIE  # killed; its parent never reaped it
        except psutil.NoSuchProcess:
            pass
    finally:
        for pid in (proc.pid, child):
            try:
                if pid:
                    os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_serve_installs_the_stop_handler_before_sglang_starts(monkeypatch, capsys):
    """launch.serve with SGLang's entry points replaced (they need a GPU): by the time SGLang's
    launch_server runs, STOP_SIGNAL has the deliberate-stop handler (without it SIGUSR1's default
    action would end the launcher alone and leave the schedulers holding the GPU); and `exit` with
    several tokenizer workers (whose uvicorn supervisor swallows the signal) is refused."""
    import signal
    from types import SimpleNamespace

    from sglang_patches import compat, launch

    from sglang_patches.server import deliberate_stop
    from sglang_patches.server.timing import endpoint

    seen = {}

    def contact(fn):
        return SimpleNamespace(resolve=lambda: fn)

    def launch_server(server_args, run_scheduler_process_func):
        seen["handler"] = signal.getsignal(deliberate_stop.STOP_SIGNAL)

    workers = {"n": 1}
    fake = SimpleNamespace(
        LOAD_PLUGINS=contact(lambda: None),
        PREPARE_SERVER_ARGS=contact(lambda argv: SimpleNamespace(encoder_only=False, tokenizer_worker_num=workers["n"])),
        HTTP_APP=contact(object()), LAUNCH_SERVER=contact(launch_server),
        KILL_PROCESS_TREE=contact(lambda pid, include_parent=True: seen.setdefault("killed", pid)))
    monkeypatch.setattr(launch, "check_gpu", lambda argv: None)
    monkeypatch.setattr(compat, "current", lambda: fake)
    monkeypatch.setattr(endpoint, "install_routes", lambda app: None)
    before = signal.getsignal(deliberate_stop.STOP_SIGNAL)
    try:
        assert launch.serve(["--model-path", "m"], exit_on_collapse=True) == 0
        handler = seen["handler"]
        assert callable(handler) and handler not in (signal.SIG_DFL, signal.SIG_IGN, before)
        assert handler.__module__ == "sglang_patches.server.deliberate_stop"
        workers["n"] = 2
        seen.clear()
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            launch.serve(["--model-path", "m"], exit_on_collapse=True, said=["note: held"])
        assert exc.value.code == 2 and "handler" not in seen
        assert "held" not in capsys.readouterr().err  # a refused start: its error line alone
        assert launch.serve(["--model-path", "m"], exit_on_collapse=False, said=["note: held"]) == 0  # warn: any count
        assert capsys.readouterr().err == "sglang-patches: note: held\n"  # printed once the start goes ahead
    finally:
        signal.signal(deliberate_stop.STOP_SIGNAL, before)
