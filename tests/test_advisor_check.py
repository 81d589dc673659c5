"""benchmarks/advisor_check.py end to end on CPU with stand-in servers.

The servers need a GPU, so `Server`, the HTTP load and the fixtures are replaced here by stand-ins
that write what a real server leaves behind: a timing log of chains (accepted counts drawn with a
fixed conditional rate), SGLang's "Decode batch" lines for the no-speculation server, and the
alarm's message for the dummy drafter. What runs for real: the script's flow, the `advise`
subprocess on the logged run, the measured-side advisor reads and summary.json / the table."""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import advisor_logs as al

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import advisor_check as chk  # noqa: E402

RATE = 0.7


def flag(args, name):
    return args[args.index(name) + 1] if name in args else None


class FakeServer:
    exit_code = 3  # the drop-in launcher's deliberate stop (deliberate_stop.EXIT_STOPPED)

    def __init__(self, args, *, port, log_path, **kw):
        self.args, self.log_path, self.url, self.started_s = args, log_path, f"http://fake:{port}", 1.0
        self.steps = int(flag(args, "--speculative-num-steps") or 0)

    def start(self):
        Path(self.log_path).write_text("server starting\n")
        timing = flag(self.args, "--timing-log")
        if timing:
            rng = random.Random(self.steps)
            acc = []
            for _ in range(400):
                a = 0
                while a < self.steps and rng.random() < (0.0 if "dummy" in self.args else RATE):
                    a += 1
                acc.append(a)
            recs = []
            for i in range(0, len(acc), 50):  # requests of 50 cycles, each after its prefill record
                recs.append(dict(al.records_from_accepted([0], bs=1, steps=self.steps)[0], kind="prefill",
                                 accepted=[], draft_ms=None, verify_ms=None))
                recs += al.records_from_accepted(
                    acc[i:i + 50], bs=1, steps=self.steps, draft_ms=0.25 * (self.steps - 1) + 0.02, verify_ms=5.0,
                    extend_ms=0.35, gap_ms=0.3)
            al.write_records(Path(timing), recs)
        if "--patches" in self.args:  # the no-speculation server
            with open(self.log_path, "a") as fh:
                fh.write("[2026-12-01 07:00:00] Decode batch, #running-req: 1, #token: 99, token usage: 0.00, "
                         "cuda graph: True, gen throughput (token/s): 180.00, #queue-req: 0,\n" * 5)
        return self

    def wait_ready(self, timeout):
        return self

    def wait_exit(self, timeout):
        with open(self.log_path, "a") as fh:
            fh.write("ERROR sglang_patches: ACCEPT LENGTH COLLAPSE on tp rank 0: accept length 1.000 over the "
                     "last 256 decode cycles, at decode cycle 256 since start or reset (threshold 1.10; ...)\n")
        return self.exit_code

    def stop(self):
        pass


def fake_run_batch(url, prompts, bs, max_new_tokens, num_requests=None, **kw):
    steps = int(url.rsplit("-", 1)[-1]) if "-" in url else 0
    accept = sum(RATE ** k for k in range(steps + 1)) if steps else 1.0
    period = 5.7 + 0.25 * max(steps - 1, 0) + 0.3 if steps else 5.5
    tok_s = accept * 1000 / period
    return {"tok_s": tok_s, "tok_s_per_request": tok_s, "output_tokens": 100, "wall_s": 1.0,
            "accept_length": accept if steps else None, "verify_ct": 10, "text_hashes": ["h"]}


class Srv(FakeServer):   # the URL carries the steps so the fake load knows what it measures
    def __init__(self, args, **kw):
        super().__init__(args, **kw)
        self.url += f"-{self.steps}" if self.steps else ""


def stand_ins(monkeypatch):
    fx = SimpleNamespace(target="/t", draft="/d", load_format="auto", algorithm="EAGLE3")
    monkeypatch.setattr(chk, "Server", Srv)
    monkeypatch.setattr(chk, "ensure_fixture", lambda name: fx)
    monkeypatch.setattr(chk, "run_batch", fake_run_batch)
    monkeypatch.setattr(chk, "generate", lambda *a, **k: {"spec_verify_ct": 50})
    monkeypatch.setattr(chk, "http_json", lambda *a, **k: {"spec_timing": {"accept_collapse": {"status": "ok"}}})
    monkeypatch.setattr(chk.time, "sleep", lambda s: None)


def test_advisor_check_flow_and_summary(tmp_path, monkeypatch, capsys):
    stand_ins(monkeypatch)
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["advisor_check.py", "--out", str(out), "--quiet-cycles", "2000",
                                      "--quiet-max-s", "5"])
    assert chk.main() == 0
    s = json.loads((out / "summary.json").read_text())
    assert [r["steps"] for r in s["rows"]] == [1, 2, 3]
    for r in s["rows"]:   # i.i.d. stand-in chains: truncation and replay both right up to sampling
        assert r["accept_err"] < 0.06 and r["accept_meas"] == pytest.approx(
            al.chain_accept_length_for_test(RATE, r["steps"]), rel=0.08)
        # flat rates (i.i.d. chains): sampling decides whether the later positions pool above the first
        # (the replay) or below (acceptance falling with depth: the truncation); both are right here
        assert r["accept_basis"] in ("replayed", "truncated") and r["accept_err_truncated"] < 0.06
        if r["accept_basis"] == "truncated":
            assert r["accept_pred"] == r["accept_pred_truncated"]
    assert s["accept_err_max"] == max(r["accept_err"] for r in s["rows"])
    assert s["accept_err_max_truncated"] == max(r["accept_err_truncated"] for r in s["rows"])
    assert s["accept_estimate"].startswith("advise's")
    # advise's 95 % range from the logged run's 8 requests, and whether each measured value is inside
    for r in s["rows"]:
        lo, hi = r["accept_range"]
        assert lo <= r["accept_pred"] <= hi and r["accept_in_range"] == (lo <= r["accept_meas"] <= hi)
    assert s["accept_in_range_all"] == all(r["accept_in_range"] for r in s["rows"])
    assert s["recommended"].startswith("s") and s["recommended_vs_best"] is not None
    # the logged steps-5 run and steps 3, 2 (400 records each): steps 1 does not count, the alarm is off there
    assert s["false_alarms"] == 0 and s["quiet_cycles"] == 1200
    # the top-up ran on the last server the alarm watches (steps 2), not on steps 1
    assert s["runs"]["s2"]["extra_quiet_cycles"] >= 2000 - 1200 and "extra_quiet_cycles" not in s["runs"]["s1"]
    assert s["alarm_cycles_to_fire"] == 256 and s["alarm_stopped_server"] is True
    assert set(s["goals"]) >= {"accept_err_max <= 0.02", "exit stops the server"}
    assert json.loads((out / "advise.json").read_text())["baseline"]["step_ms"] == {"1": pytest.approx(1000 / 180)}
    tail = capsys.readouterr().out.strip().splitlines()
    assert tail[-1].startswith(("PASS", "FAIL")) and any(ln.startswith("s1: accept pred") for ln in tail)
    with pytest.raises(SystemExit):   # an existing summary is never overwritten
        chk.main()


def test_deadline_refuses_servers_that_cannot_finish(tmp_path, monkeypatch):
    fx = SimpleNamespace(target="/t", draft="/d", load_format="auto", algorithm="EAGLE3")
    monkeypatch.setattr(chk, "Server", lambda *a, **k: pytest.fail("no server may start"))
    monkeypatch.setattr(chk, "ensure_fixture", lambda name: fx)
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["advisor_check.py", "--out", str(out), "--deadline", "60"])
    assert chk.main() == 1
    s = json.loads((out / "summary.json").read_text())
    assert "--deadline" in s["advise_error"] and "--deadline" in s["alarm_error"]


def test_a_server_out_of_time_is_skipped_and_the_rest_kept(tmp_path, monkeypatch):
    stand_ins(monkeypatch)
    real_need = chk.need

    def need(args, seconds, what):
        if what == "s1":
            raise chk.OutOfTime("s1: 10 s left before --deadline")
        real_need(args, seconds, what)

    monkeypatch.setattr(chk, "need", need)
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["advisor_check.py", "--out", str(out), "--parts", "advise", "--quiet-cycles", "0"])
    assert chk.main() == 0
    s = json.loads((out / "summary.json").read_text())
    assert [r["steps"] for r in s["rows"]] == [2, 3] and "s1" in s["skipped"][0]


def test_a_server_killed_otherwise_does_not_count_as_the_deliberate_stop(tmp_path, monkeypatch):
    """Only exit code 3 (the launcher's deliberate stop) counts: -9 is what SGLang's SIGQUIT crash
    path (or an OOM kill) leaves, and the alarm demo must tell them apart."""
    stand_ins(monkeypatch)
    monkeypatch.setattr(Srv, "exit_code", -9)
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["advisor_check.py", "--out", str(out), "--parts", "alarm"])
    chk.main()
    s = json.loads((out / "summary.json").read_text())
    assert s["alarm_cycles_to_fire"] == 256 and s["alarm_stopped_server"] is False
    assert s["goals"]["exit stops the server"] is False
