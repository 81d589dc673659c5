"""Hostile inputs found by an audit of the result readers and writers: corrupt numbers in
server logs, files that are not files, symlinks at temp names, outputs that are inputs, and
hand-edited JSON. Each must end in one line and a non-zero exit, or be skipped, never a
traceback, a hang or a lost input."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_patches.errors import UserError
from sglang_patches.offline.sweep import results as res
from sglang_patches.offline.sweep import table
from sglang_patches.offline.decode_log import MAX_LINE_BYTES, steady_cycles, steady_decode_steps

REPO = Path(__file__).resolve().parent.parent
WEAK = REPO / "benchmarks" / "results" / "2026-12-01-moe" / "sweep-weak"


def decode(n, tput, extra=""):
    return (f"[2026-12-01 14:16:29] Decode batch, #running-req: {n}, #token: 9, token usage: 0.00, {extra}"
            f"cuda graph: True, gen throughput (token/s): {tput}, #queue-req: 0\n")


def script(name, *args):
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / name), *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


def one_line(r, code=2):
    assert r.returncode == code and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("bad", ["1" + "0" * 400, "1e400", "0.00", "1e-300", "nan"])
def test_corrupt_throughputs_open_no_window(tmp_path, bad):
    """inf, zero, absurdly slow or unparsable tok/s: the line breaks the window instead of giving a
    0 ms or 1e303 ms step (which divided by zero in advise)."""
    log = tmp_path / "b.log"
    log.write_text(decode(1, "200.00") * 3 + decode(1, bad) + decode(1, "200.00") * 3)
    assert steady_cycles(str(log)) == {1: [(pytest.approx(5.0), 1.0)] * 4}   # 2 before it, 2 after
    assert steady_decode_steps(str(log)) == {1: pytest.approx(5.0)}


def test_an_over_long_line_is_skipped_not_held(tmp_path):
    log = tmp_path / "b.log"
    with open(log, "w") as fh:
        fh.write(decode(1, "200.00") * 2 + "x" * (3 * MAX_LINE_BYTES) + "\n" + decode(1, "250.00") * 2)
    # the skipped line is no decode line, so the window across it stands (SGLang logs other lines between)
    assert sorted(ms for ms, _ in steady_cycles(str(log))[1]) == [pytest.approx(4.0)] * 2 + [pytest.approx(5.0)]


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "b.log"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="not a regular file"):
        steady_cycles(str(fifo))


def test_the_temp_file_is_never_a_planted_symlink(tmp_path):
    """The old fixed temp name `summary.md.tmp` as a symlink to results.jsonl made --report-only
    overwrite its own input; the temp file now has a random name and is created exclusively."""
    out = tmp_path / "w"
    shutil.copytree(WEAK, out)
    before = (out / "results.jsonl").read_text()
    os.symlink("results.jsonl", out / "summary.md.tmp")
    table.write_report(out, out=open(os.devnull, "w"))
    assert (out / "results.jsonl").read_text() == before and not (out / "summary.md").is_symlink()
    with pytest.raises(UserError, match="cannot be written"):
        res.write_text_atomic(out / "logs", "x")   # a directory in the output's place


def test_rows_with_absurd_times_get_no_steady_reading(tmp_path):
    rows = res.read_rows(WEAK)
    odd = [{**rows[0], "measure_s": 1e300}, {**rows[0], "date": "9999-12-31T23:59:59"}]
    assert all("steady_tok_s" not in r for r in table.with_steady(odd, WEAK))
    assert "measure_s" in res.row_problem({**rows[0], "measure_s": "5"})


def test_timing_overhead_never_overwrites_a_finished_run(tmp_path):
    out = tmp_path / "run"
    shutil.copytree(REPO / "benchmarks" / "results" / "2026-12-01-trained-8b" / "overhead-256tok", out)
    before = (out / "timing_overhead.json").read_text()
    one_line(script("timing_overhead.py", "--out", out))   # --resummarize forgotten
    assert (out / "timing_overhead.json").read_text() == before
    one_line(script("timing_overhead.py", "--out", tmp_path / "new", "--batch-sizes", "1,x"))
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("edit", [
    lambda d: {**d, "overhead": {}},
    lambda d: {**d, "overhead": {"1": {**d["overhead"]["1"], "median_on": "332.7"}}},
    lambda d: json.loads("[" * 100000 + "]" * 100000),
])
def test_resummarize_refuses_hand_edited_runs_before_writing(tmp_path, edit):
    out = tmp_path / "run"
    shutil.copytree(REPO / "benchmarks" / "results" / "2026-12-01-trained-8b" / "overhead-256tok", out)
    for side in ("on", "off"):
        (out / f"server_{side}.log").write_text(decode(1, "200.00", "accept len: 2.00, ") * 4)
    try:
        edited = json.dumps(edit(json.loads((out / "timing_overhead.json").read_text())))
    except RecursionError:
        edited = "[" * 100000 + "]" * 100000
    (out / "timing_overhead.json").write_text(edited)
    one_line(script("timing_overhead.py", "--out", out, "--resummarize"))
    assert (out / "timing_overhead.json").read_text() == edited


def test_moe_summarize_refuses_a_linked_input_and_bad_json(tmp_path):
    (tmp_path / "r").mkdir()
    vc = tmp_path / "vc"
    vc.mkdir()
    (vc / "summary.json").write_text('{"verify_over_step_moe": {"1": {"2": 1.5}}}')
    os.symlink(vc, tmp_path / "link")
    one_line(script("moe_steps_sweep.py", "summarize", "--runs", tmp_path / "r", "--out", tmp_path / "link",
                    "--verify-cost", vc, "--force"))
    assert (vc / "summary.json").read_text() == '{"verify_over_step_moe": {"1": {"2": 1.5}}}'
    for bad in ("{nope", "[1, 2]", '{"verify_over_step_moe": [1, 2]}'):
        (vc / "summary.json").write_text(bad)
        one_line(script("moe_steps_sweep.py", "summarize", "--runs", tmp_path / "r", "--out", tmp_path / "o",
                        "--verify-cost", vc, "--force"))
    (vc / "summary.json").write_text("{}")
    for bad in ("{nope", "[1, 2]", '{"max_abs_error": "0.01"}'):
        (tmp_path / "r" / "rates-weak.json").write_text(bad)
        one_line(script("moe_steps_sweep.py", "summarize", "--runs", tmp_path / "r", "--out", tmp_path / "o",
                        "--verify-cost", vc, "--force"))
    (tmp_path / "file").write_text("x")
    (tmp_path / "r" / "rates-weak.json").unlink()
    one_line(script("moe_steps_sweep.py", "summarize", "--runs", tmp_path / "r", "--out", tmp_path / "file"))


def test_a_timing_log_with_an_over_long_line_or_a_fifo(tmp_path, capsys):
    """The timing-log reader streams an over-long line (skipped with a warning) and refuses a FIFO."""
    from sglang_patches.vocab.logread import MAX_RECORD_BYTES, read_records

    from advisor_logs import records_from_accepted, write_records

    lines = write_records(tmp_path / "w.jsonl", records_from_accepted([1, 2, 3], 1, 3)).read_text().splitlines(True)
    log = tmp_path / "t.jsonl"
    log.write_text(lines[0] + "{" + "x" * (2 * MAX_RECORD_BYTES) + "\n" + "".join(lines[1:]))
    records, _ = read_records([str(log)])
    assert len(records) == 3 and "longer than 1024 KiB" in capsys.readouterr().err
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="not a regular file"):
        read_records([str(fifo)])


def test_tiny_accept_carriage_returns_and_profiled_rows(tmp_path):
    """accept len 1e-10 at 1e308 tok/s is no cycle (it gave steady_tok_s = inf, which the row check
    then refused for the whole folder); a progress bar's '\\r' before a prefill line still resets
    the window; a row measured under --profile-seconds gets no backfilled reading (its measure_s
    spans the profiling load)."""
    log = tmp_path / "s.log"
    log.write_text(decode(1, "200.00", "accept len: 2.00, ") * 2 + decode(1, "1e308", "accept len: 1e-10, ")
                   + decode(1, "200.00", "accept len: 2.00, ") * 2)
    assert [ms for ms, _ in steady_cycles(str(log), allow_spec=True)[1]] == [pytest.approx(10.0)] * 2
    mixed = tmp_path / "m.log"
    prefill = "[2026-12-01 14:16:29 TP0] Prefill batch, #new-seq: 1, #new-token: 9, #running-req: 0\n"
    tp0 = lambda tput: decode(1, tput).replace("29]", "29 TP0]")  # noqa: E731
    mixed.write_text(tp0("200.00") * 2 + "Loading 45%\r" + prefill + tp0("50.00") + tp0("200.00"))
    assert steady_cycles(str(mixed)) == {1: [(pytest.approx(5.0), 1.0)] * 2}   # the 20 ms one spans the prefill
    row = {**res.read_rows(WEAK)[0], "profile_dir": "/gone"}
    assert "steady_tok_s" not in table.with_steady([row], WEAK)[0]


def test_a_clashing_temp_name_is_not_removed(tmp_path, monkeypatch):
    """If the random temp name exists already (not ours), the write fails in one line and leaves it."""
    import secrets

    monkeypatch.setattr(secrets, "token_hex", lambda n: "same")
    clash = tmp_path / f".out.json.{os.getpid()}.same.tmp"
    clash.write_text("someone else's")
    with pytest.raises(UserError, match="cannot be written"):
        res.write_text_atomic(tmp_path / "out.json", "{}")
    assert clash.read_text() == "someone else's" and not (tmp_path / "out.json").exists()


def test_resummarize_keeps_the_reading_the_run_wrote(tmp_path):
    out = tmp_path / "run"
    shutil.copytree(REPO / "benchmarks" / "results" / "2026-12-01-trained-8b" / "overhead-256tok", out)
    data = json.loads((out / "timing_overhead.json").read_text())
    data.pop("steady_decode_as_run")
    data["steady_decode"] = {"1": {"ratio": 1.0267, "note": "as run"}}
    (out / "timing_overhead.json").write_text(json.dumps(data))
    for side in ("on", "off"):
        (out / f"server_{side}.log").write_text(decode(1, "400.00", "accept len: 2.00, ") * 4)
    for _ in range(2):   # twice: the second run must not replace the first run's reading
        r = script("timing_overhead.py", "--out", out, "--resummarize")
        assert r.returncode == 0, r.stderr
    got = json.loads((out / "timing_overhead.json").read_text())
    assert got["steady_decode_as_run"] == {"1": {"ratio": 1.0267, "note": "as run"}}
    assert got["steady_decode"]["1"]["ratio"] == pytest.approx(1.0)
