"""Candidate sets priced by replaying SGLang's slot (offline/adaptive_sets.py, adaptive_slot.replay's
tok/s) and the pair `advise --adaptive-config` writes where the replay prices it past the margin.

The replay's price is checked against an independent walk of the REAL AdaptiveStepSlot of the SGLang
under test (tests/run_cpu.sh runs this file on 0.5.17 and 0.5.23): the real class decides, this file
adds up tokens and milliseconds. Logs are synthetic chains (tests/advisor_logs.py) written through the
server's own JsonlSink; their acceptance is bursty (easy and dead spans) or steady.
"""
from __future__ import annotations

import json
import re
import random
from pathlib import Path

import pytest

from advisor_logs import records_from_accepted, write_records
from sglang_patches.offline import advise_cli
from sglang_patches.offline.adaptive_choice import NEAR
from sglang_patches.offline.adaptive_sets import (PRICE_CHUNKS, PRICE_MAX_CYCLES, at_batch_sizes, best_pair, price,
                                                   replay_cycles)
from sglang_patches.offline.adaptive_slot import replay
from test_adaptive_config import _runs, advise_verdict, after_verdict, loaded, two_bucket_log

REPO = Path(__file__).resolve().parents[1]
HYST_1 = {"up_hysteresis": 0.0, "down_hysteresis": -0.25}  # SGLang's bucket-1 default


def bursty(n_blocks=40, span=60, easy=0.9, dead=0.05, seed=3, bs=1):
    """Accepted drafts at steps 5: spans of `span` cycles alternating dead (`dead` per position) and easy."""
    rng = random.Random(seed)
    out = []
    for blk in range(n_blocks):
        out += _runs(span * bs, easy if blk % 2 else dead, 5, rng.random())
    return out


def bursty_log(path, bs=1, **kw):
    return write_records(path, records_from_accepted(bursty(bs=bs, **kw), bs, 5, draft_ms=2.0, verify_ms=5.0,
                                                     extend_ms=0.6, gap_ms=0.3))


def advise(tmp_path, log, *extra):
    out = tmp_path / "adaptive.json"
    assert advise_cli.main([str(log), "--adaptive-config", str(out), "--cuda-graph-bs-decode", "1", "2", "4", "8",
                            *map(str, extra)]) == 0
    return json.loads(out.read_text()), out


def test_replay_price_by_hand():
    periods = {5: {1: 10.0}, 1: {1: 4.0}, 0: {1: 3.0}}
    # fixed steps 5, every request accepting 4: 5 tokens per 10 ms
    assert replay({"candidate_steps": [5]}, [[4]] * 50, 5, 5, periods)["tok_s"] == 500.0
    # steps 1 truncates 4 to 1: 2 tokens per 4 ms; steps 0: one token per 3 ms
    assert replay({"candidate_steps": [1]}, [[4]] * 50, 5, 1, periods)["tok_s"] == 500.0
    assert replay({"candidate_steps": [0]}, [[4]] * 50, 5, 0, periods)["tok_s"] == pytest.approx(333.3, abs=0.1)
    # a batch of 2 where only bs 1 is priced: the nearest batch size's period, two requests' tokens
    assert replay({"candidate_steps": [5]}, [[4, 0]] * 10, 5, 5, periods)["tok_s"] == 600.0
    # a candidate without a price: no tok/s (the share is still replayed)
    r = replay({"candidate_steps": [3, 5]}, [[4]] * 50, 5, 5, periods)
    assert r["tok_s"] is None and r["share"] == {5: 1.0}
    assert "tok_s" not in replay({"candidate_steps": [5]}, [[4]] * 5, 5, 5)  # unpriced replay: as before


@pytest.mark.parametrize("cands,initial", [([1, 5], 5), ([0, 5], 5), ([1, 3, 7], 7), ([0, 1, 3], 3), ([2, 4], 4)])
def test_the_price_follows_the_real_slots_decisions(cands, initial):
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveStepSlot

    cycles = [[a] for a in bursty(n_blocks=20, span=40, seed=7)]
    periods = {s: {1: 4.0 + 0.7 * s} for s in range(8)}
    cfg = {"candidate_steps": cands, **HYST_1}
    slot = AdaptiveStepSlot(initial_steps=initial, cfg=dict(cfg))
    tokens, ms, ran = 0, 0.0, {}
    for accepted in cycles:
        s = slot.current_steps
        feed = [0 if s == 0 else min(a, s) for a in accepted]
        tokens += sum(feed) + len(feed)
        ms += periods[s][1]
        ran[s] = ran.get(s, 0) + 1
        slot.update(feed)
    assert len(ran) > 1  # the feed moved the real slot
    r = replay(cfg, cycles, 5, initial, periods)
    assert r["tok_s"] == pytest.approx(tokens * 1000.0 / ms, abs=0.05)
    assert r["share"] == {s: round(k / len(cycles), 3) for s, k in sorted(ran.items())}


def test_a_pair_beats_single_chains_only_on_bursty_acceptance():
    periods = {s: {1: 5.9 + (2.0 * (s - 1) / 4 if s else -0.5)} for s in range(8)}
    kept = {"steps": 5, "accepted": [[a] for a in bursty()]}
    pair = best_pair(kept, HYST_1, periods, [1, 2, 3, 4, 5])
    assert pair is not None and pair["candidate_steps"][1] == 5 and pair["candidate_steps"][0] < 5
    assert pair["tok_s"] > pair["single"][1] * (1 + NEAR)
    # the advisor's own best single chain (span replay) is held against the pair too, at the margin exactly
    assert best_pair(kept, HYST_1, periods, [1, 2, 3, 4, 5], (4, pair["tok_s"] / (1 + NEAR) + 0.01)) is None
    assert best_pair(kept, HYST_1, periods, [1, 2, 3, 4, 5], (4, pair["tok_s"] / (1 + NEAR) - 0.01))["single"][0] == 4
    assert best_pair(kept, HYST_1, periods, [1, 2, 3, 4, 5], (4, 1.0))["single"] == pair["single"]
    # the same draws in one steady stream (shuffled): no pair clears the margin
    steady = [a for blk in [bursty()] for a in random.Random(1).sample(blk, len(blk))]
    assert best_pair({"steps": 5, "accepted": [[a] for a in steady]}, HYST_1, periods, [1, 2, 3, 4, 5]) is None
    # only the allowed steps values: without 1 and 2 the pair takes the shortest allowed
    assert best_pair(kept, HYST_1, periods, [3, 4, 5]) is None or \
        set(best_pair(kept, HYST_1, periods, [3, 4, 5])["candidate_steps"]) <= {3, 4, 5}
    assert best_pair(kept, HYST_1, {k: v for k, v in periods.items() if k}, [0, 1, 5])["candidate_steps"] == [1, 5]


def test_every_replay_of_a_big_bucket_runs_on_the_same_evenly_spaced_runs():
    kept = {"steps": 5, "accepted": [[i] for i in range(3 * PRICE_MAX_CYCLES)]}
    picked = [a[0] for a in replay_cycles(kept)]
    run = PRICE_MAX_CYCLES // PRICE_CHUNKS
    n = 3 * PRICE_MAX_CYCLES
    assert len(picked) == PRICE_MAX_CYCLES and picked[:2] == [0, 1] and picked[run] == (n - run) // (PRICE_CHUNKS - 1)
    assert picked[-1] == n - 1  # the log's end is in it, not only its start
    small = {"steps": 5, "accepted": [[1]] * 10}
    assert replay_cycles(small) is small["accepted"]


def test_advise_writes_the_pair_and_sglang_loads_and_routes_it(tmp_path, capsys):
    cfg, out = advise(tmp_path, bursty_log(tmp_path / "s5.jsonl"), "--baseline-step-ms", 4.2)
    info = cfg["sglang_patches"]["buckets"][0]
    cands = cfg["1"]["candidate_steps"]
    assert len(cands) == 2 and cands[1] == 5 and info["set_from_replay"]["tok_s"] > 0  # not cut to [5]
    assert cfg["sglang_patches"]["format"] == 2
    _, entries, params = loaded(out)
    assert params._route(1).candidate_steps == cands and entries[1]["down_hysteresis"] == -0.25
    text = capsys.readouterr().out
    head = next(ln for ln in text.splitlines() if re.match(r"bucket 1 \(batch [^)]+\): ", ln))
    assert f"candidate_steps {cands}" in head and "started at steps 5: " in head
    assert f"    {cands} replayed on these cycles: SGLang's slot runs " in text and "as single chains: best " in text
    # the file's entry against SGLang's own bucket-1 entry on the same cycles (its s7 is past the logged steps)
    from sglang.srt.speculative.adaptive_spec_params import DEFAULT_ADAPTIVE_CONFIG

    line = next(ln for ln in text.splitlines() if ln.startswith("    replayed cycle by cycle (the best line prices median cycles): this file's "))
    d = info["default_slot_replay"]
    assert d["candidate_steps"] == DEFAULT_ADAPTIVE_CONFIG["1"]["candidate_steps"] and d["tok_s"] > 0
    assert f"{info['sglang_slot_replay']['tok_s'] / d['tok_s']:.2f}x SGLang's default" in line
    assert ("approximate: s7 past the logged s5" in line) == (d["share"].get("7", 0) > 0)
    # the default's replay is SGLang's real slot, with the bucket's hysteresis, started at its largest candidate
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveStepSlot

    accepted = bursty()
    slot = AdaptiveStepSlot(initial_steps=max(d["candidate_steps"]), cfg=dict(DEFAULT_ADAPTIVE_CONFIG["1"]))
    ran = {}
    for a in accepted:
        ran[slot.current_steps] = ran.get(slot.current_steps, 0) + 1
        slot.update([min(a, slot.current_steps)])
    assert d["share"] == {str(k): round(v / len(accepted), 3) for k, v in sorted(ran.items())}


def test_steady_logs_keep_their_choice_and_price_the_default(tmp_path, capsys):
    cfg, _ = advise(tmp_path, two_bucket_log(tmp_path / "s5.jsonl"))  # no baseline: 0 is not priced
    infos = cfg["sglang_patches"]["buckets"]
    assert not any("set_from_replay" in i for i in infos)
    assert cfg["1"]["candidate_steps"] == [5]
    # [5] alone at batch 1: every cycle costs the logged cycle plus the GPU gap ((2 + 6 + 1) x 1.01 + 0.3 ms,
    # tests/advisor_logs.py) and yields its accepted drafts + 1
    accepted = _runs(400, 0.8, 5, 1)
    assert infos[0]["sglang_slot_replay"]["tok_s"] == pytest.approx(
        sum(a + 1 for a in accepted) * 1000.0 / (len(accepted) * (9.0 * 1.01 + 0.3)), abs=0.06)
    text = capsys.readouterr().out
    assert "SGLang's default [0, 1, 3] here not priced: it has steps 0 and there is no baseline to price it" in text
    assert infos[1]["default_slot_replay"]["tok_s"] is None and infos[1]["sglang_slot_replay"]["tok_s"] > 0


def test_the_replay_prices_the_batch_sizes_the_best_line_does(tmp_path, capsys):
    # bucket 1 of --cuda-graph-bs-decode 1 2 4 8 holds batch 1 only; with SGLang's own graph sizes (1-8 ...) bucket 1
    # takes batch 1-7. 400 cycles at batch 1 and a ramp of 3 cycles at batch 7 (< 5: left out of the advisor's
    # price): a batch-7 cycle replayed at the batch-1 period would add seven requests' tokens for one cycle's time
    accepted = _runs(400, 0.8, 5, 1)
    recs = records_from_accepted(accepted, 1, 5, draft_ms=2.0, verify_ms=6.0, extend_ms=1.0, gap_ms=0.3)
    recs += records_from_accepted([4] * 21, 7, 5, draft_ms=2.0, verify_ms=6.0, extend_ms=1.0, gap_ms=0.3,
                                  start_cycle=len(recs))
    out = tmp_path / "a.json"
    assert advise_cli.main([str(write_records(tmp_path / "ramp.jsonl", recs)), "--adaptive-config", str(out)]) == 0
    info = json.loads(out.read_text())["sglang_patches"]["buckets"][0]
    assert info["batch_sizes"] == {"1": 400}
    assert info["sglang_slot_replay"]["cycles"] == 400  # the ramp's 3 cycles are not replayed
    assert info["sglang_slot_replay"]["tok_s"] == pytest.approx(
        sum(a + 1 for a in accepted) * 1000.0 / (400 * (9.0 * 1.01 + 0.3)), abs=0.06)
    assert "from s5_k1_n6 at batch 1 (400)" in capsys.readouterr().out
    kept = {"steps": 5, "topk": 1, "accepted": [[1], [2] * 7, [3]], "bs": [1, 7, 1]}
    assert at_batch_sizes(kept, {"1": 2})["accepted"] == [[1], [3]]  # string keys (JSON) name the same sizes
    no_bs = {"steps": 5, "topk": 1, "accepted": [[1], [2] * 7]}
    assert at_batch_sizes(no_bs, {1: 1}) is no_bs and at_batch_sizes(None, {1: 1}) is None


def test_steps_restrict_the_pair(tmp_path):
    log = bursty_log(tmp_path / "s5.jsonl")
    cfg, _ = advise(tmp_path, log, "--steps", "2,3,4,5")  # no baseline: no 0
    assert len(cfg["1"]["candidate_steps"]) == 2 and set(cfg["1"]["candidate_steps"]) <= {2, 3, 4, 5}
    cfg, _ = advise(tmp_path, log, "--steps", "3,4,5", "--baseline-step-ms", 4.2, "--force")
    assert set(cfg["1"]["candidate_steps"]) <= {0, 3, 4, 5}  # 0 (no speculation) is not a chain --steps limits


def test_a_batch_8_pair_takes_steps_0_only_at_its_price_and_agrees_with_plain_decode(tmp_path, capsys):
    log = bursty_log(tmp_path / "s5.jsonl", bs=8, dead=0.02)
    cfg, _ = advise(tmp_path, log)  # no baseline: never 0
    assert 0 not in cfg["8"]["candidate_steps"]
    capsys.readouterr()
    # a plain step of 2.7 ms: steps 0 priced as SGLang runs it (x STEPS0_OVER_PLAIN[8]) loses to s1 in the dead
    # spans (priced at the plain step itself, [0, 5] would win); the pair beats plain decode, and says so
    cfg, _ = advise(tmp_path, log, "--baseline-step-ms", 2.7, "--force")
    info = cfg["sglang_patches"]["buckets"][1]
    assert cfg["8"]["candidate_steps"] == [1, 5] and info["steps0_tok_s"] < info["plain_tok_s"]
    assert info["set_from_replay"]["tok_s"] > info["plain_tok_s"] > info["set_from_replay"]["best_single"][1]
    assert not info["plain_server_wins"]  # the best single chain loses to plain decode; the pair does not
    text = capsys.readouterr().out
    assert "plain decode beats every chain" not in text and "\n    the pair 1.05x plain decode (plain 2963 tok/s)\n" in text
    # plain advise on this log says no speculation (every fixed chain loses): the bucket says why it differs
    assert "\n    every chain up to the logged steps loses to plain decode here (the best 0.97x, as plain `advise` says): " in text
    d = info["default_slot_replay"]
    assert d["tok_s"] > 0  # [0, 1, 3] priced with a baseline
    # ... on SGLang's real slot with bucket 8's own hysteresis keys, over the log's batches of 8
    from sglang.srt.speculative.adaptive_spec_params import DEFAULT_ADAPTIVE_CONFIG, AdaptiveStepSlot

    draws = bursty(bs=8, dead=0.02)
    slot = AdaptiveStepSlot(initial_steps=max(d["candidate_steps"]), cfg=dict(DEFAULT_ADAPTIVE_CONFIG["8"]))
    ran = {}
    for i in range(0, len(draws), 8):
        ran[slot.current_steps] = ran.get(slot.current_steps, 0) + 1
        slot.update([min(a, slot.current_steps) for a in draws[i:i + 8]])
    assert d["share"] == {str(k): round(v * 8 / len(draws), 3) for k, v in sorted(ran.items())}
    # a plain step of 2.0 ms: steps 0 now pays in the dead spans, and a plain server still beats the pair
    cfg, _ = advise(tmp_path, log, "--baseline-step-ms", 2.0, "--force")
    assert cfg["8"]["candidate_steps"] == [0, 5] and cfg["sglang_patches"]["buckets"][1]["plain_server_wins"]
    text = capsys.readouterr().out
    head = advise_verdict(capsys, log, "--baseline-step-ms", 2.0)
    assert head[-1].startswith("don't speculate: ")  # plain advise's verdict leads; this file's answer follows it
    assert after_verdict(text.splitlines(), head)[0].startswith("plain decode beats every chain in every logged bucket")
    assert "not written as a candidate" not in text and "cannot decode plainly" not in text


def test_slow_and_mixed_logs_get_lines_not_tracebacks(tmp_path, capsys):
    slow = write_records(tmp_path / "slow.jsonl", records_from_accepted(
        _runs(400, 0.5, 5, 3), 1, 5, draft_ms=20000, verify_ms=30000, extend_ms=100, cycle_ms=50000, gap_ms=0.3))
    cfg, _ = advise(tmp_path, slow)  # tok/s rounds to 0.0: no ratio taken
    assert "not priced: no tokens in its time" in capsys.readouterr().out
    # an adaptive server's bucket (steps 5 and 3 interleaved): no pair, no comparison from a biased sample
    a = records_from_accepted(bursty(n_blocks=10), 1, 5, draft_ms=2.0, verify_ms=5.0, extend_ms=0.6, gap_ms=0.3)
    b = records_from_accepted(bursty(n_blocks=10, seed=4), 1, 3, draft_ms=1.0, verify_ms=5.0, extend_ms=0.6,
                              gap_ms=0.3, start_cycle=len(a))
    cfg, _ = advise(tmp_path, write_records(tmp_path / "mixed.jsonl", a + b), "--force")
    info = cfg["sglang_patches"]["buckets"][0]
    assert info["modelled_share"] < 1 and "set_from_replay" not in info and "default_slot_replay" not in info
    assert "not priced against SGLang's default: this bucket's cycles ran several steps values" in capsys.readouterr().out


def test_the_benchmark_summary_carries_advises_predicted_ratio(tmp_path):
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    import adaptive_report
    import adaptive_summary as asum

    cfg, _ = advise(tmp_path, bursty_log(tmp_path / "s5.jsonl"), "--baseline-step-ms", 4.2)
    old = json.loads(json.dumps(cfg))
    for b in old["sglang_patches"]["buckets"]:  # a format-1 file: no replay prices
        b.pop("default_slot_replay", None)
        b.get("sglang_slot_replay", {}).pop("tok_s", None)
    s = asum.summarize({}, configs={"ours_in": cfg, "ours_ood": old}, steps_checks={}, counts_checks={}, meta={})
    b1 = cfg["sglang_patches"]["buckets"][0]
    want = b1["sglang_slot_replay"]["tok_s"] / b1["default_slot_replay"]["tok_s"]
    assert s["predicted_ours_vs_default_in_bs1"] == pytest.approx(want, abs=1e-4) and want > 1
    assert s["predicted_ours_vs_default_in_bs8"] is None  # bucket 8 not in the log
    assert s["predicted_ours_vs_default_ood_bs1"] is None
    assert s["predicted_tok_s"]["ours_in_bs1"] == b1["sglang_slot_replay"]["tok_s"]
    row = next(ln for ln in adaptive_report.table(s).splitlines() if ln.startswith("ours_vs_def (pred.) "))
    assert row.split()[2:] == [f"{want:.3f}x", "-", "-", "-"]


def test_plain_advise_on_bursty_text_points_to_the_adaptive_pair(tmp_path, capsys):
    assert advise_cli.main([str(bursty_log(tmp_path / "s5.jsonl")), "--baseline-step-ms", "4.2"]) == 0
    out = capsys.readouterr().out
    assert "two chains SGLang switches between under --speculative-adaptive can beat any one: " in out
    assert advise_cli.main([str(two_bucket_log(tmp_path / "steady.jsonl")), "--config", "s5_k1_n6"]) == 0
    assert "--speculative-adaptive can beat" not in capsys.readouterr().out  # steady acceptance: no such hint


def test_the_docs_pair_example_is_what_advise_prints(tmp_path, capsys, monkeypatch):
    """docs/adaptive.md's bursty example: each shown line is a line the command prints on bursty_log's log
    (SGLang's default entry differs by version: that line is checked where the default is 0.5.17's)."""
    from sglang.srt.speculative.adaptive_spec_params import DEFAULT_ADAPTIVE_CONFIG

    doc = (REPO / "docs" / "adaptive.md").read_text()
    start = doc.index("    $ sglang-patches advise cycles.jsonl --baseline-step-ms 4.2 --adaptive-config")
    lines = [ln[4:] for ln in doc[start:doc.index("\n\n", start)].split("\n")]
    monkeypatch.chdir(tmp_path)
    bursty_log(tmp_path / "cycles.jsonl")
    assert advise_cli.main(lines[0].split()[3:]) == 0  # after "$ sglang-patches advise"
    out = capsys.readouterr().out.splitlines()
    shown = [ln for ln in lines[1:] if DEFAULT_ADAPTIVE_CONFIG["1"]["candidate_steps"] == [1, 3, 7]
             or "SGLang's default [" not in ln]
    from sglang_patches import compat

    if compat.current().ADAPTIVE_SWAPPED_EXTEND_GRAPHS:  # the docs show 0.5.17, whose other steps replay the start's graphs
        shown = [ln.replace(" and the draft-extend graphs of the start's steps that SGLang replays for another steps "
                            "value", "") for ln in shown]
    assert len(shown) >= 7 and all(ln in out for ln in shown), [ln for ln in shown if ln not in out]
