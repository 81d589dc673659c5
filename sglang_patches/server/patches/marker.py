"""The `marker` feature: proof from inside the scheduler that the overlay is applied, plus the
control channel for /spec_timing.

- AFTER Scheduler.get_internal_state: adds `sglang_patches` to the internal state that
  `/server_info` returns (`internal_states[i].sglang_patches`): overlay version, pid, TP rank,
  applied hooks, and the live timing summary. `GET /spec_timing` reads it from there.
- AROUND Scheduler.set_internal_state: consumes the key `sglang_patches_spec_timing_reset` (sent by
  `POST /spec_timing/reset`) on every TP rank and passes any other keys to SGLang.
"""
from __future__ import annotations

import os

from sglang_patches import compat
from sglang_patches.server.hooks import REGISTRY, HookSpec

RESET_KEY = "sglang_patches_spec_timing_reset"


def overlay_info() -> dict:
    from sglang_patches.server.timing import runtime
    from sglang_patches.versions import __version__

    from sglang_patches.server.simulate import sglang_hooks

    return {"version": __version__, "pid": os.getpid(), "tp_rank": runtime.get_timing_state().rank,
            "applied": [h.describe() for h in REGISTRY.applied],
            "simulated_acceptance": simulation_info(sglang_hooks.active_rates()),
            "spec_timing": runtime.snapshot()}


def simulation_info(rates) -> dict | None:
    """None for real serving; else the rates and a line nobody can mistake for a measurement."""
    if rates is None:
        return None
    from sglang_patches.vocab.rates import accept_length

    return {"rates": list(rates), "expected_accept_length": round(accept_length(rates), 4),
            "note": "SIMULATED ACCEPTANCE: accept lengths are drawn from these rates, not measured; "
                    "benchmark only, not real serving"}


def get_internal_state_after(ret, self, *args, **kwargs) -> None:
    state = getattr(ret, "internal_state", None)
    if isinstance(state, dict):
        state["sglang_patches"] = overlay_info()


def set_internal_state_around(original, self, recv_req, *args, **kwargs):
    server_args = getattr(recv_req, "server_args", None)
    if not isinstance(server_args, dict) or RESET_KEY not in server_args:
        return original(self, recv_req, *args, **kwargs)
    from sglang_patches.server.timing import runtime

    runtime.reset_stats()
    server_args.pop(RESET_KEY)
    return original(self, recv_req, *args, **kwargs)


def specs() -> list[HookSpec]:
    c = compat.current()
    return [c.GET_INTERNAL_STATE.hook("after", get_internal_state_after),
            c.SET_INTERNAL_STATE.hook("around", set_internal_state_around)]
