"""Several timing logs given together (vocab/log_runs.py): a server numbers each rank's records from 0 at its
start, appends across restarts and rotates large logs into PATH.1, PATH.2. A rotated part continues its run
(nothing said), numbers starting over are another run (pooled, said once), a copy is refused (its records
would count twice), and a plain server's log given as a baseline LOG is no run. Real readers, real CLI."""
from __future__ import annotations

import advisor_logs as al
import pytest

from sglang_patches import cli
from sglang_patches.errors import UserError
from sglang_patches.vocab.logread import LogReader, read_records


def _recs(*, rank=0, t0=1.7e9, accepted=(2, 1, 3, 0), start_cycle=0):
    recs = al.records_from_accepted(list(accepted) * 50, bs=1, steps=3, start_cycle=start_cycle)
    for r in recs:
        r["rank"], r["t"] = rank, t0 + r["t"] - 1.7e9
    return recs


def _pooled(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if "pooled as one traffic" in ln]


def test_two_runs_of_one_rank_are_pooled_with_one_warning_that_names_both_files(tmp_path, capsys):
    a = al.write_records(tmp_path / "monday.jsonl", _recs())
    b = al.write_records(tmp_path / "tuesday.jsonl", _recs(t0=1.7e9 + 86400, accepted=(0, 0, 1, 0)))
    code = cli.main(["report", str(a), str(b)])
    out, err = capsys.readouterr()
    assert code == 0
    warned = _pooled(err)
    assert len(warned) == 1 and "monday.jsonl" in warned[0] and "tuesday.jsonl" in warned[0], err
    assert "come from 2 server runs" in warned[0]
    assert out.splitlines()[0].startswith("the drafter accepts")  # the verdict still leads stdout


def test_a_rotated_log_continues_its_run_and_a_restart_appended_to_one_file_is_another(tmp_path, capsys):
    whole = _recs()
    part1 = al.write_records(tmp_path / "t.jsonl.1", whole[:120])   # the sink's rotation: PATH.1 then PATH
    part2 = al.write_records(tmp_path / "t.jsonl", whole[120:])
    recs, _ = read_records([part2, part1])
    assert len(recs) == len(whole) and not _pooled(capsys.readouterr().err)
    restarted = al.write_records(tmp_path / "r.jsonl", _recs() + _recs(t0=1.7e9 + 3600))  # cycle 0 again
    read_records([restarted])
    assert "come from 2 server runs" in _pooled(capsys.readouterr().err)[0]


def test_ranks_of_one_run_and_a_plain_baseline_log_are_not_runs(tmp_path, capsys):
    a = al.write_records(tmp_path / "rank0.jsonl", _recs(rank=0))
    b = al.write_records(tmp_path / "rank1.jsonl", _recs(rank=1))
    recs, _ = read_records([a, b])
    assert len(recs) == 400 and {r["rank"] for r in recs} == {0, 1}
    plain = al.records_from_accepted([0] * 100, bs=1, steps=0, start_cycle=0)
    for r in plain:
        r["t"] += 7200
    base = al.write_records(tmp_path / "plain.jsonl", plain)  # a plain server's timing log as the baseline LOG
    read_records([a, base])
    assert not _pooled(capsys.readouterr().err)


def test_a_copy_of_a_log_under_another_name_is_refused_in_one_line_and_a_second_pass_is_no_copy(tmp_path):
    a = al.write_records(tmp_path / "log.jsonl", _recs())
    reader = LogReader([a])
    assert len(list(reader)) == len(list(reader)) == 200  # iterating twice reads the file twice, not a copy
    b = tmp_path / "backup.jsonl"
    b.write_bytes(a.read_bytes()[: len(a.read_bytes()) // 2])  # an earlier snapshot of the same growing log
    with pytest.raises(UserError, match=r"backup.jsonl: holds the same rank-0 records as .*log.jsonl \(a copy\?\)"):
        read_records([a, b])
