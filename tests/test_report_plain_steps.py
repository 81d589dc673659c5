"""`report` on a mixed --speculative-adaptive log: plain decode steps (schema v2 `plain` records, v1
steps-0 records, step_timing's steps-0 records) are not cycles of the drafter: they stay out of the
accept length, per-position acceptance and the phase rows, and get a line of their own (count, step ms)."""
from __future__ import annotations

import json

import pytest

import advisor_logs as al
from sglang_patches.offline.report import main
from sglang_patches.vocab.schema import make_record
from sglang_patches.vocab.stats import summarize


def plain(n, *, bs=2, cycle_ms=4.5, v=2, plain_flag=True, accepted=True, start=5000):
    out = []
    for i in range(n):
        r = make_record(cycle=start + i, t=1.8e9 + 0.01 * i, rank=0, kind="decode", bs=bs, steps=0,
                        topk=0 if not accepted else 1, draft_tokens=0 if not accepted else 1,
                        accepted=[0] * bs if accepted else [], draft_ms=None,
                        verify_ms=4.0 if accepted else None, extend_ms=0.3 if accepted else None,
                        cycle_ms=cycle_ms, host_gap_ms=0.1, gpu_gap_ms=0.1, plain=plain_flag and v == 2)
        if v == 1:
            r["v"] = 1
            del r["plain"]
        out.append(r)
    return out


@pytest.fixture
def mixed(tmp_path):
    # the speculative cycles: steps 3, accepted 3/2/0 -> accept length (4 + 3 + 1) / 3
    spec = al.records_from_accepted([3, 2, 0] * 40, bs=3, steps=3, verify_ms=5.0)
    recs = (spec[:20] + plain(30, cycle_ms=4.5) + spec[20:]                  # v2 plain (adaptive steps 0)
            + plain(10, cycle_ms=4.7, v=1, start=6000)                         # v1: steps 0, no `plain` field
            + plain(10, cycle_ms=4.6, plain_flag=False, accepted=False, start=7000))  # step_timing's form
    return al.write_records(tmp_path / "mixed.jsonl", recs), spec


def test_plain_steps_stay_out_of_acceptance_and_get_their_own_line(mixed, capsys):
    path, spec = mixed
    want = summarize(spec)
    assert want["accept_length"] == pytest.approx(8 / 3)
    assert main([str(path), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["ranks"]["0"]
    assert r["accept_length"] == pytest.approx(want["accept_length"])
    assert r["pos_rates"] == pytest.approx(want["pos_rates"]) and r["accepted_hist"] == want["accepted_hist"]
    assert r["request_cycles"] == len(spec) * 3 and r["cycles"]["decode"] == len(spec)
    assert r["phases"]["cycle"]["p50"] == pytest.approx(want["phases"]["cycle"]["p50"])
    p = r["plain_steps"]
    assert p["steps"] == 50 and p["step_ms"]["p50"] == pytest.approx(4.5) and p["mean_bs"] == pytest.approx(2.0)
    assert p["step_ms"]["mean"] == pytest.approx((30 * 4.5 + 10 * 4.7 + 10 * 4.6) / 50)

    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    row = [ln for ln in out.splitlines() if "plain decode steps, ms p50" in ln]
    assert len(row) == 1 and "50 x 4.50" in row[0], out
    acc = [ln for ln in out.splitlines() if "accept length" in ln][0]
    assert "2.67" in acc, acc


def test_a_log_without_plain_steps_has_no_such_line(tmp_path, capsys):
    path = al.write_records(tmp_path / "s.jsonl", al.records_from_accepted([2] * 30, bs=1, steps=3))
    assert main([str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ranks"]["0"]["plain_steps"] is None
    assert main([str(path)]) == 0
    assert "plain decode steps" not in capsys.readouterr().out


def test_a_log_of_plain_steps_only_reports_them(tmp_path, capsys):
    path = al.write_records(tmp_path / "p.jsonl", plain(12, bs=4, cycle_ms=6.0, accepted=False, plain_flag=False))
    assert main([str(path), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["ranks"]["0"]
    assert r["accept_length"] is None and r["cycles"]["decode"] == 0
    assert r["plain_steps"]["steps"] == 12 and r["plain_steps"]["step_ms"]["p50"] == pytest.approx(6.0)


def test_a_mixed_steps_log_gets_a_steps_mix_row(tmp_path, capsys):
    """An adaptive server's drafting cycles at steps 5 and 3: the pooled rows stay, and one row (and
    --json's by_steps) gives each steps value's share of the cycles and its own accept length."""
    five = al.records_from_accepted([4, 5] * 30, bs=2, steps=5, verify_ms=5.0)  # (5 + 6) / 2 = 5.5
    three = al.records_from_accepted([1] * 20, bs=2, steps=3, verify_ms=5.0, start_cycle=len(five))  # 2.0
    path = al.write_records(tmp_path / "mix.jsonl", five + three + plain(10, start=9000))
    assert main([str(path), "--json"]) == 0
    by = json.loads(capsys.readouterr().out)["ranks"]["0"]["by_steps"]
    assert list(by) == ["5", "3"]  # plain steps-0 cycles are not drafting cycles: their own row
    assert by["5"]["cycles"] == 30 and by["5"]["share"] == pytest.approx(0.75)
    assert by["5"]["accept_length"] == pytest.approx(5.5) and by["3"]["accept_length"] == pytest.approx(2.0)
    # each position over the request-cycles that drafted it: steps 3 is no miss at positions 4 and 5
    assert main([str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ranks"]["0"]["pos_rates"] == pytest.approx([1.0, 0.75, 0.75, 1.0, 0.5])
    assert main([str(path)]) == 0
    row = [ln for ln in capsys.readouterr().out.splitlines() if "steps mix" in ln]
    assert len(row) == 1 and "5: 75% (5.50) 3: 25% (2.00)" in row[0], row
    one = al.write_records(tmp_path / "one.jsonl", five)
    assert main([str(one)]) == 0
    assert "steps mix" not in capsys.readouterr().out
    # no single what-if for the mix: the advice points at the commands that give one, not at --help
    assert main([str(path), "--json"]) == 0
    lines = json.loads(capsys.readouterr().out)["advice"]["lines"]
    assert lines[-1] == (f"details: sglang-patches advise {path} --config s5_k1_n6, or per batch-size bucket "
                         f"sglang-patches advise {path} --adaptive-config adaptive.json")


def test_reports_advice_names_its_baseline(tmp_path, capsys):
    spec = al.records_from_accepted([2, 3] * 60, bs=2, steps=3, verify_ms=5.0)
    path = al.write_records(tmp_path / "a.jsonl", spec + plain(30, cycle_ms=4.5))  # an adaptive server's steps 0
    assert main([str(path), "--json"]) == 0
    basis = json.loads(capsys.readouterr().out)["advice"]["lines"][-1]
    assert "plain decode baseline: the log's own 30 plain decode cycles (steps 0)" in basis and "see the notes" not in basis


def test_a_plain_servers_log_beside_gives_each_batch_sizes_step_and_keeps_its_prefills_out(tmp_path, capsys):
    """A speculative server's log and a plain server's (step_timing: steps, topk and draft tokens 0) given together:
    the plain row gives each batch size's step (one p50 over batch 1 and 16 is no step of either), and the plain
    server's prefills are not counted as the speculative server's."""
    spec = al.records_from_accepted([3, 2, 0] * 40, bs=3, steps=3, verify_ms=5.0)
    spec.append(make_record(cycle=len(spec), t=1.9e9, rank=0, kind="prefill", bs=1, steps=3, topk=1, draft_tokens=4,
                            accepted=[], draft_ms=None, verify_ms=None, extend_ms=2.0, cycle_ms=20.0,
                            host_gap_ms=0.1, gpu_gap_ms=0.1))
    base = (plain(20, bs=1, cycle_ms=4.0, accepted=False, plain_flag=False)
            + plain(30, bs=16, cycle_ms=6.5, accepted=False, plain_flag=False, start=6000))
    base += [make_record(cycle=7000 + i, t=1.95e9 + i, rank=0, kind="prefill", bs=1, steps=0, topk=0, draft_tokens=0,
                         accepted=[], draft_ms=None, verify_ms=None, extend_ms=None, cycle_ms=18.0, host_gap_ms=0.1,
                         gpu_gap_ms=0.1) for i in range(5)]
    paths = [al.write_records(tmp_path / "spec.jsonl", spec), al.write_records(tmp_path / "plain.jsonl", base)]
    assert main([*map(str, paths), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["ranks"]["0"]
    assert r["cycles"]["prefill"] == 1  # the speculative server's one; the plain server's five stay out
    assert r["plain_steps"]["by_bs"] == {"1": {"steps": 20, "p50": pytest.approx(4.0)},
                                         "16": {"steps": 30, "p50": pytest.approx(6.5)}}
    assert main([*map(str, paths)]) == 0
    [row] = [ln for ln in capsys.readouterr().out.splitlines() if "plain decode steps, ms p50" in ln]
    assert "1: 20 x 4.00, 16: 30 x 6.50" in row


def test_a_plain_servers_log_alone_keeps_its_prefills_under_kind_all(tmp_path, capsys):
    """With no speculative log beside it, a plain server's prefills are the only server's: --kind all counts them,
    and a ramp's batch size held under 5 steps stays out of the per-size cell."""
    base = (plain(3, bs=2, cycle_ms=5.0, accepted=False, plain_flag=False)
            + plain(30, bs=16, cycle_ms=6.5, accepted=False, plain_flag=False, start=6000))
    base += [make_record(cycle=7000 + i, t=1.95e9 + i, rank=0, kind="prefill", bs=1, steps=0, topk=0, draft_tokens=0,
                         accepted=[], draft_ms=None, verify_ms=None, extend_ms=None, cycle_ms=18.0, host_gap_ms=0.1,
                         gpu_gap_ms=0.1) for i in range(5)]
    path = al.write_records(tmp_path / "plain.jsonl", base)
    assert main([str(path), "--kind", "all", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ranks"]["0"]["cycles"]["prefill"] == 5
    assert main([str(path)]) == 0
    [row] = [ln for ln in capsys.readouterr().out.splitlines() if "plain decode steps, ms p50" in ln]
    assert "30 x 6.50 (batch 16)" in row
