"""`--draft-weights fp8` / `fp8-weight-only` (with `--draft-backend triton`): the drafter's linear
layers run with FP8 e4m3 weights, one fp32 scale per output channel, quantised once at load by our
Triton kernel (kernels/fp8_linear.py: quantize_fp8_per_channel at load, fp8_linear per call).

Which kernel, per module, fixed at install (DEFAULT_FP8_INPUTS, of W8A8_MODULES): with `fp8`, gate_up
runs kernels/fp8_w8a8_linear.py (activations quantised per token to e4m3, native fp8 MMA) for 2..MAX_M
rows, and fp8_linear's GEMV path at 1 row; every other module (the lm_head included, unless
FP8_INPUTS_ENV names it), and every module under `fp8-weight-only`, runs fp8_linear (bf16
activations). The fp8 activation rows x8 [MAX_M, K] and their scales xs [MAX_M] are allocated in
install, one pair per K shared by the w8a8 modules of that K.

Which modules: of every drafter layer `self_attn.qkv_proj`, `self_attn.o_proj`, `mlp.gate_up_proj`,
`mlp.down_proj` (SGLang linear classes), the EAGLE-3 `model.fc` (a plain torch.nn.Linear) and the
draft `lm_head` (ParallelLMHead, or `embed_tokens` when the drafter ties them). Each must hold
SGLang's unquantised method (UnquantizedLinearMethod / UnquantizedEmbeddingMethod) and a 2-D
bf16/fp16 weight; anything else (a drafter quantised by --speculative-draft-model-quantization or
--quantization, a checkpoint's quantization_config) is a layout the kernel does not cover.

How, with no SGLang function patched: SGLang's linear layers call `self.quant_method.apply(self, x,
bias)` in forward (layers/linear.py), and `LogitsProcessor._compute_lm_head` calls
`quant_method.apply(lm_head, hidden, bias)` whenever `should_apply_lm_head_quant_method` is true,
which it is for any method class whose name is not in `_UNQUANTIZED_LM_HEAD_METHODS`. So on exactly
the drafter's modules `quant_method` becomes an `Fp8DraftLinearMethod` holding SGLang's original
method, the FP8 weight and the scales; its `apply` runs `fp8_linear` for a 2-D row-major input of 1
to MAX_M rows (the draft decode steps: rows = bs * topk; fp8_w8a8_linear instead at >= 2 rows for
the fp8-input modules under `fp8`) and SGLang's original method otherwise
(prefill and large draft-extend batches: the bf16 weight is kept, so those run SGLang's exact path).
Every other attribute (`embedding` of a tied lm_head, `apply_into`, `process_weights_after_loading`,
...) is the original's (`__getattr__`). `fc` has no quant_method: forward.model_forward calls
`Fp8Weights` for it. Undo (REGISTRY.record_change) puts every original method object back.

Memory: the bf16 weights stay, so the FP8 copies are extra (N*K bytes + 4*N per module), allocated
once here (before CUDA graph capture; after SGLang sized its KV pool, so they come out of the
headroom SGLang leaves free); a weight re-allocated later (its data_ptr changed) sends that module
back to SGLang's path. In-place weight updates after load (copy_ into the same storage) are not
re-quantised.
"""
from __future__ import annotations

import dataclasses
import os

from sglang_patches import compat
from sglang_patches.server.hooks import REGISTRY
from sglang_patches.vocab.overlay_config import DRAFT_WEIGHTS, is_fp8

WEIGHTS = DRAFT_WEIGHTS
# Modules (name suffix; the lm_head's plan name starts with "lm_head") that can run fp8 activations under
# --draft-weights fp8: the H200 sweep (benchmarks/results/2026-12-02-fp8-w8a8-sweep/) timed
# fp8_w8a8_linear 16-35 % faster than fp8_linear's MMA path on gate_up and lm_head at M = 8 and 32, and
# no faster (down, fc: slower) on qkv, o, down and fc, which stay on fp8_linear. M = 1 stays on the GEMV
# path everywhere (faster than either MMA kernel at one row).
W8A8_MODULES = ("mlp.gate_up_proj", "lm_head")
# Of those, the ones `fp8` runs with fp8 activations by default: gate_up only. The lm_head's logits decide
# each draft token by argmax, so rounding its input to e4m3 can flip near ties; consistent with that, on
# trained-8b at steps 5 (benchmarks/results/2026-12-04-fp8-draft-gu/, one server each) fp8 inputs on both
# read accept ratios 0.998 / 0.987 / 0.979 against the bf16 drafter, on gate_up alone 1.017 / 1.001 / 1.004,
# at the same greedy-pass draft time.
DEFAULT_FP8_INPUTS = ("mlp.gate_up_proj",)
# Read once at install: a comma list among gate_up, lm_head replaces DEFAULT_FP8_INPUTS (benchmark A/B:
# "gate_up,lm_head" is the earlier default, benchmarks/fp8_draft_bench.py case triton_fp8_a8lm).
FP8_INPUTS_ENV = "SGLANG_PATCHES_FP8_INPUTS"
FP8_INPUT_GROUPS = {"gate_up": W8A8_MODULES[0], "lm_head": W8A8_MODULES[1]}
MIN_CAPABILITY = (8, 9)  # FP8 e4m3 tensor-core conversions: Ada (8.9), Hopper (9.0) and later
LINEAR_NAMES = ("self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj")


def fp8_input_modules(env: dict | None = None) -> tuple[str, ...]:
    """DEFAULT_FP8_INPUTS, or the W8A8_MODULES that FP8_INPUTS_ENV names. ValueError (one line) for another name."""
    text = (os.environ if env is None else env).get(FP8_INPUTS_ENV)
    if text is None:
        return DEFAULT_FP8_INPUTS
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [n for n in names if n not in FP8_INPUT_GROUPS]
    if bad or not names:
        default = ", ".join(k for k, v in FP8_INPUT_GROUPS.items() if v in DEFAULT_FP8_INPUTS)
        raise ValueError(f"{FP8_INPUTS_ENV}={text!r}: give a comma list among {', '.join(FP8_INPUT_GROUPS)}, "
                         f"or unset it for the default ({default}); for none, --draft-weights fp8-weight-only")
    return tuple(FP8_INPUT_GROUPS[n] for n in FP8_INPUT_GROUPS if n in names)


def fp8_inputs_problem(weights: str, env: dict | None = None) -> str | None:
    """Why FP8_INPUTS_ENV cannot apply under --draft-weights `weights` (one line), or None: a value
    fp8_input_modules() refuses, or any value beside `fp8-weight-only` (bf16 inputs everywhere)."""
    env = os.environ if env is None else env
    if weights == "fp8":
        try:
            fp8_input_modules(env)
        except ValueError as err:
            return str(err)
    elif weights == "fp8-weight-only" and env.get(FP8_INPUTS_ENV) is not None:
        return (f"{FP8_INPUTS_ENV}={env[FP8_INPUTS_ENV]!r} applies to --draft-weights fp8 only; "
                "--draft-weights fp8-weight-only runs every module on bf16 inputs: unset it, or use --draft-weights fp8")
    return None


def runs_w8a8(name: str, weights: str = "fp8", modules: tuple[str, ...] = DEFAULT_FP8_INPUTS) -> bool:
    """Whether the plan module `name` runs fp8_w8a8_linear (2..MAX_M rows) under --draft-weights `weights`
    (`modules`: the W8A8_MODULES in use, fp8_input_modules())."""
    return weights == "fp8" and ((W8A8_MODULES[0] in modules and name.endswith(W8A8_MODULES[0]))
                                 or (W8A8_MODULES[1] in modules and name.startswith(W8A8_MODULES[1])))


def capability_problem(device_index: int | None = None, weights: str = "fp8") -> str | None:
    """Why the visible CUDA GPU(s) cannot run FP8 weights, or None (also None without CUDA).
    `weights`: the --draft-weights value the message names."""
    import torch

    if not torch.cuda.is_available():
        return None
    indices = range(torch.cuda.device_count()) if device_index is None else (device_index,)
    for i in indices:
        cap = tuple(torch.cuda.get_device_capability(i))
        if cap < MIN_CAPABILITY:
            return (f"--draft-weights {weights} needs a GPU with FP8 (compute capability >= 8.9: Ada, Hopper or later); "
                    f"GPU {i} ({torch.cuda.get_device_name(i)}) is {cap[0]}.{cap[1]}; use --draft-weights bf16")
    return None


class Fp8Weights:
    """One module's FP8 weight [N, K] (float8_e4m3fn) and per-output-channel scale [N] (fp32)."""

    def __init__(self, weight, w8a8: bool = False):
        from sglang_patches.kernels.fp8_linear import MAX_M, fp8_linear, quantize_fp8_per_channel
        from sglang_patches.kernels.fp8_w8a8_linear import fp8_w8a8_linear

        self.w8, self.scale = quantize_fp8_per_channel(weight.data.contiguous())
        self.n, self.k = weight.shape
        self.dtype = weight.dtype
        self.ptr = weight.data_ptr()     # the bf16 weight this was quantised from
        self.max_m = MAX_M
        self._linear = fp8_linear        # bound once: nothing is imported per call
        self._w8a8 = fp8_w8a8_linear if w8a8 else None  # 2..MAX_M rows with fp8 activations (W8A8_MODULES)
        self.workspace = None            # a split-K workspace shared by the drafter's modules (install)
        self.x8 = self.xs = None         # [MAX_M, K] e4m3 rows and [MAX_M] fp32 scales, shared per K (install)

    def fits(self, x, weight) -> bool:
        """Shapes, strides and dtypes only (no tensor values, no sync): fixed per captured graph."""
        return (x.dim() == 2 and 1 <= x.shape[0] <= self.max_m and x.shape[1] == self.k and x.stride(1) == 1
                and (x.shape[0] == 1 or x.stride(0) >= self.k) and x.dtype == self.dtype and weight.data_ptr() == self.ptr)

    def workspace_numel(self) -> int:
        """fp32 elements the split-K paths this module can launch need at the worst M (0: no split at any
        M): fp8_linear at 1..MAX_M rows, and fp8_w8a8_linear at 2..MAX_M when this module runs it."""
        from sglang_patches.kernels import fp8_linear as k
        from sglang_patches.kernels.fp8_w8a8_linear import fp8_w8a8_workspace_numel

        need = [k.fp8_linear_workspace_numel(m, self.n, dict(k._config_cached(m, self.n, self.k))["split_k"])
                for m in range(1, self.max_m + 1)]
        if self._w8a8 is not None:
            need += [fp8_w8a8_workspace_numel(m, self.n, self.k) for m in range(2, self.max_m + 1)]
        return max(need)

    def __call__(self, x, bias=None):
        m = x.shape[0]
        if self._w8a8 is not None and m >= 2:
            # views of install's buffers (no allocation): rows [0, m) of x8 are contiguous
            x8, xs = (None, None) if self.x8 is None else (self.x8[:m], self.xs[:m])
            return self._w8a8(x, self.w8, self.scale, bias, workspace=self.workspace, x8=x8, xs=xs)
        if self.workspace is None:
            return self._linear(x, self.w8, self.scale, bias)
        return self._linear(x, self.w8, self.scale, bias, workspace=self.workspace)

    @property
    def bytes_bf16(self) -> int:
        return self.n * self.k * 2

    @property
    def bytes_fp8(self) -> int:
        return self.n * self.k + 4 * self.n


class Fp8DraftLinearMethod:
    """Stands in for SGLang's unquantised method on one drafter module: FP8 for 1..MAX_M rows, the
    original otherwise. Its class name is not in SGLang's `_UNQUANTIZED_LM_HEAD_METHODS`, so the
    drafter's logits processor calls its `apply` for the lm_head."""

    def __init__(self, original, fp8: Fp8Weights):
        self.original = original
        self.fp8 = fp8

    def __getattr__(self, name):  # only for what this class lacks: the original method's own
        if name in ("original", "fp8"):
            raise AttributeError(name)
        return getattr(self.original, name)

    def apply(self, layer, x, bias=None):
        if self.fp8.fits(x, layer.weight):
            return self.fp8(x, bias)
        return self.original.apply(layer, x, bias)


@dataclasses.dataclass
class Fp8Plan:
    """What prepare found: modules that take FP8 (name -> module) and those that cannot (name -> why)."""
    linears: dict = dataclasses.field(default_factory=dict)   # quant_method modules (layers, lm_head)
    fc: object = None                                         # the fc nn.Linear, or None
    refused: dict = dataclasses.field(default_factory=dict)
    notes: list = dataclasses.field(default_factory=list)     # said in the load line (e.g. a shared lm_head)
    weights: str = "fp8"                                      # --draft-weights (FP8_WEIGHTS): picks the kernels

    @property
    def names(self) -> list[str]:
        return list(self.linears) + (["model.fc"] if self.fc is not None else [])


def _float_2d(w) -> str | None:
    import torch

    if w is None or not isinstance(w, torch.Tensor):
        return "has no weight tensor"
    if w.dim() != 2 or w.dtype not in (torch.bfloat16, torch.float16):
        return f"has a {w.dim()}-D {str(w.dtype).replace('torch.', '')} weight (bf16/fp16 2-D only)"
    if w.shape[0] == 0 or w.shape[1] == 0:
        return f"has an empty weight {tuple(w.shape)}"
    if not bool(torch.isfinite(w).all()):  # load time: one sync per module is fine here
        return "has inf/NaN weights (a per-channel FP8 scale needs finite values)"
    return None


def _lm_head_problem(model, lm_head, target) -> str | None:
    c = compat.current()
    if type(lm_head.quant_method) is not c.UNQUANTIZED_EMBEDDING_METHOD.resolve():
        return f"has quant_method {type(lm_head.quant_method).__name__} (the drafter is quantised already)"
    if Fp8DraftLinearMethod.__name__ in c.UNQUANTIZED_LM_HEAD_METHODS.resolve():
        return "would be skipped by SGLang's logits processor (our method's class name is in _UNQUANTIZED_LM_HEAD_METHODS)"
    if getattr(model.logits_processor, "use_fp32_lm_head", False):
        return "runs in fp32 (--enable-fp32-lm-head)"
    if target is not None and any(m is lm_head for m in target.modules()):
        return "is the target's own module (quantising it would change the target's logits)"
    return _float_2d(getattr(lm_head, "weight", None))


def plan_drafter(model, target=None, weights: str = "fp8") -> Fp8Plan:
    """Decide, without changing anything, which of the drafter's linears take FP8 weights.
    `target`: the target model (the lm_head must not be one of its modules), None when unknown;
    `weights`: one of FP8_WEIGHTS (which modules also run fp8 activations: runs_w8a8)."""
    import torch

    if not is_fp8(weights):
        raise ValueError(f"weights {weights!r}: expected one of fp8, fp8-weight-only")
    c = compat.current()
    Unquant, LinearBase = c.UNQUANTIZED_LINEAR_METHOD.resolve(), c.LINEAR_BASE.resolve()
    plan = Fp8Plan(weights=weights)
    for i, layer in enumerate(model.model.layers):
        for rel in LINEAR_NAMES:
            name, m = f"model.layers.{i}.{rel}", layer
            for part in rel.split("."):
                m = getattr(m, part, None)
            if not isinstance(m, LinearBase):
                plan.refused[name] = f"is {type(m).__name__}, not an SGLang linear layer"
            elif type(m.quant_method) is not Unquant:
                plan.refused[name] = f"has quant_method {type(m.quant_method).__name__} (the drafter is quantised already)"
            elif c.USE_INTEL_AMX.resolve()(m):
                plan.refused[name] = "uses the Intel AMX CPU backend"
            else:
                why = _float_2d(getattr(m, "weight", None))
                if why:
                    plan.refused[name] = why
                else:
                    plan.linears[name] = m
    fc = getattr(model.model, "fc", None)
    if type(fc) is not torch.nn.Linear:
        plan.refused["model.fc"] = f"is {type(fc).__name__}, not torch.nn.Linear"
    else:
        why = _float_2d(fc.weight)
        if why:
            plan.refused["model.fc"] = why
        else:
            plan.fc = fc
    lm_head = getattr(model, "lm_head", None)
    name = "lm_head" + (" (tied to model.embed_tokens)" if lm_head is getattr(model.model, "embed_tokens", None) else "")
    if lm_head is None or not hasattr(lm_head, "quant_method"):
        plan.refused["lm_head"] = "has no quant_method"
    else:
        why = _lm_head_problem(model, lm_head, target)
        if why:
            plan.refused[name] = why
        else:
            plan.linears[name] = lm_head
            if target is not None and any(p.data_ptr() == lm_head.weight.data_ptr() for p in target.parameters()):
                # load_lm_head_from_target / a tied head: the drafter's module holds the target's full-vocab
                # weight, so its FP8 copy costs that much memory, out of SGLang's headroom after the KV pool
                plan.notes.append(f"lm_head's weight is the target's ({lm_head.weight.shape[0]} rows): its FP8 copy "
                                  f"adds {lm_head.weight.numel() / (1 << 20):.1f} MiB")
    return plan


def install(plan: Fp8Plan) -> tuple[dict, Fp8Weights | None]:
    """Quantise and install `plan` (once, at load). Returns (stats, the fc's Fp8Weights or None).
    Undo puts each original quant_method object back (REGISTRY.record_change)."""
    c = compat.current()
    done, stats = [], {"modules": 0, "bytes_bf16": 0, "bytes_fp8": 0, "step_bf16": 0, "step_fp8": 0,
                       "weights": plan.weights, "w8a8": []}

    def count(fp8, in_step=True):  # in_step: read by every draft decode step (fc runs in draft-extend only)
        stats["modules"] += 1
        stats["bytes_bf16"] += fp8.bytes_bf16
        stats["bytes_fp8"] += fp8.bytes_fp8
        if in_step:
            stats["step_bf16"] += fp8.bytes_bf16
            stats["step_fp8"] += fp8.bytes_fp8

    inputs = fp8_input_modules() if plan.weights == "fp8" else ()
    for name, m in plan.linears.items():
        if isinstance(m.quant_method, Fp8DraftLinearMethod):  # installed already: idempotent
            count(m.quant_method.fp8)
            continue
        original = m.quant_method
        fp8 = Fp8Weights(m.weight, w8a8=runs_w8a8(name, plan.weights, inputs))
        m.quant_method = Fp8DraftLinearMethod(original, fp8)
        done.append((m, original))
        count(fp8)
    fc8 = None
    if plan.fc is not None:
        fc8 = Fp8Weights(plan.fc.weight)
        count(fc8, in_step=False)

    # one split-K workspace for all (the drafter's GEMMs run one after another on one stream), so a
    # forward allocates nothing but each GEMM's output
    fp8s = [m.quant_method.fp8 for m in plan.linears.values()] + ([fc8] if fc8 is not None else [])
    need = max([f.workspace_numel() for f in fp8s] + [0])
    import torch

    if need:
        ws = torch.empty(need, dtype=torch.float32, device=fp8s[0].w8.device)
        for f in fp8s:
            f.workspace = ws
    stats["workspace_bytes"] = 4 * need
    # fp8 activation rows: one [MAX_M, K] e4m3 + [MAX_M] fp32 pair per K, shared by the w8a8 modules of
    # that K (like the workspace: they run one after another on one stream, each quantising its input
    # into the pair right before its GEMM reads it)
    acts = {}
    for name, m in plan.linears.items():
        f = m.quant_method.fp8
        if f._w8a8 is None:
            continue
        if f.x8 is None:  # installed before: it keeps its pair
            if f.k not in acts:
                acts[f.k] = (torch.empty((f.max_m, f.k), dtype=torch.float8_e4m3fn, device=f.w8.device),
                             torch.empty((f.max_m,), dtype=torch.float32, device=f.w8.device))
            f.x8, f.xs = acts[f.k]
        stats["w8a8"].append(name)
    stats["act_bytes"] = sum(x8.numel() + 4 * xs.numel() for x8, xs in acts.values())

    def restore():
        for m, original in reversed(done):
            m.quant_method = original

    if done:
        REGISTRY.record_change(c.LINEAR_QUANT_METHOD, restore, what=f"{len(done)} drafter quant_method objects")
    stats["saved_bytes"] = stats["bytes_bf16"] - stats["bytes_fp8"]
    return stats, fc8


def describe(stats: dict, refused: dict, notes: list | None = None) -> str:
    """The load log line's FP8 part."""
    mib = 1 << 20
    extra = stats["bytes_fp8"] + stats.get("workspace_bytes", 0) + stats.get("act_bytes", 0)
    text = (f"fp8 weights on {stats['modules']} modules: {stats.get('step_bf16', 0) / mib:.1f} MiB -> "
            f"{stats.get('step_fp8', 0) / mib:.1f} MiB read per draft step of <= {_max_m()} rows "
            f"({stats['saved_bytes'] / mib:.1f} MiB saved over all FP8 modules, fc included; the bf16 weights "
            f"are kept for larger batches, +{extra / mib:.1f} MiB GPU memory)")
    w8a8 = stats.get("w8a8")  # install's list of fp8-activation modules (absent: no activation part)
    if w8a8:
        text += (f"; fp8 activations (w8a8) at 2..{_max_m()} rows on {len(w8a8)} modules ({_short(w8a8)}), "
                 "bf16 activations on the others and at 1 row")
    elif w8a8 is not None:
        text += "; bf16 activations on every module" + (
            " (--draft-weights fp8-weight-only)" if stats.get("weights") == "fp8-weight-only" else "")
    if notes:
        text += "; " + "; ".join(notes)
    if refused:
        text += "; SGLang's path for " + ", ".join(f"{n} ({why})" for n, why in refused.items())
    return text


def _short(names: list) -> str:
    """model.layers.{0,1}.mlp.gate_up_proj, lm_head -> "mlp.gate_up_proj x2, lm_head" (one entry per kind)."""
    kinds: dict = {}
    for n in names:
        key = n.split(".", 3)[3] if n.startswith("model.layers.") and n.count(".") >= 3 else n.split(" (")[0]
        kinds[key] = kinds.get(key, 0) + 1
    return ", ".join(k if c == 1 else f"{k} x{c}" for k, c in kinds.items())


def _max_m() -> int:
    from sglang_patches.kernels.fp8_linear import MAX_M

    return MAX_M


def device_problem(model, weights: str = "fp8") -> str | None:
    """The in-server capability check (the plugin path has no launcher): CUDA drafters only."""
    p = next(model.parameters())
    if p.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1":
        return None
    if p.device.type != "cuda":
        return f"--draft-weights {weights} needs a CUDA drafter (it is on {p.device.type})"
    return capability_problem(p.device.index or 0, weights)
