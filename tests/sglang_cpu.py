"""SGLang's model classes on CPU in a subprocess, shared by the tests that build them.

SGLANG_CPU_PRELUDE defines `cpu_world(server_args)`: a 1-rank gloo group (parallel_state as `ps`),
SGLang's runtime context published from `server_args`, and the CPU rotary path (SGLang's
RotaryEmbedding would reach for vllm's kernel unless it knows it is on CPU). Either supported
SGLang: 0.5.17 builds its groups from explicit widths and publishes afterwards; 0.5.23 builds them
from the published context (widths and this process's ranks: SpawnRanks), so it publishes first.
Scripts call it, then build their model. SELF_ONLY_ATTENTION defines `SelfOnlyAttention` (needs `nn`
from torch in the script), the attention stand-in those scripts put in each layer."""

SGLANG_CPU_PRELUDE = r"""
import socket
from sglang.srt.distributed import parallel_state as ps
from sglang.srt import runtime_context as rc

def cpu_world(server_args):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    ps.init_distributed_environment(world_size=1, rank=0, distributed_init_method=f"tcp://127.0.0.1:{port}",
                                    local_rank=0, backend="gloo")
    if hasattr(rc, "SpawnRanks"):  # 0.5.23
        rc.publish(server_args, role="test", ranks=rc.SpawnRanks(world_rank=0))
        ps.initialize_model_parallel(backend="gloo")
    else:  # 0.5.17
        ps.initialize_model_parallel(1, backend="gloo")
        rc.publish(server_args, role="test")
    import sglang.srt.layers.rotary_embedding.base as rb
    rb._is_cpu = True
"""


SELF_ONLY_ATTENTION = r'''
class SelfOnlyAttention(nn.Module):
    """MOCK of the attention kernel (SGLang's attention backends need a GPU): the layer's real qkv_proj
    and o_proj (row-parallel: all-reduce over the current TP group); each token attends only to itself
    (output = v, heads repeated for GQA)."""

    def __init__(self, attn):
        super().__init__()
        self.qkv_proj, self.o_proj = attn.qkv_proj, attn.o_proj
        self.q_size, self.kv_size, self.hd = attn.q_size, attn.kv_size, attn.head_dim

    def forward(self, positions, hidden_states, forward_batch):
        qkv, _ = self.qkv_proj(hidden_states)
        v = qkv[:, self.q_size + self.kv_size:].reshape(qkv.shape[0], -1, self.hd)
        o = v.repeat_interleave(self.q_size // self.kv_size, dim=1).reshape(qkv.shape[0], -1)
        return self.o_proj(o)[0]
'''


SELF_ONLY_MLA = r'''
class SelfOnlyMLA(nn.Module):
    """MOCK of the multi-latent attention kernel (SGLang's MLA backends need a GPU), the MLA counterpart
    of SelfOnlyAttention: the layer's real fused_qkv_a_proj_with_mqa (replicated), kv_a_layernorm,
    kv_b_proj (column-parallel: this rank's heads) and o_proj (row-parallel: all-reduce over the current
    TP group); each token attends only to itself, so a head's output is its v = kv_b_proj(latent)."""

    def __init__(self, attn):
        super().__init__()
        self.fused_qkv_a_proj_with_mqa, self.kv_a_layernorm = attn.fused_qkv_a_proj_with_mqa, attn.kv_a_layernorm
        self.kv_b_proj, self.o_proj = attn.kv_b_proj, attn.o_proj
        self.q_a_layernorm, self.q_b_proj = attn.q_a_layernorm, attn.q_b_proj  # unused (self-only), kept as weights
        self.prepare_qkv_latent = attn.prepare_qkv_latent  # the decoder layer publishes it before attention
        self.q_lora, self.kv_lora = attn.q_lora_rank, attn.kv_lora_rank
        self.nope, self.v = attn.qk_nope_head_dim, attn.v_head_dim

    def forward(self, positions, hidden_states, forward_batch, zero_allocator=None):
        latent, _ = self.fused_qkv_a_proj_with_mqa(hidden_states)
        kv_a = self.kv_a_layernorm(latent[:, self.q_lora:self.q_lora + self.kv_lora].contiguous())
        kv, _ = self.kv_b_proj(kv_a)
        v = kv.view(kv.shape[0], -1, self.nope + self.v)[..., self.nope:]
        return self.o_proj(v.reshape(kv.shape[0], -1))[0]
'''
