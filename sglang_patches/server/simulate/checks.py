"""Launch-time checks of simulated acceptance: everything refused before a process is spawned.

`resolve(...)` turns `--simulate-acceptance RATES` / `--simulate-acceptance-from LOG` plus the
server's speculative settings into the list of rates the scheduler processes get (via
`OverlayConfig.simulate_acceptance`), or raises `UserError` with one line naming the problem and
the fix: bad rates (empty, NaN, out of [0, 1]), more positions than steps, a log without
per-position data, no EAGLE speculation, topk > 1, or SGLANG_SIMULATE_ACC_LEN also set.
"""
from __future__ import annotations

import os

from sglang_patches.errors import UserError
from sglang_patches.vocab.rates import FLAG, FLAG_FROM, check_rates, fit_to_steps, parse_rates, rates_from_log

ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")  # the chain verify of eagle_utils.eagle_sample (NEXTN = EAGLE)
ENV_CONFLICT = "SGLANG_SIMULATE_ACC_LEN"


def _int(value, flag: str) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise UserError(f"{flag} {value!r} is not an integer") from None


def resolve(rates_text: str | None, from_path: str | None, *, algorithm: str | None, steps, topk,
            env: dict | None = None) -> tuple[list[float], dict] | None:
    """The rates for the server (len == steps, zero-padded) and a description, or None when off."""
    if rates_text is None and from_path is None:
        return None
    if rates_text is not None and from_path is not None:
        raise UserError(f"{FLAG} and {FLAG_FROM} both given; choose one")
    env = os.environ if env is None else env
    if sglang_simulation_on(env, unparsable=True):
        raise UserError(f"{ENV_CONFLICT}={env.get(ENV_CONFLICT)} is set together with {FLAG}; unset "
                        f"{ENV_CONFLICT} (SGLang's fixed accept length) or drop {FLAG}")
    if rates_text is not None:
        rates, info = parse_rates(rates_text), {"source": FLAG}
    else:
        rates, info = rates_from_log(from_path)
    algo = (algorithm or "").upper()
    if algo not in ALGORITHMS:
        raise UserError(f"{FLAG} simulates the EAGLE verify; the server runs --speculative-algorithm "
                        f"{algorithm or '(none)'}; use EAGLE3 (or EAGLE) with it")
    steps, topk = _int(steps, "--speculative-num-steps"), _int(topk, "--speculative-eagle-topk")
    if steps is None or steps < 1:
        raise UserError(f"{FLAG} needs the number of draft steps; pass --speculative-num-steps N explicitly")
    if topk is None:
        raise UserError(f"{FLAG} is defined for chains; pass --speculative-eagle-topk 1 explicitly")
    if topk != 1:
        raise UserError(f"{FLAG} is defined for chains (topk 1), not trees; got --speculative-eagle-topk "
                        f"{topk}: use topk 1 or drop {FLAG}")
    source = FLAG if rates_text is not None else FLAG_FROM
    given = len(rates)
    rates = fit_to_steps(check_rates(rates, source), steps, source=source, cut=rates_text is None)
    info.update(steps=steps, positions_given=given)
    return rates, info


def sglang_simulation_on(env=None, *, unparsable: bool) -> bool:
    """Whether SGLang's own SGLANG_SIMULATE_ACC_LEN simulation is on (> 0; SGLang's default is -1).
    `unparsable` is the answer for a value that is not a number."""
    env = os.environ if env is None else env
    try:
        return float(env.get(ENV_CONFLICT, "-1")) > 0
    except ValueError:
        return unparsable
