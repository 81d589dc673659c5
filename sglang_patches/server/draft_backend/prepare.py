"""Load-time step of the triton draft backend: decide, once per drafter, which ops our kernels take
over, and mark exactly the drafter's modules (`FLAG` in their `__dict__`) so the forward hooks never
act on the target (which shares `LlamaMLP`).

Runs before `EagleDraftWorker.init_attention_backends`: the drafter's weights are loaded (dummy or
real), no CUDA graph is captured yet. Nothing here runs per forward.
"""
from __future__ import annotations

import dataclasses
import logging
import os

from sglang_patches import compat
from sglang_patches.server.draft_backend import fp8_weights
from sglang_patches.server.draft_backend.names import ARCHITECTURE, FLAG
from sglang_patches.server.hooks import REGISTRY

logger = logging.getLogger("sglang_patches")
SUPPORTED_DTYPES = ("bfloat16", "float16", "float32")  # the launcher admits bf16/fp16 only; fp32 for CPU tests


@dataclasses.dataclass(frozen=True)
class LayerPlan:
    input: bool      # input layer: fused_draft_input
    add_norm: bool   # layers > 0: hidden_norm(h, residual) -> fused_add_rmsnorm
    post_attn: bool  # post_attention_layernorm(h, residual) -> fused_add_rmsnorm


@dataclasses.dataclass(frozen=True)
class ModelPlan:
    fc: bool                       # input_norm / fc_norm before fc -> aux_norm
    eps: float = 0.0
    stacked: object = None         # [K, Hin] fc_norm weights (the params' .data are views of it)
    ptrs: tuple = ()               # fc_norm weight data_ptrs at prepare time (weights replaced -> stock path)
    fc8: object = None             # --draft-weights fp8: fp8_weights.Fp8Weights of fc (None: SGLang's fc)


class Unsupported(RuntimeError):
    pass


class Fp8Unsupported(Unsupported):
    """--draft-weights fp8 cannot run here (the fix is --draft-weights bf16, not another backend)."""


def _plain_rmsnorm(m) -> bool:
    """An RMSNorm whose stock CUDA path is plain sgl_kernel rmsnorm / fused_add_rmsnorm semantics."""
    RMSNorm = compat.current().RMSNORM.resolve()
    w = getattr(m, "weight", None)
    return (isinstance(m, RMSNorm) and m.has_weight and not m.cast_x_before_out_mul and not m.fp32_residual
            and m.override_orig_dtype is None and m.variance_size_override is None
            and getattr(m, "_fused_pad_kernel", None) is None
            # 0.5.23: a norm given the FP8 static input quant of its consumer (fuse_input_quant) may
            # return (fp8, scale) from forward_cuda; ours would not, so such a norm stays SGLang's
            and getattr(m, "_quant_linear", None) is None
            and w is not None and w.dim() == 1 and w.is_contiguous() and w.is_floating_point()
            and isinstance(m.variance_epsilon, float) and m.variance_epsilon > 0)


def _deterministic_reason() -> str | None:
    c = compat.current()
    if c.BATCH_INVARIANT.resolve()():
        return "batch-invariant (deterministic) mode is on"
    try:
        target = c.GET_EXEC.resolve()().deterministic.rl_on_policy_target
    except Exception:  # noqa: BLE001 - no published runtime context: nothing to honour
        target = None
    if target is not None:
        return f"rl_on_policy_target={target!r} forces SGLang's native ops"
    return None


def check_model(model) -> None:
    """Raise Unsupported(one line) when the drafter as a whole cannot use the triton backend."""
    if type(model) is not compat.current().EAGLE3_DRAFTER.resolve():
        raise Unsupported(f"drafter is {type(model).__name__}, the triton draft backend supports {ARCHITECTURE} only")
    p = next(model.parameters())
    dtype = str(p.dtype).replace("torch.", "")
    if dtype not in SUPPORTED_DTYPES:
        raise Unsupported(f"drafter dtype {dtype} is not supported (bfloat16/float16)")
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    if not (p.device.type == "cuda" or (p.device.type == "cpu" and interp)):
        raise Unsupported(f"drafter is on {p.device.type}; the triton draft backend needs CUDA")
    import torch

    if p.device.type == "cuda" and getattr(torch.version, "hip", None):
        raise Unsupported("ROCm is not supported by the triton draft backend (CUDA only)")
    reason = _deterministic_reason()
    if reason:
        raise Unsupported(f"{reason}; the triton draft backend would change numerics")


def _layer_plan(layer) -> LayerPlan:
    hn, iln, pan = layer.hidden_norm, layer.input_layernorm, layer.post_attention_layernorm
    same_eps = _plain_rmsnorm(hn) and _plain_rmsnorm(iln) and hn.variance_epsilon == iln.variance_epsilon
    return LayerPlan(input=bool(layer.is_input_layer and same_eps),
                     add_norm=bool(not layer.is_input_layer and _plain_rmsnorm(hn)),
                     post_attn=_plain_rmsnorm(pan))


def _model_plan(inner) -> ModelPlan:
    import torch

    norms = ([inner.input_norm] if inner.input_norm is not None else []) + list(inner.fc_norm or [])
    if not norms or not all(_plain_rmsnorm(n) for n in norms):
        return ModelPlan(fc=False)
    eps = {n.variance_epsilon for n in norms}
    if len(eps) != 1:
        return ModelPlan(fc=False)
    if inner.fc_norm is None:
        return ModelPlan(fc=True, eps=eps.pop())
    ws = [n.weight for n in inner.fc_norm]
    if len({(w.shape, w.dtype, w.device) for w in ws}) != 1:
        return ModelPlan(fc=False)
    with torch.no_grad():
        stacked = torch.stack([w.data for w in ws]).contiguous()
        originals = [w.data for w in ws]
        for k, w in enumerate(ws):  # in-place weight updates (copy_) now land in `stacked`
            w.data = stacked[k]

    def restore():  # each weight gets its own storage back, holding the current values
        with torch.no_grad():
            for k, w in enumerate(ws):
                originals[k].copy_(stacked[k])
                w.data = originals[k]

    REGISTRY.record_change(compat.current().FC_NORM_WEIGHTS, restore, what=f"{len(ws)} fc_norm weights")
    return ModelPlan(fc=True, eps=eps.pop(), stacked=stacked, ptrs=tuple(w.data_ptr() for w in ws))


def _fp8_plan(model, weights, strict, target):
    """--draft-weights fp8: the modules that take FP8 (fp8_weights.Fp8Plan), None for bf16. Raises
    Fp8Unsupported when strict and the device or any module cannot; changes nothing."""
    if weights == "bf16":
        return None
    if weights not in fp8_weights.WEIGHTS:
        raise Fp8Unsupported(f"--draft-weights {weights!r} is not one of {', '.join(fp8_weights.WEIGHTS)}")
    knob = fp8_weights.fp8_inputs_problem(weights)  # the A/B knob install reads: refused before anything
    if knob:                                         # changes (also without the launcher: plugin, Engine)
        raise Fp8Unsupported(knob)
    why = fp8_weights.device_problem(model, weights)
    if why:
        if strict:
            raise Fp8Unsupported(why)
        logger.warning("sglang_patches: %s; the drafter keeps its bf16 weights (--draft-backend-fallback)", why)
        return None
    plan = fp8_weights.plan_drafter(model, target, weights)
    if plan.refused and strict:
        shown = "; ".join(f"{n} {w}" for n, w in list(plan.refused.items())[:3])
        more = len(plan.refused) - 3
        raise Fp8Unsupported(f"--draft-weights {weights} does not cover this drafter layout: {shown}"
                             + (f" (and {more} more)" if more > 0 else ""))
    if plan.refused:
        logger.warning("sglang_patches: --draft-weights %s: %s keep SGLang's bf16 path (--draft-backend-fallback)",
                       weights, "; ".join(f"{n} {w}" for n, w in plan.refused.items()))
    return plan


def prepare_drafter(model, weights: str | None = None, *, strict: bool | None = None, target=None) -> dict:
    """Mark the drafter's modules and, for weights "fp8" / "fp8-weight-only", install its FP8 linears;
    returns what was enabled. Raises Unsupported. Idempotent. `weights` / `strict` default to the overlay config's
    --draft-weights / not --draft-backend-fallback; `target`: the target model, when known."""
    if FLAG in model.__dict__:
        return model.__dict__[FLAG]
    c = compat.current()
    SiluAndMul, LlamaMLP = c.SILU_AND_MUL.resolve(), c.LLAMA_MLP.resolve()
    check_model(model)
    strict = _strict() if strict is None else strict
    fp8 = _fp8_plan(model, _weights() if weights is None else weights, strict, target)
    inner = model.model
    summary = {"input": 0, "add_norm": 0, "post_attn": 0, "silu": 0, "fc_norm": False, "layers": 0}
    for layer in inner.layers:
        plan = _layer_plan(layer)
        layer.__dict__[FLAG] = plan
        summary["layers"] += 1
        for key in ("input", "add_norm", "post_attn"):
            summary[key] += int(getattr(plan, key))
        mlp = layer.mlp
        if type(mlp) is LlamaMLP and isinstance(mlp.act_fn, SiluAndMul):
            mlp.__dict__[FLAG] = True
            summary["silu"] += 1
    mplan = _model_plan(inner)
    if fp8 is not None:
        stats, fc8 = fp8_weights.install(fp8)
        mplan = dataclasses.replace(mplan, fc8=fc8)
        summary["fp8"] = {"names": fp8.names, "refused": dict(fp8.refused), "notes": list(fp8.notes), **stats}
    inner.__dict__[FLAG] = mplan
    summary["fc_norm"] = mplan.fc
    model.__dict__[FLAG] = summary
    REGISTRY.record_change(c.PREPARE_DRAFTER, lambda: unprepare_drafter(model), what="drafter module marks")
    return summary


def unprepare_drafter(model) -> None:
    """Remove the marks (the fc_norm weights' storage is given back by the registry's undo)."""
    for m in model.modules():
        m.__dict__.pop(FLAG, None)


def marked_modules(model) -> list[str]:
    return [name for name, m in model.named_modules() if FLAG in m.__dict__]


def _strict() -> bool:
    from sglang_patches.vocab.overlay_config import OverlayConfig

    cfg = OverlayConfig.from_env()
    return not (cfg is not None and cfg.draft_backend_fallback)


def _weights() -> str:
    from sglang_patches.vocab.overlay_config import OverlayConfig

    cfg = OverlayConfig.from_env()
    return "bf16" if cfg is None else cfg.draft_weights


def _target_model(worker):
    """The target model of an EagleDraftWorker (its target_worker's model_runner.model), or None."""
    runner = getattr(getattr(worker, "target_worker", None), "model_runner", None)
    return getattr(runner, "model", None)


def before_init_attention_backends(self, *args, **kwargs) -> None:
    """HookSpec `before` EagleDraftWorker.init_attention_backends: prepare self.draft_runner.model."""
    runner = getattr(self, "draft_runner", None)
    model = getattr(runner, "model", None)
    if model is None:
        raise RuntimeError("sglang_patches triton_draft: EagleDraftWorker has no draft_runner.model; "
                           "this SGLang is not supported by --draft-backend triton")
    try:
        summary = prepare_drafter(model, target=_target_model(self))
    except Fp8Unsupported as err:  # strict only: with the fallback prepare_drafter keeps bf16 and goes on
        raise RuntimeError(f"sglang_patches: {err}; use --draft-weights bf16 or add --draft-backend-fallback") from None
    except Unsupported as err:
        if _strict():
            raise RuntimeError(f"sglang_patches --draft-backend triton: {err}; use --draft-backend sglang "
                               f"or add --draft-backend-fallback") from None
        logger.warning("sglang_patches: --draft-backend triton: %s; falling back to the sglang draft backend", err)
        return
    fp8 = summary.get("fp8")
    shown = {k: v for k, v in summary.items() if k != "fp8"}
    logger.info("sglang_patches: triton draft backend on %s (%s): %s%s", type(model).__name__,
                next(model.parameters()).dtype, shown,
                "" if fp8 is None else "; " + fp8_weights.describe(fp8, fp8["refused"], fp8.get("notes")))
