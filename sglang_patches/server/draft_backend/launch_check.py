"""Launcher-side checks for `--draft-backend triton`, before anything is spawned: what can be read
from the drafter's config.json (architecture, effective dtype), the speculative algorithm, and
whether the installed SGLang's forwards are the ones its compat file pins and we re-implement.
Refuse with a one-line UserError, or with `--draft-backend-fallback` warn and run the stock
(sglang) draft backend. `--draft-weights fp8` / `fp8-weight-only` (check_weights): flags that quantise the drafter
otherwise are refused with or without the fallback; a GPU without FP8 is refused, or with the
fallback runs the triton backend with bf16 drafter weights after a warning.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys

from sglang_patches.server.draft_backend import ARCHITECTURE, DTYPES, FEATURE
from sglang_patches.errors import UserError
from sglang_patches.vocab.overlay_config import is_fp8

from sglang_patches.launch_args import flag_value as _flag_value

_DTYPE_NAMES = {"half": "float16", "float16": "float16", "fp16": "float16", "bfloat16": "bfloat16",
                "bf16": "bfloat16", "float": "float32", "float32": "float32", "fp32": "float32"}


def effective_dtype(config: dict, dtype_flag: str | None) -> str:
    """The dtype SGLang will run the drafter in (model_config._get_and_verify_dtype, non-Gemma)."""
    flag = (dtype_flag or "auto").lower()
    if flag != "auto":
        return _DTYPE_NAMES.get(flag, flag)
    raw = config.get("dtype") or config.get("torch_dtype")
    name = _DTYPE_NAMES.get(str(raw).replace("torch.", "").lower(), None) if raw else None
    if name is None or name == "float32":
        return "float16"  # SGLang: float32 (or unset) checkpoints are served in float16 under --dtype auto
    return name


# SGLang's Kimi-K2.5 MLA EAGLE-3 head (models/kimi_k25_eagle3.py): a DeepSeek-V2 MLA layer, not the
# Llama layer the triton draft backend's kernels and FP8 drafter linears replace ops of.
MLA_HEAD = "Eagle3DeepseekV2ForCausalLM"


def head_problem(architectures, where: str, *, backend: str, weights: str) -> str | None:
    """Why the Llama-only draft features (`--draft-backend triton`, `--draft-weights fp8` /
    `fp8-weight-only`, which runs through it) cannot serve a drafter of these architectures, or None.
    One line naming the drafter and the fix; checked before anything is built or spawned."""
    fp8 = is_fp8(weights)
    if not (backend == "triton" or fp8) or not architectures or list(architectures)[:1] == [ARCHITECTURE]:
        return None
    head = architectures[0]
    flags = " and ".join(f for f, on in (("--draft-backend triton", backend == "triton"),
                                         (f"--draft-weights {weights}", fp8)) if on)
    what = f"{head}, an MLA EAGLE-3 head" if head == MLA_HEAD else head
    verb = "support" if " and " in flags else "supports"
    return (f"{flags} {verb} {ARCHITECTURE} drafters only (the triton draft backend); {where} is {what}; "
            f"drop {flags} (the stock draft backend serves it)")


def problem(argv: list[str]) -> str | None:
    """Why `--draft-backend triton` cannot serve this SGLang command line, or None."""
    algo = _flag_value(argv, "--speculative-algorithm")
    if (algo or "").upper() != "EAGLE3":
        return f"--draft-backend triton needs --speculative-algorithm EAGLE3 (got {algo or 'none'})"
    for flag, why in (("--enable-torch-compile", "is not tested under torch.compile"),
                      ("--enable-deterministic-inference", "would change the deterministic numerics"),
                      ("--rl-on-policy-target", "would change the on-policy (native-op) numerics")):
        if flag in argv or any(a.startswith(flag + "=") for a in argv):
            return f"--draft-backend triton {why} ({flag}); use --draft-backend sglang"
    draft = _flag_value(argv, "--speculative-draft-model-path", "--speculative-draft-model")
    if draft and os.path.isdir(draft):  # hub ids: the in-server check (prepare.check_model) decides
        path = os.path.join(draft, "config.json")
        try:
            with open(path, encoding="utf-8") as fh:
                cfg = json.load(fh)
        except (OSError, ValueError, RecursionError) as err:
            return f"--draft-backend triton: cannot read {path} ({type(err).__name__})"
        if not isinstance(cfg, dict):
            return f"--draft-backend triton: {path} is not a JSON object"
        archs = cfg.get("architectures") or []
        if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
            return (f"--draft-backend triton: {path}: architectures must be a list of class names, "
                    f"got {str(archs)[:60]!r}; fix config.json")
        if archs[:1] != [ARCHITECTURE]:
            return (f"--draft-backend triton supports {ARCHITECTURE} drafters only; {path} has architectures "
                    f"{archs}; use --draft-backend sglang")
        dtype = effective_dtype(cfg, _flag_value(argv, "--dtype"))
        if dtype not in DTYPES:
            return (f"--draft-backend triton supports {'/'.join(DTYPES)} drafters only; this one would run in "
                    f"{dtype}; use --draft-backend sglang or --dtype bfloat16")
    from sglang_patches.server.draft_backend import refusal

    return refusal()


def flags_problem(argv: list[str], weights: str = "fp8") -> str | None:
    """Why the flags contradict `--draft-weights fp8` / `fp8-weight-only` (`weights`, the value the
    messages name; refused with or without the fallback), or None."""
    quant = _flag_value(argv, "--speculative-draft-model-quantization")
    if quant is not None and quant.lower() != "unquant":
        return (f"--draft-weights {weights} and --speculative-draft-model-quantization {quant} both quantise the "
                "drafter; drop one of them")
    target_quant = _flag_value(argv, "--quantization")
    if quant is None and target_quant is not None and target_quant.lower() != "unquant":
        return (f"--draft-weights {weights} with --quantization {target_quant}: SGLang quantises the drafter with the "
                f"target's method too; add --speculative-draft-model-quantization unquant (the drafter stays "
                f"bf16 for --draft-weights {weights}) or drop --draft-weights {weights}")
    device = (_flag_value(argv, "--device") or "cuda").lower()
    if device not in ("cuda", "auto"):
        return f"--draft-weights {weights} needs a CUDA GPU (got --device {device}); use --draft-weights bf16"
    from sglang_patches.server.draft_backend.fp8_weights import fp8_inputs_problem

    return fp8_inputs_problem(weights)  # the benchmark A/B's environment knob, checked again in the server


def gpu_problem(weights: str = "fp8") -> str | None:
    """Why the visible GPUs cannot run FP8 weights (compute capability < 8.9), or None. A machine
    without a CUDA GPU is left to the launcher's GPU check."""
    try:
        from sglang_patches.server.draft_backend.fp8_weights import capability_problem

        return capability_problem(None, weights)
    except ImportError:  # no torch: the launcher's GPU check says so
        return None


def weights_problem(argv: list[str], weights: str = "fp8") -> str | None:
    """Why `--draft-weights fp8` cannot serve this SGLang command line (flags and the visible GPUs;
    nothing is changed), or None."""
    return flags_problem(argv, weights) or gpu_problem(weights)


def check_weights(config, argv: list[str], *, fallback: bool = False, warnings: list | None = None):
    """The OverlayConfig to run with when config asks for --draft-weights fp8: unchanged, or (GPU
    without FP8 and --draft-backend-fallback) draft_weights bf16 after one warning line, the triton
    backend kept. UserError (one line, exit 2) for contradicting flags, with or without the fallback,
    and for a GPU without FP8 without it. Reads flags and the GPUs only: nothing is changed. With
    `warnings` (a list) the warning line is appended there, for the caller to print once every later
    check has passed, instead of printed now."""
    weights = getattr(config, "draft_weights", "bf16")
    if not is_fp8(weights):
        return config
    reason = flags_problem(argv, weights)
    if reason:
        raise UserError(reason)
    reason = gpu_problem(weights)
    if reason is None:
        return config
    if not fallback:
        raise UserError(reason + " (or add --draft-backend-fallback to run with bf16 drafter weights)")
    line = (f"{reason.split('; use --draft-weights bf16')[0]}; running the triton draft backend with bf16 "
            "drafter weights (--draft-backend-fallback)")
    if warnings is None:
        print(f"sglang-patches: warning: {line}", file=sys.stderr)
    else:
        warnings.append(line)
    return dataclasses.replace(config, draft_weights="bf16")


def resolve(config, argv: list[str], *, fallback: bool):
    """Return the OverlayConfig to run with: unchanged, or the sglang backend after a warning.
    Raises UserError (one line, exit 2) when triton is unsupported and fallback is off."""
    if config.draft_backend != "triton":
        return config
    config = check_weights(config, argv, fallback=fallback)  # flags: refused; a GPU without FP8: bf16 weights
    reason = problem(argv)
    if reason is None:
        return config
    if not fallback:
        raise UserError(reason + ("" if "fallback" in reason else " (or add --draft-backend-fallback)"))
    dropped = " with bf16 drafter weights" if is_fp8(config.draft_weights) else ""
    print(f"sglang-patches: warning: {reason}; falling back to --draft-backend sglang{dropped} "
          "(--draft-backend-fallback)", file=sys.stderr)
    return dataclasses.replace(config, draft_backend="sglang", draft_weights="bf16",
                               patches=tuple(p for p in config.patches if p != FEATURE))
