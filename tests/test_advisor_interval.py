"""The advisor's 95 % range for its accept-length predictions (Observation.accept_length_intervals):
a bootstrap over blocks of the log, a batch-1 request per block. The traffic here is what the
trained-8b GPU check showed (benchmarks/results/2026-12-01-advisor): requests differ a lot (some
easy, some hard), so ten requests say little, and the range must say so."""
from __future__ import annotations

import random

import pytest

from sglang_patches.timing import advisor_observation as ao
from sglang_patches.timing.schema import make_record

STEPS = 5


def chain(rng, rate):
    a = 0
    while a < STEPS and rng.random() < rate:
        a += 1
    return a


def request_log(rng, n_requests, cycles=60, rates=(0.9, 0.3), bs=1):
    """Records of n_requests requests, each easy or hard at random (conditional rate per draft),
    one prefill record before each at batch 1; at bs > 1 the requests' cycles are interleaved."""
    reqs = [[chain(rng, r) for _ in range(cycles)] for r in (rng.choice(rates) for _ in range(n_requests))]
    recs = []

    def rec(kind, accepted):
        return make_record(cycle=len(recs), t=1.7e9 + len(recs), rank=0, kind=kind, bs=max(len(accepted), 1),
                           steps=STEPS, topk=1, draft_tokens=STEPS + 1, accepted=accepted, draft_ms=0.5,
                           verify_ms=5.0, extend_ms=0.4, cycle_ms=6.0, host_gap_ms=0.1, gpu_gap_ms=0.2)
    if bs == 1:
        for r in reqs:
            recs.append(rec("prefill", []))
            recs += [rec("decode", [a]) for a in r]
    else:
        for i in range(0, n_requests, bs):
            group = reqs[i:i + bs]
            recs.append(rec("prefill", []))
            recs += [rec("decode", [g[c] for g in group]) for c in range(cycles)]
    return recs


def observe(recs):
    b = ao.ObservationBuilder()
    for r in recs:
        b.add(r)
    return b.observation("test")


def truth(steps, rates=(0.9, 0.3)):
    """The traffic's accept length at `steps` (equal mix of the two request kinds, equal cycles each):
    the mean of the two chains' expectations."""
    def expected(rate):
        return 1 + sum(rate ** k for k in range(1, steps + 1))
    return sum(expected(r) for r in rates) / len(rates)


def test_blocks_are_batch_one_requests_and_larger_batches_get_no_range():
    """At batch > 1 a record holds several requests' cycles, and consecutive records share the same
    requests: stretches of them are not independent samples (a bootstrap over 32-record stretches
    covered the truth in 38 of 100 logs at bs 4 in review), so there is no range at all."""
    rng = random.Random(1)
    obs = observe(request_log(rng, 7))
    assert len(obs.blocks) == 7 and sum(map(sum, obs.blocks)) == obs.request_cycles == 7 * 60
    obs = observe(request_log(rng, 16, cycles=80, bs=4))
    assert obs.blocks == [] and obs.accept_length_intervals([1, 2]) is None
    # mostly batch 1 with a few bs-2 records: the batch-1 requests still give the range
    recs = request_log(rng, 12) + request_log(rng, 2, cycles=5, bs=2)
    obs = observe(recs)
    assert len(obs.blocks) == 12 and obs.accept_length_intervals([2]) is not None


def test_too_few_blocks_give_no_range():
    obs = observe(request_log(random.Random(2), ao.MIN_BLOCKS - 1))
    assert obs.accept_length_intervals([1, 2]) is None


def test_range_covers_the_traffic_and_needs_the_request_blocks():
    """Over 40 logs of 10 requests each, the 95 % range holds the traffic's accept length at steps 2
    in most of them (a bootstrap over 10 blocks covers a little under its nominal level). Treating
    every cycle as its own block (what a per-cycle bootstrap would do) ignores how much requests
    differ: its ranges are far narrower and miss most of the time."""
    rng = random.Random(3)
    hit = hit_cycles = 0
    widths = []
    for i in range(40):
        obs = observe(request_log(rng, 10))
        lo, hi = obs.accept_length_intervals([2], draws=300, seed=i)[2]
        hit += lo <= truth(2) <= hi
        widths.append(hi - lo)
        flat = ao.Observation(obs.steps, obs.topk, obs.draft_tokens, obs.hist,
                              blocks=[[int(a == k) for k in range(len(obs.hist))]
                                      for a, n in enumerate(obs.hist) for _ in range(n)])
        flo, fhi = flat.accept_length_intervals([2], draws=300, seed=i)[2]
        hit_cycles += flo <= truth(2) <= fhi
        assert fhi - flo < (hi - lo) / 2
    assert 32 <= hit <= 39, hit       # about its level: neither missing nor covering everything
    assert hit_cycles <= 24, hit_cycles
    # not wider than the spread of the estimate itself over the 40 logs (a range of everything
    # would cover always; 95 % of a normal spread is about 4 standard deviations wide)
    ests = [observe(request_log(random.Random(100 + i), 10)).accept_length(2) for i in range(40)]
    mean = sum(ests) / len(ests)
    sd = (sum((e - mean) ** 2 for e in ests) / (len(ests) - 1)) ** 0.5
    assert sorted(widths)[len(widths) // 2] < 5 * sd


def test_many_requests_give_a_tight_range_around_the_estimate():
    obs = observe(request_log(random.Random(4), 400))
    iv = obs.accept_length_intervals([1, 3, 5], draws=200)
    for s, (lo, hi) in iv.items():
        assert lo <= obs.accept_length(s) <= hi and (hi - lo) / obs.accept_length(s) < 0.12


def test_advise_shows_the_range_and_warns_on_a_short_log(tmp_path, capsys):
    import advisor_logs as al
    from sglang_patches.timing import advise_cli

    path = al.write_records(tmp_path / "short.jsonl", request_log(random.Random(5), 8))
    assert advise_cli.main([str(path), "--steps", "1,2,3,5"]) == 0
    out = capsys.readouterr().out
    assert "acc 95 %" in out and "the log is short for these predictions" in out
    path = al.write_records(tmp_path / "long.jsonl", request_log(random.Random(6), 400, rates=(0.7,)))
    assert advise_cli.main([str(path), "--steps", "1,2,3,5"]) == 0
    out = capsys.readouterr().out
    assert "acc 95 %" in out and "the log is short" not in out
    path = al.write_records(tmp_path / "bs4.jsonl", request_log(random.Random(7), 40, bs=4))
    assert advise_cli.main([str(path), "--steps", "1,2,3,5"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.strip().startswith("config"))
    assert "acc 95 %" not in header and "no 'acc 95 %' range: it needs a batch-1 log" in out


def test_the_recorded_trained_8b_measurements_lie_inside_the_predicted_ranges():
    """The GPU check's own data (accepted counts per request, benchmarks/results/2026-12-01-advisor/
    trained_8b/accepted_chains.json): the steps-5 log's ranges for steps 1-3 are wide (10 requests)
    and what steps 1-3 measured lies inside, while the truncated point estimate for steps 2 missed
    by more than 5 %. This pins the recorded outcome; it is no proof that the ranges cover (the
    measured runs used the same prompts, so their misses are the truncation's bias): the coverage
    test above is that."""
    import json

    import advisor_logs as al

    data = json.loads((al.RESULTS / "2026-12-01-advisor" / "trained_8b" / "accepted_chains.json").read_text())
    logged = [[min(a, STEPS) for a in r] for r in data["chains"]["s5"]]
    recs = []
    for r in logged:
        recs.append(make_record(cycle=len(recs), t=1.7e9, rank=0, kind="prefill", bs=1, steps=STEPS, topk=1,
                                draft_tokens=STEPS + 1, accepted=[], draft_ms=None, verify_ms=None, extend_ms=1.0,
                                cycle_ms=2.0, host_gap_ms=None, gpu_gap_ms=None))
        recs += [make_record(cycle=len(recs), t=1.7e9, rank=0, kind="decode", bs=1, steps=STEPS, topk=1,
                             draft_tokens=STEPS + 1, accepted=[a], draft_ms=0.5, verify_ms=5.0, extend_ms=0.4,
                             cycle_ms=6.0, host_gap_ms=0.1, gpu_gap_ms=0.2) for a in r]
    obs = observe(recs)
    iv = obs.accept_length_intervals([1, 2, 3])
    for s in (1, 2, 3):
        measured = [a for r in data["chains"][f"s{s}"] for a in r]
        m = 1 + sum(measured) / len(measured)
        lo, hi = iv[s]
        assert lo <= m <= hi, (s, lo, m, hi)
    assert abs(obs.accept_length(2) / (1 + sum(a for r in data["chains"]["s2"] for a in r)
                                       / sum(len(r) for r in data["chains"]["s2"])) - 1) > 0.05
