"""One rank of a gloo world on sglang 0.5.17's real classes (CPU), for tests/test_draft_tp.py.

    python tests/draft_tp_ranks_0517.py RANK WORLD PORT FIXTURE_ROOT K    (the venv's sglang 0.5.17)

Builds the real TP groups, publishes a ServerArgs (EAGLE3, tp_size=WORLD), the real target
LlamaForCausalLM (TP WORLD) and twice SGLang's real EagleDraftWorker (__init__ with the target's
ParallelState, alloc_memory_pool, init_token_map, init_lm_head): once stock, once with the overlay's
draft_tp hooks for --draft-tp-size K. One draft step of each runs under
worker.draft_tp_context(worker.draft_runner.tp_group), as 0.5.17's draft phases do. Prints one line
`RESULT {json}`. Mocks (the draft TpModelWorker, the attention kernel) and why:
tests/draft_tp_ranks_common.py.
"""
import json
import os
import sys
import types

rank, world, port, root, k = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
from sglang.srt import runtime_context as rc  # noqa: E402
from sglang.srt.distributed import parallel_state as psm  # noqa: E402
from sglang.srt.distributed.parallel_state_wrapper import ParallelState  # noqa: E402
from sglang.srt.server_args import ServerArgs  # noqa: E402

psm.init_distributed_environment(world_size=world, rank=rank, distributed_init_method=f"tcp://127.0.0.1:{port}",
                                 local_rank=rank, backend="gloo")
psm.initialize_model_parallel(world, backend="gloo")
target_dir, draft_dir = os.path.join(root, "target"), os.path.join(root, "draft")
sa = ServerArgs(model_path=target_dir, speculative_algorithm="EAGLE3", speculative_draft_model_path=draft_dir,
                speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4,
                tp_size=world, device="cpu", dtype="float32", skip_tokenizer_init=True, load_format="dummy")
rc.publish(sa, role="test")
import sglang.srt.layers.rotary_embedding.base as rb  # noqa: E402

rb._is_cpu = True  # SGLang's CPU rotary path
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import draft_tp_ranks_common as common  # noqa: E402
from sglang.srt.configs.model_config import ModelConfig  # noqa: E402
from sglang.srt.speculative import eagle_worker_v2 as w2  # noqa: E402

target_group = psm.get_tp_group()
ps = ParallelState.trivial(tp_rank=rank, tp_size=world, attn_tp_rank=rank, attn_tp_size=world)
target_mc = ModelConfig(target_dir, trust_remote_code=False, dtype="float32")
draft_mc = ModelConfig(draft_dir, trust_remote_code=False, dtype="float32", is_draft_model=True,
                       speculative_algorithm="EAGLE3")
from sglang.srt.layers.dp_attention import initialize_dp_attention  # noqa: E402

initialize_dp_attention(sa, target_mc)  # what the scheduler does before building the model runner
target = common.build_target(target_mc)
built = {}
target_worker = types.SimpleNamespace(
    model_runner=types.SimpleNamespace(model=target, model_config=target_mc, tp_group=target_group),
    model_config=target_mc, random_seed=0)
w2.TpModelWorker = common.draft_worker_class(draft_mc, built)


def make_worker():
    worker = w2.EagleDraftWorker(sa, 0, ps, int(port), target_worker)
    worker.alloc_memory_pool(memory_pool_config=None, req_to_token_pool=None, token_to_kv_pool_allocator=None)
    return worker


def scope(worker):
    return worker.draft_tp_context(worker.draft_runner.tp_group)


ids, aux = common.inputs(draft_mc)
out = {}
stock = make_worker()
out["stock_scope"], out["stock_calls"] = built["scope"], stock.draft_worker.calls
stock_step = common.draft_step(stock, ids, aux, scope(stock))

from sglang_patches.compat import v0_5_17  # noqa: E402
from sglang_patches.server.draft_tp import patch_module  # noqa: E402
from sglang_patches.server.hooks import REGISTRY  # noqa: E402

os.environ["SGLANG_PATCHES_CONFIG"] = json.dumps({"patches": ["draft_tp"], "draft_tp_size": k})
mod = patch_module(v0_5_17)
names = lambda: [w2.build_eagle_verify_input, w2.EagleDraftWorker.__dict__["__init__"],  # noqa: E731
                 w2.EagleDraftWorker.__dict__["alloc_memory_pool"], w2.EagleDraftWorker.__dict__["init_lm_head"]]
stock_fns = names()
out["plans"] = common.plans(lambda args, kk: mod._plan(args, ps, kk), world)
hooks = REGISTRY.apply(mod.specs())
ours = make_worker()
out["ours_scope"], out["ours_calls"] = built["scope"], ours.draft_worker.calls
st = ours._sgp_draft_tp
out["ours_layout"] = [ours.draft_runner.tp_group is st.group, st.group.world_size, list(st.group.ranks),
                      st.target_group is target_group, ours.ps is ps]
out["embed_shape"] = list(ours.draft_runner.model.model.embed_tokens.weight.shape)
if k == 1:  # a drafter of one rank holds every weight whole
    out["weights_vs_full"] = common.weights_vs_full(ours.draft_runner.model, draft_mc, target)
    out["stock_weights_vs_full"] = common.weights_vs_full(stock.draft_runner.model, draft_mc, target)  # shards
common.compare(out, stock_step, common.draft_step(ours, ids, aux, scope(ours)))
if os.environ.get("DRAFT_TP_FP8") == "1":  # --draft-weights fp8 (tests/test_draft_weights_fp8_tp.py)
    out["fp8"] = {name: common.fp8_case(w, (lambda: scope(w)), ids, aux, rank)
                  for name, w in (("sharded", stock), ("draft_tp", ours))}
out["synced"] = common.tree_sync_through(w2, target_worker, rank)
REGISTRY.undo(hooks)
out["undone"] = [a is b for a, b in zip(stock_fns, names())] + [REGISTRY.applied == [] and
                                                                psm.get_tp_group() is target_group]
print("RESULT " + json.dumps(out), flush=True)
psm.destroy_model_parallel()
psm.destroy_distributed_environment()
