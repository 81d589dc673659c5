"""Per-position acceptance rates for simulated acceptance: parsing, checks, and rates measured in a log.

Convention (the issue's, as vLLM states per-position acceptance conditionally): rate k is the
probability that draft position k (0-based) is accepted given positions 0..k-1 were. A request-cycle
with rates c_0..c_{S-1} accepts exactly a drafts with probability c_0...c_{a-1} (1 - c_a) (c_S = 0),
and its accept length (bonus token included) is a + 1; the mean accept length is
1 + sum_k prod_{j<=k} c_j.

A list shorter than the server's steps leaves the remaining positions at rate 0 (never accepted).
A list longer than the steps is refused when given explicitly; rates measured in a log are cut to
the steps (the first positions' conditional rates do not depend on how many follow).

Everything here is plain Python (no torch): the launcher checks rates before anything is spawned.
Bad input raises `UserError` with one line naming the problem and the fix.
"""
from __future__ import annotations

import math

from sglang_patches.errors import UserError

FLAG = "--simulate-acceptance"
FLAG_FROM = "--simulate-acceptance-from"
# SGLang's verify kernels and the overlay's counters handle at most this many positions.
MAX_POSITIONS = 16


def parse_rates(text: str) -> list[float]:
    """'0.8,0.7,0.6' -> [0.8, 0.7, 0.6]; refuses empty lists, non-numbers, NaN/inf and values out of [0, 1]."""
    items = [x.strip() for x in (text or "").split(",")]
    if not any(items):
        raise UserError(f"{FLAG} {text!r}: empty; give conditional per-position rates in [0, 1], e.g. 0.8,0.7,0.6")
    if not all(items):
        raise UserError(f"{FLAG} {text!r}: an empty entry; separate rates by single commas, e.g. 0.8,0.7,0.6")
    out = []
    for item in items:
        try:
            value = float(item)
        except ValueError:
            raise UserError(f"{FLAG} {text!r}: {item!r} is not a number; give rates in [0, 1], "
                            f"e.g. 0.8,0.7,0.6") from None
        out.append(value)
    return check_rates(out, FLAG)


def check_rates(rates, source: str = FLAG) -> list[float]:
    """The rates as floats, or UserError (NaN, infinite, out of [0, 1], empty, not a list, too many)."""
    if not isinstance(rates, (list, tuple)) or not rates:
        raise UserError(f"{source}: expected a non-empty list of rates in [0, 1], got {rates!r}")
    out = []
    for k, r in enumerate(rates):
        if isinstance(r, bool) or not isinstance(r, (int, float)):
            raise UserError(f"{source}: rate {k} is {r!r}, not a number; give rates in [0, 1]")
        r = float(r)
        if math.isnan(r) or math.isinf(r):
            raise UserError(f"{source}: rate {k} is {r}; give finite rates in [0, 1]")
        if not 0.0 <= r <= 1.0:
            raise UserError(f"{source}: rate {k} = {r} is outside [0, 1]; rates are probabilities "
                            f"(conditional: position k accepted given 0..k-1 were)")
        out.append(r)
    if len(out) > MAX_POSITIONS:
        raise UserError(f"{source}: {len(out)} positions; at most {MAX_POSITIONS} are supported")
    return out


def fit_to_steps(rates: list[float], steps: int, *, source: str = FLAG, cut: bool = False) -> list[float]:
    """The rates for a server with `steps` draft positions: zeros appended up to `steps`; more
    positions than steps are refused (or, with cut=True, for rates measured in a log, dropped)."""
    if len(rates) > steps:
        if not cut:
            raise UserError(f"{source}: {len(rates)} positions but the server drafts only {steps} "
                            f"(--speculative-num-steps {steps}); give at most {steps} rates or raise the steps")
        return list(rates[:steps])
    return list(rates) + [0.0] * (steps - len(rates))


def accept_length(rates: list[float]) -> float:
    """Mean accept length (bonus token included) of the chain."""
    total, p = 1.0, 1.0
    for r in rates:
        p *= r
        total += p
    return total


def accepted_distribution(rates: list[float]) -> list[float]:
    """P(exactly a drafts accepted) for a = 0..len(rates)."""
    out, p = [], 1.0
    for r in rates:
        out.append(p * (1.0 - r))
        p *= r
    out.append(p)
    return out


def conditional_rates(accepted: list[int], positions: int) -> tuple[list[float | None], list[int]]:
    """Realised conditional rates from per-request-cycle accepted counts: rate k = #(a > k) / #(a > k-1)
    (None where no request-cycle reached position k); also the denominators (#(a > k-1))."""
    reached = [0] * (positions + 1)  # reached[k] = #(a >= k)
    for a in accepted:
        for k in range(min(a, positions) + 1):
            reached[k] += 1
    rates = [reached[k + 1] / reached[k] if reached[k] else None for k in range(positions)]
    return rates, reached[:positions]


def rates_from_log(paths) -> tuple[list[float], dict]:
    """Conditional per-position rates measured in real timing logs (decode records, stale requests
    already left out by the recorder). Refuses logs with no per-position data, logs of simulated
    acceptance (a simulation is not a measurement) and positions never reached."""
    from sglang_patches.vocab.logread import LogReader

    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    accepted: list[int] = []
    steps = 0
    simulated = 0
    for rec in LogReader(paths):
        if rec["kind"] != "decode" or not rec["accepted"]:
            continue
        if rec.get("simulated"):
            simulated += 1
            continue
        accepted.extend(rec["accepted"])
        steps = max(steps, rec["steps"])
    where = ", ".join(str(p) for p in paths)
    if simulated and not accepted:
        raise UserError(f"{FLAG_FROM} {where}: every decode record is from a simulated-acceptance run; "
                        f"pass a log of real serving (a simulation is not a measurement)")
    if not accepted or steps < 1:
        raise UserError(f"{FLAG_FROM} {where}: no decode cycle with per-request accepted drafts; pass a "
                        f"--timing-log of a speculative server that served decode traffic")
    rates, reached = conditional_rates(accepted, steps)
    usable = []
    for r in rates:
        if r is None:
            break
        usable.append(r)
    if not usable:
        raise UserError(f"{FLAG_FROM} {where}: no position was ever reached; pass a longer log")
    info = {"source": where, "request_cycles": len(accepted), "steps_in_log": steps,
            "denominators": reached[:len(usable)], "ignored_simulated_records": simulated}
    return check_rates([round(r, 6) for r in usable], FLAG_FROM), info
