"""The hidden-state checks against the SGLang under test's real model classes on CPU (0.5.17 and
0.5.23 runs of tests/run_cpu.sh).

Why the checks exist, shown on the real drafter: SGLang's EAGLE-3 `LlamaModel.forward` runs `fc`
only when the incoming state is not already as wide as the drafter (`hidden_states.shape[-1] !=
embeds.shape[-1]`), so a drafter served with `--speculative-algorithm EAGLE` (final-layer states,
target width == drafter width, e.g. Kimi-K2's 7168) skips its fc silently and runs on. Shown on
a tiny real drafter (random fp32 weights, real numbers) and on the 7168-wide `kimi-k2-shape`
drafter built on the meta device (real classes and shapes, no memory, no numbers). A forward hook
on the real fc counts its calls.

Then the load-time check reads the real loaded modules (the real LlamaForCausalLMEagle3 and target
LlamaForCausalLM, the target's capture list set by SGLang's own set_eagle3_layers_to_capture) and
the runtime checks run through the version's real hook targets (EagleDraftWorker's draft-extends,
called as that version's caller calls them: 0.5.23 passes `kv_loc_plan=`).

ATTENTION IS STUBBED (as in test_draft_backend_model.py): RadixAttention needs an attention backend
and KV pool that need a GPU server; each drafter layer's self_attn uses its real qkv/o projections
with every token attending only to itself. The EagleDraftWorker itself cannot be constructed on CPU
(it builds a ModelRunner on a GPU): the worker handed to the checks is a namespace holding the real
models, which is all the checks read.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

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
                  speculative_draft_model_path=os.path.join(root, "draft"), device="cpu")
if hasattr(rc, "SpawnRanks"):  # 0.5.23 builds its groups from the published runtime context
    rc.publish(args, role="test", ranks=rc.SpawnRanks(world_rank=0))
    ps.initialize_model_parallel(backend="gloo")
else:  # 0.5.17
    ps.initialize_model_parallel(1, backend="gloo")
    rc.publish(args, role="test")
import sglang.srt.layers.rotary_embedding.base as rb; rb._is_cpu = True
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.srt.models.llama import LlamaForCausalLM
from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker
from sglang_patches.server.hooks import HookRegistry
from sglang_patches.server.patches import hidden_state_checks as hsc

""" + __import__("sglang_cpu").SELF_ONLY_ATTENTION + r"""

def build(kind, device):
    mc = ModelConfig(os.path.join(root, kind), trust_remote_code=False, is_draft_model=kind != "target",
                     speculative_algorithm="EAGLE3")
    cls = LlamaForCausalLM if kind == "target" else LlamaForCausalLMEagle3
    with torch.device(device):
        m = cls(mc.hf_config)
    if device == "cpu":
        g = torch.Generator().manual_seed(1234)
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(torch.randn(p.shape, generator=g) / (p.shape[-1] ** 0.5 if p.dim() > 1 else 1.0))
    if kind != "target":
        for layer in m.model.layers:
            layer.self_attn = SelfOnlyAttention(layer.self_attn)
    return m.eval()

def fc_calls(m, width, device):
    calls = []
    h = m.model.fc.register_forward_hook(lambda mod, inp, out: calls.append(tuple(inp[0].shape)))
    T = 3
    ids = torch.randint(0, 100, (T,)).to(device)
    fb = types.SimpleNamespace(forward_mode=ForwardMode.DECODE, mm_input_embeds=None,
                               spec_info=types.SimpleNamespace(hidden_states=torch.randn(T, width).to(device)),
                               contains_mm_inputs=lambda: False)
    with torch.inference_mode():
        out, aux = m.model(ids, torch.arange(T).to(device), fb)
    h.remove()
    finite = bool(torch.isfinite(out).all()) if device == "cpu" else None
    return {"fc_calls": calls, "out": list(out.shape), "finite": finite}

res = {"sglang": sglang.__version__, "forward": {}}
draft = build("draft", "cpu")
H = draft.config.hidden_size
res["H"] = H
res["forward"]["tiny_H"] = fc_calls(draft, H, "cpu")
res["forward"]["tiny_3H"] = fc_calls(draft, 3 * H, "cpu")
kimi = build("kimi_draft", "meta")
res["kimi_H"] = kimi.config.hidden_size
res["forward"]["kimi_H"] = fc_calls(kimi, kimi.config.hidden_size, "meta")
res["forward"]["kimi_3H"] = fc_calls(kimi, 3 * kimi.config.hidden_size, "meta")

target = build("target", "cpu")
def worker(algorithm):
    return types.SimpleNamespace(draft_runner=types.SimpleNamespace(model=draft),
                                 target_worker=types.SimpleNamespace(model_runner=types.SimpleNamespace(model=target)),
                                 speculative_algorithm=SpeculativeAlgorithm.from_string(algorithm))
def outcome(fn):
    try:
        fn()
        return "ok"
    except hsc.HiddenStateMismatch as e:
        return "mismatch: " + str(e)
    except Exception as e:  # SGLang's own body reached (it needs a GPU server's state)
        import traceback
        return "sglang: " + type(e).__name__ + " in " + traceback.extract_tb(e.__traceback__)[-1].filename
res["load_eagle"] = outcome(lambda: hsc.load_time_check(worker("EAGLE")))  # no aux capture set
target.set_eagle3_layers_to_capture()
res["layers_to_capture"] = list(target.model.layers_to_capture)
w3 = worker("EAGLE3")
res["load_eagle3"] = outcome(lambda: hsc.load_time_check(w3))

from sglang.srt.layers.logits_processor import LogitsProcessorOutput
from sglang.srt.managers.utils import GenerationBatchResult
reg = HookRegistry()
reg.apply([s for s in hsc.specs() if "_draft_extend_for" in s.target])
kw = {"kv_loc_plan": None} if hasattr(rc, "SpawnRanks") else {}
def decode(width):
    r = GenerationBatchResult(logits_output=LogitsProcessorOutput(next_token_logits=None,
                                                                  hidden_states=torch.zeros(2, width)))
    return outcome(lambda: EagleDraftWorker._draft_extend_for_decode(w3, types.SimpleNamespace(), r, **kw))
def prefill(width):
    return outcome(lambda: EagleDraftWorker._draft_extend_for_prefill(w3, types.SimpleNamespace(),
                                                                      torch.zeros(2, width), torch.zeros(2)))
res["decode_H"], res["decode_3H"] = decode(H), decode(3 * H)
res["prefill_H"], res["prefill_3H"] = prefill(H), prefill(3 * H)
reg.undo()
print("RESULT" + json.dumps(res))
"""


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    pytest.importorskip("sglang")
    from sglang_patches.offline.fixtures.specs import eagle3_drafter, get_spec, llama_target

    root = tmp_path_factory.mktemp("checks_real")
    tgt = llama_target(hidden=64, layers=8, heads=4, kv_heads=2, intermediate=96, vocab=128, max_pos=256)
    kimi = get_spec("kimi-k2-shape").draft
    for name, cfg in (("target", tgt), ("draft", eagle3_drafter(tgt)), ("kimi_draft", kimi)):
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(cfg))
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("SGLANG_PATCHES_CONFIG", None)
    r = subprocess.run([sys.executable, "-c", _SCRIPT, str(root)], capture_output=True, text=True, env=env,
                       timeout=300, cwd=REPO)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
    assert r.returncode == 0 and line, r.stderr[-4000:]
    return json.loads(line[0][len("RESULT"):])


def test_runs_on_the_version_under_test(result):
    from conftest import sglang_under_test

    assert result["sglang"] == sglang_under_test()


def test_real_drafter_skips_fc_silently_on_a_drafter_wide_state(result):
    H, f = result["H"], result["forward"]
    assert f["tiny_H"]["fc_calls"] == [] and f["tiny_H"]["out"] == [3, H] and f["tiny_H"]["finite"]
    assert f["tiny_3H"]["fc_calls"] == [[3, 3 * H]] and f["tiny_3H"]["finite"]


def test_real_7168_wide_drafter_skips_fc_silently(result):
    f = result["forward"]
    assert result["kimi_H"] == 7168
    assert f["kimi_H"]["fc_calls"] == [] and f["kimi_H"]["out"] == [3, 7168]
    assert f["kimi_3H"]["fc_calls"] == [[3, 21504]]


def test_load_time_check_on_the_real_modules(result):
    H = result["H"]
    assert result["load_eagle"].startswith("mismatch: ") and "SP001" in result["load_eagle"]
    assert f"{3 * H}" in result["load_eagle"] and "--speculative-algorithm EAGLE3" in result["load_eagle"]
    assert result["layers_to_capture"] == [2, 4, 5]  # SGLang's default [2, L // 2, L - 3] for L = 8
    assert result["load_eagle3"] == "ok"


def test_runtime_checks_through_the_real_hook_targets(result):
    H = result["H"]
    for where in ("decode", "prefill"):
        narrow = result[f"{where}_H"]
        assert narrow.startswith("mismatch: ") and f"{3 * H}" in narrow, narrow
        # the right width passes our check and enters SGLang's own draft-extend (which needs a server)
        wide = result[f"{where}_3H"]
        assert wide.startswith("sglang: ") and wide.endswith("eagle_worker_v2.py"), wide
