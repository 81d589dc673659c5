"""`sglang-patches profile` end to end on the CPU: real py-spy, real processes, real HTTP.

What cannot run here is a GPU SGLang server. `_StubServer` stands in for it: an http.server thread
in this test process answering /server_info, /spec_timing(/reset), /start_profile and /stop_profile
with SGLang's shapes (and, on /stop_profile, writing a trace file where SGLang would). The scheduler
processes are real child Python processes that set SGLang's process title
(`sglang::scheduler_TP<r>`, via setproctitle as SGLang does) and spin in a function `hot_spin`.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sglang_patches.profiling import pids, pyspy, speedscope
from sglang_patches.vocab.stats import summarize

REPO = Path(__file__).resolve().parents[1]
BIN = os.path.dirname(sys.executable)  # the venv's bin: py-spy is installed there

_SCHED = """
import sys, time, setproctitle
setproctitle.setproctitle(sys.argv[1])
def hot_spin():
    x = 0
    for i in range(100000):
        x += i * i
    return x
end = time.time() + float(sys.argv[2])
while time.time() < end:
    hot_spin()
"""


def _spawn_scheduler(title: str, seconds: float = 30.0) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _SCHED, title, str(seconds)])
    deadline = time.time() + 10
    while time.time() < deadline:  # wait until the title is visible, as SGLang's would be
        if pids._cmdline(__import__("psutil").Process(proc.pid)).startswith(title):
            return proc
        time.sleep(0.02)
    proc.kill()
    raise RuntimeError("fake scheduler did not set its title")


def _timing_summary():
    recs = [{"v": 1, "cycle": i, "t": 1000.0 + 0.012 * i, "rank": 0, "kind": "decode", "bs": 2, "steps": 3,
             "topk": 1, "draft_tokens": 4, "accepted": [2, 1], "draft_ms": 3.0, "verify_ms": 5.0, "extend_ms": 2.0,
             "cycle_ms": 10.0, "host_gap_ms": 2.0, "gpu_gap_ms": 1.0, "stale": False} for i in range(50)]
    return {**summarize(recs), "recorder": {"tp_rank": 0, "emitted": 50}}


class _StubServer:
    """Stands in for a GPU SGLang 0.5.17 server (with or without the overlay) - see module docstring."""

    def __init__(self, marker_pid=None, tp_size=2, mode="sglang"):
        self.calls: list[tuple[str, str, object]] = []
        self.headers: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, body):
                data = json.dumps(body).encode() if not isinstance(body, bytes) else body
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                stub.headers.append(dict(self.headers))
                stub.calls.append(("GET", self.path, None))
                self._send(*stub.answer("GET", self.path, None))

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"null")
                stub.headers.append(dict(self.headers))
                stub.calls.append(("POST", self.path, body))
                self._send(*stub.answer("POST", self.path, body))

        self.marker_pid, self.tp_size, self.mode = marker_pid, tp_size, mode
        self.profile = None
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, method, path, body):
        if self.mode == "not_sglang":
            return (200, {"hello": "world"}) if path == "/server_info" else (404, {"detail": "Not Found"})
        overlay = self.marker_pid is not None
        if path == "/server_info":
            state = {"last_gen_throughput": 0.0}
            if overlay:
                state["sglang_patches"] = {"version": "0.1.0", "pid": self.marker_pid, "tp_rank": 0,
                                           "applied": [], "spec_timing": _timing_summary()}
            return 200, {"version": "0.5.17", "tp_size": self.tp_size, "dp_size": 1, "pp_size": 1,
                         "internal_states": [state]}
        if path == "/spec_timing" and overlay:
            return 200, {"spec_timing": _timing_summary(), "dp": [{"dp_rank": 0, "overlay": True,
                                                                   "spec_timing": _timing_summary()}]}
        if path == "/spec_timing/reset" and overlay:
            return 200, {"reset": True}
        if path == "/start_profile":
            self.profile = body
            return 200, b"Start profiling.\n"
        if path == "/stop_profile":  # SGLang exports one Chrome trace per TP rank into output_dir
            for r in range(self.tp_size):
                Path(self.profile["output_dir"], f"{self.profile['profile_id']}-TP-{r}.trace.json.gz").write_bytes(b"")
            return 200, b"Stop profiling. This will take some time.\n"
        return 404, {"detail": "Not Found"}

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def schedulers():
    procs = [_spawn_scheduler("sglang::scheduler_TP0"), _spawn_scheduler("sglang::scheduler_TP1")]
    yield procs
    for p in procs:
        p.kill()
        p.wait()


@pytest.fixture
def stub(schedulers):
    s = _StubServer(marker_pid=schedulers[0].pid)
    yield s
    s.close()


def _orphan_scheduler(title):
    """A scheduler-titled process outside this test's process tree (its parent exits at once)."""
    code = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2], '20'], "
            "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL);"
            "print(p.pid)")
    out = subprocess.run([sys.executable, "-c", code, _SCHED, title], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def test_discover_scheduler_pids(stub, schedulers):
    orphan = _orphan_scheduler("sglang::scheduler_TP0")  # another server's scheduler: must be left out
    try:
        time.sleep(0.3)
        markers = [{"dp_index": 0, "pid": schedulers[0].pid, "tp_rank": 0}]
        info = {"tp_size": 2, "dp_size": 1}
        found, notes = pids.discover("127.0.0.1", stub.port, info, markers)  # listener = this process
        assert [(s.pid, s.tp_rank, s.rank_from) for s in found] == \
            [(schedulers[0].pid, 0, "title"), (schedulers[1].pid, 1, "title")]
        assert found[0].sources == ["scan", "marker"] and found[1].sources == ["scan"]
        assert notes == []
        # nobody listens on this port: the scan is narrowed to the marker pid's server instead
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            free = sock.getsockname()[1]
        found, _ = pids.discover("127.0.0.1", free, info, markers)
        assert sorted(s.pid for s in found) == sorted(p.pid for p in schedulers)
        # a remote server: nothing to attach to, and the reason is given
        found, notes = pids.discover("192.0.2.1", 30000, info, markers)
        assert found == [] and "not on this host" in notes[0]
    finally:
        os.kill(orphan, 9)


def test_real_py_spy_finds_busy_function(tmp_path, schedulers):
    out = str(tmp_path / "p.speedscope.json")
    cmd = pyspy.build_command(pyspy.find_py_spy(os.path.join(BIN, "py-spy")), schedulers[1].pid, out,
                              rate=200, duration_s=30)
    rec = pyspy.Recording(cmd, schedulers[1].pid, out, str(tmp_path / "p.log"))
    time.sleep(1.5)
    ok, message = rec.stop()
    if not ok:  # e.g. CI without ptrace rights: the failure must be the explained ptrace one
        assert "SYS_PTRACE" in message, rec.log_text()
        return
    top = speedscope.top_functions(speedscope.load(out), n=3)
    assert top[0]["function"] == "hot_spin" and top[0]["self_share"] > 0.5, top


def _cli(args, env=None, **kw):
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", ""), "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "sglang_patches", "profile", *args], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=60, **kw)


def test_profile_end_to_end(stub, schedulers, tmp_path):
    out = tmp_path / "prof"
    r = _cli(["--url", stub.url, "--seconds", "2", "--out", str(out), "--rate", "200"])
    summary = json.loads((out / "summary.json").read_text())
    assert "Traceback" not in r.stderr
    methods = [(m, p) for m, p, _ in stub.calls]
    assert methods.index(("POST", "/spec_timing/reset")) < methods.index(("POST", "/start_profile")) \
        < methods.index(("POST", "/stop_profile"))
    assert stub.profile["output_dir"] == str(out / "torch") and stub.profile["activities"] == ["CPU", "GPU"]
    ranks = {r_["tp_rank"]: r_ for r_ in summary["ranks"]}
    assert set(ranks) == {0, 1} and ranks[0]["pid"] == schedulers[0].pid and ranks[1]["pid"] == schedulers[1].pid
    assert ranks[0]["timing"]["host_gap_share"] == pytest.approx(0.2)
    assert ranks[0]["timing"]["gpu_busy_share"] == pytest.approx(0.5 / summary["meta"]["window"]["wall_s"])
    assert [os.path.basename(f) for f in ranks[1]["chrome_traces"]] == [f"{stub.profile['profile_id']}-TP-1.trace.json.gz"]
    md = (out / "summary.md").read_text()
    if any("SYS_PTRACE" in p for p in summary["problems"]):  # no ptrace rights here (CI): explained, exit 1
        assert r.returncode == 1 and "SYS_PTRACE" in r.stderr
        return
    assert r.returncode == 0, r.stderr
    for rank in (0, 1):
        top = ranks[rank]["pyspy"]["top"]
        assert top[0]["function"] == "hot_spin", top
        assert os.path.getsize(ranks[rank]["pyspy"]["svg"]) > 0
    assert "**complete**" in md and "`hot_spin`" in md and "[svg](pyspy/scheduler-tp0" in md


def test_ctrl_c_stops_children_and_writes_partial_summary(stub, schedulers, tmp_path):
    import psutil

    out = tmp_path / "prof"
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "sglang_patches", "profile", "--url", stub.url, "--seconds", "60",
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    deadline = time.time() + 20
    while time.time() < deadline and not any(p == "/start_profile" for _, p, _ in stub.calls):
        time.sleep(0.05)
    spies = [c for c in psutil.Process(proc.pid).children(recursive=True) if "py-spy" in pids._cmdline(c)]
    time.sleep(1.0)
    proc.send_signal(2)  # what Ctrl-C in the terminal sends
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err
    assert spies and not any(s.is_running() and s.status() != psutil.STATUS_ZOMBIE for s in spies)
    assert ("POST", "/stop_profile") in [(m, p) for m, p, _ in stub.calls]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["meta"]["interrupted"] and summary["exit_code"] == 130 and summary["meta"]["window"]["wall_s"] < 30
    assert "**PARTIAL** (interrupted)" in (out / "summary.md").read_text()
    if not any("SYS_PTRACE" in p for p in summary["problems"]):
        assert all(r["pyspy"]["ok"] for r in summary["ranks"])  # what py-spy had collected is kept


def test_profile_without_overlay_or_torch(schedulers, tmp_path):
    stub = _StubServer(marker_pid=None)  # a plain SGLang server: no /spec_timing
    try:
        out = tmp_path / "prof"
        r = _cli(["--url", stub.url, "--seconds", "1", "--out", str(out), "--no-torch-profiler", "--no-py-spy"])
        assert r.returncode == 0, r.stderr
        assert not any(p.startswith("/spec_timing") or p == "/start_profile" for _, p, _ in stub.calls)
        assert "no overlay: no phase-timing window" in (out / "summary.md").read_text()
        assert "without the sglang_patches overlay" in r.stderr
    finally:
        stub.close()


def _assert_one_line_error(r, code, *needles):
    assert r.returncode == code, (r.returncode, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("sglang-patches: error:"), r.stderr
    assert "Traceback" not in r.stderr and all(n in lines[0] for n in needles), lines[0]


def test_bad_inputs(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    _assert_one_line_error(_cli(["--url", dead, "--seconds", "1", "--out", str(tmp_path / "a")]), 2, "cannot reach")
    assert not (tmp_path / "a").exists()
    other = _StubServer(mode="not_sglang")
    try:
        _assert_one_line_error(_cli(["--url", other.url, "--out", str(tmp_path / "b")]), 2, "not SGLang")
    finally:
        other.close()
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "keep.txt").write_text("x")
    _assert_one_line_error(_cli(["--url", dead, "--out", str(tmp_path / "c")]), 2, "already exists")
    assert os.listdir(tmp_path / "c") == ["keep.txt"]
    r = _cli(["--url", dead, "--out", str(tmp_path / "d")], env={"PATH": str(tmp_path / "empty-bin")})
    _assert_one_line_error(r, 2, "cannot reach")  # a wrong URL is named before a missing py-spy
    live = _StubServer()
    try:
        r = _cli(["--url", live.url, "--out", str(tmp_path / "d")], env={"PATH": str(tmp_path / "empty-bin")})
        _assert_one_line_error(r, 2, "py-spy is not on PATH", "pip install py-spy")
    finally:
        live.close()
    assert not (tmp_path / "d").exists()
    _assert_one_line_error(_cli(["--url", "ftp://x", "--out", str(tmp_path / "e")]), 2, "not an http")
    _assert_one_line_error(_cli(["--url", dead, "--seconds", "0", "--out", str(tmp_path / "f")]), 2, "--seconds")


def _can_drop_ptrace_cap() -> bool:
    try:
        with open("/proc/self/status") as f:
            bnd = next(int(ln.split()[1], 16) for ln in f if ln.startswith("CapBnd:"))
    except (OSError, StopIteration):
        return False
    return os.geteuid() == 0 and bool(bnd & (1 << 19))


@pytest.mark.skipif(not _can_drop_ptrace_cap(), reason="needs root with CAP_SYS_PTRACE to take it away")
def test_ptrace_denied_is_explained(stub, schedulers, tmp_path):
    # The CLI runs without CAP_SYS_PTRACE (dropped from its capability bounding set before exec, as
    # in a docker container without --cap-add SYS_PTRACE) against scheduler processes that hold
    # every capability: py-spy really is denied.
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def drop_ptrace():
        if libc.prctl(24, 19, 0, 0, 0) != 0:  # PR_CAPBSET_DROP, CAP_SYS_PTRACE
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")

    out = str(tmp_path / "prof")
    # a 3 s window: py-spy prints its refusal once it tries to attach, which on a busy 2-core machine can
    # take over a second; stopped before that, it exits with no message to classify
    r = _cli(["--url", stub.url, "--seconds", "3", "--out", out], preexec_fn=drop_ptrace)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "SYS_PTRACE" in r.stderr and "PARTIAL" in r.stderr
    summary = json.loads(Path(out, "summary.json").read_text())
    assert summary["complete"] is False and summary["exit_code"] == 1
    assert summary["ranks"][0]["timing"]["host_gap_share"] == pytest.approx(0.2)  # the other parts still ran
    assert len(summary["torch_profiler"]["files"]) == 2
    assert "denied access to pid" in Path(out, "summary.md").read_text()


def test_client_sends_the_api_key_and_turns_failures_into_one_line():
    """profiling.client.Client over the shared sglang_patches.httpjson helper, against the stub."""
    from sglang_patches.profiling.client import Client, RequestFailed

    srv = _StubServer(marker_pid=None)
    try:
        c = Client(srv.url, api_key="secret", timeout=5)
        assert c.request("/server_info")["version"] == "0.5.17"
        assert srv.headers[-1]["Authorization"] == "Bearer secret"
        assert c.request("/start_profile", {"output_dir": "/tmp", "profile_id": "x"}) == "Start profiling.\n"
        assert srv.calls[-1] == ("POST", "/start_profile", {"output_dir": "/tmp", "profile_id": "x"})
        with pytest.raises(RequestFailed, match=r"^GET /nope: HTTP 404 \(.*Not Found.*\)$"):
            c.request("/nope")
        assert "Authorization" not in (Client(srv.url, timeout=5).request("/server_info") and srv.headers[-1])
    finally:
        srv.close()
    with pytest.raises(RequestFailed, match=r"^GET /server_info: ") as e:
        Client(srv.url, timeout=2).request("/server_info")
    assert "\n" not in str(e.value)
