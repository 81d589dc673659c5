"""The sweep runner, resume/force and the report, with SGLang replaced at the process boundary.

A real server needs a GPU, so `sweep.synthetic.SyntheticGPU` plays the server subprocess
(`server_cls`), the load generator (`run_batch`) and `/spec_timing` (`http`) from an analytic model;
everything else (rows, fsync'd results.jsonl, resume, failure handling, tables, PNGs) is the real code.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from sglang_patches.errors import UserError
from sglang_patches.offline.sweep import results as res
from sglang_patches.offline.sweep import table
from sglang_patches.whatif.grid import expand_grid
from sglang_patches.offline.sweep.runner import Progress, RunOptions, run_configs, server_args
from sglang_patches.offline.sweep.synthetic import SyntheticGPU, true_tok_s

PNG_SIG = b"\x89PNG\r\n\x1a\n"


def _opts(out: Path, bss=(1, 8), **kw) -> RunOptions:
    out.mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    return RunOptions(out_dir=str(out), model_flags=["--model-path", "/m/t"],
                      spec_flags=["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/m/d"],
                      server_flags=["--attention-backend", "triton"], batch_sizes=list(bss), prompts=["a", "b"],
                      max_new_tokens=32, repeats=3, timeout=5, meta={"command": "test", "gpu": "fake"}, **kw)


def _run(world: SyntheticGPU, configs, opts):
    buf = io.StringIO()
    rows = run_configs(configs, opts, server_cls=world.server_cls, run_batch=world.run_batch, http=world.http, out=buf)
    return rows, buf.getvalue()


def test_server_args_baseline_and_spec(tmp_path):
    plan = expand_grid([3], [1], [4])
    opts = _opts(tmp_path)
    base = server_args(None, opts)
    assert "--patches" in base and "none" in base and not any(a.startswith("--speculative") for a in base)
    spec = server_args(plan.configs[1], opts)
    assert spec[spec.index("--speculative-num-steps") + 1] == "3"
    assert spec[spec.index("--timing-log") + 1] == str(tmp_path / "timing" / "s3_k1_n4.jsonl")


def test_runner_rows_and_failures_continue(tmp_path):
    plan = expand_grid([1, 2, 3], [1], [2])
    world = SyntheticGPU(failures={"s2_k1_n3": "exit", "s3_k1_n4": "crash@8"})
    opts = _opts(tmp_path)
    rows, log = _run(world, plan.configs, opts)
    assert world.started == ["baseline", "s1_k1_n2", "s2_k1_n3", "s3_k1_n4"]  # one server per config, in order
    assert len(rows) == 8
    on_disk = res.read_rows(tmp_path)
    assert [(r["config"], r["batch_size"], r["status"]) for r in on_disk] == [
        ("baseline", 1, "ok"), ("baseline", 8, "ok"), ("s1_k1_n2", 1, "ok"), ("s1_k1_n2", 8, "ok"),
        ("s2_k1_n3", 1, "failed"), ("s2_k1_n3", 8, "failed"), ("s3_k1_n4", 1, "ok"), ("s3_k1_n4", 8, "failed")]
    failed = {(r["config"], r["batch_size"]): r for r in on_disk if r["status"] == "failed"}
    assert "exited with code 1 while starting" in failed["s2_k1_n3", 1]["reason"]
    assert "out of memory" in failed["s2_k1_n3", 1]["reason"]
    assert failed["s2_k1_n3", 1]["log_path"].endswith("logs/s2_k1_n3.log")
    assert "at batch size 8" in failed["s3_k1_n4", 8]["reason"]
    ok = next(r for r in on_disk if r["config"] == "s1_k1_n2" and r["batch_size"] == 8)
    assert len(ok["tok_s_repeats"]) == 3 and ok["tok_s"] == sorted(ok["tok_s_repeats"])[1]
    assert ok["accept_length"] == pytest.approx(1.8) and ok["pos_rates"] == pytest.approx([0.8])
    assert ok["cond_rates"] == pytest.approx([0.8])
    assert set(ok["phases_p50_ms"]) >= {"draft", "verify", "extend", "cycle", "host_gap"}
    assert ok["phase_shares"]["verify"] > 0.5 and ok["requests"] == 16
    for key in ("command", "gpu", "date", "server_cmd", "max_new_tokens", "tok_s_per_request", "spec"):
        assert key in ok
    # warm-up (bs requests) + 3 repeats of 2 x bs requests per batch size
    assert [n for c, b, n in world.requests if c == "baseline" and b == 8] == [8, 16, 16, 16]
    assert "[8/8]" in log and "ETA" in log and "vs baseline" in log and "FAILED" in log


def test_request_timeout_and_unhealthy_are_failed_rows(tmp_path):
    plan = expand_grid([1, 2], [1], [2])
    world = SyntheticGPU(failures={"s1_k1_n2": "timeout@1", "s2_k1_n3": "unhealthy"})
    _run(world, plan.configs, _opts(tmp_path))
    latest = res.latest_rows(res.read_rows(tmp_path))
    assert "request timed out at batch size 1" in latest["s1_k1_n2", 1]["reason"]
    assert "failed at batch size 1 first" in latest["s1_k1_n2", 8]["reason"]
    assert "not healthy" in latest["s2_k1_n3", 1]["reason"]
    assert latest["baseline", 8]["status"] == "ok"


def test_resume_skips_ok_rows_and_retries_failed(tmp_path):
    plan = expand_grid([1, 2], [1], [2])
    world = SyntheticGPU(failures={"s2_k1_n3": "crash@8"})
    opts = _opts(tmp_path)
    _run(world, plan.configs, opts)
    world2 = SyntheticGPU()
    rows, log = _run(world2, plan.configs, opts)
    assert world2.started == ["s2_k1_n3"]  # only the config with a failed row is started again
    assert [(r["config"], r["batch_size"], r["status"]) for r in rows] == [("s2_k1_n3", 8, "ok")]
    assert "5 (config, batch size) rows already ok" in log
    latest = res.latest_rows(res.read_rows(tmp_path))
    assert all(r["status"] == "ok" for r in latest.values()) and len(latest) == 6
    world3 = SyntheticGPU()
    assert _run(world3, plan.configs, opts)[0] == [] and world3.started == []


MANIFEST = {"target": "/m/t", "draft": "/m/d", "max_new_tokens": 32}


def test_prepare_out_dir_refuses_then_force_backs_up(tmp_path):
    out = tmp_path / "sweep"
    res.prepare_out_dir(out, resume=False, force=False, manifest=MANIFEST)  # new dir: fine
    res.append_row(out, {"config": "baseline", "batch_size": 1, "status": "ok", "tok_s": 1.0})
    with pytest.raises(UserError, match="already holds a sweep") as exc:
        res.prepare_out_dir(out, resume=False, force=False, manifest=MANIFEST)
    assert exc.value.code == 2
    res.prepare_out_dir(out, resume=True, force=False, manifest=MANIFEST)  # resume: fine
    with pytest.raises(UserError, match="other settings"):
        res.prepare_out_dir(out, resume=True, force=False, manifest={**MANIFEST, "max_new_tokens": 64})
    res.prepare_out_dir(out, resume=False, force=True, manifest=MANIFEST)
    backups = sorted(p.name for p in out.iterdir() if ".bak-" in p.name)
    assert any(b.startswith("results.jsonl.bak-") for b in backups)
    assert any(b.startswith("logs.bak-") for b in backups)
    bak = next(out.glob("results.jsonl.bak-*"))
    assert json.loads(bak.read_text())["config"] == "baseline"  # kept, not deleted
    assert res.read_rows(out) == []


def test_torn_last_line_is_ignored(tmp_path):
    res.append_row(tmp_path, {"config": "baseline", "batch_size": 1, "status": "ok", "tok_s": 1.0})
    with open(tmp_path / res.RESULTS, "a") as fh:
        fh.write('{"config": "s1_k1_n2", "batch')
    assert len(res.read_rows(tmp_path)) == 1


def test_progress_eta():
    t = [0.0]
    p = Progress(rows=4, servers=2, now=lambda: t[0], out=io.StringIO())
    assert p.eta() is None
    p.start_s.append(60.0)
    p.servers_done = 1
    p.measure_s.append(10.0)
    p.rows_done = 1
    assert p.eta() == pytest.approx(60.0 * 1 + 10.0 * 3)


# ---------------------------------------------------------------- report

def _sample_sweep(tmp_path, failures=None):
    plan = expand_grid([1, 3, 5], [1, 2], [4, 8])
    res.write_json(tmp_path / res.PLAN, plan.to_dict())
    world = SyntheticGPU(failures=failures or {})
    _run(world, plan.configs, _opts(tmp_path, bss=(1, 32)))
    return plan


def test_best_config_selection(tmp_path):
    plan = _sample_sweep(tmp_path)
    best = table.best_per_bs(res.read_rows(tmp_path))
    for bs in (1, 32):
        truth = max(plan.speculative, key=lambda c: true_tok_s(c, bs))
        assert best[bs]["best"]["config"] == truth.name
        assert best[bs]["speedup"] == pytest.approx(true_tok_s(truth, bs) / true_tok_s(None, bs), rel=0.03)


def test_report_files_tables_and_pngs(tmp_path):
    _sample_sweep(tmp_path, failures={"s3_k1_n4": "exit"})
    buf = io.StringIO()
    paths = table.write_report(tmp_path, out=buf)
    md = (tmp_path / "summary.md").read_text()
    assert "## Batch size 1" in md and "## Batch size 32" in md and "x baseline" in md
    assert "## Failed" in md and "s3_k1_n4" in md and "logs/s3_k1_n4.log" in md
    assert "## Skipped grid points" in md and "steps + 1" in md
    assert "bs 1: best" in buf.getvalue() and "x the baseline" in buf.getvalue()
    # tables sorted by tok/s
    sec = md.split("## Batch size 1")[1].split("##")[0]
    toks = [float(line.split("|")[5]) for line in sec.splitlines() if line.startswith("| s") or line.startswith("| b")]
    assert toks == sorted(toks, reverse=True) and len(toks) >= 5
    for name in ("sweep_tok_s.png", "sweep_phases.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG_SIG
        assert str(tmp_path / name) in paths["pngs"]


def test_report_only_cli_regenerates(tmp_path, capsys):
    from sglang_patches.offline.sweep import cli
    _sample_sweep(tmp_path)
    assert cli.main(["--report-only", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "summary.md").exists() and (tmp_path / "sweep_tok_s.png").exists()
    assert "best" in capsys.readouterr().out


# ---------------------------------------------------------------- real subprocesses, fake HTTP server

FAKE_SERVER = r'''
import json, sys
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
port, args = int(sys.argv[1]), sys.argv[2:]
spec = "--speculative-num-steps" in args
if spec and args[args.index("--speculative-num-steps") + 1] == "5":
    print("torch.OutOfMemoryError: CUDA out of memory", flush=True)
    sys.exit(1)
SUMMARY = {"phases": {p: {"p50": v, "share": v / 10} for p, v in
                      {"draft": 2.0, "verify": 7.0, "extend": 1.0, "cycle": 10.0, "host_gap": 0.2}.items()},
           "accept_length": 2.5, "pos_rates": [0.8, 0.5, 0.2], "cycles": {"counted": 10}}
class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def _send(self, obj, code=200):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.path == "/health_generate":
            return self._send({})
        if self.path == "/spec_timing" and spec:
            return self._send({"spec_timing": SUMMARY})
        self._send({"error": "no"}, 404)
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/generate":
            n = req["sampling_params"]["max_new_tokens"]
            return self._send({"text": "x", "meta_info": {"completion_tokens": n,
                               "spec_accept_length": 2.5 if spec else None, "spec_verify_ct": n // 2}})
        self._send({"reset": True})
ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
'''


def test_runner_with_real_processes_and_http(tmp_path):
    """The real Server (subprocess, health wait, process-group stop), run_batch and http_json against a
    stand-in HTTP server script; steps 5 exits on start like an out-of-memory server."""
    import sys

    from sglang_patches.offline.sweep.server import Server

    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    servers = []

    class ScriptServer(Server):
        def __init__(self, args, *, port, log_path, overlay=True, env=None):
            super().__init__(args, port=port, log_path=log_path, overlay=overlay, env=env)
            self.cmd = [sys.executable, str(script), str(port), *args]
            servers.append(self)

    plan = expand_grid([2, 5], [1], [3])
    opts = _opts(tmp_path / "out", bss=(1, 4))
    opts.timeout = 20
    buf = io.StringIO()
    run_configs(plan.configs, opts, server_cls=ScriptServer, out=buf)
    latest = res.latest_rows(res.read_rows(tmp_path / "out"))
    assert latest["baseline", 4]["status"] == "ok" and latest["baseline", 4]["accept_length"] is None
    ok = latest["s2_k1_n3", 4]
    assert ok["status"] == "ok" and ok["accept_length"] == 2.5 and ok["tok_s"] > 0
    assert ok["cond_rates"] == pytest.approx([0.8, 0.625, 0.4])
    assert ok["phases_p50_ms"]["verify"] == 7.0
    bad = latest["s5_k1_n6", 1]
    assert bad["status"] == "failed" and "exited with code 1 while starting" in bad["reason"]
    assert "out of memory" in bad["reason"]
    assert all(s.poll() is not None for s in servers)  # every server process is gone


def test_profile_seconds_profiles_each_speculative_row_and_failures_are_notes(tmp_path):
    # The synthetic world stands in for GPU servers; `profile` stands in for py-spy + torch profiler.
    plan = expand_grid([1, 2], [1], [2])
    world = SyntheticGPU()
    opts = _opts(tmp_path, bss=(1,), profile_seconds=2.0)
    calls = []

    def profile(url, seconds, out_dir):
        calls.append((seconds, out_dir))
        if "s2_k1_n3" in out_dir:
            raise RuntimeError("py-spy: permission denied")
        return {"problems": []}

    rows = run_configs(plan.configs, opts, server_cls=world.server_cls, run_batch=world.run_batch, http=world.http,
                       out=io.StringIO(), profile=profile)
    assert [c[1].rsplit("/", 1)[1] for c in calls] == ["s1_k1_n2_bs1", "s2_k1_n3_bs1"]  # not the baseline
    assert all(c[0] == 2.0 for c in calls)
    by = {r["config"]: r for r in rows}
    assert all(r["status"] == "ok" for r in rows)
    assert by["s1_k1_n2"]["profile_dir"].endswith("profiles/s1_k1_n2_bs1")
    assert by["s2_k1_n3"]["profile_dir"] is None and "permission denied" in by["s2_k1_n3"]["profile_problems"][0]
    assert "profile_dir" not in by["baseline"]


# ---------------------------------------------------------------- no server outlives the benchmark

DRIVER = r'''
import sys, time
from sglang_patches.offline.sweep.server import Server
srv = Server([], port=1, log_path=sys.argv[1])
srv.cmd = [sys.executable, "-c", "import subprocess, time; subprocess.Popen(['sleep', '120']); time.sleep(120)"]
srv.start()
print(srv.proc.pid, flush=True)
time.sleep(120)
'''


def _group_alive(pgid: int) -> bool:
    import os
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _gone(pgid: int, wait_s: float = 10.0) -> bool:
    """No live (non-zombie) process left in the group; zombies wait for whoever reaps orphans."""
    import subprocess
    import time

    t0 = time.time()
    while time.time() - t0 < wait_s:
        out = subprocess.run(["ps", "-eo", "pgid=,stat="], capture_output=True, text=True).stdout
        live = [ln for ln in out.splitlines() if ln.split() and ln.split()[0] == str(pgid) and not ln.split()[1].startswith("Z")]
        if not live:
            return True
        time.sleep(0.1)
    return False


def test_sigterm_stops_servers_and_their_children(tmp_path):
    """A benchmark killed with SIGTERM (a deadline, a CI timeout) must not leave its SGLang servers (own
    process groups, holding the GPU) running: they did once, and the next run found the GPUs taken."""
    import os
    import signal
    import subprocess
    import sys
    import time

    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path / "s.log")], stdout=subprocess.PIPE,
                              text=True)
    pgid = int(driver.stdout.readline())
    time.sleep(0.5)
    assert _group_alive(pgid)
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(30) == 128 + signal.SIGTERM
    assert _gone(pgid)


def test_stop_kills_children_left_by_a_dead_launcher(tmp_path):
    import sys
    import time

    from sglang_patches.offline.sweep.server import Server

    srv = Server([], port=1, log_path=str(tmp_path / "s.log"))
    srv.cmd = [sys.executable, "-c", "import subprocess; subprocess.Popen(['sleep', '120'])"]  # leader exits at once
    srv.start()
    srv.proc.wait(10)
    time.sleep(0.2)
    assert _group_alive(srv.proc.pid)  # the orphaned child still holds the group
    srv.stop()
    assert _gone(srv.proc.pid)


def test_repeats_take_the_next_prompts_and_every_config_the_same(tmp_path):
    """Repeats once all used prompts 0..n-1 (2 prompts at batch 1): each repeat now moves on, the
    warm-up uses prompts after the timed ones, and baseline and configs see identical prompts."""
    from sglang_patches.offline.sweep.load import pick_prompts

    assert pick_prompts(["a", "b", "c"], 5, offset=2) == ["c", "a", "b", "c", "a"]
    plan = expand_grid([1, 3], [1], [2])
    world = SyntheticGPU(noise=0.0)
    opts = _opts(tmp_path, bss=(1, 4))
    opts.ignore_eos = False
    _run(world, plan.configs, opts)
    by_cfg: dict = {}
    for name, bs, offset, ignore_eos in world.offsets:
        assert ignore_eos is False
        by_cfg.setdefault(name, []).append((bs, offset))
    n1, n4 = 2 * 1, 2 * 4  # requests_per_bs x bs
    expect = [(1, 3 * n1), (1, 0), (1, n1), (1, 2 * n1), (4, 3 * n4), (4, 0), (4, n4), (4, 2 * n4)]
    assert by_cfg["baseline"] == expect
    assert all(v == expect for v in by_cfg.values())


def test_no_ignore_eos_is_recorded_and_must_match_on_resume(tmp_path):
    from sglang_patches.offline.sweep.cli import build_parser

    assert build_parser().parse_args(["--no-ignore-eos"]).no_ignore_eos is True
    assert "ignore_eos" in res.MATCH_KEYS
    res.prepare_out_dir(tmp_path, resume=False, force=False, manifest={"ignore_eos": True})
    res.append_row(tmp_path, {"config": "baseline", "batch_size": 1, "status": "ok"})
    with pytest.raises(UserError, match="ignore_eos"):
        res.prepare_out_dir(tmp_path, resume=True, force=False, manifest={"ignore_eos": False})
