"""One rank of a gloo world on sglang 0.5.23's real classes (CPU), for tests/test_draft_tp_0523.py.

    python tests/draft_tp_ranks_0523.py RANK WORLD PORT FIXTURE_ROOT K    (0.5.23 first on PYTHONPATH)

Publishes a ServerArgs (EAGLE3, tp_size=WORLD), builds the real TP groups, the real target
LlamaForCausalLM (TP WORLD) and twice SGLang's real EagleDraftWorker (__init__, alloc_memory_pool,
init_token_map, init_lm_head): once stock, once with the overlay's draft_tp hooks for
--draft-tp-size K. Both drafters are the real LlamaForCausalLMEagle3 with the same full weights. One
draft step of each runs under draft_tp_context(worker.parallel_layout), as EAGLEWorkerV2 runs its
draft phases. Prints one line `RESULT {json}`. Mocks (the draft TpModelWorker, the attention
kernel) and why: tests/draft_tp_ranks_common.py.
"""
import json
import os
import sys
import types

rank, world, port, root, k = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
from sglang.srt import runtime_context as rc  # noqa: E402
from sglang.srt.distributed import parallel_state as psm  # noqa: E402
from sglang.srt.server_args import ServerArgs  # noqa: E402

target_dir, draft_dir = os.path.join(root, "target"), os.path.join(root, "draft")
sa = ServerArgs(model_path=target_dir, speculative_algorithm="EAGLE3", speculative_draft_model_path=draft_dir,
                speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4,
                tp_size=world, device="cpu", dtype="float32", skip_tokenizer_init=True, load_format="dummy")
rc.reset_context()
rc.publish(sa, role="test", ranks=rc.SpawnRanks(world_rank=rank))
psm.init_distributed_environment(world_size=world, rank=rank, distributed_init_method=f"tcp://127.0.0.1:{port}",
                                 local_rank=rank, backend="gloo")
psm.initialize_model_parallel(backend="gloo")
import sglang.srt.layers.rotary_embedding.base as rb  # noqa: E402

rb._is_cpu = True  # SGLang's CPU rotary path
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import draft_tp_ranks_common as common  # noqa: E402
from sglang.srt.configs.load_config import LoadConfig  # noqa: E402
from sglang.srt.configs.model_config import ModelConfig  # noqa: E402
from sglang.srt.speculative import draft_parallel, eagle_worker_v2 as w2  # noqa: E402
from sglang.srt.speculative.spec_utils import draft_tp_context  # noqa: E402

par = rc.get_parallel()
target_mc = ModelConfig(target_dir, trust_remote_code=False, dtype="float32")
draft_mc = ModelConfig(draft_dir, trust_remote_code=False, dtype="float32", is_draft_model=True,
                       speculative_algorithm="EAGLE3")
target = common.build_target(target_mc)
built = {}
target_worker = types.SimpleNamespace(
    model_runner=types.SimpleNamespace(model=target, model_config=target_mc, load_config=LoadConfig(),
                                       spec_aux_config=types.SimpleNamespace(draft_model_config=draft_mc),
                                       kv_index_translator=None),
    model_config=target_mc, random_seed=0)
w2.TpModelWorker = common.draft_worker_class(draft_mc, built)


def make_worker():
    worker = w2.EagleDraftWorker(sa, 0, int(port), target_worker)
    worker.alloc_memory_pool(memory_pool_config=None, req_to_token_pool=None, token_to_kv_pool_allocator=None)
    return worker


ids, aux = common.inputs(draft_mc)
out = {}
stock = make_worker()
out["stock_scope"], out["stock_calls"] = built["scope"], stock.draft_worker.calls
out["stock_layout"] = stock.parallel_layout.tp_group is None
stock_step = common.draft_step(stock, ids, aux, draft_tp_context(stock.parallel_layout))

from sglang_patches.compat import v0_5_23  # noqa: E402
from sglang_patches.server.draft_tp import patch_module, replicas  # noqa: E402
from sglang_patches.server.hooks import REGISTRY  # noqa: E402

os.environ["SGLANG_PATCHES_CONFIG"] = json.dumps({"patches": ["draft_tp"], "draft_tp_size": k})
mod = patch_module(v0_5_23)
names = lambda: [w2.resolve_draft_parallel_layout, draft_parallel.resolve_draft_parallel_layout,  # noqa: E731
                 w2.build_eagle_verify_input, w2.EagleDraftWorker.__dict__["__init__"]]
stock_fns = names()
out["plans"] = common.plans(mod._plan, world)
hooks = REGISTRY.apply(mod.specs())
ours = make_worker()
out["ours_scope"], out["ours_calls"] = built["scope"], ours.draft_worker.calls
st = ours._sgp_draft_tp
out["ours_layout"] = [ours.parallel_layout.tp_group is st.group, ours.parallel_layout.attn_tp_size,
                      list(st.group.ranks), st.target_group is par.tp_group]
out["embed_shape"] = list(ours.draft_runner.model.model.embed_tokens.weight.shape)
if k == 1:  # a drafter of one rank holds every weight whole
    out["weights_vs_full"] = common.weights_vs_full(ours.draft_runner.model, draft_mc, target)
    out["stock_weights_vs_full"] = common.weights_vs_full(stock.draft_runner.model, draft_mc, target)  # shards
common.compare(out, stock_step, common.draft_step(ours, ids, aux, draft_tp_context(ours.parallel_layout)))
if os.environ.get("DRAFT_TP_FP8") == "1":  # --draft-weights fp8 (tests/test_draft_weights_fp8_tp.py)
    out["fp8"] = {name: common.fp8_case(w, (lambda: draft_tp_context(w.parallel_layout)), ids, aux, rank)
                  for name, w in (("sharded", stock), ("draft_tp", ours))}
out["synced"] = common.tree_sync_through(w2, target_worker, rank)
REGISTRY.undo(hooks)
out["undone"] = [a is b for a, b in zip(stock_fns, names())] + [REGISTRY.applied == [] and replicas.STATE is st]
print("RESULT " + json.dumps(out), flush=True)
psm.destroy_model_parallel()
psm.destroy_distributed_environment()
