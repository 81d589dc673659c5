"""`sglang-patches advise LOG --adaptive-config OUT.json` as a command: the warnings plain `advise`
leads with, the printed per-bucket reasons and closing line, the refusal of an empty OUT, and what
`--help` and the no-baseline lines say about a plain server's step_timing log as a baseline.
Written files are loaded by the REAL `_load_adaptive_config` of the SGLang under test."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from advisor_logs import records_from_accepted, write_records
from test_adaptive_config import REPO, _runs, advise_verdict, after_verdict, loaded, run, two_bucket_log
from sglang_patches.errors import UserError
from sglang_patches.offline import advise_cli
from sglang_patches.offline.adaptive_lines import split_reasons
from sglang_patches.vocab.schema import make_record

CONTRADICTS = "warning: the baseline contradicts the log"


def _warnings(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith(CONTRADICTS)]



def test_a_contradicting_baseline_is_warned_as_plain_advise_does(tmp_path, capsys):
    """Bucket 1 verifies in 6.0 ms + a 0.3 ms gap: a 9 ms plain step of the same target cannot be."""
    log = two_bucket_log(tmp_path / "s5.jsonl")
    assert advise_cli.main([str(log), "--baseline-step-ms", "9"]) == 0
    plain_text = capsys.readouterr().out
    plain = _warnings(plain_text)
    assert len(plain) == 1 and "at batch 1 " in plain[0]
    head = advise_verdict(capsys, log, "--baseline-step-ms", 9)
    assert plain_text.splitlines()[:len(head)] == head
    cfg, out = run(tmp_path, "--baseline-step-ms", 9, log=log)
    text = capsys.readouterr().out
    # the same verdict leads, then the file's answer per batch size, then the same warning, before any bucket
    rest = [ln for ln in after_verdict(text.splitlines(), head) if not ln.startswith(("low acceptance, cause",
                                                                                     "preflight for causes"))]
    assert _warnings(text) == plain and rest[0].startswith("this file instead, per batch size:") and rest[1] == plain[0]
    [bucket1] = [i for i in cfg["sglang_patches"]["buckets"] if i["bucket"] == 1]
    assert [c["bs"] for c in bucket1["baseline_contradictions"]] == [1]
    assert "baseline_contradictions" not in cfg["sglang_patches"]["buckets"][1]  # bucket 8: 9.0 + 0.3 ms > 9
    loaded(out)  # SGLang's loader skips the provenance key
    run(tmp_path, "--baseline-step-ms", 9, "--json", "--force", log=log)
    answer = json.loads(capsys.readouterr().out)
    assert answer["warnings"] == plain and answer["verdict_lines"] == head
    assert [ln for ln in after_verdict(answer["lines"], head)
            if not ln.startswith(("low acceptance, cause", "preflight for causes"))][1] == plain[0]
    assert answer["config"]["sglang_patches"]["buckets"][0]["baseline_contradictions"]


def test_a_consistent_baseline_gives_no_warning(tmp_path, capsys):
    run(tmp_path, "--baseline-step-ms", 5.0, "--json")  # below both buckets' verify + gap
    answer = json.loads(capsys.readouterr().out)
    assert answer["warnings"] == [] and not _warnings("\n".join(answer["lines"]))


def test_buckets_with_different_entries_say_the_files_answer_under_the_shared_verdict(tmp_path, capsys):
    # batch 1 accepts well and drafts cheaply (s5 there); batch 8 accepts little behind a slow draft (a short chain):
    # the log as a whole says don't speculate, the file speculates at batch 1: one line says so before any detail
    a = records_from_accepted(_runs(400, 0.85, 5, 1), 1, 5, draft_ms=1.0, verify_ms=6.0, extend_ms=1.0, gap_ms=0.3)
    b = records_from_accepted(_runs(1600, 0.45, 5, 2), 8, 5, draft_ms=6.0, verify_ms=9.0, extend_ms=1.4, gap_ms=0.3,
                              start_cycle=len(a))
    log = write_records(tmp_path / "m.jsonl", a + b)
    head = advise_verdict(capsys, log, "--baseline-step-ms", "1:4,8:5")
    cfg, _ = run(tmp_path, "--baseline-step-ms", "1:4,8:5", "--cuda-graph-bs-decode", 1, 2, 4, 8, log=log)
    lines = capsys.readouterr().out.splitlines()
    assert (cfg["1"]["candidate_steps"], cfg["8"]["candidate_steps"]) == ([5], [1, 2])
    assert head[1].startswith("don't speculate:") and len(head) == 3
    assert after_verdict(lines, head)[0] == ("this file instead, per batch size: batch 1-4 [5], batch 5-31 [1, 2]; "
                                             "the server starts at s5 (last line)")
    # a full four-line verdict (low acceptance) still gets the line, first after it, before the causes' detail
    low = two_bucket_log(tmp_path / "low.jsonl")
    head = advise_verdict(capsys, low)
    cfg, _ = run(tmp_path, "--force", "--cuda-graph-bs-decode", 1, 2, 4, 8, log=low)
    lines = capsys.readouterr().out.splitlines()
    assert len(head) == 4 and (cfg["1"]["candidate_steps"], cfg["8"]["candidate_steps"]) == ([5], [2, 3])
    assert lines[:5] == head + ["this file instead, per batch size: batch 1-4 [5], batch 5-31 [2, 3]; the server "
                                "starts at s5 (last line)"]
    # one entry everywhere: the fixed-chain line instead
    b = records_from_accepted(_runs(1600, 0.6, 5, 2), 8, 5, draft_ms=2.2, verify_ms=12.0, extend_ms=1.4, gap_ms=0.3,
                              start_cycle=len(a))
    same = write_records(tmp_path / "same.jsonl", a + b)
    cfg, _ = run(tmp_path, "--force", "--baseline-step-ms", "1:4,8:6", "--cuda-graph-bs-decode", 1, 2, 4, 8, log=same)
    lines = capsys.readouterr().out.splitlines()
    assert cfg["1"]["candidate_steps"] == cfg["8"]["candidate_steps"] == [5]
    assert lines[3].startswith("no gain over a fixed server at steps 5") and not any("this file instead" in ln
                                                                                    for ln in lines)


def test_reasons_split_only_outside_parentheses():
    assert split_reasons("a (b; c) d; e; f (g; h)") == ["a (b; c) d", "e", "f (g; h)"]
    assert split_reasons("one") == ["one"] and split_reasons("x) y; z") == ["x) y", "z"]


def test_a_refused_baseline_note_stays_on_one_line(tmp_path, capsys):
    """Bucket 1 has no plain steps of its own and batch 8's are not borrowed: the refusal, with what to
    give instead, is one reason of the bucket, printed whole on one line (reasons split at '; ')."""
    cfg, _ = run(tmp_path, log=two_bucket_log(tmp_path / "mixed.jsonl", plain_at_8_ms=6.0))
    refusal = ("batch 1: refused: the baseline was measured at batch 8 only, give a plain step measured at "
               "batch 1 (--baseline-step-ms BS:MS, or a plain server's log: several runs' logs can be concatenated into one file)")
    assert refusal in cfg["sglang_patches"]["buckets"][0]["why"]
    assert cfg["sglang_patches"]["buckets"][0]["plain_tok_s"] is None  # not priced from batch 8's step
    lines = capsys.readouterr().out.splitlines()
    note = [ln for ln in lines if "refused: the baseline" in ln and not ln.startswith("plain decode step used: ")]
    assert note == ["    " + refusal]
    assert not any(ln.strip().startswith("give one at batch") for ln in lines)


def test_the_closing_line_says_the_steps_flags_replace_the_servers_own(tmp_path, capsys):
    cfg, out = run(tmp_path, "--baseline-step-ms", 6.5)
    last = capsys.readouterr().out.splitlines()[-1]
    top = max(s for k, e in cfg.items() if k != "sglang_patches" for s in e["candidate_steps"])
    assert last.startswith(f"wrote {out}: run the EAGLE3 server with --speculative-adaptive ") and "add to" not in last
    flags, why = last.split("run the EAGLE3 server with ", 1)[1].split(" (in place of your own ", 1)
    assert flags.split()[-6:] == ["--speculative-num-steps", str(top), "--speculative-eagle-topk", "1",
                                  "--speculative-num-draft-tokens", str(top + 1)]
    assert why.startswith("--speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens")


def test_an_empty_out_is_refused_in_one_line(tmp_path):
    log = two_bucket_log(tmp_path / "s5.jsonl")
    before = sorted(p.name for p in tmp_path.iterdir())
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "sglang_patches", "advise", str(log), "--adaptive-config", ""],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stdout == "", proc.stderr
    [err] = proc.stderr.splitlines()
    assert err.startswith("sglang-patches: error: --adaptive-config") and "e.g. --adaptive-config adaptive.json" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def _plain_server_log(path, ms=5.2, n=100):
    """A server without speculation under --patches all,step_timing: steps 0, no acceptance."""
    return write_records(path, [make_record(
        cycle=i, t=1.9e9 + i, rank=0, kind="decode", bs=1, steps=0, topk=0, draft_tokens=0, accepted=[],
        draft_ms=None, verify_ms=None, extend_ms=None, cycle_ms=ms, host_gap_ms=0.1, gpu_gap_ms=0.1, plain=False)
        for i in range(n)])


def test_help_and_no_baseline_lines_name_a_step_timing_log_as_second_log(tmp_path, capsys):
    try:
        advise_cli.main(["--help"])
    except SystemExit as e:
        assert e.code == 0
    helptext = " ".join(capsys.readouterr().out.split())
    assert "step_timing, given as a second LOG, is a plain decode baseline" in helptext
    spec = write_records(tmp_path / "s5.jsonl", records_from_accepted(
        [3, 5, 1, 0, 5, 2] * 60, 1, 5, draft_ms=1.0, verify_ms=6.0, extend_ms=0.5, gap_ms=0.3))
    assert advise_cli.main([str(spec)]) == 0
    out = capsys.readouterr().out.splitlines()
    [note] = [ln for ln in out if ln.startswith("note: no baseline")]
    assert note.endswith("(the baselines to give: the lines above the table)")  # said once, before the table
    assert any("a plain server's timing log as a second LOG" in ln for ln in out[:out.index(note)])
    head = advise_verdict(capsys, spec)
    assert head[-1].startswith("no plain decode baseline")
    run(tmp_path, log=spec)
    said = capsys.readouterr().out
    fixed, first = after_verdict(said.splitlines(), head)[:2]
    assert fixed.startswith("no gain over a fixed server at steps 5: ")  # batch 1 only: one chain, s5
    assert "step_timing) as a second LOG" in first  # the first line after the verdict
    # without a baseline each bucket names the plain step its answer hinges on, as plain advise does
    assert " beats plain decode only if a plain decode step takes > " in said and "(give a baseline to know)" in said
    # and so it is: the plain server's log as a second LOG gives plain advise and the config a baseline
    plain = _plain_server_log(tmp_path / "plain.jsonl")
    assert advise_cli.main([str(spec), str(plain), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["baseline"]["step_ms"] == {"1": 5.2 + 0.1}
    out = tmp_path / "b.json"
    assert advise_cli.main([str(spec), str(plain), "--adaptive-config", str(out)]) == 0
    cfg = json.loads(out.read_text())["sglang_patches"]
    assert cfg["baseline"] is True and cfg["buckets"][0]["plain_tok_s"] is not None
    # a plain server's steps: steps 0 is priced at SGLang's cost of it, STEPS0_OVER_PLAIN[1] x the step
    assert cfg["buckets"][0]["steps0_tok_s"] == pytest.approx(cfg["buckets"][0]["plain_tok_s"] / 1.24, rel=0.005)


def test_plain_decode_winning_every_logged_bucket_is_said_first_and_in_the_launch_line(tmp_path, capsys):
    """A 1.3 ms plain step beats every chain at batch 1 and 8: the answer for this traffic is no
    speculation; the launch line is only for the buckets the log lacks (32 and up keep SGLang's)."""
    cfg, out = run(tmp_path, "--baseline-step-ms", 1.3)
    assert cfg["1"]["candidate_steps"] == [0] and cfg["8"]["candidate_steps"] == [0]
    lines = capsys.readouterr().out.splitlines()
    head = advise_verdict(capsys, two_bucket_log(tmp_path / "s5.jsonl"), "--baseline-step-ms", 1.3)
    assert head[-1].startswith("don't speculate: ")  # the verdict agrees, and this file's answer follows it
    assert after_verdict(lines, head)[0].startswith(
        "plain decode beats every chain in every logged bucket (batch 1, 8): serve without "
        "speculation (no --speculative-algorithm)")
    assert lines[-1].startswith(f"wrote {out}: for the logged traffic serve without speculation (first line); only "
                                "to speculate in the unlogged buckets, run the EAGLE3 server with")
    run(tmp_path, "--baseline-step-ms", 1.3, "--json", "--force")
    answer = json.loads(capsys.readouterr().out)
    assert answer["warnings"][0].startswith("plain decode beats every chain")
    assert answer["speculate"] is False  # a script reading server_flags is told not to speculate first
    run(tmp_path, "--baseline-step-ms", 4.0, "--json", "--force")
    assert json.loads(capsys.readouterr().out)["speculate"] is True
    run(tmp_path, "--baseline-step-ms", 6.5, "--force")  # chains win at batch 1: no such line
    assert not any(ln.startswith("plain decode beats") for ln in capsys.readouterr().out.splitlines())


def test_the_missing_baseline_is_a_json_warning_and_the_launch_uses_the_files_absolute_path(tmp_path, capsys,
                                                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = two_bucket_log(tmp_path / "s5.jsonl")
    assert advise_cli.main([str(log), "--adaptive-config", "rel.json", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["warnings"][0].startswith("without a baseline the buckets")
    assert answer["speculate"] is None  # nothing says whether to speculate
    assert answer["server_flags"][2] == str(tmp_path / "rel.json") and answer["wrote"] == "rel.json"


def test_a_timing_log_given_as_baseline_log_is_named_as_one(tmp_path, capsys):
    spec = two_bucket_log(tmp_path / "s5.jsonl")
    plain = _plain_server_log(tmp_path / "plain.jsonl")
    with pytest.raises(UserError) as exc:  # the CLI's wrapper prints it as one line, exit 2
        advise_cli.main([str(spec), "--baseline-log", str(plain)])
    err = str(exc.value)
    assert err.endswith(f"--baseline-log {plain}: that is a timing log (--timing-log JSONL), not a SGLang server's "
                        f"log; a plain server's timing log (--patches all,step_timing) goes in as a second LOG: "
                        f"sglang-patches advise LOG {plain}") and "\n" not in err
    with pytest.raises(UserError) as exc:  # a speculative server's timing log is the LOG itself: no such advice
        advise_cli.main([str(two_bucket_log(tmp_path / "other.jsonl")), "--baseline-log", str(spec)])
    assert str(exc.value).endswith(f"--baseline-log {spec}: that is a speculative server's timing log (--timing-log "
                                   "JSONL), the LOG to advise on, not a baseline; give the stdout/stderr log of a "
                                   "SGLang server without speculation")


def test_a_plain_servers_steps_replace_the_adaptive_logs_own_steps_0_cycles(tmp_path, capsys):
    """An adaptive log with slow steps-0 cycles at batch 8 (6.0 ms) and a plain server's log at batch 1
    and 8 (5.2 ms): the plain server's steps are the baseline at both buckets, named as such, and a note
    says the adaptive server's steps-0 cycles were left out (pooled, they would have moved the median)."""
    spec = two_bucket_log(tmp_path / "adaptive.jsonl", plain_at_8_ms=6.0)
    plain = write_records(tmp_path / "plain.jsonl", [make_record(
        cycle=i, t=1.9e9 + i, rank=0, kind="decode", bs=bs, steps=0, topk=0, draft_tokens=0, accepted=[],
        draft_ms=None, verify_ms=None, extend_ms=None, cycle_ms=5.1, host_gap_ms=0.1, gpu_gap_ms=0.1, plain=False)
        for i, bs in enumerate([1, 8] * 30)])
    out = tmp_path / "cfg.json"
    assert advise_cli.main([str(spec), str(plain), "--adaptive-config", str(out), "--cuda-graph-bs-decode",
                            "1", "2", "4", "8"]) == 0
    text = capsys.readouterr().out
    cfg = json.loads(out.read_text())["sglang_patches"]
    by = {b["bucket"]: b for b in cfg["buckets"]}
    for key in (1, 8):
        assert by[key]["baseline"] == "the logs' plain decode steps (steps 0)"
        assert by[key]["plain_tok_s"] == pytest.approx(key * 1000 / 5.2, rel=1e-3)  # 5.1 ms + the 0.1 ms gap
    left_out = ("plain decode baseline at batch 8: the plain steps there; the adaptive server's 40 steps-0 cycles "
                "there are left out")
    assert any(left_out in n for n in cfg["notes"]) and left_out in text
    assert "--baseline-log of a plain server is truer" not in text
    # plain advise: the same baseline, named in the basis line
    assert advise_cli.main([str(spec), str(plain)]) == 0
    text = capsys.readouterr().out
    assert "plain decode baseline: the logs' 60 plain decode steps (steps 0)" in text and left_out in text


def test_each_batch_size_takes_the_plain_steps_it_has(tmp_path, capsys):
    """A plain server's steps at batch 1 only, an adaptive server's steps-0 cycles at batch 8 (6.0 ms):
    bucket 8 is priced from its own steps-0 cycles, not from batch 1's faster plain step."""
    spec = two_bucket_log(tmp_path / "adaptive.jsonl", plain_at_8_ms=6.0)
    plain = write_records(tmp_path / "plain.jsonl", [make_record(
        cycle=i, t=1.9e9 + i, rank=0, kind="decode", bs=1, steps=0, topk=0, draft_tokens=0, accepted=[],
        draft_ms=None, verify_ms=None, extend_ms=None, cycle_ms=4.0, host_gap_ms=0.1, gpu_gap_ms=0.1, plain=False)
        for i in range(30)])
    out = tmp_path / "cfg.json"
    assert advise_cli.main([str(spec), str(plain), "--adaptive-config", str(out), "--cuda-graph-bs-decode",
                            "1", "2", "4", "8"]) == 0
    text = capsys.readouterr().out
    by = {b["bucket"]: b for b in json.loads(out.read_text())["sglang_patches"]["buckets"]}
    assert by[1]["plain_tok_s"] == pytest.approx(1000 / 4.1, rel=1e-3)
    assert by[8]["plain_tok_s"] == pytest.approx(8000 / 6.0, rel=1e-3)  # its own steps-0 cycles (5.95 + 0.05 ms)
    assert by[1]["baseline"] == "the logs' plain decode steps (steps 0)"
    assert by[8]["baseline"] == "the log's own plain decode cycles (steps 0)"
    assert "borrows" not in text and "--baseline-log of a plain server is truer" in text  # bucket 8's is biased


def test_contradictions_in_several_buckets_are_one_warning_line(tmp_path, capsys):
    """Both buckets verify faster than a 12 ms plain step (6.0 and 9.0 ms): one line naming batch 1 and 8, as
    plain advise gives it, in the printed lines and in --json's warnings."""
    log = two_bucket_log(tmp_path / "s5.jsonl")
    assert advise_cli.main([str(log), "--baseline-step-ms", "12"]) == 0
    plain = _warnings(capsys.readouterr().out)
    assert len(plain) == 1 and "at batch 1, 8 " in plain[0]
    assert advise_cli.main([str(log), "--baseline-step-ms", "12", "--adaptive-config", str(tmp_path / "c.json"),
                            "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [w for w in d["warnings"] if w.startswith(CONTRADICTS)] == plain
    assert len([ln for ln in d["lines"] if ln.startswith(CONTRADICTS)]) == 1
