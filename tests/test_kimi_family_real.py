"""The Kimi-K2 family fixtures on the SGLang under test's real classes, on CPU (0.5.17 and 0.5.23).

Built on the meta device (real classes, real shapes, no memory, no numbers): the target
`DeepseekV3ForCausalLM` of `kimi-k2-mla` (MLA, MoE), its 7168-wide Llama EAGLE-3 head and SGLang's
Kimi-K2.5 MLA head `Eagle3DeepseekV2ForCausalLM` of `kimi-k2-mla-mlahead`. What is read from them:
- the capture rule: SGLang's own `set_eagle3_layers_to_capture` (DeepseekV2ForCausalLM's, which V3
  inherits) for no ids and for several id lists, against vocab/capture.py (ids starting at 1 are
  shifted by one, others kept);
- the MLA head's fc (ColumnParallelLinear 3 x 7168 -> 7168) and aux count;
- the in-server load-time check on the real loaded modules for both heads: under EAGLE (capture not
  set: SGLang's list is empty) SP001 names the layers SGLang captures for this class, [2, 4, 5];
  under EAGLE3 it passes; the runtime width checks through the version's real hook targets;
- Kimi-K2.5's multimodal wrapper `KimiK25ForConditionalGeneration`: its real capture method delegates
  to the DeepseekV3ForCausalLM it holds, and the check reads the capture there. The wrapper is made
  with the class's own methods but without its vision tower (MoonViT, irrelevant to capture):
  `object.__new__` + nn.Module.__init__, then the config and language model set as its __init__ does;
- the triton draft backend's in-server model check refuses the MLA head.
The EagleDraftWorker cannot be built on CPU (it builds a ModelRunner on a GPU): the worker handed to
the checks is a namespace holding the real models, which is all the checks read.
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
import inspect, json, os, sys, types
import torch
from torch import nn
import sglang
from sglang.srt.server_args import ServerArgs
from sglang_cpu import SGLANG_CPU_PRELUDE
exec(SGLANG_CPU_PRELUDE)
root = sys.argv[1]
target_dir = os.path.join(root, "kimi-k2-mla", "target")
args = ServerArgs(model_path=target_dir, speculative_algorithm="EAGLE3",
                  speculative_draft_model_path=os.path.join(root, "kimi-k2-mla-mlahead", "draft"), device="cpu")
cpu_world(args)
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.layers import dp_attention
from sglang.srt.models.deepseek_v2 import DeepseekV2ForCausalLM, DeepseekV3ForCausalLM
from sglang.srt.models.kimi_k25 import KimiK25ForConditionalGeneration
from sglang.srt.models.kimi_k25_eagle3 import Eagle3DeepseekV2ForCausalLM
from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker
from sglang_patches.server.hooks import HookRegistry
from sglang_patches.server.patches import hidden_state_checks as hsc
from sglang_patches.server.draft_backend import prepare
from sglang_patches.vocab.capture import capture_indices

target_mc = ModelConfig(target_dir, trust_remote_code=False)
if len(inspect.signature(dp_attention.initialize_dp_attention).parameters) == 2:  # 0.5.17
    dp_attention.initialize_dp_attention(args, target_mc)
else:  # 0.5.23 reads the published topology
    dp_attention.initialize_dp_attention(args)

def draft_config(name):
    return ModelConfig(os.path.join(root, name, "draft"), trust_remote_code=False, is_draft_model=True,
                       speculative_algorithm="EAGLE3", context_length=target_mc.context_len).hf_config

def new_target():
    with torch.device("meta"):
        return DeepseekV3ForCausalLM(target_mc.hf_config)

with torch.device("meta"):
    heads = {"llama": LlamaForCausalLMEagle3(draft_config("kimi-k2-mla")),
             "mla": Eagle3DeepseekV2ForCausalLM(draft_config("kimi-k2-mla-mlahead"))}
res = {"sglang": sglang.__version__, "mla_attention": {}}
for name, path in (("target", target_dir), ("llama", os.path.join(root, "kimi-k2-mla", "draft")),
                   ("mla", os.path.join(root, "kimi-k2-mla-mlahead", "draft"))):
    res["mla_attention"][name] = str(ModelConfig(path, trust_remote_code=False, is_draft_model=name != "target",
                                                 context_length=target_mc.context_len).attention_arch.name)

t = new_target()
L = t.config.num_hidden_layers
res["L"], res["inner"], res["layers_before"] = L, type(t.model).__name__, list(t.model.layers_to_capture)
res["v3_inherits_v2_rule"] = DeepseekV3ForCausalLM.set_eagle3_layers_to_capture is DeepseekV2ForCausalLM.set_eagle3_layers_to_capture
res["rule"] = []
for ids in (None, [1, 3, 4], [2, 4, 5], [0, 3, 4], [1, 4, 9]):
    t.set_eagle3_layers_to_capture(ids)
    res["rule"].append({"ids": ids, "sglang": list(t.model.layers_to_capture),
                        "ours": capture_indices(["DeepseekV3ForCausalLM"], L, ids),
                        "capture": bool(t.capture_aux_hidden_states)})
fc = heads["mla"].model.fc
res["mla_fc"] = {"cls": type(fc).__name__, "in": fc.input_size, "out": fc.output_size,
                 "aux": heads["mla"].model.num_aux_hidden_states, "hidden": heads["mla"].config.hidden_size}
res["llama_fc"] = [heads["llama"].model.fc.in_features, heads["llama"].model.fc.out_features]

def worker(draft, target, algorithm):
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

res["checks"] = {}
for name, head in heads.items():
    fresh = new_target()  # capture not set, as under EAGLE
    eagle = outcome(lambda: hsc.load_time_check(worker(head, fresh, "EAGLE")))
    fresh.set_eagle3_layers_to_capture(None)
    w3 = worker(head, fresh, "EAGLE3")
    eagle3 = outcome(lambda: hsc.load_time_check(w3))
    reg = HookRegistry()
    reg.apply([s for s in hsc.specs() if "_draft_extend_for" in s.target])
    from sglang.srt import runtime_context as rc
    kw = {"kv_loc_plan": None} if hasattr(rc, "SpawnRanks") else {}
    from sglang.srt.layers.logits_processor import LogitsProcessorOutput
    from sglang.srt.managers.utils import GenerationBatchResult
    def decode(width):
        r = GenerationBatchResult(logits_output=LogitsProcessorOutput(next_token_logits=None,
                                                                      hidden_states=torch.zeros(2, width)))
        return outcome(lambda: EagleDraftWorker._draft_extend_for_decode(w3, types.SimpleNamespace(), r, **kw))
    def prefill(width):
        return outcome(lambda: EagleDraftWorker._draft_extend_for_prefill(w3, types.SimpleNamespace(),
                                                                          torch.zeros(2, width), torch.zeros(2)))
    H = fresh.config.hidden_size
    res["checks"][name] = {"eagle": eagle, "eagle3": eagle3, "decode_H": decode(H), "decode_3H": decode(3 * H),
                           "prefill_H": prefill(H), "prefill_3H": prefill(3 * H),
                           "numbers_fc_in": hsc.load_time_numbers(w3).fc_in}
    reg.undo()

# Kimi-K2.5's wrapper around the DeepseekV3ForCausalLM (vision tower not built: see the module note)
wrapper = object.__new__(KimiK25ForConditionalGeneration)
nn.Module.__init__(wrapper)
wrapper.config = types.SimpleNamespace(text_config=target_mc.hf_config, architectures=["KimiK25ForConditionalGeneration"])
wrapper.language_model = new_target()
res["wrapper_eagle"] = outcome(lambda: hsc.load_time_check(worker(heads["mla"], wrapper, "EAGLE")))
wrapper.set_eagle3_layers_to_capture(None)
res["wrapper_layers"] = list(wrapper.language_model.model.layers_to_capture)
res["wrapper_eagle3"] = outcome(lambda: hsc.load_time_check(worker(heads["mla"], wrapper, "EAGLE3")))

try:
    prepare.check_model(heads["mla"])
    res["triton_check_mla"] = "ok"
except prepare.Unsupported as e:
    res["triton_check_mla"] = str(e)
print("RESULT" + json.dumps(res))
"""


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    pytest.importorskip("sglang")
    from sglang_patches.offline.fixtures import build_fixture

    root = tmp_path_factory.mktemp("kimi_real")
    old = os.environ.get("SGLANG_PATCHES_CACHE")
    os.environ["SGLANG_PATCHES_CACHE"] = str(root / "cache")  # the tokenizer is cached there
    try:
        for name in ("kimi-k2-mla", "kimi-k2-mla-mlahead"):
            build_fixture(name, root / name)
    finally:
        if old is None:
            os.environ.pop("SGLANG_PATCHES_CACHE", None)
        else:
            os.environ["SGLANG_PATCHES_CACHE"] = old
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests"),
                                                        os.environ.get("PYTHONPATH", "")])}
    env.pop("SGLANG_PATCHES_CONFIG", None)
    r = subprocess.run([sys.executable, "-c", _SCRIPT, str(root)], capture_output=True, text=True, env=env,
                       timeout=600, cwd=REPO)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
    assert r.returncode == 0 and line, r.stderr[-4000:]
    return json.loads(line[0][len("RESULT"):])


def test_runs_on_the_version_under_test(result):
    from conftest import sglang_under_test

    assert result["sglang"] == sglang_under_test()


def test_target_and_mla_head_are_served_with_mla_attention(result):
    arch = result["mla_attention"]
    assert arch["target"].endswith("MLA") and arch["mla"].endswith("MLA") and not arch["llama"].endswith("MLA")


def test_capture_rule_is_sglangs(result):
    assert result["L"] == 8 and result["inner"] == "DeepseekV2Model" and result["layers_before"] == []
    assert result["v3_inherits_v2_rule"]
    got = {json.dumps(r["ids"]): r["sglang"] for r in result["rule"]}
    assert got == {"null": [2, 4, 5], "[1, 3, 4]": [2, 4, 5], "[2, 4, 5]": [2, 4, 5], "[0, 3, 4]": [0, 3, 4],
                   "[1, 4, 9]": [2, 5, 10]}
    for r in result["rule"]:
        assert r["capture"] and r["ours"] == r["sglang"], r


def test_mla_head_fc_and_aux_count(result):
    fc = result["mla_fc"]
    assert fc == {"cls": "ColumnParallelLinear", "in": 3 * 7168, "out": 7168, "aux": 3, "hidden": 7168}
    assert result["llama_fc"] == [3 * 7168, 7168]


@pytest.mark.parametrize("head", ["llama", "mla"])
def test_in_server_checks_on_both_heads(result, head):
    c = result["checks"][head]
    assert c["eagle"].startswith("mismatch: ") and "SP001" in c["eagle"], c["eagle"]
    assert "SGLang's default layers [2, 4, 5]" in c["eagle"] and "layers []" not in c["eagle"]
    assert "21504" in c["eagle"] and "--speculative-algorithm EAGLE3" in c["eagle"]
    assert c["eagle3"] == "ok" and c["numbers_fc_in"] == 21504
    for where in ("decode", "prefill"):
        narrow = c[f"{where}_H"]
        assert narrow.startswith("mismatch: ") and "21504" in narrow and "7168" in narrow, narrow
        wide = c[f"{where}_3H"]  # passes our check and enters SGLang's own draft-extend (needs a server)
        assert wide.startswith("sglang: ") and wide.endswith("eagle_worker_v2.py"), wide


def test_kimi_k25_wrapper_is_checked_like_the_text_model(result):
    assert result["wrapper_eagle"].startswith("mismatch: ") and "SGLang's default layers [2, 4, 5]" in result["wrapper_eagle"]
    assert result["wrapper_layers"] == [2, 4, 5]
    assert result["wrapper_eagle3"] == "ok"  # the capture lives on the language model, and is found there


def test_triton_draft_backend_refuses_the_mla_head_in_the_server(result):
    assert "Eagle3DeepseekV2ForCausalLM" in result["triton_check_mla"]
    assert "LlamaForCausalLMEagle3" in result["triton_check_mla"]
