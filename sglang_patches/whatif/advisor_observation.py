"""One configuration's acceptance and phase costs, read from timing records (the advisor's input).

Inputs (all from the per-cycle records of `schema.py`, decode cycles of one configuration):
  * acceptance: `accepted` per request-cycle = drafts accepted, bonus token NOT counted (SGLang's
    `num_correct_drafts_per_req_cpu`). Accept length = accepted + 1, averaged over request-cycles:
    vLLM's `1 + accepted / drafts` and SGLang's "accept len" log line. (SGLang's per-request
    `spec_accept_length` = completion tokens / verify count is token-weighted per request and can
    differ slightly.)
  * costs by batch size: medians of draft / verify / extend / cycle GPU ms and of the GPU gap
    between cycles (`gpu_gap_ms`: the stream's idle time, which holds the host overhead).

Accept length for s steps (topk 1, SGLang forces draft tokens = s + 1):
  * s <= logged steps S: each logged request-cycle accepted a; the same chain with s steps drafts
    the same first s tokens from the same state and accepts min(a, s). So
    L(s) = 1 + mean(min(a, s)) = 1 + sum_{k<s} P(a > k), exact per logged request-cycle. (Over a
    whole generation a steps-s server starts its cycles at other positions; where easy and hard
    spans of text alternate, that can differ from the truncation, which the GPU check measures.)
  * s > S: extrapolated, the last conditional rate P(a >= S | a >= S-1) repeating
    (`whatif.cost_model.chain_accept_length`, the sweep's model); the row is marked extrapolated.
  * span replay (the estimate for s < S where the log follows each request: batch 1, or per-request
    tags `req` at any batch; real acceptance rising with depth (`depth_rise`); the
    truncation is reported beside it, and is the estimate everywhere else): where a
    token is hard to draft, every chain fails there and the next cycle starts right after it, so
    text is a sequence of draftable spans, each closed by a hard token. The log holds each
    request's cycles in order (at batch 1 by position, otherwise by its tag): a run of k full cycles (accepted S) and the cycle closing it
    (a < S). A steps-s chain covers a span of E draftable tokens (E + 1 tokens with its closing
    one) in E // (s + 1) + 1 cycles. Whether the bonus token after a full cycle was draftable is
    not logged: it is taken as draftable with probability q = the last conditional rate
    P(a >= S | a >= S-1), and the expected cycles are summed over those cases. At s = S this is
    the logged accept length exactly. It sees what the truncation cannot: a shorter chain starts
    more of its cycles inside long easy spans. It assumes acceptance is a property of the text (a
    real drafter); under SGLANG_SIMULATE_ACC_LEN every cycle's acceptance is drawn afresh, and
    there the truncation is the right estimate and the replay is not (records marked `simulated`,
    which the recorder does under either simulation, get no replay). Measured on the H200
    (`trained-8b`, a steps-5 log of 64 requests predicting steps 1-3, each then run:
    benchmarks/results/2026-12-01-advisor/trained_8b_64): replay errors 0.4-2.4 %, truncation
    3.1-5.4 %, always low. On text without runs the two agree (tests/test_advisor.py).

Every row is steady decode. The log's prefill records (target and drafter prefill of each new
request) are summed beside it: `prefill_share` of the logged GPU time, which `advise` reports, is
what an end-to-end measurement adds (29 % in a concurrency-8 run of 128-token requests on the
H200, where steady decode gave 1.45x and end to end 1.18x).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from sglang_patches.whatif.cost_model import chain_accept_length, cond_from_pos, nearest_batch

MIN_BLOCKS = 5        # fewer blocks: no interval (a bootstrap over 2-4 blocks says little)

DEPTH_DECAY_MARGIN = 0.03  # relative, a noise margin: how far the conditional rate after the first position must rise or fall
PREFILL_SLOW_FACTOR = 10.0  # a prefill this many times the median one is a first-use compile, not traffic
MIN_BS_CYCLES = 5     # decode cycles a batch size needs for its median to be a cost (fewer: the ramp between sizes)


def config_label(steps: int, topk: int, draft_tokens: int) -> str:
    return f"s{steps}_k{topk}_n{draft_tokens}"


def nearest_steps(table: dict, batch_sizes) -> tuple[dict, str]:
    """({batch size: the plain step ms}, a note naming each batch size interpolated or refused; "" when
    every one was measured): whatif/baseline_price.py's rule. A refused batch size is left out."""
    from sglang_patches.whatif.baseline_price import note, price

    out, used = price(table, batch_sizes)
    return out, note(used)


def plain_source(server: bool, n: int | None = None) -> str:
    """The words for a plain decode baseline taken from timing logs: steps without speculation (a plain
    server's step_timing, or a v1 log's), or a speculative server's own steps-0 cycles; n: how many."""
    count = f"{n} " if n is not None else ""
    return f"the logs' {count}plain decode steps (steps 0)" if server else f"the log's own {count}plain decode cycles (steps 0)"


@dataclass
class BsCost:
    """Median costs (GPU ms) of the logged configuration at one batch size."""
    bs: int
    cycles: int
    draft_ms: float
    verify_ms: float
    extend_ms: float
    cycle_ms: float
    gap_ms: float          # median GPU gap before a cycle; 0 when the log has none
    gap_known: bool = True

    @property
    def period_ms(self) -> float:
        return self.cycle_ms + self.gap_ms


@dataclass
class Observation:
    """One configuration's acceptance histogram and its costs by batch size."""
    steps: int
    topk: int
    draft_tokens: int
    hist: list[int]                 # hist[a] = request-cycles that accepted a drafts
    costs: list[BsCost] = field(default_factory=list)
    spans: list | None = None       # (full cycles k, closing accepted a or None) per run of a request (replay)
    simulated: bool = False         # records marked simulated (--simulate-acceptance)
    blocks: list | None = None      # per-block histograms, the bootstrap's unit (see accept_length_intervals)
    block_spans: list | None = None  # the spans of each block (same order), for the replay's range
    prefill_records: int = 0        # prefill records in the log (every configuration of it)
    prefill_ms: float = 0.0         # their GPU ms (target prefill + the drafter's, one record each)
    decode_ms: float = 0.0          # decode cycles' GPU ms plus the GPU gaps after them
    plain_steps: dict = field(default_factory=dict)  # bs -> (count, median GPU ms + gap) of steps-0 decode records
    plain_adaptive: bool = False    # some are a speculative server's steps-0 cycles (STEPS0_BIAS)
    plain_note: str = ""            # a speculative server's steps-0 cycles left out for a plain server's
    plain_from_server: bool = False  # some are steps without speculation (step_timing, or a v1 log's)
    picked_from: tuple = ()         # the log's other configurations' labels, when one was picked (--config)
    by_bs: dict = field(default_factory=dict)  # bs -> the Observation of the log filtered to it (several sizes only)
    thin_bs: list = field(default_factory=list)  # (bs, cycles) left out of costs: under MIN_BS_CYCLES cycles each
    prefill_slow: tuple = (0, 0.0)  # (count, GPU ms) of first-use prefills, left out of prefill_share
    finished_cycles: int = 0        # decode cycles after every request of the batch had finished (nothing accepted)

    def thin_note(self) -> str:
        """The batch sizes left out of the costs, in words ("" when none)."""
        if not self.thin_bs:
            return ""
        from sglang_patches.whatif.baseline_price import ranges

        kept = sum(c.cycles for c in self.costs)
        return (f"batch {ranges([bs for bs, _ in self.thin_bs])}: {sum(n for _, n in self.thin_bs)} decode cycles "
                f"in all, under {MIN_BS_CYCLES} at each (the batch ramping between sizes), left out of the costs; "
                f"priced from the {kept} cycles at batch {ranges([c.bs for c in self.costs])}")

    def plain_baseline(self) -> dict | None:
        """Plain decode step ms for every logged batch size from the log's own steps-0 decode records
        (a steps-0 candidate under --speculative-adaptive, or step_timing), interpolated or refused where
        one is missing (whatif/baseline_price.py); None when none is priced."""
        return (self._plain_nearest()[0] or None) if self.plain_steps else None

    def plain_label(self) -> str:
        """Where plain_baseline() comes from, as advise and report name it."""
        n = sum(k for k, _ in self.plain_steps.values())
        return (plain_source(False, n) if not self.plain_from_server else
                plain_source(True, n) + (", an adaptive server's steps-0 cycles at the other batch sizes"
                                         if self.plain_adaptive else ""))

    def plain_borrowed(self) -> str:
        """The note naming each logged batch size whose plain baseline is another batch size's; ""
        when none is (or the log has no steps-0 decode records)."""
        return self._plain_nearest()[1] if self.plain_steps else ""

    def plain_used(self) -> list[dict]:
        """baseline_price.price()'s account of the plain step used at each logged batch size."""
        from sglang_patches.whatif.baseline_price import price

        return price({bs: ms for bs, (_, ms) in self.plain_steps.items()}, [c.bs for c in self.costs])[1]

    def _plain_nearest(self) -> tuple[dict, str]:
        return nearest_steps({bs: ms for bs, (_, ms) in self.plain_steps.items()}, [c.bs for c in self.costs])

    @property
    def prefill_share(self) -> float | None:
        """Prefill's share of the logged GPU time, the slow first-use prefills left out: what steady-decode
        ratios leave out."""
        ms = self.prefill_ms - self.prefill_slow[1]
        total = ms + self.decode_ms
        return ms / total if self.prefill_records > self.prefill_slow[0] and total > 0 else None

    @property
    def request_cycles(self) -> int:
        return sum(self.hist)

    @property
    def cycles(self) -> int:
        return sum(c.cycles for c in self.costs)

    @property
    def label(self) -> str:
        return config_label(self.steps, self.topk, self.draft_tokens)

    def pos_rates(self) -> list[float]:
        """P(accepted > k) for k < steps (vLLM's per-position convention)."""
        n = self.request_cycles
        out, above = [], n
        for k in range(self.steps):
            above -= self.hist[k] if k < len(self.hist) else 0
            out.append(above / n if n else 0.0)
        return out

    def accept_length(self, steps: int) -> float:
        """Exact truncation for steps <= logged steps; the sweep model's extrapolation beyond."""
        return chain_accept_length(cond_from_pos(self.pos_rates()), steps)

    def replays(self, steps: int) -> bool:
        """Whether the estimate for `steps` is the span replay (followed requests of real
        acceptance, fewer steps than logged, acceptance rising with depth: depth_rise) rather than the
        truncation."""
        return bool(self.spans) and 1 <= steps < self.steps and self.depth_rise()

    def _depth_ratio(self) -> float | None:
        """The pooled conditional rate of the positions after the first over the first's (None: no data)."""
        pos = self.pos_rates()
        if len(pos) < 2 or sum(pos[:-1]) == 0 or pos[0] == 0:
            return None
        return sum(pos[1:]) / sum(pos[:-1]) / pos[0]

    def depth_rise(self) -> bool:
        """Whether acceptance rises with depth by more than sampling noise: runs of easy text, where the
        span replay is the closer estimate (on the H200 logs this ratio was 1.08-1.44). At a flat rate
        the two estimates agree within noise and the truncation (exact per cycle) is taken, so that the
        choice does not flip on noise; DEPTH_DECAY_MARGIN is a noise margin, not a measured crossover."""
        r = self._depth_ratio()
        return r is not None and r > 1 + DEPTH_DECAY_MARGIN

    def depth_decay(self) -> bool:
        """Whether acceptance falls with the draft's depth: the pooled conditional rate of the
        positions after the first is below the first's. Runs of easy and hard text make later
        positions likelier (a chain that got that far is in easy text): the replay's case. A
        drafter that is simply worse deeper in the chain makes them less likely: the replay, which
        takes a rejected token as hard at any depth, would then read low (a test with rates
        0.8/0.6/0.45 shows -7 %), while the truncation keeps each depth's rate."""
        r = self._depth_ratio()  # below by more than sampling noise: a constant rate reads a percent or two either way
        return r is not None and r < 1 - DEPTH_DECAY_MARGIN

    def accept_length_estimate(self, steps: int) -> float:
        """The advisor's accept length for `steps`: the span replay where it applies (`replays`),
        else the truncation (exact per cycle; extrapolated above the logged steps)."""
        if self.replays(steps):
            return self.accept_length_replay(steps)
        return self.accept_length(steps)

    def basis(self, steps: int) -> str:
        if steps == self.steps:
            return "logged"
        if steps > self.steps:
            return "extrapolated"
        return "replayed" if self.replays(steps) else "truncated"

    def accept_length_intervals(self, steps_list, level: float = 0.95, draws: int = 500,
                                seed: int = 0) -> dict[int, tuple[float, float]] | None:
        """How far each estimated accept length could move with another sample of the same traffic:
        a bootstrap over the log's followed requests (one block each), so the runs of easy and
        hard text inside a request stay together. One resampled histogram per draw serves every
        steps value. None with fewer than MIN_BLOCKS requests, or when the log does not follow its
        requests (untagged records at batch > 1): there a record holds several requests' cycles and
        nothing says which is which, and stretches of consecutive records share the same requests,
        so resampling them would understate how much requests differ. The width is the log's own
        sampling noise, not the estimate's bias."""
        blocks = self.blocks or []
        if len(blocks) < MIN_BLOCKS:
            return None
        rng = random.Random(seed)
        width = len(self.hist)
        vals: dict[int, list[float]] = {s: [] for s in steps_list}
        # replayed rows: each block's (tokens, expected cycles), additive over blocks; q (the
        # draftable share after a full cycle) stays the whole log's, a small simplification
        replayed = [s for s in steps_list if self.replays(s)] if self.block_spans else []
        parts = {s: [self._replay_parts(sp, s) for sp in self.block_spans] for s in replayed}
        for _ in range(draws):
            h = [0] * width
            picks = [rng.randrange(len(blocks)) for _ in range(len(blocks))]
            for i in picks:
                for a, n in enumerate(blocks[i]):
                    h[a] += n
            sample = Observation(self.steps, self.topk, self.draft_tokens, h)
            for s in steps_list:
                if s in parts:
                    tok = sum(parts[s][i][0] for i in picks)
                    cyc = sum(parts[s][i][1] for i in picks)
                    vals[s].append(tok / cyc if cyc else self.accept_length_estimate(s))
                else:
                    vals[s].append(sample.accept_length(s))
        out = {}
        for s, v in vals.items():
            v.sort()
            out[s] = (v[round((1 - level) / 2 * (draws - 1))], v[round((1 + level) / 2 * (draws - 1))])
        return out

    def accept_length_replay(self, steps: int) -> float | None:
        """The span replay (see the module docstring): tokens / expected cycles of a steps-s chain
        over the rebuilt runs; None without followed requests."""
        if not self.spans:
            return None
        tokens, cycles = self._replay_parts(self.spans, steps)
        return tokens / cycles

    def _replay_parts(self, spans, steps: int) -> tuple[float, float]:
        """(tokens, expected cycles of a steps-s chain) over `spans`."""
        S1 = self.steps + 1
        rates = cond_from_pos(self.pos_rates())
        q = min(max(rates[-1], 0.0), 1.0) if rates else 0.0
        tokens = sum(k * S1 + (a + 1 if a is not None else 0) for k, a in spans)
        cycles = sum(_expected_cycles(k, a, S1, steps + 1, q) for k, a in spans)
        return tokens, cycles


def _expected_cycles(k: int, a: int | None, S1: int, s1: int, q: float) -> float:
    """Expected cycles of a chain covering s1 - 1 drafts over one logged run: k full cycles of the
    logged chain (S1 tokens each, S1 - 1 accepted + a bonus) and the cycle closing it (a accepted,
    then a hard token), or the request's end (a None). The bonus token after each full cycle was
    draftable with probability q (then the span goes on) or hard (it ends a span there)."""
    h = 1.0 - q

    def piece(tokens: int) -> int:  # a span of tokens - 1 draftable tokens and its closing token
        return (tokens - 1) // s1 + 1 if tokens > 0 else 0

    # A span starts after full cycle t (t = 0: at the run's start; later with probability h); with
    # j = k - t full cycles left it ends at the m-th bonus token (probability q^(m-1) h, m <= j,
    # `inner`) or runs to the closing cycle (q^j). inner grows with j by one term, so one pass over
    # j = 0..k is O(k) (a repetitive loop of thousands of full cycles stays cheap).
    total, inner, qj = 0.0, 0.0, 1.0
    tail = a + 1 if a is not None else 0
    for j in range(k + 1):
        if j:
            inner += qj * h * piece(j * S1)  # the term m = j: q^(j-1) h piece(j S1)
            qj *= q
        p_start = 1.0 if j == k else h
        if p_start:
            total += p_start * (inner + qj * piece(j * S1 + tail))
    return total
