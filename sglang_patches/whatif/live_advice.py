"""The `advice` field of `GET /spec_timing`: the advisor run on the server's rolling statistics, in the
server process, when the endpoint is asked (never per cycle)."""
from __future__ import annotations

from sglang_patches.whatif.advisor import advise
from sglang_patches.whatif.advisor_records import observation_from_summary


def summary_advice(summary: dict, config, check_command: str | None = None) -> dict:
    """The `advice` field of /spec_timing: from the server's rolling stats (one batch size, p50
    costs, no baseline, verify held constant); computed when the endpoint is asked, never per cycle.
    `config` = (steps, topk, draft_tokens) of the cycles seen, or None before the first one;
    `check_command` = the preflight line for this server's pair (no_accept.preflight_command)."""
    if config is None:
        return {"available": False, "reason": "no decode cycle yet"}
    steps, topk, ndt = config
    if topk != 1:
        return {"available": False, "reason": f"topk {topk}: the log counts accepted drafts along the tree path, "
                                              "not the branch, so other configurations cannot be derived"}
    obs = observation_from_summary(summary, steps, topk, ndt)
    if obs is None:
        return {"available": False, "reason": "no decode cycles with phase times and acceptance in the window "
                                              "(or several configurations since the last reset)"}
    obs.simulated = bool(summary.get("simulated_records"))
    a = advise(obs, check_command=check_command)
    return {"available": True, "logged": obs.label, **a.to_dict(obs.label),
            "rows": [{"config": r.label, "accept_length": r.accept_length, "cycle_ms": r.period_ms,
                      "tok_s": r.tok_s, "break_even_step_ms": r.break_even_step_ms,
                      "extrapolated": r.extrapolated} for r in a.rows]}
