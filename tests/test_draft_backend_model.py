"""--draft-backend triton against SGLang's real EAGLE-3 drafter modules on CPU (Triton interpreter).

A tiny real `LlamaForCausalLMEagle3` (SGLang 0.5.17 classes, 1-rank gloo group, runtime context
published, rotary embedding in CPU mode) with random weights in fp32 and bf16 runs
`model.model.forward` (embeddings, fc block, every decoder layer, final norm) once stock and once
with the triton backend applied, then again after undo.

ATTENTION IS STUBBED: SGLang's RadixAttention needs an attention backend, a KV pool and
req_to_token tables that cannot be built here without a GPU server. Each layer's `self_attn` is
replaced by a module that uses the layer's real qkv_proj and o_proj and lets every token attend
only to itself (attention output = v, GQA-expanded). Attention is not something the backend
changes, so this isolates exactly what it does change: the draft-input norms + concat, the
post-attention add+RMSNorm, the SiLU-and-mul of the MLP, the fc input norms and the hidden_norm
add of layers > 0. Nothing here measures speed or proves the CUDA-graph path (GPU session).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytest.importorskip("torch")
pytest.importorskip("triton")

from sglang_cpu import SGLANG_CPU_PRELUDE  # noqa: E402  the 1-rank CPU world of SGLang

_SCRIPT = r"""
import json, os, sys, types
import torch
from torch import nn
torch.manual_seed(0)
""" + SGLANG_CPU_PRELUDE + r"""
from sglang.srt import runtime_context as rc
from sglang.srt.server_args import ServerArgs
root = sys.argv[1]
rc.publish(ServerArgs(model_path=os.path.join(root, "target"), speculative_algorithm="EAGLE3",
                      speculative_draft_model_path=os.path.join(root, "plain"), device="cpu"), role="test")
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.srt.models.llama import LlamaForCausalLM, LlamaMLP
from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3
from sglang_patches.draft_backend import FLAG, forward as fwd, hook_specs, prepare
from sglang_patches.hooks import REGISTRY

calls = {}
for name in ("fused_draft_input", "fused_add_rmsnorm", "silu_and_mul", "aux_norm"):
    real = getattr(fwd, name)
    def counting(*a, _real=real, _name=name, **k):
        calls[_name] = calls.get(_name, 0) + 1
        return _real(*a, **k)
    setattr(fwd, name, counting)

class SelfOnlyAttention(nn.Module):
    # the layer's real qkv_proj / o_proj; each token attends only to itself (output = v)
    def __init__(self, attn):
        super().__init__()
        self.qkv_proj, self.o_proj = attn.qkv_proj, attn.o_proj
        self.q_size, self.kv_size, self.hd = attn.q_size, attn.kv_size, attn.head_dim
    def forward(self, positions, hidden_states, forward_batch):
        qkv, _ = self.qkv_proj(hidden_states)
        v = qkv[:, self.q_size + self.kv_size:].reshape(qkv.shape[0], -1, self.hd)
        o = v.repeat_interleave(self.q_size // self.kv_size, dim=1).reshape(qkv.shape[0], -1)
        return self.o_proj(o)[0]

def randomize(m, dtype):
    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if p.dim() == 1:  # norm weights
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5)
    return m.to(dtype)

def build(kind, dtype):
    path = os.path.join(root, kind)
    mc = ModelConfig(path, trust_remote_code=False, is_draft_model=kind != "target", speculative_algorithm="EAGLE3")
    cls = LlamaForCausalLM if kind == "target" else LlamaForCausalLMEagle3
    with torch.device("cpu"):
        m = randomize(cls(mc.hf_config), dtype)
    if kind != "target":
        for layer in m.model.layers:
            layer.self_attn = SelfOnlyAttention(layer.self_attn)
    return m.eval()

def run(m, ids, hidden):
    fb = types.SimpleNamespace(forward_mode=ForwardMode.DECODE, mm_input_embeds=None,
                               spec_info=types.SimpleNamespace(hidden_states=hidden.clone()),
                               contains_mm_inputs=lambda: False)
    with torch.inference_mode():
        out, aux = m.model(ids, torch.arange(ids.shape[0]), fb)
    return out.float(), aux[0].float()

def err(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-6))

res = {"cases": []}
for kind in ("plain", "norms"):
    for dtype in (torch.float32, torch.bfloat16):
        m = build(kind, dtype)
        H = m.config.hidden_size
        T = 5
        ids = torch.randint(0, m.config.vocab_size, (T,))
        inputs = {"aux3H": torch.randn(T, 3 * H).to(dtype), "hiddenH": torch.randn(T, H).to(dtype)}
        stock = {k: run(m, ids, v) for k, v in inputs.items()}
        applied = REGISTRY.apply(hook_specs())
        try:
            fake_worker = types.SimpleNamespace(draft_runner=types.SimpleNamespace(model=m))
            prepare.before_init_attention_backends(fake_worker)  # what the HookSpec runs
            summary = m.__dict__[FLAG]
            marked = prepare.marked_modules(m)
            calls.clear()
            tri = {k: run(m, ids, v) for k, v in inputs.items()}
            tri_calls = dict(calls)
        finally:
            REGISTRY.undo(applied)
        calls.clear()
        after = {k: run(m, ids, v) for k, v in inputs.items()}
        res["cases"].append({
            "kind": kind, "dtype": str(dtype), "H": H, "layers": len(m.model.layers), "summary": summary,
            "marked": marked, "calls": tri_calls, "calls_after_undo": dict(calls),
            "err": {k: [err(tri[k][i], stock[k][i]) for i in (0, 1)] for k in inputs},
            "undo_exact": all(torch.equal(after[k][i], stock[k][i]) for k in inputs for i in (0, 1)),
        })

# target side: same LlamaMLP class, hooks applied and a drafter prepared, target untouched
tgt = build("target", torch.bfloat16)
drafter = build("plain", torch.bfloat16)
x = torch.randn(4, tgt.config.hidden_size).to(torch.bfloat16)
mlp = tgt.model.layers[0].mlp
with torch.inference_mode():
    ref = LlamaMLP.forward(mlp, x)
    applied = REGISTRY.apply(hook_specs())
    try:
        prepare.prepare_drafter(drafter)
        calls.clear()
        got = mlp(x)
        res["target"] = {"marked": prepare.marked_modules(tgt), "silu_calls": calls.get("silu_and_mul", 0),
                         "exact": bool(torch.equal(got, ref)),
                         "drafter_mlp_calls": None}
        calls.clear()
        drafter.model.layers[0].mlp(x)
        res["target"]["drafter_mlp_calls"] = calls.get("silu_and_mul", 0)
    finally:
        REGISTRY.undo(applied)

# the in-server refusal: a drafter that is not LlamaForCausalLMEagle3 (strict -> error; fallback -> stock)
worker = types.SimpleNamespace(draft_runner=types.SimpleNamespace(model=tgt))
try:
    prepare.before_init_attention_backends(worker)
    res["strict"] = "no error"
except RuntimeError as e:
    res["strict"] = str(e)
from sglang_patches.overlay_config import ENV_VAR, OverlayConfig
os.environ[ENV_VAR] = OverlayConfig(draft_backend="triton", draft_backend_fallback=True).to_env()
prepare.before_init_attention_backends(worker)
res["fallback_marked"] = prepare.marked_modules(tgt)
print("RESULT" + json.dumps(res))
"""


def _write_configs(root: Path) -> None:
    from sglang_patches.fixtures.specs import eagle3_drafter, llama_target

    tgt = llama_target(hidden=96, layers=2, heads=4, kv_heads=2, intermediate=160, vocab=256, max_pos=512)
    plain = eagle3_drafter(tgt)  # the stock Llama-3.1 EAGLE-3 layout: no fc norms, 1 layer
    norms = eagle3_drafter(tgt)
    norms.update({"num_hidden_layers": 2, "fc_norm": True, "eagle_config": {"norm_before_fc": True}})
    for name, cfg in (("target", tgt), ("plain", plain), ("norms", norms)):
        (root / name).mkdir(parents=True)
        (root / name / "config.json").write_text(json.dumps(cfg))


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    pytest.importorskip("sglang")
    root = tmp_path_factory.mktemp("draft_backend")
    _write_configs(root)
    return run_result_script(_SCRIPT, root)


def run_result_script(script: str, root) -> dict:
    """Run `script` (argv[1] = root) in a fresh interpreter on CPU without the overlay's env config;
    return the JSON it prints after 'RESULT'."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TRITON_INTERPRET": "1",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("SGLANG_PATCHES_CONFIG", None)
    r = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, text=True, env=env,
                       timeout=300, cwd=REPO)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
    assert r.returncode == 0 and line, r.stderr[-4000:]
    return json.loads(line[0][len("RESULT"):])


# max |triton - stock| / max |stock| over the drafter's outputs (hidden to logits, aux hidden).
# fp32: kernel and torch differ only in summation order. bf16: 1-2 ulp per op (the CPU interpreter
# rounds by truncation; SGLang's forward_native rounds SiLU-and-mul twice), carried through 1-2 layers.
TOL = {"torch.float32": 1e-5, "torch.bfloat16": 3e-2}


@pytest.mark.parametrize("kind", ["plain", "norms"])
@pytest.mark.parametrize("dtype", ["torch.float32", "torch.bfloat16"])
def test_triton_backend_matches_stock_forward(result, kind, dtype):
    (case,) = [c for c in result["cases"] if c["kind"] == kind and c["dtype"] == dtype]
    for inp, errs in case["err"].items():
        assert max(errs) <= TOL[dtype], (inp, errs)
    assert case["undo_exact"], "after undo the stock forward must be bit-identical again"
    assert case["calls_after_undo"] == {}


def test_triton_backend_actually_ran_the_kernels(result):
    plain = [c for c in result["cases"] if c["kind"] == "plain"]
    norms = [c for c in result["cases"] if c["kind"] == "norms"]
    for c in plain:  # 1 layer, 2 forwards (3H input through fc, H input without)
        assert c["summary"] == {"input": 1, "add_norm": 0, "post_attn": 1, "silu": 1, "fc_norm": False, "layers": 1}
        assert c["calls"] == {"fused_draft_input": 2, "fused_add_rmsnorm": 2, "silu_and_mul": 2}
        assert sorted(c["marked"]) == ["", "model", "model.layers.0", "model.layers.0.mlp"]
    for c in norms:  # 2 layers: layer 1 adds hidden_norm(h, residual); fc norms only on the 3H input
        assert c["summary"] == {"input": 1, "add_norm": 1, "post_attn": 2, "silu": 2, "fc_norm": True, "layers": 2}
        assert c["calls"] == {"fused_draft_input": 2, "fused_add_rmsnorm": 6, "silu_and_mul": 4, "aux_norm": 1}


def test_target_llama_mlp_is_untouched(result):
    t = result["target"]
    assert t["marked"] == []          # prepare_drafter marks only the drafter's modules
    assert t["silu_calls"] == 0       # the target's LlamaMLP went to SGLang's original
    assert t["exact"] is True
    assert t["drafter_mlp_calls"] == 1  # while the drafter's LlamaMLP (same class) took the kernel


def test_in_server_refusal_and_fallback(result):
    assert result["strict"].startswith("sglang_patches --draft-backend triton: drafter is LlamaForCausalLM, ")
    assert "\n" not in result["strict"] and "--draft-backend-fallback" in result["strict"]
    assert result["fallback_marked"] == []  # warned, nothing marked: the stock forward runs
