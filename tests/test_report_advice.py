"""What `report` and `advise` answer first, and how their numbers are labelled: the no-acceptance
verdict leads the table, the JSON and the figure; both commands give one structured advice object;
the percentile window and the overlapping gap shares are said; the figure's phase axis is clipped
at a high percentile with the clipped cycles marked (a 300 ms warm-up against 6 ms cycles)."""
from __future__ import annotations

import json

import pytest

import advisor_logs as al
from sglang_patches import cli
from sglang_patches.offline import report, report_plot
from sglang_patches.vocab.schema import SCHEMA_VERSION


def run(capsys, *args):
    code = cli.main([*map(str, args)])
    return code, capsys.readouterr().out


def dummy_log(tmp_path, n=400, warm=3):
    """A dummy-weight drafter's log: 2 % of request-cycles accept one draft, the rest none; the
    first cycles are 50x slower (warm-up)."""
    recs = al.records_from_accepted([1 if i % 50 == 0 else 0 for i in range(n)], bs=1, steps=3,
                                    verify_ms=4.0, cycle_ms=6.0)
    for r in recs[:warm]:
        r["cycle_ms"], r["verify_ms"] = 300.0, 298.0
    return al.write_records(tmp_path / "dummy.jsonl", recs)


def test_report_leads_with_the_verdict_and_recommends_nothing(tmp_path, capsys):
    log = dummy_log(tmp_path)
    code, out = run(capsys, "report", log)
    lines = out.splitlines()
    assert code == 0
    assert lines[0].startswith("the drafter accepts nothing: accept length 1.02 at steps 3 (up to 4 possible); "
                               "speculation cannot beat plain decode")
    # the verdict is one line; its causes and the check follow with the advice
    assert any(ln.removeprefix("advice: ").startswith("likely causes: (1) an EAGLE-3 drafter served with --speculative-algorithm EAGLE")
               for ln in lines)
    assert any(ln.startswith("check them: sglang-patches preflight --model-path TARGET "
                             "--speculative-draft-model-path DRAFT") for ln in lines)
    assert not any("recommended:" in ln for ln in lines)
    assert any(ln.startswith("no chain to recommend") for ln in lines)
    # after the table, advise's lines under the verdict: its causes first
    assert [ln for ln in lines if ln.startswith("advice: ")][0].startswith("advice: likely causes: (1)")


def test_report_and_advise_share_one_advice_object(tmp_path, capsys):
    for log in (dummy_log(tmp_path), al.write_records(tmp_path / "ok.jsonl", al.records_from_accepted(
            [3, 2, 0, 1] * 100, bs=1, steps=3))):
        _, rep = run(capsys, "report", log, "--json")
        _, adv = run(capsys, "advise", log, "--json")
        r, a = json.loads(rep)["advice"], json.loads(adv)["advice"]
        assert set(r) == set(a)
        for key in ("verdict", "recommended", "speculate", "drafter_accepts_nothing", "best_chain", "no_accept"):
            assert r[key] == a[key], key
        assert [x["config"] for x in r["rows"]] == [x["config"] for x in a["rows"]]
        assert r["lines"][:-1] == a["lines"][:-1]  # report's basis line also names the advise command
        assert r["lines"][-1].startswith(a["lines"][-1]) and "sglang-patches advise " in r["lines"][-1]
    assert a["verdict"] == "unknown_without_baseline" and r["verdict"] == "unknown_without_baseline"


def test_percentile_window_and_gap_shares_are_labelled(tmp_path, capsys, monkeypatch):
    log = al.write_records(tmp_path / "l.jsonl", al.records_from_accepted([2] * 50, bs=1, steps=3))
    monkeypatch.setattr(report, "_import_rich", lambda: None)
    code, out = run(capsys, "report", log, "--ring", "20")
    rows = {ln[:24].strip(): ln[24:].strip() for ln in out.splitlines() if ln[:1].isalpha()}
    assert code == 0 and rows["percentile window"] == "last 20 of 50 cycles"
    assert "host gap vs cycle" in rows and "gpu gap vs cycle" in rows and "other in-cycle time" in rows
    assert "shares: draft, verify and extend are parts of the GPU cycle; the host gap and the GPU gap lie between " \
           "cycles, are given relative to the cycle time and overlap each other, so they are not summed with them" in out
    with pytest.raises(SystemExit):
        report.build_parser().parse_args(["--help"])
    text = capsys.readouterr().out
    for row in ("percentile window", "other in-cycle time", "host gap vs cycle", "pos acc P(acc > k)", "pos acc conditional"):
        assert f"  {row}  " in text


def test_both_acceptance_rows_by_hand(tmp_path, capsys, monkeypatch):
    # 8 request-cycles at steps 3 accepting 0, 0, 1, 1, 2, 2, 2, 2 drafts: P(acc > k) = 6/8, 4/8, 0/8;
    # conditional = 6/8, 4/6, 0/4 (the form --simulate-acceptance takes)
    log = al.write_records(tmp_path / "l.jsonl", al.records_from_accepted([0, 0, 1, 1, 2, 2, 2, 2] * 10, bs=1,
                                                                          steps=3))
    monkeypatch.setattr(report, "_import_rich", lambda: None)
    _, out = run(capsys, "report", log)
    rows = {ln[:24].strip(): ln[24:].strip() for ln in out.splitlines() if ln[:1].isalpha()}
    assert rows["pos acc P(acc > k)"] == "0.75 0.50 0.00"
    assert rows["pos acc conditional"] == "0.75 0.67 0.00"
    assert report.conditional([0.5, 0.0, 0.0]) == [0.5, 0.0, None]  # a position never reached has no rate


def test_advise_help_names_every_column_in_one_line(capsys):
    from sglang_patches.offline import advise_cli

    with pytest.raises(SystemExit):
        advise_cli.build_parser().parse_args(["--help"])
    text = capsys.readouterr().out
    helped = {ln.split("  ")[1] for ln in text.splitlines() if ln.startswith("  ") and "  " in ln[2:]}
    for col in ("config", "steps", "draft tok", "accept len", "acc 95 %", "trunc acc", "cycle ms", "tok/s",
                "tok/s/req", "x plain", "break-even acc", "break-even step ms", "note"):
        assert col in helped, col
    assert "session" not in text and f"per-request tags `req`, timing-log schema {SCHEMA_VERSION}" in text


def test_advise_columns_keep_one_unit(tmp_path, capsys):
    log = al.write_records(tmp_path / "l.jsonl", al.records_from_accepted([2] * 100, bs=1, steps=3,
                                                                          verify_ms=5.0, cycle_ms=6.0))
    _, no_base = run(capsys, "advise", log)
    header = next(ln for ln in no_base.splitlines() if ln.strip().startswith("config"))
    assert "break-even step ms" in header and "break-even acc" not in header and "x plain" not in header
    _, base = run(capsys, "advise", log, "--baseline-step-ms", "3")
    header = next(ln for ln in base.splitlines() if ln.strip().startswith("config"))
    assert "break-even acc" in header and "x plain" in header and "step ms" not in header
    for out in (no_base, base):  # no unit glued to a value: the header names it
        table = [ln for ln in out.splitlines() if ln.split() and ln.split()[0].startswith("s") and "_k1_" in ln
                 and not ln.startswith("speculate:")]
        assert len(table) == 5 and not any("acc" in ln or " ms" in ln for ln in table)
    # a baseline slower than the logged verify: flagged first; break-even shown as '< 1', never a value below 1
    _, slow = run(capsys, "advise", log, "--baseline-step-ms", "12")
    assert slow.splitlines()[0].startswith("the drafter accepts well")
    assert slow.splitlines()[1].startswith("speculate: switch to s2_k1_n3, predicted at 6.05x plain decode, against a baseline the "
                                           "log contradicts (see the warning)")  # the verdict carries it
    assert slow.splitlines()[2].startswith("warning: the baseline contradicts the log")  # right after the verdict
    assert slow.splitlines()[3].startswith("plain decode step used: batch 1: 12.00 ms")
    rows = [ln.split() for ln in slow.splitlines() if ln.startswith("s") and "_k1_" in ln.split()[0]]
    assert rows and all("<" in r for r in rows)


def test_phase_axis_clips_warm_up_and_marks_the_clipped_cycles():
    totals = [6.0] * 997 + [300.0, 280.0, 310.0]
    limit, above = report_plot.clip_limit(totals)
    assert limit == pytest.approx(6.0 * report_plot.CLIP_HEADROOM) and above == [997, 998, 999]
    assert report_plot.clip_limit([6.0, 6.1, 5.9]) == (None, [])  # nothing to clip: the full axis
    # a short log whose p99 is itself a warm-up cycle: cut at the slow-cycle line (3x the median) instead
    short = [7.0] * 140 + [210.0, 600.0, 1247.0]
    limit, above = report_plot.clip_limit(short)
    assert limit == pytest.approx(report_plot.CLIP_HEADROOM * 3 * 7.0) and above == [140, 141, 142]


def test_the_png_of_a_dummy_drafter(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    seen = {}
    real = report_plot.plot_report

    def spy(path, series, summaries, title="spec timing", advice=None):
        seen.update(advice=advice, series=series)
        return real(path, series, summaries, title, advice)

    monkeypatch.setattr(report_plot, "plot_report", spy)
    out = tmp_path / "d.png"
    code, _ = run(capsys, "report", dummy_log(tmp_path), "--png", out)
    assert code == 0 and out.read_bytes().startswith(b"\x89PNG")
    assert seen["advice"]["no_accept"]["summary"].startswith("the drafter accepts nothing")
    s = seen["series"][0]
    totals = [d + v + e for d, v, e in zip(s["draft"], s["verify"], s["extend"])]
    limit, above = report_plot.clip_limit([max(c, t) for c, t in zip(s["cycle_ms"], totals)])
    assert above == [0, 1, 2] and limit < 10  # the three warm-up cycles are the marked ones
    out.write_bytes(b"old")  # an existing figure: refused, then replaced with --force
    with pytest.raises(SystemExit) as refused:  # the console script's one line and exit code 2
        run(capsys, "report", dummy_log(tmp_path), "--png", out)
    assert refused.value.code == 2 and "already exists; pass --force" in capsys.readouterr().err
    assert out.read_bytes() == b"old"
    code, _ = run(capsys, "report", dummy_log(tmp_path), "--png", out, "--force")
    assert code == 0 and out.read_bytes().startswith(b"\x89PNG")


def test_the_advise_command_report_names_carries_the_baseline_it_was_given(tmp_path, capsys):
    """report's last advice line names the advise command for the table: with the flags report priced by,
    so that command answers the same; without any, the bare command."""
    log = dummy_log(tmp_path)
    _, bare = run(capsys, "report", str(log))
    _, given = run(capsys, "report", str(log), "--baseline-step-ms", "3")
    assert f"table and baselines: sglang-patches advise {log}\n" in bare + "\n"
    assert f"table and baselines: sglang-patches advise {log} --baseline-step-ms 3" in given
