"""One rank of a gloo world on sglang 0.5.23's real classes (CPU), for tests/test_draft_tp_0523.py.

    python tests/draft_tp_ranks_0523.py RANK WORLD PORT FIXTURE_ROOT K    (0.5.23 first on PYTHONPATH)

Publishes a ServerArgs (EAGLE3, tp_size=WORLD), builds the real TP groups, the real target
LlamaForCausalLM (TP WORLD) and twice SGLang's real EagleDraftWorker: once stock, once with the
overlay's draft_tp hooks for --draft-tp-size K. Both drafters are the real LlamaForCausalLMEagle3
with the same full weights (seeded, loaded through load_weights, so each keeps its TP shard), the
embedding shared from the target through init_lm_head. One draft step of each (fc, decoder layer,
norm, lm_head, logits processor, top-4) runs under draft_tp_context(worker.parallel_layout) as
EAGLEWorkerV2 runs it. Prints one line `RESULT {json}`.

Mocked, because it cannot run on CPU: the draft TpModelWorker (its ModelRunner needs a KV pool,
attention backends and a GPU memory profile; the stand-in builds the real drafter model in the scope
SGLang entered and records the scope and the KV heads its pool would get), and each drafter layer's
attention kernel (no attention backend: every token attends to itself through the layer's real
column-parallel qkv_proj and row-parallel o_proj, so the TP collectives still run).
"""
import json, os, sys, types
import torch
from torch import nn
rank, world, port, root, k = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
from sglang.srt.distributed import parallel_state as psm
from sglang.srt import runtime_context as rc
from sglang.srt.server_args import ServerArgs
target_dir, draft_dir = os.path.join(root, "target"), os.path.join(root, "draft")
sa = ServerArgs(model_path=target_dir, speculative_algorithm="EAGLE3", speculative_draft_model_path=draft_dir,
                speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4,
                tp_size=world, device="cpu", dtype="float32", skip_tokenizer_init=True, load_format="dummy")
rc.reset_context()
rc.publish(sa, role="test", ranks=rc.SpawnRanks(world_rank=rank))
psm.init_distributed_environment(world_size=world, rank=rank, distributed_init_method=f"tcp://127.0.0.1:{port}",
                                 local_rank=rank, backend="gloo")
psm.initialize_model_parallel(backend="gloo")
import sglang.srt.layers.rotary_embedding.base as rb; rb._is_cpu = True
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.configs.load_config import LoadConfig
from sglang.srt.layers.logits_processor import LogitsMetadata
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.srt.models.llama import LlamaForCausalLM
from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3
from sglang.srt.speculative import eagle_worker_v2 as w2
from sglang.srt.speculative.spec_utils import draft_tp_context
par = rc.get_parallel()

def full_weights(model, seed):
    # one full (TP-1) tensor per checkpoint name, the same on every rank; loaded through the model's
    # own load_weights, so each rank keeps the shard of its current TP group
    g = torch.Generator().manual_seed(seed)
    cfg = model.config
    H, I, V = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    hd = H // cfg.num_attention_heads
    q, kv = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    def r(*shape):
        t = torch.randn(shape, generator=g)
        return t / (shape[-1] ** 0.5) if len(shape) > 1 else 1.0 + 0.1 * t
    if isinstance(model, LlamaForCausalLMEagle3):
        return [("fc.weight", r(H, 3 * H)), ("midlayer.hidden_norm.weight", r(H)),
                ("midlayer.input_layernorm.weight", r(H)), ("midlayer.post_attention_layernorm.weight", r(H)),
                ("midlayer.self_attn.q_proj.weight", r(q, 2 * H)), ("midlayer.self_attn.k_proj.weight", r(kv, 2 * H)),
                ("midlayer.self_attn.v_proj.weight", r(kv, 2 * H)), ("midlayer.self_attn.o_proj.weight", r(H, q)),
                ("midlayer.mlp.gate_proj.weight", r(I, H)), ("midlayer.mlp.up_proj.weight", r(I, H)),
                ("midlayer.mlp.down_proj.weight", r(H, I)), ("norm.weight", r(H)),
                ("lm_head.weight", r(cfg.draft_vocab_size, H))]
    return [("model.embed_tokens.weight", torch.randn(V, H, generator=g)), ("lm_head.weight", r(V, H))]

def build(cls, mc, seed):
    with torch.device("cpu"):
        m = cls(mc.hf_config)
    m.load_weights(full_weights(m, seed))
    return m.eval()

class SelfOnlyAttention(nn.Module):
    # MOCK (no attention backend / KV pool on CPU): the layer's real qkv_proj (column-parallel) and
    # o_proj (row-parallel: all-reduce over the current TP group); each token attends only to itself
    def __init__(self, attn):
        super().__init__()
        self.qkv_proj, self.o_proj = attn.qkv_proj, attn.o_proj
        self.q_size, self.kv_size, self.hd = attn.q_size, attn.kv_size, attn.head_dim
    def forward(self, positions, hidden_states, forward_batch):
        qkv, _ = self.qkv_proj(hidden_states)
        v = qkv[:, self.q_size + self.kv_size:].reshape(qkv.shape[0], -1, self.hd)
        o = v.repeat_interleave(self.q_size // self.kv_size, dim=1).reshape(qkv.shape[0], -1)
        return self.o_proj(o)[0]

target_mc = ModelConfig(target_dir, trust_remote_code=False, dtype="float32")
draft_mc = ModelConfig(draft_dir, trust_remote_code=False, dtype="float32", is_draft_model=True,
                       speculative_algorithm="EAGLE3")
target = build(LlamaForCausalLM, target_mc, 7)
built = {}

class DraftTpModelWorker:
    # MOCK of the draft TpModelWorker (its ModelRunner needs a KV pool, attention backends and a GPU
    # memory profile): builds the real LlamaForCausalLMEagle3 in whatever TP scope SGLang's
    # EagleDraftWorker.__init__ has entered, and records that scope
    def __init__(self, **kw):
        p = rc.get_parallel()
        built["scope"] = [p.tp_size, p.tp_rank, p.attn_tp_size, list(p.tp_group.ranks)]
        model = build(LlamaForCausalLMEagle3, draft_mc, 11)
        for layer in model.model.layers:
            layer.self_attn = SelfOnlyAttention(layer.self_attn)
        self.model_runner = types.SimpleNamespace(model=model, model_config=draft_mc)
        self.calls = []
    def alloc_memory_pool(self, **kw):
        p = rc.get_parallel()
        self.calls.append(["alloc", p.attn_tp_size, draft_mc.get_num_kv_heads(p.attn_tp_size)])

target_worker = types.SimpleNamespace(
    model_runner=types.SimpleNamespace(model=target, model_config=target_mc, load_config=LoadConfig(),
                                       spec_aux_config=types.SimpleNamespace(draft_model_config=draft_mc),
                                       kv_index_translator=None),
    model_config=target_mc, random_seed=0)
w2.TpModelWorker = DraftTpModelWorker

def make_worker():
    worker = w2.EagleDraftWorker(sa, 0, int(port), target_worker)
    worker.alloc_memory_pool(memory_pool_config=None, req_to_token_pool=None, token_to_kv_pool_allocator=None)
    return worker

def draft_tokens(worker, ids, aux):
    # one draft step as EAGLEWorkerV2 runs it: inside draft_tp_context(parallel_layout), the drafter's
    # embeddings (shared from the target), fc, decoder layer, norm, lm_head, logits processor, top-4
    m = worker.draft_runner.model
    fb = types.SimpleNamespace(forward_mode=ForwardMode.DECODE, mm_input_embeds=None,
                               spec_info=types.SimpleNamespace(hidden_states=aux.clone()),
                               contains_mm_inputs=lambda: False)
    with draft_tp_context(worker.parallel_layout), torch.inference_mode():
        hidden, _ = m.model(ids, torch.arange(ids.shape[0]), fb)
        out = m.logits_processor(ids, hidden, m.lm_head, LogitsMetadata(forward_mode=ForwardMode.DECODE))
    logits = out.next_token_logits[:, : m.config.vocab_size]
    return logits.topk(4, dim=-1).indices.tolist(), logits

g = torch.Generator().manual_seed(3)
ids = torch.randint(0, draft_mc.hf_config.vocab_size, (6,), generator=g)
aux = torch.randn(6, 3 * draft_mc.hf_config.hidden_size, generator=g)
out = {}
stock = make_worker()
out["stock_scope"], out["stock_calls"] = built["scope"], stock.draft_worker.calls
out["stock_layout"] = stock.parallel_layout.tp_group is None
stock_tokens, stock_logits = draft_tokens(stock, ids, aux)

from sglang_patches.draft_tp import patch_module, replicas
from sglang_patches.hooks import REGISTRY
from sglang_patches.compat import v0_5_23
os.environ["SGLANG_PATCHES_CONFIG"] = json.dumps({"patches": ["draft_tp"], "draft_tp_size": k})
mod = patch_module(v0_5_23)
from sglang.srt.speculative import draft_parallel
stock_fns = [w2.resolve_draft_parallel_layout, draft_parallel.resolve_draft_parallel_layout,
             w2.build_eagle_verify_input, w2.EagleDraftWorker.__dict__["__init__"]]
plans = []
for algo, kk in (("EAGLE3", world), ("NGRAM", 1), ("EAGLE3", 3)):
    try:
        plans.append(mod._plan(types.SimpleNamespace(speculative_algorithm=algo), kk))
    except RuntimeError as exc:
        plans.append(str(exc))
out["plans"] = plans
hooks = REGISTRY.apply(mod.specs())
ours = make_worker()
out["ours_scope"], out["ours_calls"] = built["scope"], ours.draft_worker.calls
st = ours._sgp_draft_tp
out["ours_layout"] = [ours.parallel_layout.tp_group is st.group, ours.parallel_layout.attn_tp_size,
                      list(st.group.ranks), st.target_group is par.tp_group]
emb = ours.draft_runner.model.model.embed_tokens.weight
out["embed_shape"] = list(emb.shape)
ours_tokens, ours_logits = draft_tokens(ours, ids, aux)
out["tokens_equal"] = ours_tokens == stock_tokens
out["max_logit_diff"] = float((ours_logits - stock_logits).abs().max())
out["tokens"] = ours_tokens
# the tree broadcast, through the name draft() calls (eagle_worker_v2.build_eagle_verify_input, rebound):
# an idle batch makes SGLang's function return its idle input after the hook ran
parent = torch.full((2, 3), 10 + rank, dtype=torch.int64)
top = torch.arange(6, dtype=torch.int64).reshape(2, 3) * (rank + 1)
tokens = torch.full((2, 4), 100 + rank, dtype=torch.int64)
idle = types.SimpleNamespace(forward_mode=ForwardMode.IDLE)
vi = w2.build_eagle_verify_input(idle, None, parent, top, tokens, None, target_worker=target_worker, topk=1,
                                 num_steps=3, num_draft_tokens=4, tree_mask_mode=None, device="cpu")
out["synced"] = [int(parent[0, 0]), int(top[1, 2]), int(tokens[1, 3]), type(vi).__name__]
REGISTRY.undo(hooks)
out["undone"] = [a is b for a, b in zip(stock_fns, [w2.resolve_draft_parallel_layout,
                 draft_parallel.resolve_draft_parallel_layout, w2.build_eagle_verify_input,
                 w2.EagleDraftWorker.__dict__["__init__"]])] + [REGISTRY.applied == []]
print("RESULT " + json.dumps(out), flush=True)
psm.destroy_model_parallel(); psm.destroy_distributed_environment()
