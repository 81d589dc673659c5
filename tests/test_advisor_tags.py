"""Per-request tags in timing records (`req`) and what the advisor does with them: each request's
cycles followed at any batch size, so the span replay and the per-request range work on logs
of real serving (bs > 1), not only at batch 1; and the replay's guard against acceptance that
falls with the draft's depth."""
from __future__ import annotations

import math
import random

import pytest

import advisor_logs as al
from sglang_patches.whatif import advisor_observation as ao
from sglang_patches.whatif import advisor_records as ar
from sglang_patches.vocab.schema import RecordError, make_record, validate_record

STEPS = 5


def rec(kind, accepted, req=None, steps=STEPS, cycle=0):
    return make_record(cycle=cycle, t=1.7e9, rank=0, kind=kind, bs=max(len(accepted), 1), steps=steps, topk=1,
                       draft_tokens=steps + 1, accepted=accepted, draft_ms=0.5 if kind == "decode" else None,
                       verify_ms=5.0 if kind == "decode" else None, extend_ms=0.4, cycle_ms=6.0, host_gap_ms=0.1,
                       gpu_gap_ms=0.2, req=req)


def observe(recs):
    b = ar.ObservationBuilder()
    for r in recs:
        b.add(validate_record(r))
    return b.observation("test")


def token_model_requests(n, seed=0):
    """Per request the accepted counts of a steps-5 chain over text with easy / hard runs, and the
    true accept length of every shorter chain over the same texts."""
    texts, run = al.token_model_runs(STEPS, requests=n, tokens=400, seed=seed)
    cycles = [run(t, STEPS) for t in texts]
    truth = {k: sum(a + 1 for t in texts for a in run(t, k)) / sum(len(run(t, k)) for t in texts)
             for k in range(1, STEPS)}
    return cycles, truth


def batch1_records(cycles):
    out = []
    for c in cycles:
        out.append(rec("prefill", []))
        out += [rec("decode", [a]) for a in c]
    return out


def interleaved_records(cycles, bs, seed=0):
    """What a server at batch `bs` logs: up to `bs` requests in flight, one decode record per cycle
    with every live request's count and tag; a finished request's slot is refilled (a prefill
    record first); the batch order is not the arrival order."""
    rng = random.Random(seed)
    waiting = list(enumerate(cycles))
    live, out = [], []
    while waiting or live:
        while waiting and len(live) < bs:
            tag, c = waiting.pop(0)
            live.append([tag * 7919 + 13, list(c)])
            out.append(rec("prefill", []))
        rng.shuffle(live)
        out.append(rec("decode", [c[0] for _, c in live], req=[t for t, _ in live]))
        for item in live:
            item[1].pop(0)
        live = [item for item in live if item[1]]
    return out


def block_hist(spans, width):
    h = [0] * width
    for k, a in spans:
        h[width - 1] += k
        if a is not None:
            h[a] += 1
    return h


def test_tagged_records_at_batch_8_give_what_batch_1_gives():
    cycles, truth = token_model_requests(40)
    one = observe(batch1_records(cycles))
    eight = observe(interleaved_records(cycles, 8))
    assert eight.hist == one.hist and eight.spans is not None and eight.blocks
    assert sorted(map(tuple, eight.blocks)) == sorted(map(tuple, one.blocks))
    for s in range(1, STEPS):
        assert eight.basis(s) == "replayed"
        assert eight.accept_length_estimate(s) == pytest.approx(one.accept_length_estimate(s), rel=1e-12)
        assert abs(eight.accept_length_estimate(s) / truth[s] - 1) < 0.02     # the replay's case
    assert eight.accept_length_intervals([2]) is not None


def test_untagged_records_at_batch_8_keep_the_truncation():
    cycles, _ = token_model_requests(40)
    recs = interleaved_records(cycles, 8)
    for r in recs:
        r.pop("req", None)
    obs = observe(recs)
    assert obs.spans is None and obs.basis(2) == "truncated" and obs.accept_length_intervals([2]) is None


def test_a_request_gone_from_the_batch_ends_its_sequence():
    """A tag absent from the next decode record closes the sequence; the same tag later (a retracted
    request back in the batch) starts a new one."""
    recs = [rec("decode", [5, 1], req=[1, 2]), rec("decode", [5, 5], req=[1, 2]), rec("decode", [2], req=[1]),
            rec("decode", [0, 5], req=[1, 2])]
    obs = observe(recs)
    # request 1: full, full, 2 -> (2, 2); then 0 -> (0, 0)
    # request 2: 1 -> (0, 1); full; gone -> (1, None); back: full, the log's end -> (1, None)
    assert sorted(obs.spans, key=str) == sorted([(2, 2), (0, 0), (0, 1), (1, None), (1, None)], key=str)
    assert len(obs.blocks) == 3 and sorted(map(sum, obs.blocks)) == [1, 2, 4]


def test_merged_blocks_keep_their_spans():
    """Past MAX_BLOCKS requests neighbours merge: each merged block's histogram still equals its
    spans' (the replay's range and the truncation's resample the same requests)."""
    cycles, _ = token_model_requests(ar.MAX_BLOCKS * 2 + 3, seed=5)
    obs = observe(interleaved_records(cycles, 4))
    assert len(obs.blocks) <= ar.MAX_BLOCKS and len(obs.blocks) == len(obs.block_spans)
    for block, spans in zip(obs.blocks, obs.block_spans):
        assert block == block_hist(spans, STEPS + 1)
    assert sum(map(sum, obs.blocks)) == obs.request_cycles


def test_acceptance_falling_with_depth_keeps_the_truncation():
    """A drafter worse deeper in the chain (conditional rates 0.8, 0.6, 0.45, ...), no easy / hard
    text: each cycle is independent, so truncation is right and the replay would read low."""
    rates = [0.8, 0.6, 0.45, 0.35, 0.3]
    rng = random.Random(7)
    cycles = []
    for _ in range(64):
        c = []
        for _ in range(100):
            a = 0
            while a < STEPS and rng.random() < rates[a]:
                a += 1
            c.append(a)
        cycles.append(c)
    obs = observe(batch1_records(cycles))
    assert obs.depth_decay()
    for s in (1, 2, 3):
        truth = 1 + sum(math.prod(rates[:k]) for k in range(1, s + 1))  # the generating chain's, analytically
        assert obs.basis(s) == "truncated" and obs.accept_length_estimate(s) == obs.accept_length(s)
        assert abs(obs.accept_length_estimate(s) / truth - 1) < 0.015
        if s < 3:
            assert obs.accept_length_replay(s) < truth * 0.96   # what the guard avoids
    cycles, _ = token_model_requests(20)                        # runs of easy text: the replay stays
    assert not observe(batch1_records(cycles)).depth_decay()


def test_a_constant_rate_is_not_read_as_falling_with_depth():
    """Every position accepted at 0.8: the pooled conditional rate after the first reads a percent or two
    either side of the first's from sampling alone, which is no decay (and no note saying so)."""
    fired = 0
    for seed in range(10):
        rng = random.Random(seed)
        cycles = []
        for _ in range(24):
            c = []
            for _ in range(100):
                a = 0
                while a < STEPS and rng.random() < 0.8:
                    a += 1
                c.append(a)
            cycles.append(c)
        fired += observe(batch1_records(cycles)).depth_decay()
    assert fired == 0


@pytest.mark.parametrize("req, why", [([1], "req lists 1 tags but accepted 2"), ([1, -1], "req must be"),
                                      ([1, 2 ** 32], "req must be"), ([True, 2], "req must be"),
                                      ([1, "a"], "req must be")])
def test_bad_tags_are_refused_on_read(req, why):
    r = rec("decode", [1, 2], req=[0, 0])
    r["req"] = req
    with pytest.raises(RecordError, match=why):
        validate_record(r)


def test_records_without_tags_stay_valid_and_tags_are_written_only_beside_counts():
    assert "req" not in rec("decode", [1, 2])
    assert validate_record(rec("decode", [1, 2]))["accepted"] == [1, 2]
    assert rec("decode", [1, 2], req=[5, 6])["req"] == [5, 6]


def test_a_tag_twice_in_one_batch_is_not_followed():
    """Two requests with one tag (a collision, or a reused rid): their cycles cannot be told apart,
    so neither is followed while the tag is doubled; the other requests are."""
    recs = [rec("decode", [5, 0, 3], req=[7, 7, 9]), rec("decode", [5, 0, 5], req=[7, 7, 9]),
            rec("decode", [1, 2], req=[7, 9])]
    b = ar.ObservationBuilder()
    for r in recs:
        b.add(validate_record(r))
    obs = b.observation("test")
    d = b.by_config[(STEPS, 1, STEPS + 1)]
    # 9: 3 -> (0, 3); full; 2 -> (1, 2).  7 (unique again in the last record): 1 -> (0, 1)
    assert sorted(d["spans"], key=str) == sorted([(0, 3), (1, 2), (0, 1)], key=str)
    assert obs.hist == [2, 1, 1, 1, 0, 3]          # every count still in the histogram
    assert obs.spans is None                       # 4 of 8 request-cycles unfollowed: no replay


def test_an_untagged_cycle_between_tagged_ones_breaks_the_sequences():
    """Mixed records (an old and a new log appended): a tagged request's run does not join across
    an untagged record, and an untagged batch-1 sequence ends when tagged records resume."""
    recs = [rec("decode", [5], req=[1]), rec("decode", [5], req=[1]), rec("decode", [2]),
            rec("decode", [5], req=[1]), rec("decode", [1], req=[1])]
    obs = observe(recs)
    # tagged 1: full, full -> closed by the untagged record (2, None); untagged: 2 -> (0, 2);
    # tagged 1 again: full, 1 -> (1, 1)
    assert sorted(obs.spans, key=str) == sorted([(2, None), (0, 2), (1, 1)], key=str)
    assert len(obs.blocks) == 3


def test_a_constant_rate_keeps_the_exact_truncation():
    """Each position independent at 0.8 (no runs of easy text): the two estimates agree within noise, and
    the truncation (exact per cycle) is the one taken, whichever way the noise leans."""
    rng = random.Random(11)
    cycles = [[min(next(k for k in range(STEPS + 1) if k == STEPS or rng.random() >= 0.8), STEPS) for _ in range(100)]
              for _ in range(24)]
    obs = observe(batch1_records(cycles))
    truth = 1 + sum(0.8 ** k for k in range(1, 3))  # steps 2
    assert obs.basis(2) == "truncated" and abs(obs.accept_length_estimate(2) / truth - 1) < 0.02
