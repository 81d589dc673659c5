"""What-if model of EAGLE topk-1 chains from one timing log: which steps / draft tokens to run.

The input (acceptance histogram, each request's cycles in order, phase costs by batch size) is built
from the records in `advisor_records.py`; the accept-length estimates are in `advisor_observation.py`.

Cycle cost for s steps at batch size b, from the logged configuration's medians:
  * draft phase: SGLang's draft phase runs s - 1 drafter forwards (the first draft token comes
    from the previous cycle's draft-extend; `EagleDraftWorker.draft_forward`), so
    draft(s) = draft(S) x (s - 1) / (S - 1), its fixed part taken as 0. From a steps-1 log (no
    forward to scale) one drafter forward is estimated as the draft-extend's time (flagged).
  * verify and draft-extend run over s + 1 tokens per request: without a calibration they are
    held constant, fair only for dense targets at small batch where verify is memory-bound.
  * with --verify-cost (whatif/verify_ratios.py) verify follows a measured verify / plain step ratio over
    draft tokens, for MoE targets; the draft keeps the scaling above, the draft-extend is held.
  * with a calibration sweep the change of all three phases from S to s steps comes from the
    sweep's fitted cost model (`whatif.cost_model.fit_all`, nearest calibrated batch size; its draft
    fit a0 + a x steps also knows the draft phase's fixed part), added to the log's own medians.
  * period(s) = cycle(S) + gap + the three phase changes: one cycle's start to the next (the gap held).
  * tok/s(s) = sum_b n_b x b x L(s) / sum_b n_b x period_b(s) (n_b = logged cycles at batch b).

Recommendation: the row with the highest tok/s among the logged-or-shorter ones; a faster
extrapolated row is named with the run that would price it, never recommended (its accept length is
the last rate repeating, a guess: on the H200 steps 7 priced +5.2 % from a steps-5 log ran 14 %
slower, benchmarks/results/2026-12-02-adaptive-rule-check); another chain than the logged one only when it beats
it by CHANGE_MARGIN (the model's tok/s error on the H200 was 2.6 % median: a smaller gain is no reason to change).

No speculation: a plain decode step of `base_b` ms gives b tokens. Ratio = tok/s(s) / that throughput over
the same batch mix; break-even accept length = sum n_b period_b / sum n_b base_b (Row.in_plain_steps' cycle).
A baseline that prices only some logged batch sizes (whatif/baseline_price.py) gives a ratio over
those, each at its own accept length (the log filtered to it: Observation.by_bs): batch 1 and 8 in
one log with a batch-1 baseline give the ratio of the batch-1 cycles alone, not batch 1's costs at
an acceptance pooled with batch 8's.
Without a baseline the break-even plain step time is reported instead: speculation at s wins
when a plain decode step takes longer than sum n_b period_b(s) / (L(s) x sum n_b) ms.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sglang_patches.errors import UserError
from sglang_patches.whatif.advisor_observation import BsCost, Observation, config_label
from sglang_patches.whatif.baseline_price import contradiction_line, plain_steps_line  # noqa: F401 - callers name it here
from sglang_patches.whatif.calibration import Calibration
from sglang_patches.whatif.verify_ratios import VerifyRatios
from sglang_patches.whatif.verdict import levers_line, low_acceptance, low_detail_lines, verdict_lines

MAX_EXTRA_STEPS = 2  # rows beyond the logged steps (extrapolated)
CHANGE_MARGIN = 0.03  # another chain than the logged one is recommended only if it beats it by this much


# ------------------------------------------------------------------ predictions

@dataclass
class Row:
    steps: int
    draft_tokens: int
    accept_length: float
    period_ms: float        # mix-weighted GPU period per cycle
    tok_s: float            # whole batch
    tok_s_per_request: float
    extrapolated: bool
    logged: bool
    accept_length_replay: float | None = None
    accept_length_truncated: float | None = None
    basis: str = "truncated"        # logged / replayed / truncated / extrapolated (Observation.basis)
    accept_length_interval: tuple | None = None  # 95 % bootstrap range (advisor_observation)
    ratio: float | None = None          # vs no speculation
    break_even_accept: float | None = None
    break_even_step_ms: float | None = None
    by_bs: list = field(default_factory=list)
    in_plain_steps: dict | None = None  # the cycle and its phases in plain decode steps, over the priced batch sizes

    @property
    def label(self) -> str:
        return config_label(self.steps, 1, self.draft_tokens)

    def to_dict(self) -> dict:
        return {"config": self.label, "steps": self.steps, "topk": 1, "draft_tokens": self.draft_tokens,
                "accept_length": self.accept_length, "accept_basis": self.basis,
                "accept_length_truncated": self.accept_length_truncated,
                "accept_length_replay": self.accept_length_replay,
                "accept_length_interval": list(self.accept_length_interval) if self.accept_length_interval else None,
                "cycle_ms": self.period_ms, "tok_s": self.tok_s,
                "tok_s_per_request": self.tok_s_per_request, "ratio_to_no_spec": self.ratio,
                "break_even_accept_length": self.break_even_accept,
                "break_even_step_ms": self.break_even_step_ms,
                "extrapolated": self.extrapolated, "logged": self.logged, "by_bs": self.by_bs}


def draft_ms(cost: BsCost, logged_steps: int, steps: int) -> float:
    """Draft phase for `steps`: s - 1 drafter forwards (see the module docstring)."""
    if logged_steps >= 2:
        return cost.draft_ms * (steps - 1) / (logged_steps - 1)
    return cost.draft_ms + (steps - 1) * cost.extend_ms


def predict(obs: Observation, steps_list, baseline_ms: dict | None = None,
            calibration: Calibration | VerifyRatios | None = None) -> list[Row]:
    """One Row per steps value (topk 1, draft tokens = steps + 1). `baseline_ms` maps batch size ->
    plain decode step ms; the ratio covers the batch sizes it prices (at least one)."""
    rows = []
    # a baseline that leaves some logged batch sizes out: the ratio is over the others, each with its own
    # acceptance (the log filtered to it), not the log's pooled over the batch sizes left out
    own = (obs.by_bs if baseline_ms is not None and any(c.bs not in baseline_ms for c in obs.costs) else {})
    for s in steps_list:
        if s < 1:
            raise ValueError("steps must be >= 1")
        ndt = s + 1
        acc = obs.accept_length_estimate(s)
        per_bs, sum_n_period, sum_tokens, sum_n, sum_base = [], 0.0, 0.0, 0, 0.0
        cov_period, cov_tokens, cov_spec = 0.0, 0.0, 0.0  # over the batch sizes the baseline prices
        cov_phase = {"draft": 0.0, "verify": 0.0, "extend": 0.0}
        for c in obs.costs:
            if calibration is not None and calibration.prices_draft:
                d_draft, d_verify, d_extend = calibration.delta_ms(c.bs, obs.steps, s)
            else:  # measured verify ratios (whatif/verify_ratios.py) price the verify alone
                d_draft, d_extend = draft_ms(c, obs.steps, s) - c.draft_ms, 0.0
                d_verify = calibration.verify_delta_ms(c.bs, c.verify_ms, obs.steps, s) if calibration else 0.0
            period = max(c.period_ms + d_draft + d_verify + d_extend, 1e-6)
            per_bs.append({"bs": c.bs, "cycles": c.cycles, "cycle_ms": period,
                           "draft_ms": c.draft_ms + d_draft, "verify_ms": c.verify_ms + d_verify,
                           "extend_ms": c.extend_ms + d_extend, "gap_ms": c.gap_ms,
                           "tok_s": c.bs * acc * 1000.0 / period})
            sum_n_period += c.cycles * period
            sum_tokens += c.cycles * c.bs * acc
            sum_n += c.cycles
            if baseline_ms is not None and c.bs in baseline_ms:  # a refused batch size has none (baseline_price)
                sum_base += c.cycles * baseline_ms[c.bs]
                cov_period += c.cycles * period
                cov_tokens += c.cycles * c.bs
                cov_spec += c.cycles * c.bs * (own[c.bs].accept_length_estimate(s) if c.bs in own else acc)
                for k in cov_phase:
                    cov_phase[k] += c.cycles * per_bs[-1][f"{k}_ms"]
        mean_period = sum_n_period / sum_n
        row = Row(s, ndt, acc, mean_period, sum_tokens * 1000.0 / sum_n_period, acc * 1000.0 / mean_period,
                  extrapolated=s > obs.steps, logged=s == obs.steps, by_bs=per_bs,
                  accept_length_replay=obs.accept_length_replay(s),
                  accept_length_truncated=obs.accept_length(s), basis=obs.basis(s))
        if baseline_ms is not None:
            # tok/s over the priced batch sizes against plain decode's over the same ones
            if cov_period > 0:  # else no logged batch size is priced: no ratio
                row.ratio = (cov_spec / cov_period) / (cov_tokens / sum_base)
                row.break_even_accept = cov_period / sum_base
                row.in_plain_steps = {"cycle": cov_period / sum_base, "tokens": cov_spec / cov_tokens,
                                      **{k: v / sum_base for k, v in cov_phase.items()}}
        else:
            row.break_even_step_ms = mean_period / acc
        rows.append(row)
    return rows


def default_steps(obs: Observation) -> list[int]:
    return list(range(1, obs.steps + MAX_EXTRA_STEPS + 1))


# Lines of at most 120 characters: the baselines a user can give, then what the table is without one.
NO_BASELINE = ("plain decode baselines, truest first: --baseline-log SERVER.log, --baseline-step-ms MS|BS:MS,..., "
               "--calibration DIR,\n"
               "a plain server's timing log as a second LOG, or steps-0 cycles of a --speculative-adaptive server (slow);\n"
               "without one the chain below is only the best of the chains")

# An adaptive server's steps-0 cycles are a baseline in its own log, but a biased one: on one H200
# (SGLang 0.5.17, trained-8b, batch 8) they took 7.3 ms p50 where a plain server's step took about
# 4.9 ms (benchmarks/results/2026-12-03-adaptive-fixed-build/), so plain decode reads slow and
# speculation wins too often. Only records flagged `plain` (a speculative server's) get the note.
STEPS0_BIAS = ("the plain decode baseline is this log's own steps-0 cycles (an adaptive server's): in one H200 run such "
               "cycles took 1.2x a plain server's step at batch 1 and 1.5x at batch 8, so 'x plain' likely reads high and plain decode "
               "may win where a chain reads near 1x; --baseline-log of a plain server is truer")


@dataclass
class Advice:
    rows: list[Row]
    best: Row
    logged: Row | None
    baseline: bool
    speculate: bool | None   # False: plain decode wins or the drafter accepts nothing; None: no baseline to tell
    verify_model: str        # "calibration", "verify ratios" or "constant"
    passed_over: Row | None = None  # an extrapolated row predicted faster than every logged-or-shorter one
    kept_over: Row | None = None    # a chain predicted faster than the logged one, but by less than CHANGE_MARGIN
    no_accept: dict | None = None   # no_accept.verdict(): the drafter accepts nothing
    contradictions: list = field(default_factory=list)  # batch sizes whose baseline step is slower than the verify
    picked_from: tuple = ()  # the log's other configurations, when --config picked one (an adaptive log's)
    baseline_source: str = ""  # where the plain decode baseline came from, as the basis line names it
    request_cycles: int = 0  # the log's request-cycles of the configuration modelled (below FEW_CYCLES: said first)
    accept_length: float | None = None  # the logged chain's, and its per-position acceptance: the verdict's input
    pos_rates: list = field(default_factory=list)
    steps: int = 0
    simulated: bool = False
    low_accept: dict | None = None  # whatif.verdict.low_acceptance(): the drafter accepts little for its chain
    check_command: str | None = None  # the preflight line for this pair (no_accept.preflight_command)
    plain_steps: list = field(default_factory=list)  # baseline_price.price(): the plain step used (or refused) per batch size
    unpriced: tuple = ()  # logged batch sizes the baseline refuses (baseline_price.py): the ratio leaves them out
    unpriced_share: float | None = None  # their share of the logged decode cycles
    logged_outside: Row | None = None  # the logged chain where --steps left it out: priced for reference only

    def verdict_lines(self) -> list[str]:
        """The leading lines (whatif/verdict.py): the same text in every answer for the same log."""
        return verdict_lines(self.accept_length, self.steps, self.pos_rates, simulated=self.simulated,
                             baseline=self.baseline, speculate=self.speculate, best_label=self.best.label,
                             ratio=self.best.ratio, contradicted=bool(self.contradictions), unpriced=self.unpriced,
                             unpriced_share=self.unpriced_share, break_even_ms=self.best.break_even_step_ms,
                             in_steps=None if self.no_accept else self.best.in_plain_steps, logged_ref=self._ref(),
                             refused=() if self.baseline else tuple((u["bs"], u.get("measured_at", "?"))
                                                                    for u in self.plain_steps if u["ms"] is None))

    def _ref(self):
        """(label, x plain) of the logged chain left out by --steps, where it beats the chain named."""
        o = self.logged_outside
        return (o.label, o.ratio) if o and o.ratio and self.best.ratio and o.ratio > self.best.ratio else None

    @property
    def verdict(self) -> str:
        if self.no_accept:
            return "drafter_accepts_nothing"
        if not self.baseline:
            return "unknown_without_baseline"
        return "speculate" if self.speculate else "no_speculation"

    def to_dict(self, logged_label: str | None = None) -> dict:
        """The structured advice `advise --json` and `report --json` share."""
        recommended = self.best.label if self.speculate is not False else None
        return {"verdict": self.verdict, "recommended": recommended, "speculate": self.speculate,
                "drafter_accepts_nothing": self.no_accept is not None, "no_accept": self.no_accept,
                "drafter_accepts_little": self.low_accept is not None, "low_accept": self.low_accept,
                "verdict_lines": self.verdict_lines(), "plain_steps_used": list(self.plain_steps),
                "baseline": self.baseline, "baseline_contradictions": list(self.contradictions),
                "best_chain": self.best.label, "best": self.best.to_dict(),
                "kept_logged_over": self.kept_over.label if self.kept_over else None,
                "extrapolated_passed_over": self.passed_over.label if self.passed_over else None,
                "gain_vs_logged": self.best.tok_s / (self.logged or self.logged_outside).tok_s
                if self.logged or self.logged_outside else None,
                "logged_left_out": self.logged_outside.label if self.logged_outside else None,
                "gain_vs_no_spec": self.best.ratio, "verify_cost": self.verify_model,
                "lines": self.lines(logged_label or (self.logged.label if self.logged else self.best.label)),
                "rows": [r.to_dict() for r in self.rows]}

    def lines(self, logged_label: str) -> list[str]:
        """The answer, most important first: the verdict (verdict_lines), then the no-acceptance or
        low-acceptance causes with their checks, the plain step used per batch size or how to get a
        baseline, a baseline that contradicts the log, the recommendation, and its basis (the last line)."""
        b = self.best
        out = self.verdict_lines()
        if self.no_accept:
            from sglang_patches.vocab.no_accept import verdict_lines as no_accept_lines
            out += no_accept_lines(self.no_accept)[1:]  # the causes and the check; its summary leads already
        elif self.low_accept:
            out += low_detail_lines(self.check_command)
        warn_at = len(out)  # a baseline the log contradicts: said before the plain steps it rests on
        if self.plain_steps:
            out.append(plain_steps_line(self.plain_steps))
        elif not self.baseline and not self.no_accept:
            out += NO_BASELINE.split("\n")
        if self.picked_from:
            out.append(f"warning: {logged_label} is one of this log's configurations (also {', '.join(self.picked_from)}); "
                       "if the log is an adaptive server's, its slot ran this one only on the spans it picked it for, a "
                       "biased sample: advise a fixed-steps server's log, or use --adaptive-config")
        if 0 < self.request_cycles < FEW_CYCLES:
            out.append(f"warning: the log has only {self.request_cycles} request-cycles of {logged_label}: its accept "
                       "lengths, and so this answer, are a rough guess; log a few hundred cycles of your traffic")
        if self.contradictions:  # one line for every batch size it happens at: the verdict stays on top
            out.insert(warn_at, contradiction_line(self.contradictions))
        ext, p = "", self.passed_over  # advise() never recommends past the logged steps
        # a run is worth asking for only where the guess could change the answer: past the model's
        # error over the recommended chain, and past plain decode where that is the answer
        if p is not None and (self.speculate is not False or (p.ratio or 0) > 1) and not self.no_accept:
            gain = 100 * (p.tok_s / b.tok_s - 1)
            ext += (f" ({p.label}, extrapolated beyond the logged steps, is predicted {gain:.1f} % faster than {b.label}"
                    + (f", {p.ratio:.2f}x plain decode" if self.speculate is False else "")
                    + (f": log a run at steps {p.steps} to price it)" if gain >= 100 * CHANGE_MARGIN
                       else ": within the model's error)"))
        if self.kept_over is not None:
            k = self.kept_over
            ext += (f" ({k.label} is predicted {100 * (k.tok_s / b.tok_s - 1):.1f} % faster: less than the "
                    f"{100 * CHANGE_MARGIN:.0f} % the model can tell apart, so keep the logged chain)")
        o = self.logged_outside
        gain = (f"{b.tok_s / self.logged.tok_s:.2f}x the logged {logged_label}" if self.logged and b is not self.logged
                else "the logged chain" if self.logged else
                f"{b.tok_s / o.tok_s:.2f}x the logged {o.label} (not among the steps asked)" if o else "")
        if self.no_accept:
            first = (f"no chain to recommend: the least-losing chain {b.label} would still pay for drafts that are "
                     "thrown away" + (f" ({b.ratio:.2f}x plain decode)" if b.ratio is not None else ""))
        elif self.baseline and not self.speculate:
            first = (f"recommended: no speculation; the best chain {b.label} is predicted at {b.ratio:.2f}x plain "
                     f"decode (break-even accept length {_be(b.break_even_accept)}, predicted {b.accept_length:.2f})"
                     + ext + (f"; the logged {o.label}, not among the steps asked, {o.ratio:.2f}x" if o and o.ratio else ""))
        elif self.baseline:
            first = (f"recommended: {b.label} ({sglang_flags(b)}): "
                     f"{b.tok_s:.0f} tok/s, {b.ratio:.2f}x plain decode"
                     + (" (against a baseline the log contradicts: see the warning)" if self.contradictions else "")
                     + f", {gain}{ext}")
        else:
            first = (f"best chain: {b.label} ({sglang_flags(b)}): "
                     f"{b.tok_s:.0f} tok/s, {gain}{ext}; it beats plain decode only if a plain decode step "
                     f"takes > {b.break_even_step_ms:.2f} ms")
        if b.in_plain_steps and b.ratio is not None and not self.no_accept and not self.contradictions:
            out.append(levers_line(b.in_plain_steps, self.simulated))
        out.append(first)
        basis = {"calibration": "phase costs vs steps from the calibration sweep's fitted cost model",
                 "verify ratios": "draft scaled by its steps - 1 drafter forwards, verify by the measured verify / "
                                  "plain step ratio over draft tokens (--verify-cost), draft-extend held constant"}.get(
            self.verify_model,
            "draft scaled by its steps - 1 drafter forwards, verify and draft-extend held constant (no calibration)")
        replayed = any(r.basis == "replayed" for r in self.rows)
        acc = ("accept length from the span replay of the logged requests for fewer steps than logged "
               "(`advise` shows the plain truncation beside it)" if replayed else
               "accept length from the logged request-cycles truncated (exact per cycle) for fewer steps than logged")
        out.append(f"basis: {acc}, extrapolated above; {basis}; "
                   + (f"plain decode baseline: {self.baseline_source or 'see the notes'}" if self.baseline
                      else "no plain decode baseline"))
        return out


def sglang_flags(row) -> str:
    """The chain as SGLang's server flags (topk 1: draft tokens = steps + 1)."""
    return (f"--speculative-num-steps {row.steps} --speculative-eagle-topk 1 "
            f"--speculative-num-draft-tokens {row.draft_tokens}")


def _be(x) -> str:
    """A break-even accept length: below 1 it cannot be reached from above (a chain cycle faster
    than a plain step: the baseline contradicts the log), shown as '< 1'."""
    return "-" if x is None else ("< 1" if x < 1 else f"{x:.2f}")


def baseline_contradictions(obs: Observation, baseline_ms: dict | None) -> list[dict]:
    """Batch sizes where the plain decode step is slower than the logged verify plus the gap between
    cycles: a verify runs the same target over steps + 1 tokens per request, so a plain step (one
    token per request) of the same model on the same GPU takes less."""
    if not baseline_ms:
        return []
    # a margin: medians of a few ms move by a few percent between runs, and an interpolated step is an estimate
    # (5.92 ms interpolated against a logged 5.89 is no contradiction)
    return [{"bs": c.bs, "baseline_ms": baseline_ms[c.bs], "verify_ms": c.verify_ms, "gap_ms": c.gap_ms}
            for c in obs.costs if baseline_ms.get(c.bs) is not None
            and baseline_ms[c.bs] > (c.verify_ms + c.gap_ms) * (1 + CONTRADICTION_MARGIN)]


def refuse_steps_above_logged(steps_list, logged: int, what: str) -> None:
    """A --steps list with nothing at or below the logged steps leaves only guesses to choose from."""
    if steps_list and min(steps_list) > logged:
        raise UserError(f"--steps {','.join(map(str, steps_list))}: every value is above the {logged} steps logged"
                        f"{what}, and only chains the log prices are chosen; include a value <= {logged}")


CONTRADICTION_MARGIN = 0.05  # how far a plain step may exceed the logged verify + gap before it contradicts the log
FEW_CYCLES = 100  # request-cycles below which advise says first that its answer is a rough guess


def advise(obs: Observation, steps_list=None, baseline_ms: dict | None = None,
           calibration: Calibration | VerifyRatios | None = None, check_command: str | None = None) -> Advice:
    from sglang_patches.vocab.no_accept import verdict

    refuse_steps_above_logged(steps_list, obs.steps, "")
    rows = predict(obs, steps_list or default_steps(obs), baseline_ms, calibration)
    best = max(rows, key=lambda r: (r.tok_s, -r.steps))
    passed_over = None
    known = [r for r in rows if not r.extrapolated]
    if best.extrapolated:  # known is never empty: the logged steps are always priced
        # beyond the logged steps the acceptance is a guess (the last rate repeating): name the
        # chain and the run that would price it, recommend from the measured ground
        passed_over, best = best, max(known, key=lambda r: (r.tok_s, -r.steps))
    logged = next((r for r in rows if r.logged), None)
    outside = None if logged is not None else predict(obs, [obs.steps], baseline_ms, calibration)[0]
    # simulated acceptance is no drafter: rates set at launch say nothing about one
    no_accept = None if obs.simulated else verdict(obs.accept_length(obs.steps), obs.steps, check_command)
    if no_accept is not None:
        speculate = False
    elif baseline_ms is None:
        speculate = None
    else:
        speculate = (best.ratio or 0.0) > 1.0
    kept_over = None
    # only where a chain is recommended, and not where the margin would decide whether to speculate
    if (speculate is not False and logged is not None and best is not logged
            and best.tok_s < logged.tok_s * (1 + CHANGE_MARGIN) and (speculate is None or (logged.ratio or 0) > 1)):
        kept_over, best = best, logged
    logged_acc, pos = obs.accept_length(obs.steps), obs.pos_rates()
    low = None if obs.simulated or no_accept else low_acceptance(logged_acc, obs.steps, pos)
    off = [c for c in obs.costs if baseline_ms is not None and c.bs not in baseline_ms]  # unpriced batch sizes
    return Advice(rows, best, logged, baseline_ms is not None, speculate,
                  calibration.kind if calibration is not None else "constant", passed_over, kept_over, no_accept,
                  baseline_contradictions(obs, baseline_ms), obs.picked_from, request_cycles=obs.request_cycles,
                  accept_length=logged_acc, pos_rates=pos, steps=obs.steps, simulated=obs.simulated,
                  low_accept=low, check_command=check_command,
                  unpriced=tuple(c.bs for c in off), unpriced_share=sum(c.cycles for c in off)
                  / max(1, sum(c.cycles for c in obs.costs)) if baseline_ms is not None else None,
                  logged_outside=outside)
