"""The three `around` hooks of the triton draft backend. Each calls SGLang's original unless `self`
was marked by prepare.prepare_drafter (drafter modules only), and otherwise reproduces SGLang's
method line for line with the norm / activation ops swapped for our kernels. The AST of each original
is pinned as a `fingerprint` contact in the compat file of each SGLang version, and every
re-implementation here is registered under the hash of the source it reproduces (`FORWARDS`): the
hook for a version is the one whose hash its compat file pins, so a changed upstream method, or a
pinned hash nobody re-implemented, refuses instead of diverging.

    SGLang method                              0.5.17                         0.5.23
    llama_eagle3.LlamaDecoderLayer.forward     0c087e55ffd40d87 decoder_layer_forward (same source)
    llama_eagle3.LlamaModel.forward            37cddbd99aa9f578 model_forward         (same source)
    llama.LlamaMLP.forward                     30dbe183dd204acb mlp_forward_0517      06546396e7f0fd6b mlp_forward_0523

CUDA graphs: branches depend only on module attributes, shapes and dtypes (fixed per captured batch
size), never on tensor values; no host sync; the kernels allocate at most what SGLang's ops
allocated (fused_draft_input: 1 buffer instead of 3; add+RMSNorm: in place like sgl_kernel's
fused_add_rmsnorm; silu_and_mul: 1 like SiluAndMul.forward_cuda; aux_norm: 1 instead of K+1).
Triton compiles on the first call per shape; SGLang's graph runners run the forward before
capturing (warm-up), so compilation happens outside capture.
"""
from __future__ import annotations

import torch

from sglang_patches.server.draft_backend.names import FLAG
from sglang_patches.kernels.fused_add_rmsnorm import fused_add_rmsnorm
from sglang_patches.kernels.fused_aux_fc import aux_norm
from sglang_patches.kernels.fused_draft_input import fused_draft_input
from sglang_patches.kernels.silu_and_mul import silu_and_mul


def _row_major(*ts: torch.Tensor) -> bool:
    return all(t.dim() == 2 and (t.shape[1] == 0 or t.stride(1) == 1) for t in ts)


def _add_rmsnorm_inplace(norm, x: torch.Tensor, residual: torch.Tensor):
    """RMSNorm.forward_cuda(x, residual): sgl_kernel fused_add_rmsnorm mutates x and residual in place."""
    if x.dtype != residual.dtype or x.shape != residual.shape or not _row_major(x, residual):
        return norm(x, residual)
    fused_add_rmsnorm(x, residual, norm.weight, norm.variance_epsilon, out=x, residual_out=residual)
    return x, residual


def decoder_layer_forward(original, self, positions, embeds, hidden_states, forward_batch, residual):
    """llama_eagle3.LlamaDecoderLayer.forward (sglang 0.5.17; 0.5.23's is the same source)."""
    plan = self.__dict__.get(FLAG)
    if plan is None:
        return original(self, positions, embeds, hidden_states, forward_batch, residual)

    if self.is_input_layer:
        if (plan.input and _row_major(embeds, hidden_states) and embeds.shape == hidden_states.shape
                and embeds.dtype == hidden_states.dtype):
            residual = hidden_states
            # [RMSNorm(embeds; input_layernorm) | RMSNorm(hidden; hidden_norm)] in one launch
            hidden_states = fused_draft_input(embeds, hidden_states, self.input_layernorm.weight,
                                              self.hidden_norm.weight, self.hidden_norm.variance_epsilon)
        else:
            residual = hidden_states
            hidden_states = self.hidden_norm(hidden_states)
            embeds = self.input_layernorm(embeds)
            hidden_states = torch.cat([embeds, hidden_states], dim=-1)
    elif plan.add_norm:
        hidden_states, residual = _add_rmsnorm_inplace(self.hidden_norm, hidden_states, residual)
    else:
        hidden_states, residual = self.hidden_norm(hidden_states, residual)

    # Self Attention (SGLang's, unchanged)
    hidden_states = self.self_attn(positions=positions, hidden_states=hidden_states, forward_batch=forward_batch)

    if plan.post_attn:
        hidden_states, residual = _add_rmsnorm_inplace(self.post_attention_layernorm, hidden_states, residual)
    else:
        hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)

    # Fully Connected (LlamaMLP: silu_and_mul via mlp_forward_* when the MLP is marked)
    hidden_states = self.mlp(hidden_states)
    return hidden_states, residual


def _silu_down(self, x):
    """gate_up_proj -> SiLU-and-mul (ours) -> down_proj, the plain body of LlamaMLP.forward."""
    gate_up, _ = self.gate_up_proj(x)
    if _row_major(gate_up):
        x = silu_and_mul(gate_up)
    else:
        x = self.act_fn(gate_up)
    x, _ = self.down_proj(x)
    return x


def mlp_forward_0517(original, self, x, forward_batch=None):
    """llama.LlamaMLP.forward (sglang 0.5.17) for marked drafter MLPs; the target's go to `original`."""
    if self.__dict__.get(FLAG) is None:
        return original(self, x, forward_batch)
    return _silu_down(self, x)


def mlp_forward_0523(original, self, x, forward_batch=None):
    """llama.LlamaMLP.forward (sglang 0.5.23) for marked drafter MLPs; the target's go to `original`.

    0.5.23 has two branches that fuse the activation into another kernel, both SM100-only, and both
    stay SGLang's (the whole original runs, so they behave exactly as without the backend):
    - `self.dual_gemm.can_run(x, gate_up_proj)`: gate_up GEMM + SwiGLU in one CuTe DSL kernel, for
      1..16 tokens on SM100 with a bf16/fp16 or per-tensor FP8 gate_up (its mode is chosen at
      construction, None off SM100). Decided here by SGLang's own `can_run` on the same arguments.
    - decode with `self.activation_quant.enabled` (SM100, tp 1, block-FP8 DeepGEMM down_proj):
      SiLU-and-mul fused into the FP8 quantisation of down_proj's input. Enabled is fixed at
      construction; once it is set we hand the decode call over even where SGLang's
      `forward_decode` would fall back to its plain activation (then both compute the same thing).
    Otherwise: the else branch of 0.5.23 with act_fn(gate_up) replaced, i.e. the 0.5.17 body.
    Both tests read module attributes, shapes and flags only (no tensor values, no sync)."""
    if (self.__dict__.get(FLAG) is None or self.dual_gemm.can_run(x, self.gate_up_proj)
            or (forward_batch is not None and forward_batch.forward_mode.is_decode()
                and self.activation_quant.enabled)):
        return original(self, x, forward_batch)
    return _silu_down(self, x)


def _fc_weights_intact(self, plan) -> bool:
    """False when the fc_norm weights were re-allocated after prepare (then the stock path runs)."""
    if plan.stacked is None:
        return True
    return all(n.weight.data_ptr() == p for n, p in zip(self.fc_norm, plan.ptrs))


def model_forward(original, self, input_ids, positions, forward_batch, input_embeds=None, pp_proxy_tensors=None):
    """llama_eagle3.LlamaModel.forward (sglang 0.5.17; 0.5.23's is the same source); differs only in
    the norms before fc (aux_norm when prepare fused them) and, under --draft-weights fp8, the fc
    GEMM (fp8_linear for 1..MAX_M rows); a drafter with neither runs the original."""
    plan = self.__dict__.get(FLAG)
    fused = plan is not None and plan.fc and _fc_weights_intact(self, plan)
    if not fused and (plan is None or plan.fc8 is None):
        return original(self, input_ids, positions, forward_batch, input_embeds, pp_proxy_tensors)

    if input_embeds is None:
        embeds = forward_batch.mm_input_embeds
        if (
            forward_batch.forward_mode.is_extend()
            and forward_batch.contains_mm_inputs()
            and not forward_batch.forward_mode.is_draft_extend_v2()
        ):
            assert embeds is not None
            last_indices = (forward_batch.extend_start_loc + forward_batch.extend_seq_lens - 1).long()
            embeds[last_indices] = self.embed_tokens(input_ids[last_indices])
        if embeds is None:
            embeds = self.embed_tokens(input_ids)
    else:
        embeds = input_embeds

    if self.is_mrope_enabled:
        positions = forward_batch.mrope_positions

    hidden_states = forward_batch.spec_info.hidden_states
    if hidden_states.shape[-1] != embeds.shape[-1]:
        if fused and _row_major(hidden_states):
            normed = aux_norm(hidden_states, self.num_aux_hidden_states, plan.eps,
                              input_norm_weight=None if self.input_norm is None else self.input_norm.weight,
                              fc_norm_weight=plan.stacked)
        else:
            normed = hidden_states
            if self.input_norm is not None:
                normed = self.input_norm(normed)
            if self.fc_norm is not None:
                chunks = normed.chunk(self.num_aux_hidden_states, dim=-1)
                normed = torch.cat([norm(chunk) for norm, chunk in zip(self.fc_norm, chunks)], dim=-1)
        if plan.fc8 is not None and plan.fc8.fits(normed, self.fc.weight):
            hidden_states = plan.fc8(normed, self.fc.bias)  # --draft-weights fp8: fp8_linear, <= MAX_M rows
        else:
            hidden_states = self.fc(normed)  # torch.nn.Linear (cuBLAS), as SGLang runs it

    # idle batch
    if hidden_states.shape[0] == 0:
        return hidden_states, [hidden_states]

    residual = None
    for layer in self.layers:
        hidden_states, residual = layer(positions, embeds, hidden_states, forward_batch, residual)

    hidden_states_to_logits, hidden_states_to_aux = self.norm(hidden_states, residual)

    aux = hidden_states_to_logits if self.norm_output else hidden_states_to_aux
    return hidden_states_to_logits, [aux]


# Each re-implementation under the AST hash (draft_backend.fingerprint) of the SGLang source it
# reproduces; a compat file's fingerprint contacts select from here (draft_backend.hook_specs).
FORWARDS = {
    "layer": {"0c087e55ffd40d87": decoder_layer_forward},                     # 0.5.17, 0.5.23
    "model": {"37cddbd99aa9f578": model_forward},                             # 0.5.17, 0.5.23
    "mlp": {"30dbe183dd204acb": mlp_forward_0517, "06546396e7f0fd6b": mlp_forward_0523},
}
