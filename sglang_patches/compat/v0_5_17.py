"""Every SGLang contact point of every overlay feature, as in sglang 0.5.17.

Features take their targets from here and spell no SGLang path themselves; a new SGLang version is
one new file like this (plus its tests), registered in `compat/__init__.py`. Line numbers in the
notes are sglang 0.5.17's (site-packages/sglang/srt/). `sglang-patches patches --contacts` checks
every entry below against the installed SGLang, `--against-source DIR` against a source tree.

v0_5_23.py imports by name the entries 0.5.23 keeps unchanged, so an edit here changes them there too
(both versions' contact checks run on it); a change that holds for 0.5.17 only is an entry of its own
in v0_5_23.py.
"""
from __future__ import annotations

from sglang_patches.compat.contacts import Contact

# The versions this file is used for (inclusive), and what was run where. GPU_RAN ran end to end on
# a GPU; CPU_VERIFIED had the CPU test suite run on its real classes only. A version between this
# file's and the next file's COVERS is served by this file (the nearest lower) with a warning that
# it was not tested (compat.for_version).
COVERS = ("0.5.17", "0.5.17")
GPU_RAN = ("0.5.17",)
CPU_VERIFIED = ()
# For a CPU_VERIFIED version: what of it has run on a GPU so far, in a few words ("" = nothing yet).
GPU_PARTLY = ""
# A feature that cannot run from some version on inside what this file serves: feature -> (first
# version, why). None here.
FEATURE_REFUSED_FROM: dict[str, tuple[str, str]] = {}

SRT = "sglang.srt"
SCHED = f"{SRT}.managers.scheduler"
W2 = f"{SRT}.speculative.eagle_worker_v2"
PS = f"{SRT}.distributed.parallel_state"
RC = f"{SRT}.runtime_context"
HTTP = f"{SRT}.entrypoints.http_server"

# ---------------------------------------------------------------- core: launcher, Engine, scheduler entry
LAUNCH_SERVER = Contact("entry", f"{HTTP}:launch_server", "core", ("server_args", "run_scheduler_process_func"),
                        passes=("server_args", "run_scheduler_process_func"),
                        use="the launcher passes run_scheduler_process_func=scheduler_entry.run_scheduler_process "
                            "so every spawned scheduler applies the overlay first")
ENGINE = Contact("call", f"{SRT}.entrypoints.engine:Engine", "core", use="sglang_patches.Engine subclasses it")
ENGINE_SCHEDULER_FUNC = Contact("entry", f"{SRT}.entrypoints.engine:Engine.run_scheduler_process_func", "core",
                                use="class attribute overridden in the subclass sglang_patches.Engine")
RUN_SCHEDULER_PROCESS = Contact("call", f"{SCHED}:run_scheduler_process", "core",
                                use="scheduler_entry calls it after applying the overlay")
PREPARE_SERVER_ARGS = Contact("call", f"{SRT}.server_args:prepare_server_args", "core", ("argv",), passes=("argv",))
SERVER_ARGS = Contact("call", f"{SRT}.server_args:ServerArgs.add_cli_args", "core", ("parser",), passes=("parser",),
                      use="--help lists SGLang's flags before the overlay's")
LOAD_PLUGINS = Contact("call", f"{SRT}.plugins:load_plugins", "core", passes=())
KILL_PROCESS_TREE = Contact("call", f"{SRT}.utils.common:kill_process_tree", "core", ("parent_pid", "include_parent"),
                            passes=("parent_pid", "include_parent"),
                            use="the launcher's exit and its deliberate-stop handlers (exit 3, 4) kill the schedulers")

# ---------------------------------------------------------------- marker (+ the /spec_timing routes)
GET_INTERNAL_STATE = Contact("hook", f"{SCHED}:Scheduler.get_internal_state", "marker", ("self", "recv_req"),
                             use="after: adds internal_state['sglang_patches']", undo="registry")
SET_INTERNAL_STATE = Contact("hook", f"{SCHED}:Scheduler.set_internal_state", "marker", ("self", "recv_req"),
                             use="around: consumes the /spec_timing/reset key", undo="registry")
HTTP_APP = Contact("global", f"{HTTP}:app", "marker",
                   use="read: GET /spec_timing and POST /spec_timing/reset are added to the launcher's app",
                   undo="none: routes live as long as the server process")
GET_GLOBAL_STATE = Contact("call", f"{HTTP}:get_global_state", "marker", passes=())
TOKENIZER_MANAGER = Contact("attr", f"{HTTP}:_GlobalState.tokenizer_manager", "marker",
                            use="read by the routes: its get_internal_state / set_internal_state RPCs")
TM_GET_INTERNAL_STATE = Contact("call", f"{SRT}.managers.tokenizer_control_mixin:TokenizerControlMixin.get_internal_state",
                                "marker", passes=())
TM_SET_INTERNAL_STATE = Contact("call", f"{SRT}.managers.tokenizer_control_mixin:TokenizerControlMixin.set_internal_state",
                                "marker", ("obj",), passes=("obj",))
SET_INTERNAL_STATE_REQ = Contact("call", f"{SRT}.managers.io_struct:SetInternalStateReq", "marker",
                                 passes=("server_args",))
AUTH_LEVEL = Contact("call", f"{SRT}.utils.auth:AuthLevel", "marker")
AUTH_LEVEL_DECORATOR = Contact("call", f"{SRT}.utils.auth:auth_level", "marker", ("level",), passes=("level",))

# ---------------------------------------------------------------- timing
FORWARD_BATCH_GENERATION = Contact("hook", f"{W2}:EAGLEWorkerV2.forward_batch_generation", "timing",
                                   ("self", "batch"), use="around: the whole cycle", undo="registry")
DRAFT = Contact("hook", f"{W2}:EagleDraftWorker.draft", "timing", ("self", "batch"),
                use="around: draft phase", undo="registry")
VERIFY = Contact("hook", f"{W2}:EAGLEWorkerV2.verify", "timing", ("self", "batch"),
                 use="around: verify phase", undo="registry")
DRAFT_EXTEND_DECODE = Contact("hook", f"{W2}:EagleDraftWorker._draft_extend_for_decode", "timing",
                              ("self", "batch", "batch_result"), use="around: draft-extend phase", undo="registry")
DRAFT_EXTEND_PREFILL = Contact("hook", f"{W2}:EagleDraftWorker._draft_extend_for_prefill", "timing",
                               ("self", "batch", "target_hidden_states"),
                               use="around: prefill draft-extend", undo="registry")
RESOLVE_SPEC_V2_TOKENS = Contact("hook", f"{SRT}.managers.scheduler_components.batch_result_processor:"
                                         "SchedulerBatchResultProcessor._resolve_spec_v2_tokens", "timing",
                                 ("self", "result", "batch"),
                                 use="around: accepted counts, request tags (Req.rid, is_retracted, finished()), drain",
                                 undo="registry")

NUM_CORRECT_DRAFTS = Contact("attr", f"{SRT}.managers.utils:GenerationBatchResult.num_correct_drafts_per_req_cpu",
                             "timing", use="read: per request accept_len - 1")
WORKER_STEPS = Contact("attr", f"{W2}:EAGLEWorkerV2.speculative_num_steps", "timing",
                       use="read after forward_batch_generation returns: the steps that ran (under "
                           "--speculative-adaptive activate_step_by_batch switches it inside the call)")
WORKER_DRAFT_TOKENS = Contact("attr", f"{W2}:EAGLEWorkerV2.speculative_num_draft_tokens", "timing",
                              use="read with WORKER_STEPS")
WORKER_TOPK = Contact("attr", f"{W2}:EAGLEWorkerV2.topk", "timing", use="read")
ADAPTIVE_CONTROLLER = Contact("attr", f"{W2}:EAGLEWorkerV2.adaptive_controller", "timing",
                              use="read once (None without --speculative-adaptive)")
ADAPTIVE_CANDIDATES = Contact("attr", f"{SRT}.speculative.adaptive_runtime_state:AdaptiveController.candidate_steps",
                              "timing", use="read once: the steps values the server can run (per-steps windows, "
                                            "Prometheus children)")

VERIFY_INPUT_SHAPE = Contact("attr", f"{SRT}.speculative.eagle_info:EagleVerifyInput.spec_steps", "timing",
                             use="read (with draft_token_num) in the verify hook: the tree the cycle verifies, "
                                 "compared with WORKER_STEPS (recorder shape_checked / shape_mismatch)")
VERIFY_INPUT_DRAFT_TOKENS = Contact("attr", f"{SRT}.speculative.eagle_info:EagleVerifyInput.draft_token_num",
                                    "timing", use="read with VERIFY_INPUT_SHAPE")
# The accept-collapse alarm's preflight line (accept_alarm.server_pair): the pair and algorithm the
# server was started with, read once from the worker's ServerArgs when the alarm is built.
WORKER_SERVER_ARGS = Contact("attr", f"{W2}:EAGLEWorkerV2.server_args", "timing",
                             use="read once when the timing sinks are built (the fields below, enable_metrics)")
SERVER_ARGS_MODEL_PATH = Contact("attr", f"{SRT}.server_args:ServerArgs.model_path", "timing",
                                 use="read once: the alarm's preflight --model-path")
SERVER_ARGS_DRAFT_MODEL_PATH = Contact("attr", f"{SRT}.server_args:ServerArgs.speculative_draft_model_path",
                                       "timing", use="read once: the alarm's preflight --speculative-draft-model-path")
SERVER_ARGS_ALGORITHM = Contact("attr", f"{SRT}.server_args:ServerArgs.speculative_algorithm", "timing",
                                use="read once: the alarm's preflight --speculative-algorithm")
SERVER_ARGS_ADAPTIVE = Contact("attr", f"{SRT}.server_args:ServerArgs.speculative_adaptive", "adaptive_graphs",
                               use="read once by sglang_patches.Engine (its keyword, or a prebuilt server_args) "
                                   "for the rule that adds adaptive_graphs to all")
# Server flag spellings the overlay writes into SGLang commands (sweep servers, advise's printed
# launch). 0.5.17 parses --cuda-graph-bs / --cuda-graph-max-bs as deprecated aliases (with a warning);
# 0.5.23 dropped them, and argparse refuses them as ambiguous prefixes of the -decode / -prefill
# pairs. The -decode names parse on both.
FLAG_CUDA_GRAPH_BS = "--cuda-graph-bs-decode"
FLAG_CUDA_GRAPH_MAX_BS = "--cuda-graph-max-bs-decode"
# Under --speculative-adaptive a steps value other than the start runs on a runtime state built per
# candidate (EAGLEWorkerV2.build_adaptive_runtime_state, the candidate's leaves overridden in the
# runtime config store). 0.5.17 captures that state's draft-extend CUDA graphs at the start's width
# (speculative/spec_utils.py resolve_num_tokens_per_req reads server_args.speculative_num_draft_tokens,
# which the override leaves alone), and can_run_graph refuses batches of another width: its draft-extend
# runs eagerly (on the H200 at bs 1, 8B shapes, as fast as the graph: results 2026-12-03-adaptive-graphs).
# What `advise --adaptive-config` says; tests read the real function and the real override.
ADAPTIVE_SWAPPED_EXTEND_GRAPHS = False
# Kernels SGLang compiles with nvcc at their first use and caches (sglang/kernels/jit/utils/compile.py
# load_jit: <cache>/<module name>__arch_<arch>__tvmffi_<version>/); the first INT4 (WNA16) MoE forward
# compiles moe_wna16_marlin for minutes (233 s on an H100) while the server says nothing. The launcher
# names it beforehand when the cache lacks it (offline/first_use.py). (environment variable, default, glob of
# the built library: the folder alone is made before the compile, and stays behind an interrupted one)
JIT_CACHE = ("TVM_FFI_CACHE_DIR", "~/.cache/tvm-ffi", "sgl_kernel_jit_{module}_*/*.so")
# ModelRunner.max_decode_logits_rows sizes the CUDA graphs' shared logits buffer from the start's draft
# tokens alone: a server started below its largest adaptive candidate fails at start ("shared logits
# buffer holds R rows but caller needs ..."), so the launcher refuses that start (launch_adaptive.py).
ADAPTIVE_BUFFERS_FROM_START = True
# The opt-in adaptive_graphs feature: that function with its by-name copies rebound (the draft-extend
# runner imports it by name), its draft_extend width taken from the runtime config store as 0.5.23
# does, so each candidate's graphs are captured at its width; other phases unchanged.
ADAPTIVE_EXTEND_WIDTH = Contact("hook", f"{SRT}.speculative.spec_utils:resolve_num_tokens_per_req", "adaptive_graphs",
                                ("phase", "server_args"),
                                use="around (rebind): phase draft_extend returns get_spec().speculative_num_draft_"
                                    "tokens (the candidate's inside build_adaptive_runtime_state's override)",
                                undo="registry (aliases too)")
ADAPTIVE_GET_SPEC = Contact("call", f"{RC}:get_spec", "adaptive_graphs", passes=(),
                            use="the runtime config store the wrapper reads the width from")
# SGLang's --speculative-adaptive-config format (speculative/adaptive_spec_params.py): what
# `advise --adaptive-config` writes, and SGLang's defaults it keeps for batch sizes a log lacks
# (DEFAULT_ADAPTIVE_CONFIG, copied; a test compares it with the real one).
LOAD_ADAPTIVE_CONFIG = Contact("call", f"{SRT}.speculative.adaptive_spec_params:_load_adaptive_config", "timing",
                               ("cfg_path",), passes=("cfg_path",),
                               use="the format advise --adaptive-config writes (its tests load the file with it); the launcher reads "
                                   "a config's candidates with it (launch_adaptive.py)")
DEFAULT_ADAPTIVE_CONFIG = Contact("global", f"{SRT}.speculative.adaptive_spec_params:DEFAULT_ADAPTIVE_CONFIG",
                                  "timing", use="read: ADAPTIVE_DEFAULTS below is its copy")
ADAPTIVE_DEFAULTS = {
    "1": {"candidate_steps": [1, 3, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
}

# ---------------------------------------------------------------- checks (hidden-state)
INIT_ATTENTION_BACKENDS_CHECK = Contact("hook", f"{W2}:EagleDraftWorker.init_attention_backends", "checks",
                                        ("self",), use="before: load-time check", undo="registry")
DRAFT_EXTEND_PREFILL_CHECK = Contact("hook", DRAFT_EXTEND_PREFILL.target, "checks",
                                     ("self", "batch", "target_hidden_states"),
                                     use="before: runtime width check", undo="registry")
DRAFT_EXTEND_DECODE_CHECK = Contact("hook", DRAFT_EXTEND_DECODE.target, "checks", ("self", "batch", "batch_result"),
                                    use="before: runtime width check", undo="registry")
LAYERS_TO_CAPTURE = Contact("attr", f"{SRT}.models.llama:LlamaModel.layers_to_capture", "checks",
                            use="read: the target layers whose input is captured for the drafter")
CAPTURE_AUX = Contact("attr", f"{SRT}.models.llama:LlamaForCausalLM.capture_aux_hidden_states", "checks",
                      use="read")
DEEPSEEK_LAYERS_TO_CAPTURE = Contact("attr", f"{SRT}.models.deepseek_v2:DeepseekV2Model.layers_to_capture", "checks",
                                     use="read: the MLA/MoE target's captured layers (vocab/capture.py: ids starting "
                                         "at 1 shifted by one, others kept)")
DEEPSEEK_CAPTURE_AUX = Contact("attr", f"{SRT}.models.deepseek_v2:DeepseekV2ForCausalLM.capture_aux_hidden_states",
                               "checks", use="read")
KIMI_K25_LANGUAGE_MODEL = Contact("attr", f"{SRT}.models.kimi_k25:KimiK25ForConditionalGeneration.language_model",
                                  "checks", use="read: the DeepseekV3ForCausalLM that captures for the multimodal wrapper")
MLA_HEAD_FC = Contact("attr", f"{SRT}.models.kimi_k25_eagle3:Eagle3MLAModel.fc", "checks",
                      use="read: input_size / output_size of the MLA head's ColumnParallelLinear fc")

# ---------------------------------------------------------------- draft_tp (--draft-tp-size)
DRAFT_WORKER_INIT = Contact("hook", f"{W2}:EagleDraftWorker.__init__", "draft_tp",
                            ("server_args", "gpu_id", "ps", "nccl_port", "target_worker"),
                            use="around: builds the drafter on a group of K ranks", undo="registry")
ALLOC_MEMORY_POOL = Contact("hook", f"{W2}:EagleDraftWorker.alloc_memory_pool", "draft_tp",
                            ("memory_pool_config", "req_to_token_pool", "token_to_kv_pool_allocator"),
                            use="around: KV pool sized in the small group", undo="registry")
INIT_LM_HEAD = Contact("hook", f"{W2}:EagleDraftWorker.init_lm_head", "draft_tp",
                       use="around: full target embedding / lm_head re-sharded for K", undo="registry")
BUILD_EAGLE_VERIFY_INPUT = Contact("hook", f"{SRT}.speculative.eagle_worker_common:build_eagle_verify_input",
                                   "draft_tp", ("parent_list", "top_scores_index", "draft_tokens", "draft_probs"),
                                   use="before (rebind: imported by name into eagle_worker_v2): tree broadcast",
                                   undo="registry (aliases too)")
INIT_MODEL_PARALLEL_GROUP = Contact("call", f"{PS}:init_model_parallel_group", "draft_tp",
                                    ("group_ranks", "local_rank", "backend", "use_custom_allreduce", "group_name"),
                                    passes=("group_ranks", "local_rank", "backend", "use_custom_allreduce", "group_name"),
                                    use="creates the draft groups (collective)",
                                    undo="none: process groups live as long as the process")
GET_WORLD_GROUP = Contact("call", f"{PS}:get_world_group", "draft_tp", passes=())
PATCH_TENSOR_PARALLEL_GROUP = Contact("call", f"{PS}:patch_tensor_parallel_group", "draft_tp", ("tp_group",),
                                      passes=("tp_group",),
                                      use="entered through draft_tp_context, which passes tp_group only")
DRAFT_TP_CONTEXT_FN = Contact("call", f"{SRT}.speculative.spec_utils:draft_tp_context", "draft_tp", ("tp_group",),
                              passes=("tp_group",),
                              use="swaps _TP for the small group", undo="its context exit")
PARALLEL_OVERRIDE = Contact("call", f"{RC}:ParallelContext.override", "draft_tp",
                            use="tp/attn-tp sizes, ranks and groups of the small group", undo="its context exit")
GET_PARALLEL = Contact("call", f"{RC}:get_parallel", "draft_tp", passes=())
PARALLEL_FIELDS = Contact("global", f"{RC}:_PARALLEL_FIELDS", "draft_tp",
                          use="read: must contain the fields we override")
TP_GLOBAL = Contact("global", f"{PS}:_TP", "draft_tp", use="read (draft_tp_context swaps it)")
ATTN_TP_GLOBAL = Contact("global", f"{PS}:_ATTN_TP", "draft_tp",
                         use="swapped to the small group inside small_group_context",
                         undo="restored at the context's exit (try/finally)")
TP_STATE_PATCHED = Contact("global", f"{PS}:_TP_STATE_PATCHED", "draft_tp", use="read")
DRAFT_TP_CONTEXT_ATTR = Contact("attr", f"{W2}:EagleDraftWorker.draft_tp_context", "draft_tp",
                                use="instance attribute replaced by small_group_context",
                                undo="registry change: the original value is put back")
DRAFT_WORKER_PS = Contact("attr", f"{W2}:EagleDraftWorker.ps", "draft_tp",
                          use="instance attribute reset to the target's ParallelSizes after __init__ ran with K",
                          undo="registry change: the value __init__ stored is put back")
DRAFT_INIT_ATTENTION_BACKENDS = Contact("call", f"{W2}:EagleDraftWorker.init_attention_backends", "draft_tp",
                                        use="enters self.draft_tp_context (so runs in the small group)")
DRAFT_INIT_CUDA_GRAPHS = Contact("call", f"{W2}:EagleDraftWorker.init_cuda_graphs", "draft_tp",
                                 use="enters self.draft_tp_context (graph capture in the small group)")
GET_EMBED_AND_HEAD = Contact("attr", f"{SRT}.models.llama:LlamaForCausalLM.get_embed_and_head", "draft_tp",
                             use="shadowed by an instance attribute during init_lm_head",
                             undo="deleted again in a finally block")

# ---------------------------------------------------------------- triton_draft (--draft-backend triton)
EAGLE3_LAYER_FORWARD = Contact("hook", f"{SRT}.models.llama_eagle3:LlamaDecoderLayer.forward", "triton_draft",
                               ("self", "positions", "embeds", "hidden_states", "forward_batch", "residual"),
                               use="around: fused_draft_input, fused_add_rmsnorm", undo="registry")
EAGLE3_MODEL_FORWARD = Contact("hook", f"{SRT}.models.llama_eagle3:LlamaModel.forward", "triton_draft",
                               ("self", "input_ids", "positions", "forward_batch", "input_embeds", "pp_proxy_tensors"),
                               use="around: aux_norm before fc", undo="registry")
LLAMA_MLP_FORWARD = Contact("hook", f"{SRT}.models.llama:LlamaMLP.forward", "triton_draft",
                            ("self", "x", "forward_batch"), use="around: silu_and_mul (drafter MLPs only)",
                            undo="registry")
PREPARE_DRAFTER = Contact("hook", f"{W2}:EagleDraftWorker.init_attention_backends", "triton_draft", ("self",),
                          use="before: mark the drafter's modules, stack fc_norm weights", undo="registry")
EAGLE3_LAYER_FINGERPRINT = Contact("fingerprint", EAGLE3_LAYER_FORWARD.target, "triton_draft",
                                   expected="0c087e55ffd40d87", use="re-implemented line for line")
EAGLE3_MODEL_FINGERPRINT = Contact("fingerprint", EAGLE3_MODEL_FORWARD.target, "triton_draft",
                                   expected="37cddbd99aa9f578", use="re-implemented line for line")
LLAMA_MLP_FINGERPRINT = Contact("fingerprint", LLAMA_MLP_FORWARD.target, "triton_draft",
                                expected="30dbe183dd204acb", use="re-implemented line for line")
FC_NORM_WEIGHTS = Contact("weight", f"{SRT}.models.llama_eagle3:LlamaModel.fc_norm", "triton_draft",
                          use="each fc_norm weight's .data becomes a view of one stacked [K, H] tensor",
                          undo="registry change: each weight gets its original storage back")
EAGLE3_DRAFTER = Contact("call", f"{SRT}.models.llama_eagle3:LlamaForCausalLMEagle3", "triton_draft")
LLAMA_MLP = Contact("call", f"{SRT}.models.llama:LlamaMLP", "triton_draft")
RMSNORM = Contact("call", f"{SRT}.layers.layernorm:RMSNorm", "triton_draft")
SILU_AND_MUL = Contact("call", f"{SRT}.layers.activation:SiluAndMul", "triton_draft")
BATCH_INVARIANT = Contact("call", f"{SRT}.batch_invariant_ops:is_batch_invariant_mode_enabled", "triton_draft",
                          passes=())
GET_EXEC = Contact("call", f"{RC}:get_exec", "triton_draft", passes=())
# --draft-weights fp8 (fp8_weights.py): no SGLang function is patched; quant_method objects on the
# drafter's own modules are swapped, and SGLang's callers reach our method through them.
LINEAR_BASE = Contact("call", f"{SRT}.layers.linear:LinearBase", "triton_draft",
                      use="read: the drafter's qkv/o/gate_up/down modules must be SGLang linear layers")
LINEAR_QUANT_METHOD = Contact("attr", f"{SRT}.layers.linear:LinearBase.quant_method", "triton_draft",
                              use="replaced on the drafter's qkv/o/gate_up/down and lm_head modules by "
                                  "Fp8DraftLinearMethod (their forward calls quant_method.apply(self, x, bias))",
                              undo="registry change: each module's original method object is put back")
LM_HEAD_QUANT_METHOD = Contact("attr", f"{SRT}.layers.vocab_parallel_embedding:VocabParallelEmbedding.quant_method",
                               "triton_draft", use="the draft lm_head's (ParallelLMHead) method, replaced as above; "
                                                   "its embedding() is delegated to the original",
                               undo="as LINEAR_QUANT_METHOD")
UNQUANTIZED_LINEAR_METHOD = Contact("call", f"{SRT}.layers.quantization.unquant:UnquantizedLinearMethod",
                                    "triton_draft", use="read: only modules holding exactly this method take FP8")
UNQUANTIZED_EMBEDDING_METHOD = Contact("call", f"{SRT}.layers.quantization.unquant:UnquantizedEmbeddingMethod",
                                       "triton_draft", use="read: the lm_head takes FP8 only over this method")
SHOULD_APPLY_LM_HEAD = Contact("call", f"{SRT}.layers.logits_processor:should_apply_lm_head_quant_method",
                               "triton_draft", ("lm_head", "quant_method"), passes=("lm_head", "quant_method"),
                               use="true for a method class not named in _UNQUANTIZED_LM_HEAD_METHODS: then "
                                   "_compute_lm_head calls quant_method.apply(lm_head, hidden, bias) (tests call it)")
UNQUANTIZED_LM_HEAD_METHODS = Contact("global", f"{SRT}.layers.logits_processor:_UNQUANTIZED_LM_HEAD_METHODS",
                                      "triton_draft", use="read at prepare: Fp8DraftLinearMethod must not be in it")
COMPUTE_LM_HEAD = Contact("call", f"{SRT}.layers.logits_processor:LogitsProcessor._compute_lm_head", "triton_draft",
                          ("hidden_states", "lm_head", "embedding_bias"),
                          use="routes the draft lm_head through quant_method.apply (tests call it)")
USE_FP32_LM_HEAD = Contact("attr", f"{SRT}.layers.logits_processor:LogitsProcessor.use_fp32_lm_head", "triton_draft",
                           use="read: an fp32 lm_head (--enable-fp32-lm-head) stays SGLang's")
EAGLE3_FC = Contact("attr", f"{SRT}.models.llama_eagle3:LlamaModel.fc", "triton_draft",
                    use="read: its weight is quantised; model_forward runs fp8_linear in place of self.fc(...)")
EAGLE3_LM_HEAD = Contact("attr", f"{SRT}.models.llama_eagle3:LlamaForCausalLMEagle3.lm_head", "triton_draft",
                         use="read: the draft lm_head (its own ParallelLMHead, or model.embed_tokens when tied)")
DRAFT_WORKER_TARGET = Contact("attr", f"{W2}:EagleDraftWorker.target_worker", "triton_draft",
                              use="read at prepare: the lm_head must not be one of the target model's modules")
TP_WORKER_MODEL_RUNNER = Contact("attr", f"{SRT}.managers.tp_worker:TpModelWorker.model_runner", "triton_draft",
                                 use="read with DRAFT_WORKER_TARGET (its .model)")
# the module tree plan_drafter walks (attributes read, nothing replaced on them)
EAGLE3_LOGITS_PROCESSOR = Contact("attr", f"{SRT}.models.llama_eagle3:LlamaForCausalLMEagle3.logits_processor",
                                  "triton_draft", use="read: its use_fp32_lm_head")
EAGLE3_EMBED_TOKENS = Contact("attr", f"{SRT}.models.llama_eagle3:LlamaModel.embed_tokens", "triton_draft",
                              use="read: is the lm_head tied to it")
EAGLE3_LAYER_MLP = Contact("attr", f"{SRT}.models.llama_eagle3:LlamaDecoderLayer.mlp", "triton_draft",
                           use="read: its gate_up_proj / down_proj take FP8")
LLAMA_LAYER_SELF_ATTN = Contact("attr", f"{SRT}.models.llama:LlamaDecoderLayer.self_attn", "triton_draft",
                                use="read (the EAGLE-3 layer inherits it): its qkv_proj / o_proj take FP8")
LLAMA_ATTN_QKV = Contact("attr", f"{SRT}.models.llama:LlamaAttention.qkv_proj", "triton_draft",
                         use="read: takes FP8 (the EAGLE-3 layer reassigns it, 2H wide, in its __init__: guarded by "
                             "EAGLE3_LAYER_FINGERPRINT's layer, this contact guards the name)")
LLAMA_ATTN_O = Contact("attr", f"{SRT}.models.llama:LlamaAttention.o_proj", "triton_draft", use="read: takes FP8")
LLAMA_MLP_GATE_UP = Contact("attr", f"{SRT}.models.llama:LlamaMLP.gate_up_proj", "triton_draft", use="read: takes FP8")
LLAMA_MLP_DOWN = Contact("attr", f"{SRT}.models.llama:LlamaMLP.down_proj", "triton_draft", use="read: takes FP8")
USE_INTEL_AMX = Contact("call", f"{SRT}.utils.common:use_intel_amx_backend", "triton_draft", ("layer",),
                        passes=("layer",), use="called by plan_drafter: a linear on SGLang's AMX CPU path keeps "
                                                "its method")
EAGLE3_MODEL_LAYERS = Contact("attr", f"{SRT}.models.llama_eagle3:LlamaModel.layers", "triton_draft",
                              use="read: plan_drafter walks each layer's linears")

# ---------------------------------------------------------------- simulate_acceptance (--simulate-acceptance)
SPEC_UTILS = f"{SRT}.speculative.spec_utils"
SIM_ACCEPT_INDEX = Contact("hook", f"{SPEC_UTILS}:generate_simulated_accept_index", "simulate_acceptance",
                           ("accept_index", "predict", "num_correct_drafts", "candidates", "target_predict",
                            "bs", "spec_steps", "simulate_acc_len", "simulate_acc_method", "simulate_acc_token_mode"),
                           use="around: per-request accept lengths drawn from the rates", undo="registry")
SIM_SWITCH = Contact("global", f"{SPEC_UTILS}:SIMULATE_ACC_LEN", "simulate_acceptance",
                     use="set > 0 so eagle_sample enters SGLang's own simulation branch",
                     undo="registry change: the original value is put back (simulate.sglang_hooks.disable)")
SIM_TOKEN_MODE = Contact("global", f"{SPEC_UTILS}:SIMULATE_ACC_TOKEN_MODE", "simulate_acceptance", use="read")
SIM_CALLER = Contact("call", f"{SRT}.speculative.eagle_utils:eagle_sample", "simulate_acceptance",
                     use="must still import both names from spec_utils at call time and gate on "
                         "SIMULATE_ACC_LEN > 0: its source must contain SIM_CALLER_MUST_READ")
SIM_CALLER_MUST_READ = (f"from {SPEC_UTILS} import", SIM_SWITCH.name, f"{SIM_ACCEPT_INDEX.name}(",
                        f"if {SIM_SWITCH.name} > 0")
GET_SPEC = Contact("call", f"{RC}:get_spec", "simulate_acceptance", passes=(),
                   use="speculative_eagle_topk read at the first simulated verify")

# ---------------------------------------------------------------- uniform expert routing (benchmarks/verify_cost.py)
UNIFORM_EXPERTS_ENV = Contact("attr", f"{SRT}.environ:Envs.SGLANG_SIMULATE_UNIFORM_EXPERTS", "moe_routing",
                              use="read by SGLang's select_experts: set to 1 in a benchmark server's environment, "
                                  "each token goes to top_k experts spaced n_experts // top_k apart from a "
                                  "random offset (dummy routers can send every token to the same experts)")
EXPERT_RECORDER_DIR_ENV = Contact("attr", f"{SRT}.environ:Envs.SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR", "moe_routing",
                                  use="read by SGLang's expert distribution recorder: the folder its dumps go to "
                                      "(benchmarks/moe_expert_spread.py, --expert-distribution-recorder-mode per_token)")

# ---------------------------------------------------------------- step_timing (opt-in, no-speculation baselines)
STEP_FORWARD = Contact("hook", f"{SRT}.managers.tp_worker:TpModelWorker.forward_batch_generation", "step_timing",
                       ("self", "batch", "forward_batch", "is_verify"),
                       use="around: CUDA events around each no-speculation forward step", undo="registry")


def contacts() -> list[Contact]:
    """Every contact point declared above, in declaration order."""
    return [v for v in globals().values() if isinstance(v, Contact)]
