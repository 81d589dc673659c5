"""Load-time and runtime hidden-state checks inside every scheduler process (the `checks` feature).

Load time (before EagleDraftWorker.init_attention_backends, i.e. after the drafter's weights are
loaded and the target's aux-capture list is set, before any draft CUDA graph is captured): the
drafter's `fc` must match what the target will actually feed it. Runtime (entry of draft-extend,
prefill and decode): the incoming hidden-state width must equal `fc.in_features`. Shape metadata
only: no synchronization, nothing inside captured graphs.
"""
from __future__ import annotations

import logging

from sglang_patches.hooks import HookSpec

logger = logging.getLogger("sglang_patches.checks")
W2 = "sglang.srt.speculative.eagle_worker_v2"
_FC_IN = "_sglang_patches_fc_in"


class HiddenStateMismatch(RuntimeError):
    """Raised inside the server: the drafter would silently skip its fc and accept nothing."""


def diagnose(*, algorithm: str, has_fc: bool, fc_in: int | None, fc_out: int | None, draft_hidden: int,
             target_hidden: int, capture_aux: bool, captured_layers: list[int] | None) -> str | None:
    """Return a one-paragraph problem description, or None when the pair is consistent."""
    n = len(captured_layers or [])
    if has_fc and algorithm != "EAGLE3":
        return (f"drafter is EAGLE-3 (fc expects {fc_in} input features) but --speculative-algorithm is "
                f"{algorithm}: the target captures no auxiliary layers and feeds final-layer states of width "
                f"{target_hidden}, so SGLang silently skips fc and acceptance collapses to ~1. "
                f"Fix: --speculative-algorithm EAGLE3")
    if not has_fc:
        if algorithm == "EAGLE3":
            return ("--speculative-algorithm EAGLE3 but the drafter has no fc layer (not an EAGLE-3 head); "
                    "fix: use --speculative-algorithm EAGLE for this drafter, or an EAGLE-3 drafter")
        return None
    if not capture_aux:
        return (f"drafter fc expects {fc_in} = aux states of the target, but the target captures no auxiliary "
                f"hidden states; fix: --speculative-algorithm EAGLE3 and a target model that supports EAGLE-3 capture")
    if fc_in != target_hidden * n:
        return (f"drafter fc expects {fc_in} input features but the target feeds {n} x {target_hidden} = "
                f"{target_hidden * n} (captured layers {captured_layers}); fix: set the drafter's "
                f"eagle_config.eagle_aux_hidden_state_layer_ids / num_aux_hidden_states to match its training")
    if fc_out != draft_hidden:
        return (f"drafter fc outputs {fc_out} features but the draft layer is {draft_hidden} wide; "
                f"the drafter checkpoint/config is inconsistent")
    return None


def _text_config(config):
    return getattr(config, "text_config", None) or config


def load_time_check(self) -> None:
    """BEFORE EagleDraftWorker.init_attention_backends."""
    from sglang_patches.overlay_config import OverlayConfig

    draft_model = self.draft_runner.model
    inner = getattr(draft_model, "model", draft_model)
    fc = getattr(inner, "fc", None)
    target_model = self.target_worker.model_runner.model
    target_inner = getattr(target_model, "model", target_model)
    problem = diagnose(
        algorithm=self.speculative_algorithm.name if hasattr(self.speculative_algorithm, "name")
        else str(self.speculative_algorithm),
        has_fc=fc is not None, fc_in=getattr(fc, "in_features", None), fc_out=getattr(fc, "out_features", None),
        draft_hidden=_text_config(draft_model.config).hidden_size,
        target_hidden=_text_config(target_model.config).hidden_size,
        capture_aux=bool(getattr(target_model, "capture_aux_hidden_states", False)),
        captured_layers=list(getattr(target_inner, "layers_to_capture", []) or []))
    setattr(self, _FC_IN, getattr(fc, "in_features", None))
    if problem is None:
        logger.info("sglang_patches: hidden-state check passed (fc in=%s)", getattr(fc, "in_features", None))
        return
    config = OverlayConfig.from_env() or OverlayConfig()
    if config.allow_hidden_state_mismatch:
        logger.warning("sglang_patches: HIDDEN-STATE MISMATCH (allowed by --allow-hidden-state-mismatch): %s", problem)
        setattr(self, _FC_IN, None)  # the user chose to run it: do not stop at runtime either
        return
    raise HiddenStateMismatch("sglang_patches: HIDDEN-STATE MISMATCH: " + problem)


def _check_width(self, width: int, rows: int, where: str) -> None:
    expected = self.__dict__.get(_FC_IN)
    if expected is None or rows == 0 or width == expected:
        return
    raise HiddenStateMismatch(
        f"sglang_patches: HIDDEN-STATE MISMATCH at {where}: drafter fc expects {expected} features, "
        f"got hidden states of width {width}; fix: --speculative-algorithm EAGLE3 (or a drafter trained for this target)")


def prefill_runtime_check(self, batch, target_hidden_states, *args, **kwargs) -> None:
    if target_hidden_states is not None:
        shape = target_hidden_states.shape
        _check_width(self, shape[-1], shape[0], "prefill draft-extend")


def decode_runtime_check(self, batch, batch_result, *args, **kwargs) -> None:
    hidden = getattr(getattr(batch_result, "logits_output", None), "hidden_states", None)
    if hidden is not None:
        _check_width(self, hidden.shape[-1], hidden.shape[0], "decode draft-extend")


def specs() -> list[HookSpec]:
    f = "checks"
    return [
        HookSpec(f"{W2}:EagleDraftWorker.init_attention_backends", "before", load_time_check,
                 params=("self",), feature=f),
        HookSpec(f"{W2}:EagleDraftWorker._draft_extend_for_prefill", "before", prefill_runtime_check,
                 params=("self", "batch", "target_hidden_states"), feature=f),
        HookSpec(f"{W2}:EagleDraftWorker._draft_extend_for_decode", "before", decode_runtime_check,
                 params=("self", "batch", "batch_result"), feature=f),
    ]
