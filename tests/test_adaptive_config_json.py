"""`sglang-patches advise LOG --adaptive-config OUT.json --json`: stdout holds the JSON alone (what
was written, the server flags, the printed lines, the config), also when nothing is written."""
from __future__ import annotations

import json
import re

import pytest

from test_adaptive_config import run


def test_json_prints_what_was_written_and_the_server_flags(tmp_path, capsys):
    cfg, out = run(tmp_path, "--baseline-step-ms", 6.5, "--json")
    answer = json.loads(capsys.readouterr().out)  # nothing but the JSON on stdout
    assert answer["wrote"] == str(out) and answer["config"] == cfg
    flags = answer["server_flags"]
    assert flags[:3] == ["--speculative-adaptive", "--speculative-adaptive-config", str(out)]
    top = max(s for k, e in cfg.items() if k != "sglang_patches" for s in e["candidate_steps"])
    assert flags[flags.index("--speculative-num-steps") + 1] == str(top)
    assert any(re.match(r"bucket 32 \(batch [^)]+\): not in the log", ln) for ln in answer["lines"])


def test_json_of_a_drafter_that_accepts_nothing_is_one_json_verdict(tmp_path, capsys):
    from test_adaptive_config import records_from_accepted, write_records
    from sglang_patches.errors import UserError
    from sglang_patches.offline import advise_cli

    log = write_records(tmp_path / "dead.jsonl", records_from_accepted([0] * 400, 1, 3, draft_ms=1.0, verify_ms=6.0))
    with pytest.raises(UserError) as err:
        advise_cli.main([str(log), "--adaptive-config", str(tmp_path / "a.json"), "--json"])
    assert err.value.code == 1 and not (tmp_path / "a.json").exists()
    cap = capsys.readouterr()
    said = json.loads(cap.out)  # a script reading stdout gets the verdict, not nothing
    assert said["wrote"] is None and said["speculate"] is False and said["drafter_accepts_nothing"] is True
    assert said["server_flags"] == [] and said["config"] is None  # the keys every --json result has
    assert "accepts nothing" in said["lines"][0] and "accepts nothing" in cap.err
