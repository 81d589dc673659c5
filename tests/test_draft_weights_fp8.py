"""--draft-weights fp8 on SGLang's real EAGLE-3 drafter modules on CPU (Triton interpreter).

Runs on the SGLang under test (0.5.17 or 0.5.23, `bash tests/run_cpu.sh --sglang V`). A tiny real
`LlamaForCausalLMEagle3` in bf16 (that SGLang's classes in a 1-rank gloo world, as
test_draft_backend_model.py builds it) is prepared with weights "fp8". Checked: exactly the drafter's
qkv/o/gate_up/down, fc and lm_head take our method; the target's modules (its LlamaMLP is the same
class) keep SGLang's; each module's SGLang forward equals fp8_linear_ref of its quantised weight (gate_up,
whose default fp8 inputs make it fp8_w8a8_linear_ref; test_draft_weights_fp8_w8a8.py) and is close to the bf16 output; rows > MAX_M go to SGLang's original method bit for bit; SGLang's own
`should_apply_lm_head_quant_method` and `LogitsProcessor._compute_lm_head` route the draft lm_head
through our method; a tied lm_head (embed_tokens) still embeds through SGLang's method; undo puts
the very same method objects back and prepare is idempotent; a layout the kernel does not cover is
refused before anything changes, or with the fallback left to SGLang module by module.

ATTENTION IS STUBBED in the whole-drafter forward (as in test_draft_backend_model.py): each layer's
self_attn uses its real qkv_proj / o_proj (so both run through our method) and lets each token
attend to itself. The GPU capability check is tested with torch.cuda's answers MOCKED (no GPU here).
"""
from __future__ import annotations

import json

import pytest

from sglang_patches.errors import UserError

pytest.importorskip("torch")
pytest.importorskip("triton")

from test_draft_backend_model import _write_configs, run_result_script  # noqa: E402

_SCRIPT = r"""
import json, os, sys, types
import torch
import torch.nn.functional as F
from torch import nn
torch.manual_seed(0)
import sglang
from sglang.srt.server_args import ServerArgs
""" + __import__("sglang_cpu").SGLANG_CPU_PRELUDE + r"""
root = sys.argv[1]
cpu_world(ServerArgs(model_path=os.path.join(root, "target"), speculative_algorithm="EAGLE3",
                     speculative_draft_model_path=os.path.join(root, "plain"), device="cpu"))
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.layers.logits_processor import should_apply_lm_head_quant_method
from sglang.srt.layers.amx_utils import PackWeightMethod
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.srt.models.llama import LlamaForCausalLM
from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3
from sglang_patches.kernels.fp8_linear import MAX_M, fp8_linear_ref
from sglang_patches.kernels.fp8_w8a8_linear import fp8_w8a8_linear_ref
from sglang_patches.server.draft_backend import FLAG, hook_specs, prepare
from sglang_patches.server.draft_backend.fp8_weights import Fp8DraftLinearMethod
from sglang_patches.server.hooks import REGISTRY

""" + __import__("sglang_cpu").SELF_ONLY_ATTENTION + r"""

def build(kind, stub=True):
    mc = ModelConfig(os.path.join(root, kind), trust_remote_code=False, is_draft_model=kind != "target",
                     speculative_algorithm="EAGLE3")
    cls = LlamaForCausalLM if kind == "target" else LlamaForCausalLMEagle3
    g = torch.Generator().manual_seed(1234)
    with torch.device("cpu"):
        m = cls(mc.hf_config)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g) if p.dim() == 1
                    else torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5)
    m = m.to(torch.bfloat16).eval()
    if stub and kind != "target":
        for layer in m.model.layers:
            layer.self_attn = SelfOnlyAttention(layer.self_attn)
    return m

def ours(m):
    return sorted(n for n, mod in m.named_modules() if isinstance(getattr(mod, "quant_method", None), Fp8DraftLinearMethod))

def methods(m):
    return {n: mod.quant_method for n, mod in m.named_modules() if hasattr(mod, "quant_method")}

def rel(a, b):
    return float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-6))

def fwd(m, ids, hidden):
    fb = types.SimpleNamespace(forward_mode=ForwardMode.DECODE, mm_input_embeds=None,
                               spec_info=types.SimpleNamespace(hidden_states=hidden.clone()),
                               contains_mm_inputs=lambda: False)
    with torch.inference_mode():
        return m.model(ids, torch.arange(ids.shape[0]), fb)[0]

res = {"sglang": sglang.__version__, "max_m": MAX_M}
tgt, d = build("target"), build("norms")
H = d.config.hidden_size
ids = torch.randint(0, d.config.vocab_size, (5,))
aux = torch.randn(5, 3 * H).to(torch.bfloat16)
stock_out = fwd(d, ids, aux)
tgt_before = methods(tgt)
orig = methods(d)
bf16 = {n: mod.weight.detach().clone() for n, mod in d.named_modules() if n in orig}
res["apply_before"] = should_apply_lm_head_quant_method(d.lm_head, d.lm_head.quant_method)

applied = REGISTRY.apply(hook_specs())
summary = prepare.prepare_drafter(d, "fp8", strict=True, target=tgt)
res["summary_fp8"] = {k: v for k, v in summary["fp8"].items()}
res["ours"] = ours(d)
res["target_ours"] = ours(tgt)
res["target_same_objects"] = all(tgt_before[n] is q for n, q in methods(tgt).items())
res["fc8"] = d.model.__dict__[FLAG].fc8 is not None
res["originals_kept"] = all(d.get_submodule(n).quant_method.original is orig[n] for n in res["ours"])

calls = []
w8a8 = lambda n: n.endswith("mlp.gate_up_proj")  # fp8 activations at >= 2 rows (the lm_head: bf16 by default)
for n in res["ours"]:
    f = d.get_submodule(n).quant_method.fp8
    for attr in ("_linear", "_w8a8") if w8a8(n) else ("_linear",):
        setattr(f, attr, lambda *a, _r=getattr(f, attr), _n=n, **k: (calls.append(_n), _r(*a, **k))[1])
fc8 = d.model.__dict__[FLAG].fc8
real_fc = fc8._linear
fc8._linear = lambda *a, **k: (calls.append("model.fc"), real_fc(*a, **k))[1]

mods = {}
with torch.inference_mode():
    for n in res["ours"] + ["model.fc"]:
        mod = d.get_submodule(n)
        K = bf16[n].shape[1] if n != "model.fc" else mod.weight.shape[1]
        f = fc8 if n == "model.fc" else mod.quant_method.fp8
        x = torch.randn(7, K, generator=torch.Generator().manual_seed(7)).to(torch.bfloat16)
        calls.clear()
        if n == "model.fc":
            y = f(x, mod.bias)
        elif n.startswith("lm_head"):
            y = d.logits_processor._compute_lm_head(x, mod, None)  # SGLang's own lm_head routing
        else:
            y = mod(x)[0]                                        # SGLang's linear forward
        ref = (fp8_w8a8_linear_ref if w8a8(n) else fp8_linear_ref)(x, f.w8, f.scale)
        full = F.linear(x, bf16.get(n, mod.weight))
        big = torch.randn(MAX_M + 1, K).to(torch.bfloat16)
        n_calls = len(calls)
        y_big = (d.logits_processor._compute_lm_head(big, mod, None) if n.startswith("lm_head")
                 else None if n == "model.fc" else mod(big)[0])
        mods[n] = {"calls": n_calls, "err_ref": rel(y, ref), "err_bf16": rel(y, full),
                   "big_exact": None if y_big is None else bool(torch.equal(y_big, F.linear(big, bf16[n]))),
                   "big_calls": len(calls) - n_calls}
res["modules"] = mods
res["apply_after"] = should_apply_lm_head_quant_method(d.lm_head, d.lm_head.quant_method)
calls.clear()
fp8_out = fwd(d, ids, aux)
res["forward_calls"] = sorted(set(calls))
res["forward_err"] = rel(fp8_out, stock_out)
res["idempotent"] = prepare.prepare_drafter(d, "fp8") is summary and ours(d) == res["ours"]
REGISTRY.undo()
res["undo_same_objects"] = all(mod.quant_method is orig[n] for n, mod in d.named_modules() if n in orig)
res["undo_marks"] = prepare.marked_modules(d)
res["undo_exact"] = bool(torch.equal(fwd(d, ids, aux), stock_out))
# again after undo: wraps SGLang's original (never our own method)
prepare.prepare_drafter(d, "fp8", strict=True)
res["again_nested"] = any(isinstance(d.get_submodule(n).quant_method.original, Fp8DraftLinearMethod) for n in ours(d))
REGISTRY.undo()

# tied lm_head: the drafter's embed_tokens serves the lm_head; embedding() is SGLang's method
t = build("tied")
res["tied_is_embed"] = t.lm_head is t.model.embed_tokens
with torch.inference_mode():
    emb = t.model.embed_tokens(ids).clone()
    prepare.prepare_drafter(t, "fp8", strict=True)
    res["tied_ours"] = ours(t)
    res["tied_embed_exact"] = bool(torch.equal(t.model.embed_tokens(ids), emb))
    h = torch.randn(3, H).to(torch.bfloat16)
    f = t.lm_head.quant_method.fp8
    res["tied_lm_head_err_ref"] = rel(t.logits_processor._compute_lm_head(h, t.lm_head, None),
                                      fp8_linear_ref(h, f.w8, f.scale))  # 3 rows: bf16 activations (default)
REGISTRY.undo()

# layouts the kernel does not cover: strict refuses before any change; fallback leaves those modules
p = build("plain")
p.model.layers[0].self_attn.o_proj.quant_method = PackWeightMethod(weight_names=["weight"])
before = methods(p)
try:
    prepare.prepare_drafter(p, "fp8", strict=True)
    res["strict"] = "no error"
except prepare.Unsupported as e:
    res["strict"] = str(e)
res["strict_unchanged"] = all(before[n] is q for n, q in methods(p).items()) and prepare.marked_modules(p) == []
from sglang_patches.vocab.overlay_config import ENV_VAR, OverlayConfig
os.environ[ENV_VAR] = OverlayConfig(patches=("triton_draft",), draft_backend="triton", draft_weights="fp8").to_env()
worker = types.SimpleNamespace(draft_runner=types.SimpleNamespace(model=p))
try:
    prepare.before_init_attention_backends(worker)
    res["server_strict"] = "no error"
except RuntimeError as e:
    res["server_strict"] = str(e)
s = prepare.prepare_drafter(p, "fp8", strict=False)
res["fallback_ours"] = ours(p)
res["fallback_refused"] = s["fp8"]["refused"]
res["fallback_kept"] = type(p.model.layers[0].self_attn.o_proj.quant_method).__name__
REGISTRY.undo()
# the lm_head as one of the target's modules is refused
q = build("plain")
res["target_lm_head"] = prepare.prepare_drafter(q, "fp8", strict=False, target=nn.ModuleList([q.lm_head]))["fp8"]["refused"]
REGISTRY.undo()
# the drafter's own lm_head module holding the target's weight (load_lm_head_from_target): taken, with a
# note of the memory its FP8 copy adds
from sglang_patches.server.draft_backend.fp8_weights import plan_drafter
r = build("plain")
shared_target = nn.Module()
shared_target.head = nn.Parameter(r.lm_head.weight.data, requires_grad=False)  # same storage
plan = plan_drafter(r, target=shared_target)
res["shared_lm_head"] = {"taken": "lm_head" in plan.linears, "notes": plan.notes,
                         "rows": int(r.lm_head.weight.shape[0]), "numel": int(r.lm_head.weight.numel())}
res["unshared_notes"] = plan_drafter(r, target=nn.Linear(4, 4)).notes
# a layer SGLang runs on its Intel AMX CPU backend (the flag its use_intel_amx_backend reads) is left to SGLang
r.model.layers[0].mlp.down_proj.use_intel_amx_backend = True
amx = plan_drafter(r)
res["amx_refused"] = amx.refused
res["amx_taken"] = sorted(amx.linears)
print("RESULT" + json.dumps(res))
"""


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    pytest.importorskip("sglang")
    root = tmp_path_factory.mktemp("draft_fp8")
    _write_configs(root)
    tied = json.loads((root / "plain" / "config.json").read_text())
    tied.update({"tie_word_embeddings": True})
    (root / "tied").mkdir()
    (root / "tied" / "config.json").write_text(json.dumps(tied))
    return run_result_script(_SCRIPT, root)


LAYER = ("self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj")
# Tolerances (max |a - b| / max |b| over the output):
# vs fp8_linear_ref (gate_up: fp8_w8a8_linear_ref) of the same FP8 weight: same math, fp32 accumulation, one bf16 rounding each,
# summation order may differ -> about one bf16 ulp (2^-8 of the max; measured <= 0.52 %).
REF_TOL = 1e-2
# vs the bf16 weight: e4m3 keeps 3 mantissa bits (each weight within 2^-4 relative of its value),
# errors average over K -> a few percent of the output's max (measured 2.6-3.1 % per module, 6.1 %
# through the whole 2-layer drafter: fc, both layers and the final norm).
BF16_TOL = 8e-2


def test_exactly_the_drafter_linears_take_fp8(result):
    want = sorted([f"model.layers.{i}.{n}" for i in range(2) for n in LAYER] + ["lm_head"])
    assert result["ours"] == want
    assert result["fc8"] is True
    assert result["summary_fp8"]["modules"] == len(want) + 1  # + fc
    assert result["summary_fp8"]["refused"] == {}
    assert result["originals_kept"] is True
    assert result["target_ours"] == [] and result["target_same_objects"] is True


def test_each_module_runs_fp8_and_matches_the_reference(result):
    for name, m in result["modules"].items():
        assert m["calls"] == 1, name
        assert m["err_ref"] <= REF_TOL, (name, m)
        assert m["err_bf16"] <= BF16_TOL, (name, m)
        assert m["err_bf16"] > 0, (name, "an FP8 weight cannot give the bf16 output exactly")


def test_rows_over_max_m_use_sglangs_original(result):
    assert result["max_m"] == 64
    for name, m in result["modules"].items():
        if name != "model.fc":
            assert m["big_calls"] == 0 and m["big_exact"] is True, (name, m)


def test_lm_head_is_routed_by_sglangs_logits_processor(result):
    assert result["apply_before"] is False  # UnquantizedEmbeddingMethod: SGLang's plain matmul
    assert result["apply_after"] is True    # our class: _compute_lm_head calls its apply
    assert result["modules"]["lm_head"]["calls"] == 1


def test_whole_drafter_forward_uses_fp8_and_stays_close(result):
    assert result["forward_calls"] == sorted([f"model.layers.{i}.{n}" for i in range(2) for n in LAYER] + ["model.fc"])
    assert result["forward_err"] <= BF16_TOL


def test_undo_restores_the_method_objects_and_prepare_is_idempotent(result):
    assert result["idempotent"] is True
    assert result["undo_same_objects"] is True and result["undo_marks"] == []
    assert result["undo_exact"] is True
    assert result["again_nested"] is False


def test_tied_lm_head_keeps_sglangs_embedding(result):
    assert result["tied_is_embed"] is True
    assert "model.embed_tokens" in result["tied_ours"]
    assert result["tied_embed_exact"] is True
    assert result["tied_lm_head_err_ref"] <= REF_TOL


def test_uncovered_layout_refused_or_left_to_sglang(result):
    assert "does not cover this drafter layout" in result["strict"]
    assert "model.layers.0.self_attn.o_proj has quant_method PackWeightMethod" in result["strict"]
    assert result["strict_unchanged"] is True
    assert result["server_strict"].startswith("sglang_patches: --draft-weights fp8 does not cover")
    assert "\n" not in result["server_strict"] and "--draft-weights bf16" in result["server_strict"]
    assert "model.layers.0.self_attn.o_proj" not in result["fallback_ours"]
    assert "model.layers.0.self_attn.qkv_proj" in result["fallback_ours"] and "lm_head" in result["fallback_ours"]
    assert list(result["fallback_refused"]) == ["model.layers.0.self_attn.o_proj"]
    assert result["fallback_kept"] == "PackWeightMethod"
    assert "is the target's own module" in result["target_lm_head"]["lm_head"]


def test_load_log_line_names_modules_and_bytes(result):
    from sglang_patches.server.draft_backend.fp8_weights import describe

    s = result["summary_fp8"]
    assert s["saved_bytes"] == s["bytes_bf16"] - s["bytes_fp8"] > 0
    assert s["step_bf16"] < s["bytes_bf16"] and s["step_fp8"] < s["bytes_fp8"]  # fc: draft-extend only
    line = describe({**s, "bytes_bf16": 3 << 20, "bytes_fp8": 3 << 19, "saved_bytes": 3 << 19, "step_bf16": 2 << 20,
                     "step_fp8": 1 << 20, "workspace_bytes": 0},
                    {"lm_head": "runs in fp32 (--enable-fp32-lm-head)"}, ["lm_head's weight is the target's"])
    assert line.startswith(f"fp8 weights on {s['modules']} modules: 2.0 MiB -> 1.0 MiB read per draft step")
    assert "+1.5 MiB GPU memory" in line and "lm_head's weight is the target's" in line
    assert "1.5 MiB saved" in line and "SGLang's path for lm_head (runs in fp32" in line and "\n" not in line


# ---------------------------------------------------------------- launcher and overlay config

@pytest.mark.parametrize("value", ["fp8", "fp8-weight-only"])
def test_fp8_needs_the_triton_backend(value):
    from sglang_patches.launch_args import overlay_config, split_overlay_args
    from sglang_patches.vocab.overlay_config import OverlayConfig

    ns, _ = split_overlay_args(["--draft-weights", value])
    with pytest.raises(UserError, match=f"--draft-weights {value} needs --draft-backend triton"):
        overlay_config(ns)
    ns, _ = split_overlay_args(["--draft-weights", value, "--draft-backend", "triton"])
    cfg = overlay_config(ns)
    assert cfg.draft_weights == value and "triton_draft" in cfg.patches
    assert OverlayConfig.from_json(cfg.to_env()) == cfg
    with pytest.raises(UserError, match=f"'draft_weights' {value} without triton_draft"):
        OverlayConfig.from_json(f'{{"draft_weights": "{value}"}}')
    with pytest.raises(UserError, match="needs --draft-backend triton"):
        OverlayConfig(draft_weights=value)
    assert overlay_config(split_overlay_args([])[0]).draft_weights == "bf16"


@pytest.mark.parametrize("argv, expect", [
    (["--speculative-draft-model-quantization", "fp8"], "both quantise the drafter"),
    (["--quantization", "fp8"], "add --speculative-draft-model-quantization unquant"),
    (["--device", "cpu"], "needs a CUDA GPU"),
])
def test_launcher_refuses_flags_that_conflict(argv, expect):
    from sglang_patches.server.draft_backend.launch_check import weights_problem

    assert expect in weights_problem(argv)


def test_unquant_drafter_flag_is_accepted():
    from sglang_patches.server.draft_backend.launch_check import weights_problem

    assert weights_problem(["--quantization", "fp8", "--speculative-draft-model-quantization", "unquant"]) is None


@pytest.mark.parametrize("cap, refused", [((8, 0), True), ((8, 6), True), ((8, 9), False), ((9, 0), False)])
def test_gpu_capability(monkeypatch, cap, refused):
    """MOCK: torch.cuda's answers (no GPU on this machine)."""
    import torch

    from sglang_patches.server.draft_backend.fp8_weights import capability_problem

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=None: cap)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: "GPU-X")
    got = capability_problem()
    assert (got is not None) == refused
    if refused:
        assert f"is {cap[0]}.{cap[1]}" in got and "--draft-weights bf16" in got and "\n" not in got


def test_no_gpu_is_left_to_the_launchers_gpu_check():
    import torch

    from sglang_patches.server.draft_backend.fp8_weights import capability_problem

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert capability_problem() is None


def test_a_target_weight_in_the_drafters_lm_head_is_taken_with_a_memory_note(result):
    shared = result["shared_lm_head"]
    assert shared["taken"] is True
    assert shared["notes"] == [f"lm_head's weight is the target's ({shared['rows']} rows): its FP8 copy adds "
                               f"{shared['numel'] / (1 << 20):.1f} MiB"]
    assert result["unshared_notes"] == []


def test_a_layer_on_sglangs_amx_backend_is_left_to_sglang(result):
    assert result["amx_refused"] == {"model.layers.0.mlp.down_proj": "uses the Intel AMX CPU backend"}
    assert "model.layers.0.mlp.down_proj" not in result["amx_taken"]
    assert "model.layers.0.mlp.gate_up_proj" in result["amx_taken"]
