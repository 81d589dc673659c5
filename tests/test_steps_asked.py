"""advise --steps / --max-steps that leave out the logged chain: the recommendation is still chosen among the
steps asked, but the logged chain is priced for reference, so the verdict never says 'switch to' a chain slower
than the one the server runs without saying so, and the answer lines name the logged chain (they ended in a
dangling ', ' before)."""
from __future__ import annotations

import json

from advisor_logs import records_from_accepted, write_records
from test_verdict_everywhere import run as _run


def _log(tmp_path, accepted):
    return write_records(tmp_path / "s3.jsonl", records_from_accepted(
        accepted, 1, 3, draft_ms=0.6, verify_ms=6.0, extend_ms=0.4, gap_ms=0.1))


def test_the_logged_chain_left_out_is_named_beside_the_chain_asked(tmp_path, capsys):
    log = _log(tmp_path, [3, 3, 2, 3, 1, 3] * 60)  # acceptance high all the way: steps 3 beats 1 and 2
    code, out = _run(capsys, "advise", log, "--steps", "1,2", "--baseline-step-ms", "5")
    lines = out.splitlines()
    assert code == 0
    [verdict] = [ln for ln in lines[:4] if ln.startswith("speculate")]
    assert verdict.startswith("speculate, of the steps asked: s2_k1_n3 at ") and len(verdict) <= 120
    assert "x plain decode; the logged s3_k1_n4, left out: " in verdict
    asked, logged = (float(x.split("x")[0]) for x in (verdict.split(" at ")[1], verdict.split("left out: ")[1]))
    assert logged > asked
    [rec] = [ln for ln in lines if ln.startswith("recommended: ")]
    assert "x the logged s3_k1_n4 (not among the steps asked)" in rec and ", ," not in rec and not rec.endswith(", ")
    code, out = _run(capsys, "advise", log, "--max-steps", "2", "--baseline-step-ms", "5", "--json")
    d = json.loads(out)["advice"]
    assert d["logged_left_out"] == "s3_k1_n4" and d["recommended"] == "s2_k1_n3" and d["gain_vs_logged"] < 1
    code, out = _run(capsys, "advise", log, "--steps", "1,2")  # no baseline: the best-chain line reads whole
    [best] = [ln for ln in out.splitlines() if ln.startswith("best chain: ")]
    assert "tok/s, " in best and ", ;" not in best and "the logged s3_k1_n4 (not among the steps asked)" in best


def test_no_reference_clause_where_the_chain_asked_is_the_faster(tmp_path, capsys):
    log = _log(tmp_path, [0, 1, 0, 0, 2, 0] * 60)  # later drafts rarely kept: a short chain wins
    code, out = _run(capsys, "advise", log, "--steps", "1,2", "--baseline-step-ms", "5")
    assert code == 0 and "left out" not in "\n".join(out.splitlines()[:4])
    code, out = _run(capsys, "advise", log, "--steps", "1,2,3", "--baseline-step-ms", "5", "--json")
    assert json.loads(out)["advice"]["logged_left_out"] is None  # the logged steps asked: no reference needed


def test_a_steps_1_row_says_its_draft_phase_is_priced_at_zero(tmp_path, capsys):
    log = _log(tmp_path, [3, 3, 2, 3, 1, 3] * 60)
    note = "note: s1's draft phase runs no drafter forward: priced at 0 ms, its fixed part"
    code, out = _run(capsys, "advise", log)
    assert code == 0 and any(ln.startswith(note) for ln in out.splitlines())
    code, out = _run(capsys, "advise", log, "--steps", "2,3")
    assert code == 0 and not any(ln.startswith(note) for ln in out.splitlines())


def test_none_of_the_steps_asked_pays_but_the_logged_chain_does(tmp_path, capsys):
    """A baseline fast enough that steps 2 loses to plain decode while the logged steps 3 still wins: not a bare
    "don't speculate" (the logged chain, left out by --max-steps, beats plain decode)."""
    log = _log(tmp_path, [3, 3, 3, 3, 2, 3] * 60)
    code, out = _run(capsys, "advise", log, "--steps", "1,2,3", "--baseline-step-ms", "2.0", "--json")
    logged = json.loads(out)["advice"]
    assert logged["recommended"] == "s3_k1_n4" and logged["best"]["ratio_to_no_spec"] > 1  # the premise
    code, out = _run(capsys, "advise", log, "--max-steps", "2", "--baseline-step-ms", "2.0")
    lines = out.splitlines()
    [verdict] = [ln for ln in lines[:4] if "of the steps asked" in ln]
    assert verdict.startswith("of the steps asked none beats plain decode (s2_k1_n3 0.")
    assert verdict.endswith(f"the logged s3_k1_n4, left out, does: {logged['best']['ratio_to_no_spec']:.2f}x")
    assert len(verdict) <= 120 and verdict.count("plain decode") == 1
    [rec] = [ln for ln in lines if ln.startswith("recommended: no speculation")]
    assert rec.endswith(f"the logged s3_k1_n4, not among the steps asked, {logged['best']['ratio_to_no_spec']:.2f}x")
