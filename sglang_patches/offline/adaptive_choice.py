"""One bucket's candidate_steps for `advise --adaptive-config`, from the advisor's priced chains and a
plain decode baseline.

`0` under SGLang's adaptive speculation is not plain decode. At steps 0 SGLang 0.5.17 builds a one-node
tree (EAGLEWorkerV2._build_trivial_verify_input), runs the target through its verify path at one token
per request, then the drafter's extend, so that it can draft again later. On an H200 (trained-8b,
triton attention, benchmarks/results/2026-12-05-adaptive-sampled) such a cycle cost 1.21-1.27x a plain
server's step at batch 1 and 1.44-1.60x at batch 8, about what a steps-1 cycle costs (1.010x at batch
8). 0.5.23 takes the same path (its cost there is not measured). A bucket gets `0` only where that
price beats every chain. A plain server can beat every chain while `0` does not. The bucket then
keeps its chains, and the output says that a server without speculation is faster for this traffic.
A baseline taken from the log's own steps-0 cycles is already that price.
"""
from __future__ import annotations

from sglang_patches.whatif import advisor as adv
from sglang_patches.whatif.cost_model import nearest_batch

NEAR = 0.03  # a chain within this fraction of the best option's predicted tok/s is a candidate
# A steps-0 cycle over a plain server's step, per batch size (the means of the two prompt sets measured;
# other batch sizes take the nearest).
STEPS0_OVER_PLAIN = {1: 1.24, 8: 1.52}
STEPS0_SOURCE = "benchmarks/results/2026-12-05-adaptive-sampled"


def steps0_ms(plain_ms: dict[int, float], from_steps0: set[int] = frozenset()) -> dict[int, float]:
    """A steps-0 cycle's ms per batch size, from a plain step's: times STEPS0_OVER_PLAIN, except the
    batch sizes in `from_steps0`, whose baseline already is the log's own steps-0 cycles."""
    return {bs: ms if bs in from_steps0 else ms * STEPS0_OVER_PLAIN[nearest_batch(STEPS0_OVER_PLAIN, bs)]
            for bs, ms in plain_ms.items()}


def _zero_line(plain_tok_s: float, zero_tok_s: float, best) -> str:
    if zero_tok_s >= plain_tok_s:  # the baseline is the price itself (the log's own steps-0 cycles)
        return (f"plain decode {plain_tok_s:.0f} tok/s beats the best chain {best.label} ({best.tok_s:.0f} tok/s, "
                f"{best.tok_s / plain_tok_s:.2f}x)")
    return (f"steps 0 priced at {zero_tok_s:.0f} tok/s (SGLang's steps-0 cycle, a one-token verify and the "
            f"drafter's extend, {plain_tok_s / zero_tok_s:.2f}x a plain step: {STEPS0_SOURCE}; plain decode "
            f"{plain_tok_s:.0f} tok/s) beats the best chain {best.label} ({best.tok_s:.0f} tok/s)")


def best_chain(advice: adv.Advice):
    """The predicted fastest chain the log prices (advise's keep-the-logged margin does not apply to a
    bucket's candidates; advise never picks past the logged steps, whose acceptance is a guess)."""
    return advice.kept_over or advice.best


def choose(advice: adv.Advice, plain_tok_s: float | None, zero_tok_s: float | None = None,
           pair: dict | None = None) -> tuple[list[int], str]:
    """(candidate_steps, why) from the advisor's rows for one bucket. `plain_tok_s`: a plain server's
    (or the log's steps-0 cycles'); `zero_tok_s`: what the bucket would run at steps 0 (default: the same);
    `pair`: adaptive_sets.best_pair's answer, which then is the entry (the single chains' why follows it)."""
    best = best_chain(advice)
    if zero_tok_s is None:
        zero_tok_s = plain_tok_s
    rows = [r for r in advice.rows if not r.extrapolated]
    ahead = advice.passed_over  # faster, but a guess
    zero_wins = zero_tok_s is not None and zero_tok_s > best.tok_s
    if ahead is not None and ahead.tok_s < (zero_tok_s if zero_wins else best.tok_s * (1 + NEAR)):
        ahead = None  # inside the model's error, or below steps 0: no run would change the entry
    unpriced = "" if ahead is None else (
        f"; {ahead.label} predicted {100 * (ahead.tok_s / best.tok_s - 1):+.1f} % but extrapolated beyond the "
        f"logged steps, not written: log a server started at steps {ahead.steps} to price it")
    if zero_wins:
        near, why = [0], _zero_line(plain_tok_s, zero_tok_s, best) + unpriced
    else:
        near, why = _chains(advice, best, rows, ahead, unpriced, shorter_said=pair is None)
    if pair is not None:
        why = (f"{pair_reason(pair)}; as single chains: {why}"
               + _versus_plain(pair["tok_s"], "the pair", plain_tok_s, zero_tok_s, pair.get("break_even_step_ms"),
                               0 in pair["candidate_steps"]))
        single = max(pair["single"][1], best.tok_s)
        if plain_tok_s is not None and single < plain_tok_s <= pair["tok_s"]:
            why += (f"; every chain up to the logged steps loses to plain decode here (the best {single / plain_tok_s:.2f}x, "
                    f"as plain `advise` says): the pair's lead comes from its switching alone, "
                    f"{pair['tok_s'] / plain_tok_s:.2f}x plain decode, so measure it against a plain server before relying on it")
        return pair["candidate_steps"], why
    if zero_wins:
        return near, why
    return near, why + _versus_plain(best.tok_s, "the best chain", plain_tok_s, zero_tok_s, best.break_even_step_ms)


def _chains(advice, best, rows, ahead, unpriced, shorter_said: bool = True) -> tuple[list[int], str]:
    """The best chain and the longer ones within NEAR of it, and why (the rows left out, and the reasons;
    without shorter_said, not the shorter chains left out: a pair's shorter member answers that)."""
    top = best.tok_s
    near = sorted(r.steps for r in rows if r.tok_s >= top * (1 - NEAR) and r.steps >= best.steps)
    others = ", ".join(f"s{r.steps} {100 * (r.tok_s / top - 1):+.1f} %" for r in sorted(rows, key=lambda r: r.steps)
                       if r is not best and r.steps in near)
    why = f"best {best.label} {top:.0f} tok/s" + (f" (within {100 * NEAR:.0f} %: {others})" if others else "")
    shorter = [f"s{r.steps}" for r in sorted(rows, key=lambda r: r.steps)
               if 0 < r.steps < best.steps and r.tok_s >= top * (1 - NEAR)]
    if shorter and shorter_said:
        why += (f"; {', '.join(shorter)} left out although within {100 * NEAR:.0f} %: shorter than the best, and "
                "SGLang's slot would settle there (it steps down whenever its moving average of accepted drafts <= the "
                "lower candidate - 0.5)")
    why += unpriced
    left_out = [f"s{r.steps}" for r in advice.rows
                if r.extrapolated and r is not best and r is not ahead and r.tok_s >= top * (1 - NEAR)]
    if left_out:
        why += f"; {', '.join(left_out)} left out: extrapolated beyond the logged steps (their acceptance is a guess)"
    return near, why


def _versus_plain(tok_s: float, what: str, plain_tok_s, zero_tok_s, break_even_ms, has_zero: bool = False) -> str:
    """The entry against plain decode: a plain server faster (and why 0 is not the answer), the ratio,
    or without a baseline the plain step the answer hinges on."""
    if plain_tok_s is not None and plain_tok_s > tok_s:
        return (f"; a server without speculation is faster here (plain decode {plain_tok_s:.0f} tok/s, {what} "
                f"{tok_s / plain_tok_s:.2f}x)" + ("" if has_zero else
                f"; an adaptive server cannot decode plainly: its steps 0 still verifies one token and runs the "
                f"drafter's extend, priced {zero_tok_s:.0f} tok/s ({STEPS0_SOURCE}), so the chain stays"))
    if plain_tok_s is not None:
        return f"; {what} {tok_s / plain_tok_s:.2f}x plain decode (plain {plain_tok_s:.0f} tok/s)"
    if break_even_ms is not None:  # no baseline: the plain step this bucket's answer hinges on
        return (f"; {what} beats plain decode only if a plain decode step takes > {break_even_ms:.2f} ms "
                "(give a baseline to know)")
    return ""


def pair_reason(pair: dict) -> str:
    """The why of a pair adaptive_sets.best_pair chose: the shorter member's share and the predicted gain."""
    lo, hi = pair["candidate_steps"]
    s, tok = pair["single"]
    low = "steps 0 (no drafting, SGLang's one-token verify)" if lo == 0 else f"s{lo}"
    single = "steps 0 (no drafting)" if s == 0 else f"s{s}"
    from sglang_patches import compat

    graphs = ("" if compat.current().ADAPTIVE_SWAPPED_EXTEND_GRAPHS else  # 0.5.17: the start's graphs, see compat
              " and the draft-extend graphs of the start's steps that SGLang replays for another steps value")
    return (f"[{lo}, {hi}] replayed on these cycles: SGLang's slot runs {low} on "
            f"{100 * pair['share'].get(lo, 0):.0f} % of them (the stretches where drafts were mostly rejected), for "
            f"{pair['tok_s']:.0f} tok/s predicted against {tok:.0f} for the best single chain, {single} "
            f"(+{100 * (pair['tok_s'] / tok - 1):.1f} %, past the {100 * NEAR:.0f} % margin for the model's error"
            f"{graphs})")
