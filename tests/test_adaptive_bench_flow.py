"""benchmarks/adaptive_bench.py's flow on CPU: plan, deadline, resume, configs, summary.

Stand-ins (the real parts need a GPU): the server (writes a log and, for speculative servers, timing
records while "serving"), bench_serving (its result line), the warm-up load and the fixture. What runs
for real: the script's case loop, its cells and start records, the resume logic, the timing-log cut,
`sglang-patches advise --adaptive-config` on it (in process, on the stand-in server's records and log),
SGLang's config loader on the configs, and summary.json with its goals.
"""
from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import needs_sglang

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import adaptive_bench as ab  # noqa: E402
import adaptive_budget as budget  # noqa: E402
import adaptive_summary as asum  # noqa: E402
import adaptive_configs as acfg  # noqa: E402
from sglang_patches import cli  # noqa: E402
from sglang_patches.vocab.schema import make_record  # noqa: E402

TPS = {"plain": 200.0, "s1": 260.0, "s2": 300.0, "s3": 310.0, "s4": 295.0, "s5": 290.0, "default": 305.0, "ours": 330.0, "zero": 190.0}


def flag(args, name):
    return args[args.index(name) + 1] if name in args else None


class FakeServer:
    started: list = []
    live = None

    def __init__(self, args, *, port, log_path, **kw):
        self.args, self.log_path, self.url, self.started_s = args, log_path, f"http://fake:{port}", 1.0
        self.cmd = ["python", "-m", "sglang_patches.launch", *args]
        self.row = ("plain" if "--speculative-algorithm" not in args else
                    "zero" if str(flag(args, "--speculative-adaptive-config")).endswith("zero.json") else
                    "ours" if "--speculative-adaptive-config" in args else
                    "default" if "--speculative-adaptive" in args else f"s{flag(args, '--speculative-num-steps')}")

    def start(self):
        Path(self.log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(self.log_path).write_text("server starting\n")
        FakeServer.started.append(self.row)
        FakeServer.live = self
        return self

    def wait_ready(self, timeout):
        return self

    def serve(self, n):
        """Decode records (and 'Decode batch' lines for the plain server) for `n` cycles."""
        timing = flag(self.args, "--timing-log")
        with open(self.log_path, "a") as fh:
            for i in range(4):
                fh.write(f"Decode batch, #running-req: 1, #token: 100, gen throughput (token/s): {TPS['plain']:.1f}\n")
        if timing:
            steps = int(flag(self.args, "--speculative-num-steps"))
            with open(timing, "a") as fh:  # a steps-s chain accepting 0, 1, ..., s drafts in turn
                for i in range(n):
                    fh.write(json.dumps(make_record(
                        cycle=i, t=time.time(), rank=0, kind="decode", bs=1, steps=steps, topk=1,
                        draft_tokens=steps + 1, accepted=[i % (steps + 1)], draft_ms=0.2 * steps, verify_ms=5.2,
                        extend_ms=0.4, cycle_ms=5.6 + 0.2 * steps, host_gap_ms=0.1, gpu_gap_ms=0.1)) + "\n")

    def stop(self):
        FakeServer.live = None


def fake_run(cmd, **kw):
    if "sglang.bench_serving" in cmd:
        srv = FakeServer.live
        srv.serve(5)
        n = int(flag(cmd, "--num-prompts"))
        with open(flag(cmd, "--output-file"), "a") as fh:
            fh.write(json.dumps({"output_throughput": TPS[srv.row], "completed": n, "accept_length": 2.0}) + "\n")
        return subprocess.CompletedProcess(cmd, 0, "ok", "")
    if cmd[1:4] == ["-m", "sglang_patches", "advise"]:  # the real advise, in process
        assert "--baseline-log" in cmd  # the s5 traffic of one set, with the plain server's log
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main(cmd[3:])
            except SystemExit as exc:
                rc = exc.code
        return subprocess.CompletedProcess(cmd, rc, out.getvalue(), err.getvalue())
    raise AssertionError(cmd)


class FakeClient:
    """Stands in for the persistent client process (tests/test_bench_client.py runs the real one):
    each run goes to the same stand-in bench_serving as a subprocess would."""
    runs: list = []

    def __init__(self, **kw):
        self.ready, self.unusable = True, False

    def start(self):
        return self

    def run(self, argv, log_path, timeout):
        r = ab.subprocess.run(["python", "-m", "sglang.bench_serving", *argv])
        Path(log_path).write_text(r.stdout + r.stderr)
        FakeClient.runs.append(argv)
        return r.returncode, 0.5

    def stop(self):
        pass


@pytest.fixture
def rig(monkeypatch, tmp_path):
    FakeServer.started, FakeClient.runs = [], []
    monkeypatch.setattr("sglang_patches.offline.sweep.server.Server", FakeServer)
    monkeypatch.setattr("sglang_patches.offline.sweep.load.run_batch", lambda *a, **k: {})
    (tmp_path / "fx").mkdir()
    (tmp_path / "fx" / "fixture.json").write_text('{"build_seconds": 230.1}')  # its hash names the build
    monkeypatch.setattr("sglang_patches.offline.fixtures.ensure_fixture", lambda name: SimpleNamespace(
        root=tmp_path / "fx", target=tmp_path / "t", draft=tmp_path / "d", load_format="auto", algorithm="EAGLE3"))
    monkeypatch.setattr(ab.subprocess, "run", fake_run)
    monkeypatch.setattr(ab.bclient, "PersistentClient", FakeClient)
    monkeypatch.setattr(ab, "counters_pass", lambda url, log, prompts: {"records_equal_verify_ct": True,
                                                                         "phases_within_cycle_fraction": 1.0})

    def run(*extra):
        monkeypatch.setattr(sys, "argv", ["adaptive_bench.py", "--out", str(tmp_path / "out"),
                                          "--cases", ",".join(asum.CASE_ORDER), *extra])
        monkeypatch.setattr(ab, "T0", time.time())
        assert ab.main() == 0
        return json.loads((tmp_path / "out" / "summary.json").read_text())
    return run


@needs_sglang("0.5.17", why="the benchmark drives the GPU machine's SGLang 0.5.17 (its --cuda-graph-bs flag and AdaptiveController(config_path=...) changed in 0.5.23)")
def test_full_run_then_resume_starts_nothing(rig, capsys, tmp_path):
    s = rig("--deadline", "100000")
    assert FakeServer.started == ["plain", "s5", "ours", "ours", "default", "s3", "s4", "s2", "s1", "zero"]
    assert s["cells_missing"] == []
    assert s["ours_vs_default_in_bs1"] == round(330 / 305, 4)
    assert s["ours_vs_best_fixed_ood_bs8"] == round(330 / 310, 4)
    assert s["goals"]["ours_ge_0.99x_default_every_cell"] is True
    assert s["goals"]["ours_ge_1.05x_default_ood_bs1"] is True
    assert s["zero_vs_plain_ood_bs1"] == round(190 / 200, 4) and s["configs"]["zero"]["1"]["candidate_steps"] == [0]
    assert "--speculative-num-steps 1 " in s["commands"]["zero_ood_bs1"]["server"]  # the start SGLang needs (bucket 64)
    # advise's own file from the s5 log: bucket 1 chosen among the logged chains, bucket 8 (no cycles) SGLang's
    ours1 = s["configs"]["ours_in"]["1"]["candidate_steps"]
    assert set(ours1) <= {1, 2, 3, 4, 5} and len(ours1) == 1  # one chain: the start chain alone where it is one
    assert 0 not in ours1  # a 5 ms plain step against 6-7 ms cycles of 2-3.5 tokens: speculation wins
    assert s["configs"]["ours_in"]["8"]["candidate_steps"] == [0, 1, 3]
    said = (tmp_path / "out" / "advise" / "ours_in.txt").read_text()
    assert said.rstrip().endswith("rc=0") and re.search(r"bucket 1 \(batch [^)]+\): candidate_steps", said) and "contradicts" not in said
    assert s["configs"]["default"]["1"]["candidate_steps"] == [1, 3, 7]
    assert " advise " in s["configs"]["ours_ood_advise_command"] and "--baseline-log" in s["configs"]["ours_ood_advise_command"]
    assert "--speculative-adaptive-config" in s["commands"]["ours_ood_bs1"]["server"]
    assert "sglang.bench_serving" in s["commands"]["ours_ood_bs1"]["client"]
    assert s["records_equal_spec_verify_ct_all"] is True
    cell = json.loads((tmp_path / "out" / "cells" / "ours_ood_bs1.json").read_text())
    assert cell["client_process"] == "persistent" and len(FakeClient.runs) == 36  # 4 cells x 8 rows, 2 x 2 ours
    assert "goal ours_ge_0.99x_default_every_cell: True" in capsys.readouterr().out
    FakeServer.started = []
    s2 = rig("--deadline", "100000")
    assert FakeServer.started == []
    assert s2["tok_s"] == s["tok_s"]
    assert s2["configs"]["ours_in_advise_command"] == s["configs"]["ours_in_advise_command"]  # kept on resume


def test_export_packs_the_run(rig, tmp_path):
    import tarfile

    rig("--deadline", "100000", "--export", str(tmp_path / "exp"))
    assert sorted(p.name for p in (tmp_path / "exp").iterdir()) == ["run.tgz", "summary.json", "table.txt"]
    names = tarfile.open(tmp_path / "exp" / "run.tgz").getnames()
    assert "cells/ours_ood_bs1.json" in names and any(n.startswith("timing/s5_") for n in names)
    assert "ood_prompts.txt" in names  # the pin: a copy resumed elsewhere keeps its ood set
    assert "temperature.txt" in names  # and its temperature (without it, cells read as greedy)


def test_a_rebuilt_fixture_is_never_compared_with_the_old_one(rig, tmp_path, capsys):
    rig("--deadline", "100000", "--cases", "plain,s5")
    (tmp_path / "fx" / "fixture.json").write_text('{"build_seconds": 225.3}')  # a fresh machine's rebuild
    FakeServer.started = []
    s = rig("--deadline", "100000", "--cases", "ours_ood,default")
    assert FakeServer.started == ["default"]  # ours' config would price the old build's drafter
    assert "another trained-8b build" in s["outcomes_this_run"]["ours_ood"] and "fresh --out" in s["outcomes_this_run"]["ours_ood"]
    assert s["default_vs_plain_in_bs1"] is None and len(s["fixture_builds"]) == 2
    assert any(x.startswith("default_in_bs1 (") and " vs plain_in_bs1 (" in x for x in s["ratios_left_out_across_builds"])
    assert "ratios left out (another trained-8b build" in capsys.readouterr().out
    cells = json.loads((tmp_path / "out" / "cells" / "default_in_bs1.json").read_text())
    assert cells["fixture_build"] and cells["fixture_build"] == s["outcomes_this_run"]["fixture_build"]


def test_a_config_kept_from_another_build_is_not_reused(rig, tmp_path):
    rig("--deadline", "100000", "--cases", "plain,s5,ours_ood")
    assert (tmp_path / "out" / "configs" / "ours_ood.json").exists()
    for f in (tmp_path / "out" / "cells").glob("ours_ood_*.json"):
        f.unlink()  # ours not measured (its server failed, or the deadline came after advise wrote the config)
    (tmp_path / "fx" / "fixture.json").write_text('{"build_seconds": 225.3}')  # a fresh machine's rebuild
    FakeServer.started = []
    s = rig("--deadline", "100000", "--cases", "ours_ood")
    assert FakeServer.started == [] and "another trained-8b build" in s["outcomes_this_run"]["ours_ood"]

def test_a_run_killed_mid_way_has_exported_the_servers_before(rig, monkeypatch, tmp_path):
    import tarfile

    real_start = FakeServer.start

    def start(self):
        if self.row == "s5":
            raise KeyboardInterrupt  # stands in for the call's time limit: nothing after this runs
        return real_start(self)
    monkeypatch.setattr(FakeServer, "start", start)
    with pytest.raises(KeyboardInterrupt):
        rig("--deadline", "100000", "--cases", "plain,s5", "--export", str(tmp_path / "exp"))
    names = tarfile.open(tmp_path / "exp" / "run.tgz").getnames()
    assert "cells/plain_ood_bs8.json" in names
    assert json.loads((tmp_path / "exp" / "summary.json").read_text())["tok_s"]["plain_in_bs1"] is not None


def test_deadline_starts_no_server_and_claims_no_goal(rig):
    s = rig("--deadline", "30")
    assert FakeServer.started == []
    assert all(v is None for v in s["tok_s"].values())
    assert all(v is None for v in s["goals"].values())
    assert s["outcomes_this_run"]["plain"].startswith("not started")


def test_a_failed_cell_is_measured_on_the_next_run_only(rig, monkeypatch):
    calls = {"n": 0}

    def flaky(cmd, **kw):
        if "sglang.bench_serving" in cmd:
            calls["n"] += 1
            if calls["n"] == 2:  # the second cell of the plain server
                return subprocess.CompletedProcess(cmd, 1, "", "boom")
        return fake_run(cmd, **kw)
    monkeypatch.setattr(ab.subprocess, "run", flaky)
    s = rig("--deadline", "100000")
    assert FakeServer.started[0] == "plain"
    assert set(s["cells_missing"]) == {"plain_in_bs8", "plain_ood_bs1", "plain_ood_bs8"}
    FakeServer.started = []
    s = rig("--deadline", "100000")
    assert FakeServer.started == ["plain"]
    assert s["cells_missing"] == []


@needs_sglang("0.5.17", why="the benchmark drives the GPU machine's SGLang 0.5.17 (its --cuda-graph-bs flag and AdaptiveController(config_path=...) changed in 0.5.23)")
def test_commands_parse_with_sglangs_own_parsers(rig, monkeypatch, tmp_path):
    """Every server command the run built goes through the overlay's flag split and SGLang's
    ServerArgs parser; every client command through bench_serving's own CLI (its run stopped at
    run_benchmark, which would need a server)."""
    import argparse
    import shlex
    import types

    from sglang.srt.server_args import ServerArgs
    from sglang_patches.launch_args import split_overlay_args

    s = rig("--deadline", "100000")
    seen = {}
    for name, cmd in s["commands"].items():
        argv = shlex.split(cmd["server"])[3:]  # after "python -m sglang_patches.launch"
        ns, sglang_argv = split_overlay_args(argv)
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        a = parser.parse_args(sglang_argv)
        assert a.cuda_graph_bs_decode == list(acfg.GRAPH_BS) and a.attention_backend == "triton"
        seen[name.rsplit("_", 2)[0]] = (a, ns)
    assert seen["default"][0].speculative_adaptive and seen["default"][0].speculative_adaptive_config is None
    assert seen["ours"][0].speculative_adaptive_config.endswith("ours_ood.json")
    assert seen["s5"][0].speculative_num_steps == 5 and seen["s5"][0].speculative_num_draft_tokens == 6
    assert seen["s5"][1].timing_log and not seen["plain"][1].timing_log
    assert seen["plain"][0].speculative_algorithm is None

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=None))
    from sglang.benchmark import serving

    got = []
    monkeypatch.setattr(serving, "run_benchmark", lambda a: got.append(a))
    client = shlex.split(s["commands"]["ours_ood_bs8"]["client"])
    assert client[1:3] == ["-m", "sglang.bench_serving"]
    monkeypatch.setattr(sys, "argv", ["bench_serving", *client[3:]])
    serving.cli_main()
    a = got[0]
    assert (a.backend, a.dataset_name, a.max_concurrency, a.sharegpt_output_len) == ("sglang", "sharegpt", 8, 256)
    assert a.num_prompts == 64 and Path(a.dataset_path).name == "ood.json" and not a.disable_ignore_eos


def test_an_unknown_client_mode_is_refused_before_anything_starts(rig, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        rig("--client", "threads")
    assert exc.value.code == 2 and "--client: invalid choice: 'threads'" in capsys.readouterr().err
    assert FakeServer.started == [] and not (tmp_path / "out").exists()


def test_a_cell_estimate_scales_with_its_prompts_and_one_past_the_client_limit_is_refused(tmp_path):
    base = SimpleNamespace(prompts_bs1=8, prompts_bs8=64, output_len=256)
    guess = budget.cell_guess
    assert 14 < guess(base, 1) < 16 and 16 < guess(base, 8) < 18  # 8-13 s measured at these defaults
    more = SimpleNamespace(prompts_bs1=24, prompts_bs8=64, output_len=256)
    assert guess(more, 1) == pytest.approx(budget.CELL_FIXED_S + 3 * (guess(base, 1) - budget.CELL_FIXED_S))
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, str(Path(ab.__file__)), "--out", str(out),
                        "--prompts-bs1", "300", "--summary-only"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == ["--prompts-bs1 300 x --output-len 256: a cell would take ~389 s, "
                                             "past the client's 300 s; give fewer prompts or tokens"]
    assert not out.exists()


def test_estimates_come_from_the_runs_own_measurements_once_there_are_some(tmp_path):
    """Before anything ran: the fixed guesses. Then the largest measured start of the same kind and the
    largest measured cell of the same concurrency, times the margin: a start of 65 s no longer costs
    the 110 s guess, so a server that fits is not left out."""
    args = SimpleNamespace(prompts_bs1=24, prompts_bs8=64, output_len=256)
    assert budget.start_s(tmp_path, "adaptive") == budget.START_S["adaptive"]
    assert budget.cell_s(args, {}, 1) == budget.cell_guess(args, 1)
    (tmp_path / "starts").mkdir()
    for name, kind, up in (("s5_1", "fixed", 62.1), ("ours_in_1", "adaptive", 65.0), ("default_1", "adaptive", 71.0),
                           ("bad", "adaptive", None)):
        (tmp_path / "starts" / f"{name}.json").write_text(json.dumps({"kind": kind, "startup_s": up}))
    (tmp_path / "starts" / "torn.json").write_text("{")
    assert budget.start_s(tmp_path, "adaptive") == pytest.approx(budget.MARGIN * 71.0 + budget.STOP_S)
    assert budget.start_s(tmp_path, "fixed") == pytest.approx(budget.MARGIN * 62.1 + budget.STOP_S)
    assert budget.start_s(tmp_path, "plain") == budget.START_S["plain"]  # none of that kind yet
    cells = {"s5_in_bs1": {"bs": 1, "t0": 100.0, "t1": 122.4}, "s5_ood_bs1": {"bs": 1, "t0": 200.0, "t1": 224.4},
             "s5_in_bs8": {"bs": 8, "t0": 300.0, "t1": 310.8}}
    assert budget.cell_s(args, cells, 1) == pytest.approx(budget.MARGIN * 24.4)
    assert budget.cell_s(args, cells, 8) == pytest.approx(budget.MARGIN * 10.8)
    assert budget.cell_s(args, cells, 8) < budget.cell_guess(args, 8)
