"""The opt-in adaptive_graphs feature on the real SGLang of this run (tests/run_cpu.sh runs the file on
0.5.17 and on 0.5.23): inside SGLang's own `EAGLEWorkerV2._override_worker_state` (the override
build_adaptive_runtime_state captures a candidate's graphs in), the width the draft-extend graph
runner sizes its capture with, as that runner calls it, with and without the feature.

Real: ServerArgs, the published runtime context, `_override_worker_state`, spec_utils'
`resolve_num_tokens_per_req` and the runner module's by-name copy of it, the hook registry. Not real: the worker is made without its
`__init__` (GPU) and its draft worker is a namespace holding the attributes the override saves and
restores (no graphs are captured on CPU).
"""
from __future__ import annotations

import json

import pytest
from conftest import sglang_under_test

# whether adaptive_graphs installs nothing: 0.5.23 captures each candidate's draft-extend at its own width
NOTHING_TO_DO = {"0.5.17": False, "0.5.23": True}

SCRIPT = r"""
import contextlib, inspect, json, os, sys, types
root = sys.argv[1]
from sglang.srt import runtime_context as rc
from sglang.srt.server_args import ServerArgs
sa = ServerArgs(model_path=os.path.join(root, "target"), speculative_algorithm="EAGLE3",
                speculative_draft_model_path=os.path.join(root, "plain"), device="cpu",
                speculative_adaptive=True, speculative_num_steps=7, speculative_eagle_topk=1,
                speculative_num_draft_tokens=8)  # 7: a candidate of SGLang's default config on both
rc.publish(sa, role="test")
from sglang.srt.speculative import eagle_draft_extend_cuda_graph_runner as runner_mod
from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
from sglang_patches import compat
from sglang_patches.server.hooks import REGISTRY, is_patched
from sglang_patches.server.patches import adaptive_graphs

kw = {"phase": "draft_extend"}
if "server_args" in inspect.signature(runner_mod.resolve_num_tokens_per_req).parameters:
    kw["server_args"] = sa  # 0.5.17's runner passes its model runner's server_args
w = object.__new__(EAGLEWorkerV2)
w.speculative_num_steps, w.speculative_num_draft_tokens = 7, 8
names = ("speculative_num_steps", "speculative_num_draft_tokens", "draft_attn_backend", "draft_extend_attn_backend",
         "cuda_graph_runner", "cuda_graph_runner_for_draft_extend")
w._draft_worker = types.SimpleNamespace(**{n: None for n in names}, _rebuild_topk1_chain_buffers=lambda: None,
                                        draft_runner=types.SimpleNamespace(draft_attn_backend=None, attn_backend=None))

def widths():
    out = {"start": runner_mod.resolve_num_tokens_per_req(**kw)}
    with w._override_worker_state(3, 4):
        out["candidate_s3"] = runner_mod.resolve_num_tokens_per_req(**kw)
        out["candidate_s3_topk"] = runner_mod.resolve_num_tokens_per_req(**{**kw, "phase": "draft_decode"})
        out["candidate_s3_verify"] = runner_mod.resolve_num_tokens_per_req(  # other phases: SGLang's answer
            **{**kw, "phase": "target_verify", "spec_algorithm": SpeculativeAlgorithm.from_string("EAGLE3")})
    out["after"] = runner_mod.resolve_num_tokens_per_req(**kw)
    return out

result = {"stock": widths(), "contact": compat.current().ADAPTIVE_EXTEND_WIDTH is not None}
hooks = REGISTRY.apply(adaptive_graphs.specs())
result["hooks"] = [h.describe() for h in hooks]
result["patched_binding"] = is_patched(runner_mod.resolve_num_tokens_per_req)
from sglang.srt.speculative import spec_utils
result["spec_utils_patched"] = is_patched(spec_utils.resolve_num_tokens_per_req)
result["with_feature"] = widths()
REGISTRY.undo()
result["undone"] = not (is_patched(runner_mod.resolve_num_tokens_per_req)
                       or is_patched(spec_utils.resolve_num_tokens_per_req))
result["after_undo"] = widths()
print("RESULT " + json.dumps(result))
"""


LATE_IMPORT = r"""
import json, sys
from sglang.srt.speculative import spec_utils
from sglang_patches import compat
from sglang_patches.server.hooks import REGISTRY, is_patched
from sglang_patches.server.patches import adaptive_graphs
from sglang_patches.server.timing import hooks  # noqa: F401 - nothing else of SGLang imported yet
late = "sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner"
before = late in sys.modules
REGISTRY.apply(adaptive_graphs.specs())
import importlib
runner_mod = importlib.import_module(late)  # imports the function by name: copies the wrapper
copied = is_patched(runner_mod.resolve_num_tokens_per_req)
REGISTRY.undo()
print("RESULT " + json.dumps({"before": before, "copied": copied,
                              "restored": not is_patched(runner_mod.resolve_num_tokens_per_req),
                              "contact": compat.current().ADAPTIVE_EXTEND_WIDTH is not None}))
"""


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    pytest.importorskip("sglang")
    from test_draft_backend_model import _write_configs, run_result_script

    root = tmp_path_factory.mktemp("adaptive_graphs")
    _write_configs(root)
    return run_result_script(SCRIPT, root)


def test_each_candidate_is_captured_at_its_own_width_with_the_feature(result):
    got = dict(result["with_feature"])
    assert got.pop("candidate_s3_verify") == result["stock"]["candidate_s3_verify"], json.dumps(result)
    assert got == {"start": 8, "candidate_s3": 4, "candidate_s3_topk": 1, "after": 8}, json.dumps(result)


def test_stock_width_is_what_compat_declares(result):
    """0.5.17: the start's width inside the candidate's override (eager draft-extend; the contact
    exists and one hook is installed); 0.5.23: the candidate's width already, and no hook."""
    from sglang_patches import compat

    stock = result["stock"]
    assert stock["start"] == 8 and stock["after"] == 8 and stock["candidate_s3_topk"] == 1
    if compat.current().ADAPTIVE_SWAPPED_EXTEND_GRAPHS:
        assert stock["candidate_s3"] == 4 and not result["contact"] and result["hooks"] == []
        assert not result["patched_binding"]
    else:
        assert stock["candidate_s3"] == 8 and result["contact"] and len(result["hooks"]) == 1
        assert result["patched_binding"] and result["spec_utils_patched"]  # the runner's by-name copy rebound


def test_undo_restores_sglangs_function(result):
    assert result["undone"] and result["after_undo"] == result["stock"]


def test_the_feature_is_opt_in_and_named_in_the_patches_help():
    from sglang_patches.launch_args import add_overlay_args
    from sglang_patches.vocab.overlay_config import FEATURES, OPTIONAL_FEATURES, parse_patch_list
    import argparse

    assert "adaptive_graphs" in OPTIONAL_FEATURES and "adaptive_graphs" not in FEATURES
    assert "adaptive_graphs" not in parse_patch_list("all")
    assert "adaptive_graphs" in parse_patch_list("all,adaptive_graphs")
    ap = argparse.ArgumentParser()
    add_overlay_args(ap)
    assert "adaptive_graphs" in ap.format_help() and "all,-adaptive_graphs" in ap.format_help()


@pytest.mark.parametrize("patches, sglang_flags, added", [
    ("all", ["--speculative-adaptive"], True),
    ("all", ["--speculative-num-steps", "5"], False),  # no adaptive server: nothing to fix
    ("all,-adaptive_graphs", ["--speculative-adaptive"], False),  # the opt-out
    ("-adaptive_graphs,all", ["--speculative-adaptive"], True),  # all after the drop: as parse_patch_list reads it
    ("marker,timing", ["--speculative-adaptive"], False),  # an explicit list is taken as written
    ("none", ["--speculative-adaptive"], False),
    ("all,none", ["--speculative-adaptive"], False),  # read in order, as parse_patch_list reads it
    ("none,all", ["--speculative-adaptive"], True),
])
def test_launch_adds_it_to_all_under_speculative_adaptive(patches, sglang_flags, added):
    from sglang_patches.launch_args import overlay_config, split_overlay_args, with_adaptive_graphs

    ns, rest = split_overlay_args([f"--patches={patches}", *sglang_flags])
    cfg = with_adaptive_graphs(overlay_config(ns), ns.patches, rest)
    assert ("adaptive_graphs" in cfg.patches) is added
    assert cfg.patches.count("adaptive_graphs") <= 1
    again = with_adaptive_graphs(cfg, ns.patches, rest)  # listed already: not twice
    assert again.patches == cfg.patches


def test_launch_print_patches_under_speculative_adaptive_lists_the_hook(capsys):
    """`python -m sglang_patches.launch --print-patches --speculative-adaptive`: the feature's hook on
    0.5.17, its nothing-to-do line on 0.5.23 (real SGLang's targets)."""
    pytest.importorskip("sglang")
    from sglang_patches import compat, launch

    assert launch.main(["--print-patches", "--speculative-adaptive"]) == 0
    out = capsys.readouterr().out
    assert "features: marker, timing, checks, adaptive_graphs" in out
    if NOTHING_TO_DO[sglang_under_test()]:
        assert "adaptive_graphs: nothing to do on this SGLang" in out
    else:
        assert "resolve_num_tokens_per_req" in out


def test_a_module_importing_it_after_the_hook_is_restored_by_undo(tmp_path):
    """The draft-extend runner may be imported after the hook (a server with this feature alone): its
    by-name copy is then the wrapper, and undo must put SGLang's function back there too."""
    pytest.importorskip("sglang")
    from test_draft_backend_model import run_result_script

    r = run_result_script(LATE_IMPORT, tmp_path)
    assert r["contact"] is not NOTHING_TO_DO[sglang_under_test()]
    if not r["contact"]:  # 0.5.23: nothing is installed
        assert not r["copied"] and r["restored"]
        return
    assert not r["before"] and r["copied"] and r["restored"], r


def test_patches_says_when_the_feature_has_nothing_to_do():
    """`sglang-patches patches --patches adaptive_graphs`: its hook on 0.5.17; on 0.5.23 a line saying why
    there is none (not a silent 0)."""
    import subprocess
    import sys

    from sglang_patches import compat

    r = subprocess.run([sys.executable, "-m", "sglang_patches", "patches", "--patches", "adaptive_graphs"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    if NOTHING_TO_DO[sglang_under_test()]:
        assert "adaptive_graphs: nothing to do on this SGLang" in r.stdout and "0 hooks" in r.stdout
    else:
        assert "resolve_num_tokens_per_req" in r.stdout and "nothing to do" not in r.stdout
