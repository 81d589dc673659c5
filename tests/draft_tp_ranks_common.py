"""What tests/draft_tp_ranks_0517.py and draft_tp_ranks_0523.py share: seeded full weights for the
real SGLang classes (the same on every rank, loaded through the model's own loaders so each rank keeps
the shard of its current TP group), the attention stand-ins, the draft-TpModelWorker stand-in, the
check of a drafter's weights against the full ones, and one draft step. SGLang is imported by the
caller first (0.5.17 or 0.5.23 first on the path); the class paths used here are the same in both.

The pair is read from the configs in FIXTURE_ROOT: a Llama target (LlamaForCausalLM) or a
DeepSeek-V3 one (DeepseekV3ForCausalLM: MLA, MoE), and a Llama EAGLE-3 head (LlamaForCausalLMEagle3)
or SGLang's MLA head (Eagle3DeepseekV2ForCausalLM).

MOCKS, because they cannot run on CPU: the draft TpModelWorker (its ModelRunner needs a KV pool,
attention backends and a GPU memory profile) and each drafter layer's attention kernel (no attention
backend: SelfOnlyAttention for the Llama head, SelfOnlyMLA for the MLA head); both are described
where they are defined; and torch.cuda.synchronize, which the MLA head's set_embed calls unguarded. No target forward runs: the drafter takes only the target's embedding (and
lm_head where it loads it from the target); the aux hidden states a target would capture are seeded
inputs. So the DeepSeek-V3 target is SGLang's real class, built on CPU at the target TP, with only the
embedding and lm_head loaded (its MoE layers are built, never run).
"""
import re
import types

import torch
from torch import nn
from sglang.srt.layers.logits_processor import LogitsMetadata
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM
from sglang.srt.models.kimi_k25_eagle3 import Eagle3DeepseekV2ForCausalLM
from sglang.srt.models.llama import LlamaForCausalLM
from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3
from sglang.srt.runtime_context import get_parallel


def full_weights(model, seed):
    g = torch.Generator().manual_seed(seed)
    cfg = model.config
    H, I, V = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    hd = H // cfg.num_attention_heads
    q, kv = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd

    def r(*shape):
        t = torch.randn(shape, generator=g)
        return t / (shape[-1] ** 0.5) if len(shape) > 1 else 1.0 + 0.1 * t
    if isinstance(model, Eagle3DeepseekV2ForCausalLM):  # the checkpoint's names (layers.0.*), as published
        nh, nope, rope, vd = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
        ql, kl, a = cfg.q_lora_rank, cfg.kv_lora_rank, "layers.0.self_attn."
        return [("fc.weight", r(H, 3 * H)), ("layers.0.hidden_norm.weight", r(H)),
                ("layers.0.input_layernorm.weight", r(H)), ("layers.0.post_attention_layernorm.weight", r(H)),
                (a + "q_a_proj.weight", r(ql, 2 * H)), (a + "kv_a_proj_with_mqa.weight", r(kl + rope, 2 * H)),
                (a + "q_a_layernorm.weight", r(ql)), (a + "q_b_proj.weight", r(nh * (nope + rope), ql)),
                (a + "kv_a_layernorm.weight", r(kl)), (a + "kv_b_proj.weight", r(nh * (nope + vd), kl)),
                (a + "o_proj.weight", r(H, nh * vd)), ("layers.0.mlp.gate_proj.weight", r(I, H)),
                ("layers.0.mlp.up_proj.weight", r(I, H)), ("layers.0.mlp.down_proj.weight", r(H, I)),
                ("norm.weight", r(H)), ("lm_head.weight", r(cfg.draft_vocab_size, H))]
    if isinstance(model, LlamaForCausalLMEagle3):
        return [("fc.weight", r(H, 3 * H)), ("midlayer.hidden_norm.weight", r(H)),
                ("midlayer.input_layernorm.weight", r(H)), ("midlayer.post_attention_layernorm.weight", r(H)),
                ("midlayer.self_attn.q_proj.weight", r(q, 2 * H)), ("midlayer.self_attn.k_proj.weight", r(kv, 2 * H)),
                ("midlayer.self_attn.v_proj.weight", r(kv, 2 * H)), ("midlayer.self_attn.o_proj.weight", r(H, q)),
                ("midlayer.mlp.gate_proj.weight", r(I, H)), ("midlayer.mlp.up_proj.weight", r(I, H)),
                ("midlayer.mlp.down_proj.weight", r(H, I)), ("norm.weight", r(H)),
                ("lm_head.weight", r(cfg.draft_vocab_size, H))]
    # the target: only what the drafter shares (the embedding; lm_head for completeness)
    return [("model.embed_tokens.weight", torch.randn(V, H, generator=g)), ("lm_head.weight", r(V, H))]


def build(cls, mc, seed):
    with torch.device("cpu"):
        m = cls(mc.hf_config)
    m.load_weights(full_weights(m, seed))
    return m.eval()


def build_target(mc):
    if mc.hf_config.architectures[0] != "DeepseekV3ForCausalLM":
        return build(LlamaForCausalLM, mc, 7)
    with torch.device("cpu"):
        m = DeepseekV3ForCausalLM(mc.hf_config)
    # Only what the drafter shares, through each parameter's own (vocab-parallel) loader; SGLang's
    # DeepseekV2 load_weights would also post-process every MLA / MoE layer, which no test here runs.
    params = dict(m.named_parameters())
    for name, w in full_weights(m, 7):
        params[name].weight_loader(params[name], w)
    return m.eval()


def draft_class(mc):
    return {"LlamaForCausalLMEagle3": LlamaForCausalLMEagle3,
            "Eagle3DeepseekV2ForCausalLM": Eagle3DeepseekV2ForCausalLM}[mc.hf_config.architectures[0]]


# the drafters' fused parameters and the checkpoint weights they stack (in order, along dim 0)
STACKED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj"),
           "fused_qkv_a_proj_with_mqa": ("q_a_proj", "kv_a_proj_with_mqa")}


def weights_vs_full(model, draft_mc, target):
    """Every parameter of `model` against the full (unsharded) drafter: the seeded checkpoint weights
    (stacked where SGLang fuses them) and the target's full embedding; the padded vocab rows beyond the
    real vocab are not compared. Returns [parameters compared, names that differ or have another shape]."""
    full = {}
    for name, w in full_weights(build_meta(draft_class(draft_mc), draft_mc), 11):
        name = re.sub(r"^layers\.0\.", "midlayer.", name)
        full[name if name.startswith(("lm_head.", "model.")) else "model." + name] = w
    full["model.embed_tokens.weight"] = dict(full_weights(target, 7))["model.embed_tokens.weight"]
    bad, n = [], 0
    for name, p in model.named_parameters():
        name = name.replace("model.layers.0.", "model.midlayer.")  # the Llama head's layer, as its checkpoint names it
        parts = next(((fused, pieces) for fused, pieces in STACKED.items() if f".{fused}." in name), None)
        want = (torch.cat([full[name.replace(parts[0], piece)] for piece in parts[1]]) if parts else full[name])
        n += 1
        if p.shape[1:] != want.shape[1:] or p.shape[0] < want.shape[0] or not torch.equal(p[: want.shape[0]], want):
            bad.append(name)
    return [n, bad]


def build_meta(cls, mc):
    with torch.device("meta"):
        return cls(mc.hf_config)


from sglang_cpu import SELF_ONLY_ATTENTION  # noqa: E402 (after SGLang: the caller imports it first)

from sglang_cpu import SELF_ONLY_MLA  # noqa: E402

exec(SELF_ONLY_ATTENTION)  # SelfOnlyAttention, the MOCK of the attention kernel: the one copy, tests/sglang_cpu.py
exec(SELF_ONLY_MLA)  # SelfOnlyMLA, its MLA counterpart (tests/sglang_cpu.py)
if not torch.cuda.is_available():
    # MOCK: Eagle3DeepseekV2ForCausalLM.set_embed (init_lm_head) ends with torch.cuda.synchronize(),
    # unguarded; a torch without CUDA raises there, so it is a no-op here (nothing to wait for on CPU).
    torch.cuda.synchronize = lambda *a, **k: None


def draft_worker_class(draft_mc, built):
    """MOCK of the draft TpModelWorker: builds the real drafter class (LlamaForCausalLMEagle3 or
    Eagle3DeepseekV2ForCausalLM, from the draft config) in whatever TP scope
    SGLang's EagleDraftWorker.__init__ entered, records that scope in `built["scope"]` (tp size, rank,
    attn-tp size, group ranks) and, as the real ModelRunner does, keeps the TP group it saw; its
    alloc_memory_pool records the attn-TP size and the KV heads per rank a real pool would get."""

    class DraftTpModelWorker:
        def __init__(self, **kw):
            p = get_parallel()
            built["scope"] = [p.tp_size, p.tp_rank, p.attn_tp_size, list(p.tp_group.ranks)]
            model = build(draft_class(draft_mc), draft_mc, 11)
            if isinstance(model, Eagle3DeepseekV2ForCausalLM):
                model.model.midlayer.self_attn = SelfOnlyMLA(model.model.midlayer.self_attn)
            else:
                for layer in model.model.layers:
                    layer.self_attn = SelfOnlyAttention(layer.self_attn)
            self.model_runner = types.SimpleNamespace(model=model, model_config=draft_mc, tp_group=p.tp_group)
            self.calls = []

        def alloc_memory_pool(self, **kw):
            p = get_parallel()
            self.calls.append(["alloc", p.attn_tp_size, draft_mc.get_num_kv_heads(p.attn_tp_size)])

    return DraftTpModelWorker


def draft_step(worker, ids, aux, scope):
    """One draft step inside `scope` (the draft phase's TP context): the drafter's embedding (shared
    from the target), fc, decoder layer, norm, lm_head and logits processor; the top-4 tokens per
    position and the logits."""
    m = worker.draft_runner.model
    fb = types.SimpleNamespace(forward_mode=ForwardMode.DECODE, mm_input_embeds=None,
                               spec_info=types.SimpleNamespace(hidden_states=aux.clone()),
                               contains_mm_inputs=lambda: False)
    with scope, torch.inference_mode():
        hidden, _ = m.model(ids, torch.arange(ids.shape[0]), fb)
        out = m.logits_processor(ids, hidden, m.lm_head, LogitsMetadata(forward_mode=ForwardMode.DECODE))
    logits = out.next_token_logits[:, : m.config.vocab_size]
    return logits.topk(4, dim=-1).indices.tolist(), logits


def inputs(draft_mc):
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, draft_mc.hf_config.vocab_size, (6,), generator=g)
    return ids, torch.randn(6, 3 * draft_mc.hf_config.hidden_size, generator=g)


def compare(out, stock_step, ours_step):
    (stock_tokens, stock_logits), (ours_tokens, ours_logits) = stock_step, ours_step
    out["tokens_equal"] = ours_tokens == stock_tokens
    out["max_logit_diff"] = float((ours_logits - stock_logits).abs().max())
    out["tokens"] = ours_tokens


def tree_sync_through(w2, target_worker, rank):
    """The tree broadcast through the name draft() calls (eagle_worker_v2.build_eagle_verify_input,
    rebound by the hook; same signature in 0.5.17 and 0.5.23): rank-dependent trees, an idle batch so
    SGLang's function returns its idle verify input after the hook ran. What every rank then holds."""
    parent = torch.full((2, 3), 10 + rank, dtype=torch.int64)
    top = torch.arange(6, dtype=torch.int64).reshape(2, 3) * (rank + 1)
    tokens = torch.full((2, 4), 100 + rank, dtype=torch.int64)
    vi = w2.build_eagle_verify_input(types.SimpleNamespace(forward_mode=ForwardMode.IDLE), None, parent, top,
                                     tokens, None, target_worker=target_worker, topk=1, num_steps=3,
                                     num_draft_tokens=4, tree_mask_mode=None, device="cpu")
    return [int(parent[0, 0]), int(top[1, 2]), int(tokens[1, 3]), type(vi).__name__]


def plans(plan, world):
    """`plan(server_args, k)` for K = N (stock), an algorithm draft_tp refuses, and K = 3."""
    out = []
    for algo, k in (("EAGLE3", world), ("NGRAM", 1), ("EAGLE3", 3)):
        try:
            out.append(plan(types.SimpleNamespace(speculative_algorithm=algo, enable_dp_attention=False), k))
        except RuntimeError as exc:
            out.append(str(exc))
    return out


# ----------------------------------------------------------------------------- --draft-weights fp8
FP8_LINEARS = ("self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj")


def _rel(a, b):
    return float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-6))


def fp8_case(worker, scope, ids, aux, rank):
    """--draft-weights fp8 on this rank's drafter (run only with DRAFT_TP_FP8=1, by
    tests/test_draft_weights_fp8_tp.py). The drafter is cast to bf16 (FP8 takes bf16/fp16 weights),
    prepared by the real prepare_drafter (target from the worker, strict) with the triton backend's
    forward hooks applied, in the draft phase's TP scope (`scope()` gives a fresh one). Reports: which
    modules hold our method and their FP8 shapes against the bf16 shard's, each module's output through
    SGLang's forward against fp8_linear_ref (gate_up, lm_head: fp8_w8a8_linear_ref) of this rank's shard
    (row-parallel: the sum over the drafter's TP group of every rank's reference, i.e. SGLang's
    all-reduce), the draft tokens of the weight-only FP8 kernel against the same drafter with
    fp8_linear_ref in the kernel's place (and the fp8-activation drafter's logits against it), and the undo."""
    import torch.distributed as dist
    from sglang.srt.distributed import get_tp_group
    from sglang_patches.kernels.fp8_linear import fp8_linear_ref
    from sglang_patches.kernels.fp8_w8a8_linear import fp8_w8a8_linear_ref  # the per-module check
    from sglang_patches.server.draft_backend import FLAG, hook_specs, prepare
    from sglang_patches.server.draft_backend.fp8_weights import Fp8DraftLinearMethod
    from sglang_patches.server.hooks import REGISTRY

    m = worker.draft_runner.model.to(torch.bfloat16)
    aux = aux.to(torch.bfloat16)
    res = {}
    bf16_tokens, _ = draft_step(worker, ids, aux, scope())
    before = REGISTRY.changes
    hooks = REGISTRY.apply(hook_specs())
    summary = prepare.prepare_drafter(m, "fp8", strict=True, target=prepare._target_model(worker))
    res["refused"] = summary["fp8"]["refused"]
    ours = {n: mod for n, mod in m.named_modules() if isinstance(getattr(mod, "quant_method", None), Fp8DraftLinearMethod)}
    res["ours"] = sorted(ours)
    res["shapes"] = {n: [list(mod.quant_method.fp8.w8.shape), list(mod.weight.shape)] for n, mod in ours.items()}
    fc8 = m.model.__dict__[FLAG].fc8
    res["fc_shapes"] = [list(fc8.w8.shape), list(m.model.fc.weight.shape)]
    fp8s = {n: mod.quant_method.fp8 for n, mod in ours.items()}
    fp8s["model.fc"] = fc8
    calls, kernels = [], {}
    w8a8 = lambda n: n.endswith("mlp.gate_up_proj")  # fp8 activations at >= 2 rows (fp8_weights.DEFAULT_FP8_INPUTS)
    for n, f in fp8s.items():
        kernels[n] = (f._linear, f._w8a8)
        f._linear = lambda *a, _r=f._linear, _n=n, **k: (calls.append(_n), _r(*a, **k))[1]
        if f._w8a8 is not None:
            f._w8a8 = lambda *a, _r=f._w8a8, _n=n, **k: (calls.append(_n), _r(*a, **k))[1]
    mods = {}
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own input: a missing all-reduce shows
    with scope(), torch.inference_mode():
        group = get_tp_group()
        res["group"] = [group.world_size, list(group.ranks)]
        for n, mod in ours.items():
            f = mod.quant_method.fp8
            x = torch.randn(5, f.k, generator=g).to(torch.bfloat16)
            calls.clear()
            if n.startswith("lm_head"):
                y = m.logits_processor._compute_lm_head(x, mod, None)
            else:
                y = mod(x)[0]
            ref = (fp8_w8a8_linear_ref if w8a8(n) else fp8_linear_ref)(x, f.w8, f.scale)
            reduced = bool(getattr(mod, "reduce_results", False) and getattr(mod, "input_is_parallel", False))
            total = ref.float().clone()
            if reduced and group.world_size > 1:
                dist.all_reduce(total, group=group.device_group)
            mods[n] = {"calls": len(calls), "row_parallel": reduced, "tp_size": getattr(mod, "tp_size", None),
                       "err_ref": _rel(y, total), "err_local_only": _rel(y, ref)}
    res["modules"] = mods
    calls.clear()
    a8_tokens, a8_logits = draft_step(worker, ids, aux, scope())  # gate_up with fp8 activations
    res["forward_calls"] = sorted(set(calls))
    # Per-token activation rounding is discontinuous: a 1-ulp difference upstream (kernel vs reference
    # summation order) flips some e4m3 roundings of gate_up's input, so the token comparison
    # with the references runs with every module on fp8_linear (weight-only, continuous), and the
    # fp8-activation drafter's logits are held to the FP8-vs-bf16 bound against that reference.
    for f in fp8s.values():
        f._w8a8 = None
    fp8_tokens, fp8_logits = draft_step(worker, ids, aux, scope())
    for n, f in fp8s.items():  # the same drafter, the reference in the kernel's place
        f._linear = lambda x, w8, scale, bias=None, **k: fp8_linear_ref(x, w8, scale, bias)
    ref_tokens, ref_logits = draft_step(worker, ids, aux, scope())
    for n, f in fp8s.items():
        f._linear, f._w8a8 = kernels[n]
    res["a8_tokens"] = [t[0] for t in a8_tokens]
    res["a8_logits_err_ref"] = _rel(a8_logits, ref_logits)
    res["tokens"] = [t[0] for t in fp8_tokens]
    res["top1_equal_ref"] = [t[0] for t in fp8_tokens] == [t[0] for t in ref_tokens]
    res["top4_equal_ref"] = fp8_tokens == ref_tokens
    res["logits_err_ref"] = _rel(fp8_logits, ref_logits)
    res["top1_equal_bf16"] = sum(a[0] == b[0] for a, b in zip(fp8_tokens, bf16_tokens)) / len(fp8_tokens)
    REGISTRY.undo([c for c in REGISTRY.changes if c not in before] + hooks)
    res["undone"] = not any(isinstance(getattr(mod, "quant_method", None), Fp8DraftLinearMethod)
                            for mod in m.modules()) and prepare.marked_modules(m) == []
    return res
