"""`advise --adaptive-config`'s two rules for where a bucket's steps came from and where SGLang runs
them: the start chain alone where it is a candidate (no swapped-in runtime state), and a log of an
adaptive server said to be biased. Logs are synthetic chains (tests/advisor_logs.py); the written
file is loaded by the REAL SGLang of the version under test (tests/run_cpu.sh: 0.5.17 and 0.5.23)."""
from __future__ import annotations

import pytest

from advisor_logs import records_from_accepted, write_records
from test_adaptive_config import _runs, advise_verdict, after_verdict, loaded, run


def test_a_bucket_whose_candidates_include_the_start_chain_runs_it_alone(tmp_path, capsys):
    """Batch 1 where steps 4 is predicted best and steps 5 within 3 % of it: the candidates would be
    [4, 5], and the server starts at 5 (the largest candidate), so SGLang would run steps 4 on a
    swapped-in runtime state (cycles measured up to 12 % slower). The bucket gets [5] alone,
    said in its why; SGLang's real params then run 5 at batch 1 from the start."""
    log = write_records(tmp_path / "s5.jsonl", records_from_accepted(
        _runs(600, 0.8, 5, 4), 1, 5, draft_ms=4.0, verify_ms=6.0, extend_ms=1.0, gap_ms=0.3))
    cfg, out = run(tmp_path, log=log)
    info = cfg["sglang_patches"]["buckets"][0]
    pred = {int(s): v for s, v in info["predicted_tok_s"].items() if int(s) <= 5}
    assert max(pred, key=pred.get) == 4 and pred[5] >= 0.97 * pred[4]  # the premise: [4, 5] before the rule
    assert cfg["1"]["candidate_steps"] == [5] and "s5 alone of [4, 5]" in info["why"]
    assert "s5 100 %" in capsys.readouterr().out  # SGLang's slot replayed on the log's cycles
    _, entries, params = loaded(out)
    assert params.get_steps_for_batch(1) == 5 and params._route(1).candidate_steps == [5]


def test_a_bucket_without_the_start_chain_keeps_its_candidates(tmp_path):
    """The rule only removes a swap it can: bucket 8's short chains do not include the start chain
    (bucket 1's longer one), so they stay as chosen."""
    cfg, _ = run(tmp_path)
    top = max(cfg["1"]["candidate_steps"])
    assert top not in cfg["8"]["candidate_steps"] and "alone of" not in cfg["sglang_patches"]["buckets"][1]["why"]


def test_an_adaptive_servers_log_is_said_to_be_biased(tmp_path, capsys):
    """Bucket 1 of an adaptive server's log: 600 steps-3 cycles at 0.5 per position and 40 steps-7
    cycles at 0.9 (SGLang's slot climbs to 7 only where drafts are accepted). The bucket is modelled
    from the steps-7 cycles, a biased 6 %: the bucket says its share, the output says first to log
    a fixed-steps server, right after the verdict. A fixed-steps log says neither."""
    a = records_from_accepted(_runs(600, 0.5, 3, 5), 1, 3, draft_ms=0.6, verify_ms=6.0, extend_ms=0.4, gap_ms=0.3)
    b = records_from_accepted(_runs(40, 0.9, 7, 6), 1, 7, draft_ms=1.4, verify_ms=6.2, extend_ms=0.4, gap_ms=0.3,
                              start_cycle=len(a))
    cfg, _ = run(tmp_path, log=write_records(tmp_path / "mixed.jsonl", a + b))
    info = cfg["sglang_patches"]["buckets"][0]
    assert info["modelled_from"].startswith("s7_k1_n8") and info["modelled_share"] == pytest.approx(40 / 640, abs=0.01)
    assert "modelled from s7_k1_n8's 6 % of this bucket's request-cycles" in info["why"]
    out = capsys.readouterr().out
    lines = out.splitlines()
    mix = next(i for i, ln in enumerate(lines) if ln.startswith("the log mixes steps values within a bucket"))
    # the verdict leads (at most 4 lines), this caveat on it follows at once, before any bucket
    assert lines[0].startswith("the drafter accepts ") and 1 <= mix <= 4 and "log a fixed-steps server" in lines[mix]
    assert not any(ln.startswith("bucket ") for ln in lines[:mix])
    cfg, _ = run(tmp_path, "--force")
    assert all(i.get("modelled_share", 1) == 1 for i in cfg["sglang_patches"]["buckets"])
    assert "mixes steps values" not in capsys.readouterr().out


def test_the_whole_logs_verdict_speaks_of_the_chain_the_server_ran(tmp_path, capsys):
    """An adaptive server's log with 605 request-cycles at steps 3 and a handful at steps 5: the verdict the
    file leads with is advise's for the steps-3 cycles (`--config s3_k1_n4`), not one built on the handful,
    which said 'switch to' the chain the server already ran; the bucket still models from the longest chain."""
    a = records_from_accepted(_runs(605, 0.7, 3, 7), 1, 3, draft_ms=0.6, verify_ms=6.0, extend_ms=0.4, gap_ms=0.3)
    b = records_from_accepted(_runs(12, 0.9, 5, 8), 1, 5, draft_ms=1.0, verify_ms=6.2, extend_ms=0.4, gap_ms=0.3,
                              start_cycle=len(a))
    log = write_records(tmp_path / "adaptive.jsonl", a + b)
    head = advise_verdict(capsys, log, "--config", "s3_k1_n4", "--baseline-step-ms", "5")
    cfg, _ = run(tmp_path, "--baseline-step-ms", "5", log=log)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:len(head)] == head and "at steps 3 (up to 4)" in head[0], (head, lines[:4])
    assert not any("switch to s3" in ln for ln in head)
    assert cfg["sglang_patches"]["buckets"][0]["modelled_from"].startswith("s5_k1_n6")


def test_an_adaptive_servers_dummy_drafter_is_still_refused(tmp_path, capsys):
    """A dummy drafter under --speculative-adaptive: SGLang's slot drops to steps 1, so steps 1 holds most
    request-cycles and steps 5 a few, all accepting nothing. The refusal judges the longest chain (at steps 1
    nothing-accepted cannot be told from a short chain), so nothing is written."""
    a = records_from_accepted([0] * 60, 1, 5, draft_ms=2.0, verify_ms=6.0, extend_ms=1.0, gap_ms=0.3)
    b = records_from_accepted([0] * 600, 1, 1, draft_ms=0.5, verify_ms=5.5, extend_ms=1.0, gap_ms=0.3,
                              start_cycle=len(a))
    log = write_records(tmp_path / "dummy.jsonl", a + b)
    out = tmp_path / "a.json"
    from sglang_patches.errors import UserError
    from sglang_patches.offline import advise_cli

    with pytest.raises(UserError, match="not written: with a drafter that accepts nothing"):
        advise_cli.main([str(log), "--adaptive-config", str(out)])
    assert capsys.readouterr().out.splitlines()[0].startswith("the drafter accepts nothing: accept length 1.00 at steps 5")
    assert not out.exists()


def test_steps_asked_above_the_dominant_chain_model_the_longest(tmp_path, capsys):
    """--steps 4,5 on an adaptive log of 605 request-cycles at steps 3 and 12 at steps 5: the verdict models the
    steps-5 cycles (a configuration the steps asked can be priced from), not a refusal."""
    a = records_from_accepted(_runs(605, 0.7, 3, 7), 1, 3, draft_ms=0.6, verify_ms=6.0, extend_ms=0.4, gap_ms=0.3)
    b = records_from_accepted(_runs(12, 0.9, 5, 8), 1, 5, draft_ms=1.0, verify_ms=6.2, extend_ms=0.4, gap_ms=0.3,
                              start_cycle=len(a))
    log = write_records(tmp_path / "adaptive.jsonl", a + b)
    cfg, _ = run(tmp_path, "--steps", "4,5", log=log)
    assert "at steps 5 (up to 6)" in capsys.readouterr().out.splitlines()[0]
    assert set(cfg["1"]["candidate_steps"]) <= {4, 5}


def test_the_installed_sglangs_swapped_state_draft_extend_is_said(tmp_path, capsys):
    """compat's ADAPTIVE_SWAPPED_EXTEND_GRAPHS matches the real SGLang: 0.5.17's
    resolve_num_tokens_per_req sizes draft-extend graphs from server_args (the start's width: False),
    0.5.23's from the runtime config store, per candidate (True). Where it is False, a config whose
    buckets run a steps value other than the start says which buckets pay for it."""
    import inspect
    from types import SimpleNamespace

    from sglang.srt.speculative.spec_utils import resolve_num_tokens_per_req

    from sglang_patches import compat

    per_candidate = "server_args" not in inspect.signature(resolve_num_tokens_per_req).parameters
    if not per_candidate:  # the start's width: the server_args value, whatever a candidate overrides
        assert resolve_num_tokens_per_req(phase="draft_extend", server_args=SimpleNamespace(
            speculative_num_draft_tokens=6, speculative_eagle_topk=1)) == 6
    assert compat.current().ADAPTIVE_SWAPPED_EXTEND_GRAPHS is per_candidate
    cfg, _ = run(tmp_path, "--baseline-step-ms", 6.5)  # bucket 1 from the log; 32 keeps SGLang's [0, 1]
    top = max(cfg["1"]["candidate_steps"])
    notes = [n for n in cfg["sglang_patches"]["notes"] if "graphs captured for the start's steps" in n]
    if per_candidate:
        assert notes == []
    else:
        assert len(notes) == 1 and f"differ from the start (s{top})" in notes[0] and "32 (s1)" in notes[0], notes
        assert f"bucket 1 (" not in notes[0]  # bucket 1 runs the start chain


def test_a_start_taken_from_a_kept_default_is_said(tmp_path, capsys):
    """A log of batch 8 only: bucket 1 keeps SGLang's default, whose largest candidate (7 on both
    versions) is then the server's start, above every chain chosen from the log; the output says so."""
    log = write_records(tmp_path / "b8.jsonl", records_from_accepted(
        _runs(800, 0.6, 5, 7), 8, 5, draft_ms=2.2, verify_ms=9.0, extend_ms=1.4, gap_ms=0.3))
    cfg, _ = run(tmp_path, "--baseline-step-ms", 20, log=log)
    top = max(s for k, e in cfg.items() if k != "sglang_patches" for s in e["candidate_steps"])
    assert top == 7 and max(cfg["8"]["candidate_steps"]) <= 5
    notes = [n for n in cfg["sglang_patches"]["notes"] if n.startswith("the server starts at s7")]
    assert len(notes) == 1 and "SGLang's default kept for bucket 1 (batches of 1-7), which the log lacks" in notes[0]
    assert "(its middle candidate: the server's start, s7, is not one)" in capsys.readouterr().out


def test_advise_on_one_configuration_of_a_mixed_log_warns(tmp_path, capsys):
    """`advise LOG --config s7_k1_n8` on an adaptive server's log analyses the cycles SGLang's slot ran
    at steps 7, its easy spans: said in a warning; a log of one configuration has none."""
    from sglang_patches.offline import advise_cli

    a = records_from_accepted(_runs(600, 0.5, 3, 5), 1, 3, draft_ms=0.6, verify_ms=6.0, extend_ms=0.4, gap_ms=0.3)
    b = records_from_accepted(_runs(40, 0.9, 7, 6), 1, 7, draft_ms=1.4, verify_ms=6.2, extend_ms=0.4, gap_ms=0.3,
                              start_cycle=len(a))
    log = write_records(tmp_path / "mixed.jsonl", a + b)
    assert advise_cli.main([str(log), "--config", "s7_k1_n8"]) == 0
    warn = [ln for ln in capsys.readouterr().out.splitlines() if "biased sample" in ln]
    assert len(warn) == 1 and "s7_k1_n8 is one of this log's configurations (also s3_k1_n4)" in warn[0], warn
    assert advise_cli.main([str(write_records(tmp_path / "one.jsonl", a))]) == 0
    assert "biased sample" not in capsys.readouterr().out


def test_a_plain_server_faster_than_every_chain_but_steps_0_not_keeps_the_chains(tmp_path, capsys):
    """Batch 8 at a 6.5 ms plain step: a plain server (~1230 tok/s) beats every chain (~965), but SGLang's
    steps 0 (a one-token verify and the drafter's extend, ~1.5x a plain step on an H200) does not: the
    bucket keeps its chain and says that a server without speculation is faster; batch 1's chains beat
    even the plain server, so no line says to serve without speculation."""
    cfg, _ = run(tmp_path, "--baseline-step-ms", 6.5)
    info = cfg["sglang_patches"]["buckets"][1]
    best = max(v for s, v in info["predicted_tok_s"].items() if int(s) <= 5)
    assert info["plain_tok_s"] > best > info["steps0_tok_s"]  # the case it tests
    assert 0 not in cfg["8"]["candidate_steps"] and info["plain_server_wins"] is True
    assert "a server without speculation is faster here" in info["why"] and "so the chain stays" in info["why"]
    assert cfg["sglang_patches"]["buckets"][0]["plain_server_wins"] is False
    assert not any(ln.startswith("plain decode beats every chain") for ln in capsys.readouterr().out.splitlines())


def test_a_plain_server_faster_everywhere_with_chains_kept_says_so_and_what_the_file_is_for(tmp_path, capsys):
    """A plain server's log at 2.4 ms (bs 1) and 6.5 ms (bs 8) beats every chain in both logged buckets,
    while SGLang's steps 0 at that price beats none: no speculation is the answer, and the file holds the
    chains for a server that speculates anyway (not "only the unlogged buckets")."""
    base = tmp_path / "plain.log"
    base.write_text("".join(f"[2026-12-05 05:31:00] Decode batch, #running-req: {bs}, #token: 90, token usage: 0.00, "
                            f"cuda graph: True, gen throughput (token/s): {tps:.2f}, #queue-req: 0,\n" * 3
                            for bs, tps in ((1, 1000 / 2.4), (8, 8000 / 6.5))))
    cfg, out = run(tmp_path, "--baseline-log", base)
    infos = cfg["sglang_patches"]["buckets"][:2]
    assert all(i["plain_server_wins"] and 0 not in i["candidate_steps"] for i in infos)  # the case it tests
    lines = capsys.readouterr().out.splitlines()
    head = advise_verdict(capsys, tmp_path / "s5.jsonl", "--baseline-log", base)
    assert head[-1].startswith("don't speculate: ")  # plain advise's verdict leads; this file's answer follows it
    first = after_verdict(lines, head)[0]
    assert first.startswith("plain decode beats every chain in every logged bucket (batch 1, 8): serve without")
    assert "to speculate anyway, the file holds the fastest chains there" in first
    assert lines[-1].startswith(f"wrote {out}: for the logged traffic serve without speculation (first line); only "
                                "to speculate anyway, run the EAGLE3 server with")
    assert not any("runs steps" in ln and "alone, as a fixed" in ln for ln in lines)

