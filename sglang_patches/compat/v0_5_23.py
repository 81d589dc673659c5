"""Every SGLang contact point of every overlay feature, as in sglang 0.5.23.

Features take their targets from here and spell no SGLang path themselves; a new SGLang version is
one new file like this (plus its tests), registered in `compat/__init__.py`. Line numbers in the
notes are sglang 0.5.23's (site-packages/sglang/srt/). `sglang-patches patches --contacts` checks
every entry below against the installed SGLang, `--against-source DIR` against a source tree.

What 0.5.23 shares with 0.5.17 is not written twice: each section first imports, by name, the
contacts of v0_5_17.py that 0.5.23 keeps exactly (same target, parameters, use and undo: the same
object, checked against 0.5.23's own source like every entry here), then declares what changed or
is new. A 0.5.17 contact not imported here is not a 0.5.23 contact (draft_tp's ParallelContext
override, _TP / _ATTN_TP swaps, EagleDraftWorker.ps and get_embed_and_head, for instance).
contacts() lists them in this file's order, imported and declared alike.
"""
from __future__ import annotations

from sglang_patches.compat.contacts import Contact, Refused

# The versions this file is used for (inclusive), and what was run where (see v0_5_17.py). The CPU
# test suite runs on 0.5.23's real classes (tests/run_cpu.sh --sglang 0.5.23); on a GPU (torch 2.11 and
# sglang-kernel 0.4.5, where 0.5.23 pins torch 2.14.1) some features ran, not all:
# benchmarks/results/2026-12-06-sglang-0523-gpu/.
COVERS = ("0.5.23", "0.5.23")
GPU_RAN = ()
CPU_VERIFIED = ("0.5.23",)
GPU_PARTLY = ("GPU: timing, checks, plugin, FP8 draft, adaptive steps (started below the largest candidate, "
              "advise's config served), overhead, profile, step_timing; not yet draft TP")
# A feature that cannot run from some version on inside COVERS: feature -> (first version, why).
# None here.
FEATURE_REFUSED_FROM: dict[str, tuple[str, str]] = {}

# module paths: unchanged
from sglang_patches.compat.v0_5_17 import HTTP, PS, RC, SCHED, SPEC_UTILS, SRT, W2

DP_SPEC_PREFILL_ENV = Contact("attr", f"{SRT}.environ:Envs.SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION", "core",
                              use="read: REFUSED names this variable, which SGLang reads as a boolean")
# What 0.5.23 does that a feature cannot follow yet: refused in one line before the server starts
# (compat.setting_refusal; the launcher, the plugin and Engine ask it).
REFUSED = (
    # eagle_worker_v2.py:1503: with pp_size > 1 the last stage drafts the next round inside the same
    # forward_batch_generation (draft(with_topology=True) after draft-extend), so a cycle would hold
    # two draft phases and the second would overwrite the first's events.
    Refused("timing", "--pp-size", "its pipeline-parallel path runs a second draft(with_topology=True) in "
            "each cycle, which would overwrite the cycle's draft timing",
            "drop --pp-size or leave timing out (--patches all,-timing; with the plugin, a \"patches\" list "
            "without timing in SGLANG_PATCHES_CONFIG)"),
    # eagle_worker_v2.py:1422: an extend batch of a DP rank whose peers decode takes
    # _forward_dp_spec_prefill_coordination, which drafts and verifies inside a cycle labelled prefill.
    Refused("timing", DP_SPEC_PREFILL_ENV.name,
            "a cycle labelled prefill then drafts and verifies, which the timing would record as a prefill",
            "unset it or leave timing out (--patches all,-timing; with the plugin, a \"patches\" list without "
            "timing in SGLANG_PATCHES_CONFIG)"),
)

# ---------------------------------------------------------------- core: launcher, Engine, scheduler entry
from sglang_patches.compat.v0_5_17 import (  # unchanged
    LAUNCH_SERVER, ENGINE, ENGINE_SCHEDULER_FUNC, RUN_SCHEDULER_PROCESS, PREPARE_SERVER_ARGS, SERVER_ARGS,
    LOAD_PLUGINS, KILL_PROCESS_TREE,
)
# the plugin's refusal of REFUSED settings (this version's only) on Engine(pp_size=...) and friends
LAUNCH_SUBPROCESSES = Contact("hook", f"{SRT}.entrypoints.engine:Engine._launch_subprocesses", "core", ("server_args",),
                              use="before (the plugin, only where a REFUSED setting can apply): refuses it on the "
                                  "built ServerArgs before any process starts", undo="registry")

# ---------------------------------------------------------------- marker (+ the /spec_timing routes)
from sglang_patches.compat.v0_5_17 import (  # unchanged
    GET_INTERNAL_STATE, SET_INTERNAL_STATE, HTTP_APP, GET_GLOBAL_STATE, TOKENIZER_MANAGER, TM_GET_INTERNAL_STATE,
    TM_SET_INTERNAL_STATE, SET_INTERNAL_STATE_REQ, AUTH_LEVEL, AUTH_LEVEL_DECORATOR,
)

# ---------------------------------------------------------------- timing
# 0.5.23: forward_batch_generation gained pp_proxy_tensors and runs prefill in _forward_prefill_batch
# (inside the wrapped call, so a prefill is still one timed cycle); the draft-extends take kv_loc_plan
# (forwarded by the wrappers); _resolve_spec_v2_tokens counts accept_len - num_non_draft_tokens_per_req.
FORWARD_BATCH_GENERATION = Contact("hook", f"{W2}:EAGLEWorkerV2.forward_batch_generation", "timing",
                                   ("self", "batch", "pp_proxy_tensors"),
                                   use="around: the whole cycle (prefill: via _forward_prefill_batch)",
                                   undo="registry")
DRAFT = Contact("hook", f"{W2}:EagleDraftWorker.draft", "timing", ("self", "batch", "with_topology"),
                use="around: draft phase; with_topology=True (pipeline parallel's tail draft of the next "
                    "cycle) is passed through untimed", undo="registry")
VERIFY = Contact("hook", f"{W2}:EAGLEWorkerV2.verify", "timing", ("self", "batch", "pp_proxy_tensors"),
                 use="around: verify phase", undo="registry")
DRAFT_EXTEND_DECODE = Contact("hook", f"{W2}:EagleDraftWorker._draft_extend_for_decode", "timing",
                              ("self", "batch", "batch_result", "kv_loc_plan"), use="around: draft-extend phase",
                              undo="registry")
DRAFT_EXTEND_PREFILL = Contact("hook", f"{W2}:EagleDraftWorker._draft_extend_for_prefill", "timing",
                               ("self", "batch", "target_hidden_states", "kv_loc_plan"),
                               use="around: prefill draft-extend", undo="registry")
RESOLVE_SPEC_V2_TOKENS = Contact("hook", f"{SRT}.managers.scheduler_components.batch_result_processor:"
                                         "SchedulerBatchResultProcessor._resolve_spec_v2_tokens", "timing",
                                 ("self", "result", "batch"),
                                 use="around: accepted counts (num_correct_drafts_per_req_cpu after it ran), "
                                     "request tags (Req.rid, is_retracted, finished()), drain",
                                 undo="registry")
NUM_CORRECT_DRAFTS = Contact("attr", f"{SRT}.managers.utils:GenerationBatchResult.num_correct_drafts_per_req_cpu",
                             "timing", use="read: per request accept_len - num_non_draft_tokens_per_req")
from sglang_patches.compat.v0_5_17 import (  # unchanged
    WORKER_STEPS, WORKER_DRAFT_TOKENS, WORKER_TOPK, ADAPTIVE_CONTROLLER, ADAPTIVE_CANDIDATES,
    VERIFY_INPUT_SHAPE, VERIFY_INPUT_DRAFT_TOKENS, WORKER_SERVER_ARGS,
)
# ServerArgs is built from field groups in 0.5.23 (server_args.py: msgspec.defstruct over
# arg_groups/fields/*); the fields are declared there
SERVER_ARGS_MODEL_PATH = Contact("attr", f"{SRT}.arg_groups.fields.model:Model.model_path", "timing",
                                 use="read once as ServerArgs.model_path: the alarm's preflight --model-path")
SERVER_ARGS_DRAFT_MODEL_PATH = Contact("attr", f"{SRT}.arg_groups.fields.spec:Spec.speculative_draft_model_path",
                                       "timing", use="read once as ServerArgs.speculative_draft_model_path: the "
                                                     "alarm's preflight --speculative-draft-model-path")
SERVER_ARGS_ALGORITHM = Contact("attr", f"{SRT}.arg_groups.fields.spec:Spec.speculative_algorithm", "timing",
                                use="read once as ServerArgs.speculative_algorithm: the alarm's preflight "
                                    "--speculative-algorithm")
SERVER_ARGS_ADAPTIVE = Contact("attr", f"{SRT}.arg_groups.fields.spec:Spec.speculative_adaptive", "adaptive_graphs",
                               use="read once as ServerArgs.speculative_adaptive by sglang_patches.Engine (its "
                                   "keyword, or a prebuilt server_args) for the rule that adds adaptive_graphs to all")
from sglang_patches.compat.v0_5_17 import LOAD_ADAPTIVE_CONFIG, DEFAULT_ADAPTIVE_CONFIG  # unchanged
from sglang_patches.compat.v0_5_17 import FLAG_CUDA_GRAPH_BS, FLAG_CUDA_GRAPH_MAX_BS  # the -decode names: the old ones are gone
# resolve_num_tokens_per_req reads the runtime config store: a swapped-in state's draft-extend graphs
# are captured at its own candidate's width and replay (see v0_5_17.py).
ADAPTIVE_SWAPPED_EXTEND_GRAPHS = True
# JIT kernels cache under SGLang's own root (kernels/jit/utils/compile/cache.py:
# <root>/<target>/<module name>/build-<key>/deps-<key>/<module name>.so); see v0_5_17.py.
JIT_CACHE = ("SGLANG_JIT_CACHE_DIR", "~/.cache/sglang/jit", "*/sgl_kernel_jit_{module}_*/build-*/deps-*/*.so")
ADAPTIVE_BUFFERS_FROM_START = False  # max_decode_logits_rows counts every adaptive candidate
ADAPTIVE_EXTEND_WIDTH = None  # adaptive_graphs has nothing to change here: SGLang does it itself
# SGLang's DEFAULT_ADAPTIVE_CONFIG copied (a test compares it with the real one): 0.5.23 added
# step 5 to batch size 1's candidates.
ADAPTIVE_DEFAULTS = {
    "1": {"candidate_steps": [1, 3, 5, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
}

# ---------------------------------------------------------------- checks (hidden-state)
from sglang_patches.compat.v0_5_17 import (  # unchanged
    INIT_ATTENTION_BACKENDS_CHECK, DRAFT_EXTEND_PREFILL_CHECK, DRAFT_EXTEND_DECODE_CHECK, LAYERS_TO_CAPTURE,
    CAPTURE_AUX, DEEPSEEK_LAYERS_TO_CAPTURE, DEEPSEEK_CAPTURE_AUX, KIMI_K25_LANGUAGE_MODEL, MLA_HEAD_FC,
)

# ---------------------------------------------------------------- draft_tp (--draft-tp-size)
# 0.5.23 resolves a DraftParallelLayout once per draft worker (resolve_draft_parallel_layout, in
# target scope) and enters every draft phase through draft_tp_context(layout) =
# patch_tensor_parallel_group(layout.tp_group, owns_attention=True), which narrows tp_* and attn_*
# (and attn-dp/cp, moe widths) of get_parallel(), the only place groups are read from in 0.5.23.
# The overlay supplies its own layout (a group of K ranks) through that resolver; see
# server/draft_tp/patch_0523.py. Line numbers are 0.5.23's.
DP = f"{SRT}.speculative.draft_parallel"
DRAFT_WORKER_INIT = Contact("hook", f"{W2}:EagleDraftWorker.__init__", "draft_tp",
                            ("server_args", "gpu_id", "nccl_port", "target_worker"),
                            use="around: creates the draft groups (collective, target scope) and makes the "
                                "resolver called inside (:207) return the K-rank layout", undo="registry")
RESOLVE_DRAFT_LAYOUT = Contact("hook", f"{DP}:resolve_draft_parallel_layout", "draft_tp", ("model_spec",),
                               use="around (rebind: imported by name into eagle_worker_v2 and the other spec "
                                   "workers): the K-rank layout while EagleDraftWorker.__init__ asks for it, "
                                   "SGLang's own answer otherwise", undo="registry (aliases too)")
DRAFT_PARALLEL_LAYOUT = Contact("call", f"{SRT}.configs.draft_parallel:DraftParallelLayout", "draft_tp",
                                passes=("tp_group", "attn_tp_size"),
                                use="built with the draft group: tp_group, attn_tp_size = K (disable_cp default)")
DRAFT_LAYOUT_TP_GROUP = Contact("attr", f"{SRT}.configs.draft_parallel:DraftParallelLayout.tp_group", "draft_tp",
                                use="read by draft_tp_context: the group every draft phase runs on")
DRAFT_LAYOUT_ATTN_TP_SIZE = Contact("attr", f"{SRT}.configs.draft_parallel:DraftParallelLayout.attn_tp_size",
                                    "draft_tp", use="read by the KV configurator: draft KV heads per rank")
WORKER_PARALLEL_LAYOUT = Contact("attr", f"{W2}:EagleDraftWorker.parallel_layout", "draft_tp",
                                 use="read after __init__: must be the layout the resolver returned; every draft "
                                     "phase (init_attention_backends, init_cuda_graphs, draft, the draft-extends, "
                                     "adaptive states) enters draft_tp_context(parallel_layout)")
SCHEDULER_DRAFT_LAYOUT = Contact("call", f"{W2}:EAGLEWorkerV2.draft_parallel_layout", "draft_tp",
                                 use="read by the scheduler (init_target_memory_pool) so the target's KV budget "
                                     "prices the draft KV at attn_tp_size = K")
ALLOC_MEMORY_POOL = Contact("hook", f"{W2}:EagleDraftWorker.alloc_memory_pool", "draft_tp",
                            ("memory_pool_config", "req_to_token_pool", "token_to_kv_pool_allocator"),
                            use="around: runs inside draft_tp_context(parallel_layout) so the draft KV pool has "
                                "the heads of K ranks (the scheduler calls it outside any draft scope)",
                            undo="registry")
RESOLVE_SHARED_EMBED_AND_HEAD = Contact("hook", f"{W2}:EagleDraftWorker._resolve_shared_embed_and_head",
                                        "draft_tp", ("self",),
                                        use="around: the target's TP-N embedding / lm_head shards it returns "
                                            "become the TP-K drafter's (all-gather, strip, re-shard)",
                                        undo="registry")
INIT_LM_HEAD = Contact("call", f"{W2}:EagleDraftWorker.init_lm_head", "draft_tp",
                       use="calls _resolve_shared_embed_and_head and hands the result to the drafter (set_embed "
                           "/ set_embed_and_head); set_lm_head_from_target drafters are refused")
TARGET_EMBED_TOKENS = Contact("attr", f"{SRT}.models.llama:LlamaModel.embed_tokens", "draft_tp",
                              use="read: the vocab-parallel module whose shard the resolver returned")
TARGET_LM_HEAD = Contact("attr", f"{SRT}.models.llama:LlamaForCausalLM.lm_head", "draft_tp",
                         use="read: the vocab-parallel module whose shard the resolver returned")
from sglang_patches.compat.v0_5_17 import (  # unchanged
    BUILD_EAGLE_VERIFY_INPUT, INIT_MODEL_PARALLEL_GROUP, GET_WORLD_GROUP,
)
DRAFT_TP_CONTEXT_FN = Contact("call", f"{SRT}.speculative.spec_utils:draft_tp_context", "draft_tp", ("layout",),
                              passes=("layout",),
                              use="entered around alloc_memory_pool with the worker's layout", undo="its context exit")
PATCH_TENSOR_PARALLEL_GROUP = Contact("call", f"{PS}:patch_tensor_parallel_group", "draft_tp",
                                      ("tp_group", "owns_attention"),
                                      use="entered by draft_tp_context (owns_attention=True): narrows tp_* and "
                                          "attn_* of get_parallel() to the draft group")
GET_PARALLEL = Contact("call", f"{RC}:get_parallel", "draft_tp", passes=(),
                       use="read: tp/attn-tp/pp/moe-ep/attn-cp widths, attn_dp_enabled, tp_group, world rank")
TP_STATE_PATCHED = Contact("global", f"{PS}:_TP_STATE_PATCHED", "draft_tp",
                           use="read: refuse when a TP group is already patched as the draft worker is built")

# ---------------------------------------------------------------- triton_draft (--draft-backend triton)
from sglang_patches.compat.v0_5_17 import EAGLE3_LAYER_FORWARD, EAGLE3_MODEL_FORWARD  # unchanged
LLAMA_MLP_FORWARD = Contact("hook", f"{SRT}.models.llama:LlamaMLP.forward", "triton_draft",
                            ("self", "x", "forward_batch"),
                            use="around (llama.py:124): silu_and_mul (drafter MLPs only); the dual GEMM and the "
                                "decode FP8 activation-quant branches (SM100) call the original",
                            undo="registry")
from sglang_patches.compat.v0_5_17 import (  # unchanged
    PREPARE_DRAFTER, EAGLE3_LAYER_FINGERPRINT, EAGLE3_MODEL_FINGERPRINT,
)
LLAMA_MLP_FINGERPRINT = Contact("fingerprint", LLAMA_MLP_FORWARD.target, "triton_draft",
                                expected="06546396e7f0fd6b",
                                use="re-implemented line for line: draft_backend.forward.mlp_forward_0523")
MLP_DUAL_GEMM = Contact("attr", f"{SRT}.models.llama:LlamaMLP.dual_gemm", "triton_draft",
                        use="read (llama.py:121): the MLP's DualGemm, asked whether it takes this call")
DUAL_GEMM_CAN_RUN = Contact("call", f"{SRT}.layers.dual_gemm:DualGemm.can_run", "triton_draft",
                            ("x", "gate_up_proj"), passes=("x", "gate_up_proj"),
                            use="called per drafter MLP forward (dual_gemm.py:102): True (SM100 dual GEMM) -> "
                                "SGLang's forward")
MLP_ACTIVATION_QUANT = Contact("attr", f"{SRT}.models.llama:LlamaMLP.activation_quant", "triton_draft",
                               use="read (llama.py:122): the MLP's DenseSiluAndMulQuant")
ACTIVATION_QUANT_ENABLED = Contact("attr", f"{SRT}.layers.quantization.fp8_activation:DenseSiluAndMulQuant.enabled",
                                   "triton_draft",
                                   use="read (fp8_activation.py:61): True (SM100 block-FP8) -> decode calls go to "
                                       "SGLang's forward")
RMSNORM_QUANT_LINEAR = Contact("attr", f"{SRT}.layers.layernorm:RMSNorm._quant_linear", "triton_draft",
                               use="read (layernorm.py:460): a norm with a fused FP8 input quant is not replaced")
from sglang_patches.compat.v0_5_17 import (  # unchanged
    FC_NORM_WEIGHTS, EAGLE3_DRAFTER, LLAMA_MLP, RMSNORM, SILU_AND_MUL, BATCH_INVARIANT, GET_EXEC,
    # --draft-weights fp8 (fp8_weights.py)
    LINEAR_BASE, LINEAR_QUANT_METHOD, LM_HEAD_QUANT_METHOD, UNQUANTIZED_LINEAR_METHOD,
    UNQUANTIZED_EMBEDDING_METHOD, SHOULD_APPLY_LM_HEAD, UNQUANTIZED_LM_HEAD_METHODS, COMPUTE_LM_HEAD,
    USE_FP32_LM_HEAD, EAGLE3_FC, EAGLE3_LM_HEAD, DRAFT_WORKER_TARGET, TP_WORKER_MODEL_RUNNER,
    # the module tree plan_drafter walks
    EAGLE3_LOGITS_PROCESSOR, EAGLE3_EMBED_TOKENS, EAGLE3_LAYER_MLP, LLAMA_LAYER_SELF_ATTN, LLAMA_ATTN_QKV,
    LLAMA_ATTN_O, LLAMA_MLP_GATE_UP, LLAMA_MLP_DOWN, USE_INTEL_AMX, EAGLE3_MODEL_LAYERS,
)

# ---------------------------------------------------------------- simulate_acceptance (--simulate-acceptance)
from sglang_patches.compat.v0_5_17 import (  # unchanged
    SIM_ACCEPT_INDEX, SIM_SWITCH, SIM_TOKEN_MODE, SIM_CALLER, SIM_CALLER_MUST_READ, GET_SPEC,
)

# ---------------------------------------------------------------- uniform expert routing (benchmarks/verify_cost.py)
from sglang_patches.compat.v0_5_17 import EXPERT_RECORDER_DIR_ENV, UNIFORM_EXPERTS_ENV  # unchanged

# ---------------------------------------------------------------- step_timing (opt-in, no-speculation baselines)
from sglang_patches.compat.v0_5_17 import STEP_FORWARD  # unchanged


def contacts() -> list[Contact]:
    """Every contact point above, imported from 0.5.17 or declared here, in this file's order."""
    return [v for v in globals().values() if isinstance(v, Contact)]
