"""The verdict every answer leads with (`report`, its PNG, `advise`, `advise --adaptive-config`,
`/spec_timing`): at most MAX_LINES lines of at most MAX_WIDTH characters, built here only, from
the logged acceptance and (with a plain decode baseline) the advisor's best chain against it.

Acceptance, three grades:
  * nothing (vocab/no_accept.py, unchanged): steps >= 2 and accept length < 1.1; it wins.
  * little (`low_acceptance`): the first draft kept in under FIRST_DRAFT_LOW (50 %) of the
    request-cycles, or an accept length below 2 - 0.5^steps, what a chain that keeps each draft with
    probability 0.5 gives (1.97 at steps 5). EAGLE-3 heads keep 60-80 % of first drafts on text like
    their training data (EAGLE-3 paper's per-position acceptance; the H200 trained-8b grid here:
    0.72-0.78 at batch 1), so under half is a drafter working off its ground.
  * otherwise: the accept length and the first-draft rate, stated.
Then the speculate / don't line: with a baseline "N.NNx plain decode" of the recommended chain,
without one "no plain decode baseline". Stdlib only.
"""
from __future__ import annotations

from sglang_patches.vocab.no_accept import accepts_nothing
from sglang_patches.whatif.baseline_price import ranges

MAX_LINES = 4
MAX_WIDTH = 120
FIRST_DRAFT_LOW = 0.5     # below: the drafter accepts little (EAGLE-3 heads: 0.6-0.8 on their own kind of text)
HALF_RATE = 0.5           # the per-draft rate of the accept-length clause: 2 - 0.5^steps

# Most likely first. Each: (cause, how to check it). 2 and 3 are what preflight reads from the checkpoints.
LOW_CAUSES = (
    ("traffic unlike the drafter's training text (another language, code, long context, another chat template)",
     "log a run on text like its training data (its model card names it): the first-draft rate should reach 0.6"),
    ("a drafter trained for another target or revision of it (hidden states it never saw)",
     "sglang-patches preflight (below)"),
    ("a quantised target (FP8, INT4, AWQ, ...) with a bf16 drafter trained on the unquantised target's hidden states",
     "sglang-patches preflight (below)"),
    ("a drafter trained on too little data (10K samples against the 1.4M of a published Kimi-K2 head)",
     "its model card or training config: samples and epochs"),
)
LOW_CAUSES_SHORT = ("likely causes: traffic unlike its training text; a drafter of another target or revision; "
                    "quantised target; little data")


def first_draft_rate(pos_rates) -> float | None:
    """P(accepted > 0): the share of request-cycles that kept the first draft."""
    return pos_rates[0] if pos_rates and pos_rates[0] is not None else None


def half_rate_accept_length(steps: int) -> float:
    """Accept length of a chain of `steps` keeping each draft with probability HALF_RATE."""
    return sum(HALF_RATE ** k for k in range(steps + 1))


def low_acceptance(accept_length, steps, pos_rates) -> dict | None:
    """The low-acceptance finding (None when acceptance is fine, or nothing is accepted: no_accept wins)."""
    if accept_length is None or not steps or accepts_nothing(accept_length, steps):
        return None
    first = first_draft_rate(pos_rates)
    floor = half_rate_accept_length(steps)
    if not ((first is not None and first < FIRST_DRAFT_LOW) or accept_length < floor):
        return None
    return {"accept_length": accept_length, "steps": steps, "first_draft_rate": first,
            "first_draft_low": FIRST_DRAFT_LOW, "accept_length_floor": floor,
            "causes": [{"cause": c, "check": k} for c, k in LOW_CAUSES]}


def _acceptance_line(accept_length, steps, first, low: bool) -> str:
    got = f"accept length {accept_length:.2f} at steps {steps} (up to {steps + 1})"
    rate = "" if first is None else f"first draft kept {100 * first:.0f} %"
    if low:
        return (f"the drafter accepts little: {rate + ' (EAGLE-3 heads: 60-80 %), ' if rate else ''}{got}")
    return f"the drafter accepts well: {got}" + (f", {rate}" if rate else "")


def _simulated_line(accept_length, steps, pos_rates) -> str:
    """Simulated acceptance (SGLANG_SIMULATE_ACC_LEN, --simulate-acceptance): the word follows the figures,
    by the same rule as a drafter's (accept nothing or little: low), with no drafter to blame."""
    first = first_draft_rate(pos_rates)
    low = accepts_nothing(accept_length, steps) or low_acceptance(accept_length, steps, pos_rates) is not None
    got = f"accept length {accept_length:.2f} at steps {steps} (up to {steps + 1})"
    rate = "" if first is None else f", first draft kept {100 * first:.0f} %"
    if not low:
        return f"SIMULATED acceptance (rates set at launch) is high: {got}{rate}"
    return f"SIMULATED acceptance (rates set at launch) is low: {got}{rate}"


def _baseline_line(baseline: bool, speculate, best_label, ratio, contradicted: bool = False,
                   unpriced=(), refused=(), logged_steps: int | None = None, unpriced_share=None,
                   break_even_ms: float | None = None) -> str:
    if not baseline and refused:  # one was given, measured at other batch sizes only (baseline_price.py)
        sizes = ", ".join(str(bs) for bs, _ in refused)
        spans = ", ".join(dict.fromkeys(span for _, span in refused))
        return (f"no plain decode baseline at batch {sizes}: the one given was measured at batch {spans}; "
                "cannot tell whether to speculate")
    if not baseline and break_even_ms and best_label:  # the one number a user can hold a plain step against
        return (f"no plain decode baseline: {best_label} pays only if a plain decode step takes > {break_even_ms:.2f} ms; "
                "give --baseline-log SERVER.log")
    if not baseline:
        return ("no plain decode baseline: cannot tell whether to speculate; give --baseline-log SERVER.log "
                "(a plain server's)")
    if ratio is None:  # the baseline priced none of the logged batch sizes
        return "no plain decode baseline at the logged batch sizes: cannot tell whether to speculate"
    # a caveat replaces the closing words: the line stays within MAX_WIDTH
    caveat = (", against a baseline the log contradicts (see the warning)" if contradicted else
              f"; no baseline at batch {ranges(sorted(unpriced))}"
              + (f" ({100 * unpriced_share:.0f} % of cycles)" if unpriced_share is not None else "") if unpriced else "")
    if speculate:  # what to do with the server's flags: keep the logged steps, or switch
        same = logged_steps is not None and str(best_label).startswith(f"s{logged_steps}_")
        return f"speculate: {'keep' if same else 'switch to'} {best_label}, predicted at {ratio:.2f}x plain decode" + caveat
    if caveat:
        return f"don't speculate: {best_label} is predicted at {ratio:.2f}x plain decode" + caveat
    return (f"don't speculate: the best chain {best_label} is predicted at {ratio:.2f}x plain decode; "
            "serve without speculation")


def why_line(ratio: float, in_steps: dict) -> str:
    """Why the ratio is what it is: x plain decode = tokens a cycle yields per request / the cycle's
    time in plain decode steps (advisor.Row.in_plain_steps, over the batch sizes the baseline prices)."""
    def n(x: float) -> str:  # three significant figures keep the line within MAX_WIDTH at large batch
        return f"{x:.1f}" if x >= 10 else f"{x:.2f}"

    parts = [f"{k} {n(in_steps[k])}" for k in ("verify", "draft", "extend")]
    other = in_steps["cycle"] - sum(in_steps[k] for k in ("verify", "draft", "extend"))
    if other >= 0.05:  # the gap before a cycle (host work) and the rest of it outside the three phases
        parts.append(f"other {n(other)}")
    return (f"why {ratio:.2f}x: a cycle yields {n(in_steps['tokens'])} tokens in the time of {n(in_steps['cycle'])} "
            f"plain steps ({', '.join(parts)})")


ACCEPT_LEVER = 0.3     # accept length a drafter better matched to the traffic may add (levers_line)
FP8_DRAFT_SPEEDUP = 1.7  # draft phase, --draft-backend triton --draft-weights fp8 vs stock (H100, Llama heads: 1.6-1.9x)


def levers_line(in_steps: dict, simulated: bool = False) -> str:
    """The two levers a user has, priced by the why line's arithmetic (x plain = tokens / cycle in plain
    steps): more accepted tokens per cycle (a drafter better matched to the traffic), or a cheaper draft
    phase; verify is the target's own forward over the draft tokens, which the chains of the table price.
    A lever that moves the figure by less than 0.01x is named as such, not priced at the same figure."""
    cyc, tok = in_steps["cycle"], in_steps["tokens"]
    now, more = tok / cyc, (tok + ACCEPT_LEVER) / cyc
    faster = tok / (cyc - in_steps["draft"] * (1 - 1 / FP8_DRAFT_SPEEDUP))
    accept = "" if simulated else f"accept length +{ACCEPT_LEVER:.1f} -> {more:.2f}x; "  # rates set at launch: no drafter
    draft = (f"a {FP8_DRAFT_SPEEDUP:.1f}x faster draft phase (--draft-backend triton --draft-weights fp8, Llama "
             f"heads) -> {faster:.2f}x" if round(faster, 2) > round(now, 2) else
             f"the draft phase is {100 * in_steps['draft'] / cyc:.0f} % of the cycle: a faster one gains < 0.01x")
    return f"levers: {accept}{draft}; verify moves only with the draft tokens (the table)"


def verdict_lines(accept_length, steps, pos_rates, *, simulated: bool = False, baseline: bool = False,
                  speculate=None, best_label: str | None = None, ratio: float | None = None,
                  contradicted: bool = False, unpriced=(), refused=(), in_steps: dict | None = None,
                  unpriced_share: float | None = None, break_even_ms: float | None = None,
                  logged_ref: tuple | None = None) -> list[str]:
    """The leading lines (at most MAX_LINES, each at most MAX_WIDTH characters). `contradicted`: the
    baseline contradicts the log (advisor.baseline_contradictions); `unpriced`: the logged batch sizes
    the baseline refuses (whatif/baseline_price.py), which the ratio leaves out; `refused`: (batch size,
    the batch sizes it was measured at) for each logged one, when the baseline given priced none
    (`unpriced_share`: the logged decode cycles at the unpriced batch sizes, said beside them);
    `in_steps`: the best chain's cycle in plain decode steps, for the why line where a line is left;
    `break_even_ms`: without a baseline, the plain step the best chain must beat (advisor.Row.break_even_step_ms);
    `logged_ref`: (label, x plain) of the logged chain where --steps left it out and it beats the one named."""
    if accept_length is None or not steps:
        out = ["no drafting cycles with acceptance to judge the drafter by"]
    elif accepts_nothing(accept_length, steps) and not simulated:
        # one line: its causes and the preflight check follow it in every answer (no_accept.verdict_lines)
        return [_fit(f"the drafter accepts nothing: accept length {accept_length:.2f} at steps {steps} "
                     f"(up to {steps + 1} possible); speculation cannot beat plain decode")]
    else:
        first = first_draft_rate(pos_rates)
        low = low_acceptance(accept_length, steps, pos_rates) is not None and not simulated
        if simulated:  # rates set at launch, no drafter: the figures graded as a drafter's are, without its causes
            out = [_simulated_line(accept_length, steps, pos_rates)]
        else:
            out = [_acceptance_line(accept_length, steps, first, low)]
        if low:
            out.append(LOW_CAUSES_SHORT)
            out.append("for steps: later drafts are rarely kept, so a short chain loses little; speculation may not pay")
    if accept_length is not None and steps:
        line = _baseline_line(baseline, speculate, best_label, ratio, contradicted, unpriced, refused, steps,
                              unpriced_share, break_even_ms)
        if logged_ref and baseline and ratio is not None and speculate is not None and not (contradicted or unpriced):
            label, x = logged_ref  # against the server's own chain, which the steps asked left out
            line = (f"speculate, of the steps asked: {best_label} at {ratio:.2f}x plain decode; the logged {label}, "
                    f"left out: {x:.2f}x" if speculate else
                    f"of the steps asked none beats plain decode ({best_label} {ratio:.2f}x); the logged {label}, "
                    f"left out, does: {x:.2f}x" if x > 1 else
                    f"don't speculate, of the steps asked: {best_label} at {ratio:.2f}x plain decode; the logged "
                    f"{label}, left out: {x:.2f}x")
        out.append(line)
        if in_steps and ratio is not None and not contradicted:
            out.append(why_line(ratio, in_steps))
    return [_fit(x) for x in out[:MAX_LINES]]


def low_detail_lines(check_command: str | None = None) -> list[str]:
    """The causes of low acceptance, most likely first, each with its check (the lines after the verdict)."""
    from sglang_patches.vocab.no_accept import check_note, preflight_command

    command = check_command or preflight_command()
    note = check_note(command)
    out = [f"low acceptance, cause {i}: {c}; check: {k}" for i, (c, k) in enumerate(LOW_CAUSES, 1)]
    out.append(f"preflight for causes 2 and 3: {command}" + (f" ({note})" if note else ""))
    return out


def _fit(line: str) -> str:
    return line if len(line) <= MAX_WIDTH else line[:MAX_WIDTH - 3].rstrip() + "..."
