"""--draft-tp-size on a DeepSeek-V3 target (MLA attention, MoE), on the real classes of the SGLang under
test, in a gloo world of 2 ranks: target TP 2, --draft-tp-size 1, with both EAGLE-3 heads of the Kimi-K2
family: the Llama head (LlamaForCausalLMEagle3, as `kimi-k2-mla`) and SGLang's MLA head
(Eagle3DeepseekV2ForCausalLM, as `kimi-k2-mla-mlahead`).

The rank scripts are tests/test_draft_tp_ranks.py's (one per version); they read the pair from the
configs. The configs here are the fixtures' (`deepseek_v3_target`, `eagle3_drafter`,
`mla_eagle3_drafter`) at CPU widths: 256 wide, 4 heads, q_lora 128, kv_lora 64, rope 32, nope 32, v 32,
8 layers (1 dense + 7 MoE, so SGLang's default capture ids [2, 4, 5] are distinct), 4 routed experts
top-2 with one shared expert, sigmoid noaux_tc routing, Kimi-K2's YaRN rope, vocab 8192. What is mocked and why
(tests/draft_tp_ranks_common.py): the draft TpModelWorker and the attention kernel of the drafter
(SelfOnlyAttention / SelfOnlyMLA), because they need CUDA; the target runs no forward (the drafter
takes its embedding, the aux hidden states are seeded), so its MoE is built but never run.
The draft worker is SGLang's real EagleDraftWorker, built stock (drafter at TP 2) and with the overlay's
draft_tp hooks (drafter at TP 1); the TP-1 drafter's weights must be the full drafter's and one draft
step must give the stock drafter's tokens.
"""
from __future__ import annotations

import json

import pytest
from conftest import needs_sglang
from test_draft_tp_ranks import SCRIPTS, run_worlds

pytestmark = needs_sglang(*SCRIPTS, why="each version's draft-TP plumbing has a rank script of its own")
N, K = 2, 1
HEADS = ("llama", "mla")


def _configs(root, head):
    from sglang_patches.offline.fixtures.specs import (_KIMI_K2_ROPE, deepseek_v3_target, eagle3_drafter,
                                                        llama_target, mla_eagle3_drafter)

    target = deepseek_v3_target(hidden=256, layers=8, heads=4, q_lora=128, kv_lora=64, rope_dim=32, nope_dim=32,
                                v_dim=32, dense_intermediate=512, first_dense=1, experts=4, top_k=2,
                                moe_intermediate=128, shared_experts=1, n_group=1, topk_group=1,
                                routed_scaling=2.827, vocab=8192, max_pos=4096,
                                rope_scaling=_KIMI_K2_ROPE)  # Kimi-K2's YaRN (SGLang's CPU MLA rope needs one)
    if head == "mla":
        draft = mla_eagle3_drafter(target, intermediate=512, draft_vocab=4096)
    else:  # the tiny Llama head of the same width and vocab (kimi-k2-mla pairs kimi-k2-shape's head likewise)
        draft = eagle3_drafter(llama_target(hidden=256, layers=8, heads=4, kv_heads=2, intermediate=768,
                                            vocab=8192, max_pos=4096), draft_vocab=4096)
    for name, cfg in (("target", target), ("draft", draft)):
        (root / name).mkdir(parents=True)
        (root / name / "config.json").write_text(json.dumps(cfg))
    return target, draft


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """Both heads' worlds started at once (each rank imports sglang: the slow part), collected once."""
    worlds = {}
    for head in HEADS:
        root = tmp_path_factory.mktemp(head)
        _configs(root, head)
        worlds[head] = (N, root, K)
    return run_worlds(worlds, timeout=500)


@pytest.mark.parametrize("head", HEADS)
def test_drafter_on_its_own_rank(ranks, head):
    for rank, r in enumerate(ranks[head]):
        assert r["stock_scope"] == [N, rank, N, list(range(N))]  # stock: the drafter on the target's TP group
        assert r["ours_scope"] == [K, 0, K, [rank]]  # hooked: SGLang's own __init__ built it on this rank alone
        assert r["ours_layout"][:4] == [True, K, [rank], True]


@pytest.mark.parametrize("head", HEADS)
def test_kv_pool_and_embedding_for_one_rank(ranks, head):
    for r in ranks[head]:
        assert r["stock_calls"][0][:2] == ["alloc", N] and r["ours_calls"][0][:2] == ["alloc", K]
        assert r["embed_shape"] == [8192, 256]  # the DeepSeek-V3 target's 8192 x 256 embedding, whole


@pytest.mark.parametrize("head", HEADS)
def test_drafter_weights_are_the_full_drafters(ranks, head):
    expected = {"llama": 11, "mla": 15}[head]  # each head's parameters, the shared embedding included
    for r in ranks[head]:
        n, bad = r["weights_vs_full"]
        assert bad == [] and n == expected, (n, bad)
        n, bad = r["stock_weights_vs_full"]  # the same check on the stock TP-2 drafter: its shards differ
        assert n == expected and any("o_proj" in b for b in bad) and any("down_proj" in b for b in bad), bad


@pytest.mark.parametrize("head", HEADS)
def test_drafts_token_identical_to_stock(ranks, head):
    results = ranks[head]
    for r in results:
        assert r["tokens_equal"] is True, r
        assert r["max_logit_diff"] < 1e-4  # fp32; TP-2 and TP-1 reduce in different orders
        assert len({t[0] for t in r["tokens"]}) > 1  # a real draft: positions disagree
    assert results[0]["tokens"] == results[1]["tokens"]  # both replicas draft the same


@pytest.mark.parametrize("head", HEADS)
def test_tree_broadcast_and_undo(ranks, head):
    for r in ranks[head]:
        assert r["synced"] == [10, 5, 100, "EagleVerifyInput"]  # rank 0's tree on every rank
        assert r["undone"] == [True] * 5
