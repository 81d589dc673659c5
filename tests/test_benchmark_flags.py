"""Bad input to the benchmark scripts this project runs on the GPU machine is refused before any
server starts (these tests need no GPU: the refusal comes first): one line, non-zero exit, no
traceback, nothing written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run(script, *args):
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / script), *args], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=120)


@pytest.mark.parametrize("args, why", [(["--requests-per-run", "0"], "not an integer >= 1"),
                                       (["--requests-per-run", "x"], "invalid int value"),
                                       (["--repeats", "-2"], "not an integer >= 1"),
                                       (["--batch-sizes"], "expected one argument")])
def test_timing_overhead_refuses_bad_flags(tmp_path, args, why):
    out = tmp_path / "out"
    r = run("timing_overhead.py", "--out", str(out), *args)
    err = r.stderr.strip()
    assert r.returncode != 0 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("timing_overhead: error: ") and why in err
    assert not out.exists()


def test_search_vs_grid_refuses_a_missing_flag(tmp_path):
    r = run("search_vs_grid.py", "--search", str(tmp_path))
    err = r.stderr.strip()
    assert r.returncode != 0 and len(err.splitlines()) == 1 and err.startswith("search_vs_grid: error: ")
    assert "--grid" in err


def test_timing_overhead_hands_over_each_batch_size_as_it_finishes(monkeypatch):
    """A run_parallel.py deadline kills the script without `finally`: each batch size's row must reach the
    caller (which writes the JSON) as soon as it is measured. run_batch is replaced here because it
    needs two live SGLang servers (the GPU runs use the real one)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import timing_overhead as to

    monkeypatch.setattr(to, "run_batch", lambda url, prompts, bs, max_new, num_requests=None: {
        "tok_s": 100.0 if url == "on" else 101.0, "wall_s": 1.0, "accept_length": 2.0})
    srv = lambda name: type("S", (), {"url": name})()  # noqa: E731
    seen = []
    rows = to.overhead(srv("on"), srv("off"), [1, 16], 3, 8, on_row=lambda r: seen.append(sorted(r)))
    assert seen == [[1], [1, 16]]
    assert rows[16]["paired_ratio_median"] == pytest.approx(100 / 101)


def test_timing_overhead_steady_decode_from_both_server_logs(tmp_path):
    """The steady ON/OFF ratio reads SGLang's own 'Decode batch' lines of both servers (speculative
    lines included): windows at #running-req = bs, no prefill between, at least 3 per server."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import timing_overhead as to

    def line(n, tput):
        return (f"[2026-12-01 10:00:00] Decode batch, #running-req: {n}, #token: 900, token usage: 0.01, "
                f"accept len: 2.30, accept rate: 0.43, cuda graph: True, gen throughput (token/s): {tput:.2f}, "
                "#queue-req: 0,\n")
    prefill = "[2026-12-01 10:00:00] Prefill batch, #new-seq: 1, #new-token: 90, #running-req: 15, #queue-req: 0\n"
    on, off = tmp_path / "on.log", tmp_path / "off.log"
    on.write_text(line(16, 100.0) + line(16, 3000.0) * 4 + prefill + line(16, 50.0) + line(1, 300.0) * 3)
    off.write_text(line(16, 3100.0) * 4 + line(1, 310.0) * 3)
    got = to.steady_decode(str(on), str(off), [1, 16, 64])
    assert got[16]["ratio"] == pytest.approx(3000.0 / 3100.0)   # OFF cycle ms / ON cycle ms: ON slower
    lo, hi = got[16]["ratio_ci95"]
    assert lo == pytest.approx(3000.0 / 3100.0) and hi == pytest.approx(3000.0 / 3100.0)  # constant windows
    assert got[16]["windows_on"] == 4 and got[16]["windows_off"] == 3  # first lines and the prefill window left out
    assert got[1]["windows_on"] == 2 and got[1]["ratio"] is None     # too few windows: no ratio
    assert got[64] == {"windows_on": 0, "windows_off": 0, "ratio": None, "log_ranges": False}


def test_timing_overhead_reads_each_batch_size_from_its_own_stretch_of_the_logs(tmp_path):
    """overhead() records each batch size's byte range in both logs; a bs-16 batch's tail at
    #running-req 1 lies outside bs 1's range and must not count there."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import timing_overhead as to

    def line(n, tput):
        return (f"[2026-12-01 10:00:00] Decode batch, #running-req: {n}, #token: 9, token usage: 0.00, "
                f"accept len: 2.00, accept rate: 0.3, cuda graph: True, gen throughput (token/s): {tput:.2f}\n")
    bs1 = line(1, 400.0) * 4                        # 5 ms cycles
    log = tmp_path / "on.log"
    log.write_text(bs1 + line(16, 5000.0) * 4 + line(1, 40.0) * 6)   # the tail: 50 ms cycles
    ranges = {1: {"on": [0, len(bs1)], "off": [0, len(bs1)]}}
    got = to.steady_decode(str(log), str(log), [1], ranges)[1]
    assert got["windows_on"] == 3 and got["log_ranges"] is True and got["cycle_ms_on"] == pytest.approx(5.0)
    assert to.steady_decode(str(log), str(log), [1])[1]["windows_on"] == 8   # whole logs: the tail counts


def test_timing_overhead_resummarize_rewrites_steady_decode_from_the_logs(tmp_path, capsys):
    """--resummarize recomputes steady_decode of a finished run from its server logs, no GPU; a
    folder that is not such a run is one line and exit 2."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import timing_overhead as to

    def line(acc, tput):
        return (f"[2026-12-01 10:00:00] Decode batch, #running-req: 1, #token: 90, token usage: 0.00, "
                f"accept len: {acc:.2f}, accept rate: 0.3, cuda graph: True, gen throughput (token/s): {tput:.2f}\n")
    # ON: 5 ms cycles at accept 2 and 3; OFF: 4 ms cycles. Per token the two would look alike.
    (tmp_path / "server_on.log").write_text("".join(line(a, a * 200.0) for a in (2, 3, 2, 3, 2)))
    (tmp_path / "server_off.log").write_text("".join(line(a, a * 250.0) for a in (3, 2, 3, 2, 3)))
    row = {"paired_ratio_ci95": [0.99, 1.01], "median_on": 1.0, "median_off": 1.0, "loss_pct": 0.0,
           "paired_ratio_median": 1.0}
    (tmp_path / "timing_overhead.json").write_text(json.dumps({"overhead": {"1": row}, "steady_decode": {}}))
    old, sys.argv = sys.argv, ["timing_overhead.py", "--out", str(tmp_path), "--resummarize"]
    try:
        assert to.main() == 0
        got = json.loads((tmp_path / "timing_overhead.json").read_text())["steady_decode"]["1"]
        assert got["ratio"] == pytest.approx(4.0 / 5.0) and got["windows_on"] == 4
        assert "steady cycle OFF/ON 0.8000" in capsys.readouterr().out
        sys.argv = ["timing_overhead.py", "--out", str(tmp_path / "nothing"), "--resummarize"]
        with pytest.raises(SystemExit) as exc:
            to.main()
        assert exc.value.code == 2 and "not a finished timing_overhead.py run" in capsys.readouterr().err
        before = (tmp_path / "timing_overhead.json").read_text()
        (tmp_path / "timing_overhead.json").write_text(json.dumps({**json.loads(before), "profile": {"1": {}}}))
        sys.argv = ["timing_overhead.py", "--out", str(tmp_path), "--resummarize"]
        with pytest.raises(SystemExit) as exc:   # the ON log holds profile windows after the overhead runs
            to.main()
        assert exc.value.code == 2 and "profiled the ON server" in capsys.readouterr().err
    finally:
        sys.argv = old


def test_timing_overhead_serves_on_and_off_with_the_same_kv_pool():
    """ON and OFF differ in the overlay's flags and in the memory fraction that lets both fit one GPU; the KV pool
    (which SGLang otherwise sizes from the memory free at each start) is the same on both."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import timing_overhead as to

    on, off = to.pair_flags(["--model-path", "m", "--attention-backend", "triton"], "/tmp/t.jsonl")

    def value(flags, name):
        return flags[flags.index(name) + 1]

    assert value(on, "--max-total-tokens") == value(off, "--max-total-tokens") == str(to.KV_TOKENS)
    assert value(on, "--timing-log") == "/tmp/t.jsonl" and value(off, "--patches") == "none"
    assert "--timing-log" not in off and "--patches" not in on
    assert on[:6] == off[:6] == ["--model-path", "m", "--attention-backend", "triton", "--max-total-tokens",
                                 str(to.KV_TOKENS)]
