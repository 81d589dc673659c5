"""The plain decode baseline from SGLang's 'Decode batch' log lines (offline/decode_log.py), and how
`advise --calibration` uses a sweep's baseline server log instead of its end-to-end rows."""
from __future__ import annotations

import json
import os
import shutil

import pytest

import advisor_logs as al
from sglang_patches.errors import UserError
from sglang_patches.offline.decode_log import steady_decode_steps, steady_windows
from test_advisor import run_advise

E2E_BS1_MS = 1000.0 / 203.94555216200698   # the recorded 8B sweep's baseline row at bs 1 (end to end)
PREFILL = "[2026-11-29 10:00:00] Prefill batch, #new-seq: 1, #new-token: 80, #running-req: 7, #queue-req: 0\n"


def decode(n, tput, tags=""):
    return (f"[2026-11-29 10:00:00{' ' + tags if tags else ''}] Decode batch, #running-req: {n}, #token: 90, "
            f"token usage: 0.00, cuda graph: True, gen throughput (token/s): {tput:.2f}, #queue-req: 0,\n")


def test_only_steady_windows_count(tmp_path):
    """A line's throughput covers everything since the previous line: a window that saw a prefill or
    a batch size change is not a plain decode step."""
    log = tmp_path / "base.log"
    log.write_text(decode(8, 900.0) + decode(8, 1600.0) + decode(8, 1600.0)   # first window: the batch starting
                   + PREFILL + decode(8, 700.0)                                # a prefill inside: not counted
                   + decode(3, 2000.0)                                         # the batch ending: reads fast
                   + decode(3, 600.0) + decode(3, 600.0)                       # bs 3: two steady windows
                   + decode(5, 1000.0) + decode(5, 1000.0)                     # bs 5: one window, too few
                   + decode(6, 600.0) + PREFILL + decode(6, 300.0) + PREFILL + decode(6, 300.0))  # bs 6: none
    assert steady_decode_steps(str(log)) == {8: pytest.approx(5.0), 3: pytest.approx(5.0)}
    lone = tmp_path / "lone.log"
    lone.write_text(decode(1, 200.0) + PREFILL + decode(1, 200.0) + decode(1, 200.0))   # one steady window
    with pytest.raises(UserError, match="no steady"):
        steady_decode_steps(str(lone))


def test_dp_ranks_interleaved_are_followed_separately(tmp_path):
    """With DP attention each rank logs its own lines: rank 1's lines and prefills must not break
    rank 0's windows (or make windows out of two ranks' lines)."""
    log = tmp_path / "dp.log"
    log.write_text(decode(4, 800.0, "DP0 TP0") + decode(2, 100.0, "DP1 TP1") + decode(4, 800.0, "DP0 TP0")
                   + PREFILL.replace("00]", "00 DP1 TP1]") + decode(4, 800.0, "DP0 TP0") + decode(2, 100.0, "DP1 TP1"))
    assert steady_decode_steps(str(log)) == {4: pytest.approx(5.0)}


def test_speculative_windows_are_cycles_not_tokens(tmp_path):
    """A speculative window's tok/s scales with its own accept length (the text it covered), not
    with the cycle's cost: with allow_spec a step is one cycle, n x accept len x 1000 / tok/s. Three
    windows at one cycle cost (5 ms at bs 2) and accept lengths 1.5, 2.0, 3.5 must read 5 ms each."""
    def spec(n, acc, tput):
        return (f"[2026-12-01 14:12:02] Decode batch, #running-req: {n}, #token: 54, token usage: 0.00, "
                f"accept len: {acc:.2f}, accept rate: 0.20, cuda graph: True, gen throughput (token/s): {tput:.2f}, "
                "#queue-req: 0\n")
    log = tmp_path / "spec.log"
    log.write_text("".join(spec(2, acc, 2 * acc * 200.0) for acc in (1.0, 1.5, 2.0, 3.5)))
    assert steady_windows(str(log), allow_spec=True) == {2: [pytest.approx(5.0)] * 3}
    with pytest.raises(UserError, match="accept len"):   # the plain-decode baseline refuses such a log
        steady_windows(str(log))


def test_unreadable_log_is_one_line(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads files without read permission")
    log = tmp_path / "x.log"
    log.write_text(decode(1, 200.0) * 3)
    log.chmod(0)
    with pytest.raises(UserError, match="cannot be read"):
        steady_decode_steps(str(log))


def calibration(tmp_path):
    cal = tmp_path / "cal"
    (cal / "logs").mkdir(parents=True)
    shutil.copy(al.SWEEP_8B / "results.jsonl", cal / "results.jsonl")
    return cal


def advise_json(capsys, *args):
    code, out, err = run_advise(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_calibration_uses_the_baseline_servers_steady_decode(tmp_path, capsys):
    """A sweep's baseline rows are end to end (prefill, ramp, tail); the advisor's rows are steady
    decode cycles. With the baseline server's log in the calibration its steady windows are the
    baseline; without it the rows are, and a note says the ratios read high."""
    log = al.log_from_sweep_row(al.sweep_row(al.SWEEP_8B, "s5_k1_n6", 1), tmp_path / "s5.jsonl")
    cal = calibration(tmp_path)
    e2e = advise_json(capsys, log, "--calibration", cal)
    assert e2e["baseline"]["source"].startswith("calibration baseline rows")
    assert e2e["baseline"]["step_ms"]["1"] == pytest.approx(E2E_BS1_MS)
    assert any("reads high" in n for n in e2e["notes"]) and any("no baseline server log" in n for n in e2e["notes"])
    (cal / "logs" / "baseline.log").write_text(decode(1, 250.0) * 3)
    steady = advise_json(capsys, log, "--calibration", cal)
    assert "steady decode" in steady["baseline"]["source"] and steady["baseline"]["step_ms"] == {"1": pytest.approx(4.0)}
    assert not any("reads high" in n or "end-to-end" in n for n in steady["notes"])
    r_e2e, r_steady = (d["advice"]["best"]["ratio_to_no_spec"] for d in (e2e, steady))
    assert r_steady == pytest.approx(r_e2e * 4.0 / E2E_BS1_MS, rel=1e-6)
    # an explicit baseline wins over the calibration's
    explicit = advise_json(capsys, log, "--calibration", cal, "--baseline-step-ms", "6")
    assert explicit["baseline"]["step_ms"] == {"1": 6.0}


def test_calibration_log_fallbacks(tmp_path, capsys):
    cal = calibration(tmp_path)
    log1 = al.log_from_sweep_row(al.sweep_row(al.SWEEP_8B, "s5_k1_n6", 1), tmp_path / "s5_bs1.jsonl")
    # a log that exists but has no steady window: the rows, and the notes say why
    (cal / "logs" / "baseline.log").write_text("no decode lines\n")
    d = advise_json(capsys, log1, "--calibration", cal)
    assert d["baseline"]["source"].startswith("calibration baseline rows")
    assert any("no steady windows in the calibration's baseline server log" in n for n in d["notes"])
    # steady windows at bs 1 only (a resumed sweep rewrote the log): a bs-32 log's baseline is the bs-32 row,
    # and only the log that uses it gets the note
    (cal / "logs" / "baseline.log").write_text(decode(1, 250.0) * 3)
    d = advise_json(capsys, log1, "--calibration", cal)
    assert d["baseline"]["step_ms"] == {"1": pytest.approx(4.0)} and not any("reads slow" in n for n in d["notes"])
    log32 = al.log_from_sweep_row(al.sweep_row(al.SWEEP_8B, "s5_k1_n6", 32), tmp_path / "s5_bs32.jsonl")
    d = advise_json(capsys, log32, "--calibration", cal)
    assert d["baseline"]["step_ms"] == {"32": pytest.approx(32000.0 / 5584.630903781239)}
    assert any(n.startswith("batch 32: the baseline log has no steady windows at batch 32") for n in d["notes"])
    # a speculative server's log in place of the baseline's: said, not used
    (cal / "logs" / "baseline.log").write_text(decode(1, 250.0).replace("token usage", "accept len: 2.1, token usage") * 3)
    d = advise_json(capsys, log1, "--calibration", cal)
    assert any("ran speculation" in n and "(not used)" in n for n in d["notes"])
