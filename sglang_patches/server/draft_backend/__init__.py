"""`--draft-backend triton`: the EAGLE-3 drafter's forward runs our Triton kernels (kernels/) where
they replace whole SGLang ops without changing numerics beyond kernel tolerance.

Opt-in feature `triton_draft` (never in the default set); what ran on a GPU: the README's status
table. What is replaced (sglang 0.5.17 and 0.5.23; the targets are contacts in compat/v0_5_17.py
and compat/v0_5_23.py):

| SGLang op (file)                                                    | ours                        |
|---------------------------------------------------------------------|-----------------------------|
| input layer: hidden_norm(hidden), input_layernorm(embeds), cat      | `fused_draft_input` (1 launch) |
|   (models/llama_eagle3.py LlamaDecoderLayer.forward)                |                             |
| post_attention_layernorm(h, residual) (in place, same layer)        | `fused_add_rmsnorm(out=h, residual_out=residual)` |
| hidden_norm(h, residual) of layers > 0 (multi-layer heads)          | `fused_add_rmsnorm`, in place |
| act_fn(gate_up) in LlamaMLP.forward (models/llama.py), drafter only | `silu_and_mul`              |
|   (0.5.23: not where SGLang takes its SM100 dual GEMM or decode FP8 activation quant: those stay SGLang's) | |
| input_norm / per-chunk fc_norm + cat before fc (LlamaModel.forward) | `aux_norm` (the norm half of `fused_aux_fc`) then the stock `self.fc` |

Left to SGLang: attention and its backend, the qkv / o / gate_up / down / fc GEMMs, the final
`norm`, lm_head + logits processor, and the draft top-k. Top-k stays because it is not one op to
swap: `renorm_draft_probs` + `fast_topk` are called at three sites in eagle_worker_v2 (draft prefill
extend, draft decode steps, decode extend), `fast_topk` returns SGLang's p = 1.0 for topk == 1
(`draft_topk1_postprocess`) where our kernel returns the real probability, and the
`hot_token_id[topk_index]` gather would move into the kernel; that needs a replacement of
`draft_forward` checked at every call site, a later step (kernels/NOTES.md, integration plan).

How: `EagleDraftWorker.init_attention_backends` (before; after the drafter's weights are loaded,
before any CUDA graph is captured) calls `prepare.prepare_drafter(draft_runner.model)`, which checks
the model (class, dtype, device, RMSNorm flags, deterministic modes), stacks the fc_norm weights
and sets `FLAG` on every drafter module. The three forward hooks (around) call the original unless
`self` carries the flag, so the target's LlamaMLP (same class) is never touched.

Version safety: the three replaced forwards are re-implementations, so beyond the registry's
name/parameter check their AST must equal the one the compat file declares (its `fingerprint`
contacts), and the hook installed for each is the re-implementation of exactly that AST
(forward.FORWARDS, keyed by the hash). sglang 0.5.23 rewrote `LlamaMLP.forward` (dual_gemm,
activation_quant): compat/v0_5_23.py pins its new hash, which selects `forward.mlp_forward_0523`;
its two other forwards are unchanged from 0.5.17. A version whose source matches no pinned hash, or
a pinned hash without a re-implementation, is refused (or falls back) before any hook is applied.
"""
from __future__ import annotations

import logging

from sglang_patches import compat
from sglang_patches.errors import PatchTargetError
from sglang_patches.server.hooks import HookSpec

logger = logging.getLogger("sglang_patches")

from sglang_patches.server.draft_backend.names import ARCHITECTURE, BACKENDS, DTYPES, FEATURE, FLAG  # noqa: F401

# The hashes are position-free and Python-version-free (compat/fingerprint.py): ast.dump's
# text differs between Python versions (3.12 adds `type_params`), which once made a Python 3.12 GPU
# machine refuse the backend against the very 0.5.17 the hashes were computed on with Python 3.11.
from sglang_patches.compat.fingerprint import _canonical, fingerprint  # noqa: E402,F401


def fingerprint_contacts(c=None):
    """The compat file's re-implemented forwards with their expected AST hashes."""
    c = c or compat.current()
    return [c.EAGLE3_LAYER_FINGERPRINT, c.EAGLE3_MODEL_FINGERPRINT, c.LLAMA_MLP_FINGERPRINT]


def moved_targets(site: str | None = None, c=None) -> list[str]:
    """Replaced forwards whose source differs from compat file `c`'s (default: the installed
    SGLang's file; site=None: the installed sglang)."""
    site = site or compat.installed_site()
    cache: dict = {}
    return [ct.target for ct in fingerprint_contacts(c)
            if site is None or not ct.check_static(site, cache)[0]]


def unimplemented(c=None) -> list[str]:
    """Fingerprint contacts of compat file `c` whose pinned hash no re-implementation reproduces."""
    from sglang_patches.server.draft_backend.forward import FORWARDS

    c = c or compat.current()
    pinned = zip(("layer", "model", "mlp"), fingerprint_contacts(c))
    return [ct.target for kind, ct in pinned if ct.expected not in FORWARDS[kind]]


def _names(targets) -> str:
    return ", ".join(t.split(":")[1] + " (" + t.split(":")[0].rsplit(".", 1)[1] + ".py)" for t in targets)


def refusal(site: str | None = None, version: str | None = None, c=None) -> str | None:
    """Why this SGLang cannot run the triton draft backend, or None (`c`: the compat file to judge
    by, default the installed SGLang's)."""
    if version is None:
        from sglang_patches.server.hooks import installed_sglang_version

        version = installed_sglang_version()
    if version == "not installed":
        return "sglang is not installed"
    c = c or compat.current()
    known = c.__name__.replace(".", "/") + ".py"  # e.g. sglang_patches/compat/v0_5_23.py
    moved = moved_targets(site, c)
    if moved:
        return (f"--draft-backend triton re-implements drafter forwards as {known} pins them; in sglang "
                f"{version} {_names(moved)} changed; use --draft-backend sglang (or --draft-backend-fallback)")
    missing = unimplemented(c)
    if missing:
        return (f"--draft-backend triton has no re-implementation of the {_names(missing)} that {known} pins "
                f"for sglang {version}; use --draft-backend sglang (or --draft-backend-fallback)")
    return None


def static_check(site: str, version: str | None = None, c=None):
    """(registry name/parameter results via static_targets.check_all, refusal or None) for a site dir
    judged by compat file `c` (default: the installed SGLang's)."""
    from sglang_patches.compat.static_targets import check_all, sglang_version_at

    results = check_all(site, hook_specs(c))
    return results, refusal(site, version or sglang_version_at(site), c)


# ----------------------------------------------------------------------------- hooks
def hook_specs(c=None) -> list[HookSpec]:
    """The four hooks, the forwards chosen by compat file `c`'s pinned hashes (forward.FORWARDS;
    KeyError for a hash nobody re-implemented: specs() refuses that case first)."""
    from sglang_patches.server.draft_backend import forward, prepare

    c = c or compat.current()
    layer_fp, model_fp, mlp_fp = fingerprint_contacts(c)
    return [
        c.PREPARE_DRAFTER.hook("before", prepare.before_init_attention_backends,
                               note="mark the loaded drafter's modules, stack fc_norm weights (before graph capture)"),
        c.EAGLE3_LAYER_FORWARD.hook("around", forward.FORWARDS["layer"][layer_fp.expected],
                                    note="fused_draft_input, fused_add_rmsnorm (flagged drafter layers only)"),
        c.EAGLE3_MODEL_FORWARD.hook("around", forward.FORWARDS["model"][model_fp.expected],
                                    note="aux_norm before fc (flagged drafter with input_norm/fc_norm only)"),
        c.LLAMA_MLP_FORWARD.hook("around", forward.FORWARDS["mlp"][mlp_fp.expected],
                                 note="silu_and_mul (flagged drafter MLPs only; the target's LlamaMLP calls the original)"),
    ]


def _fallback_enabled() -> bool:
    from sglang_patches.vocab.overlay_config import OverlayConfig

    cfg = OverlayConfig.from_env()
    return bool(cfg is not None and cfg.draft_backend_fallback)


def specs() -> list[HookSpec]:
    """Builder of the `triton_draft` feature (server/patches/catalog.py)."""
    reason = refusal()
    if reason:
        if _fallback_enabled():
            logger.warning("sglang_patches: %s; falling back to the sglang draft backend", reason)
            return []
        raise PatchTargetError(reason)
    return hook_specs()
