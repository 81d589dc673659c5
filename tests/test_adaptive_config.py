"""`sglang-patches advise LOG --adaptive-config OUT.json` (offline/adaptive_config.py).

The written file is loaded by the REAL `_load_adaptive_config` and `AdaptiveSpeculativeParams` of
the SGLang under test (tests/run_cpu.sh runs this file on 0.5.17 and on 0.5.23), whose routing
then has to give each logged batch size the chosen candidates. Logs are synthetic chains
(tests/advisor_logs.py) written through the server's own JsonlSink.
"""
from __future__ import annotations

import json
import re
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from advisor_logs import records_from_accepted, write_records
from sglang_patches.errors import UserError
from sglang_patches.offline import advise_cli
from sglang_patches.vocab.schema import make_record

REPO = Path(__file__).resolve().parents[1]


def _runs(n, p, steps, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        length = 0
        while length < steps and rng.random() < p:
            length += 1
        out.append(length)
    return out


def two_bucket_log(path, plain_at_8_ms=None):
    """Steps 5: batch 1 with acceptance 0.8 per position, batch 8 with 0.3 (its drafts mostly lost);
    optionally plain steps-0 cycles at batch 8 as an adaptive server would log them."""
    a = records_from_accepted(_runs(400, 0.8, 5, 1), 1, 5, draft_ms=2.0, verify_ms=6.0, extend_ms=1.0, gap_ms=0.3)
    b = records_from_accepted(_runs(1600, 0.3, 5, 2), 8, 5, draft_ms=2.2, verify_ms=9.0, extend_ms=1.4,
                              gap_ms=0.3, start_cycle=len(a))
    plain = []
    if plain_at_8_ms is not None:
        plain = [make_record(cycle=len(a) + len(b) + i, t=1.8e9 + i, rank=0, kind="decode", bs=8, steps=0, topk=1,
                             draft_tokens=1, accepted=[0] * 8, draft_ms=None, verify_ms=plain_at_8_ms - 1.0,
                             extend_ms=0.9, cycle_ms=plain_at_8_ms - 0.05, host_gap_ms=None, gpu_gap_ms=0.05,
                             plain=True) for i in range(40)]
    return write_records(path, a + b + plain)


def run(tmp_path, *extra, log=None):
    log = log or two_bucket_log(tmp_path / "s5.jsonl")
    out = tmp_path / "adaptive.json"
    assert advise_cli.main([str(log), "--adaptive-config", str(out), *map(str, extra)]) == 0
    return json.loads(out.read_text()), out


def after_verdict(lines: list[str], head: list[str]) -> list[str]:
    """The lines after the shared verdict (`head`, which must lead) and the low-acceptance causes under it."""
    assert lines[:len(head)] == head
    rest = lines[len(head):]
    while rest and rest[0].startswith(("low acceptance, cause", "preflight for causes")):
        rest = rest[1:]
    return rest


def advise_verdict(capsys, *args) -> list[str]:
    assert advise_cli.main([*map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["advice"]["verdict_lines"]


def loaded(out):
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams, _load_adaptive_config

    cfg, entries = _load_adaptive_config(str(out))
    params = AdaptiveSpeculativeParams(initial_steps=5, cfg_path=str(out))
    return cfg, entries, params


def test_sglang_loads_the_file_and_routes_each_logged_batch_to_its_choice(tmp_path, capsys):
    cfg, out = run(tmp_path, "--baseline-step-ms", 4.0)
    _, entries, params = loaded(out)
    assert sorted(entries) == [1, 8, 32, 64]  # SGLang's bucket keys
    assert entries[1]["candidate_steps"] == cfg["1"]["candidate_steps"] and 0 not in cfg["1"]["candidate_steps"]
    # batch 8 drafts at 0.3 per position and a plain step takes 4 ms: even at SGLang's steps-0 price
    # (a one-token verify and the drafter's extend, STEPS0_OVER_PLAIN[8] x that) steps 0 wins there
    assert cfg["8"]["candidate_steps"][0] == 0
    assert params._route(1).candidate_steps == sorted(set(cfg["1"]["candidate_steps"]))
    assert params._route(8).candidate_steps == sorted(set(cfg["8"]["candidate_steps"]))
    assert params._route(12).candidate_steps == params._route(8).candidate_steps  # SGLang's own routing
    assert params.get_steps_for_batch(8) == 0 and params.get_steps_for_batch(1) in cfg["1"]["candidate_steps"]
    text = capsys.readouterr().out
    assert re.search(r"bucket 32 \(batch [^)]+\): not in the log: SGLang's default", text) and "no plain decode baseline" not in text
    assert "kept (its table knows acceptance, not cost; log traffic at these batch sizes to price them)" in text


def test_uncovered_buckets_keep_the_real_default(tmp_path):
    from sglang.srt.speculative.adaptive_spec_params import DEFAULT_ADAPTIVE_CONFIG

    from sglang_patches import compat

    assert compat.current().ADAPTIVE_DEFAULTS == DEFAULT_ADAPTIVE_CONFIG  # the copy is this version's
    cfg, out = run(tmp_path)
    for key in ("32", "64"):
        assert {k: v for k, v in cfg[key].items()} == DEFAULT_ADAPTIVE_CONFIG[key]
        assert {"bucket": int(key), "kept_default": "not in the log"} in cfg["sglang_patches"]["buckets"]


def test_without_a_baseline_never_0_and_said_first(tmp_path, capsys):
    cfg, out = run(tmp_path)
    said = capsys.readouterr().out
    first = next(ln for ln in said.splitlines() if "never get 0" in ln)  # after the shared verdict
    assert "no gain over a fixed server" not in said  # buckets 1 and 8 differ: the file is no fixed-steps server
    assert first.startswith("without a baseline the buckets") and "never get 0" in first
    assert 0 not in cfg["1"]["candidate_steps"] and 0 not in cfg["8"]["candidate_steps"]
    assert cfg["sglang_patches"]["baseline"] is False
    loaded(out)


def test_candidates_are_the_best_chain_and_longer_ones_within_3_percent(tmp_path):
    cfg, _ = run(tmp_path)
    shorter_seen = False
    for info in cfg["sglang_patches"]["buckets"][:2]:
        pred = {int(s): v for s, v in info["predicted_tok_s"].items()}
        logged = 5
        known = {s: v for s, v in pred.items() if s <= logged}
        best = max(known, key=known.get)
        want = sorted(s for s, v in known.items() if v >= known[best] * 0.97 and s >= best)
        assert info["candidate_steps"] == want, info
        shorter = [s for s, v in known.items() if 0 < s < best and v >= known[best] * 0.97]
        if shorter:
            shorter_seen = True
            assert "shorter than the best" in info["why"], info
    # batch 8 accepts little: its best chain is short
    assert max(cfg["8"]["candidate_steps"]) < 5 < max(cfg["1"]["candidate_steps"]) + 1
    assert shorter_seen  # the log has a bucket where a shorter chain is within 3 % (else this test shows nothing)


def test_a_chain_longer_than_logged_is_named_never_written(tmp_path, capsys):
    """Batch 1 at 0.95 per position, logged at steps 3: the advisor itself recommends an extrapolated
    s4/s5 (long chains keep paying), but SGLang would pre-capture and run it on every cycle with
    its acceptance a guess, so the candidates stay within the logged steps and the output names
    the longer chain and the log that would price it."""
    log = write_records(tmp_path / "s3.jsonl", records_from_accepted(
        _runs(400, 0.95, 3, 4), 1, 3, draft_ms=0.2, verify_ms=6.0, extend_ms=0.1, gap_ms=0.3))
    cfg, _ = run(tmp_path, log=log)
    info = cfg["sglang_patches"]["buckets"][0]
    pred = {int(s): v for s, v in info["predicted_tok_s"].items()}
    assert max(pred, key=pred.get) > 3  # the case it tests: the fastest predicted chain is extrapolated
    assert cfg["1"]["candidate_steps"] == [3]
    assert f"s{max(pred, key=pred.get)}_k1_n" in info["why"] and "not written" in info["why"]
    said = capsys.readouterr().out
    assert "not written: log a server started at steps" in said
    assert "no gain over a fixed server at steps 3" in said
    loaded(tmp_path / "adaptive.json")
    with pytest.raises(UserError, match=r"--steps 4,5: every value is above the 3 steps logged at bucket 1"):
        advise_cli.main([str(log), "--adaptive-config", str(tmp_path / "b.json"), "--steps", "4,5"])
    assert not (tmp_path / "b.json").exists()
    with pytest.raises(UserError, match=r"--steps 4,5: every value is above the 3 steps logged, and only chains the log prices"):
        advise_cli.main([str(log), "--steps", "4,5"])  # plain advise: the same rule


def test_sglangs_own_slot_stays_on_the_best_chain(tmp_path):
    """The REAL AdaptiveStepSlot fed the accepted-draft counts the log's best chain produces: with our
    candidates it runs the best chain; with every chain within 3 % (shorter ones too) it steps down."""
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveStepSlot

    cfg, _ = run(tmp_path)
    info = cfg["sglang_patches"]["buckets"][0]
    pred = {int(s): v for s, v in info["predicted_tok_s"].items() if int(s) <= 5}
    best = max(pred, key=pred.get)
    near_all = sorted(s for s, v in pred.items() if v >= pred[best] * 0.97)
    assert near_all[0] < best  # a shorter chain is within 3 % in this bucket
    rng = random.Random(3)
    feed = [_runs(1, 0.8, best, rng.random())[0] for _ in range(400)]  # batch 1 at 0.8 per position

    def ran(candidates):
        slot = AdaptiveStepSlot(initial_steps=max(candidates), cfg={**cfg["1"], "candidate_steps": candidates})
        counts = []
        for a in feed:
            slot.update([min(a, slot.current_steps)])
            counts.append(slot.current_steps)
        return counts[50:]

    ours = ran(cfg["1"]["candidate_steps"])
    assert sum(s == best for s in ours) / len(ours) > 0.9
    every_near = ran(near_all)
    assert sum(s < best for s in every_near) / len(every_near) > 0.5


def test_plain_decode_winning_gives_0_alone_even_with_chains_close_to_it(tmp_path):
    """Batch 8: steps 0 priced at an 8.2 ms cycle gives ~976 tok/s, just above the best chain (s2, ~965)
    with s1 within 3 %: SGLang's slot would move from 0 to a chain beside it at every decision, so [0] alone."""
    from sglang_patches.offline.adaptive_choice import STEPS0_OVER_PLAIN

    cfg, _ = run(tmp_path, "--baseline-step-ms", 8.2 / STEPS0_OVER_PLAIN[8])
    info = cfg["sglang_patches"]["buckets"][1]
    pred = {int(s): v for s, v in info["predicted_tok_s"].items() if int(s) <= 5}
    zero = info["steps0_tok_s"]
    assert zero > max(pred.values()) and any(v >= zero * 0.97 for v in pred.values())  # the case it tests
    assert cfg["8"]["candidate_steps"] == [0] and info["why"].startswith("steps 0 priced at")


def test_a_slow_plain_step_never_gives_0_and_a_fast_one_everywhere(tmp_path):
    slow, _ = run(tmp_path, "--baseline-step-ms", 500)
    assert all(0 not in slow[k]["candidate_steps"] for k in ("1", "8"))
    fast, _ = run(tmp_path, "--baseline-step-ms", 0.5, "--force")
    assert fast["1"]["candidate_steps"] == [0] and fast["8"]["candidate_steps"] == [0]


def test_the_logs_own_plain_cycles_are_the_baseline(tmp_path, capsys):
    log = two_bucket_log(tmp_path / "adaptive.jsonl", plain_at_8_ms=6.0)
    cfg, out = run(tmp_path, log=log)
    assert "no plain decode baseline" not in capsys.readouterr().out
    assert cfg["8"]["candidate_steps"][0] == 0 and 0 not in cfg["1"]["candidate_steps"]
    info = cfg["sglang_patches"]["buckets"][1]
    assert info["baseline"] == "the log's own plain decode cycles (steps 0)"
    assert info["steps0_tok_s"] == info["plain_tok_s"]  # SGLang's steps-0 price already: not raised again
    loaded(out)
    # steps-0 cycles only at batch 8: batch 1's baseline is borrowed, and said so in that bucket alone;
    # an adaptive server's steps-0 cycles read slower than a plain server's step, which a note says
    one, eight = cfg["sglang_patches"]["buckets"][:2]
    assert ("batch 1: refused: the baseline was measured at batch 8 only, give a plain step measured at "
            "batch 1 (--baseline-step-ms BS:MS, or a plain server's log: several runs' logs can be concatenated into one file)") in one["why"]
    assert "refused" not in eight["why"]
    assert any("steps-0 cycles (an adaptive server's)" in n for n in cfg["sglang_patches"]["notes"])
    # plain advise on the same log says the same two things
    capsys.readouterr()
    assert advise_cli.main([str(log)]) == 0
    text = capsys.readouterr().out
    assert "batch 1: refused: the baseline was measured at batch 8 only" in text
    assert "steps-0 cycles (an adaptive server's)" in text and "--baseline-log of a plain server is truer" in text


# ---------------------------------------------------------------- refusals: one line, exit 2, nothing written

def cli(*args):
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "sglang_patches", "advise", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)


def one_line(proc, needle):
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    errs = [ln for ln in proc.stderr.splitlines() if ln.startswith("sglang-patches: error:")]
    assert len(errs) == 1 and needle in errs[0], proc.stderr


def test_refusals(tmp_path):
    log = two_bucket_log(tmp_path / "s5.jsonl")
    out = tmp_path / "a.json"
    out.write_text("keep")
    one_line(cli(log, "--adaptive-config", out), "already exists; pass --force")
    assert out.read_text() == "keep"
    one_line(cli(log, "--adaptive-config", log, "--force"), "that is an input")
    base = tmp_path / "server.log"
    base.write_text("no decode lines\n")
    one_line(cli(log, "--baseline-log", base, "--adaptive-config", base, "--force"), "that is an input")
    one_line(cli(log, "--adaptive-config", tmp_path), "is a directory")
    one_line(cli(log, "--adaptive-config", tmp_path / "no" / "a.json"), "does not exist")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    new = tmp_path / "new.json"
    one_line(cli(bad, "--adaptive-config", new), "no valid timing records")
    one_line(cli(log, "--baseline-step-ms", -1, "--adaptive-config", new), "positive")
    one_line(cli(log, "--config", "s3_k1_n4", "--adaptive-config", new), "not in")
    assert not new.exists()
    assert cli(log, "--adaptive-config", out, "--force").returncode == 0 and out.read_text() != "keep"


def test_refused_in_process_before_reading(tmp_path):
    log = two_bucket_log(tmp_path / "s5.jsonl")
    with pytest.raises(UserError, match="that is an input"):
        advise_cli.main([str(log), "--adaptive-config", str(log), "--force"])


def test_the_printed_start_is_the_largest_candidate(tmp_path, capsys):
    # SGLang sizes its CUDA graphs' shared logits buffer from the starting steps, so the command
    # printed must start the server at the largest candidate of any bucket
    cfg, out = run(tmp_path, "--baseline-step-ms", 6.5)
    printed = capsys.readouterr().out.splitlines()[-1]
    top = max(s for k, e in cfg.items() if k != "sglang_patches" for s in e["candidate_steps"])
    assert f"--speculative-num-steps {top}" in printed
    from sglang.srt.speculative.adaptive_spec_params import resolve_candidate_steps_from_config

    assert max(resolve_candidate_steps_from_config(cfg_path=str(out))) == top


def test_a_drafter_that_accepts_nothing_gets_no_config(tmp_path):
    a = records_from_accepted([1 if i % 60 == 0 else 0 for i in range(600)], 1, 5, draft_ms=2.0, verify_ms=6.0)
    b = records_from_accepted([0] * 1600, 8, 5, draft_ms=2.2, verify_ms=9.0, start_cycle=len(a))
    log = write_records(tmp_path / "dummy.jsonl", a + b)
    out = tmp_path / "a.json"
    r = cli(log, "--adaptive-config", out, "--baseline-step-ms", 5)
    assert r.returncode == 1 and "Traceback" not in r.stderr and not out.exists()
    assert r.stdout.splitlines()[0].startswith("the drafter accepts nothing: accept length 1.0")
    assert "check them: sglang-patches preflight" in r.stdout
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("sglang-patches: error:")]
    assert len(errs) == 1 and "not written" in errs[0] and "plain decode" in errs[0]


def test_the_printed_start_runs_as_pasted(tmp_path, capsys):
    cfg, out = run(tmp_path, "--baseline-step-ms", 6.5)
    printed = capsys.readouterr().out.splitlines()[-1]
    top = max(s for k, e in cfg.items() if k != "sglang_patches" for s in e["candidate_steps"])
    assert (f"--speculative-num-steps {top} --speculative-eagle-topk 1 --speculative-num-draft-tokens {top + 1}"
            in printed)
    # the buckets were priced for the graph sizes given: the printed flags carry them
    run(tmp_path, "--baseline-step-ms", 6.5, "--cuda-graph-bs", 1, 2, 4, 8, "--force")
    assert capsys.readouterr().out.splitlines()[-1].split(" (in place of")[0].endswith(" --cuda-graph-bs-decode 1 2 4 8")
    run(tmp_path, "--baseline-step-ms", 6.5, "--disable-cuda-graph", "--force")
    assert " --disable-cuda-graph" in capsys.readouterr().out.splitlines()[-1]


def test_step_timings_plain_steps_get_no_adaptive_bias_note(tmp_path, capsys):
    """Steps-0 records without `plain` (a plain server's step_timing, or a v1 log) are a baseline too,
    but not an adaptive server's steps-0 cycles: the note about those stays out."""
    log = two_bucket_log(tmp_path / "mixed.jsonl", plain_at_8_ms=6.0)
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(bool(r.get("plain")) for r in recs) == 40
    log.write_text("".join(json.dumps({**r, "plain": False}) + "\n" for r in recs))
    cfg, _ = run(tmp_path, log=log)
    assert cfg["sglang_patches"]["buckets"][1]["baseline"] == "the logs' plain decode steps (steps 0)"
    assert not any("an adaptive server's" in n for n in cfg["sglang_patches"]["notes"])
    capsys.readouterr()
    assert advise_cli.main([str(log)]) == 0
    text = capsys.readouterr().out
    assert "batch 1: refused: the baseline was measured at batch 8 only" in text and "an adaptive server's" not in text

