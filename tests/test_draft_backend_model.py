"""--draft-backend triton against SGLang's real EAGLE-3 drafter modules on CPU (Triton interpreter).

Runs on the SGLang first on the path: 0.5.17 (`bash tests/run_cpu.sh`) or 0.5.23 (its real modules
first on PYTHONPATH, `--sglang 0.5.23`); the hooks are the ones that version's compat file selects.
A tiny real `LlamaForCausalLMEagle3` (that SGLang's classes, 1-rank gloo group, runtime context
published, rotary embedding in CPU mode) with random weights in fp32 and bf16 runs
`model.model.forward` (embeddings, fc block, every decoder layer, final norm) once stock and once
with the triton backend applied, then again after undo.

ATTENTION IS STUBBED: SGLang's RadixAttention needs an attention backend, a KV pool and
req_to_token tables that cannot be built here without a GPU server. Each layer's `self_attn` is
replaced by a module that uses the layer's real qkv_proj and o_proj and lets every token attend
only to itself (attention output = v, GQA-expanded). Attention is not something the backend
changes, so this isolates exactly what it does change: the draft-input norms + concat, the
post-attention add+RMSNorm, the SiLU-and-mul of the MLP, the fc input norms and the hidden_norm
add of layers > 0. Nothing here measures speed or proves the CUDA-graph path (that takes a GPU run).

0.5.23 only (the branches do not exist in 0.5.17): LlamaMLP.forward's two SM100 branches must go to
SGLang's own forward. The switch SGLang documents for the platform, `override_platform(is_sm100=True)`,
is tried first and recorded: on CPU it cannot turn either branch on, because both also need
`is_cuda()` (torch.cuda.is_available()), which no switch overrides, and the dual GEMM's mode and the
activation quant's `enabled` are decided once at construction. So the test sets what SM100
construction would have produced on the drafter's real MLP, and MOCKS ONE THING: the dual GEMM
kernel (`sglang.kernels.ops.gemm.dual_gemm_swiglu`, a CuTe DSL kernel for SM100 whose module imports
cutlass) is replaced by a CPU reference of what it computes. SGLang's own `DualGemm.can_run`,
`DualGemm.__call__` and `DenseSiluAndMulQuant.forward_decode` run unchanged.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sglang_under_test

REPO = Path(__file__).resolve().parents[1]
pytest.importorskip("torch")
pytest.importorskip("triton")

# The 1-rank CPU world of either SGLang (tests/sglang_cpu.py's prelude is 0.5.17's): 0.5.23 builds
# its groups from the published runtime context (widths and this process's ranks: SpawnRanks), so
# it publishes first and calls initialize_model_parallel(backend=...) without widths.
_SCRIPT = r"""
import json, os, socket, sys, types
import torch
from torch import nn
torch.manual_seed(0)
import sglang
from sglang.srt.distributed import parallel_state as ps
from sglang.srt import runtime_context as rc
from sglang.srt.server_args import ServerArgs
root = sys.argv[1]
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
ps.init_distributed_environment(world_size=1, rank=0, distributed_init_method=f"tcp://127.0.0.1:{port}",
                                local_rank=0, backend="gloo")
args = ServerArgs(model_path=os.path.join(root, "target"), speculative_algorithm="EAGLE3",
                  speculative_draft_model_path=os.path.join(root, "plain"), device="cpu")
if hasattr(rc, "SpawnRanks"):  # 0.5.23
    rc.publish(args, role="test", ranks=rc.SpawnRanks(world_rank=0))
    ps.initialize_model_parallel(backend="gloo")
else:  # 0.5.17
    ps.initialize_model_parallel(1, backend="gloo")
    rc.publish(args, role="test")
import sglang.srt.layers.rotary_embedding.base as rb; rb._is_cpu = True
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.srt.models.llama import LlamaForCausalLM, LlamaMLP
from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3
from sglang_patches.server.draft_backend import FLAG, forward as fwd, hook_specs, prepare
from sglang_patches.server.hooks import REGISTRY

calls = {}
for name in ("fused_draft_input", "fused_add_rmsnorm", "silu_and_mul", "aux_norm"):
    real = getattr(fwd, name)
    def counting(*a, _real=real, _name=name, **k):
        calls[_name] = calls.get(_name, 0) + 1
        return _real(*a, **k)
    setattr(fwd, name, counting)

""" + __import__("sglang_cpu").SELF_ONLY_ATTENTION + r"""

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

res = {"sglang": sglang.__version__, "cases": []}
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
from sglang_patches.vocab.overlay_config import ENV_VAR, OverlayConfig
os.environ[ENV_VAR] = OverlayConfig(draft_backend="triton", draft_backend_fallback=True).to_env()
prepare.before_init_attention_backends(worker)
res["fallback_marked"] = prepare.marked_modules(tgt)
del os.environ[ENV_VAR]

if hasattr(LlamaMLP(8, 16, "silu"), "dual_gemm"):  # 0.5.23: the SM100 branches of LlamaMLP.forward
    import re
    import torch.nn.functional as F
    import sglang.kernels.ops.gemm as gemm_ops
    from sglang.srt.layers.quantization.fp8_activation import DenseSiluAndMulQuant
    from sglang.srt.model_executor.forward_batch_info import ForwardMode
    r = res["mlp0523"] = {}
    H, inter = drafter.config.hidden_size, drafter.config.intermediate_size
    with rc.override_platform(is_sm100=True):  # SGLang's documented platform switch
        probe = LlamaMLP(H, inter, "silu")
        r["switch"] = {"is_sm100": rc.get_platform().is_sm100, "dual_gemm_mode": repr(probe.dual_gemm.mode),
                       "activation_quant_enabled": probe.activation_quant.enabled}
    mlp = drafter.model.layers[0].mlp
    kernel_calls, decode_calls = [], []
    def dual_gemm_swiglu_cpu(x, gate_up_weight):  # MOCK of the SM100 CuTe DSL kernel: what it computes
        kernel_calls.append(x.shape[0])
        g, u = (x @ gate_up_weight.t()).chunk(2, dim=-1)
        return F.silu(g) * u
    gemm_ops.dual_gemm_swiglu = dual_gemm_swiglu_cpu
    real_decode = DenseSiluAndMulQuant.forward_decode
    def counting_decode(self, *a, **k):
        decode_calls.append(1)
        return real_decode(self, *a, **k)
    DenseSiluAndMulQuant.forward_decode = counting_decode
    src = open(os.path.join(os.path.dirname(gemm_ops.__file__), "cutedsl_dual_gemm.py")).read()
    max_tokens = int(re.search(r"^MAX_DUAL_GEMM_DECODE_TOKENS = (\d+)", src, re.M).group(1))
    fbs = {m: types.SimpleNamespace(forward_mode=getattr(ForwardMode, m)) for m in ("DECODE", "EXTEND")}
    fbs["none"] = None

    def case(setup, tokens, mode):
        # (stock: hooks off, triton: hooks on + drafter prepared) on the same MLP state
        setup(True)
        x = torch.randn(tokens, H, generator=torch.Generator().manual_seed(tokens)).to(torch.bfloat16)
        out = {}
        for name in ("stock", "triton"):
            applied = REGISTRY.apply(hook_specs()) if name == "triton" else []
            try:
                if name == "triton":
                    prepare.prepare_drafter(drafter)
                calls.clear(); kernel_calls.clear(); decode_calls.clear()
                with torch.inference_mode():
                    y = mlp(x, forward_batch=fbs[mode])
                out[name] = {"y": y.float(), "silu": calls.get("silu_and_mul", 0),
                             "dual_gemm_kernel": len(kernel_calls), "forward_decode": len(decode_calls)}
            finally:
                REGISTRY.undo(applied)
        setup(False)
        yt, ys = out["triton"].pop("y"), out["stock"].pop("y")
        return {"tokens": tokens, "mode": mode, "exact": bool(torch.equal(yt, ys)), "err": err(yt, ys), **out}

    def dual_gemm_on(on):  # what DualGemm._select_mode returns on SM100 for a bf16 unquantised gate_up
        mlp.dual_gemm.mode = types.SimpleNamespace(is_quantized=False) if on else None  # stands for UNQUANT
        mlp.dual_gemm.max_tokens = max_tokens if on else 0

    def act_quant_on(on):  # what DenseSiluAndMulQuant.__init__ sets on SM100 for a block-FP8 down_proj
        aq = mlp.activation_quant
        aq.enabled = on
        aq.weight_shape = (mlp.down_proj.output_size, mlp.down_proj.input_size_per_partition)
    r["max_tokens"] = max_tokens
    # a norm that fuses its consumer's FP8 input quant (RMSNorm.fuse_input_quant) is left to SGLang
    layer = drafter.model.layers[0]
    before = prepare._layer_plan(layer).post_attn
    layer.post_attention_layernorm.fuse_input_quant(layer.mlp.gate_up_proj)
    r["quant_fused_norm"] = [before, prepare._layer_plan(layer).post_attn]
    del layer.post_attention_layernorm.__dict__["_quant_linear"]
    r["cases"] = [case(dual_gemm_on, 4, "DECODE"), case(dual_gemm_on, max_tokens + 4, "DECODE"),
                  case(act_quant_on, 4, "DECODE"), case(act_quant_on, 4, "EXTEND"), case(act_quant_on, 4, "none"),
                  case(lambda on: None, 4, "DECODE")]
print("RESULT" + json.dumps(res))
"""


def _write_configs(root: Path) -> None:
    from sglang_patches.offline.fixtures.specs import eagle3_drafter, llama_target

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


# ---------------------------------------------------------------- 0.5.23: LlamaMLP.forward's SM100 branches

def _mlp0523(result):
    if sglang_under_test() != "0.5.23":
        pytest.skip(f"sglang {result['sglang']} has no dual_gemm / activation_quant in LlamaMLP (0.5.23 only)")
    assert "mlp0523" in result, "the script's probe for LlamaMLP's dual_gemm / activation_quant failed on 0.5.23"
    return result["mlp0523"]


def test_0523_platform_switch_alone_cannot_enable_the_sm100_branches_on_cpu(result):
    """Why the branches are set by hand below: SGLang's switch says SM100, but both also need CUDA."""
    sw = _mlp0523(result)["switch"]
    assert sw["is_sm100"] is True
    assert sw["dual_gemm_mode"] == "None" and sw["activation_quant_enabled"] is False


def _case(r, tokens, mode, index):
    c = r["cases"][index]
    assert (c["tokens"], c["mode"]) == (tokens, mode)
    return c


def test_0523_dual_gemm_passes_through_to_sglang(result):
    r = _mlp0523(result)
    c = _case(r, 4, "DECODE", 0)  # 4 <= max_tokens: DualGemm.can_run is True
    assert c["stock"]["dual_gemm_kernel"] == 1 and c["stock"]["silu"] == 0
    assert c["triton"] == c["stock"], "the triton backend must leave the dual GEMM call to SGLang"
    assert c["exact"] is True
    c = _case(r, r["max_tokens"] + 4, "DECODE", 1)  # too many tokens for the dual GEMM: our silu_and_mul
    assert c["stock"]["dual_gemm_kernel"] == 0 and c["triton"]["dual_gemm_kernel"] == 0
    assert c["triton"]["silu"] == 1 and c["stock"]["silu"] == 0
    assert c["err"] <= TOL["torch.bfloat16"]


def test_0523_decode_activation_quant_passes_through_to_sglang(result):
    r = _mlp0523(result)
    c = _case(r, 4, "DECODE", 2)
    assert c["stock"]["forward_decode"] == 1
    assert c["triton"] == c["stock"] and c["triton"]["silu"] == 0 and c["exact"] is True
    for index, mode in ((3, "EXTEND"), (4, "none")):  # SGLang uses act_fn there: ours replaces it
        c = _case(r, 4, mode, index)
        assert c["stock"]["forward_decode"] == 0 and c["triton"]["forward_decode"] == 0
        assert c["triton"]["silu"] == 1 and c["err"] <= TOL["torch.bfloat16"]


def test_0523_plain_decode_takes_our_kernel(result):
    c = _case(_mlp0523(result), 4, "DECODE", 5)  # neither SM100 branch: SGLang's forward_decode -> act_fn
    assert c["stock"]["forward_decode"] == 1 and c["triton"]["forward_decode"] == 0
    assert c["triton"]["silu"] == 1 and c["err"] <= TOL["torch.bfloat16"]


def test_0523_norm_with_fused_input_quant_stays_sglangs(result):
    assert _mlp0523(result)["quant_fused_norm"] == [True, False]
