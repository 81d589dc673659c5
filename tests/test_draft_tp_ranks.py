"""draft_tp on the real classes of the SGLang under test, in gloo worlds: TP 2 with --draft-tp-size 1
and TP 4 with --draft-tp-size 2, one subprocess per rank.

Each version has its own rank script, because each has its own draft-TP plumbing and the overlay its
own patch for it: tests/draft_tp_ranks_0517.py (0.5.17: the drafter re-grouped through
EagleDraftWorker.__init__(ps) and small_group_context) and tests/draft_tp_ranks_0523.py (0.5.23: a
DraftParallelLayout supplied through resolve_draft_parallel_layout). Both say what they mock and
why (tests/draft_tp_ranks_common.py). On every rank SGLang's real EagleDraftWorker is built stock and
with the hooks; the hooked drafter must sit on its K-rank group, get a KV pool of K ranks' heads and
the target embedding re-sharded for K, draft the same tokens as the stock TP-N drafter, take rank 0's
tree, and leave SGLang as it was after undo. Nothing here proves the GPU path.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_sglang, sglang_under_test

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = {"0.5.17": "draft_tp_ranks_0517.py", "0.5.23": "draft_tp_ranks_0523.py"}
WORLDS = ((2, 1), (4, 2))  # (target TP, --draft-tp-size)

pytestmark = needs_sglang(*SCRIPTS, why="each version's draft-TP plumbing has a rank script of its own")


def _env():
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": os.environ.get("PYTHONPATH", "") + os.pathsep + str(REPO)}
    for k in ("SGLANG_PATCHES_CONFIG", "SGLANG_PATCHES_ENABLE", "SGLANG_PATCHES_ALLOW_UNSUPPORTED"):
        env.pop(k, None)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_worlds(worlds: dict, timeout: float) -> dict:
    """Start every rank of every world at once (each imports sglang: the slow part), then collect each
    rank's RESULT line. `worlds`: key -> (target TP n, fixture root, --draft-tp-size k); returns key ->
    the ranks' results in rank order. Shared with tests/test_draft_tp_ranks_mla.py."""
    script = REPO / "tests" / SCRIPTS[sglang_under_test()]
    procs = {}
    for key, (n, root, k) in worlds.items():
        port = str(_free_port())
        procs[key] = [subprocess.Popen([sys.executable, str(script), str(r), str(n), port, str(root), str(k)],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                                       cwd=REPO) for r in range(n)]
    out = {}
    try:
        for key, ps in procs.items():
            results = []
            for p in ps:
                stdout, stderr = p.communicate(timeout=timeout)
                line = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
                assert p.returncode == 0 and line, stderr[-4000:]
                results.append(json.loads(line[0][7:]))
            out[key] = results
    finally:
        for ps in procs.values():
            for p in ps:
                if p.poll() is None:
                    p.kill()
    return out


@pytest.fixture(scope="module")
def worlds(tmp_path_factory):
    """Both worlds on the tiny fixture, started at once, collected once."""
    from sglang_patches.offline.fixtures import build_fixture

    fx = build_fixture("tiny", tmp_path_factory.mktemp("fx") / "tiny")
    return run_worlds({(n, k): (n, fx.root, k) for n, k in WORLDS}, timeout=400)


@pytest.mark.parametrize("n,k", WORLDS)
def test_drafter_on_k_rank_groups(worlds, n, k):
    for rank, r in enumerate(worlds[(n, k)]):
        start = rank // k * k
        # stock, without dp-attention: the drafter on the target's TP-N group
        assert r["stock_scope"] == [n, rank, n, list(range(n))]
        # hooked: SGLang's own __init__ built the drafter inside the K-rank group
        assert r["ours_scope"] == [k, rank - start, k, list(range(start, start + k))]
        assert r["ours_layout"][:4] == [True, k, list(range(start, start + k)), True]
        if sglang_under_test() == "0.5.23":
            assert r["stock_layout"] is True  # stock resolver: no group of its own
        else:
            assert r["ours_layout"][4] is True  # the worker holds the target's ParallelState again


@pytest.mark.parametrize("n,k", WORLDS)
def test_kv_pool_and_embedding_for_k(worlds, n, k):
    heads = 2  # the tiny drafter's kv heads (replicated when TP > heads)
    for r in worlds[(n, k)]:
        assert r["stock_calls"] == [["alloc", n, max(1, heads // n)]]
        assert r["ours_calls"] == [["alloc", k, max(1, heads // k)]]  # alloc_memory_pool ran in the K scope
        assert r["embed_shape"] == [8192 // k, 256]  # the target's 8192 x 256 embedding, re-sharded for K
        if k == 1:  # one rank: the drafter's weights are the full drafter's; the stock TP-N drafter's are shards
            assert r["weights_vs_full"] == [11, []]
            assert any("o_proj" in b for b in r["stock_weights_vs_full"][1])


@pytest.mark.parametrize("n,k", WORLDS)
def test_drafts_token_identical_to_stock(worlds, n, k):
    results = worlds[(n, k)]
    for r in results:
        assert r["tokens_equal"] is True, r
        assert r["max_logit_diff"] < 1e-4  # fp32; TP-N and TP-K reduce in different orders
        assert len({t[0] for t in r["tokens"]}) > 1  # a real draft: positions disagree
    assert all(r["tokens"] == results[0]["tokens"] for r in results)  # every replica drafts the same


@pytest.mark.parametrize("n,k", WORLDS)
def test_tree_broadcast_plan_checks_and_undo(worlds, n, k):
    for r in worlds[(n, k)]:
        # through eagle_worker_v2's own name (rebound): rank 0's tree everywhere, then SGLang's idle input
        assert r["synced"] == [10, 5, 100, "EagleVerifyInput"]
        stock_k, bad_algo, bad_k = r["plans"]
        assert stock_k is None  # K = N: the stock drafter
        assert "EAGLE or EAGLE3 (got NGRAM)" in bad_algo
        assert "--draft-tp-size 3" in bad_k and "\n" not in bad_k
        assert r["undone"] == [True] * 5  # every hooked name is SGLang's own again, registry empty
