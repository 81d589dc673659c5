"""Simulated acceptance inside a scheduler process: where it touches SGLang, and the state it keeps.

Mechanism (SGLang 0.5.17). `eagle_utils.eagle_sample` (the verify's sampling step, after the target
forward, outside CUDA graphs) imports `SIMULATE_ACC_LEN` and `generate_simulated_accept_index` from
`spec_utils` *at call time* and, when `SIMULATE_ACC_LEN > 0`, replaces the real verify result with
what `generate_simulated_accept_index` returns and writes (predict, num_correct_drafts). The overlay:
1. sets `spec_utils.SIMULATE_ACC_LEN` to 1.0 (only the branch switch: the value is not used by the
   replacement) and records the change with the registry, whose undo() restores it; refused when the user already set SGLANG_SIMULATE_ACC_LEN;
2. hooks `generate_simulated_accept_index` (around, through the registry): the replacement draws
   one accept length per request from the rates (`sampler.ChainSampler`) instead of one for the batch.
Before touching anything it checks that `eagle_sample` still reads both names at call time from
`spec_utils` and still gates the branch on `SIMULATE_ACC_LEN > 0`; otherwise one-line refusal.
"""
from __future__ import annotations

import importlib
import inspect
import logging

from sglang_patches import compat
from sglang_patches.errors import PatchTargetError, UserError
from sglang_patches.server.hooks import REGISTRY, HookSpec

logger = logging.getLogger("sglang_patches")

# The SGLang contact points (compat/v0_5_17.py, section simulate_acceptance), by the names used below.
_C = compat.current()
SIM_FUNCTION_PARAMS = _C.SIM_ACCEPT_INDEX.params
SPEC_UTILS = _C.SIM_SWITCH.module
SIM_SWITCH = _C.SIM_SWITCH.name               # module constant of SPEC_UTILS; > 0 enters the branch
SIM_TOKEN_MODE = _C.SIM_TOKEN_MODE.name       # module constant of SPEC_UTILS: "fixed" | "real-draft-token"
SIM_CALLER = (_C.SIM_CALLER.module, _C.SIM_CALLER.path)
SIM_CALLER_MUST_READ = _C.SIM_CALLER_MUST_READ
SPEC_SETTINGS = (_C.GET_SPEC.module, _C.GET_SPEC.path)  # .speculative_eagle_topk at the first call

SWITCH_VALUE = 1.0
_state = {"rates": None, "sampler": None, "switch_original": None, "enabled": False, "seed": 0}


def _caller_source() -> str:
    module_name, func_name = SIM_CALLER
    try:
        func = getattr(importlib.import_module(module_name), func_name)
        return inspect.getsource(inspect.unwrap(func))
    except (ImportError, AttributeError, OSError, TypeError) as exc:
        raise PatchTargetError(f"simulated acceptance: {module_name}.{func_name} cannot be read ({exc}); "
                               f"this SGLang is not supported by --simulate-acceptance") from None


def validate() -> None:
    """Refuse (one line) when SGLang's simulation branch is not where this module expects it, or
    when SGLANG_SIMULATE_ACC_LEN is already on (two simulations would be ambiguous)."""
    src = _caller_source()
    missing = [s for s in SIM_CALLER_MUST_READ if s not in src]
    if missing:
        raise PatchTargetError(f"simulated acceptance: {'.'.join(SIM_CALLER)} no longer contains {missing} "
                               f"(SGLang's simulation branch changed); this SGLang is not supported by "
                               f"--simulate-acceptance")
    spec_utils = importlib.import_module(SPEC_UTILS)
    for name in (SIM_SWITCH, SIM_TOKEN_MODE):
        if not hasattr(spec_utils, name):
            raise PatchTargetError(f"simulated acceptance: {SPEC_UTILS}.{name} is missing; this SGLang is "
                                   f"not supported by --simulate-acceptance")
    if not _state["enabled"] and getattr(spec_utils, SIM_SWITCH) > 0:
        raise UserError(f"SGLANG_SIMULATE_ACC_LEN={getattr(spec_utils, SIM_SWITCH)} is set together with "
                        f"--simulate-acceptance; unset SGLANG_SIMULATE_ACC_LEN (one simulation at a time)")


def enable(rates: list[float], seed: int = 0) -> None:
    """Turn SGLang's simulation branch on for the rates (after the hook is applied)."""
    spec_utils = importlib.import_module(SPEC_UTILS)
    if not _state["enabled"]:
        _state["switch_original"] = getattr(spec_utils, SIM_SWITCH)
        REGISTRY.record_change(_C.SIM_SWITCH, disable, what="simulation switch")
    setattr(spec_utils, SIM_SWITCH, SWITCH_VALUE)
    _state.update(rates=list(rates), sampler=None, enabled=True, seed=seed)
    from sglang_patches.vocab.rates import accept_length

    logger.warning("sglang_patches: SIMULATED ACCEPTANCE (benchmark only, not real serving): every verify "
                   "result is replaced; conditional per-position rates %s, expected accept length %.3f at "
                   "%d steps", list(rates), accept_length(rates), len(rates))


def disable() -> None:
    if not _state["enabled"]:
        return
    spec_utils = importlib.import_module(SPEC_UTILS)
    setattr(spec_utils, SIM_SWITCH, _state["switch_original"])
    _state.update(rates=None, sampler=None, enabled=False, switch_original=None)


def active_rates() -> list[float] | None:
    return list(_state["rates"]) if _state["enabled"] else None


def _check_topk() -> None:
    module_name, func_name = SPEC_SETTINGS
    try:
        topk = getattr(getattr(importlib.import_module(module_name), func_name)(), "speculative_eagle_topk", None)
    except Exception:  # noqa: BLE001 - no server context (tests call the hook directly)
        topk = None
    if topk is not None and topk > 1:
        raise RuntimeError(f"sglang_patches: simulated acceptance is defined for chains (topk 1), "
                           f"the server runs topk {topk}; restart without --simulate-acceptance or with topk 1")


def _sampler(device, spec_steps: int):
    from sglang_patches.vocab.rates import fit_to_steps
    from sglang_patches.server.simulate.sampler import ChainSampler

    s = _state["sampler"]
    if s is None or s.steps != spec_steps or s.device != device:
        _check_topk()
        rates = fit_to_steps(_state["rates"], spec_steps)
        s = _state["sampler"] = ChainSampler(rates, spec_steps, device, seed=_state["seed"])
    return s


def simulated_accept_index(original, accept_index, predict, num_correct_drafts, candidates, target_predict,
                           bs, spec_steps, simulate_acc_len=None, simulate_acc_method=None,
                           simulate_acc_token_mode=None):
    """AROUND spec_utils.generate_simulated_accept_index: per-request accept lengths from the rates."""
    if not _state["enabled"]:
        return original(accept_index, predict, num_correct_drafts, candidates, target_predict, bs, spec_steps,
                        simulate_acc_len=simulate_acc_len, simulate_acc_method=simulate_acc_method,
                        simulate_acc_token_mode=simulate_acc_token_mode)
    mode = simulate_acc_token_mode or getattr(importlib.import_module(SPEC_UTILS), SIM_TOKEN_MODE)
    sampler = _sampler(accept_index.device, spec_steps)
    return sampler.write_verify_result(accept_index=accept_index, predict=predict,
                                       num_correct_drafts=num_correct_drafts, candidates=candidates,
                                       target_predict=target_predict, bs=bs, spec_steps=spec_steps,
                                       token_mode=mode)


def specs() -> list[HookSpec]:
    return [_C.SIM_ACCEPT_INDEX.hook("around", simulated_accept_index,
                                     note="per-request simulated accept lengths (benchmark only)")]
