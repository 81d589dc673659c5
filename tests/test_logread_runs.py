"""Several timing logs given together: a server numbers each rank's cycles from 0 in one file, so
one rank in two files is two runs (pooled, and said once) or a copy (refused: its records would
count twice). Real readers (vocab/logread.py) through the real CLI."""
from __future__ import annotations

import advisor_logs as al
import pytest

from sglang_patches import cli
from sglang_patches.errors import UserError
from sglang_patches.vocab.logread import read_records


def _log(path, *, rank=0, t0=1.7e9, accepted=(2, 1, 3, 0)):
    recs = al.records_from_accepted(list(accepted) * 50, bs=1, steps=3)
    for r in recs:
        r["rank"], r["t"] = rank, t0 + r["t"] - 1.7e9
    return al.write_records(path, recs)


def test_two_runs_of_one_rank_are_pooled_with_one_warning_that_names_both_files(tmp_path, capsys):
    a = _log(tmp_path / "monday.jsonl")
    b = _log(tmp_path / "tuesday.jsonl", t0=1.7e9 + 86400, accepted=(0, 0, 1, 0))
    code = cli.main(["report", str(a), str(b)])
    out, err = capsys.readouterr()
    assert code == 0
    warned = [ln for ln in err.splitlines() if "pooled as one traffic" in ln]
    assert len(warned) == 1 and "monday.jsonl" in warned[0] and "tuesday.jsonl" in warned[0], err
    assert "2 server runs" in warned[0]
    assert out.splitlines()[0].startswith("the drafter accepts")  # the verdict still leads stdout


def test_ranks_of_one_run_in_their_own_files_are_not_two_runs(tmp_path, capsys):
    a = _log(tmp_path / "rank0.jsonl", rank=0)
    b = _log(tmp_path / "rank1.jsonl", rank=1)
    recs, reader = read_records([a, b])
    assert len(recs) == 400 and {r["rank"] for r in recs} == {0, 1}
    assert "pooled" not in capsys.readouterr().err


def test_a_copy_of_a_log_under_another_name_is_refused_in_one_line(tmp_path):
    a = _log(tmp_path / "log.jsonl")
    b = tmp_path / "backup.jsonl"
    b.write_bytes(a.read_bytes()[: len(a.read_bytes()) // 2])  # an earlier snapshot of the same growing log
    with pytest.raises(UserError, match=r"backup.jsonl: holds the same rank-0 records as .*log.jsonl \(a copy\?\)"):
        read_records([a, b])
