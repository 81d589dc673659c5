"""SGLang's real EAGLEWorkerV2 under --speculative-adaptive with the timing hooks applied, on CPU.

`SCRIPT` runs in a fresh interpreter (argv: model-config root, "overlap" or "sync") on whichever
SGLang is first on the path (0.5.17 or 0.5.23). Real: the worker's `forward_batch_generation`
(its `activate_step_by_batch`, the steps-0 branch and `_build_trivial_verify_input`),
`on_verify_complete_cpu`, `apply_runtime_state`, SGLang's `AdaptiveController` /
`AdaptiveSpeculativeParams` with its default config (bucket routing, EMA, warmup, switches), the
runtime context, ForwardMode and GenerationBatchResult, and the overlay's hooks installed by its
hook registry on the real classes.

STUBBED (they need a GPU, a loaded model and captured graphs): the kernels of the three phases
(`EagleDraftWorker.draft`, `EAGLEWorkerV2.verify`, `EagleDraftWorker._draft_extend_for_decode`,
replaced on the classes before the hooks wrap them; each advances a fake GPU stream and says what
shape it ran: the draft's verify input carries the draft worker's steps as SGLang's
build_eagle_verify_input does), `build_adaptive_runtime_state` (graph capture: it returns a
runtime state with no graphs), the CUDA events (tests/recorder_fakes.py), and the scheduler's
result processing, reduced to what SGLang's `_resolve_spec_v2_tokens` does for the adaptive
controller (accepted = accept_len - non-draft tokens, then `on_verify_complete_cpu`), called
through the overlay's real around-hook. The workers are created without their `__init__` (GPU);
they get the attributes stock `__init__` sets that the code above reads.

Prints RESULT + JSON: per cycle the shape the stub kernels saw (truth), the worker's steps before
the call (what a recorder reading too early would write) and the emitted records.
"""

SCRIPT = r"""
import contextlib, inspect, json, os, sys, types
import torch
root, mode = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import sglang
from sglang.srt import runtime_context as rc
from sglang.srt.server_args import ServerArgs
sa = ServerArgs(model_path=os.path.join(root, "target"), speculative_algorithm="EAGLE3",
                speculative_draft_model_path=os.path.join(root, "plain"), device="cpu",
                speculative_adaptive=True, speculative_num_steps=3, speculative_eagle_topk=1,
                speculative_num_draft_tokens=4)
rc.publish(sa, role="test")
from sglang.srt.managers.utils import GenerationBatchResult
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.srt.speculative import adaptive_runtime_state as ars
from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams
from sglang_patches import compat
from sglang_patches.server.hooks import REGISTRY
from sglang_patches.server.timing import hooks as th, runtime
from sglang_patches.vocab.schema import validate_record
from recorder_fakes import make

c = compat.current()
W2, DW = c.FORWARD_BATCH_GENERATION.owner(), c.DRAFT.owner()
stream_box = {}
seen = []  # per forward call: what the stub kernels ran

def draft_kernels(self, batch, *a, **k):  # the drafter's graphs + build_eagle_verify_input
    stream_box["s"].t += 1.0 * self.speculative_num_steps
    seen[-1]["draft_steps"] = self.speculative_num_steps
    return types.SimpleNamespace(is_verify_input=lambda: True, spec_steps=self.speculative_num_steps,
                                 draft_token_num=self.speculative_num_draft_tokens, kv_loc_plan=None)

def verify_kernels(self, batch, *a, **k):  # target verify forward + eagle_sample
    vi = batch.spec_info
    bs = len(batch.reqs)
    stream_box["s"].t += 5.0 + 0.05 * bs * vi.draft_token_num
    seen[-1].update(steps=int(vi.spec_steps), draft_tokens=int(vi.draft_token_num))
    acc = [min(int(vi.spec_steps), a) for a in ACCEPT[bs]]
    return GenerationBatchResult(accept_lens=torch.tensor([a + 1 for a in acc], dtype=torch.int32))

def extend_kernels(self, batch, batch_result, *a, **k):
    stream_box["s"].t += 1.0
    seen[-1]["extended"] = True

def prefill_extend_kernels(self, batch, target_hidden_states, next_token_ids, *a, **k):
    stream_box["s"].t += 2.0
    seen[-1]["prefill_extend_kwargs"] = sorted(k)
    return "next draft input"

def target_prefill_kernels(batch, **kwargs):  # the target's prefill forward
    stream_box["s"].t += 8.0
    seen[-1]["target_kwargs"] = sorted(kwargs)
    return GenerationBatchResult(logits_output=types.SimpleNamespace(hidden_states=None, mm_input_embeds=None),
                                 next_token_ids=torch.zeros(len(batch.reqs), dtype=torch.long))

# the drafter accepts everything at bs 2, one token at bs 40 and nothing at bs 12
ACCEPT = {2: [7, 7], 12: [0] * 12, 40: [1] * 40, 70: [0] * 70}
for cls, name, fn in ((DW, c.DRAFT.name, draft_kernels), (W2, c.VERIFY.name, verify_kernels),
                      (DW, c.DRAFT_EXTEND_DECODE.name, extend_kernels),
                      (DW, c.DRAFT_EXTEND_PREFILL.name, prefill_extend_kernels)):
    setattr(cls, name, fn)

rec, stream, clock, out = make(pool_size=16)
stream_box["s"] = stream
runtime.get_or_create_recorder = lambda worker: rec
runtime.active = lambda: rec
th._is_capturing = lambda: False
REGISTRY.apply(th.specs())

W = W2.__new__(W2)
D = DW.__new__(DW)
for obj in (W, D):  # what stock __init__ sets and forward_batch_generation reads
    obj.server_args, obj.topk, obj.device = sa, 1, "cpu"
    obj.speculative_num_steps, obj.speculative_num_draft_tokens = 3, 4
W.speculative_algorithm = W2.__init__.__globals__["SpeculativeAlgorithm"].from_string("EAGLE3")
W._draft_worker = D
D.draft_runner = types.SimpleNamespace(tp_group=None, draft_attn_backend=None, attn_backend=None)
D.draft_tp_context = lambda group: contextlib.nullcontext()       # 0.5.17 (no draft TP)
D.parallel_layout = types.SimpleNamespace(tp_group=None)          # 0.5.23 (no draft TP)
W._target_worker = types.SimpleNamespace(model_runner=types.SimpleNamespace(attn_backend=None),
                                        forward_batch_generation=target_prefill_kernels)

def runtime_state(speculative_num_steps, speculative_num_draft_tokens, cuda_graph_bs=None):
    # SGLang captures the graphs of one steps value here (GPU): a state without graphs instead
    return ars.SpecRuntimeState(
        speculative_num_steps=speculative_num_steps, speculative_num_draft_tokens=speculative_num_draft_tokens,
        draft_attn_backend=None, cuda_graph_runner=None,
        target_attn_backend=types.SimpleNamespace(verify_mask=None, max_context_len=64),
        target_graph_runner=None, draft_extend_attn_backend=None, cuda_graph_runner_for_draft_extend=None)

W.build_adaptive_runtime_state = runtime_state
if "config_path" in inspect.signature(ars.AdaptiveController.__init__).parameters:  # 0.5.17
    W.adaptive_controller = ars.AdaptiveController(W, config_path=None)
else:  # 0.5.23 hands it the params
    W.adaptive_controller = ars.AdaptiveController(W, AdaptiveSpeculativeParams(initial_steps=3, cfg_path=None))
W.adaptive_controller.register(runtime_state(3, 4))
W.adaptive_controller.init_states(cuda_graph_bs=None)

def make_batch(bs, step):
    reqs = [types.SimpleNamespace(is_retracted=False, finished=lambda: False, rid=f"r{step}-{i}") for i in range(bs)]
    draft_input = types.SimpleNamespace(is_verify_input=lambda: False, bonus_tokens=torch.zeros(bs, dtype=torch.long))
    return types.SimpleNamespace(forward_mode=ForwardMode.DECODE, is_extend_in_batch=False, reqs=reqs,
                                 seq_lens=torch.full((bs,), 16, dtype=torch.long), seq_lens_sum=16 * bs,
                                 seq_lens_cpu=None, spec_info=draft_input)

def process(result, batch):  # the scheduler's result processing, through the overlay's real around-hook
    def sglang_resolve(self, res, b):
        non_draft = getattr(res, "num_non_draft_tokens_per_req", 1)  # 0.5.23's field; 0.5.17 subtracts 1
        res.num_correct_drafts_per_req_cpu = [x - non_draft for x in res.accept_lens.tolist()]
        W.on_verify_complete_cpu(res.num_correct_drafts_per_req_cpu, batch_size=len(b.reqs))
    th.resolve_spec_v2_tokens(sglang_resolve, None, result, batch)

# a prefill first: 0.5.23 runs it in _forward_prefill_batch, inside the timed forward call
batch = make_batch(3, -1)
batch.forward_mode = ForwardMode.EXTEND
seen.append({"bs": 3, "prefill": True})
prefill_result = W.forward_batch_generation(batch)
prefill_out = prefill_result.next_draft_input
schedule = [12] * 30 + [40] * 20 + [70] * 12 + [2] * 40 + [12] * 30
pending = None
for i, bs in enumerate(schedule):
    batch = make_batch(bs, i)
    seen.append({"bs": bs, "before": W.speculative_num_steps})
    result = W.forward_batch_generation(batch)
    if mode == "sync":
        process(result, batch)
    else:  # overlap: the previous cycle's result is processed after this cycle was launched
        if pending is not None:
            process(*pending)
        pending = (result, batch)
    stream.t += 0.25
if pending is not None:
    process(*pending)
rec.flush()
for r in out:
    validate_record(r)
prefill = {"truth": seen.pop(0), "record": out.pop(0), "next_draft_input": prefill_out}
print("RESULT" + json.dumps({"version": sglang.__version__, "seen": seen, "records": out, "prefill": prefill,
                             "shape_checked": rec.shape_checked, "shape_mismatch": rec.shape_mismatch,
                             "candidates": W.adaptive_controller.candidate_steps}))
"""
