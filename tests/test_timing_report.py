"""sglang_patches.vocab.logread / report / report_plot on sample logs written to tmp dirs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_patches.errors import UserError
from sglang_patches.offline import report
from sglang_patches.vocab.logread import LogReader, read_records
from sglang_patches.vocab.schema import make_record

REPO = Path(__file__).resolve().parents[1]
PNG_SIG = b"\x89PNG\r\n\x1a\n"


def rec(cycle, rank=0, kind="decode", accepted=(3, 0, 2, 1), t0=1000.0):
    pre = kind == "prefill"
    return make_record(cycle=cycle, t=t0 + 0.5 * cycle, rank=rank, kind=kind, bs=len(accepted),
                       steps=3, topk=1, draft_tokens=4, accepted=[] if pre else list(accepted),
                       draft_ms=None if pre else 2.0, verify_ms=None if pre else 6.0,
                       extend_ms=2.0, cycle_ms=10.0, host_gap_ms=None if cycle == 0 else 1.0)


def write_log(path: Path, records, tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


def good_log(tmp_path, name="rank0.jsonl", rank=0, n=4):
    return write_log(tmp_path / name, [rec(i, rank=rank) for i in range(n)])


def run_cli(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "sglang_patches", "report", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=cwd or REPO, timeout=120)


def assert_one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errs = [ln for ln in proc.stderr.splitlines() if ln.startswith("sglang-patches: error:")]
    assert len(errs) == 1, proc.stderr
    for n in needles:
        assert n in errs[0]


# ---------------------------------------------------------------- logread

def test_bad_lines_are_counted_and_named(tmp_path, capsys):
    bad_version = json.dumps({**rec(9), "v": 3})
    missing = json.dumps({k: v for k, v in rec(10).items() if k != "cycle_ms"})
    p = write_log(tmp_path / "a.jsonl", [rec(0), rec(1)],
                  tail="not json at all\n" + bad_version + "\n" + missing + "\n\n"
                  + json.dumps(rec(2)) + "\n" + '{"schema": "sglang_patches.spec')
    records, reader = read_records([p])
    assert [r["cycle"] for r in records] == [0, 1, 2]
    f = reader.files[0]
    assert (f.valid, f.skipped, reader.skipped) == (3, 4, 4)
    err = capsys.readouterr().err
    assert f"{p}:3: skipped: not valid JSON" in err
    assert f"{p}:4: skipped: schema version 3" in err
    assert f"{p}:5: skipped: missing field 'cycle_ms'" in err
    assert f"{p}:8: skipped: truncated last line" in err
    assert "Traceback" not in err


def test_warnings_are_capped_per_file(tmp_path, capsys):
    p = write_log(tmp_path / "a.jsonl", [rec(0)], tail="garbage\n" * 12)
    _, reader = read_records([p])
    assert reader.skipped == 12
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 6
    assert "7 more bad line(s) not shown (12 skipped in all)" in lines[-1]


def test_a_file_with_no_valid_record_is_one_line_and_its_bad_lines_wait_for_a_valid_one(tmp_path, capsys):
    bad = write_log(tmp_path / "g.jsonl", [], tail="garbage\n" * 12)
    with pytest.raises(UserError, match="no valid timing records in 12 line.s.; first problem: line 1: not valid JSON"):
        read_records([bad])
    assert capsys.readouterr().err == ""  # the error line alone, no warning lines before it
    late = write_log(tmp_path / "l.jsonl", [rec(0)], tail="junk\n")
    head = tmp_path / "h.jsonl"
    head.write_text("junk\n" + late.read_text())  # bad lines ahead of a valid record: warned, in order
    read_records([head])
    err = capsys.readouterr().err.splitlines()
    assert err == [f"sglang-patches: warning: {head}:1: skipped: not valid JSON",
                   f"sglang-patches: warning: {head}:3: skipped: not valid JSON"]


@pytest.mark.parametrize("setup, needle", [
    (lambda d: d / "nope.jsonl", "no such file"),
    (lambda d: d, "is a directory"),
    (lambda d: write_log(d / "e.jsonl", []), "file is empty"),
    (lambda d: write_log(d / "w.jsonl", [], tail="\n  \n"), "file is empty"),
    (lambda d: write_log(d / "g.jsonl", [], tail="junk\n[1, 2]\n"), "no valid timing records in 2 line(s)"),
])
def test_unusable_files_raise_user_error(tmp_path, setup, needle):
    path = setup(tmp_path)
    with pytest.raises(UserError) as ei:
        read_records([path])
    assert needle in str(ei.value) and ei.value.code == 2
    assert "\n" not in str(ei.value)


def test_a_sglang_server_log_is_named_as_one(tmp_path, capsys):
    # the head of a real SGLang 0.5.17 server log (H200, a server without speculation)
    p = tmp_path / "server.log"
    p.write_text("[2026-12-02 15:34:12] server_args=ServerArgs(model_path='/m', tp_size=1)\n"
                 + "[2026-12-02 15:35:53] Decode batch, #running-req: 1, #token: 149, token usage: 0.00, cuda graph: True, "
                   "gen throughput (token/s): 207.20, #queue-req: 0\n" * 40)
    with pytest.raises(UserError) as ei:
        read_records([p])
    assert "a SGLang server's log, not a timing log" in str(ei.value) and "--baseline-log" in str(ei.value)
    assert capsys.readouterr().err == ""  # no warning per line it could not parse
    write_log(tmp_path / "t.jsonl", [rec(0)], tail="[2026-12-02 15:35:53] Decode batch, #running-req: 1\n")
    records, _ = read_records([tmp_path / "t.jsonl"])  # a timing log with a stray line is still read
    assert len(records) == 1


def test_all_lines_other_version_names_both_versions(tmp_path):
    p = write_log(tmp_path / "v3.jsonl", [{**rec(i), "v": 3} for i in range(3)])
    with pytest.raises(UserError) as ei:
        read_records([p])
    msg = str(ei.value)
    assert "schema version 3" in msg and "reads versions 1, 2" in msg


def test_several_files_and_ranks(tmp_path):
    a = good_log(tmp_path, "r0.jsonl", rank=0, n=3)
    b = good_log(tmp_path, "r1.jsonl", rank=1, n=5)
    reader = LogReader([a, b])
    records = list(reader)
    assert len(records) == 8 and reader.valid == 8
    assert [f.ranks for f in reader.files] == [{0}, {1}]


# ---------------------------------------------------------------- report main()

def report_json(capsys, *argv):
    assert report.main([*map(str, argv), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_exact_values(tmp_path, capsys):
    p = write_log(tmp_path / "r0.jsonl", [rec(0, kind="prefill")] + [rec(i) for i in range(1, 5)],
                  tail="garbage\n")
    out = report_json(capsys, p)
    assert set(out) == {"format", "schema_version", "kind", "files", "skipped_lines",
                        "skipped_unattributed", "ranks", "advice"}
    adv = out["advice"]  # the structured advice advise --json has (no baseline in this log)
    assert adv["verdict"] == "unknown_without_baseline" and adv["speculate"] is None
    assert adv["best_chain"].startswith("s") and not adv["drafter_accepts_nothing"]
    head = adv["verdict_lines"]
    assert adv["lines"][:len(head)] == head and head[-1].startswith(f"no plain decode baseline: {adv['best_chain']} pays only if a plain decode step takes > ")
    rest = adv["lines"][len(head):]
    assert rest[0].startswith("plain decode baselines, truest first:") and rest[2].startswith("without one the chain")
    assert rest[3].startswith("warning: the log has only 16 request-cycles of s3_k1_n4: its accept lengths")
    assert rest[4].startswith("best chain: s") and "sglang-patches advise " + str(p) in adv["lines"][-1]
    assert out["kind"] == "decode" and out["skipped_lines"] == 1
    assert out["files"] == [{"path": str(p), "valid": 5, "skipped": 1, "ranks": [0]}]
    s = out["ranks"]["0"]
    assert s["cycles"] == {"decode": 4, "prefill": 1, "counted": 4, "in_ring": 4}
    assert s["accept_length"] == pytest.approx(2.5)
    assert s["pos_rates"] == pytest.approx([0.75, 0.5, 0.25])
    assert s["pos_counts"] == [12, 8, 4]
    ph = s["phases"]
    assert ph["draft"]["p50"] == 2.0 and ph["verify"]["p99"] == 6.0
    assert (ph["draft"]["share"], ph["verify"]["share"], ph["extend"]["share"]) == pytest.approx((0.2, 0.6, 0.2))
    assert ph["host_gap"]["share"] == pytest.approx(0.1)
    assert s["tok_s_per_request"] == pytest.approx(250.0)
    assert s["tok_s_batch"] == pytest.approx(1000.0)
    assert s["cycles_per_s"] == pytest.approx(2.0)
    assert s["skipped_lines"] == 1


def test_kind_and_rank_selection(tmp_path, capsys):
    a = write_log(tmp_path / "r0.jsonl", [rec(0, kind="prefill"), rec(1), rec(2)])
    b = write_log(tmp_path / "r1.jsonl", [rec(0, rank=1), rec(1, rank=1)])
    both = report_json(capsys, a, b)
    assert list(both["ranks"]) == ["0", "1"]
    one = report_json(capsys, a, b, "--rank", 1)
    assert list(one["ranks"]) == ["1"] and one["ranks"]["1"]["cycles"]["counted"] == 2
    pre = report_json(capsys, a, "--kind", "prefill")
    assert pre["ranks"]["0"]["cycles"]["counted"] == 1 and pre["ranks"]["0"]["accept_length"] is None
    allk = report_json(capsys, a, "--kind", "all")
    assert allk["ranks"]["0"]["cycles"]["counted"] == 3
    with pytest.raises(UserError, match=r"--rank 5: .*ranks present: 0, 1"):
        report.main([str(a), str(b), "--rank", "5"])
    with pytest.raises(UserError, match="no prefill cycles"):
        report.main([str(b), "--kind", "prefill"])


def test_table_rich_and_plain(tmp_path, capsys, monkeypatch):
    a = good_log(tmp_path, "r0.jsonl", rank=0)
    b = good_log(tmp_path, "r1.jsonl", rank=1)
    assert report.main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    for needle in ("rank 0", "rank 1", "accept length", "2.50", "0.75 0.50 0.25", "20.0%", "250.0"):
        assert needle in out
    monkeypatch.setattr(report, "_import_rich", lambda: None)
    assert report.main([str(a)]) == 0
    plain = capsys.readouterr().out
    assert "┃" not in plain and "│" not in plain
    assert any(ln.startswith("accept length") and ln.rstrip().endswith("2.50") for ln in plain.splitlines())
    # the skipped-lines count is said once, in the footer, and the percentile window is stated
    assert [ln for ln in plain.splitlines() if "bad line(s) skipped" in ln or ln.startswith("skipped")] == [
        "0 bad line(s) skipped | " + str(a)]
    assert any(ln.startswith("percentile window") and ln.rstrip().endswith("all 4 cycles") for ln in plain.splitlines())
    assert any(ln.startswith("cycle time by batch") and ln.rstrip().endswith("4: 100%") for ln in plain.splitlines())


def test_idle_waits_are_left_out_of_the_gap_rows_and_said(tmp_path, capsys):
    recs = [rec(i) for i in range(20)]
    recs[10]["host_gap_ms"], recs[10]["gpu_gap_ms"] = 700.0, 699.0  # the server waited for a request
    log = write_log(tmp_path / "w.jsonl", recs)
    assert report.main([str(log)]) == 0
    out = capsys.readouterr().out
    rows = [ln.replace("│", " ").split() for ln in out.splitlines()]
    assert ["host", "gap", "vs", "cycle", "9.0%"] in rows  # 18 gaps of 1 ms over 20 cycles of 10 ms
    assert [ln for ln in out.splitlines() if ln.startswith("gap shares leave out")] == [
        "gap shares leave out 1 idle wait(s) between cycles (a gap over 20 ms and 3 decode cycles: no request to run, or a "
        "host stall; 0.70 s in all); every cycle and wait counted: host gap 359.0%, gpu gap 349.5%"]
    assert report.main([str(log), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    summary = out["ranks"]["0"]
    assert out["format"] == 4  # the gap shares' meaning changed: waits left out
    assert summary["idle_waits"]["n"] == 1 and summary["phases"]["host_gap"]["share"] == pytest.approx(0.09)
    assert report.main([str(good_log(tmp_path))]) == 0
    assert "idle wait" not in capsys.readouterr().out


def test_the_idle_wait_note_states_the_rule_of_the_kinds_summarised():
    from sglang_patches.offline.report_notes import idle_waits_note

    phases = {"host_gap": {"share_all": 0.5}, "gpu_gap": {"share_all": 0.4}}
    idle = {"n": 2, "ms": 300.0, "min_ms": 20.0, "factor": 3.0}
    def rule(kinds):
        return idle_waits_note({0: {"kinds": kinds, "phases": phases, "idle_waits": idle}}).split("cycles (", 1)[1].split(":")[0]
    assert rule(["decode"]) == "a gap over 20 ms and 3 decode cycles"
    assert rule(["prefill"]) == "any gap over 20 ms before a prefill"
    assert rule(["decode", "prefill"]) == "a gap over 20 ms and 3 decode cycles, or one over 20 ms before a prefill"
    assert idle_waits_note({0: {"kinds": ["decode"], "phases": phases, "idle_waits": dict(idle, n=0)}}) is None


def test_by_batch_names_the_three_largest_and_the_rest():
    assert report.by_batch({"8": 0.54, "7": 0.2, "6": 0.10, "2": 0.09, "1": 0.07}) == "8: 54% 7: 20% 6: 10% +2: 16%"
    assert report.by_batch({"1": 1.0}) == "1: 100%" and report.by_batch({}) == "-"


def test_png_written(tmp_path, capsys):
    a = write_log(tmp_path / "r0.jsonl", [rec(i, accepted=[i % 4, 3]) for i in range(50)])
    b = good_log(tmp_path, "r1.jsonl", rank=1)
    out = tmp_path / "fig.png"
    assert report.main([str(a), str(b), "--png", str(out)]) == 0
    data = out.read_bytes()
    assert len(data) > 1000 and data.startswith(PNG_SIG)


def test_png_path_checked_before_reading(tmp_path, monkeypatch):
    a = good_log(tmp_path)
    monkeypatch.setattr(report, "LogReader", lambda *a, **k: pytest.fail("read before PNG check"))
    with pytest.raises(UserError, match="does not exist"):
        report.main([str(a), "--png", str(tmp_path / "missing" / "x.png")])
    with pytest.raises(UserError, match="is a directory"):
        report.main([str(a), "--png", str(tmp_path)])
    assert sorted(os.listdir(tmp_path)) == ["rank0.jsonl"]  # the probe left nothing behind


def test_png_downsample():
    from sglang_patches.offline.report_plot import downsample
    xs, ys = downsample(list(range(10)), {"d": [float(i) for i in range(10)]}, max_points=5)
    assert xs == [0, 2, 4, 6, 8] and ys["d"] == [0.5, 2.5, 4.5, 6.5, 8.5]


# ---------------------------------------------------------------- CLI in a subprocess

def test_cli_ok_with_broken_lines(tmp_path):
    p = write_log(tmp_path / "r0.jsonl", [rec(i) for i in range(4)], tail='{"trunc')
    proc = run_cli(p, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["skipped_lines"] == 1
    assert "r0.jsonl:5: skipped: truncated last line" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_errors_are_one_line(tmp_path):
    empty = write_log(tmp_path / "empty.jsonl", [])
    v3 = write_log(tmp_path / "v3.jsonl", [{**rec(0), "v": 3}])
    good = good_log(tmp_path)
    assert_one_line_error(run_cli(empty), "file is empty")
    assert_one_line_error(run_cli(tmp_path / "missing.jsonl"), "no such file")
    assert_one_line_error(run_cli(tmp_path), "is a directory")
    assert_one_line_error(run_cli(v3), "schema version 3", "reads versions 1, 2")
    assert_one_line_error(run_cli(good, "--png", tmp_path / "no" / "dir" / "o.png"), "does not exist")
    assert_one_line_error(run_cli(good, "--png", tmp_path), "is a directory")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root can write into read-only directories")
def test_cli_png_permission_denied(tmp_path):
    good = good_log(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert_one_line_error(run_cli(good, "--png", ro / "o.png"), "cannot write")
    finally:
        ro.chmod(0o700)


def test_cli_png_and_table(tmp_path):
    good = good_log(tmp_path)
    out = tmp_path / "o.png"
    proc = run_cli(good, "--png", out)
    assert proc.returncode == 0, proc.stderr
    assert "accept length" in proc.stdout and "wrote" in proc.stdout
    assert out.read_bytes().startswith(PNG_SIG)


def test_png_permission_denied_in_process(tmp_path, monkeypatch):
    import builtins

    real_open = builtins.open
    target = str(tmp_path / "o.png")

    def fake_open(path, *a, **k):
        if str(path) == target:
            raise PermissionError(13, "Permission denied", target)
        return real_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", fake_open)
    with pytest.raises(UserError, match="cannot write there \\(Permission denied\\)") as ei:
        report.check_png_path(target)
    assert ei.value.code == 2
