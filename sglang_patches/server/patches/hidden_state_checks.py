"""Load-time and runtime hidden-state checks inside every scheduler process (the `checks` feature).

Load time (before EagleDraftWorker.init_attention_backends, i.e. after the drafter's weights are
loaded and the target's aux-capture list is set, before any draft CUDA graph is captured): the
numbers of the loaded modules go through the same rule set as preflight
(`vocab/hidden_state.py`), so the messages and fixes are preflight's. Runtime (entry of
draft-extend, prefill and decode): the incoming hidden-state width must equal `fc.in_features`;
when it does not, the same rule set words the error. Shape metadata only: no synchronization,
nothing inside captured graphs. A load-time mismatch under the drop-in launcher ends the server
with one line and exit code 4 (server/deliberate_stop.py); elsewhere it raises HiddenStateMismatch.
"""
from __future__ import annotations

import dataclasses
import logging

from sglang_patches import compat
from sglang_patches.server.hooks import HookSpec
from sglang_patches.vocab.capture import capture_indices
from sglang_patches.vocab.hidden_state import SGLANG_DEFAULT_AUX_LAYERS, HiddenStateNumbers, hidden_state_findings

logger = logging.getLogger("sglang_patches.checks")
_NUMBERS = "_sglang_patches_hidden_state"  # load-time numbers kept on the worker for the runtime check


class HiddenStateMismatch(RuntimeError):
    """Raised inside the server: the drafter would silently skip its fc and accept nothing."""


def _text_config(config):
    return getattr(config, "text_config", None) or config


def _message(findings) -> str:
    return "; ".join(f"{f.code} {f.message}; fix: {f.fix}" for f in findings)


def _width(layer, torch_name: str, sglang_name: str):
    """A linear layer's full width: torch.nn.Linear's in/out_features (the Llama head's fc), or SGLang's
    parallel linear layers' input/output_size (the MLA head's ColumnParallelLinear fc)."""
    value = getattr(layer, torch_name, None)
    return value if value is not None else getattr(layer, sglang_name, None)


def _text_model(target_model):
    """The causal LM that captures: itself, or the language model a multimodal wrapper holds
    (KimiK25ForConditionalGeneration.language_model, a DeepseekV3ForCausalLM)."""
    return getattr(target_model, "language_model", None) or target_model


def load_time_numbers(self) -> HiddenStateNumbers:
    """The shared rule set's numbers, read from the loaded EagleDraftWorker (`self`)."""
    draft_model = self.draft_runner.model
    fc = getattr(getattr(draft_model, "model", draft_model), "fc", None)
    target_model = self.target_worker.model_runner.model
    text_model = _text_model(target_model)
    target_inner = getattr(text_model, "model", text_model)
    dcfg, tcfg = _text_config(draft_model.config), _text_config(target_model.config)
    algorithm = getattr(self.speculative_algorithm, "name", None) or str(self.speculative_algorithm)
    # SGLang picks the drafter class from its config's architectures; the EAGLE-3 heads are the
    # classes named *Eagle3* (LlamaForCausalLMEagle3, Eagle3DeepseekV2ForCausalLM).
    drafter = type(draft_model).__name__
    eagle3 = "eagle3" in drafter.lower()
    fc_in, fc_out = _width(fc, "in_features", "input_size"), _width(fc, "out_features", "output_size")
    hidden_in = getattr(dcfg, "target_hidden_size", None) or dcfg.hidden_size
    eagle_cfg = getattr(dcfg, "eagle_config", None)
    ids = eagle_cfg.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle_cfg, dict) else None
    capture = bool(getattr(target_model, "capture_aux_hidden_states", False)
                   or getattr(text_model, "capture_aux_hidden_states", False))
    layers = list(getattr(target_inner, "layers_to_capture", []) or [])
    n_layers = getattr(tcfg, "num_hidden_layers", None)
    # the target's forward captures the input of layer i when `i in layers_to_capture`, i < L
    captured = {c for c in layers if n_layers is None or 0 <= c < n_layers} if capture else set()
    if not (capture and layers) and n_layers:
        # no capture set (any algorithm but EAGLE3): the layers SGLang would capture for this class
        layers = capture_indices((type(text_model).__name__, type(target_model).__name__), n_layers, None)
    return HiddenStateNumbers(
        algorithm=algorithm, drafter=drafter, drafter_eagle3=eagle3,
        eagle3_evidence=(f"architecture {drafter}",) if eagle3 else (),
        fc_in=fc_in, fc_out=fc_out, draft_hidden=dcfg.hidden_size, target_hidden=tcfg.hidden_size,
        hidden_in=hidden_in,
        drafter_aux=fc_in // hidden_in if fc_in and fc_in % hidden_in == 0 else SGLANG_DEFAULT_AUX_LAYERS,
        aux_capture=capture, captured=len(captured),
        layers_desc=f"layers {list(ids)}" if ids else f"SGLang's default layers {layers}",
        layer_ids_given=ids is not None, drafter_config="the drafter's config.json")


def load_time_check(self) -> None:
    """BEFORE EagleDraftWorker.init_attention_backends."""
    from sglang_patches.vocab.overlay_config import OverlayConfig

    numbers = load_time_numbers(self)
    findings = hidden_state_findings(numbers)
    armed = numbers.drafter_eagle3 and numbers.aux_capture and numbers.fc_in is not None
    setattr(self, _NUMBERS, numbers if armed else None)  # the runtime check runs only when armed
    if not findings:
        logger.info("sglang_patches: hidden-state check passed (fc in=%s)", numbers.fc_in)
        return
    config = OverlayConfig.from_env() or OverlayConfig()
    if config.allow_hidden_state_mismatch:
        logger.warning("sglang_patches: HIDDEN-STATE MISMATCH (allowed by --allow-hidden-state-mismatch): %s",
                       _message(findings))
        setattr(self, _NUMBERS, None)  # the user chose to run it: do not stop at runtime either
        return
    from sglang_patches.server import deliberate_stop

    reason = "HIDDEN-STATE MISMATCH: " + _message(findings)
    # under the drop-in launcher: it prints the reason as one line, kills the tree and exits
    # EXIT_MISMATCH, instead of SGLang's traceback and process-tree kill (deliberate_stop's docstring)
    if deliberate_stop.request_mismatch_stop(reason):
        deliberate_stop.wait_to_be_stopped()
    raise HiddenStateMismatch("sglang_patches: " + reason)


def _check_width(self, width: int, rows: int, where: str) -> None:
    numbers = self.__dict__.get(_NUMBERS)
    if numbers is None or rows == 0 or width == numbers.fc_in:
        return  # the per-cycle cost: one dict lookup and one comparison of shape metadata
    findings = hidden_state_findings(dataclasses.replace(numbers, observed_width=width, observed_at=where))
    raise HiddenStateMismatch("sglang_patches: HIDDEN-STATE MISMATCH: " + _message(findings))


def prefill_runtime_check(self, batch, target_hidden_states, *args, **kwargs) -> None:
    if target_hidden_states is not None:
        shape = target_hidden_states.shape
        _check_width(self, shape[-1], shape[0], "prefill draft-extend")


def decode_runtime_check(self, batch, batch_result, *args, **kwargs) -> None:
    hidden = getattr(getattr(batch_result, "logits_output", None), "hidden_states", None)
    if hidden is not None:
        _check_width(self, hidden.shape[-1], hidden.shape[0], "decode draft-extend")


def specs() -> list[HookSpec]:
    c = compat.current()
    return [c.INIT_ATTENTION_BACKENDS_CHECK.hook("before", load_time_check),
            c.DRAFT_EXTEND_PREFILL_CHECK.hook("before", prefill_runtime_check),
            c.DRAFT_EXTEND_DECODE_CHECK.hook("before", decode_runtime_check)]
