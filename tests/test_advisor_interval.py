"""The advisor's 95 % range for its accept-length predictions (Observation.accept_length_intervals):
a bootstrap over blocks of the log, a batch-1 request per block. The traffic here is what the
trained-8b GPU check showed (benchmarks/results/2026-12-01-advisor): requests differ a lot (some
easy, some hard), so ten requests say little, and the range must say so."""
from __future__ import annotations

import random

import pytest

from sglang_patches.whatif import advisor_observation as ao
from sglang_patches.whatif import advisor_records as ar
from sglang_patches.vocab.schema import make_record

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
    b = ar.ObservationBuilder()
    for r in recs:
        b.add(r)
    return b.observation("test")


def expected(rate, steps):
    return 1 + sum(rate ** k for k in range(1, steps + 1))


def truth(steps, rates=(0.9, 0.3)):
    """What a steps-`steps` server measures on this traffic (equal mix of the two request kinds):
    the same requests produce the same tokens (a request kind's logged cycles x its steps-5 accept
    length), and a request then takes tokens / its steps-s accept length cycles; accept length =
    all tokens / all cycles. Easy requests take fewer cycles at steps 5 than at steps 1, so this is
    not the plain mean over the logged cycles, which the truncation computes (`truth_per_cycle`)."""
    return (sum(expected(r, STEPS) for r in rates)
            / sum(expected(r, STEPS) / expected(r, steps) for r in rates))


def truth_per_cycle(steps, rates=(0.9, 0.3)):
    """The mean accept length over equally many cycles of each request kind: what truncating the
    logged cycles estimates (and the truth for a per-cycle bootstrap of it)."""
    return sum(expected(r, steps) for r in rates) / len(rates)


def test_blocks_are_batch_one_requests_and_larger_batches_get_no_range():
    """At batch > 1 a record holds several requests' cycles, and consecutive records share the same
    requests: stretches of them are not independent samples (a bootstrap over 32-record stretches
    covered the truth in 38 of 100 logs at bs 4 in a check), so there is no range at all."""
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
    differ: its ranges are far narrower and miss most of the time (its own target, the per-cycle
    mean of the truncation, included)."""
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
        hit_cycles += flo <= truth_per_cycle(2) <= fhi
        assert fhi - flo < (hi - lo) / 2
    assert 32 <= hit <= 39, hit       # about its level: neither missing nor covering everything
    assert hit_cycles <= 24, hit_cycles
    # not wider than the spread of the estimate itself over the 40 logs (a range of everything
    # would cover always; 95 % of a normal spread is about 4 standard deviations wide)
    ests = [observe(request_log(random.Random(100 + i), 10)).accept_length_estimate(2) for i in range(40)]
    mean = sum(ests) / len(ests)
    sd = (sum((e - mean) ** 2 for e in ests) / (len(ests) - 1)) ** 0.5
    assert sorted(widths)[len(widths) // 2] < 5 * sd


def test_many_requests_give_a_tight_range_around_the_estimate():
    obs = observe(request_log(random.Random(4), 400))
    iv = obs.accept_length_intervals([1, 3, 5], draws=200)
    for s, (lo, hi) in iv.items():
        est = obs.accept_length_estimate(s)
        assert lo <= est <= hi and (hi - lo) / est < 0.12


def test_advise_shows_the_range_and_warns_on_a_short_log(tmp_path, capsys):
    import advisor_logs as al
    from sglang_patches.offline import advise_cli

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
    assert "acc 95 %" not in header and "no 'acc 95 %' range and no span replay: they need a log that follows" in out


@pytest.mark.parametrize("run, max_err", [("trained_8b", 0.06), ("trained_8b_64", 0.025)])
def test_the_recorded_trained_8b_measurements_lie_inside_the_predicted_ranges(run, max_err):
    """The GPU checks' own data (accepted counts per request, benchmarks/results/2026-12-01-advisor/
    <run>/accepted_chains.json; 10 and 65 requests): a steps-5 log predicts steps 1-3, each then run
    on its own server. What steps 1-3 measured lies inside the ranges; the advisor's estimate (the
    span replay) misses by at most `max_err` (the recorded outcome), and by less than the plain
    truncation, which reads low by more than 5 % at steps 2 in both runs. This pins the recorded
    outcome; it is no proof that the ranges cover (the measured runs used the same prompts): the
    coverage test above is that."""
    import json

    import advisor_logs as al

    data = json.loads((al.RESULTS / "2026-12-01-advisor" / run / "accepted_chains.json").read_text())
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
    err, err_trunc = {}, {}
    for s in (1, 2, 3):
        measured = [a for r in data["chains"][f"s{s}"] for a in r]
        m = 1 + sum(measured) / len(measured)
        lo, hi = iv[s]
        assert lo <= m <= hi, (s, lo, m, hi)
        assert obs.basis(s) == "replayed"
        err[s] = abs(obs.accept_length_estimate(s) / m - 1)
        err_trunc[s] = abs(obs.accept_length(s) / m - 1)
    assert max(err.values()) <= max_err, err
    assert max(err.values()) < max(err_trunc.values()) and err_trunc[2] > 0.05, (err, err_trunc)
