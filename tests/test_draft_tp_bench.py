"""The pure parts of benchmarks/draft_tp_bench.py on CPU: config order, per-batch rows from a timing
JSONL, K vs K=N ratios, deadline skipping and failed configs (fake Server, run_batch and clock)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import draft_tp_bench as bench  # noqa: E402


def _args(tmp_path, *extra):
    return bench.parse_args(["--out", str(tmp_path), "--tp", "4", *extra])


def test_parse_and_plan_order(tmp_path):
    args = _args(tmp_path, "--batch-sizes", "1,16")
    assert args.tp == 4 and args.steps == [2, 3, 5] and args.batch_sizes == [1, 16]
    assert bench.parse_ks("N,1", 4) == [4, 1] and bench.parse_ks("n, 2, 4", 4) == [4, 2]
    plan = bench.plan_configs(["llama3-8b", "kimi-k2-shape"], [4, 1], [2, 3, 5])
    assert plan[:4] == [("llama3-8b", 4, 3), ("llama3-8b", 1, 3), ("kimi-k2-shape", 4, 3), ("kimi-k2-shape", 1, 3)]
    assert plan[4:] == [("llama3-8b", 4, 2), ("llama3-8b", 1, 2), ("kimi-k2-shape", 4, 2), ("kimi-k2-shape", 1, 2),
                        ("llama3-8b", 4, 5), ("llama3-8b", 1, 5), ("kimi-k2-shape", 4, 5), ("kimi-k2-shape", 1, 5)]
    assert bench.plan_configs(["a"], [8, 1], [2, 4]) == [("a", 8, 2), ("a", 1, 2), ("a", 8, 4), ("a", 1, 4)]


def test_server_flags():
    stock = bench.server_flags("kimi-k2-shape", 4, 4, 3, "/x/c.jsonl")
    assert "--draft-tp-size" not in stock
    v = lambda fl, k: fl[fl.index(k) + 1]  # noqa: E731
    assert v(stock, "--tp-size") == "4" and v(stock, "--speculative-num-draft-tokens") == "4"
    assert v(stock, "--speculative-eagle-topk") == "1" and v(stock, "--timing-log") == "/x/c.jsonl"
    assert v(stock, "--cuda-graph-max-bs-decode") == "16" and v(stock, "--attention-backend") == "triton"
    k1 = bench.server_flags("llama3-8b", 8, 1, 5, "/x/c.jsonl")
    assert v(k1, "--draft-tp-size") == "1" and v(k1, "--speculative-num-draft-tokens") == "6"


def _rec(cycle, t, bs, draft, kind="decode", rank=0, accepted=None):
    return {"cycle": cycle, "t": t, "rank": rank, "kind": kind, "bs": bs, "steps": 3, "topk": 1,
            "draft_tokens": 4, "accepted": accepted if accepted is not None else [2] * bs,
            "draft_ms": draft, "verify_ms": 2 * draft, "extend_ms": 0.5, "cycle_ms": 3 * draft + 0.5,
            "host_gap_ms": 0.1, "gpu_gap_ms": None}


def test_summarize_from_jsonl(tmp_path):
    log = tmp_path / "c.jsonl"
    old = [_rec(0, 99.0, 1, 50.0)]
    recs = [_rec(1, 100.000, 1, 1.0), _rec(2, 100.010, 1, 2.0), _rec(3, 100.030, 1, 3.0),
            _rec(4, 100.200, 1, 100.0, kind="prefill"), _rec(5, 100.250, 1, 4.0),  # 4 -> 5 not a decode pair
            _rec(6, 100.254, 1, 10.0), _rec(7, 100.3, 16, 9.0), _rec(8, 100.4, 1, 1.0, rank=1)]
    log.write_text("".join(json.dumps(r) + "\n" for r in old + recs))
    row = bench.summarize(bench._decode_records(str(log), 1), 1)
    assert row["cycles"] == 5  # cycles 1, 2, 3, 5, 6: not the old line, the prefill, bs 16 or rank 1
    assert row["draft_ms_med"] == 3.0 and row["draft_ms_mean"] == pytest.approx(4.0)
    assert row["draft_ms_p90"] == pytest.approx(7.6)  # inclusive quantile of 1, 2, 3, 4, 10
    assert row["verify_ms_mean"] == pytest.approx(8.0) and row["cycle_ms_med"] == pytest.approx(9.5)
    assert row["gpu_gap_ms_med"] is None and row["host_gap_ms_mean"] == pytest.approx(0.1)
    # consecutive ids: 1->2 10 ms, 2->3 20 ms, 5->6 4 ms
    assert row["wall_ms_per_cycle"] == pytest.approx(10.0)
    assert row["accept_length_cycles"] == pytest.approx(3.0)
    assert bench.summarize([], 1)["draft_ms_mean"] is None and bench.summarize([], 1)["cycles"] == 0


def test_ratios_and_on_paper():
    rows = [{"fixture": "f", "steps": 3, "bs": 1, "draft_tp": 4, "tok_s": 100.0, "draft_ms_mean": 2.0,
             "wall_ms_per_cycle": 5.0},
            {"fixture": "f", "steps": 3, "bs": 1, "draft_tp": 1, "tok_s": 120.0, "draft_ms_mean": 1.5,
             "wall_ms_per_cycle": 6.0},
            {"fixture": "f", "steps": 3, "bs": 16, "draft_tp": 1, "tok_s": 500.0, "draft_ms_mean": 3.0},
            {"fixture": "f", "steps": 3, "bs": 16, "draft_tp": 4, "error": "boom"}]
    (q,) = bench.ratios(rows, 4)
    assert (q["bs"], q["draft_tp"]) == (1, 1)
    assert q["tok_s_ratio"] == pytest.approx(1.2) and q["draft_ms_mean_ratio"] == pytest.approx(0.75)
    assert q["wall_ms_per_cycle_ratio"] == pytest.approx(1.2)  # tok/s and the median cycle can disagree
    coll = [{"tokens": t, "all_reduce_us_h4096": 10.0, "all_reduce_us_h7168": 20.0, "all_gather_us": 5.0}
            for t in (1, 4)]
    (p4096, p7168) = bench.on_paper(coll, [3], [1], 4)
    assert p4096["hidden"] == 4096 and p4096["saved_per_cycle_us"] == pytest.approx(2 * 35 + 35)
    assert p7168["saved_per_cycle_us"] == pytest.approx(2 * 65 + 65)


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


def _fakes(clock, started, per_server_s=200.0, fail=()):
    class FakeServer:
        def __init__(self, flags, *, port, log_path, env=None):
            self.flags, self.port, self.log_path, self.url = flags, port, log_path, f"http://x:{port}"
            self.log = flags[flags.index("--timing-log") + 1]
            self.key = (flags[1], int(flags[flags.index("--speculative-num-steps") + 1]),
                        "--draft-tp-size" in flags)
            assert env["SGLANG_SIMULATE_ACC_LEN"] == "3.3"

        def __enter__(self):
            started.append(self.key)
            self.cycle = 0
            os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
            Path(self.log_path).write_text("line\nKABOOM cuda oom\n")
            return self

        def __exit__(self, *exc):
            pass

        def wait_ready(self, timeout):
            assert timeout >= 30
            clock.now += per_server_s
            if self.key in fail:
                raise RuntimeError("server exited with code 1")

        def log_tail(self, n=40):
            return Path(self.log_path).read_text()

    def run_batch(url, prompts, bs, new_tokens, num_requests=None, timeout=600.0):
        srv = servers[url]
        with open(srv.log, "a") as fh:
            for i in range(5):
                srv.cycle += 1
                fh.write(json.dumps(_rec(srv.cycle, clock.now + 0.01 * i, bs, 1.0 if srv.key[2] else 2.0)) + "\n")
        clock.now += 10
        return {"tok_s": 100.0 * bs * (2 if srv.key[2] else 1), "tok_s_per_request": 100.0, "accept_length": 3.3,
                "wall_s": 10.0}

    servers = {}

    class Tracked(FakeServer):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            servers[self.url] = self

    return Tracked, run_batch


def test_run_all_rows_deadline_and_errors(tmp_path):
    args = _args(tmp_path, "--deadline", "540", "--steps", "2,3")
    clock, started, saves = FakeClock(), [], []
    args.t0 = clock.now
    plan = bench.plan_configs(["llama3-8b", "kimi-k2-shape"], [4, 1], args.steps)
    Server, run_batch = _fakes(clock, started, fail={("kimi-k2-shape", 3, False)})
    result = {"rows": [], "ratios": []}
    bench.run_all(args, plan, ["p"], result, lambda r: saves.append(json.loads(json.dumps(r))),
                  server_cls=Server, run_batch_fn=run_batch, clock=clock, sleep=clock.sleep)
    # each config takes ~230 s: starts at t0, t0+230 run; t0+460 > 540-100 -> the rest are skipped
    assert started == [("llama3-8b", 3, False), ("llama3-8b", 3, True)]
    assert len(saves) == len(plan) and len(result["rows"]) == 2 * len(plan)
    rows = result["rows"]
    assert [r.get("skipped") for r in rows[:4]] == [None] * 4
    assert all(r["skipped"] == "deadline" for r in rows[4:])
    r1 = next(r for r in rows if r["draft_tp"] == 1 and r["bs"] == 16)
    assert r1["cycles"] == 5 and r1["draft_ms_mean"] == 1.0 and r1["tok_s"] == 3200.0
    assert r1["wall_ms_per_cycle"] == pytest.approx(10.0) and r1["steps"] == 3 and r1["tp"] == 4
    assert {(q["bs"], q["tok_s_ratio"], q["draft_ms_mean_ratio"]) for q in result["ratios"]} == {(1, 2.0, 0.5),
                                                                                                (16, 2.0, 0.5)}
    assert saves[0]["rows"][0]["fixture"] == "llama3-8b" and len(saves[0]["rows"]) == 2
    assert (tmp_path / "logs" / "cycles-llama3-8b-k1-s3.jsonl").is_file()

    # no deadline: every config runs; the failing one becomes error rows with the log tail
    args = _args(tmp_path / "b", "--steps", "3")
    clock, started = FakeClock(), []
    args.t0 = clock.now
    Server, run_batch = _fakes(clock, started, fail={("kimi-k2-shape", 3, False)})
    result = {"rows": [], "ratios": []}
    plan = bench.plan_configs(["llama3-8b", "kimi-k2-shape"], [4, 1], args.steps)
    bench.run_all(args, plan, ["p"], result, lambda r: None, server_cls=Server, run_batch_fn=run_batch,
                  clock=clock, sleep=clock.sleep)
    assert len(started) == 4 and len(result["rows"]) == 8
    bad = [r for r in result["rows"] if r.get("error")]
    assert [(r["fixture"], r["draft_tp"], r["bs"]) for r in bad] == [("kimi-k2-shape", 4, 1), ("kimi-k2-shape", 4, 16)]
    assert "server exited" in bad[0]["error"] and "KABOOM" in bad[0]["log_tail"]
    text = bench.table(result, 4)
    assert "kimi-k2-shape" in text and "K=1 vs K=4" in text and "RuntimeError" in text


def test_help_without_gpu():
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "draft_tp_bench.py"), "--help"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "CUDA_VISIBLE_DEVICES": "",
                            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")})
    assert r.returncode == 0, r.stderr
    assert "--deadline" in r.stdout and "--draft-tp" in r.stdout and "kimi-k2-shape" in r.stdout


def test_draft_tp_x2_performance_is_this_benchmark_at_n_2(tmp_path, monkeypatch):
    """draft_tp_x2.py part (b) delegates to draft_tp_bench.run_all (one code path for every TP size)."""
    import draft_tp_x2 as x2

    seen = {}

    def fake_run_all(args, plan, prompts, result, save):
        seen.update(args=args, plan=plan, prompts=prompts)
        result["rows"].append({"fixture": "llama3-8b", "draft_tp": 1, "steps": 3, "bs": 1, "error": "boom"})

    monkeypatch.setattr(bench, "run_all", fake_run_all)
    args = type("A", (), dict(out=str(tmp_path), perf_fixture="llama3-8b", perf_k=[2, 1], steps=3,
                              batch_sizes=[1, 16], simulate_acc_len=3.0, perf_new_tokens=128, rounds=3,
                              port=31700, ready_timeout=900.0))()
    perf = x2.performance(args, ["p"])
    a = seen["args"]
    assert (a.tp, a.steps, a.batch_sizes, a.simulate_acc_len, a.new_tokens) == (2, [3], [1, 16], 3.0, 128)
    assert seen["plan"] == [("llama3-8b", 2, 3), ("llama3-8b", 1, 3)] and seen["prompts"] == ["p"]
    assert perf["fixture"] == "llama3-8b" and perf["rows"][0]["error"] == "boom"
    text = x2.table({"performance": perf})
    assert "performance:" in text and "boom" in text
