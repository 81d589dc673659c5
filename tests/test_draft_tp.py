"""draft_tp, the CPU-checkable parts: group layout, weight re-sharding, launcher validation, which
patch serves which compat file, the contact points of both versions against 0.5.23's sources
(static), and, for sglang 0.5.17 only, its hook targets and its group plumbing run with gloo in
subprocesses (world size 1 and 2). Real EagleDraftWorkers on gloo ranks, both versions:
test_draft_tp_ranks.py. Nothing here proves the GPU path."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_sglang

from sglang_patches.server.draft_tp import layout, refusal_for
from sglang_patches.errors import PatchTargetError, UserError
from sglang_patches.vocab.overlay_config import FEATURES, OPTIONAL_FEATURES, OverlayConfig, parse_patch_list

REPO = Path(__file__).resolve().parents[1]
ONLY_0517 = needs_sglang("0.5.17", why="0.5.17's draft TP plumbing (EagleDraftWorker.__init__(ps), "
                                        "small_group_context over _TP/_ATTN_TP, initialize_model_parallel(tp)); "
                                        "both versions build the real EagleDraftWorker in test_draft_tp_ranks.py")
SITE_0523 = os.environ.get("SGP_SGLANG_0523_SITE", str(REPO / ".venv-test" / "sglang-0523"))
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
for _k in ("SGLANG_PATCHES_CONFIG", "SGLANG_PATCHES_ENABLE", "SGLANG_PATCHES_ALLOW_UNSUPPORTED"):
    ENV.pop(_k, None)

# Runs in a fresh interpreter per rank: real sglang 0.5.17 parallel_state on gloo (CPU).
WORKER = r'''
import json, sys, types, torch
from sglang.srt.distributed import parallel_state as psm
from sglang.srt.runtime_context import get_parallel
from sglang_patches.server.draft_tp import layout, patch_0517, replicas
rank, world, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
psm.init_distributed_environment(world_size=world, rank=rank, distributed_init_method=f"tcp://127.0.0.1:{port}",
                                 local_rank=rank, backend="gloo")
psm.initialize_model_parallel(world, backend="gloo")
target = psm.get_tp_group()
group, member = patch_0517.create_draft_group(1, world)
out = {"member": [member.index, list(member.ranks), member.rank_in_group], "group_ranks": group.ranks,
       "group_size": group.world_size, "target_size": target.world_size}
with patch_0517.small_group_context(group):
    p = get_parallel()
    out["inside"] = [psm.get_tp_group() is group, psm.get_attn_tp_group() is group, p.tp_group is group,
                     p.attn_tp_group is group, p.tp_size, p.tp_rank, p.attn_tp_size]
    with patch_0517.small_group_context(group):
        out["reentrant"] = psm.get_tp_group() is group
out["restored"] = [psm.get_tp_group() is target, get_parallel().tp_size, psm._TP_STATE_PATCHED]
# full embedding from vocab shards (V=100 -> padded 128, 128/world rows per rank)
V, H = 100, 8
full = torch.arange(V * H, dtype=torch.float32).reshape(V, H)
padded = torch.cat([full, torch.zeros(128 - V, H)])
rows = 128 // world
shard = padded[rank * rows:(rank + 1) * rows].clone()
st = replicas.DraftTPState(1, world, rank, member, group, target, "broadcast")
module = types.SimpleNamespace(org_vocab_size=V, padding_size=64, num_added_embeddings=0)
kept = replicas.full_for_k(module, shard, st, "embedding")
out["embed_ok"] = [tuple(kept.shape) == (128, H), bool(torch.equal(kept[:V], full)), kept.requires_grad]
# tree sync: every rank ends with rank 0's tree
parent = torch.full((2, 3), 10 + rank, dtype=torch.int64)
top = torch.arange(6, dtype=torch.int64).reshape(2, 3) * (rank + 1)
tokens = torch.full((2, 4), 100 + rank, dtype=torch.int64)
probs = torch.full((2, 4), 0.5 + rank, dtype=torch.float32)
replicas.activate(st)
replicas.sync_tree("batch", "draft_input", parent, top, tokens, probs, target_worker=None)
out["synced"] = [int(parent[0, 0]), int(top[1, 2]), int(tokens[1, 3]), float(probs[0, 0])]
if world > 1:  # the broadcast path packs into a buffer allocated once per (dtype, device)
    buf = st.sync_buffers[(torch.int64, parent.device)]
    ptr, size = buf.data_ptr(), buf.numel()
    parent2, top2, tokens2 = parent + rank * 7, top + rank, tokens - rank
    replicas.sync_tree("batch", "draft_input", parent2, top2, tokens2, probs, target_worker=None)
    same = st.sync_buffers[(torch.int64, parent.device)]
    big = torch.full((5, 8), 40 + rank, dtype=torch.int64)
    replicas.sync_tree("batch", "draft_input", big, top2, tokens2, None, target_worker=None)
    grown = st.sync_buffers[(torch.int64, parent.device)]
    out["buffers"] = [size, same.data_ptr() == ptr, int(parent2[1, 1]), int(tokens2[0, 0]), grown.numel(),
                      int(big[4, 7])]
st.sync = "check"
try:
    replicas.sync_tree(None, None, torch.full((3,), rank), None, draft_tokens=torch.ones(2, dtype=torch.int64),
                          draft_probs=None)
    out["check"] = "passed"
except RuntimeError as exc:
    out["check"] = str(exc)
print("RESULT " + json.dumps(out), flush=True)
psm.destroy_model_parallel(); psm.destroy_distributed_environment()
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _popen(args):
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)


@pytest.fixture(scope="module")
def gloo_runs():
    """Start both gloo worlds at once (each rank imports sglang: the slow part), collect once."""
    procs = {}
    for world in (1, 2):
        port = str(_free_port())
        procs[world] = [_popen([sys.executable, "-c", WORKER, str(r), str(world), port]) for r in range(world)]
    out = {}
    for world, ps in procs.items():
        results = []
        for p in ps:
            stdout, stderr = p.communicate(timeout=120)
            line = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
            assert p.returncode == 0 and line, stderr[-3000:]
            results.append(json.loads(line[0][7:]))
        out[world] = results
    return out


# ---------------------------------------------------------------- layout

@pytest.mark.parametrize("n,k,expected", [
    (2, 1, [[0], [1]]), (2, 2, [[0, 1]]), (4, 1, [[0], [1], [2], [3]]), (4, 2, [[0, 1], [2, 3]]),
    (4, 4, [[0, 1, 2, 3]]), (8, 1, [[r] for r in range(8)]), (8, 2, [[0, 1], [2, 3], [4, 5], [6, 7]]),
    (8, 4, [[0, 1, 2, 3], [4, 5, 6, 7]]),
])
def test_draft_groups(n, k, expected):
    assert layout.draft_groups(n, k) == expected
    for rank in range(n):
        m = layout.membership(rank, n, k)
        assert rank in m.ranks and m.ranks[m.rank_in_group] == rank and m.size == k
        assert list(m.ranks) == expected[m.index]
    assert str(layout.membership(n - 1, n, k).index) in layout.describe(n - 1, n, k)


def test_draft_groups_two_target_tp_groups():
    # world 8 made of two TP-4 groups: blocks never straddle a TP group
    assert layout.draft_groups(8, 2, tp_size=4) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    with pytest.raises(ValueError, match="not a multiple"):
        layout.draft_groups(6, 1, tp_size=4)


@pytest.mark.parametrize("n,k,fragment", [
    (2, 3, "larger than --tp-size 2"), (4, 3, "does not divide --tp-size 4; use one of 1, 2, 4"),
    (8, 3, "does not divide"), (2, 0, "positive integer"), (1, 2, "larger than"),
])
def test_invalid_sizes(n, k, fragment):
    err = layout.validation_error(k, n, "EAGLE3")
    assert err and fragment in err and "\n" not in err
    with pytest.raises(ValueError, match=fragment.split(";")[0]):
        layout.draft_groups(n, k)


def test_validation_other_rules():
    assert layout.validation_error(None, 2) is None
    assert layout.validation_error(1, 2, "EAGLE3") is None and layout.validation_error(2, 4, "eagle") is None
    assert "EAGLE or EAGLE3" in layout.validation_error(1, 2, "NGRAM")
    assert "EAGLE or EAGLE3" in layout.validation_error(1, 2, None)
    assert "--enable-dp-attention" in layout.validation_error(2, 4, "EAGLE3", dp_attention=True)
    assert layout.validation_error(1, 4, "EAGLE3", dp_attention=True) is None
    assert "--pp-size" in layout.validation_error(1, 2, "EAGLE3", pp_size=2)


# ---------------------------------------------------------------- weight gather shapes

@pytest.mark.parametrize("vocab,h,n,k", [(128256, 64, 2, 1), (128256, 64, 4, 2), (32000, 16, 8, 4),
                                          (1000, 8, 2, 1), (1000, 8, 8, 2), (151936, 8, 4, 1)])
def test_gather_strip_reshard_matches_original(vocab, h, n, k):
    torch = pytest.importorskip("torch")
    full = torch.randn(vocab, h)
    padded_n = layout.padded_vocab(vocab, n)
    shards = list(torch.cat([full, torch.zeros(padded_n - vocab, h)]).chunk(n))
    for r in range(k):
        plan = layout.gather_plan(tuple(shards[0].shape), n, vocab, k=k, rank_in_group=r)
        gathered = torch.cat(shards)  # what all_gather_into_tensor returns, rank order
        assert tuple(gathered.shape) == plan.full_shape
        assert torch.equal(gathered[plan.strip], full)
        kept = layout.reshard(gathered, plan)
        assert tuple(kept.shape) == plan.kept_shape
        padded_k = torch.cat([full, torch.zeros(plan.padded_k - vocab, h)])
        assert torch.equal(kept, padded_k.chunk(k)[r])
    plan = layout.gather_plan(tuple(shards[0].shape), n, vocab, k=1)
    assert layout.reshard(gathered, plan) is gathered  # K=1, same padding: no copy


def test_padding_and_memory():
    assert layout.pad_vocab_size(128256) == 128256 and layout.pad_vocab_size(32001) == 32064
    assert layout.padded_vocab(1000, 8) == 1024
    assert layout.padded_vocab(100, 3, cpu=True) == 192  # vocab_parallel_embedding.py:262-266 (CPU)
    with pytest.raises(ValueError, match="not divisible"):
        layout.padded_vocab(100, 3)
    plan = layout.gather_plan((64128, 4096), 2, 128256, k=1)
    assert plan.gathered_bytes(2) == 128256 * 4096 * 2  # bf16, 128k x 4096: about 1 GB (internals doc, section 4)
    assert plan.extra_bytes(2) == 64128 * 4096 * 2
    assert layout.fmt_bytes(plan.gathered_bytes(2)) == "1002.00 MiB"
    with pytest.raises(ValueError, match="vocab-parallel"):
        layout.gather_plan((1000, 8), 2, 128256)


# ---------------------------------------------------------------- config / features

def test_draft_tp_is_optional_feature():
    assert "draft_tp" in OPTIONAL_FEATURES and "draft_tp" not in FEATURES
    assert parse_patch_list("all") == FEATURES
    assert parse_patch_list("all,draft_tp") == FEATURES + ("draft_tp",)
    assert parse_patch_list("draft_tp,-draft_tp") == ()
    cfg = OverlayConfig(patches=("timing", "draft_tp"), draft_tp_size=1)
    assert OverlayConfig.from_json(cfg.to_env()) == cfg and OverlayConfig().draft_tp_size is None
    for bad in ('{"draft_tp_size": 0}', '{"draft_tp_size": "2"}', '{"draft_tp_size": true}'):
        with pytest.raises(UserError, match="draft_tp_size"):
            OverlayConfig.from_json(bad)


@pytest.mark.parametrize("patches", ["draft_tp", "all,draft_tp"])
def test_draft_tp_patch_without_size_is_refused_in_one_line(patches):
    """Without --draft-tp-size the feature would silently replicate the drafter on every rank."""
    r = subprocess.run([sys.executable, "-m", "sglang_patches.launch", "--patches", patches, "--tp-size", "2",
                        "--model-path", "m"], capture_output=True, text=True, timeout=120, env=ENV)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "--patches draft_tp needs --draft-tp-size K" in lines[0] and "Traceback" not in r.stderr
    with pytest.raises(UserError, match="needs --draft-tp-size K"):  # the plugin / env path too
        OverlayConfig.from_json('{"patches": ["timing", "draft_tp"]}')


def test_no_refusal_on_covered_versions_and_a_compat_refusal_is_one_line(monkeypatch):
    from sglang_patches.compat import v0_5_23

    assert refusal_for("0.5.17") is None and refusal_for("0.5.23") is None
    assert "draft_tp" not in v0_5_23.FEATURE_REFUSED_FROM
    assert refusal_for("not installed") == "sglang is not installed"
    monkeypatch.setitem(v0_5_23.FEATURE_REFUSED_FROM, "draft_tp", ("0.5.23", "sglang {v} moved X"))
    why = refusal_for("0.5.23")
    assert why.startswith("the draft_tp feature (--draft-tp-size) cannot run on sglang 0.5.23: sglang 0.5.23 moved X")
    assert "\n" not in why and refusal_for("0.5.17") is None


def test_patch_module_per_compat_file():
    from sglang_patches import compat
    from sglang_patches.compat import v0_5_17, v0_5_23
    from sglang_patches.server.draft_tp import PATCHES, patch_0517, patch_0523, patch_module

    assert patch_module(v0_5_17) is patch_0517 and patch_module(v0_5_23) is patch_0523
    assert set(PATCHES) == set(compat.FILES)  # every registered compat file has a draft_tp patch
    assert compat.for_version("0.5.20") is v0_5_17 and patch_module(compat.for_version("0.5.23")) is patch_0523
    with pytest.raises(PatchTargetError, match="has no patch for"):
        patch_module(type("M", (), {"__name__": "sglang_patches.compat.v9_9_9"}))


def test_launcher_overlay_args():
    from sglang_patches.launch_args import overlay_config, split_overlay_args

    ns, rest = split_overlay_args(["--tp-size", "2", "--draft-tp-size", "1", "--model-path", "m"])
    assert rest == ["--tp-size", "2", "--model-path", "m"] and overlay_config(ns).draft_tp_size == 1


def test_check_draft_tp_in_process():
    from sglang_patches.launch import check_draft_tp

    ok = ["--tp-size", "2", "--speculative-algorithm", "EAGLE3"]
    check_draft_tp(None, [], need_algorithm=True)
    check_draft_tp(1, ok, need_algorithm=True)
    check_draft_tp(2, ["--tp", "4", "--speculative-algorithm", "EAGLE"], need_algorithm=True)
    check_draft_tp(1, ["--tp-size", "2"], need_algorithm=False)  # algorithm may come from --fixture
    for k, argv, frag in [(2, ["--speculative-algorithm", "EAGLE3"], "larger than --tp-size 1"),
                          (1, ["--tp-size", "2"], "EAGLE or EAGLE3"),
                          (2, ok + ["--enable-dp-attention"], "--enable-dp-attention")]:
        with pytest.raises(UserError, match=frag):
            check_draft_tp(k, argv, need_algorithm=True)


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory):
    from sglang_patches.offline.fixtures import build_fixture

    return build_fixture("tiny", tmp_path_factory.mktemp("fx") / "tiny")


@pytest.mark.parametrize("extra,fragment", [
    (["--draft-tp-size", "3", "--tp-size", "2"], "--draft-tp-size 3 is larger than --tp-size 2"),
    (["--draft-tp-size", "3", "--tp-size", "4"], "--draft-tp-size 3 does not divide --tp-size 4"),
    (["--draft-tp-size", "2"], "--draft-tp-size 2 is larger than --tp-size 1"),
    (["--draft-tp-size", "2", "--tp-size", "2", "--enable-dp-attention"], "--enable-dp-attention"),
    (["--draft-tp-size", "1", "--tp-size", "2", "--speculative-algorithm", "NGRAM"], "EAGLE or EAGLE3 (got NGRAM)"),
])
def test_launcher_refuses_bad_draft_tp(tiny_pair, extra, fragment):
    args = ["--model-path", str(tiny_pair.target), "--speculative-draft-model-path", str(tiny_pair.draft)]
    if "--speculative-algorithm" not in extra:
        args += ["--speculative-algorithm", "EAGLE3"]
    r = subprocess.run([sys.executable, "-m", "sglang_patches.launch", *args, *extra, "--device", "cpu"],
                       capture_output=True, text=True, env=ENV, cwd=REPO, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sglang-patches: error: ") and fragment in lines[0], lines


# ---------------------------------------------------------------- hook targets

@ONLY_0517
def test_specs_resolve_in_installed_0517():
    from sglang_patches.server.draft_tp import patch_0517
    from sglang_patches.server.hooks import REGISTRY, installed_sglang_version
    from sglang_patches.server.patches.catalog import specs_for

    assert installed_sglang_version() == "0.5.17"
    specs = specs_for(("draft_tp",))
    assert len(specs) == 4 and {s.feature for s in specs} == {"draft_tp"}
    REGISTRY.validate(specs)
    patch_0517._check_runtime_preconditions()  # the globals and fields small_group_context swaps exist
    assert REGISTRY.applied == []
    assert len(specs_for(FEATURES)) == 11  # the default set is unchanged


@ONLY_0517
def test_apply_rebinds_and_undoes_exactly():
    from sglang.srt.speculative import eagle_worker_common, eagle_worker_v2

    from sglang_patches.server.draft_tp import patch_0517, replicas
    from sglang_patches.server.hooks import REGISTRY, is_patched

    init = eagle_worker_v2.EagleDraftWorker.__dict__["__init__"]
    build = eagle_worker_common.build_eagle_verify_input
    assert eagle_worker_v2.build_eagle_verify_input is build
    hooks = REGISTRY.apply(patch_0517.specs())
    try:
        assert is_patched(eagle_worker_v2.EagleDraftWorker.__dict__["__init__"])
        assert is_patched(eagle_worker_v2.build_eagle_verify_input)  # the name draft() calls (rebind)
        assert replicas.STATE is None  # nothing active: the sync hook is a no-op
        eagle_worker_v2.build_eagle_verify_input.__wrapped__  # noqa: B018 - functools.update_wrapper
        # stock path of the around hooks: a worker without draft-TP state calls straight through
        calls = []
        fake = type("W", (), {})()
        patch_0517._alloc_around(lambda self, *a, **k: calls.append(("alloc", a, k)), fake, 1, x=2)
        patch_0517._init_lm_head_around(lambda self: calls.append("lm_head"), fake)
        assert calls == [("alloc", (1,), {"x": 2}), "lm_head"]
    finally:
        REGISTRY.undo(hooks)
    assert eagle_worker_v2.EagleDraftWorker.__dict__["__init__"] is init
    assert eagle_worker_v2.build_eagle_verify_input is build and REGISTRY.applied == []


def test_contacts_static_against_0523_sources():
    """0.5.17's draft_tp contacts are BAD on 0.5.23's sources (why it has a patch of its own) and
    0.5.23's are all OK. AST only: runs on either version under test."""
    if not os.path.isdir(os.path.join(SITE_0523, "sglang")):
        pytest.skip(f"sglang 0.5.23 sources not at {SITE_0523} (run tests/run_cpu.sh)")
    from sglang_patches.compat import v0_5_17, v0_5_23

    moved = {}
    for ct in v0_5_17.contacts():
        ok, detail = ct.check_static(SITE_0523)
        if ct.feature == "draft_tp" and not ok:
            moved[ct.path] = detail
    # 0.5.23: EagleDraftWorker.__init__ lost `ps` (DraftParallelLayout), draft_tp_context takes a layout,
    # patch_tensor_parallel_group requires owns_attention
    assert {"EagleDraftWorker.__init__", "draft_tp_context", "_PARALLEL_FIELDS", "EagleDraftWorker.draft_tp_context",
            "EagleDraftWorker.ps"} <= set(moved), moved
    assert "['ps'] missing" in moved["EagleDraftWorker.__init__"]
    ours = [ct for ct in v0_5_23.contacts() if ct.feature == "draft_tp"]
    bad = {ct.path: d for ct in ours for ok, d in [ct.check_static(SITE_0523)] if not ok}
    assert len(ours) >= 15 and bad == {}, bad
    hooked = {ct.path for ct in ours if ct.kind == "hook"}
    assert hooked == {"EagleDraftWorker.__init__", "resolve_draft_parallel_layout",
                      "EagleDraftWorker.alloc_memory_pool", "EagleDraftWorker._resolve_shared_embed_and_head",
                      "build_eagle_verify_input"}


# ---------------------------------------------------------------- real 0.5.17 plumbing on gloo

@ONLY_0517
def test_gloo_world_1(gloo_runs):
    (r,) = gloo_runs[1]
    assert r["member"] == [0, [0], 0] and r["group_ranks"] == [0] and r["group_size"] == 1
    assert r["inside"] == [True, True, True, True, 1, 0, 1] and r["reentrant"] is True
    assert r["restored"] == [True, 1, False]
    assert r["embed_ok"] == [True, True, False]
    assert r["synced"] == [10, 5, 100, 0.5] and r["check"] == "passed"  # TP1 target: nothing to sync


@ONLY_0517
def test_gloo_world_2_singleton_groups_gather_and_tree_sync(gloo_runs):
    r0, r1 = gloo_runs[2]
    assert r0["member"] == [0, [0], 0] and r1["member"] == [1, [1], 0]
    for r in (r0, r1):
        assert r["group_size"] == 1 and r["target_size"] == 2
        assert r["inside"] == [True, True, True, True, 1, 0, 1] and r["reentrant"] is True
        assert r["restored"] == [True, 2, False]
        assert r["embed_ok"] == [True, True, False]  # all-gathered over the target group, padding stripped
        assert r["synced"] == [10, 5, 100, 0.5]  # rank 1 now holds rank 0's tree
        # 20 int64 elements packed; the next cycle reuses the buffer; a bigger tree grows it once
        assert r["buffers"] == [20, True, 10, 100, 54, 40]
        assert "draft trees differ across target TP ranks [1]" in r["check"]
