"""Undo everything: every feature applied to the real classes of the SGLang under test, each change
made outside a hook exercised (simulated acceptance's switch SIMULATE_ACC_LEN, triton_draft's fc_norm storage
swap and module marks, draft_tp's small-group
context on a 1-rank gloo group and its instance attributes on a real EagleDraftWorker object), then
`undo_overlay()`: every function, every module global of every loaded sglang module and every
parameter's storage must be exactly what it was.

Runs in a subprocess (it initialises a 1-rank gloo group and publishes SGLang's runtime context).
The EagleDraftWorker is created without running its __init__ (which needs a GPU and a loaded model);
its two attributes get the values stock __init__ gives them in a server without dp-attention.
On 0.5.23 draft_tp is left out here: this script drives its 0.5.17 plumbing (patch_0517's small-group
context, the worker's ps / draft_tp_context attributes), which 0.5.23 replaced; every other feature
runs on 0.5.23's classes the same way.
"""
from __future__ import annotations

import pytest

from sglang_cpu import SGLANG_CPU_PRELUDE  # the 1-rank CPU world of SGLang

_SCRIPT = r"""
import contextlib, inspect, json, os, sys, types
import torch
""" + SGLANG_CPU_PRELUDE + r"""
psm = ps
from sglang.srt.server_args import ServerArgs
root = sys.argv[1]
cpu_world(ServerArgs(model_path=os.path.join(root, "target"), speculative_algorithm="EAGLE3",
                     speculative_draft_model_path=os.path.join(root, "norms"), device="cpu"))
from sglang.srt.configs.model_config import ModelConfig
from sglang_patches import compat
from sglang_patches.server.draft_backend import prepare
c = compat.current()
V0517 = c.__name__.endswith("v0_5_17")
if V0517:
    from sglang_patches.server.draft_tp import patch_0517
from sglang_patches.server.hooks import REGISTRY
from sglang_patches.vocab.overlay_config import ENV_VAR, FEATURES, OPTIONAL_FEATURES, OverlayConfig
from sglang_patches.server.patches.catalog import specs_for, undo_overlay

for ct in c.contacts():  # import every module a feature touches before the snapshot
    if ct.kind not in ("attr", "weight"):
        ct.resolve()
mc = ModelConfig(os.path.join(root, "norms"), trust_remote_code=False, is_draft_model=True,
                 speculative_algorithm="EAGLE3")
with torch.device("cpu"):
    drafter = c.EAGLE3_DRAFTER.resolve()(mc.hf_config)
with torch.no_grad():  # parameters are created uninitialised (NaN != NaN): give them values
    g = torch.Generator().manual_seed(0)
    for p in drafter.parameters():
        p.copy_(torch.randn(p.shape, generator=g))
Worker = c.INIT_ATTENTION_BACKENDS_CHECK.owner()
worker = Worker.__new__(Worker)
if V0517:
    worker.ps, worker.draft_tp_context = "ps-from-init", contextlib.nullcontext  # what stock __init__ sets

def snapshot():
    mods = {n: dict(vars(m)) for n, m in list(sys.modules.items())
            if m is not None and (n == "sglang" or n.startswith("sglang."))}
    statics = {ct.target: inspect.getattr_static(ct.owner(), ct.name) for ct in c.contacts()
               if ct.kind not in ("attr", "weight")}
    params = {n: (p.data_ptr(), p.detach().clone()) for n, p in drafter.named_parameters()}
    return mods, statics, params

mods0, statics0, params0 = snapshot()
worker_before = dict(vars(worker))
features = tuple(f for f in FEATURES + OPTIONAL_FEATURES if V0517 or f != "draft_tp")
os.environ[ENV_VAR] = OverlayConfig(patches=features, draft_tp_size=1 if V0517 else None,
                                    draft_backend="triton").to_env()
res = {"features": list(features), "sglang": c.COVERS[0]}
from sglang_patches.server.simulate import sglang_hooks as sim
sim.validate()
hooks = REGISTRY.apply(specs_for(features) + sim.specs())
res["hooks"] = len(hooks)
# simulated acceptance: the module global SIMULATE_ACC_LEN is switched on
sim.enable([0.8, 0.5])
res["switch_on"] = c.SIM_SWITCH.resolve() > 0
res["patched"] = sum(inspect.getattr_static(ct.owner(), ct.name) is not statics0[ct.target]
                     for ct in c.contacts() if ct.kind == "hook")
# triton_draft: the load-time step swaps fc_norm storage and marks the drafter's modules
prepare.before_init_attention_backends(types.SimpleNamespace(draft_runner=types.SimpleNamespace(model=drafter)))
fc0 = drafter.model.fc_norm[0].weight
res["fc_norm_swapped"] = fc0.data_ptr() != params0["model.fc_norm.0.weight"][0]
with torch.no_grad():
    fc0.add_(1.0)  # an in-place update after the swap (lands in the stacked tensor) must survive undo
# draft_tp: the small-group context swaps _TP / _ATTN_TP and the parallel context, then restores them
if V0517:
    group, member = patch_0517.create_draft_group(1, 1)
    with patch_0517.small_group_context(group):
        res["inside"] = [psm._ATTN_TP is group, psm._TP is group, rc.get_parallel().tp_group is group]
    patch_0517.swap_in_small_group(worker, "target-ps")
    res["worker_swapped"] = [worker.ps == "target-ps", worker.draft_tp_context is patch_0517.small_group_context]
res["changes"] = [ch.describe() for ch in REGISTRY.changes]
res["undone"] = undo_overlay()
res["left"] = [len(REGISTRY.applied), len(REGISTRY.changes)]

mods1, statics1, params1 = snapshot()
res["functions_changed"] = [t for t, v in statics0.items() if statics1[t] is not v]
res["globals_changed"] = sorted(f"{m}.{k}" for m, d in mods0.items() for k, v in d.items()
                                if m in mods1 and k in mods1[m] and mods1[m][k] is not v)
res["globals_added"] = sorted(f"{m}.{k}" for m, d in mods1.items() if m in mods0 for k in d if k not in mods0[m])
res["storage_changed"] = [n for n, (ptr, _) in params0.items() if params1[n][0] != ptr]
expected = {n: v + (1.0 if n == "model.fc_norm.0.weight" else 0.0) for n, (_, v) in params0.items()}
res["values_changed"] = [n for n, (_, v) in params1.items() if not torch.equal(v, expected[n])]
res["marks_left"] = prepare.marked_modules(drafter)
res["worker_restored"] = dict(vars(worker)) == worker_before
print("RESULT" + json.dumps(res))
"""


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    from test_draft_backend_model import _write_configs, run_result_script  # the same tiny pair

    root = tmp_path_factory.mktemp("undo_all")
    _write_configs(root)
    return run_result_script(_SCRIPT, root)


def test_everything_was_applied_and_exercised(result):
    from conftest import sglang_under_test

    assert result["sglang"] == sglang_under_test()
    # every hook applied is visible on its class
    assert result["hooks"] == result["patched"] and result["switch_on"] and result["fc_norm_swapped"]
    changed = " ".join(result["changes"])
    for what in ("spec_utils:SIMULATE_ACC_LEN", "LlamaModel.fc_norm", "EagleDraftWorker.init_attention_backends"):
        assert what in changed
    if result["sglang"] == "0.5.17":
        # 2 marker, 6 timing, 3 checks, 4 draft_tp, 4 triton_draft, 1 step_timing, 1 adaptive_graphs,
        # 1 simulate_acceptance (0.5.23: adaptive_graphs installs nothing)
        assert result["hooks"] == 22 and "draft_tp" in result["features"]
        assert result["inside"] == [True, True, True] and result["worker_swapped"] == [True, True]
        assert "EagleDraftWorker.ps" in changed and "EagleDraftWorker.draft_tp_context" in changed
    else:  # draft_tp's 0.5.17 plumbing is not driven here (module docstring)
        assert "draft_tp" not in result["features"]
        assert {"marker", "timing", "checks", "triton_draft", "step_timing"} <= set(result["features"])


def test_undo_restores_functions_globals_attributes_and_storage(result):
    assert result["left"] == [0, 0] and result["undone"] == result["hooks"] + len(result["changes"])
    assert result["functions_changed"] == []
    assert result["globals_changed"] == [] and result["globals_added"] == []
    assert result["storage_changed"] == []     # each fc_norm weight has its own storage again
    assert result["values_changed"] == []      # ...holding the value written while it was a view
    assert result["marks_left"] == [] and result["worker_restored"]
